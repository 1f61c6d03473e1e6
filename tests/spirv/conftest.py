"""Fixtures for tests/spirv: the corpus, built once per session (see spirv_corpus.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from spirv_corpus import (GLSLANG, SPIRV_AS, SPIRV_OPT, asm_sources, corpus_name, glsl_sources, run,
                          target_env)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Corpus module name -> .spv path (names: source path with '/' -> '__', '.opt' optimised, '.v12' built for Vulkan 1.2)."""
    if GLSLANG is None or SPIRV_AS is None or SPIRV_OPT is None:
        pytest.skip("glslangValidator or SPIRV-Tools missing: cannot build the corpus")
    out = tmp_path_factory.mktemp("spirv_corpus")
    modules: dict[str, Path] = {}
    for src in glsl_sources():
        name = corpus_name(src)
        spv = out / f"{name}.spv"
        run([GLSLANG, "-V", "--target-env", "vulkan1.0", str(src), "-o", str(spv)])
        modules[name] = spv
        opt = out / f"{name}.opt.spv"
        run([SPIRV_OPT, "-O", str(spv), "-o", str(opt)])
        modules[f"{name}.opt"] = opt
        v12 = out / f"{name}.v12.spv"  # SPIR-V 1.5: interfaces list every global
        run([GLSLANG, "-V", "--target-env", "vulkan1.2", str(src), "-o", str(v12)])
        modules[f"{name}.v12"] = v12
    for src in asm_sources():
        name = corpus_name(src)
        spv = out / f"{name}.spv"
        run([SPIRV_AS, "--target-env", target_env(src), str(src), "-o", str(spv)])
        modules[name] = spv
    return modules



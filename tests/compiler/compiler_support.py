"""Helpers for tests/compiler: assembling SPIR-V text and compiling GLSL at test time.

Imported by name (the tests' folder is on sys.path); the fixtures are in conftest.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str | None:
    local = VENV_BIN / name
    return str(local) if local.exists() else shutil.which(name)


GLSLANG = shutil.which("glslangValidator")
SPIRV_AS = _tool("spirv-as")
SPIRV_OPT = _tool("spirv-opt")


def assemble(text: str, tmp_path: Path, name: str = "m") -> bytes:
    if SPIRV_AS is None:
        pytest.skip("spirv-as missing")
    src = tmp_path / f"{name}.spvasm"
    out = tmp_path / f"{name}.spv"
    src.write_text(text)
    subprocess.run([SPIRV_AS, "--target-env", "vulkan1.0", str(src), "-o", str(out)], check=True,
                   capture_output=True)
    return out.read_bytes()


def glsl(source: str, stage: str, tmp_path: Path, optimize: bool = True, name: str = "s") -> bytes:
    if GLSLANG is None or SPIRV_OPT is None:
        pytest.skip("glslangValidator or spirv-opt missing")
    src = tmp_path / f"{name}.{stage}"
    out = tmp_path / f"{name}.spv"
    src.write_text(source)
    proc = subprocess.run([GLSLANG, "-V", str(src), "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if optimize:
        opt = tmp_path / f"{name}.opt.spv"
        subprocess.run([SPIRV_OPT, "-O", str(out), "-o", str(opt)], check=True, capture_output=True)
        out = opt
    return out.read_bytes()

"""Fixtures of tests/compiler (helpers in compiler_support.py)."""

from __future__ import annotations

import pytest
from compiler_support import assemble, glsl


@pytest.fixture
def asm(tmp_path):
    return lambda text, name="m": assemble(text, tmp_path, name)


@pytest.fixture
def compile_glsl(tmp_path):
    return lambda source, stage, optimize=True, name="s": glsl(source, stage, tmp_path, optimize, name)

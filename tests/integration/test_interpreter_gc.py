"""vkapi/interpreter.py: start-up objects are frozen (gc.freeze) in the shims' own interpreter only.

A C program (vulkaninfo) runs the shims in an interpreter cffi starts for them: both shims say at
install that they froze. A Python program runs them in its own interpreter, whose objects must
stay collectable: nothing is frozen there.
"""
from __future__ import annotations

import gc
import re
import shutil

import pytest
from integration_support import PYTHON, REPO, run

from tessera.vkapi import interpreter

FROZE = "start-up objects frozen"


def test_the_test_interpreter_is_an_applications_and_is_left_alone():
    before = gc.get_freeze_count()
    assert not interpreter.ours() and not interpreter.freeze_installed()
    assert gc.get_freeze_count() == before


def test_a_c_program_gets_its_start_up_frozen_a_python_program_does_not(tessera_env):
    if shutil.which("vulkaninfo") is None:
        pytest.fail("vulkaninfo missing: `make setup` installs vulkan-tools")
    env = dict(tessera_env, TESSERA_LOG="info")
    c_app = run(["vulkaninfo", "--summary"], env)
    assert c_app.returncode == 0, c_app.stderr
    froze = sorted(re.search(r"\] (\w+) INFO: ", line).group(1) for line in c_app.stderr.splitlines() if FROZE in line)
    assert froze == ["icd", "layer"], c_app.stderr
    py_app = run([PYTHON, REPO / "examples" / "compute_collatz.py"], env)
    assert py_app.returncode == 0, py_app.stderr
    assert "layer installed" in py_app.stderr and FROZE not in py_app.stderr

"""Program shapes that hung or crashed in the shims' embedded Python (issue #16, items 1-3),
and Python applications on interpreters other than the project's.

Each runs tests/integration/apps/program_shapes.py through the real loader with the layer and
the emulated driver; the app reaches its last line and exits 0 only if nothing hung or crashed.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from integration_support import PYTHON, REPO, run

APP = REPO / "tests" / "integration" / "apps" / "program_shapes.py"
MALI = "Mali-G720 (emulated)"


@pytest.fixture(scope="module")
def late_destroy_lib(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("late") / "liblate_destroy.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(APP.parent / "c" / "late_destroy.c")], check=True)
    return out


def _shape(python: str, shape: str, env, *extra) -> subprocess.CompletedProcess:
    # A hang is the failure this guards against: the timeout turns it into an error, not a wait.
    return run([python, APP, shape, *extra], env, timeout=120)


def test_capsule_lookup_before_first_vulkan_call_does_not_hang(tessera_env):
    out = _shape(PYTHON, "capsule", tessera_env)
    assert out.returncode == 0, out.stderr
    assert f"program_shapes capsule: {MALI}" in out.stdout


def test_destroy_instance_after_interpreter_shutdown_exits_0(tessera_env, late_destroy_lib):
    out = _shape(PYTHON, "late-destroy", tessera_env, late_destroy_lib)
    assert out.returncode == 0, out.stderr
    assert f"program_shapes late-destroy: {MALI}" in out.stdout
    assert "vkDestroyInstance returned after interpreter shutdown" in out.stderr


def test_modules_inspected_after_last_instance_destroyed(tessera_env):
    out = _shape(PYTHON, "after-last-instance", tessera_env)
    assert out.returncode == 0, out.stderr
    assert f"program_shapes after-last-instance: {MALI}" in out.stdout


def _other_interpreter(same_minor: bool) -> str | None:
    """A CPython on this machine other than the project's: the same 3.x, or another one."""
    candidates = ["/usr/bin/python3", "/usr/bin/python3.11"] if same_minor else []
    if not same_minor:
        candidates += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.*/bin/python3"))]
        candidates += [shutil.which(f"python3.{m}") or "" for m in (10, 12, 13)]
    for path in candidates:
        if not path or not Path(path).exists():
            continue
        probe = subprocess.run([path, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
        same = probe.stdout.strip() == str(tuple(sys.version_info[:2]))
        if probe.returncode == 0 and same == same_minor and Path(path).resolve() != Path(PYTHON).resolve():
            return path
    return None


def test_same_version_foreign_interpreter_runs_on_the_mali(tessera_env, late_destroy_lib):
    """Debian's /usr/bin/python3 is statically linked and has its own (older) cffi backend."""
    python = _other_interpreter(same_minor=True)
    if python is None:
        pytest.skip("no other CPython of the project's version on this machine")
    out = _shape(python, "capsule", tessera_env)
    assert out.returncode == 0, out.stderr
    assert f"program_shapes capsule: {MALI}" in out.stdout
    out = _shape(python, "late-destroy", tessera_env, late_destroy_lib)
    assert out.returncode == 0, out.stderr


def test_other_python_version_is_refused_with_the_fix(tessera_env):
    python = _other_interpreter(same_minor=False)
    if python is None:
        pytest.skip("no CPython of another version on this machine")
    out = _shape(python, "capsule", tessera_env)
    assert out.returncode != 0
    wanted = f"but the shim was built for Python {sys.version_info[0]}.{sys.version_info[1]}"
    assert wanted in out.stderr
    assert "Run the application with a Python" in out.stderr

"""The shims' embedded interpreter whatever Python environment the user has active (issue #31).

In a process without Python (a C or C++ program) the shims start the project's interpreter from
what the build recorded (vkapi/shim.py, tessera_start_own_python), isolated from the environment:
an activated virtual environment or another Python first on PATH, PYTHONHOME and PYTHONPATH must
not hand it another environment's site-packages or standard library. A Python program keeps its
own interpreter serving the shims, whatever its PATH says.

Each test runs a real program (vulkaninfo, the C example, a Python example) through the real loader
with the layer and the emulated driver, in the environment a user would have.
"""
from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from integration_support import PYTHON, REPO, run

MALI = "Mali-G720 (emulated)"
CFFI_FAILURE = "Failed to initialize the Python-CFFI embedding logic"


@pytest.fixture(scope="module")
def other_venv(tmp_path_factory) -> Path:
    """A virtual environment of the system's Python (not the project's), without pip: what
    `source other/bin/activate` puts first on PATH."""
    system_python = Path("/usr/bin/python3")
    if not system_python.exists():
        pytest.skip("no /usr/bin/python3 to make another environment with")
    root = tmp_path_factory.mktemp("other") / "venv"
    subprocess.run([str(system_python), "-m", "venv", "--without-pip", str(root)], check=True)
    return root


def _activated(env: dict, root: Path) -> dict:
    """`env` as `source ROOT/bin/activate` leaves it."""
    return dict(env, PATH=f"{root / 'bin'}:{env['PATH']}", VIRTUAL_ENV=str(root))


def _other_minor_python() -> Path | None:
    for root in sorted(Path.home().glob(".pyenv/versions/3.*")):
        python = root / "bin" / "python3"
        probe = subprocess.run([str(python), "-c", "import sys; print(sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() != str(tuple(sys.version_info[:2])):
            return python
    return None


def _assert_on_the_mali(out: subprocess.CompletedProcess) -> None:
    assert out.returncode == 0, out.stdout + out.stderr
    assert CFFI_FAILURE not in out.stderr, out.stderr
    assert "skip this ICD" not in out.stderr, out.stderr
    assert f"deviceName         = {MALI}" in out.stdout, out.stdout


def test_c_program_with_another_venv_activated(tessera_env, other_venv):
    _assert_on_the_mali(run(["vulkaninfo", "--summary"], _activated(tessera_env, other_venv)))


def test_c_program_with_pythonhome_and_pythonpath_set(tessera_env, tmp_path):
    """PYTHONHOME of another installation mixed our libpython with its standard library."""
    env = dict(tessera_env, PYTHONHOME="/usr", PYTHONPATH=str(tmp_path))
    (tmp_path / "_cffi_backend.py").write_text("raise ImportError('a planted module on PYTHONPATH was imported')\n")
    _assert_on_the_mali(run(["vulkaninfo", "--summary"], env))


def test_c_program_with_another_python_version_first_on_path(tessera_env):
    python = _other_minor_python()
    if python is None:
        pytest.skip("no CPython of another minor version on this machine")
    env = dict(tessera_env, PATH=f"{python.parent}:{tessera_env['PATH']}")
    _assert_on_the_mali(run(["vulkaninfo", "--summary"], env))


def test_c_program_does_gpu_work_with_another_venv_activated(tessera_env, other_venv):
    """Not only the identity: the C example's work runs through the driver and the layer."""
    subprocess.run(["make", "-s", "-C", REPO / "examples"], check=True)
    out = run([REPO / "build/examples/compute_and_draw"], _activated(tessera_env, other_venv))
    assert out.returncode == 0, out.stdout + out.stderr
    assert CFFI_FAILURE not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert MALI in out.stdout, out.stdout


def test_python_program_keeps_its_interpreter_with_another_venv_activated(tessera_env, other_venv):
    """The project's interpreter runs the program; the other environment on PATH changes nothing."""
    out = run([PYTHON, REPO / "examples" / "compute_collatz.py"], _activated(tessera_env, other_venv))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"on {MALI}" in out.stdout
    assert "Traceback" not in out.stderr


def test_embedded_interpreter_is_the_projects(tmp_path):
    """What the build records for the embedded interpreter is the project's own: its executable
    (whose pyvenv.cfg gives the project's site-packages) and its standard library."""
    from tessera.vkapi.shim import interpreter_config

    config = interpreter_config()
    assert config["executable"] == sys.executable
    assert config["prefix"] == sys.base_prefix
    stdlib = Path(venv.__file__).resolve().parent.parent
    assert str(stdlib) in config["search_paths"]
    assert not any("site-packages" in p for p in config["search_paths"])


def _damaged_copy(library: Path, manifest: Path, out: Path) -> Path:
    """A copy of a shim whose recorded standard-library paths point nowhere (as if the project's
    Python had been removed after the build), with a manifest naming it; returns the manifest."""
    from tessera.vkapi.shim import interpreter_config

    data = library.read_bytes()
    for path in interpreter_config()["search_paths"]:
        recorded = path.encode() + b"\0"
        assert recorded in data, path
        data = data.replace(recorded, recorded[:-2] + b"_\0")
    out.mkdir()
    (out / library.name).write_bytes(data)
    text = manifest.read_text().replace(str(library), str(out / library.name))
    assert str(out / library.name) in text
    (out / manifest.name).write_text(text)
    return out / manifest.name


def test_layer_forwards_in_c_when_its_python_cannot_start(tessera_env, tmp_path):
    """The application still sees a working Vulkan, and one line says why Tessera is absent."""
    from integration_support import lavapipe_manifest
    from tessera.tools.launch import LAYER_MANIFEST

    layer = _damaged_copy(REPO / "build" / "libVkLayer_tessera_timeline.so", LAYER_MANIFEST, tmp_path / "layer")
    env = dict(tessera_env, VK_LAYER_PATH=str(layer.parent), VK_DRIVER_FILES=lavapipe_manifest(),
               VK_INSTANCE_LAYERS="VK_LAYER_TESSERA_timeline")
    for name in ("VK_ADD_LAYER_PATH", "VK_LOADER_DRIVERS_SELECT"):
        env.pop(name, None)
    out = run(["vulkaninfo", "--summary"], env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "llvmpipe" in out.stdout and "VK_LAYER_TESSERA_timeline" in out.stdout
    said = [line for line in out.stderr.splitlines() if line.startswith("tessera: ")]
    assert len(said) == 1 and "cannot start the project's Python" in said[0], out.stderr
    subprocess.run(["make", "-s", "-C", REPO / "examples"], check=True)
    out = run([REPO / "build/examples/compute_and_draw"], env)
    assert out.returncode == 0, out.stdout + out.stderr


def test_driver_says_why_when_its_python_cannot_start(tessera_env, tmp_path):
    from tessera.tools.launch import ICD_MANIFEST

    icd = _damaged_copy(REPO / "build" / "libtessera_mali_icd.so", ICD_MANIFEST, tmp_path / "icd")
    env = dict(tessera_env, VK_DRIVER_FILES=str(icd))
    for name in ("VK_INSTANCE_LAYERS", "VK_LOADER_DRIVERS_SELECT"):
        env.pop(name, None)
    out = run(["vulkaninfo", "--summary"], env)
    said = [line for line in out.stderr.splitlines() if line.startswith("tessera: ")]
    assert len(said) == 1 and "libtessera_mali_icd.so stays out of this process" in said[0], out.stderr
    assert "make setup" in said[0]


def test_project_set_up_with_debians_python(tmp_path, other_venv):
    """Shims built by a venv of Debian's own python3.11 (statically linked, with libpython beside it):
    a C program under `tessera run`, with another environment activated, finds the emulated Mali."""
    from integration_support import lavapipe_manifest

    debian = Path("/usr/bin/python3.11")
    if not debian.exists() or Path(sys.executable).resolve() == debian.resolve():
        pytest.skip("no Debian python3.11 beside the project's interpreter")
    root = tmp_path / "debian-venv"
    subprocess.run([str(debian), "-m", "venv", "--without-pip", str(root)], check=True)
    # The project's packages, as `pip install -e .` would give them (nothing is downloaded).
    site = next(root.glob("lib/python3.*/site-packages"))
    ours = next(Path(sys.prefix).glob("lib/python3.*/site-packages"))
    (site / "project.pth").write_text(f"{ours}\nimport site; site.addsitedir({str(ours)!r})\n")
    env = dict(os.environ, TESSERA_BUILD_DIR=str(tmp_path / "build"))
    subprocess.run([str(root / "bin" / "python"), "-m", "tessera.tools.build_shims"], env=env, check=True,
                   capture_output=True, timeout=300)
    out = run([root / "bin" / "python", "-m", "tessera.tools.cli", "run", "--no-merge", "--backend",
               lavapipe_manifest(), "--out", tmp_path / "session", "--", "vulkaninfo", "--summary"],
              _activated(env, other_venv))
    _assert_on_the_mali(out)

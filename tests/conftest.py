"""Shared fixtures: running applications under Tessera through the real loader."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests run the same examples on every machine, so CI is reproducible;
# TESSERA_HYPOTHESIS=explore draws new random examples instead.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("TESSERA_HYPOTHESIS", "ci"))



@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs, for full-disk tests (root only); skipped where mounting is not permitted."""
    folder = tmp_path / "small"
    folder.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


@pytest.fixture(scope="session")
def shims():
    from tessera.tools.launch import ensure_shims

    ensure_shims()


@pytest.fixture
def tessera_env(shims, tmp_path):
    """Environment of `tessera run` for a fresh session folder."""
    from tessera.tools.launch import LaunchConfig, environment

    return environment(LaunchConfig(tmp_path / "session"))


@pytest.fixture
def lavapipe_env():
    from tessera.icd.backend import default_manifest

    env = dict(os.environ, VK_DRIVER_FILES=str(default_manifest()),
               XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    env.pop("VK_INSTANCE_LAYERS", None)
    return env


@pytest.fixture(scope="session")
def xvfb_display():
    """A private X server for windowed apps (vkcube)."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.fail("Xvfb missing: `make setup` installs xvfb")
    for n in range(90, 120):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            break
    proc = subprocess.Popen([xvfb, f":{n}", "-screen", "0", "640x480x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{n}").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"Xvfb :{n} did not start")
        time.sleep(0.05)
    yield f":{n}"
    proc.terminate()
    proc.wait(timeout=10)


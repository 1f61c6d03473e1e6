"""A Python exception inside the layer's hooks never reaches the application and the call still goes down
(README, issue #23): also for the replacement hooks that call down themselves (layer/forwarding.py:
vkQueueSubmit, vkQueueSubmit2, vkEnumerateDeviceExtensionProperties, vkDestroyDevice,
vkDestroyInstance). TESSERA_LAYER_FAULT makes their hooks raise before they call down; the programs
check their results, so a submit that never reached the driver fails them.
"""
from __future__ import annotations

import re

import pytest
from integration_support import PYTHON, REPO, run

APPS = REPO / "tests" / "integration" / "apps"
COLLATZ = (REPO / "examples" / "compute_collatz.py", "compute_collatz: OK")
SUBMIT_PATHS = (APPS / "submit_paths.py", "submit_paths: OK")
_SUBMITS = re.compile(r"\] icd INFO: submits so far: (\d+) made in C, (\d+) through Python")


def _driver_submits(stderr: str) -> int:
    """The submits the driver received, as it says at vkDestroyDevice (TESSERA_LOG=info)."""
    return sum(int(c) + int(p) for c, p in _SUBMITS.findall(stderr))


@pytest.mark.parametrize(("fault", "app"), [("vkQueueSubmit", COLLATZ), ("vkQueueSubmit", SUBMIT_PATHS),
                                            ("vkQueueSubmit2", SUBMIT_PATHS),
                                            ("vkEnumerateDeviceExtensionProperties", COLLATZ),
                                            ("vkDestroyDevice", COLLATZ), ("vkDestroyInstance", COLLATZ)])
def test_a_failing_replacement_hook_still_forwards_the_call(fault, app, tessera_env):
    program, ok = app
    # Every submit through the layer's Python hook (its C path would not run the failing hook).
    env = dict(tessera_env, TESSERA_C_SUBMITS="0", TESSERA_LOG="info")
    bare = run([PYTHON, program], env)
    assert bare.returncode == 0 and ok in bare.stdout, bare.stdout + bare.stderr
    out = run([PYTHON, program], dict(env, TESSERA_LAYER_FAULT=fault))
    assert out.returncode == 0 and ok in out.stdout, out.stdout + out.stderr   # results still correct
    assert out.stderr.count(f"exception in {fault} ") == 1, out.stderr        # reported once, with a traceback
    assert "InjectedFault" in out.stderr
    assert f"exception in {fault} (the call was still forwarded, as the application made it)" in out.stderr
    if fault != "vkDestroyDevice":   # (the driver counts its submits when its device goes)
        # The application's submits reached the driver; what the layer adds after a submit it could not
        # plan (the read-back submit of an indirect capture) is skipped with that submit's metadata.
        assert 0 < _driver_submits(out.stderr) <= _driver_submits(bare.stderr), out.stderr

"""A Python program holding its interpreter lock while a thread Python does not know calls Vulkan
(issue #23: moderngl through zink hung). The shims never wait for the lock on such a thread: its
hooks run on a runner thread of the shim's own, and when the lock does not come (the holder waits for
that very thread) the call is forwarded without Tessera, with one line saying so (vkapi/runtime/python_runner.c).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from integration_support import PYTHON, REPO, run

APP = REPO / "tests" / "integration" / "apps" / "native_thread.py"
RAN_WITHOUT = "on a thread Python does not know ran without Tessera"
# The layer's vkCreateBuffer hook raises on purpose: its report shows whether the hook ran.
FAULT = {"TESSERA_LAYER_FAULT": "vkCreateBuffer"}
HOOK_RAN = "exception in vkCreateBuffer"


@pytest.fixture(scope="module")
def native_thread_lib(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("native") / "libnative_thread.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(out),
                    str(APP.parent / "c" / "native_thread.c"), "-lvulkan", "-lpthread"], check=True)
    return out


def test_lock_held_while_a_native_thread_creates_objects(tessera_env, native_thread_lib):
    """Hung forever before (the thread's hook waited for the lock its caller held)."""
    out = run([PYTHON, APP, native_thread_lib, "held"], dict(tessera_env, **FAULT), timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "native_thread: 2 objects" in out.stdout
    said = [line for line in out.stderr.splitlines() if RAN_WITHOUT in line]
    assert said and all(line.startswith("tessera: ") for line in said), out.stderr
    assert HOOK_RAN not in out.stderr, out.stderr   # forwarded without the hooks


def test_lock_released_the_native_threads_calls_are_seen(tessera_env, native_thread_lib):
    """With the lock free, the hooks run (on the runner thread) and nothing is forwarded unseen."""
    out = run([PYTHON, APP, native_thread_lib, "released"], dict(tessera_env, **FAULT), timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "native_thread: 2 objects" in out.stdout
    assert HOOK_RAN in out.stderr, out.stderr
    assert RAN_WITHOUT not in out.stderr, out.stderr

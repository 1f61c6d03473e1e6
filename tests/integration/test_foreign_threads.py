"""A Python program holding its interpreter lock while a thread Python does not know calls Vulkan
(issue #23: moderngl through zink hung). The shims never wait for the lock on such a thread: its
hooks run on a runner thread of the shim's own, and when the lock does not come (the holder waits for
that very thread) the call is forwarded without Tessera, with one line saying so (vkapi/runtime/python_runner.c).
"""
from __future__ import annotations

import re
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


RECORD_COST = REPO / "build" / "bench" / "record_cost"
_THREAD_COUNTS = re.compile(r"\] (layer|icd) INFO: Python thread states kept for threads that called Vulkan: (\d+) "
                            r"\((\d+) deleted at their thread's exit\); hooks run on the runner thread: (\d+)")


def _thread_counts(stderr: str) -> dict[str, tuple[int, int, int]]:
    return {m.group(1): tuple(int(g) for g in m.groups()[1:]) for m in _THREAD_COUNTS.finditer(stderr)}


def test_a_c_programs_threads_run_their_hooks_themselves(tessera_env):
    """A C program's recording threads (record_cost's threads mode: 2 threads, started 3 times) call
    hooks on their own thread: the interpreter is the shims', so the driver, which finds it running
    when it loads after the layer, does not hand them to its runner (it did: two thread switches per
    hook). Each thread keeps one Python thread state across its hooks, made by the layer's guard (the
    first it calls; the driver's finds it), and deleted when the thread exits. Reuse off, so that every
    recording runs hooks (re-recordings otherwise begin and end in C: vkapi/lifecycle.py)."""
    out = run([RECORD_COST, "threads", 50, 3, 2], dict(tessera_env, TESSERA_LOG="info", TESSERA_REPLAY="0"),
              timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    counts = _thread_counts(out.stderr)
    assert counts == {"layer": (6, 6, 0), "icd": (0, 0, 0)}, out.stderr


def test_a_python_programs_native_thread_still_takes_the_runner(tessera_env, native_thread_lib):
    """In a Python program the interpreter is the application's: a thread it does not know still hands its
    hooks to the runner (the guard never takes the application's lock on that thread); the only thread state
    each shim keeps is its runner's (it lives as long as the process)."""
    out = run([PYTHON, APP, native_thread_lib, "released"], dict(tessera_env, TESSERA_LOG="info"), timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    counts = _thread_counts(out.stderr)
    assert set(counts) == {"layer", "icd"}, out.stderr
    assert counts == {"layer": (1, 0, 2), "icd": (1, 0, 2)}, out.stderr   # its 2 objects' hooks

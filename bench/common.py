"""Helpers shared by the benchmarks in bench/: the three loader environments and the process runners.

Role summary: `bench_environments()` gives, once per benchmark run, the loader environment of
each configuration compared side by side (plain lavapipe, the emulated Mali driver alone, driver +
Tessera layer), sharing a temporary session folder it removes afterwards; `build()` makes sure
the shims and the C programs exist; `run_json()`, `timed_run()` and `best_wall()` run a program
in one of those environments. Nothing here reads settings deeper than the caller passes in, and
nothing keeps state between calls.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tessera.icd.backend import default_manifest  # noqa: E402
from tessera.tools.launch import LaunchConfig, ensure_shims, environment  # noqa: E402

BUILD_BENCH = REPO / "build" / "bench"
LAVAPIPE_ENV, ICD_ENV, LAYER_ENV = "lavapipe", "mali icd", "mali icd + layer"


@contextmanager
def bench_environments() -> Iterator[dict[str, dict[str, str]]]:
    """`environments()` in a fresh session folder under build/, removed afterwards (spools grow fast)."""
    (REPO / "build").mkdir(exist_ok=True)
    session = Path(tempfile.mkdtemp(prefix="bench-session-", dir=REPO / "build"))
    try:
        yield environments(session)
    finally:
        shutil.rmtree(session, ignore_errors=True)


def environments(session: Path, base: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """Loader environment per configuration, in the order printed: lavapipe, ICD only, ICD + layer.

    "lavapipe" is the backend the emulated driver itself uses (`default_manifest()`: the private
    Mesa 25 copy from `make setup`, else the system's), so the ratios compare like with like.

    The layer runs with everything it tracks (it has no switch to track less); with no host
    daemon it spools into `session`, where the driver also writes its GPU trace.
    VK_INSTANCE_LAYERS from the caller is dropped so that no other layer (e.g. validation) is timed."""
    base = dict(os.environ if base is None else base, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    base.pop("VK_INSTANCE_LAYERS", None)
    return {
        LAVAPIPE_ENV: dict(base, VK_DRIVER_FILES=str(default_manifest())),
        ICD_ENV: environment(LaunchConfig(session, layer=False), base),
        LAYER_ENV: environment(LaunchConfig(session), base),
    }


def build() -> None:
    """Shims (if missing) and the C programs of examples/Makefile (incremental)."""
    ensure_shims()
    subprocess.run(["make", "-s", "-C", str(REPO / "examples")], check=True)


def run_json(argv: list, env: dict[str, str]) -> dict:
    """Run a program that prints one JSON line last; that line, parsed."""
    out = subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed_run(argv: list, env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s = user + system of the program and its threads) of one run that must succeed."""
    wall, cpu, _ = measured_run(argv, env)
    return wall, cpu


def measured_run(argv: list, env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the program and its threads, peak resident set in KiB) of one run that must
    succeed; the resource use is the program's own (wait4), whatever else the caller runs."""
    t = time.perf_counter()
    proc = subprocess.Popen([str(a) for a in argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, argv, stderr=stderr)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def best_wall(argv: list, env: dict[str, str], runs: int) -> float:
    """Best wall time in seconds of `runs` runs of a program that must succeed (its output is discarded)."""
    return min(timed_run(argv, env)[0] for _ in range(runs))

"""Emulation overhead on whole applications: frames per second and wall time, lavapipe vs ICD vs ICD + layer.

What it measures, in one run, on one machine, in three loader environments (bench/common.py:
plain lavapipe, the emulated Mali driver alone, driver + Tessera layer tracking everything and
spooling to a temporary session folder):
1. vkcube (vulkan-tools; its default 500x500 window, FIFO present mode, on a private Xvfb this
   script starts and stops): `vkcube --c N1` and `vkcube --c N2`; frame rate =
   (N2 - N1) / (t2 - t1) with t the best wall time of R runs. The difference removes start-up
   and shut-down (instance, device, swapchain, pipelines, the emulated driver's Python start-up),
   so it is the steady-state frame rate. Also printed: CPU time per frame (user + system of the
   process, all threads, same difference), which other load on the machine disturbs less, and
   the peak resident set of the N1 and N2 runs (memory that grows with frames would show).
   Ratios are frame-time ratios (lavapipe fps / config fps; config CPU / lavapipe CPU).
2. examples/render_passes.py (offscreen, 3 render-pass styles, checks every pixel): best wall
   time of R runs, start-up included (Python, the `vulkan` package, the driver), and its ratio.
Runs are interleaved (run 1 of every configuration, then run 2, ...) so that load from other
processes drifts over all configurations alike. The issue's target: the ICD alone costs under
15 % (frame time ratio < 1.15). A benchmark, not a test: it never fails on a number.

Run: .venv/bin/python bench/bench_emulation.py [--frames N1,N2] [--runs R]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from common import LAVAPIPE_ENV, REPO, bench_environments, build, measured_run

VKCUBE = "vkcube"
FIFO = "2"  # VK_PRESENT_MODE_FIFO_KHR, vkcube's --present_mode value


@contextmanager
def private_xvfb() -> Iterator[str]:
    """A private Xvfb on a free display (it picks one and tells us via -displayfd); yields DISPLAY."""
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "640x480x24", "-nolisten", "tcp"],
                            pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    try:
        with os.fdopen(read) as f:
            number = f.readline().strip()
        if not number:
            raise RuntimeError("Xvfb did not start (no display number on -displayfd)")
        yield f":{number}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def best_interleaved(jobs: dict[tuple, tuple[list, dict[str, str]]], runs: int) -> dict[tuple, tuple[float, float, int]]:
    """key -> (best wall s, best CPU s, largest peak RSS KiB) over `runs` rounds, each round running
    every job once in order."""
    best = {key: (float("inf"), float("inf"), 0) for key in jobs}
    for _ in range(runs):
        for key, (argv, env) in jobs.items():
            wall, cpu, rss = measured_run(argv, env)
            best[key] = (min(best[key][0], wall), min(best[key][1], cpu), max(best[key][2], rss))
    return best


def vkcube(envs: dict[str, dict[str, str]], n1: int, n2: int, runs: int) -> None:
    """Print the steady-state frame rate and CPU time per frame of vkcube in each environment."""
    print(f"vkcube steady-state frame rate: (N2 - N1) / (t2 - t1), N1={n1}, N2={n2}, best of {runs} interleaved runs")
    with private_xvfb() as display:
        jobs = {(name, n): ([VKCUBE, "--c", n, "--present_mode", FIFO], dict(env, DISPLAY=display))
                for name, env in envs.items() for n in (n1, n2)}
        best = best_interleaved(jobs, runs)
    frame, cpu = {}, {}
    for name in envs:
        (w1, c1, r1), (w2, c2, r2) = best[(name, n1)], best[(name, n2)]
        frame[name], cpu[name] = (w2 - w1) / (n2 - n1), (c2 - c1) / (n2 - n1)
        print(f"  {name:18s} {1 / frame[name]:8.1f} fps  {frame[name] * 1e3:6.3f} ms/frame "
              f"x{frame[name] / frame[LAVAPIPE_ENV]:5.2f}   CPU {cpu[name] * 1e3:6.3f} ms/frame "
              f"x{cpu[name] / cpu[LAVAPIPE_ENV]:5.2f}   (wall {n1} frames {w1:5.2f} s, {n2} frames {w2:5.2f} s)"
              f"   peak RSS {r1 / 1024:5.0f} / {r2 / 1024:5.0f} MiB")


def render_passes(envs: dict[str, dict[str, str]], runs: int) -> None:
    """Print the best wall time of examples/render_passes.py in each environment."""
    print(f"examples/render_passes.py wall time, start-up included (best of {runs} interleaved runs)")
    argv = [sys.executable, REPO / "examples" / "render_passes.py"]
    best = best_interleaved({(name,): (argv, env) for name, env in envs.items()}, runs)
    base = best[(LAVAPIPE_ENV,)][0]
    for name in envs:
        wall, cpu, _ = best[(name,)]
        print(f"  {name:18s} {wall:6.3f} s   x{wall / base:5.2f} vs lavapipe   (CPU {cpu:6.3f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", default="300,2000", help="N1,N2: vkcube frame counts of the two runs")
    ap.add_argument("--runs", type=int, default=5, help="runs per measurement; the best time is used")
    args = ap.parse_args()
    n1, n2 = (int(v) for v in args.frames.split(","))
    if not 0 < n1 < n2:
        ap.error("--frames needs 0 < N1 < N2")
    build()
    with bench_environments() as envs:
        if shutil.which(VKCUBE) and shutil.which("Xvfb"):
            vkcube(envs, n1, n2, args.runs)
        else:
            print("vkcube or Xvfb not installed: vkcube part skipped")
        render_passes(envs, args.runs)
    print("target (issue): the ICD alone costs under 15 % (frame time x1.15)")


if __name__ == "__main__":
    main()

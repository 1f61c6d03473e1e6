"""Fixed cost of `tessera run`: `vulkaninfo --summary` bare on the backend versus under Tessera.

Run: .venv/bin/python bench/bench_startup.py [--runs N]
Measured side by side, interleaved, in one run (median wall time of N runs each):
- bare: vulkaninfo on the backend driver (lavapipe) through the loader;
- in process: vulkaninfo with the emulated driver and the layer (the loader environment of
  `tessera run`, no daemon, no merge): Python starting inside the app plus the shims' imports;
- tessera run --no-merge: adds the CLI's start-up and the embedded daemon;
- tessera run: adds the merge and the summary.
Goal (issue #25; #16 asked 0.4 s): `tessera run` adds at most 0.3 s to the bare run.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, LaunchConfig, build, environment

TESSERA = REPO / ".venv" / "bin" / "tessera"
APP = ["vulkaninfo", "--summary"]


def wall(argv: list, env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    subprocess.run([str(a) for a in argv], env=env, capture_output=True, check=True)
    return time.perf_counter() - t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    build()
    from tessera.icd.backend import default_manifest

    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        tmp = Path(tmp)
        bare_env = dict(environment(LaunchConfig(tmp / "unused")), VK_DRIVER_FILES=str(default_manifest()))
        for name in ("VK_ADD_DRIVER_FILES", "VK_LOADER_DRIVERS_SELECT", "VK_INSTANCE_LAYERS"):
            bare_env.pop(name, None)
        cases = {
            "bare": lambda i: wall(APP, bare_env),
            "in process": lambda i: wall(APP, environment(LaunchConfig(tmp / f"p{i}"))),
            "tessera run --no-merge": lambda i: wall([TESSERA, "run", "--no-merge", "--out", tmp / f"n{i}", "--",
                                                      *APP]),
            "tessera run": lambda i: wall([TESSERA, "run", "--out", tmp / f"r{i}", "--", *APP]),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for i in range(args.runs):
            for name, case in cases.items():
                times[name].append(case(i))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    bare = medians["bare"]
    print(f"vulkaninfo --summary, median of {args.runs} interleaved runs")
    print(f"{'':26s} {'wall':>9s} {'added':>9s}")
    for name, m in medians.items():
        print(f"{name:26s} {m * 1000:7.0f} ms {(m - bare) * 1000:7.0f} ms")
    added = medians["tessera run"] - bare
    print(f"tessera run adds {added:.3f} s (goal <= 0.3 s): {'met' if added <= 0.3 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

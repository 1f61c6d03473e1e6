"""What `tessera run --instrument` costs: example wall times with and without it, in one run.

Run: .venv/bin/python bench/bench_instrument.py [--runs N]
For each example (examples/shader_costs.py, examples/compute_collatz.py, examples/render_passes.py):
the median wall time of N interleaved runs of `tessera run -- python EXAMPLE` and of
`tessera run --instrument -- python EXAMPLE` (embedded daemon and merge included, as a user runs
it), and their ratio. Goal (issue #12): at most 3x. A benchmark, not a test: it never fails on a number.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, build

TESSERA = REPO / ".venv" / "bin" / "tessera"
EXAMPLES = ["shader_costs", "compute_collatz", "render_passes"]


def wall(argv: list) -> float:
    t = time.perf_counter()
    subprocess.run([str(a) for a in argv], capture_output=True, check=True)
    return time.perf_counter() - t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    build()
    print(f"{'example':18s} {'plain':>9s} {'--instrument':>13s} {'ratio':>7s}   (median of {args.runs} runs each)")
    with tempfile.TemporaryDirectory(prefix="bench-instrument-") as tmp:
        for name in EXAMPLES:
            app = [sys.executable, REPO / "examples" / f"{name}.py"]
            times: dict[bool, list[float]] = {False: [], True: []}
            for i in range(args.runs):
                for instrument in (False, True):
                    out = Path(tmp) / f"{name}-{instrument}-{i}"
                    flags = ["--instrument"] if instrument else []
                    times[instrument].append(wall([TESSERA, "run", *flags, "--out", out, "--", *app]))
            plain, instr = statistics.median(times[False]), statistics.median(times[True])
            print(f"{name:18s} {plain:8.2f}s {instr:12.2f}s {instr / plain:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

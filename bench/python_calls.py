"""Python function calls per frame of bench/record_cost.c's frame loops under the driver and the layer.

What it measures: `record_cost MODE N 1` run twice, for N1 and N2 frames, in "mali icd + layer" with
TESSERA_CALL_COUNTS (vkapi/call_counts.py: every Python call in the process, counted by function);
calls per frame = (calls at N2 - calls at N1) / (N2 - N1), so that start-up and exit cancel out. Counts
do not vary from run to run where CPU time does (±10 % on this project's 2-core sandbox): a change that
removes Python from a frame shows here exactly. Printed: the total and the functions called most. A
benchmark, not a test.

Run: .venv/bin/python bench/python_calls.py [--modes frame,passframe] [--frames 200,1200] [--top 15]
"""
from __future__ import annotations

import argparse
import collections
import subprocess
import tempfile
from pathlib import Path

from common import BUILD_BENCH, LAYER_ENV, REPO, bench_environments, build

from tessera.vkapi import call_counts


def counts(env: dict[str, str], mode: str, frames: int) -> collections.Counter:
    with tempfile.TemporaryDirectory(dir=REPO / "build") as d:
        prefix = Path(d) / "calls"
        subprocess.run([str(BUILD_BENCH / "record_cost"), mode, str(frames), "1"],
                       env={**env, call_counts.SWITCH: str(prefix)}, check=True, capture_output=True)
        total: collections.Counter = collections.Counter()
        for path in Path(d).glob("calls.*"):
            total.update(call_counts.read(path))
        return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="frame,passframe")
    ap.add_argument("--frames", default="200,1200", help="N1,N2")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    n1, n2 = (int(n) for n in args.frames.split(","))
    build()
    with bench_environments() as envs:
        for mode in args.modes.split(","):
            a, b = counts(envs[LAYER_ENV], mode, n1), counts(envs[LAYER_ENV], mode, n2)
            per = {k: (b[k] - a[k]) / (n2 - n1) for k in b}
            print(f"record_cost {mode}: {sum(per.values()):.1f} Python calls per frame "
                  f"(driver + layer; {n1} and {n2} frames)")
            for (filename, name), n in sorted(per.items(), key=lambda kv: -kv[1])[:args.top]:
                if n >= 0.5:
                    print(f"  {n:6.1f}  {'/'.join(Path(filename).parts[-2:])}:{name}")


if __name__ == "__main__":
    main()

"""Python function calls per frame of bench/record_cost.c's frame loops under the driver and the layer.

What it measures: `record_cost MODE N 1` run twice, for N1 and N2 frames, in "mali icd + layer" with
TESSERA_CALL_COUNTS (vkapi/call_counts.py: every Python call in the process, counted by function);
calls per frame = (calls at N2 - calls at N1) / (N2 - N1), so that start-up and exit cancel out. Counts
do not vary from run to run where CPU time does (±10 % on this project's 2-core sandbox): a change that
removes Python from a frame shows here exactly. Printed: the total and the functions called most. With
--before DIR, the same in that checkout's loader environment too (bench/compare_checkouts.py's way: its own
interpreter and bench/common.py; this checkout's record_cost), side by side; a checkout older than
TESSERA_CALL_COUNTS counts nothing. A benchmark, not a test.

Run: .venv/bin/python bench/python_calls.py [--modes frame,passframe,buffers] [--frames 200,1200] [--top 15]
         [--before DIR]
"""
from __future__ import annotations

import argparse
import collections
import subprocess
import tempfile
from pathlib import Path

from common import BUILD_BENCH, REPO, build

from tessera.vkapi import call_counts


# Runs inside a checkout's own interpreter: its bench/common.py makes its loader environment.
_CHILD = """
import subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/bench")
from common import LAYER_ENV, environments
with tempfile.TemporaryDirectory(dir=sys.argv[1] + "/build") as d:
    env = {**environments(Path(d))[LAYER_ENV], sys.argv[2]: sys.argv[3]}
    subprocess.run(sys.argv[4:], env=env, check=True, capture_output=True)
"""


def counts(checkout: Path, mode: str, frames: int) -> collections.Counter:
    """Every Python call of `record_cost MODE FRAMES 1 [MORE]` in `checkout`'s "mali icd + layer", by function;
    `mode` is MODE or MODE:MORE, record_cost's further arguments after colons (frame:8:fill)."""
    mode, *more = mode.split(":")
    with tempfile.TemporaryDirectory(dir=REPO / "build") as d:
        prefix = Path(d) / "calls"
        subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-c", _CHILD, str(checkout), call_counts.SWITCH,
                        str(prefix), str(BUILD_BENCH / "record_cost"), mode, str(frames), "1", *more], check=True)
        total: collections.Counter = collections.Counter()
        for path in Path(d).glob("calls.*"):
            total.update(call_counts.read(path))
        return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="frame,passframe", help="record_cost modes, each MODE or MODE:MORE (its further "
                                                               "arguments after colons: frame:136:fill)")
    ap.add_argument("--frames", default="200,1200", help="N1,N2")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--before", type=Path, help="another checkout, set up, counted the same way")
    args = ap.parse_args()
    n1, n2 = (int(n) for n in args.frames.split(","))
    build()
    checkouts = ([args.before.resolve()] if args.before else []) + [REPO]
    for mode in args.modes.split(","):
        print(f"record_cost {mode}: Python calls per frame (driver + layer; {n1} and {n2} frames)")
        for checkout in checkouts:
            a, b = counts(checkout, mode, n1), counts(checkout, mode, n2)
            per = {k: (b[k] - a[k]) / (n2 - n1) for k in b}
            print(f"  {str(checkout):40s} {sum(per.values()):8.1f}" + ("" if b else "  (nothing counted)"))
            for (filename, name), n in sorted(per.items(), key=lambda kv: -kv[1])[:args.top]:
                if n >= 0.5:
                    print(f"    {n:6.1f}  {'/'.join(Path(filename).parts[-2:])}:{name}")


if __name__ == "__main__":
    main()

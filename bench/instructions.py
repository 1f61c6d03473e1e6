"""Instructions per frame of bench/record_cost.c's frame loops, every thread of the process, counted by valgrind.

What it measures: `record_cost MODE N 1` under `valgrind --tool=callgrind` for N1 and N2 frames, in each
loader environment asked for (bench/common.py: "lavapipe", "mali icd", "mali icd + layer"); instructions per
frame = (instructions at N2 - at N1) / (N2 - N1), so that start-up and exit cancel out. A run of N1 frames
first warms lavapipe's shader cache. Unlike CPU time, which moves by 10 % and more from run to run on this
project's 2-core sandbox (an idle vCPU wakes slowly; docs/benchmarks.md), these counts repeat to within
0.1 % for lavapipe alone, and to within ~5 % under the driver and the layer (their threads take turns
differently from run to run): what the driver and the layer add is the count above lavapipe's; compare
checkouts over more frames, or several runs, for differences under 10 %. Everything runs ~50x slower under
valgrind, so the frame counts are small. With --before
DIR, the same in that checkout's loader environment too (its own interpreter and bench/common.py; this
checkout's record_cost), side by side. A benchmark, not a test.

Run: .venv/bin/python bench/instructions.py [--modes buffers,frame] [--frames 10,40]
         [--configs "lavapipe,mali icd + layer"] [--before DIR] [--workloads 8,136] [--kind fill|dispatch]

With --workloads (default 8,136), the frame mode is counted with D1 and D2 workloads per frame too (fills by
default, which lavapipe runs at a memset's cost; --kind dispatch for dispatches): the difference per further
workload is what one more costs, lavapipe's own included (its row). The shims' workers also poll on a
timer (the layer's sender, the driver's timeline), and under valgrind a frame lasts ~50x longer, so these
counts hold more of that polling per frame than a real run does (least with fills, whose frames are short).
Counting the application's thread alone does not remove it reliably: start-up work lands on whichever thread
first needs it, which moves a run's count on one thread by hundreds of millions.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from common import BUILD_BENCH, LAVAPIPE_ENV, LAYER_ENV, REPO, build

# Runs inside a checkout's own interpreter: its bench/common.py makes its loader environment.
_CHILD = """
import subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/bench")
from common import environments
with tempfile.TemporaryDirectory(dir=sys.argv[1] + "/build") as d:
    env = environments(Path(d))[sys.argv[2]]
    print(subprocess.run(sys.argv[3:], env=env, capture_output=True, text=True, check=True).stderr)
"""


def instructions(checkout: Path, config: str, mode: str, frames: int, *more: str) -> int:
    """Instructions of every thread of `record_cost MODE FRAMES 1 [MORE]` in `checkout`'s `config`."""
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-c", _CHILD, str(checkout), config,
                              "valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/callgrind.%p",
                              str(BUILD_BENCH / "record_cost"), mode, str(frames), "1", *more],
                             capture_output=True, text=True, check=True).stdout
    found = re.findall(r"Collected : (\d+)", out)
    if not found:
        raise SystemExit(f"valgrind printed no count:\n{out}")
    return int(found[-1])


def per_frame(checkout: Path, config: str, mode: str, n1: int, n2: int, *more: str) -> float:
    """Instructions per frame: the difference of N2 and N1 frames (after a warm-up run of N1)."""
    instructions(checkout, config, mode, n1, *more)   # lavapipe's shader cache warm
    a, b = instructions(checkout, config, mode, n1, *more), instructions(checkout, config, mode, n2, *more)
    return (b - a) / (n2 - n1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="buffers,frame", help="record_cost modes (none: \"\")")
    ap.add_argument("--frames", default="10,40", help="N1,N2")
    ap.add_argument("--configs", default=f"{LAVAPIPE_ENV},{LAYER_ENV}")
    ap.add_argument("--before", type=Path, help="another checkout, set up, counted the same way")
    ap.add_argument("--workloads", default="8,136",
                    help="D1,D2: also the frame mode with D1 and D2 workloads per frame, and what one more workload "
                         "costs, (at D2 - at D1) / (D2 - D1) (none: \"\")")
    ap.add_argument("--kind", choices=("fill", "dispatch"), default="fill", help="the frame mode's workloads")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (make apt installs it)")
    n1, n2 = (int(n) for n in args.frames.split(","))
    build()
    checkouts = ([args.before.resolve()] if args.before else []) + [REPO]
    for mode in filter(None, args.modes.split(",")):
        print(f"record_cost {mode}: instructions per frame, all threads ({n1} and {n2} frames, valgrind)")
        for config in args.configs.split(","):
            for checkout in checkouts if config != LAVAPIPE_ENV else [REPO]:
                print(f"  {config:18s} {str(checkout):32s} {per_frame(checkout, config, mode, n1, n2) / 1e3:10.1f} k")
    if args.workloads:
        d1, d2 = (int(d) for d in args.workloads.split(","))
        print(f"record_cost frame with {d1} and {d2} {args.kind}s: instructions per further {args.kind}, all threads "
              f"({n1} and {n2} frames, valgrind)")
        for config in args.configs.split(","):
            for checkout in checkouts if config != LAVAPIPE_ENV else [REPO]:
                at1, at2 = (per_frame(checkout, config, "frame", n1, n2, str(d), args.kind) for d in (d1, d2))
                print(f"  {config:18s} {str(checkout):32s} {(at2 - at1) / (d2 - d1) / 1e3:8.2f} k")


if __name__ == "__main__":
    main()

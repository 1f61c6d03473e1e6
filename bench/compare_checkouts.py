"""Before/after of record_cost in two checkouts' loader environments, side by side in one run.

What it measures: one `build/bench/record_cost` binary (this checkout's; it is plain Vulkan, the same for
both) run in a loader environment (bench/common.py: lavapipe, "mali icd", "mali icd + layer") made by each
checkout's own bench/common.py, so each run loads that checkout's driver and layer. Runs are interleaved
(before, after, before, after…) so that other load on the machine drifts over both; printed: the median of
R runs of wall and process-CPU time per call. Each checkout must be set up (`make setup` in it).
A benchmark, not a test.

Run: .venv/bin/python bench/compare_checkouts.py BEFORE_DIR [AFTER_DIR] --mode frame [--calls N] [--runs R]
         [--config "mali icd + layer"] [--threads T] [--workloads D] [--kind dispatch|fill] [--more ARG…] [--cpu C]
`--cpu C` pins every run to CPU C: on a VM an idle vCPU's wake-up costs tens of microseconds of CPU, and a frame
loop wakes the backend's queue thread and the waiting thread every frame, so unpinned, frame-loop numbers move
with how often threads sleep rather than with the work done; pinned, they count the work.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD_COST = REPO / "build" / "bench" / "record_cost"

# Runs inside the checkout's own interpreter: its bench/common.py makes its loader environment.
_CHILD = """
import json, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/bench")
from common import environments
with tempfile.TemporaryDirectory(dir=sys.argv[1] + "/build") as d:
    env = environments(Path(d))[sys.argv[2]]
    out = subprocess.run(sys.argv[3:], env=env, capture_output=True, text=True, check=True).stdout
print(out.strip().splitlines()[-1])
"""


def one_run(checkout: Path, config: str, argv: list[str]) -> dict:
    python = checkout / ".venv" / "bin" / "python"
    out = subprocess.run([python, "-c", _CHILD, str(checkout), config, *argv], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path, nargs="?", default=REPO)
    ap.add_argument("--mode", default="frame")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--config", default="mali icd + layer")
    ap.add_argument("--threads", type=int, default=1, help="threads mode: recording threads")
    ap.add_argument("--workloads", type=int, default=8, help="frame mode: workloads per frame")
    ap.add_argument("--kind", choices=("dispatch", "fill"), default="dispatch", help="frame mode: the workloads")
    ap.add_argument("--more", nargs="+", default=[],
                    help="other modes: record_cost's arguments after N and REPS (buffers: BUFFERS [batches|linked])")
    ap.add_argument("--cpu", type=int, help="pin every run to this CPU")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})   # inherited by every run
    argv = [str(RECORD_COST), args.mode, str(args.calls), "1"]
    if args.mode == "threads":
        argv.append(str(args.threads))
    elif args.mode == "frame":
        argv += [str(args.workloads), args.kind]
    else:
        argv += args.more
    results: dict[Path, list[dict]] = {args.before: [], args.after: []}
    for _ in range(args.runs):
        for checkout in results:
            results[checkout].append(one_run(checkout.resolve(), args.config, argv))
    pinned = "" if args.cpu is None else f", pinned to CPU {args.cpu}"
    print(f"record_cost {' '.join(argv[1:])} in '{args.config}', median of {args.runs} interleaved runs{pinned}:")
    for checkout, runs in results.items():
        wall = statistics.median(r["ns_per_call"] for r in runs) / 1e3
        cpu = statistics.median(r["cpu_ns_per_call"] for r in runs) / 1e3
        digits = 3 if wall < 10 else 1   # a recording costs under a microsecond
        print(f"  {str(checkout):40s} wall {wall:9.{digits}f} us   CPU {cpu:9.{digits}f} us per call")


if __name__ == "__main__":
    main()

"""Cost of the foundation, measured side by side in one run.

1. Recording N vkCmdDispatch (build/bench/record_cost dispatch, C; see bench_layer.py, which
   also measures draws and submits): plain lavapipe, the emulated Mali driver alone, and
   driver + Tessera layer (which wraps each dispatch in a t<tagID> label: three commands down
   instead of one). Reported as ns/call and as ratios to plain lavapipe and layer vs driver.
2. Wall time of each example app: plain lavapipe vs driver + layer (the loader
   environment `tessera run` sets, spooling to a temporary session folder instead of a
   host daemon; the embedded Python start-up included), best of R runs, as a ratio.

Run: .venv/bin/python bench/bench_foundation.py [--calls N] [--runs R]
"""
from __future__ import annotations

import argparse
import sys

from bench_layer import print_costs, record_costs
from common import LAVAPIPE_ENV, LAYER_ENV, REPO, bench_environments, best_wall, build

EXAMPLES = ["compute_collatz", "render_passes", "transfers", "debug_labels"]
REPS = 5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    build()
    with bench_environments() as e:
        print_costs("dispatch", args.calls, REPS, record_costs(e, "dispatch", args.calls, REPS))

        print(f"example wall time (best of {args.runs})")
        for ex in EXAMPLES:
            argv = [sys.executable, REPO / "examples" / f"{ex}.py"]
            plain = best_wall(argv, e[LAVAPIPE_ENV], args.runs)
            tessera = best_wall(argv, e[LAYER_ENV], args.runs)
            print(f"  {ex:18s} lavapipe {plain:6.3f} s   tessera {tessera:6.3f} s   x{tessera / plain:5.2f}")


if __name__ == "__main__":
    main()

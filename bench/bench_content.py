"""What `tessera run --content` costs the application (#28): record_cost under the layer, with and without it.

What it measures, in one run, on one machine: build/bench/record_cost (bench/record_cost.c) in the
modes `draw` (N x vkCmdDraw in one dynamic-rendering instance: ns per draw on the recording thread, and
the vkCmdEndRendering + vkEndCommandBuffer after it per draw) and `passframe` (frames of 8 labelled
dynamic-rendering passes of 4 draws and 2 dispatches, submitted and waited for: wall and process CPU
per frame), in five loader environments (bench/common.py):
  icd only                    the emulated driver alone;
  icd only, C recording off   the same with TESSERA_C_RECORDING=0 (every command through the driver's
                              Python): what the driver's share of the next line is;
  layer                       driver + layer, default;
  layer --content, all Python TESSERA_CONTENT=1 with TESSERA_C_RECORDING=0: every command of both
                              shims through Python. Content mode before it kept C recording in the
                              driver and turned it off in the layer alone: that is this line minus
                              the driver's share ((icd only, C recording off) - (icd only));
  layer --content             TESSERA_CONTENT=1: the layer's draws and binds through Python, the rest in C.
Printed: each line's numbers and the ratio of `layer --content` to the estimate of content mode before.
A benchmark, not a test: it never fails on a number.

Run: .venv/bin/python bench/bench_content.py [--calls N] [--frames F] [--reps R]
"""
from __future__ import annotations

import argparse

from common import BUILD_BENCH, ICD_ENV, LAYER_ENV, bench_environments, build, run_json

RUNS = (("icd only", ICD_ENV, {}), ("icd only, C recording off", ICD_ENV, {"TESSERA_C_RECORDING": "0"}),
        ("layer", LAYER_ENV, {}),
        ("layer --content, all Python", LAYER_ENV, {"TESSERA_CONTENT": "1", "TESSERA_C_RECORDING": "0"}),
        ("layer --content", LAYER_ENV, {"TESSERA_CONTENT": "1"}))
KEY = {"draw": "ns_per_call", "passframe": "cpu_ns_per_call"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=5000, help="draws per repetition (draw mode)")
    ap.add_argument("--frames", type=int, default=100, help="frames per repetition (passframe mode)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per process; the best is reported")
    args = ap.parse_args()
    build()
    with bench_environments() as envs:
        for mode, calls in (("draw", args.calls), ("passframe", args.frames)):
            got = {}
            for name, env, extra in RUNS:
                r = run_json([BUILD_BENCH / "record_cost", mode, calls, args.reps], dict(envs[env], **extra))
                got[name] = r
                shown = {k: r[k] for k in ("ns_per_call", "end_ns_per_call", "cpu_ns_per_call") if k in r}
                print(f"{mode:10s} {name:30s} {shown}")
            key = KEY[mode]
            driver_share = got["icd only, C recording off"][key] - got["icd only"][key]
            before = got["layer --content, all Python"][key] - driver_share
            print(f"{mode:10s} {key}: content mode before (estimated) {before:.0f}, now "
                  f"{got['layer --content'][key]:.0f}: x{got['layer --content'][key] / before:.2f}; "
                  f"default layer {got['layer'][key]:.0f}")


if __name__ == "__main__":
    main()

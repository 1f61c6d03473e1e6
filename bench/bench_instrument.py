"""What `tessera run --instrument` costs: example wall times, per recorded command, per submit; one run.

Run: .venv/bin/python bench/bench_instrument.py [--runs N] [--calls C] [--reps R] [--submits S]
1. Examples (examples/shader_costs.py, compute_collatz.py, render_passes.py): the median wall time
   of N interleaved runs of `tessera run -- python EXAMPLE` and of `tessera run --instrument --
   python EXAMPLE` (embedded daemon and merge included, as a user runs it), and their ratio.
   Goal (issue #12): at most 3x.
2. Per recorded draw / dispatch: build/bench/record_cost (bench/record_cost.c: C calls of
   vkCmdDraw / vkCmdDispatch with a trivial pipeline bound, recording plus its share of
   vkEndCommandBuffer, best of R repetitions of C calls) in the driver + layer environment
   (bench/common.py) without and with TESSERA_INSTRUMENT: the difference is what instrumentation
   adds per recorded action, layer and driver together (the layer numbers the action; the driver
   takes its Python path to give it a resultIndex, a region and a descriptor-set bind).
3. Per submit: bench/instrument_submits.py (one command buffer of 1 or 16 dispatches of the
   data-dependent collatz.comp, submitted S times with a fence wait each, submit + wait timed)
   in the same two environments: the difference is what each submit costs with instrumentation,
   layer and driver together (the GPU's counting atomics, and the layer's readback of the
   completed submit: vkGetShaderInstrumentationValuesARM, clear, INSTRUMENTATION messages).
A benchmark, not a test: it never fails on a number.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import BUILD_BENCH, LAYER_ENV, REPO, build, environments, run_json

from tessera.tools.launch import LaunchConfig, environment

TESSERA = REPO / ".venv" / "bin" / "tessera"
EXAMPLES = ["shader_costs", "compute_collatz", "render_passes"]
INSTRUMENTED = "mali icd + layer --instrument"


def wall(argv: list) -> float:
    t = time.perf_counter()
    subprocess.run([str(a) for a in argv], capture_output=True, check=True)
    return time.perf_counter() - t


def examples(runs: int, tmp: Path) -> None:
    print(f"1. {'example':18s} {'plain':>9s} {'--instrument':>13s} {'ratio':>7s}   (median of {runs} runs each)")
    for name in EXAMPLES:
        app = [sys.executable, REPO / "examples" / f"{name}.py"]
        times: dict[bool, list[float]] = {False: [], True: []}
        for i in range(runs):
            for instrument in (False, True):
                out = tmp / f"{name}-{instrument}-{i}"
                flags = ["--instrument"] if instrument else []
                times[instrument].append(wall([TESSERA, "run", *flags, "--out", out, "--", *app]))
        plain, instr = statistics.median(times[False]), statistics.median(times[True])
        print(f"   {name:18s} {plain:8.2f}s {instr:12.2f}s {instr / plain:6.2f}x")


def per_action(envs: dict[str, dict[str, str]], calls: int, reps: int) -> None:
    print(f"2. per recorded command ({calls} calls, best of {reps}; ns per call, recording + its share of "
          "vkEndCommandBuffer)")
    for mode, what in (("draw", "vkCmdDraw"), ("dispatch", "vkCmdDispatch")):
        ns = {}
        for name in (LAYER_ENV, INSTRUMENTED):
            r = run_json([BUILD_BENCH / "record_cost", mode, calls, reps], envs[name])
            ns[name] = r["ns_per_call"] + r.get("end_ns_per_call", 0.0)
        plain, instr = ns[LAYER_ENV], ns[INSTRUMENTED]
        print(f"   {what:14s} driver + layer {plain:9.1f}   --instrument {instr:9.1f}   adds {instr - plain:+9.1f} ns")


def per_submit(envs: dict[str, dict[str, str]], submits: int) -> None:
    print(f"3. per submit ({submits} submits + fence waits of one pre-recorded command buffer; us per submit)")
    for dispatches in (1, 16):
        us = {}
        for name in (LAYER_ENV, INSTRUMENTED):
            r = run_json([sys.executable, REPO / "bench" / "instrument_submits.py", submits, dispatches], envs[name])
            us[name] = r["ns_per_submit"] / 1000
        plain, instr = us[LAYER_ENV], us[INSTRUMENTED]
        print(f"   {dispatches:2d} dispatch(es)  driver + layer {plain:8.1f}   --instrument {instr:8.1f}   "
              f"adds {instr - plain:+8.1f} us per submit")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each example in each mode (median)")
    parser.add_argument("--calls", type=int, default=20_000, help="recorded draws/dispatches per repetition")
    parser.add_argument("--reps", type=int, default=5, help="record_cost repetitions per process (best)")
    parser.add_argument("--submits", type=int, default=200, help="submits per run of instrument_submits.py")
    args = parser.parse_args()
    build()
    (REPO / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-instrument-", dir=REPO / "build") as tmp:
        session = Path(tmp) / "session"
        envs = environments(session)
        envs[INSTRUMENTED] = environment(LaunchConfig(session, instrument=True), envs[LAYER_ENV])
        examples(args.runs, Path(tmp))
        per_action(envs, args.calls, args.reps)
        per_submit(envs, args.submits)
    return 0


if __name__ == "__main__":
    sys.exit(main())

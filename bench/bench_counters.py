"""What the Mali counters (#27) cost the driver per GPU event: the timeline placing and writing events, counters off vs on.

What it measures, in one process, without Vulkan: icd/timeline.py's _Placer writing GPU events into a
GpuTrace in a temporary folder, as the timeline's worker does for each submit, for two workloads a
frame loop repeats (a dispatch of 20x15 groups of 8x8, and a 64x64 render pass of 4 draws storing
its RGBA8 target: two events), with a CounterModel (counters on, the default) and without
(TESSERA_COUNTERS=0). Each number is thread CPU time per event, best of R repetitions of N events;
runs alternate off/on so that load drifts over both alike. Printed: ns per event and the difference.
This is the cost the driver adds per event; bench_layer.py's frame modes show it inside whole frames.
A benchmark, not a test: it never fails on a number.

Run: .venv/bin/python bench/bench_counters.py [--events N] [--reps R]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from tessera.icd.counters import CounterModel
from tessera.icd.profiles import PROFILES
from tessera.icd.recording import Draw, Work
from tessera.icd.scheduler import EmulatedGpu, QueueOrder
from tessera.icd.timeline import PassRun, _Placer
from tessera.icd.trace import GpuTrace
from tessera.vkapi.render_passes import PassInfo


def per_event_ns(counters: bool, events: int, kind: str) -> float:
    profile = PROFILES["mali-g720"]
    with tempfile.TemporaryDirectory() as d:
        cm = CounterModel.for_profile(profile) if counters else None
        trace = GpuTrace(Path(d), counters=cm)
        tl = SimpleNamespace(profile=profile, trace=trace, _submissions=1, _render_pass_instances=0, _counters=cm)
        placer = _Placer(tl, SimpleNamespace(labels=[]), 0, EmulatedGpu(), QueueOrder(), 0)
        work = Work("dispatch", "compute", "vkCmdDispatch", {"groups": [20, 15, 1], "group_size": [8, 8, 1]},
                    invocations=20 * 15 * 64, cycles=12.0)
        info = PassInfo("vkCmdBeginRendering", 0, 64, 64, 1, 1, [], 0, 64 * 64 * 4, True)
        draws = [Draw(6, 2, False, 20.0, 10.0, count=4)]
        t = time.thread_time_ns()
        if kind == "dispatch":
            for i in range(events):
                placer._emit_work(work, ["frame", f"t{i}"], 0xCB)
            n = events
        else:
            for i in range(events // 2):
                placer._emit_pass(PassRun(info, ["frame", f"t{i}"], 0xCB, draws))
            n = events // 2 * 2
        dt = time.thread_time_ns() - t
        trace.close()
    return dt / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    for kind in ("dispatch", "render pass"):
        best = {False: float("inf"), True: float("inf")}
        for _ in range(args.reps):
            for on in (False, True):
                best[on] = min(best[on], per_event_ns(on, args.events, kind))
        print(f"{kind:12s} events: counters off {best[False]:7.0f} ns/event, on {best[True]:7.0f} ns/event, "
              f"added {best[True] - best[False]:+6.0f} ns ({best[True] / best[False] - 1:+.1%})")


if __name__ == "__main__":
    main()

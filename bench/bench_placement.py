"""What placing GPU events on the emulated timeline costs: Timeline.submit + settle of frames of labelled dispatches.

What it measures: a Timeline (icd/timeline.py) of the default GPU profile writing to a temporary session
folder; F frames, each one batch of one command buffer holding D dispatches, each inside its own t<tag> label
(as the layer tags them), handed to `Timeline.submit` and settled at once (what a fence wait does); once with
new Works each frame, once with one frame's ops again under new tags (a reused recording's, vkapi/replay.py:
placed from its plan, icd/placement_plans.py), in Python and (when the driver shim is built) in C. Printed: µs per frame and per GPU event (the walk, the timing model, the counters, the event's encoding, one write per
frame), best of R runs. No Vulkan: the op lists are built here, as the driver's recording builds them.
A benchmark, not a test.

Run: .venv/bin/python bench/bench_placement.py [--frames F] [--dispatches D] [--runs R]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import cffi

from tessera.icd import shim_spec
from tessera.icd.placement_plans import NativePlacer
from tessera.icd.profiles import DEFAULT_PROFILE, PROFILES
from tessera.icd.recording import Work
from tessera.icd.replay import ReplayedOps
from tessera.icd.timeline import Timeline, batch
from tessera.schemas.labels import tag_label
from tessera.vkapi import paths
from tessera.vkapi.ops import LABEL_END, LabelBegin


def frames(count: int, dispatches: int, reused: bool) -> list[list]:
    """The frames' ops: new Works each frame, or (`reused`) one frame's ops again with new tag labels,
    as a reused recording's are (vkapi/replay.py; icd/replay.py's ReplayedOps, placed from a plan)."""
    def ops_of(works: list[Work], first_tag: int) -> list:
        ops: list = []
        for d, work in enumerate(works):
            ops += [LabelBegin(tag_label(first_tag + d)), work, LABEL_END]
        return ops

    def new_works() -> list[Work]:
        return [Work("dispatch", "compute", "vkCmdDispatch", {"groups": (1, 1, 1)}, invocations=64)
                for _ in range(dispatches)]

    if not reused:
        return [ops_of(new_works(), f * dispatches + 1) for f in range(count)]
    product_ops = ops_of(new_works(), 1)
    product = SimpleNamespace(ops=tuple(product_ops),
                              tag_ops=tuple((3 * d, LabelBegin, d) for d in range(dispatches)))
    out = []
    for f in range(count):
        tags = list(range(f * dispatches + 1, (f + 1) * dispatches + 1))
        ops = ReplayedOps(ops_of([product_ops[3 * d + 1] for d in range(dispatches)], tags[0]))
        ops.product, ops.tags = product, tags
        out.append(ops)
    return out


def native_placer() -> NativePlacer | None:
    """The driver shim's placement in C (icd/placement_plans.NativePlacer), loaded with cffi's ABI mode;
    None when the shim is not built."""
    library = paths.BUILD_DIR / shim_spec.LIBRARY
    if not library.exists():
        return None
    ffi = cffi.FFI()
    ffi.cdef(shim_spec.PLACEMENT_CDEF)
    return NativePlacer(ffi, ffi.dlopen(str(library)))


def run(count: int, dispatches: int, reused: bool, native: NativePlacer | None = None) -> float:
    """Seconds to place `count` frames (each submitted and settled)."""
    with tempfile.TemporaryDirectory() as folder:
        timeline = Timeline(PROFILES[DEFAULT_PROFILE], Path(folder))
        timeline.native = native
        queue = SimpleNamespace(device=SimpleNamespace(physical=object()), labels=[])
        work = frames(count, dispatches, reused)
        start = time.perf_counter()
        for ops in work:
            timeline.submit(queue, [batch([SimpleNamespace(ops=ops, address=0x1000)], [], [])])
            timeline.settle(block=True)
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--dispatches", type=int, default=8, help="labelled dispatches per frame")
    ap.add_argument("--runs", type=int, default=3, help="runs; the best is printed")
    args = ap.parse_args()
    native = native_placer()
    cases = [(False, None), (True, None)] + ([(True, native)] if native is not None else [])
    for reused, placer in cases:
        best = min(run(args.frames, args.dispatches, reused, placer) for _ in range(args.runs))
        per_frame = best / args.frames
        what = ("the same Works each frame (a reused recording)" if reused else "new Works each frame") + \
            (", its plan placed in C" if placer is not None else "")
        print(f"placing {args.frames} frames of {args.dispatches} labelled dispatches, {what} (best of {args.runs}): "
              f"{per_frame * 1e6:.1f} us per frame, {per_frame / args.dispatches * 1e6:.2f} us per GPU event")


if __name__ == "__main__":
    main()

"""The timeline's placer alone: works and passes placed and written as GPU events, read back (the counter
tests read their args)."""
from __future__ import annotations

from types import SimpleNamespace

from tessera.icd.counters import CounterModel
from tessera.icd.scheduler import EmulatedGpu, QueueOrder
from tessera.icd.timeline import Templates, _Placer
from tessera.icd.trace import GpuTrace
from tessera.schemas.perfetto import read_packets


def placed_packets(tmp_path, profile, works=(), passes=(), passes_first: bool = False) -> list:
    """The trace packets of `works` (each in a t1 label, command buffer 0xCB) and `passes` (PassRuns) placed
    on `profile`'s GPU with its counters, in that order (or the passes first)."""
    trace = GpuTrace(tmp_path, counters=CounterModel.for_profile(profile))
    tl = SimpleNamespace(profile=profile, trace=trace, _submissions=1, _render_pass_instances=0,
                         _counters=CounterModel.for_profile(profile), templates=Templates())
    placer = _Placer(tl, SimpleNamespace(labels=[]), 0, EmulatedGpu(), QueueOrder(), 0)
    emit = [*((placer._emit_work, (w, ["t1"], 0xCB)) for w in works), *((placer._emit_pass, (p,)) for p in passes)]
    if passes_first:
        emit = emit[len(works):] + emit[:len(works)]
    for fn, args in emit:
        fn(*args)
    trace.flush()
    trace.close()
    return list(read_packets(trace.path))


def placed_events(tmp_path, profile, works=(), passes=(), passes_first: bool = False) -> list:
    """The GpuRenderStageEvents of placed_packets."""
    return [p.gpu_render_stage_event for p in placed_packets(tmp_path, profile, works, passes, passes_first)
            if p.HasField("gpu_render_stage_event")]

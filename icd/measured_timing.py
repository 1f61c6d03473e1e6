"""Measured shader cost on the emulated timeline: instrumented work is timed by its block executions.

Role: a draw or dispatch recorded while a VK_ARM_shader_instrumentation object is active, with an
instrumented pipeline (or shader object), counts every basic block's thread executions into its
own region of the object's memory (instrumentation.py). Its Work / Draw gets an `at_completion`
(recording.py) that, on the timeline's worker once the submit's GPU work has completed
(vkapi/fences.py), takes the executions that submit added and replaces the compiler model's static
typical-path cost with the measured one:

  measured cycles M = the bound-pipe cycles (compiler PipeCycles) of Σ_blocks executions ×
      the block's thread-operations per pipe (BlockCost.ops, the same figures the metrics use),
      i.e. the typical-path formula of the compiler model applied to what really ran;
  compute:  Work.cycles = M / invocations, so the phase is JOB_SETUP_CYCLES + M / cores;
  fragment: Draw.fragment_cycles = M / (draws × render area × layers × DRAW_COVERAGE), so the
      main phase's shader term (fragments × fragment cycles / cores, fragments being the
      timing model's area × draws × DRAW_COVERAGE) is M / cores for this draw. The pixel-rate
      term and the tiles keep the area-based fragment count (timing.py).

The measured figures reach the work as a counters.StageCost (the cycles above carrying, per thread,
the executions' thread-operations and cycles per pipe), from which the Mali counters take the
arithmetic instructions and unit issue cycles (docs/counters.md "Shader instructions and issue cycles").

Vertex shading keeps the static estimate (the binning phase weighs vertex cycles per draw, not
per vertex, so a per-draw measured figure would not be exact). A command that makes several
Draws (an indirect multi-draw) has one region: its measurement is shared by its draws.

Per submit: the counters accumulate until the application clears them, so each reading takes the
difference from the previous reading of that region; a clear
(vkClearShaderInstrumentationMetricsARM, which the application may call only once the work is
done) first banks what the driver has not read yet (InstrumentationObject.before_clear). A
command buffer re-submitted before its earlier submit completed: the first reading after both
ran takes both submits' executions, the other none.

Not measured (static estimate kept): draws recorded in a secondary command buffer inside a render
pass (the pass's area is not in that buffer), trace rays and stages the instrumentation does not
rewrite.

Threads: readers are made by the threads recording command buffers, read on the timeline's worker
and banked by the thread that clears: one lock, the MeasuredTiming feature's (`lock`).

State: a command buffer's MeasuredRecording, in this module's slot on it (vkapi/slots.py).
"""
from __future__ import annotations

import threading
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi.ops import PassBegin, PassEnd
from tessera.vkapi.submits import command_buffers
from tessera.vkapi.vkconst import vk

from . import timing
from .counters import StageCost
from .driver import Driver
from .indirect_sizes import then
from .objects import CommandBuffer
from .recording import Draw, Work

MEASURED = "block executions"                # Work.info["shader_cost"]: the trace's `Shader cost` arg


class _Counts:
    """The executions one action's region gained, per submit of its command buffer.

    `submitted`: submits handed to the timeline whose reading has not happened; `banked`: the
    executions of completed submits, taken before they could mix with later ones (at a re-submit
    of the command buffer, which Vulkan allows only once its earlier executions are complete, and
    before a clear or a destroy of the object), oldest first. A reading takes the oldest banked value, else what the region
    gained since the last reading. `lock`: the MeasuredTiming's, held for every change of the counts."""

    def __init__(self, ffi, obj, region, lock: threading.Lock) -> None:
        self.ffi, self.obj, self.region, self.lock = ffi, obj, region, lock
        self.seen: Any = None       # the region's values at the last reading (None: zeros)
        self.banked: deque = deque()
        self.submitted = 0

    def _now(self):
        import numpy as np

        r = self.region
        n = r.pipeline.counters
        state = self.obj.device.instrumentation
        if state is None or state.objects.get(self.obj.handle) is not self.obj:   # destroyed: its memory is gone
            return np.zeros(n, dtype=np.int64)
        return np.frombuffer(self.ffi.buffer(r.chunk.mapped + r.offset, n * 4), dtype=np.uint32).astype(np.int64)

    def _gained(self):
        now = self._now()
        if self.seen is None:
            return now, now
        gained = now - self.seen
        return now, (now if (gained < 0).any() else gained)   # cleared behind our back: what is there

    def take(self):
        """On the timeline's worker, once per submit, after its GPU work completed."""
        with self.lock:
            self.submitted = max(0, self.submitted - 1)
            if self.banked:
                return self.banked.popleft()
            now, gained = self._gained()
            self.seen = now
        return gained

    def bank(self, clearing: bool = False) -> None:
        """Before a re-submit, or a clear or destroy (`clearing`), with the lock held: the completed,
        unread submits' executions are kept aside (as one value)."""
        unread = self.submitted > len(self.banked)
        if unread or clearing:       # (otherwise nothing ran since the last reading: no need to look)
            now, gained = self._gained()
            if unread or gained.any():
                self.banked.append(gained)
        if clearing:
            self.seen = None
        elif unread:
            self.seen = now


class _Measure:
    """One instrumented command: its reader and the items it made; read once per submit."""

    def __init__(self, reader: _Counts, stage, items: list, costs, area: int | None) -> None:
        self.reader, self.stage, self.items, self.costs, self.area = reader, stage, items, costs, area

    def cycles(self):
        """The executions' bound-pipe cycles, thread-operations per pipe and cycles per pipe (totals)."""
        import numpy as np
        from tessera.compiler.analysis import PipeCycles

        s = self.stage
        gained = self.reader.take()[s.base:s.base + s.blocks].astype(np.float64)
        ops = [float(x) for x in gained @ np.asarray(s.ops, dtype=np.float64).reshape(s.blocks, 6)]
        pc = PipeCycles.of(ops, self.costs)
        return pc.bound_cycles, ops, (pc.fma, pc.cvt, pc.sfu, pc.ls, pc.v, pc.t)

    @staticmethod
    def _per(n: float, measured, ops, pipe_cycles) -> StageCost:
        """The measured totals per thread (`n` threads), carrying the per-pipe figures the Mali counters
        take (icd/counters.py StageCost)."""
        return StageCost(measured / n, [o / n for o in ops], [c / n for c in pipe_cycles])

    def compute(self) -> None:
        work = self.items[0]
        measured, ops, pipe_cycles = self.cycles()
        if work.invocations > 0:
            work.cycles = self._per(work.invocations, measured, ops, pipe_cycles)
            work.info["shader_cost"] = MEASURED

    def fragment(self) -> None:
        draws = sum(d.count for d in self.items)
        measured, ops, pipe_cycles = self.cycles()
        if draws > 0 and self.area:
            per_draw = self._per(draws * self.area * timing.DRAW_COVERAGE, measured, ops, pipe_cycles)
            for d in self.items:
                d.fragment_cycles = per_draw


@dataclass
class MeasuredRecording:
    """This module's state on a command buffer (its slot, dropped at reset): one recording's."""
    mark: int | None = None     # where the items of the action being recorded start in cb.ops (mark -> action)
    scanned: int = 0            # ops scanned by _pass_area so far
    area: int | None = None     # the render pass area there (None: outside a pass)
    readers: list[_Counts] = field(default_factory=list)   # of the actions recorded in it and its secondaries


def _pass_area(cb: CommandBuffer, state: MeasuredRecording) -> int | None:
    """width × height × layers of the render pass being recorded in `cb` (as timing.render_pass), None
    outside one. Scans only the ops recorded since its last call."""
    ops = cb.ops
    area = state.area
    for op in ops[state.scanned:]:
        kind = type(op)
        if kind is PassBegin:
            info = op.info
            area = info.width * info.height * max(1, info.layers)
        elif kind is PassEnd:
            area = None
    state.scanned, state.area = len(ops), area
    return area


class MeasuredTiming:
    """Instrumented draws and dispatches timed by their measured block executions; one method per command
    (HookSet.bind). Each action command is marked at record time (`at_record_vk…`: where its items will
    start in cb.ops) and measured in its before-hook, after recording.py appended them. Its state: a
    command buffer's MeasuredRecording; the live readers of each instrumentation object (`readers`), and
    the lock every change of their counts holds (`lock`: the application's threads submit, the timeline's
    worker reads)."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi = drv, drv.ffi
        self.report = drv.hooks.errors.report
        self._costs: Any = None     # the GPU's compiler-model costs, loaded with the first measured command
        self.lock = threading.Lock()
        self.readers: dict[int, weakref.WeakSet] = {}    # instrumentation object handle -> its live readers

    def _reader(self, obj, region) -> _Counts:
        reader = _Counts(self.ffi, obj, region, self.lock)
        with self.lock:
            live = self.readers.get(obj.handle)
            if live is None:
                live = self.readers[obj.handle] = weakref.WeakSet()
                obj.before_clear.append(lambda key=obj.handle: self._bank_all(key))
            live.add(reader)
        return reader

    def _bank_all(self, key: int) -> None:
        with self.lock:
            for reader in list(self.readers.get(key, ())):
                reader.bank(clearing=True)

    def costs(self) -> Any:
        if self._costs is None:
            from tessera.compiler.costs import gpu_costs

            self._costs = gpu_costs(self.drv.profile.key)
        return self._costs

    def _mark(self, cb: CommandBuffer) -> None:
        """Before recording.py appends the command's items: where they will start."""
        if cb.instrumentation is not None:
            cb.slot(MeasuredRecording).mark = len(cb.ops)

    def _measure(self, cb: CommandBuffer, kind: str) -> None:
        """`kind` "compute" or "fragment": the items the command just made get an at_completion that
        replaces their static cost with the measured one."""
        obj = cb.instrumentation
        if obj is None:             # not marked either (mark runs just before, on this thread)
            return
        state = cb.peek(MeasuredRecording)
        start = state.mark if state is not None else None
        if start is None:
            return
        state.mark = None
        region = obj.regions.get(obj.next_index - 1)   # the index this command just took
        if region is None:                             # uninstrumented pipeline: no counters
            return
        item = Work if kind == "compute" else Draw
        items = [op for op in cb.ops[start:] if type(op) is item]
        stage = next((s for s in region.pipeline.stages if s.name == kind), None)
        if not items or stage is None:
            return
        area = _pass_area(cb, state) if kind == "fragment" else None
        if kind == "fragment" and area is None:
            return
        reader = self._reader(obj, region)
        state.readers.append(reader)
        m = _Measure(reader, stage, items, self.costs(), area)
        then(items[0], m.compute if kind == "compute" else m.fragment, report=self.report)
        cb.needs_completion = True

    # ---- dispatches ------------------------------------------------------------------------------
    def at_record_vkCmdDispatch(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDispatch(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "compute")

    def at_record_vkCmdDispatchBase(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDispatchBase(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "compute")

    def at_record_vkCmdDispatchIndirect(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDispatchIndirect(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "compute")

    # ---- draws -----------------------------------------------------------------------------------
    def at_record_vkCmdDraw(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDraw(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawIndexed(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawIndexed(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawIndirect(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawIndirect(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawIndexedIndirect(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawIndexedIndirect(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawIndirectCount(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawIndirectCount(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawIndexedIndirectCount(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawIndexedIndirectCount(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawMultiEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawMultiEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawMultiIndexedEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawMultiIndexedEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawIndirectByteCountEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawIndirectByteCountEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawMeshTasksEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawMeshTasksEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawMeshTasksIndirectEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawMeshTasksIndirectEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    def at_record_vkCmdDrawMeshTasksIndirectCountEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._mark(cb)

    def before_vkCmdDrawMeshTasksIndirectCountEXT(self, cb: CommandBuffer, commandBuffer, *args) -> None:
        self._measure(cb, "fragment")

    # ---- secondaries and submits -----------------------------------------------------------------
    def before_vkCmdExecuteCommands(self, cb: CommandBuffer, commandBuffer, count, pCommandBuffers):
        for i in range(count):
            secondary = self.drv.objects.get(pCommandBuffers[i], CommandBuffer)
            if readers_of(secondary):
                cb.slot(MeasuredRecording).readers.extend(readers_of(secondary))

    # A submit of a command buffer: Vulkan allows it only once the buffer's earlier executions are
    # complete (not pending, spec 6.4), so what they counted is banked before this one adds to it.
    def _submitted(self, name: str, count, pSubmits) -> list:
        if not self.readers:            # nothing measured by this driver: submits pay nothing more
            return []
        out = []
        for h in command_buffers(name, count, pSubmits):
            out += readers_of(self.drv.objects.get(h, CommandBuffer))
        return out

    def before_vkQueueSubmit(self, queue, vkqueue, count, pSubmits, fence):
        self.before_submit(self._submitted("vkQueueSubmit", count, pSubmits))

    def after_vkQueueSubmit(self, queue, result, vkqueue, count, pSubmits, fence):
        self.after_submit(self._submitted("vkQueueSubmit", count, pSubmits), result)

    def before_vkQueueSubmit2(self, queue, vkqueue, count, pSubmits, fence):
        self.before_submit(self._submitted("vkQueueSubmit2", count, pSubmits))

    def after_vkQueueSubmit2(self, queue, result, vkqueue, count, pSubmits, fence):
        self.after_submit(self._submitted("vkQueueSubmit2", count, pSubmits), result)

    def before_submit(self, readers: list) -> None:
        with self.lock:
            for reader in readers:
                reader.bank()
                reader.submitted += 1

    def after_submit(self, readers: list, result) -> None:
        if result != vk.VK_SUCCESS:     # nothing runs: the timeline never reads it
            with self.lock:
                for reader in readers:
                    reader.submitted = max(0, reader.submitted - 1)


def readers_of(cb: CommandBuffer) -> list:
    """The readers of the actions recorded in `cb` (and the secondaries it executes) since its
    last reset."""
    state = cb.peek(MeasuredRecording)
    return state.readers if state is not None else []


def register(drv: Driver) -> None:
    drv.hooks.bind(MeasuredTiming(drv))

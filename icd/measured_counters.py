"""Measured Mali counters: the backend counts threads and primitives with pipeline-statistics queries.

Role: with `TESSERA_COUNTERS=measured` (icd/settings.py; `tessera run --counters measured`) the
driver brackets, on the backend, each render pass instance and each indirect dispatch with a
query of its own pool (VK_QUERY_TYPE_PIPELINE_STATISTICS: input-assembly primitives, vertex, fragment and
compute shader invocations, clipping primitives), and reads the result once the submit's GPU work
has completed, as it reads indirect arguments (`then`, icd/indirect_sizes.py: Draw / Work
`at_completion` on the timeline's worker). The counter model (icd/counters.py) then writes the
measured MaliNonFragThread, MaliFragThread, MaliGeomTotalPrim / MaliGeomTrianglePrim (and their
warps) instead of its estimates, and the GPU slice says which (`Measured`): docs/counters.md
"Measured". The clipping statistics are read but not shown: lavapipe's clipping primitives count
only what its clipper outputs (0 for primitives wholly inside or outside the view volume), so
visible primitives (MaliGeomVisiblePrim) are counted instead from positions captured by transform
feedback (visible_prims.py); `pass_stats` adds them to a pass's reading.

The queries are the driver's: its pools (one per device made in `created`, more if a device needs
more slots at once; all destroyed in `destroyed`), recorded through the device's `next` table, so
the application never sees them. Vulkan's rules, kept:

  - every query is reset (vkCmdResetQueryPool), begun and ended outside any render pass instance:
    a pass is bracketed from before its begin to after its end (so one query covers all its
    subpasses' draws, and multiview needs no per-view queries), an indirect dispatch around itself
    (a direct one's invocations are its recorded groups x work-group size: what the query would count);
  - one pipeline-statistics query active at a time in a command buffer: once the application has made
    a pool of that type on the device, nothing is bracketed (it could begin its query around or inside
    any of ours; its work keeps the model), nor in a secondary command buffer that inherits pipeline
    statistics. Watching the application's own vkCmdBeginQuery/vkCmdEndQuery instead would put every
    query of every application through Python, counters measured or not;
  - no query is active across vkCmdExecuteCommands (the backend lacks inheritedQueries): a pass
    whose contents are secondary command buffers, or with several subpasses (a later subpass may
    execute secondaries), is not measured, nor is a dynamic-rendering pass that suspends or resumes;
  - the commands recorded in C (vkapi/recorder.py) are forwarded at once, before Python sees them,
    so in every command buffer of a device with the feature the render pass begins and ends and the
    dispatches take their Python hooks (`Recorder.python_brackets`); draws, binds, barriers and
    transfers stay in C, their records applied before the pass's end hook reads its Draws. That,
    the readings (one vkGetQueryPoolResults per pool for all the brackets of a recording: `_Batch`)
    and the Python submit path (the readings need the completion fence) are the cost of the option
    (docs/benchmarks.md "Session 6: #27 measured").

A query's slot returns to its pool when nothing refers to its reading any more (the op lists that
hold it are gone): a re-submitted command buffer keeps its slots and re-records nothing; the reset
it recorded runs at each execution. A reading whose query is not available (the buffer was
submitted again before the first execution's reading: the second reset made it unavailable) keeps
the model's values for that workload.

Threads: slots are taken by the threads recording command buffers and given back by whichever
drops the last reference (a list append, atomic under the GIL); pools are added under `lock`;
readings run on the timeline's worker. State: the device's `DevicePools` (its slot), a command
buffer's `_Recording` (its slot, dropped at reset).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace

from tessera.vkapi.ops import PassBegin
from tessera.vkapi.vkconst import vk

from .driver import Driver
from .feature import DeviceRequest, Feature, enable_core_features
from .indirect_sizes import then
from .objects import CommandBuffer, Device
from .recording import Draw, Work
from .visible_prims import pass_visible

# The statistics counted, in bit order (the order vkGetQueryPoolResults writes them).
STATISTICS = (
    ("input_vertices", 0x1),        # INPUT_ASSEMBLY_VERTICES
    ("input_primitives", 0x2),      # INPUT_ASSEMBLY_PRIMITIVES
    ("vertex_invocations", 0x4),    # VERTEX_SHADER_INVOCATIONS
    ("clipping_invocations", 0x20),  # CLIPPING_INVOCATIONS
    ("clipping_primitives", 0x40),  # CLIPPING_PRIMITIVES
    ("fragment_invocations", 0x80),  # FRAGMENT_SHADER_INVOCATIONS
    ("compute_invocations", 0x400),  # COMPUTE_SHADER_INVOCATIONS
)
FLAGS = sum(bit for _, bit in STATISTICS)
POOL_SIZE = 1024                    # queries per pool
_RESULT_FLAGS = 0x1 | 0x4           # VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT
_STRIDE = 8 * (len(STATISTICS) + 1)
_PIPELINE_STATISTICS = 1            # VK_QUERY_TYPE_PIPELINE_STATISTICS
_SECONDARY_CONTENTS = (1, 1000451000)   # VK_SUBPASS_CONTENTS_SECONDARY_COMMAND_BUFFERS, _INLINE_AND_SECONDARY_KHR
_RENDERING_SECONDARY = 0x1          # VK_RENDERING_CONTENTS_SECONDARY_COMMAND_BUFFERS_BIT
_RENDERING_SUSPEND_RESUME = 0x2 | 0x4


@dataclass(frozen=True)
class Stats:
    """One reading: the pipeline statistics of a bracketed pass part or dispatch."""
    input_vertices: int
    input_primitives: int
    vertex_invocations: int
    clipping_invocations: int
    clipping_primitives: int
    fragment_invocations: int
    compute_invocations: int
    # a render pass's visible primitives, counted from its draws' captured positions (visible_prims.py)
    visible: int | None = None

    def __add__(self, other: "Stats") -> "Stats":
        return Stats(*(a + b for a, b in zip(self.values(), other.values())))

    def values(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name, _ in STATISTICS)


class Slot:
    """One query of a device's pools, taken for one bracket; given back when unreferenced."""
    __slots__ = ("pools", "pool", "handle", "index")

    def __init__(self, pools: "DevicePools", pool: int, handle, index: int) -> None:
        self.pools, self.pool, self.handle, self.index = pools, pool, handle, index

    def __del__(self) -> None:
        self.pools.free[self.pool].append(self.index)


class DevicePools:
    """The driver's pipeline-statistics query pools of one device."""

    def __init__(self, ffi, dev: Device) -> None:
        self.ffi, self.dev = ffi, dev
        self.handles: list = []                 # VkQueryPool per pool
        self.free: list[list[int]] = []         # per pool: the slots not taken
        self.lock = threading.Lock()
        self.destroyed = False
        self.query_pools: dict[int, int] = {}  # the application's pipeline-statistics pools (handles)
        nxt = dev.next     # the backend's commands, looked up once (a bracket calls three)
        self.reset, self.begin, self.end = nxt.vkCmdResetQueryPool, nxt.vkCmdBeginQuery, nxt.vkCmdEndQuery

    def add_pool(self) -> bool:
        ffi, dev = self.ffi, self.dev
        info = ffi.new("VkQueryPoolCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                                   "queryType": _PIPELINE_STATISTICS, "queryCount": POOL_SIZE,
                                                   "pipelineStatistics": FLAGS})
        out = ffi.new("VkQueryPool *")
        if dev.next.vkCreateQueryPool(dev.handle, info, ffi.NULL, out) != vk.VK_SUCCESS:
            return False
        self.handles.append(out[0])
        self.free.append(list(range(POOL_SIZE - 1, -1, -1)))
        return True

    def take(self) -> Slot | None:
        for i, free in enumerate(self.free):
            try:
                index = free.pop()
            except IndexError:
                continue
            return Slot(self, i, self.handles[i], index)
        with self.lock:
            if self.destroyed or not self.add_pool():
                return None
        return self.take()

    def destroy(self) -> None:
        with self.lock:
            self.destroyed = True
            handles, self.handles = self.handles, []
        for handle in handles:
            self.dev.next.vkDestroyQueryPool(self.dev.handle, handle, self.ffi.NULL)


class Reading:
    """A bracket's query, read once per execution on the timeline's worker (`read`): `stats` is the
    last reading, None when the query was not available. The readings of one recording are read
    together (`batch`): lavapipe's vkGetQueryPoolResults costs ~10 µs a call however many queries
    it reads (1 or 10: the same), so one call per run of consecutive slots serves the brackets of an
    execution."""
    __slots__ = ("slot", "pools", "stats", "fresh")

    def __init__(self, slot: Slot, pools: DevicePools) -> None:
        self.slot, self.pools, self.stats = slot, pools, None
        self.fresh = False      # `stats` came from a batch read this reading has not consumed yet

    def read(self, batch: "_Batch | None" = None) -> Stats | None:
        """This execution's statistics (`batch`: its recording's readings; the batch holds its
        readings, not they it, so no reference cycle keeps a slot from its pool)."""
        if batch is None:
            _Batch.fetch([self])
        elif self is batch.readings[0] or not self.fresh:   # the first of an execution reads them all
            _Batch.fetch(batch.readings)
        self.fresh = False
        return self.stats


class _Batch:
    """The readings of one recording whose results are read at completion (those given a `then`),
    in record order: the first one's read starts an execution's readings and fetches them all."""
    __slots__ = ("readings",)

    def __init__(self) -> None:
        self.readings: list[Reading] = []

    @staticmethod
    def fetch(readings: list[Reading]) -> None:
        """One vkGetQueryPoolResults (64-bit, with availability) per run of consecutive slots of one
        pool (a recording's slots are usually one run: taken in order); no query outside the
        readings' own is read."""
        pools = readings[0].pools
        for r in readings:
            r.stats, r.fresh = None, True
        if pools.destroyed:
            return
        ffi, dev = pools.ffi, pools.dev
        n = len(STATISTICS)
        ordered = sorted(readings, key=lambda r: (r.slot.pool, r.slot.index))
        start = 0
        for i in range(1, len(ordered) + 1):
            if i < len(ordered) and ordered[i].slot.pool == ordered[start].slot.pool and \
                    ordered[i].slot.index == ordered[i - 1].slot.index + 1:
                continue
            run, start = ordered[start:i], i
            lo, count = run[0].slot.index, len(run)
            data = ffi.new("uint64_t[]", (n + 1) * count)
            res = dev.next.vkGetQueryPoolResults(dev.handle, run[0].slot.handle, lo, count, _STRIDE * count, data,
                                                 _STRIDE, _RESULT_FLAGS)
            if res not in (vk.VK_SUCCESS, vk.VK_NOT_READY):
                continue
            values = (_UNPACK.get(count) or _unpack(count))(ffi.buffer(data))
            for k, r in enumerate(run):
                at = k * (n + 1)
                if values[at + n]:
                    r.stats = Stats(*values[at:at + n])


_UNPACK: dict = {}


def _unpack(count: int):
    import struct

    fn = _UNPACK[count] = struct.Struct(f"<{(len(STATISTICS) + 1) * count}Q").unpack
    return fn


@dataclass
class _Recording:
    """This module's state on a command buffer (its slot, dropped at reset)."""
    blocked: bool = False               # a secondary inheriting pipeline statistics: no queries of ours
    pass_reading: Reading | None = None  # the query around the pass being recorded
    pass_start: int = 0                 # where its ops start in cb.ops
    work: Work | None = None            # the dispatch being recorded, bracketed
    work_reading: Reading | None = None
    batch: _Batch | None = None         # the readings read at completion, read together


def _batched(state: _Recording, reading: Reading) -> _Batch:
    if state.batch is None:
        state.batch = _Batch()
    state.batch.readings.append(reading)
    return state.batch


def _measure_work(work: Work, reading: Reading, batch: _Batch | None = None) -> None:
    stats = reading.read(batch)
    if stats is not None:
        work.measured = stats
        work.invocations = stats.compute_invocations
        work.estimated = False


def _measure_pass(reading: Reading, batch: _Batch | None = None) -> None:
    reading.read(batch)


class MeasuredCounters(Feature):
    """The brackets and their readings, one method per command (HookSet.bind); on only for devices
    made while `TESSERA_COUNTERS=measured` (Driver.measured_counters: also needs a GPU with Arm's
    counter table) whose backend has pipelineStatisticsQuery."""

    label = "measured counters (pipeline-statistics queries)"
    defers_begin = False   # its begin hook routes the buffer's commands to Python

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi, self.hooks = drv, drv.ffi, drv.hooks
        self.report = drv.hooks.errors.report

    # ---- device lifecycle (icd/feature.py) ---------------------------------------------------
    def wants(self, request: DeviceRequest) -> bool:
        if not self.drv.measured_counters:
            return False
        ffi, phys = self.ffi, request.phys
        f2 = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2})
        phys.next.vkGetPhysicalDeviceFeatures2(phys.handle, f2)
        return bool(f2.features.pipelineStatisticsQuery)

    def enable(self, request: DeviceRequest) -> None:
        """pipelineStatisticsQuery on in the driver's copy of the create info (never the application's)."""
        enable_core_features(request.ffi, request.info, request.keep, "pipelineStatisticsQuery")

    def created(self, dev: Device, request: DeviceRequest) -> None:
        pools = DevicePools(self.ffi, dev)
        if not pools.add_pool():
            raise RuntimeError("the backend made no pipeline-statistics query pool")
        dev.slot(DevicePools, lambda: pools)

    def destroyed(self, dev: Device) -> None:
        pools = dev.drop(DevicePools)
        if pools is not None:
            pools.destroy()

    # ---- the application's own pipeline-statistics queries -----------------------------------
    def after_vkCreateQueryPool(self, dev, result, device, pCreateInfo, pAllocator, pQueryPool):
        pools = dev.peek(DevicePools)
        if pools is not None and result == vk.VK_SUCCESS and pCreateInfo.queryType == _PIPELINE_STATISTICS:
            pools.query_pools[int(pQueryPool[0])] = 1

    def before_vkDestroyQueryPool(self, dev, device, queryPool, pAllocator):
        pools = dev.peek(DevicePools)
        if pools is not None:
            pools.query_pools.pop(int(queryPool), None)

    # ---- command buffers ---------------------------------------------------------------------
    def after_vkBeginCommandBuffer(self, cb, result, commandBuffer, pBeginInfo):
        """Every command buffer of a device with the feature records its pass begins and ends and its
        dispatches through their Python hooks (the brackets go around commands C would forward at once)."""
        if result != vk.VK_SUCCESS or cb.device.peek(DevicePools) is None:
            return
        self.hooks.recorder.python_brackets(commandBuffer, True)
        inherit = pBeginInfo.pInheritanceInfo
        if cb.level != vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY and inherit != self.ffi.NULL and \
                inherit.pipelineStatistics:
            cb.slot(_Recording).blocked = True

    def _begin(self, cb: CommandBuffer, commandBuffer) -> tuple[Reading | None, "_Recording | None"]:
        """Reset and begin a query of ours now (outside any render pass), if Vulkan allows one here:
        the reading and the command buffer's state."""
        pools = cb.device.peek(DevicePools)
        if pools is None or pools.query_pools:   # the application counts too: its queries could overlap ours
            return None, None
        state = cb.slot(_Recording)
        if state.blocked or state.pass_reading is not None or state.work_reading is not None:
            return None, state
        slot = pools.take()
        if slot is None:
            return None, state
        handle, index = slot.handle, slot.index
        pools.reset(commandBuffer, handle, index, 1)
        pools.begin(commandBuffer, handle, index, 0)
        return Reading(slot, pools), state

    def _end(self, commandBuffer, reading: Reading) -> None:
        slot = reading.slot
        reading.pools.end(commandBuffer, slot.handle, slot.index)

    # ---- render passes: a query from before the begin to after the end ------------------------
    def _pass_begun(self, cb: CommandBuffer, commandBuffer, secondaries: bool, suspend_resume: bool = False) -> None:
        ops = cb.ops
        last = ops[-1] if ops else None
        if secondaries or suspend_resume or type(last) is not PassBegin or last.info.subpasses > 1:
            return
        reading, state = self._begin(cb, commandBuffer)
        if reading is not None:
            state.pass_reading, state.pass_start = reading, len(ops)

    def before_vkCmdBeginRenderPass(self, cb, commandBuffer, pRenderPassBegin, contents):
        self._pass_begun(cb, commandBuffer, contents in _SECONDARY_CONTENTS)

    def before_vkCmdBeginRenderPass2(self, cb, commandBuffer, pRenderPassBegin, pSubpassBeginInfo):
        self._pass_begun(cb, commandBuffer, pSubpassBeginInfo.contents in _SECONDARY_CONTENTS)

    def before_vkCmdBeginRendering(self, cb, commandBuffer, info):
        self._pass_begun(cb, commandBuffer, bool(info.flags & _RENDERING_SECONDARY),
                         bool(info.flags & _RENDERING_SUSPEND_RESUME))

    def _pass_ended(self, cb: CommandBuffer, commandBuffer) -> None:
        state = cb.peek(_Recording)
        if state is None or state.pass_reading is None:
            return
        reading, state.pass_reading = state.pass_reading, None
        self._end(commandBuffer, reading)
        draws = [op for op in cb.ops[state.pass_start:] if type(op) is Draw]
        if not draws:
            return
        for d in draws:
            d.measured = reading
        batch = _batched(state, reading)
        then(draws[0], lambda: _measure_pass(reading, batch), first=True, report=self.report)
        cb.needs_completion = True

    def after_vkCmdEndRenderPass(self, cb, result, commandBuffer):
        self._pass_ended(cb, commandBuffer)

    def after_vkCmdEndRenderPass2(self, cb, result, commandBuffer, pSubpassEndInfo):
        self._pass_ended(cb, commandBuffer)

    def after_vkCmdEndRendering(self, cb, result, commandBuffer):
        self._pass_ended(cb, commandBuffer)

    # ---- dispatches: a query around each ----------------------------------------------------
    def _dispatch(self, cb: CommandBuffer, commandBuffer) -> None:
        """Only an indirect dispatch is bracketed: a direct one's invocations are its recorded group
        counts x the pipeline's work-group size, which is what COMPUTE_SHADER_INVOCATIONS counts (the
        query, its reading and the completion fence it needs would only repeat the number)."""
        last = cb.ops[-1] if cb.ops else None
        if type(last) is not Work or last.kind != "dispatch" or not last.estimated:
            return
        reading, state = self._begin(cb, commandBuffer)
        if reading is not None:
            state.work, state.work_reading = last, reading

    def _dispatched(self, cb: CommandBuffer, commandBuffer) -> None:
        state = cb.peek(_Recording)
        if state is None or state.work_reading is None:
            return
        work, reading = state.work, state.work_reading
        state.work = state.work_reading = None
        self._end(commandBuffer, reading)
        batch = _batched(state, reading)
        then(work, lambda: _measure_work(work, reading, batch), first=True, report=self.report)
        cb.needs_completion = True

    def before_vkCmdDispatch(self, cb, commandBuffer, *args):
        self._dispatch(cb, commandBuffer)

    def after_vkCmdDispatch(self, cb, result, commandBuffer, *args):
        self._dispatched(cb, commandBuffer)

    def before_vkCmdDispatchBase(self, cb, commandBuffer, *args):
        self._dispatch(cb, commandBuffer)

    def after_vkCmdDispatchBase(self, cb, result, commandBuffer, *args):
        self._dispatched(cb, commandBuffer)

    def before_vkCmdDispatchIndirect(self, cb, commandBuffer, *args):
        self._dispatch(cb, commandBuffer)

    def after_vkCmdDispatchIndirect(self, cb, result, commandBuffer, *args):
        self._dispatched(cb, commandBuffer)


def pass_stats(draws: list) -> Stats | None:
    """The measured statistics of a render pass's draws (timeline.py): the sum of their parts'
    readings, None unless every draw was bracketed and every reading available; with the visible
    primitives when every draw's positions were captured and counted (visible_prims.pass_visible)."""
    if not draws:
        return None
    seen: dict[int, Reading] = {}
    for d in draws:
        r = d.measured
        if r is None:
            return None
        seen[id(r)] = r
    total = None
    for r in seen.values():
        if r.stats is None:
            return None
        total = r.stats if total is None else total + r.stats
    visible = pass_visible(draws)
    return total if visible is None else replace(total, visible=visible)


def register(drv: Driver) -> MeasuredCounters:
    feature = drv.hooks.bind(MeasuredCounters(drv))
    drv.features.append(feature)
    return feature

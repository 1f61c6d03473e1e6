"""VK_ARM_shader_instrumentation: the driver's state, the instrumentation objects and their values.

Role: what an instrumented pipeline's counters mean (InstrumentedStage, InstrumentedPipeline:
made by rewrite.py, bound by recording.py, read here and by
icd/measured_timing.py), the per-device state (DeviceInstrumentation: the counters' set layout and
limits, the driver's pipeline layouts, the discard region), the objects (non-dispatchable
handles the driver allocates; their memory in 1 MiB host-visible chunks) and the result layout
of vkGetShaderInstrumentationValuesARM: one row per block (VkShaderInstrumentationMetricDataHeaderARM
then METRICS as u64), sorted by resultIndex, stage, resultSubIndex, block.

State: DeviceInstrumentation is owned by its Device (dev.instrumentation, from setup() at
vkCreateDevice to teardown() at vkDestroyDevice). An object is touched by the threads recording
its command buffers (Vulkan requires their external synchronisation; chunk allocation takes the
device's lock) and by the host reading or clearing its values once the GPU work completed, as
the extension requires.
"""
from __future__ import annotations

import functools
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi.vkconst import vk

from .. import counter_memory
from ..counter_memory import Chunk
from ..objects import Device, EmulatedObject, adopt, release
from .metrics import METRICS, OPS_INDEX

CHUNK_BYTES = 1 << 20          # one buffer of an object's memory; regions never span two
REGION_MAX_BYTES = 1 << 16     # the largest pipeline: 16,384 blocks over its stages
_handles = itertools.count(0x7E55_0000_0001)   # non-dispatchable handles this driver allocates


@dataclass
class InstrumentedStage:
    name: str                  # vertex, fragment, compute
    bit: int                   # VkShaderStageFlagBits
    base: int                  # first counter of the stage in the pipeline's region
    blocks: int
    ops: list[tuple[float, ...]]   # per block: thread-operations per execution, by pipe

    @functools.cached_property
    def pipe_table(self):
        """blocks x pipe metrics (METRICS order): thread-operations per execution (a numpy array, made
        once per stage)."""
        import numpy as np

        return np.array([[ops[OPS_INDEX[name]] for name, _ in METRICS[:-1]] for ops in self.ops],
                        dtype=np.float64).reshape(len(self.ops), len(METRICS) - 1)


@dataclass
class InstrumentedPipeline:
    layout: int                # the driver's pipeline layout (the application's sets + the counters)
    set_index: int
    stages: list[InstrumentedStage]
    # (set index, byte offset in the action's region) of each counters' set an action binds; empty:
    # one, at set_index, offset 0. Graphics shader objects bind two (vertex, fragment).
    bindings: tuple[tuple[int, int], ...] = ()

    @functools.cached_property
    def counters(self) -> int:
        """Counters of one action's region (the stages' spans; a stage may start aligned)."""
        return max((s.base + s.blocks for s in self.stages), default=0)

    @functools.cached_property
    def entries(self) -> int:
        """Entries one action's values have: one per block of each stage."""
        return sum(s.blocks for s in self.stages)

    @functools.cached_property
    def sets(self) -> tuple[tuple[int, int], ...]:
        return self.bindings or ((self.set_index, 0),)


@dataclass
class Region:
    chunk: Chunk
    offset: int
    pipeline: InstrumentedPipeline


@dataclass(eq=False)
class InstrumentationObject(EmulatedObject):
    OBJECT_TYPE = vk.VK_OBJECT_TYPE_SHADER_INSTRUMENTATION_ARM
    handle: int
    device: Device
    next_index: int = 0
    regions: dict[int, Region] = field(default_factory=dict)      # resultIndex -> its counters
    chunks: list[Chunk] = field(default_factory=list)
    # run by vkClearShaderInstrumentationMetricsARM before it zeroes the values and by
    # vkDestroyShaderInstrumentationARM before it frees them (icd/measured_timing.py banks the executions
    # the timeline has not read yet)
    before_clear: list = field(default_factory=list)


@dataclass
class DeviceInstrumentation:
    """Per device that enabled the feature."""
    limits: counter_memory.Limits
    objects: dict[int, InstrumentationObject] = field(default_factory=dict)
    own_layouts: list[int] = field(default_factory=list)   # pipeline layouts the driver made, destroyed with it
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Where instrumented shaders count when their action belongs to no object (recorded with none
    # active): one region every such action shares, never read. Made on first use.
    discard: Chunk | None = None
    shader_layouts: dict[tuple, int] = field(default_factory=dict)   # shader objects' layouts
    shader_pairs: dict[tuple, InstrumentedPipeline | None] = field(default_factory=dict)   # (vertex, fragment)


# ---- the device's state ---------------------------------------------------------------------------
def setup(ffi, dev: Device) -> DeviceInstrumentation:
    """The counters' descriptor set layout and the limits the regions obey."""
    return DeviceInstrumentation(counter_memory.setup(ffi, dev, vk.VK_SHADER_STAGE_ALL))


def teardown(ffi, dev: Device) -> None:
    """Before vkDestroyDevice: every object, the driver's layouts, the discard region."""
    state = dev.instrumentation
    if state is None:
        return
    for obj in list(state.objects.values()):
        destroy(ffi, obj)
    for layout in state.own_layouts:
        dev.next.vkDestroyPipelineLayout(dev.handle, layout, ffi.NULL)
    if state.discard is not None:
        counter_memory.destroy_chunk(ffi, dev, state.discard)
    dev.next.vkDestroyDescriptorSetLayout(dev.handle, state.limits.set_layout, ffi.NULL)


# ---- objects ----------------------------------------------------------------------------------------
def object_of(dev: Device, handle) -> InstrumentationObject | None:
    state = dev.instrumentation
    return state.objects.get(int(handle)) if state is not None else None


def create(state: DeviceInstrumentation, dev: Device) -> InstrumentationObject:
    obj = InstrumentationObject(next(_handles), dev)
    state.objects[obj.handle] = obj
    adopt(dev, obj)
    return obj


def destroy(ffi, obj: InstrumentationObject) -> None:
    """vkDestroyShaderInstrumentationARM: its before_clear callables run, then its memory goes."""
    for fn in obj.before_clear:   # its values are about to go
        fn()
    del obj.device.instrumentation.objects[obj.handle]
    release(obj.device, obj.handle)
    for chunk in obj.chunks:
        counter_memory.destroy_chunk(ffi, obj.device, chunk)


def clear(ffi, obj: InstrumentationObject) -> None:
    """vkClearShaderInstrumentationMetricsARM: its before_clear callables run, then every counter is 0."""
    for fn in obj.before_clear:
        fn()
    for chunk in obj.chunks:
        ffi.memmove(chunk.mapped, bytes(chunk.used), chunk.used)


# ---- values -----------------------------------------------------------------------------------------
def get_values(ffi, obj: InstrumentationObject, pCount, pValues) -> int:
    """vkGetShaderInstrumentationValuesARM's two-call idiom over results(obj)."""
    total = sum(region.pipeline.entries for region in obj.regions.values())
    if pValues == ffi.NULL:
        pCount[0] = total
        return vk.VK_SUCCESS
    n = min(pCount[0], total)
    if n:
        rows = results(ffi, obj)[:n]
        ffi.memmove(pValues, rows.tobytes(), rows.nbytes)   # nothing past stride x count
    pCount[0] = n
    return vk.VK_INCOMPLETE if n < total else vk.VK_SUCCESS


def results(ffi, obj: InstrumentationObject):
    """Every block's entry (row_dtype(): the packed header + metrics), sorted by resultIndex,
    stage, resultSubIndex, block. Each pipe metric is round(executions x ops), as Python's
    round (half to even, like numpy's rint). Actions of one pipeline are done together: their
    regions' counters gathered into one matrix (one row per action)."""
    import numpy as np

    dtype = row_dtype()
    groups: dict[int, list[tuple[int, Region]]] = {}
    for index, region in obj.regions.items():
        groups.setdefault(id(region.pipeline), []).append((index, region))
    chunks: dict[int, Any] = {}
    parts = []
    for members in groups.values():
        plan = members[0][1].pipeline
        indices = np.array([index for index, _ in members], dtype=np.uint32)
        counts = np.empty((len(members), plan.counters), dtype=np.uint32)
        for row, (_, region) in enumerate(members):
            words = chunks.get(id(region.chunk))
            if words is None:
                words = chunks[id(region.chunk)] = np.frombuffer(
                    ffi.buffer(region.chunk.mapped, region.chunk.used), dtype=np.uint32)
            counts[row] = words[region.offset // 4:region.offset // 4 + plan.counters]
        for stage in plan.stages:
            executions = counts[:, stage.base:stage.base + stage.blocks]          # actions x blocks
            rows = np.zeros(executions.shape, dtype)
            rows["header"][..., 0] = indices[:, None]
            rows["header"][..., 2] = stage.bit
            rows["header"][..., 3] = np.arange(stage.blocks)
            rows["metrics"][..., :-1] = np.rint(executions[..., None].astype(np.float64) * stage.pipe_table)
            rows["metrics"][..., -1] = executions
            parts.append(rows.reshape(-1))
    if not parts:
        return np.zeros(0, dtype)
    out = np.concatenate(parts)
    header = out["header"]
    return out[np.lexsort((header[:, 3], header[:, 2], header[:, 0]))]   # last key first: index, stage, block


def row_dtype():
    """One entry of vkGetShaderInstrumentationValuesARM: VkShaderInstrumentationMetricDataHeaderARM
    (resultIndex, resultSubIndex, stages, basicBlockIndex: u32) then numMetrics u64."""
    import numpy as np

    return np.dtype([("header", "<u4", (4,)), ("metrics", "<u8", (len(METRICS),))])

"""Per-region counters: the driver's state per device and per command buffer, and its memory.

Role: the records hooks.py's hooks keep (`DeviceRegions` per device that enabled the feature,
`CommandBufferRegions` per command buffer that recorded a captured pass, `Capture` per captured
instance, `Variant` per counting pipeline) and the driver memory they use: chunks of host-visible
memory (icd/counter_memory.py) handed to command buffers for templates and working slices, returned
to the device's free list when a command buffer is begun again, reset or freed.

Threads: a `CommandBufferRegions` and its `Capture` belong to the thread recording that command
buffer (external synchronisation); `DeviceRegions.variants`, `own_layouts` and `free` are guarded by
`DeviceRegions.lock`; `DeviceRegions.buffers` is keyed by command buffer, each entry touched by its
recording thread only.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tessera.vkapi.vkconst import vk

from .. import counter_memory
from ..counter_memory import Chunk
from ..objects import CommandBuffer, Device
from .props import align

CHUNK_BYTES = 8 << 20           # driver memory per chunk (templates and working slices)
SECTION_MAX_BYTES = 4 << 20     # one subpass's slice: the descriptor's range


class RegionsError(Exception):
    """Something this driver cannot set up (a pipeline without a counting variant, a pass not captured)."""


@dataclass
class Variant:
    pipeline: int
    layout: int
    set_index: int


@dataclass
class ArrayCopy:
    buffer: int                        # the application's buffer holding the address
    regions: list[tuple[int, int, int]]   # (src offset in the chunk, dst offset in the buffer, bytes)


@dataclass
class Capture:
    """One captured render pass instance."""
    chunk: Chunk
    work: int                          # offset of subpass 0's working slice in the chunk
    section: int                       # bytes per subpass slice
    copies: list[ArrayCopy]
    subpass: int = 0
    app_pipeline: int = 0              # the application's graphics pipeline while the pass runs
    variant: Variant | None = None     # bound in its place


@dataclass
class CommandBufferRegions:
    chunks: list[Chunk] = field(default_factory=list)
    capture: Capture | None = None
    pool: int = 0


@dataclass
class DeviceRegions:
    """Per device that enabled the feature."""
    limits: counter_memory.Limits
    own_layouts: list[int] = field(default_factory=list)
    variants: dict[int, Variant] = field(default_factory=dict)        # application pipeline -> counting one
    view_masks: dict[int, tuple[int, ...]] = field(default_factory=dict)   # render pass -> per-subpass viewMask
    free: list[Chunk] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    buffers: dict[int, CommandBufferRegions] = field(default_factory=dict)   # command buffer address -> state
    lock: threading.Lock = field(default_factory=threading.Lock)


# ---- device ------------------------------------------------------------------------------------
def setup(ffi, dev: Device) -> DeviceRegions:
    return DeviceRegions(counter_memory.setup(ffi, dev, vk.VK_SHADER_STAGE_FRAGMENT_BIT))


def teardown(ffi, dev: Device, state: DeviceRegions) -> None:
    """Destroy what the driver made for the device: counting pipelines, chunks, layouts."""
    for variant in state.variants.values():
        dev.next.vkDestroyPipeline(dev.handle, variant.pipeline, ffi.NULL)
    for chunk in state.chunks:
        counter_memory.destroy_chunk(ffi, dev, chunk)
    for layout in state.own_layouts:
        dev.next.vkDestroyPipelineLayout(dev.handle, layout, ffi.NULL)
    dev.next.vkDestroyDescriptorSetLayout(dev.handle, state.limits.set_layout, ffi.NULL)


# ---- driver memory -----------------------------------------------------------------------------
def new_chunk(ffi, dev: Device, state: DeviceRegions) -> Chunk:
    chunk = counter_memory.new_chunk(ffi, dev, state.limits, CHUNK_BYTES, SECTION_MAX_BYTES,
                                     vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    state.chunks.append(chunk)
    return chunk


def cb_state(state: DeviceRegions, cb: CommandBuffer) -> CommandBufferRegions:
    regions = state.buffers.get(cb.address)
    if regions is None:
        regions = state.buffers[cb.address] = CommandBufferRegions(pool=cb.pool)
    return regions


def reserve(ffi, dev: Device, state: DeviceRegions, regions: CommandBufferRegions,
            size: int) -> tuple[Chunk, int]:
    chunk = regions.chunks[-1] if regions.chunks else None
    if chunk is None or chunk.used + size > CHUNK_BYTES:
        with state.lock:
            chunk = state.free.pop() if state.free else None
        if chunk is None:
            chunk = new_chunk(ffi, dev, state)
        chunk.used = 0
        regions.chunks.append(chunk)
    offset = chunk.used
    chunk.used = align(offset + size, state.limits.alignment)
    return chunk, offset


def release(state: DeviceRegions, address: int) -> None:
    regions = state.buffers.pop(address, None)
    if regions is not None:
        with state.lock:
            state.free.extend(regions.chunks)

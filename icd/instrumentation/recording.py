"""VK_ARM_shader_instrumentation at record time: each action's resultIndex, counter region and binding.

Role: what hooks.py's recording hooks do. Every draw, dispatch and trace-rays recorded
while an object is active takes the object's next resultIndex (instrumented or not, vk.xml); with
an instrumented pipeline or shader objects bound it also gets its own region of the object's
memory (region_for), bound as the counters' dynamic storage buffer just before the command. An
instrumented action with no object active binds the device's discard region, never read. Graphics
shader objects bound separately share one region per draw (graphics_plan: the vertex part at set
N, the fragment part at N+1); a pair with different layouts counts into the discard region.

State: the object's index and regions (external synchronisation of its command buffers), the
command buffer's InstrumentedShaders (this module's slot on it, vkapi/slots.py: the plan of the
graphics shader objects bound, with the graphics pipeline it goes with), and the device's
shader_pairs cache and chunk allocation, under the device's lock where two recording threads may
meet. It reads the shader objects bound from cb.shader_objects (icd/recording.py's).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from tessera.vkapi.vkconst import vk

from .. import counter_memory
from ..counter_memory import Chunk
from ..objects import CommandBuffer, Device
from .objects import (CHUNK_BYTES, REGION_MAX_BYTES, DeviceInstrumentation, InstrumentationObject,
                      InstrumentedPipeline, Region)


@dataclass
class InstrumentedShaders:
    """This module's state on a command buffer (its slot, dropped at reset): the plan of the graphics
    shader objects bound, and the graphics pipeline record (icd/recording.py) it goes with."""
    pipeline: Any = None
    plan: InstrumentedPipeline | tuple | None = None   # a (vertex, fragment) tuple: graphics_plan


def region_for(ffi, obj: InstrumentationObject, pipeline: InstrumentedPipeline) -> Region:
    """The next region of the object's memory (aligned; a new chunk when the last is full)."""
    dev = obj.device
    state = dev.instrumentation
    size = pipeline.counters * 4
    with state.lock:
        chunk = obj.chunks[-1] if obj.chunks else None
        if chunk is None or chunk.used + size > CHUNK_BYTES:
            chunk = counter_memory.new_chunk(ffi, dev, state.limits, CHUNK_BYTES, REGION_MAX_BYTES, 0)
            obj.chunks.append(chunk)
        offset = chunk.used
        align = state.limits.alignment
        chunk.used = offset + ((size + align - 1) // align) * align
    return Region(chunk, offset, pipeline)


def discard_region(ffi, dev: Device) -> Chunk:
    """The device's region for actions that belong to no object (made on first use)."""
    state = dev.instrumentation
    with state.lock:
        if state.discard is None:
            state.discard = counter_memory.new_chunk(ffi, dev, state.limits, state.limits.alignment,
                                                     REGION_MAX_BYTES, 0)
        return state.discard


def bind(ffi, cb: CommandBuffer, commandBuffer, bind_point: int, plan: InstrumentedPipeline, chunk: Chunk,
         offset: int) -> None:
    """Bind each counters' set of `plan` at its part of the region (the discard region: all at its start)."""
    sets = ffi.new("VkDescriptorSet[1]", [chunk.descriptor_set])
    discard = chunk is cb.device.instrumentation.discard
    for set_index, part in plan.sets:
        offsets = ffi.new("uint32_t[1]", [offset if discard else offset + part])
        cb.device.next.vkCmdBindDescriptorSets(commandBuffer, bind_point, plan.layout, set_index, 1, sets, 1,
                                               offsets)


def before_action(ffi, cb: CommandBuffer, commandBuffer, bind_point: int) -> None:
    """Before a draw, dispatch or trace-rays is recorded: its index, region and binding."""
    obj = cb.instrumentation
    if obj is not None:
        index = obj.next_index    # every action takes an index, instrumented or not (vk.xml)
        obj.next_index += 1
    bound = cb.graphics_pipeline if bind_point == vk.VK_PIPELINE_BIND_POINT_GRAPHICS else cb.compute_pipeline
    plan = getattr(bound, "instrumented", None)
    if plan is None and bind_point == vk.VK_PIPELINE_BIND_POINT_GRAPHICS:
        shaders = cb.peek(InstrumentedShaders)    # graphics shader objects bound
        if shaders is not None and shaders.pipeline is bound:
            plan = shaders.plan
    if plan is None:
        return
    if isinstance(plan, tuple):   # shader objects that cannot share a region: they count, unread
        for p in plan:
            bind(ffi, cb, commandBuffer, bind_point, p, discard_region(ffi, cb.device), 0)
        return
    if obj is None:               # its shaders still count: into the region nobody reads
        chunk, offset = discard_region(ffi, cb.device), 0
    else:
        region = region_for(ffi, obj, plan)
        obj.regions[index] = region
        chunk, offset = region.chunk, region.offset
    bind(ffi, cb, commandBuffer, bind_point, plan, chunk, offset)


def shaders_bound(cb: CommandBuffer, count: int, pStages, warn: Callable[[str, str], None]) -> None:
    """After icd/recording.py bound shader objects (vkCmdBindShadersEXT): when a graphics stage was
    among them, the plan of the graphics shader objects now bound, kept with the record it made."""
    state = cb.device.instrumentation
    if state is None or not any(pStages[i] != vk.VK_SHADER_STAGE_COMPUTE_BIT for i in range(count)):
        return
    bound = cb.shader_objects
    v = getattr(bound.get(vk.VK_SHADER_STAGE_VERTEX_BIT), "instrumented", None)
    f = getattr(bound.get(vk.VK_SHADER_STAGE_FRAGMENT_BIT), "instrumented", None)
    shaders = cb.slot(InstrumentedShaders)
    shaders.pipeline, shaders.plan = cb.graphics_pipeline, graphics_plan(state, v, f, warn)


def graphics_plan(state: DeviceInstrumentation, v, f, warn: Callable[[str, str], None]
                  ) -> InstrumentedPipeline | None:
    """One draw's plan for instrumented vertex and/or fragment shader objects (made once per pair);
    a (vertex, fragment) tuple when the two cannot share a region."""
    if v is None and f is None:
        return None
    key = (id(v), id(f))
    if key in state.shader_pairs:
        return state.shader_pairs[key]
    if v is not None and f is not None and v.layout != f.layout:
        warn("shader-pair", "vertex and fragment shader objects with different set layouts or push-constant "
             "ranges: their draws are not instrumented (no entries)")
        plan: Any = (v, f)
    else:
        stages, bindings, offset = [], [], 0
        for p in (v, f):
            if p is not None:
                stages.append(replace(p.stages[0], base=offset // 4))
                bindings.append((p.set_index, offset))
                align = state.limits.alignment
                offset += -(-p.stages[0].blocks * 4 // align) * align
        first = v or f
        plan = InstrumentedPipeline(first.layout, first.set_index, stages, tuple(bindings))
    state.shader_pairs[key] = plan
    return plan

"""VK_ARM_performance_counters_by_region in the emulated Mali: per-region counters from real execution.

Role: the extension's hooks (vk.xml 1.4.366: extension 606, spec version 1). Every hook is
registered here, because the intercept table (vkapi/intercepts.py) names this module for them;
the work is in four modules with one job each:

- regions_props.py: the counters, properties, feature and layout arithmetic (no state);
- regions_state.py: the per-device and per-command-buffer records and the driver memory they use;
- regions_pipelines.py: the counting variant of a graphics pipeline;
- regions_capture.py: what a captured render pass instance records and where its values go.

A device that enabled the `performanceCountersByRegion` feature gets, for every graphics pipeline
with a fragment stage, a second "counting" pipeline (regions_pipelines.py). A render pass instance
whose VkRenderPassBeginInfo / VkRenderingInfo carries VkRenderPassPerformanceCountersByRegionBeginInfoARM
(stripped before the backend) is captured:

- record time, before the pass begins: the driver takes a slice of its host-visible memory, writes
  a template (per subpass: a header the shader reads, then the regions in exactly the
  application's layout with zeros, and the computed tile write-back bytes) and records a copy
  template -> working slice and a barrier (so a command buffer submitted again starts from zero);
- inside the pass: graphics pipeline binds take the counting variant, and every draw binds the
  working slice of the current subpass (dynamic offset);
- after the pass ends: the application's pipeline is bound again, and a barrier, one
  vkCmdCopyBuffer per array (one region per counter run, so alignment padding is never written)
  into the buffer that holds each address (from the tracked vkGetBufferDeviceAddress results),
  and a barrier making the writes visible to COLOR_ATTACHMENT_OUTPUT and later stages.

Counters (regions_props.COUNTERS; docs/regions.md says how each is computed): fragment threads,
covered samples, killed fragments, thread-operations per pipe (FMA, CVT, SFU, LS, texture, varying:
measured block executions x the compiler model's per-block costs), tile write-back bytes
(computed). Helper threads are not offered: a helper invocation's atomics have no effect (Vulkan
"Helper Invocations"), so the rewrite cannot count them.

Arrays: one per (subpass x layer) or, for multiview subpasses, per (subpass x view), in that
order; a subpass's arrays follow the previous subpass's. Subpasses are captured as physical
subpasses (this driver merges none).

Limits (reported once, never crashing): draws recorded in secondary command buffers inside a
captured pass, pipelines from pipeline libraries, shader objects and pipelines also flagged for
shader instrumentation are not counted; a resumed (dynamic rendering) instance is captured per
begin/end pair.

State: `register`'s closure owns the device states (device address -> DeviceRegions), the warnings
already given and the begin infos passed down. Threads: per-command-buffer state belongs to the
recording thread (external synchronisation); device state (pipelines, layouts, free memory) is
guarded by `DeviceRegions.lock`.
"""
from __future__ import annotations

import sys

from tessera.vkapi import structs
from tessera.vkapi.commands import DRAWS
from tessera.vkapi.vkconst import vk

from . import regions_state
from .driver import Driver
from .objects import CommandBuffer, Device, PhysicalDevice
from .regions_capture import (area_of, begin_commands, bound_handle, end_commands, plan, render_pass_geometry,
                              rendering_geometry, split)
from .regions_pipelines import make_variant
from .regions_props import apply_features, apply_properties, enumerate_counters, wants_regions
from .regions_state import Capture, DeviceRegions, cb_state, release

__all__ = ["register", "wants_regions", "apply_properties", "apply_features"]   # identity.py, device.py, entry.py


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects
    log = hooks.errors.log
    warned: set[str] = set()
    states: dict[int, DeviceRegions] = {}    # device address -> state

    def warn(key: str, message: str) -> None:
        if key not in warned:
            warned.add(key)
            log.warning("%s", message)
            print(f"tessera: performance counters by region: {message}", file=sys.stderr)

    def state_of(dev: Device) -> DeviceRegions | None:
        return states.get(objects.address(dev.handle))

    # ---- device ------------------------------------------------------------------------------
    def setup(dev: Device) -> None:
        states[objects.address(dev.handle)] = regions_state.setup(ffi, dev)

    def teardown(dev: Device) -> None:
        state = states.pop(objects.address(dev.handle), None)
        if state is not None:
            regions_state.teardown(ffi, dev, state)

    drv.regions_setup, drv.regions_teardown = setup, teardown

    # ---- counter enumeration ---------------------------------------------------------------
    @hooks.replace("vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM")
    def enumerate_counters_hook(physicalDevice, queueFamilyIndex, pCounterCount, pCounters, pCounterDescriptions):
        objects.get(physicalDevice, PhysicalDevice)
        return enumerate_counters(ffi, pCounterCount, pCounters, pCounterDescriptions)

    # ---- pipeline layouts and render passes the counting pipelines need -------------------------
    def remember_views(dev, pRenderPass, subpass_masks) -> None:
        state = state_of(dev)
        if state is not None:
            state.view_masks[int(pRenderPass[0])] = tuple(subpass_masks)

    @hooks.after("vkCreateRenderPass")
    def after_create_render_pass(dev, result, device, ci, pAllocator, pRenderPass):
        if result != vk.VK_SUCCESS:
            return
        mv = structs.find(ffi, ci.pNext, vk.VK_STRUCTURE_TYPE_RENDER_PASS_MULTIVIEW_CREATE_INFO,
                          "VkRenderPassMultiviewCreateInfo *")
        masks = [mv.pViewMasks[i] if mv is not None and i < mv.subpassCount else 0 for i in range(ci.subpassCount)]
        remember_views(dev, pRenderPass, masks)

    @hooks.after("vkCreateRenderPass2")
    def after_create_render_pass2(dev, result, device, ci, pAllocator, pRenderPass):
        if result == vk.VK_SUCCESS:
            remember_views(dev, pRenderPass, [ci.pSubpasses[i].viewMask for i in range(ci.subpassCount)])

    # ---- counting pipelines ---------------------------------------------------------------------
    @hooks.after("vkCreateGraphicsPipelines")
    def after_create_graphics(dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        state = state_of(dev)
        if state is None:
            return
        for i in range(count):
            handle = int(pPipelines[i])
            if not handle:
                continue
            record = dev.res.pipelines.get(handle)
            if record is not None and record.instrumented is not None:
                warn("instrumented", "a pipeline instrumented for VK_ARM_shader_instrumentation gets no per-region "
                     "counting variant: its draws are not counted")
                continue
            try:
                variant = make_variant(ffi, dev, state, ffi.addressof(pInfos, i), drv.profile.key)
            except Exception as e:
                warn(f"variant:{e}", f"a graphics pipeline cannot count per region ({e}): its draws are not counted")
                continue
            if variant is not None:
                with state.lock:
                    state.variants[handle] = variant

    @hooks.before("vkDestroyPipeline")
    def before_destroy_pipeline(dev, device, pipeline, pAllocator):
        state = state_of(dev)
        if state is None:
            return
        with state.lock:
            variant = state.variants.pop(int(pipeline), None)
        if variant is not None:
            dev.next.vkDestroyPipeline(device, variant.pipeline, ffi.NULL)

    # ---- driver memory: a command buffer's chunks go back to the device's free list -------------
    @hooks.before("vkBeginCommandBuffer")
    def before_begin(cb, commandBuffer, pBeginInfo):
        state = state_of(cb.device)
        if state is not None:
            release(state, cb.address)

    @hooks.before("vkResetCommandBuffer")
    def before_reset(cb, commandBuffer, flags):
        state = state_of(cb.device)
        if state is not None:
            release(state, cb.address)

    @hooks.before("vkFreeCommandBuffers")
    def before_free(dev, device, commandPool, count, pCommandBuffers):
        state = state_of(dev)
        if state is not None:
            for i in range(count):
                if pCommandBuffers[i] != ffi.NULL:
                    release(state, objects.address(pCommandBuffers[i]))

    def release_pool(dev, commandPool) -> None:
        state = state_of(dev)
        if state is not None:
            for address in [a for a, r in state.buffers.items() if r.pool == int(commandPool)]:
                release(state, address)

    hooks.before("vkDestroyCommandPool")(lambda dev, device, pool, pAllocator: release_pool(dev, pool))
    hooks.before("vkResetCommandPool")(lambda dev, device, pool, flags: release_pool(dev, pool))

    # ---- capture: begin ----------------------------------------------------------------------------
    def start(cb: CommandBuffer, commandBuffer, request, area, subpass_arrays, writeback, command: str) -> None:
        state = state_of(cb.device)
        if state is None:
            warn("feature", f"{command} with VkRenderPassPerformanceCountersByRegionBeginInfoARM on a device that did "
                 "not enable the performanceCountersByRegion feature: ignored")
            return
        regions = cb_state(state, cb)
        if cb.level != vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY:
            warn("secondary", f"{command} in a secondary command buffer: not captured")
            return
        capture = plan(ffi, warn, cb, state, request, area, subpass_arrays, writeback, command)
        if capture is None:
            return
        begin_commands(ffi, cb, capture, len(subpass_arrays))
        capture.app_pipeline = bound_handle(cb)
        regions.capture = capture
        hooks.recorder.python_path(commandBuffer, True)

    def after_start(cb: CommandBuffer) -> None:
        """Inside the pass: the pipeline bound before it is replaced by its counting variant."""
        state = state_of(cb.device)
        regions = state.buffers.get(cb.address) if state is not None else None
        if regions is None or regions.capture is None or not regions.capture.app_pipeline:
            return
        bind(cb, state, regions.capture, regions.capture.app_pipeline)

    def bind(cb: CommandBuffer, state: DeviceRegions, capture: Capture, pipeline: int) -> int:
        capture.app_pipeline = pipeline
        capture.variant = state.variants.get(pipeline)
        if capture.variant is None:
            return pipeline
        cb.device.next.vkCmdBindPipeline(cb.handle, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, capture.variant.pipeline)
        return capture.variant.pipeline

    def begin_render_pass(cb, commandBuffer, pBegin, rest, command: str):
        keep: list = []
        request, chain = split(ffi, pBegin.pNext, keep)
        if request is None:
            return None
        try:
            arrays, wb = render_pass_geometry(cb, state_of(cb.device), pBegin)
            start(cb, commandBuffer, request, area_of(pBegin.renderArea), arrays, wb, command)
        except Exception:
            hooks.errors.report(command, "capturing per-region counters; the pass runs uncaptured")
        copy = ffi.new("VkRenderPassBeginInfo *")
        ffi.memmove(copy, pBegin, ffi.sizeof("VkRenderPassBeginInfo"))
        copy.pNext = chain
        stripped[objects.address(commandBuffer)] = (copy, keep)
        return (commandBuffer, copy, *rest)

    stripped: dict[int, tuple] = {}   # command buffer -> the begin info copy passed down (kept alive)

    @hooks.before("vkCmdBeginRenderPass")
    def before_begin_render_pass(cb, commandBuffer, pRenderPassBegin, contents):
        return begin_render_pass(cb, commandBuffer, pRenderPassBegin, (contents,), "vkCmdBeginRenderPass")

    @hooks.before("vkCmdBeginRenderPass2")
    def before_begin_render_pass2(cb, commandBuffer, pRenderPassBegin, pSubpassBeginInfo):
        return begin_render_pass(cb, commandBuffer, pRenderPassBegin, (pSubpassBeginInfo,), "vkCmdBeginRenderPass2")

    @hooks.before("vkCmdBeginRendering")
    def before_begin_rendering(cb, commandBuffer, pRenderingInfo):
        keep: list = []
        request, chain = split(ffi, pRenderingInfo.pNext, keep)
        if request is None:
            return None
        try:
            if pRenderingInfo.flags & vk.VK_RENDERING_RESUMING_BIT:
                warn("resuming", "vkCmdBeginRendering resuming a suspended instance: captured per begin/end pair")
            arrays, wb = rendering_geometry(ffi, cb, pRenderingInfo)
            start(cb, commandBuffer, request, area_of(pRenderingInfo.renderArea), arrays, wb, "vkCmdBeginRendering")
        except Exception:
            hooks.errors.report("vkCmdBeginRendering", "capturing per-region counters; the pass runs uncaptured")
        copy = ffi.new("VkRenderingInfo *")
        ffi.memmove(copy, pRenderingInfo, ffi.sizeof("VkRenderingInfo"))
        copy.pNext = chain
        stripped[objects.address(commandBuffer)] = (copy, keep)
        return (commandBuffer, copy)

    for name in ("vkCmdBeginRenderPass", "vkCmdBeginRenderPass2", "vkCmdBeginRendering"):
        hooks.after(name)(lambda cb, result, commandBuffer, *a: (
            stripped.pop(objects.address(commandBuffer), None), after_start(cb)))

    # ---- capture: inside the pass ---------------------------------------------------------------
    def active(cb: CommandBuffer) -> tuple[DeviceRegions, Capture] | tuple[None, None]:
        state = state_of(cb.device)
        regions = state.buffers.get(cb.address) if state is not None else None
        if regions is None or regions.capture is None:
            return None, None
        return state, regions.capture

    @hooks.before("vkCmdBindPipeline")
    def before_bind_pipeline(cb, commandBuffer, bindPoint, pipeline):
        if bindPoint != vk.VK_PIPELINE_BIND_POINT_GRAPHICS:
            return None
        state, capture = active(cb)
        if capture is None:
            return None
        capture.app_pipeline = int(pipeline)
        capture.variant = state.variants.get(int(pipeline))
        return (commandBuffer, bindPoint, capture.variant.pipeline) if capture.variant is not None else None

    def before_draw(cb, commandBuffer, *args):
        state, capture = active(cb)
        if capture is None or capture.variant is None:
            return None
        v = capture.variant
        sets = ffi.new("VkDescriptorSet[1]", [capture.chunk.descriptor_set])
        offsets = ffi.new("uint32_t[1]", [capture.work + capture.subpass * capture.section])
        cb.device.next.vkCmdBindDescriptorSets(commandBuffer, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, v.layout,
                                               v.set_index, 1, sets, 1, offsets)
        return None

    for name in DRAWS:
        hooks.before(name)(before_draw)

    def next_subpass(cb, commandBuffer, *args):
        state, capture = active(cb)
        if capture is not None:
            capture.subpass += 1

    hooks.after("vkCmdNextSubpass")(lambda cb, result, *a: next_subpass(cb, *a))
    hooks.after("vkCmdNextSubpass2")(lambda cb, result, *a: next_subpass(cb, *a))

    @hooks.before("vkCmdExecuteCommands")
    def before_execute(cb, commandBuffer, count, pCommandBuffers):
        if active(cb)[1] is not None:
            warn("execute", "vkCmdExecuteCommands inside a captured render pass instance: the secondaries' draws "
                 "are not counted")

    # ---- capture: end ---------------------------------------------------------------------------
    def end(cb, commandBuffer, *args):
        state, capture = active(cb)
        if capture is None:
            return
        state.buffers[cb.address].capture = None
        if cb.instrumentation is None:
            hooks.recorder.python_path(commandBuffer, False)
        end_commands(ffi, cb, commandBuffer, capture)

    for name in ("vkCmdEndRenderPass", "vkCmdEndRenderPass2", "vkCmdEndRendering"):
        hooks.after(name)(lambda cb, result, commandBuffer, *a: end(cb, commandBuffer, *a))

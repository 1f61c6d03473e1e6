"""VK_ARM_performance_counters_by_region in the emulated Mali: per-region counters from real execution.

Role: the extension's hooks (vk.xml 1.4.366: extension 606, spec version 1). Every hook is
registered here, because the intercept table (vkapi/intercepts.py) names this module for them;
the work is in four modules with one job each:

- props.py: the counters, properties, feature and layout arithmetic (no state);
- state.py: the per-device and per-command-buffer records and the driver memory they use;
- pipelines.py: the counting variant of a graphics pipeline;
- capture.py: what a captured render pass instance records and where its values go.

A device that enabled the `performanceCountersByRegion` feature gets, for every graphics pipeline
with a fragment stage, a second "counting" pipeline (pipelines.py). A render pass instance
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

Counters (props.COUNTERS; docs/regions.md says how each is computed): fragment threads,
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

State: the `Regions` feature object owns the device states (device address -> DeviceRegions), the
warnings already given and the begin infos passed down. Threads: per-command-buffer state belongs to the
recording thread (external synchronisation); device state (pipelines, layouts, free memory) is
guarded by `DeviceRegions.lock`.
"""
from __future__ import annotations

import sys

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from ..driver import Driver
from ..feature import DeviceRequest, Feature
from ..instrumentation import metrics as instrumentation_metrics
from ..objects import CommandBuffer, Device, PhysicalDevice
from . import state as regions_state
from .capture import (area_of, begin_commands, bound_handle, end_commands, plan, render_pass_geometry,
                      rendering_geometry, split)
from .pipelines import make_variant
from .props import enumerate_counters, wants_regions
from .state import Capture, DeviceRegions, cb_state, release


class Regions(Feature):
    """The extension's hooks: one method per command (HookSet.bind); its state on the object."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi, self.hooks, self.objects = drv, drv.ffi, drv.hooks, drv.objects
        self.log = drv.hooks.errors.log
        self.warned: set[str] = set()
        self.states: dict[int, DeviceRegions] = {}    # device address -> state
        self.stripped: dict[int, tuple] = {}   # command buffer -> the begin info copy passed down (kept alive)

    def warn(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            self.log.warning("%s", message)
            print(f"tessera: performance counters by region: {message}", file=sys.stderr)

    def state_of(self, dev: Device) -> DeviceRegions | None:
        return self.states.get(self.objects.address(dev.handle))

    # ---- device lifecycle (icd/feature.py) ------------------------------------------------------
    label = "per-region counters"
    defers_begin = False   # its begin hook gives back the buffer's capture memory, which the recording reuses

    def wants(self, request: DeviceRequest) -> bool:
        return wants_regions(self.ffi, request.create_info.pNext)

    def enable(self, request: DeviceRequest) -> None:   # the counting fragment shaders use atomics
        instrumentation_metrics.enable_store_features(self.ffi, request.info, request.keep)

    def created(self, dev: Device, request: DeviceRequest) -> None:
        self.states[self.objects.address(dev.handle)] = regions_state.setup(self.ffi, dev)

    def destroyed(self, dev: Device) -> None:
        state = self.states.pop(self.objects.address(dev.handle), None)
        if state is not None:
            regions_state.teardown(self.ffi, dev, state)

    # ---- counter enumeration ---------------------------------------------------------------
    def replace_vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM(
            self, physicalDevice, queueFamilyIndex, pCounterCount, pCounters, pCounterDescriptions):
        self.objects.get(physicalDevice, PhysicalDevice)
        return enumerate_counters(self.ffi, pCounterCount, pCounters, pCounterDescriptions)

    # ---- pipeline layouts and render passes the counting pipelines need -------------------------
    def remember_views(self, dev, pRenderPass, subpass_masks) -> None:
        state = self.state_of(dev)
        if state is not None:
            state.view_masks[int(pRenderPass[0])] = tuple(subpass_masks)

    def after_vkCreateRenderPass(self, dev, result, device, ci, pAllocator, pRenderPass):
        if result != vk.VK_SUCCESS:
            return
        mv = structs.find(self.ffi, ci.pNext, vk.VK_STRUCTURE_TYPE_RENDER_PASS_MULTIVIEW_CREATE_INFO,
                          "VkRenderPassMultiviewCreateInfo *")
        masks = [mv.pViewMasks[i] if mv is not None and i < mv.subpassCount else 0 for i in range(ci.subpassCount)]
        self.remember_views(dev, pRenderPass, masks)

    def after_vkCreateRenderPass2(self, dev, result, device, ci, pAllocator, pRenderPass):
        if result == vk.VK_SUCCESS:
            self.remember_views(dev, pRenderPass, [ci.pSubpasses[i].viewMask for i in range(ci.subpassCount)])

    # ---- counting pipelines ---------------------------------------------------------------------
    def after_vkCreateGraphicsPipelines(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        state = self.state_of(dev)
        if state is None:
            return
        ffi, warn = self.ffi, self.warn
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
                variant = make_variant(ffi, dev, state, ffi.addressof(pInfos, i), self.drv.profile.key)
            except Exception as e:
                warn(f"variant:{e}", f"a graphics pipeline cannot count per region ({e}): its draws are not counted")
                continue
            if variant is not None:
                with state.lock:
                    state.variants[handle] = variant

    def before_vkDestroyPipeline(self, dev, device, pipeline, pAllocator):
        state = self.state_of(dev)
        if state is None:
            return
        with state.lock:
            variant = state.variants.pop(int(pipeline), None)
        if variant is not None:
            dev.next.vkDestroyPipeline(device, variant.pipeline, self.ffi.NULL)

    # ---- driver memory: a command buffer's chunks go back to the device's free list -------------
    def before_vkBeginCommandBuffer(self, cb, commandBuffer, pBeginInfo):
        state = self.state_of(cb.device)
        if state is not None:
            release(state, cb.address)

    def before_vkResetCommandBuffer(self, cb, commandBuffer, flags):
        state = self.state_of(cb.device)
        if state is not None:
            release(state, cb.address)

    def before_vkFreeCommandBuffers(self, dev, device, commandPool, count, pCommandBuffers):
        state = self.state_of(dev)
        if state is not None:
            for i in range(count):
                if pCommandBuffers[i] != self.ffi.NULL:
                    release(state, self.objects.address(pCommandBuffers[i]))

    def before_vkDestroyCommandPool(self, dev, device, commandPool, pAllocator):
        self._release_pool(dev, commandPool)

    def before_vkResetCommandPool(self, dev, device, commandPool, flags):
        self._release_pool(dev, commandPool)

    def _release_pool(self, dev, commandPool) -> None:
        state = self.state_of(dev)
        if state is not None:
            for address in [a for a, r in state.buffers.items() if r.pool == int(commandPool)]:
                release(state, address)

    # ---- capture: begin ----------------------------------------------------------------------------
    def start(self, cb: CommandBuffer, commandBuffer, request, area, subpass_arrays, writeback, command: str) -> None:
        state, warn = self.state_of(cb.device), self.warn
        if state is None:
            warn("feature", f"{command} with VkRenderPassPerformanceCountersByRegionBeginInfoARM on a device that did "
                 "not enable the performanceCountersByRegion feature: ignored")
            return
        regions = cb_state(state, cb)
        if cb.level != vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY:
            warn("secondary", f"{command} in a secondary command buffer: not captured")
            return
        capture = plan(self.ffi, warn, cb, state, request, area, subpass_arrays, writeback, command)
        if capture is None:
            return
        begin_commands(self.ffi, cb, capture, len(subpass_arrays))
        capture.app_pipeline = bound_handle(cb)
        regions.capture = capture
        self.hooks.recorder.python_path(commandBuffer, True)

    def after_start(self, cb: CommandBuffer) -> None:
        """Inside the pass: the pipeline bound before it is replaced by its counting variant."""
        state = self.state_of(cb.device)
        regions = state.buffers.get(cb.address) if state is not None else None
        if regions is None or regions.capture is None or not regions.capture.app_pipeline:
            return
        self.bind(cb, state, regions.capture, regions.capture.app_pipeline)

    def bind(self, cb: CommandBuffer, state: DeviceRegions, capture: Capture, pipeline: int) -> int:
        capture.app_pipeline = pipeline
        capture.variant = state.variants.get(pipeline)
        if capture.variant is None:
            return pipeline
        cb.device.next.vkCmdBindPipeline(cb.handle, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, capture.variant.pipeline)
        return capture.variant.pipeline

    def _begin_render_pass(self, cb, commandBuffer, pBegin, rest, command: str):
        ffi = self.ffi
        keep: list = []
        request, chain = split(ffi, pBegin.pNext, keep)
        if request is None:
            return None
        try:
            arrays, wb = render_pass_geometry(cb, self.state_of(cb.device), pBegin)
            self.start(cb, commandBuffer, request, area_of(pBegin.renderArea), arrays, wb, command)
        except Exception:
            self.hooks.errors.report(command, "capturing per-region counters; the pass runs uncaptured")
        copy = ffi.new("VkRenderPassBeginInfo *")
        ffi.memmove(copy, pBegin, ffi.sizeof("VkRenderPassBeginInfo"))
        copy.pNext = chain
        self.stripped[self.objects.address(commandBuffer)] = (copy, keep)
        return (commandBuffer, copy, *rest)

    def before_vkCmdBeginRenderPass(self, cb, commandBuffer, pRenderPassBegin, contents):
        return self._begin_render_pass(cb, commandBuffer, pRenderPassBegin, (contents,), "vkCmdBeginRenderPass")

    def before_vkCmdBeginRenderPass2(self, cb, commandBuffer, pRenderPassBegin, pSubpassBeginInfo):
        return self._begin_render_pass(cb, commandBuffer, pRenderPassBegin, (pSubpassBeginInfo,),
                                       "vkCmdBeginRenderPass2")

    def before_vkCmdBeginRendering(self, cb, commandBuffer, pRenderingInfo):
        ffi = self.ffi
        keep: list = []
        request, chain = split(ffi, pRenderingInfo.pNext, keep)
        if request is None:
            return None
        try:
            if pRenderingInfo.flags & vk.VK_RENDERING_RESUMING_BIT:
                self.warn("resuming", "vkCmdBeginRendering resuming a suspended instance: captured per begin/end pair")
            arrays, wb = rendering_geometry(ffi, cb, pRenderingInfo)
            self.start(cb, commandBuffer, request, area_of(pRenderingInfo.renderArea), arrays, wb,
                       "vkCmdBeginRendering")
        except Exception:
            self.hooks.errors.report("vkCmdBeginRendering", "capturing per-region counters; the pass runs uncaptured")
        copy = ffi.new("VkRenderingInfo *")
        ffi.memmove(copy, pRenderingInfo, ffi.sizeof("VkRenderingInfo"))
        copy.pNext = chain
        self.stripped[self.objects.address(commandBuffer)] = (copy, keep)
        return (commandBuffer, copy)

    def after_vkCmdBeginRenderPass(self, cb, result, commandBuffer, *args):
        self._begun(cb, commandBuffer)

    def after_vkCmdBeginRenderPass2(self, cb, result, commandBuffer, *args):
        self._begun(cb, commandBuffer)

    def after_vkCmdBeginRendering(self, cb, result, commandBuffer, *args):
        self._begun(cb, commandBuffer)

    def _begun(self, cb, commandBuffer) -> None:
        """The begin was passed down: its stripped copy may go; a capture binds its counting pipeline."""
        self.stripped.pop(self.objects.address(commandBuffer), None)
        self.after_start(cb)

    # ---- capture: inside the pass ---------------------------------------------------------------
    def active(self, cb: CommandBuffer) -> tuple[DeviceRegions, Capture] | tuple[None, None]:
        state = self.state_of(cb.device)
        regions = state.buffers.get(cb.address) if state is not None else None
        if regions is None or regions.capture is None:
            return None, None
        return state, regions.capture

    def before_vkCmdBindPipeline(self, cb, commandBuffer, bindPoint, pipeline):
        if bindPoint != vk.VK_PIPELINE_BIND_POINT_GRAPHICS:
            return None
        state, capture = self.active(cb)
        if capture is None:
            return None
        capture.app_pipeline = int(pipeline)
        capture.variant = state.variants.get(int(pipeline))
        return (commandBuffer, bindPoint, capture.variant.pipeline) if capture.variant is not None else None

    # Every draw inside a captured pass binds the working slice of the current subpass.
    def _draw(self, cb, commandBuffer) -> None:
        state, capture = self.active(cb)
        if capture is None or capture.variant is None:
            return
        ffi, v = self.ffi, capture.variant
        sets = ffi.new("VkDescriptorSet[1]", [capture.chunk.descriptor_set])
        offsets = ffi.new("uint32_t[1]", [capture.work + capture.subpass * capture.section])
        cb.device.next.vkCmdBindDescriptorSets(commandBuffer, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, v.layout,
                                               v.set_index, 1, sets, 1, offsets)

    def before_vkCmdDraw(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawIndexed(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawIndirect(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawIndexedIndirect(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawIndirectCount(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawIndexedIndirectCount(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawMultiEXT(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawMultiIndexedEXT(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawIndirectByteCountEXT(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawMeshTasksEXT(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawMeshTasksIndirectEXT(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def before_vkCmdDrawMeshTasksIndirectCountEXT(self, cb, commandBuffer, *args):
        self._draw(cb, commandBuffer)

    def after_vkCmdNextSubpass(self, cb, result, commandBuffer, *args):
        self._next_subpass(cb)

    def after_vkCmdNextSubpass2(self, cb, result, commandBuffer, *args):
        self._next_subpass(cb)

    def _next_subpass(self, cb) -> None:
        state, capture = self.active(cb)
        if capture is not None:
            capture.subpass += 1

    def before_vkCmdExecuteCommands(self, cb, commandBuffer, count, pCommandBuffers):
        if self.active(cb)[1] is not None:
            self.warn("execute", "vkCmdExecuteCommands inside a captured render pass instance: the secondaries' "
                      "draws are not counted")

    # ---- capture: end ---------------------------------------------------------------------------
    def after_vkCmdEndRenderPass(self, cb, result, commandBuffer, *args):
        self._end(cb, commandBuffer)

    def after_vkCmdEndRenderPass2(self, cb, result, commandBuffer, *args):
        self._end(cb, commandBuffer)

    def after_vkCmdEndRendering(self, cb, result, commandBuffer, *args):
        self._end(cb, commandBuffer)

    def _end(self, cb, commandBuffer) -> None:
        state, capture = self.active(cb)
        if capture is None:
            return
        state.buffers[cb.address].capture = None
        if cb.instrumentation is None:
            self.hooks.recorder.python_path(commandBuffer, False)
        end_commands(self.ffi, cb, commandBuffer, capture)


def register(drv: Driver) -> Regions:
    feature = drv.hooks.bind(Regions(drv))
    drv.features.append(feature)
    return feature

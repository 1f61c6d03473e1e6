"""VK_ARM_shader_instrumentation in the emulated Mali: real per-basic-block counts, Mali pipe costs.

Role: the extension's hooks, every one of them (vkapi/intercepts.py names this module in their
rows, and HookSet.install refuses a hook registered from another), each a few lines that call
into the modules doing the work:

  metrics.py    the metrics, their enumeration, the device feature's create chain
  objects.py    the device's state, the objects, their values and clear (result layout)
  recording.py  per action at record time: resultIndex, counter region, binding
  rewrite.py    pipelines and shader objects rewritten to count, at create time

The extension (vk.xml 1.4.366: extension 608, bit 39 of VkPipelineCreateFlags2 in
VkPipelineCreateFlags2CreateInfoKHR): pipelines created with the bit, on a device that enabled
the `shaderInstrumentation` feature, get every stage (vertex, fragment, compute) rewritten by the
SPIR-V toolkit's block-counter pass: each basic block atomically counts its thread executions
into a driver-owned storage buffer, bound as an extra descriptor set (index = the application's
set count, a dynamic storage buffer) in a pipeline layout the driver makes from the
application's. Every draw, dispatch and trace-rays recorded while an instrumentation object is
active takes the object's next resultIndex; for an instrumented pipeline it also gets its own
region of the object's memory, bound (dynamic offset) just before the command. Uninstrumented
pipelines consume an index and produce nothing (vk.xml). The GPU accumulates into the regions,
so results add up across submissions until vkClearShaderInstrumentationMetricsARM.

Values: for block b of a stage, `threads` = the block's thread executions (measured), and each
pipe metric = executions × the compiler model's thread-operations of that pipe for one
execution of the block (tessera.compiler BlockCost.ops): thread-operations, the unit of the
Mali Offline Compiler's per-pipe counts before division by the pipe's width. Block indices are
the toolkit's global SPIR-V numbering (docs/spirv.md), so tools map them to SPIR-V and source.
Helper invocations do not count (their atomics have no effect); a discarded fragment counts the
blocks it ran before OpKill / OpTerminateInvocation.

Shader objects (VK_EXT_shader_object): VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM (bit 11) on a
compute, vertex or fragment shader object rewrites it the same way; the counters' sets go after
its set layouts (vertex and fragment: two, one per stage, so separately bound stages share one
region per draw).

Recording: every command buffer of a device with the feature takes its Python hooks
(recorder.python_path, from vkBeginCommandBuffer) so each action can be numbered and bound when
recorded; an instrumented action with no object active binds the discard region, never read.
Threads: object state is touched by the threads recording command buffers (Vulkan requires
external synchronisation of an object's command buffers) and by vkGetShaderInstrumentationValues
on the host after the GPU work completed, as the extension requires. This module's own state is
the set of warnings already given (one each, from any thread).
"""
from __future__ import annotations

import sys

from tessera.vkapi.vkconst import vk

from ..driver import Driver
from ..feature import DeviceRequest, Feature
from ..objects import CommandBuffer, Device, PhysicalDevice
from . import metrics, objects, recording
from .rewrite import Rewriter, compute_stages, graphics_stages


GRAPHICS, COMPUTE = vk.VK_PIPELINE_BIND_POINT_GRAPHICS, vk.VK_PIPELINE_BIND_POINT_COMPUTE
RAY_TRACING = vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR


class Instrumentation(Feature):
    """The extension's hooks: one method per command (HookSet.bind). Its own state: the warnings
    already given (one each, from any thread) and the create-time rewriter's pending create infos."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi, self.hooks, self.objects = drv, drv.ffi, drv.hooks, drv.objects
        self.log = drv.hooks.errors.log
        self.warned: set[str] = set()
        self.rewriter = Rewriter(drv, self.warn_once)   # instrumented pipelines and shader objects

    def warn_once(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            self.log.warning("%s", message)
            print(f"tessera: shader instrumentation: {message}", file=sys.stderr)

    # ---- device lifecycle (icd/feature.py) ------------------------------------------------------
    label = "shader instrumentation"
    defers_begin = False   # its begin hook routes the buffer's commands to Python

    def wants(self, request: DeviceRequest) -> bool:
        return metrics.wants_instrumentation(self.ffi, request.create_info.pNext)

    def enable(self, request: DeviceRequest) -> None:
        metrics.enable_store_features(self.ffi, request.info, request.keep)

    def created(self, dev: Device, request: DeviceRequest) -> None:
        dev.instrumentation = objects.setup(self.ffi, dev)

    def destroyed(self, dev: Device) -> None:
        objects.teardown(self.ffi, dev)

    # ---- instrumented pipelines and shader objects (rewrite.py) ------------------
    def before_vkCreateComputePipelines(self, dev, *args):
        return self.rewriter.before_pipelines("compute", "VkComputePipelineCreateInfo", compute_stages, dev, *args)

    def before_vkCreateGraphicsPipelines(self, dev, *args):
        return self.rewriter.before_pipelines("graphics", "VkGraphicsPipelineCreateInfo", graphics_stages, dev, *args)

    def after_vkCreateComputePipelines(self, dev, result, *args):
        self.rewriter.after_pipelines(dev, result, *args)

    def after_vkCreateGraphicsPipelines(self, dev, result, *args):
        self.rewriter.after_pipelines(dev, result, *args)

    def before_vkCreateShadersEXT(self, dev, *args):
        return self.rewriter.before_shaders(dev, *args)

    def after_vkCreateShadersEXT(self, dev, result, *args):
        self.rewriter.after_shaders(dev, result, *args)

    # ---- objects (objects.py) ----------------------------------------------------
    def replace_vkCreateShaderInstrumentationARM(self, device, pCreateInfo, pAllocator, pInstrumentation):
        dev = self.objects.get(device, Device)
        state = dev.instrumentation
        if state is None:
            self.warn_once("create", "vkCreateShaderInstrumentationARM on a device that did not enable the "
                           "shaderInstrumentation feature")
            return vk.VK_ERROR_FEATURE_NOT_PRESENT
        pInstrumentation[0] = objects.create(state, dev).handle
        return vk.VK_SUCCESS

    def replace_vkDestroyShaderInstrumentationARM(self, device, instrumentation, pAllocator):
        obj = objects.object_of(self.objects.get(device, Device), instrumentation)
        if obj is not None:
            objects.destroy(self.ffi, obj)

    # ---- recording (recording.py) ------------------------------------------------
    def after_vkBeginCommandBuffer(self, cb, result, commandBuffer, pBeginInfo):
        """Every command buffer of a device with the feature records through its Python hooks: an
        action with an instrumented pipeline and no active object must still bind somewhere for
        its shaders to count into (the discard region), when it is recorded."""
        if result == vk.VK_SUCCESS and cb.device.instrumentation is not None:
            self.hooks.recorder.python_path(commandBuffer, True)

    def replace_vkCmdBeginShaderInstrumentationARM(self, commandBuffer, instrumentation):
        cb = self.objects.get(commandBuffer, CommandBuffer)
        obj = objects.object_of(cb.device, instrumentation)
        if obj is None:
            self.warn_once("begin-unknown", "vkCmdBeginShaderInstrumentationARM with an unknown instrumentation "
                           "object: ignored")
            return
        if cb.instrumentation is not None:
            self.warn_once("begin-twice", "vkCmdBeginShaderInstrumentationARM while another object is active in "
                           "the command buffer (only one may be active): ignored")
            return
        cb.instrumentation = obj

    def replace_vkCmdEndShaderInstrumentationARM(self, commandBuffer):
        cb = self.objects.get(commandBuffer, CommandBuffer)
        if cb.instrumentation is None:
            self.warn_once("end-none", "vkCmdEndShaderInstrumentationARM with no active instrumentation object: "
                           "ignored")
            return
        cb.instrumentation = None

    def before_vkCmdExecuteCommands(self, cb, commandBuffer, count, pCommandBuffers):
        if cb.instrumentation is not None:
            self.warn_once("execute", "vkCmdExecuteCommands while shader instrumentation is active (not allowed "
                           "by VK_ARM_shader_instrumentation): the secondaries' work is not attributed to it")

    def before_vkCmdBindShadersEXT(self, cb: CommandBuffer, commandBuffer, count, pStages, pShaders):
        """After icd/recording.py bound the stages: the plan of the graphics shader objects now bound."""
        recording.shaders_bound(cb, count, pStages, self.warn_once)

    # Every draw, dispatch and trace rays: numbered, and bound to its region when instrumented.
    def _action(self, cb: CommandBuffer, commandBuffer, bind_point: int) -> None:
        recording.before_action(self.ffi, cb, commandBuffer, bind_point)

    def before_vkCmdDraw(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawIndexed(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawIndirect(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawIndexedIndirect(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawIndirectCount(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawIndexedIndirectCount(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawMultiEXT(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawMultiIndexedEXT(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawIndirectByteCountEXT(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawMeshTasksEXT(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawMeshTasksIndirectEXT(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDrawMeshTasksIndirectCountEXT(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, GRAPHICS)

    def before_vkCmdDispatch(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, COMPUTE)

    def before_vkCmdDispatchBase(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, COMPUTE)

    def before_vkCmdDispatchIndirect(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, COMPUTE)

    def before_vkCmdTraceRaysKHR(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, RAY_TRACING)

    def before_vkCmdTraceRaysIndirectKHR(self, cb: CommandBuffer, commandBuffer, *args):
        self._action(cb, commandBuffer, RAY_TRACING)

    # ---- results (metrics.py, objects.py) ------------------------
    def replace_vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM(self, physicalDevice, pCount, pDescriptions):
        self.objects.get(physicalDevice, PhysicalDevice)
        return metrics.describe_metrics(self.ffi, pCount, pDescriptions)

    def replace_vkGetShaderInstrumentationValuesARM(self, device, instrumentation, pCount, pValues, flags):
        obj = objects.object_of(self.objects.get(device, Device), instrumentation)
        if obj is None:
            self.warn_once("get-unknown", "vkGetShaderInstrumentationValuesARM with an unknown object")
            pCount[0] = 0
            return vk.VK_SUCCESS
        return objects.get_values(self.ffi, obj, pCount, pValues)

    def replace_vkClearShaderInstrumentationMetricsARM(self, device, instrumentation):
        obj = objects.object_of(self.objects.get(device, Device), instrumentation)
        if obj is not None:
            objects.clear(self.ffi, obj)


def register(drv: Driver) -> Instrumentation:
    feature = drv.hooks.bind(Instrumentation(drv))
    drv.features.append(feature)
    return feature

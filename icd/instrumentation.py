"""VK_ARM_shader_instrumentation in the emulated Mali: real per-basic-block counts, Mali pipe costs.

Role: the extension's hooks, every one of them (vkapi/intercepts.py names this module in their
rows, and HookSet.install refuses a hook registered from another), each a few lines that call
into the modules doing the work:

  instrumentation_metrics.py    the metrics, their enumeration, the device feature's create chain
  instrumentation_objects.py    the device's state, the objects, their values and clear (result layout)
  instrumentation_recording.py  per action at record time: resultIndex, counter region, binding
  instrumentation_rewrite.py    pipelines and shader objects rewritten to count, at create time

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

from tessera.vkapi.commands import DISPATCHES, DRAWS, TRACE_RAYS
from tessera.vkapi.vkconst import vk

from . import instrumentation_metrics, instrumentation_objects, instrumentation_recording
from .driver import Driver
from .instrumentation_rewrite import Rewriter, compute_stages, graphics_stages
from .objects import CommandBuffer, Device, PhysicalDevice


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects
    log = hooks.errors.log
    warned: set[str] = set()

    def warn_once(key: str, message: str) -> None:
        if key not in warned:
            warned.add(key)
            log.warning("%s", message)
            import sys
            print(f"tessera: shader instrumentation: {message}", file=sys.stderr)

    # ---- device (device.py calls these for devices that enabled the feature) ----------------------
    drv.instrumentation_setup = lambda dev: instrumentation_objects.setup(ffi, dev)
    drv.instrumentation_teardown = lambda dev: instrumentation_objects.teardown(ffi, dev)

    # ---- instrumented pipelines and shader objects (instrumentation_rewrite.py) ------------------
    rewriter = Rewriter(drv, warn_once)

    @hooks.before("vkCreateComputePipelines")
    def before_create_compute(dev, *args):
        return rewriter.before_pipelines("compute", "VkComputePipelineCreateInfo", compute_stages, dev, *args)

    @hooks.before("vkCreateGraphicsPipelines")
    def before_create_graphics(dev, *args):
        return rewriter.before_pipelines("graphics", "VkGraphicsPipelineCreateInfo", graphics_stages, dev, *args)

    @hooks.after("vkCreateComputePipelines")
    @hooks.after("vkCreateGraphicsPipelines")
    def after_create(dev, result, *args):
        rewriter.after_pipelines(dev, result, *args)

    @hooks.before("vkCreateShadersEXT")
    def before_create_shaders(dev, *args):
        return rewriter.before_shaders(dev, *args)

    @hooks.after("vkCreateShadersEXT")
    def after_create_shaders(dev, result, *args):
        rewriter.after_shaders(dev, result, *args)

    # ---- objects (instrumentation_objects.py) ----------------------------------------------------
    @hooks.replace("vkCreateShaderInstrumentationARM")
    def create_object(device, pCreateInfo, pAllocator, pInstrumentation):
        dev = objects.get(device, Device)
        state = dev.instrumentation
        if state is None:
            warn_once("create", "vkCreateShaderInstrumentationARM on a device that did not enable the "
                      "shaderInstrumentation feature")
            return vk.VK_ERROR_FEATURE_NOT_PRESENT
        pInstrumentation[0] = instrumentation_objects.create(state, dev).handle
        return vk.VK_SUCCESS

    @hooks.replace("vkDestroyShaderInstrumentationARM")
    def destroy_object(device, instrumentation, pAllocator):
        obj = instrumentation_objects.object_of(objects.get(device, Device), instrumentation)
        if obj is not None:
            instrumentation_objects.destroy(ffi, obj)

    # ---- recording (instrumentation_recording.py) ------------------------------------------------
    @hooks.after("vkBeginCommandBuffer")
    def after_begin_buffer(cb, result, commandBuffer, pBeginInfo):
        """Every command buffer of a device with the feature records through its Python hooks: an
        action with an instrumented pipeline and no active object must still bind somewhere for
        its shaders to count into (the discard region), when it is recorded."""
        if result == vk.VK_SUCCESS and cb.device.instrumentation is not None:
            hooks.recorder.python_path(commandBuffer, True)

    @hooks.replace("vkCmdBeginShaderInstrumentationARM")
    def cmd_begin(commandBuffer, instrumentation):
        cb = objects.get(commandBuffer, CommandBuffer)
        obj = instrumentation_objects.object_of(cb.device, instrumentation)
        if obj is None:
            warn_once("begin-unknown", "vkCmdBeginShaderInstrumentationARM with an unknown instrumentation object: "
                      "ignored")
            return
        if cb.instrumentation is not None:
            warn_once("begin-twice", "vkCmdBeginShaderInstrumentationARM while another object is active in the "
                      "command buffer (only one may be active): ignored")
            return
        cb.instrumentation = obj

    @hooks.replace("vkCmdEndShaderInstrumentationARM")
    def cmd_end(commandBuffer):
        cb = objects.get(commandBuffer, CommandBuffer)
        if cb.instrumentation is None:
            warn_once("end-none", "vkCmdEndShaderInstrumentationARM with no active instrumentation object: ignored")
            return
        cb.instrumentation = None

    @hooks.before("vkCmdExecuteCommands")
    def before_execute(cb, commandBuffer, count, pCommandBuffers):
        if cb.instrumentation is not None:
            warn_once("execute", "vkCmdExecuteCommands while shader instrumentation is active (not allowed by "
                      "VK_ARM_shader_instrumentation): the secondaries' work is not attributed to it")

    @hooks.before("vkCmdBindShadersEXT")
    def bind_shaders(cb: CommandBuffer, commandBuffer, count, pStages, pShaders):
        """After recording.py bound the stages: the plan of the graphics shader objects now bound."""
        instrumentation_recording.shaders_bound(cb, count, pStages, warn_once)

    def action(bind_point: int):
        def before(cb: CommandBuffer, commandBuffer, *args):
            instrumentation_recording.before_action(ffi, cb, commandBuffer, bind_point)
        return before

    for name in DRAWS:
        hooks.before(name)(action(vk.VK_PIPELINE_BIND_POINT_GRAPHICS))
    for name in DISPATCHES:
        hooks.before(name)(action(vk.VK_PIPELINE_BIND_POINT_COMPUTE))
    for name in TRACE_RAYS:
        hooks.before(name)(action(vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR))

    # ---- results (instrumentation_metrics.py, instrumentation_objects.py) ------------------------
    @hooks.replace("vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM")
    def enumerate_metrics(physicalDevice, pCount, pDescriptions):
        objects.get(physicalDevice, PhysicalDevice)
        return instrumentation_metrics.describe_metrics(ffi, pCount, pDescriptions)

    @hooks.replace("vkGetShaderInstrumentationValuesARM")
    def get_values(device, instrumentation, pCount, pValues, flags):
        obj = instrumentation_objects.object_of(objects.get(device, Device), instrumentation)
        if obj is None:
            warn_once("get-unknown", "vkGetShaderInstrumentationValuesARM with an unknown object")
            pCount[0] = 0
            return vk.VK_SUCCESS
        return instrumentation_objects.get_values(ffi, obj, pCount, pValues)

    @hooks.replace("vkClearShaderInstrumentationMetricsARM")
    def clear(device, instrumentation):
        obj = instrumentation_objects.object_of(objects.get(device, Device), instrumentation)
        if obj is not None:
            instrumentation_objects.clear(ffi, obj)

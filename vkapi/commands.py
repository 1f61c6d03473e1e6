"""Vulkan commands grouped by what they are, for the layer (tags) and the driver
(timeline): one list of each, so both intercept exactly the same workloads."""
from __future__ import annotations

from collections.abc import Callable

RENDER_PASS = ("vkCmdBeginRenderPass", "vkCmdBeginRenderPass2", "vkCmdEndRenderPass", "vkCmdEndRenderPass2",
               "vkCmdBeginRendering", "vkCmdEndRendering")
DRAWS = ("vkCmdDraw", "vkCmdDrawIndexed", "vkCmdDrawIndirect", "vkCmdDrawIndexedIndirect",
         "vkCmdDrawIndirectCount", "vkCmdDrawIndexedIndirectCount",
         "vkCmdDrawMultiEXT", "vkCmdDrawMultiIndexedEXT",                  # VK_EXT_multi_draw
         "vkCmdDrawIndirectByteCountEXT",                                  # VK_EXT_transform_feedback
         "vkCmdDrawMeshTasksEXT", "vkCmdDrawMeshTasksIndirectEXT",         # VK_EXT_mesh_shader
         "vkCmdDrawMeshTasksIndirectCountEXT")
DISPATCHES = ("vkCmdDispatch", "vkCmdDispatchBase", "vkCmdDispatchIndirect")
TRACE_RAYS = ("vkCmdTraceRaysKHR", "vkCmdTraceRaysIndirectKHR")
# VK_KHR_acceleration_structure: builds (and updates) and copies, each a workload of its own.
ACCELERATION_STRUCTURES = ("vkCmdBuildAccelerationStructuresKHR", "vkCmdBuildAccelerationStructuresIndirectKHR",
                           "vkCmdCopyAccelerationStructureKHR", "vkCmdCopyAccelerationStructureToMemoryKHR",
                           "vkCmdCopyMemoryToAccelerationStructureKHR")
BUFFER_TRANSFERS = ("vkCmdFillBuffer", "vkCmdUpdateBuffer", "vkCmdCopyBuffer", "vkCmdCopyBuffer2")
IMAGE_TRANSFERS = ("vkCmdClearColorImage", "vkCmdClearDepthStencilImage", "vkCmdCopyImage", "vkCmdCopyImage2",
                   "vkCmdBlitImage", "vkCmdBlitImage2", "vkCmdResolveImage", "vkCmdResolveImage2",
                   "vkCmdCopyBufferToImage", "vkCmdCopyBufferToImage2", "vkCmdCopyImageToBuffer",
                   "vkCmdCopyImageToBuffer2")
# Device extensions whose draw / dispatch / trace-rays / acceleration-structure commands neither the layer nor the driver
# intercept: the emulated Mali does not expose them, so no workload can escape the timeline
# (tests/vkapi/test_command_taxonomy.py checks every such command of the registry is here or above).
UNTRACKED_WORKLOAD_EXTENSIONS = {
    "VK_KHR_device_address_commands": "newer than every backend here; its *2KHR draws are not intercepted yet",
    "VK_KHR_ray_tracing_maintenance1": "vkCmdTraceRaysIndirect2KHR is not intercepted yet",
    "VK_ARM_data_graph": "vkCmdDispatchDataGraphARM is tracked apart from these lists: the driver runs it "
                         "(icd/data_graph/), the layer tags it (layer/workloads.py)",
    "VK_AMDX_shader_enqueue": "AMD-only, provisional",
    "VK_QCOM_tile_shading": "Qualcomm-only",
    "VK_HUAWEI_cluster_culling_shader": "Huawei-only",
    "VK_NV_mesh_shader": "NVIDIA-only (VK_EXT_mesh_shader is tracked)",
    "VK_NV_ray_tracing": "NVIDIA-only (VK_KHR_ray_tracing_pipeline is tracked)",
    "VK_NV_cluster_acceleration_structure": "NVIDIA-only (VK_KHR_acceleration_structure is tracked)",
    "VK_NV_partitioned_acceleration_structure": "NVIDIA-only (VK_KHR_acceleration_structure is tracked)",
}
BARRIERS = ("vkCmdPipelineBarrier", "vkCmdPipelineBarrier2", "vkCmdWaitEvents", "vkCmdWaitEvents2")
DEVICE_QUEUES = ("vkGetDeviceQueue", "vkGetDeviceQueue2")


def track_device_queues(hooks, track: Callable[..., None]) -> None:
    """Call `track(owner, queue handle, family, index)` for every queue the application gets."""

    @hooks.after("vkGetDeviceQueue")
    def after_get_queue(owner, result, device, family, index, pQueue):
        track(owner, pQueue[0], family, index)

    @hooks.after("vkGetDeviceQueue2")
    def after_get_queue2(owner, result, device, pQueueInfo, pQueue):
        track(owner, pQueue[0], pQueueInfo.queueFamilyIndex, pQueueInfo.queueIndex)

COMMAND_BUFFER_LIFETIME = ("vkAllocateCommandBuffers", "vkFreeCommandBuffers", "vkDestroyCommandPool",
                           "vkResetCommandPool")


def track_command_buffers(hooks, ffi, pools_of: Callable, added: Callable, gone: Callable, reset: Callable) -> None:
    """Follow command buffers through their pools (spec 6.2-6.3).

    `pools_of(owner)` is the owner's dict pool -> buffer addresses; the callbacks get
    (owner, handle, address, level, pool) when allocated, (owner, address) when freed
    (alone or with their pool) and when their pool is reset.
    """
    def address(handle) -> int:
        return int(ffi.cast("uintptr_t", handle))

    @hooks.after("vkAllocateCommandBuffers")
    def after_allocate(owner, result, device, info, pCommandBuffers):
        if result != 0:   # VK_SUCCESS
            return
        pool = int(info.commandPool)
        members = pools_of(owner).setdefault(pool, set())
        for i in range(info.commandBufferCount):
            a = address(pCommandBuffers[i])
            added(owner, pCommandBuffers[i], a, info.level, pool)
            members.add(a)

    @hooks.before("vkFreeCommandBuffers")
    def before_free(owner, device, commandPool, count, pCommandBuffers):
        members = pools_of(owner).get(int(commandPool), set())
        for i in range(count):
            if pCommandBuffers[i] != ffi.NULL:
                a = address(pCommandBuffers[i])
                members.discard(a)
                gone(owner, a)

    @hooks.before("vkDestroyCommandPool")
    def before_destroy_pool(owner, device, commandPool, pAllocator):
        for a in pools_of(owner).pop(int(commandPool), set()):
            gone(owner, a)

    @hooks.after("vkResetCommandPool")
    def after_reset_pool(owner, result, device, commandPool, flags):
        for a in pools_of(owner).get(int(commandPool), ()):
            reset(owner, a)

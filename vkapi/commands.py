"""Vulkan commands grouped by what they are, for the layer (tags) and the driver
(timeline): one list of each, so both intercept exactly the same workloads."""
from __future__ import annotations

from collections.abc import Callable

RENDER_PASS = ("vkCmdBeginRenderPass", "vkCmdBeginRenderPass2", "vkCmdEndRenderPass", "vkCmdEndRenderPass2",
               "vkCmdBeginRendering", "vkCmdEndRendering")
DRAWS = ("vkCmdDraw", "vkCmdDrawIndexed", "vkCmdDrawIndirect", "vkCmdDrawIndexedIndirect",
         "vkCmdDrawIndirectCount", "vkCmdDrawIndexedIndirectCount")
DISPATCHES = ("vkCmdDispatch", "vkCmdDispatchBase", "vkCmdDispatchIndirect")
TRACE_RAYS = ("vkCmdTraceRaysKHR", "vkCmdTraceRaysIndirectKHR")
BUFFER_TRANSFERS = ("vkCmdFillBuffer", "vkCmdUpdateBuffer", "vkCmdCopyBuffer", "vkCmdCopyBuffer2")
IMAGE_TRANSFERS = ("vkCmdClearColorImage", "vkCmdClearDepthStencilImage", "vkCmdCopyImage", "vkCmdCopyImage2",
                   "vkCmdBlitImage", "vkCmdBlitImage2", "vkCmdResolveImage", "vkCmdResolveImage2",
                   "vkCmdCopyBufferToImage", "vkCmdCopyBufferToImage2", "vkCmdCopyImageToBuffer",
                   "vkCmdCopyImageToBuffer2")
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

"""Debug labels and markers, recorded per command buffer and per queue.

VK_EXT_debug_utils command-buffer and queue labels and VK_EXT_debug_marker
markers are recorded here whether or not the backend has them (the layer's
`t<tagID>` labels arrive this way), then forwarded when it does. The
recorded label operations feed the emulated timeline.
"""
from __future__ import annotations

from tessera.vkapi import structs

from .driver import Driver


def register(drv: Driver) -> None:
    ffi, hooks = drv.ffi, drv.hooks

    def name_of(p) -> str:
        return structs.string(ffi, p)

    @hooks.before("vkCmdBeginDebugUtilsLabelEXT")
    def cmd_begin_label(cb, commandBuffer, pLabelInfo):
        cb.ops.append(("begin", name_of(pLabelInfo.pLabelName)))

    @hooks.before("vkCmdEndDebugUtilsLabelEXT")
    def cmd_end_label(cb, commandBuffer):
        cb.ops.append(("end", None))

    @hooks.before("vkCmdInsertDebugUtilsLabelEXT")
    def cmd_insert_label(cb, commandBuffer, pLabelInfo):
        cb.ops.append(("insert", name_of(pLabelInfo.pLabelName)))

    @hooks.before("vkCmdDebugMarkerBeginEXT")
    def marker_begin(cb, commandBuffer, pMarkerInfo):
        cb.ops.append(("begin", name_of(pMarkerInfo.pMarkerName)))

    @hooks.before("vkCmdDebugMarkerEndEXT")
    def marker_end(cb, commandBuffer):
        cb.ops.append(("end", None))

    @hooks.before("vkCmdDebugMarkerInsertEXT")
    def marker_insert(cb, commandBuffer, pMarkerInfo):
        cb.ops.append(("insert", name_of(pMarkerInfo.pMarkerName)))

    @hooks.before("vkQueueBeginDebugUtilsLabelEXT")
    def queue_begin_label(queue, vkqueue, pLabelInfo):
        queue.labels.append(name_of(pLabelInfo.pLabelName))

    @hooks.before("vkQueueEndDebugUtilsLabelEXT")
    def queue_end_label(queue, vkqueue):
        if queue.labels:  # a pop without a push is tolerated
            queue.labels.pop()

    hooks.forward("vkQueueInsertDebugUtilsLabelEXT")  # a point label: nothing stays open

    @hooks.before("vkSetDebugUtilsObjectNameEXT")
    def set_object_name(dev, device, pNameInfo):
        dev.object_names[int(pNameInfo.objectHandle)] = name_of(pNameInfo.pObjectName)

    @hooks.before("vkDebugMarkerSetObjectNameEXT")
    def marker_object_name(dev, device, pNameInfo):
        dev.object_names[int(pNameInfo.object)] = name_of(pNameInfo.pObjectName)
    hooks.forward("vkDebugMarkerSetObjectTagEXT")  # binary tags: nothing here reads them

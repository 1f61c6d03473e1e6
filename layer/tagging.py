"""Workload tags: a process-wide counter and the `t<tagID>` debug labels.

Each workload is wrapped in a debug label `t<tagID>` sent down to the driver
(begin just before the command, end just after), as Arm's GPU Timeline layer
does, so the driver's render-stage events carry the tag. VK_EXT_debug_utils
labels are used; VK_EXT_debug_marker markers when only they are available.
"""
from __future__ import annotations

from collections.abc import Callable

from tessera.vkapi.vkconst import vk


class Labeller:
    """`next_tag`: the process-wide tag counter, shared with the commands the shim records in C
    (vkapi/runtime/recorder.c's tessera_next_tag: one counter starting at 1, handed to each thread in
    blocks of 64, so a thread's tags increase and no two are equal)."""

    def __init__(self, ffi, next_tag: Callable[[], int]) -> None:
        self.ffi = ffi
        self.next_tag = next_tag

    def push(self, dev, command_buffer, name: str) -> bool:
        """Begin a label named `name` below the application; False if the device has no label command."""
        ffi = self.ffi
        text = ffi.new("char[]", name.encode())
        begin = dev.next.vkCmdBeginDebugUtilsLabelEXT
        if begin is not None:
            begin(command_buffer, ffi.new("VkDebugUtilsLabelEXT *",
                                          {"sType": vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, "pLabelName": text}))
            return True
        marker = dev.next.vkCmdDebugMarkerBeginEXT
        if marker is not None:
            marker(command_buffer, ffi.new("VkDebugMarkerMarkerInfoEXT *",
                                           {"sType": vk.VK_STRUCTURE_TYPE_DEBUG_MARKER_MARKER_INFO_EXT,
                                            "pMarkerName": text}))
            return True
        return False

    def pop(self, dev, command_buffer) -> None:
        end = dev.next.vkCmdEndDebugUtilsLabelEXT
        if end is not None:
            end(command_buffer)
        elif dev.next.vkCmdDebugMarkerEndEXT is not None:
            dev.next.vkCmdDebugMarkerEndEXT(command_buffer)

    def queue_push(self, dev, queue, name: str) -> bool:
        begin = dev.next.vkQueueBeginDebugUtilsLabelEXT
        if begin is None:
            return False
        text = self.ffi.new("char[]", name.encode())
        begin(queue, self.ffi.new("VkDebugUtilsLabelEXT *",
                                  {"sType": vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, "pLabelName": text}))
        return True

    def queue_pop(self, dev, queue) -> None:
        dev.next.vkQueueEndDebugUtilsLabelEXT(queue)

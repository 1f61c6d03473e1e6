"""Workload tags: a process-wide counter and the `t<tagID>` debug labels.

Each workload is wrapped in a debug label `t<tagID>` sent down to the driver
(begin just before the command, end just after), exactly as Arm's GPU
Timeline layer does, so the driver's render-stage events carry the tag.
"""
from __future__ import annotations

import itertools

from tessera.vkapi.vkconst import vk

_next_tag = itertools.count(1).__next__  # atomic under the GIL


class Labeller:
    """Begins and ends `t<tagID>` labels on a command buffer."""

    def __init__(self, ffi) -> None:
        self.ffi = ffi
        self.stype = vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT

    def begin(self, device, command_buffer) -> int:
        tag = _next_tag()
        begin = device.next.vkCmdBeginDebugUtilsLabelEXT
        if begin is not None:
            name = self.ffi.new("char[]", b"t%d" % tag)
            label = self.ffi.new("VkDebugUtilsLabelEXT *", {"sType": self.stype, "pLabelName": name})
            begin(command_buffer, label)
        return tag

    def end(self, device, command_buffer) -> None:
        end = device.next.vkCmdEndDebugUtilsLabelEXT
        if end is not None:
            end(command_buffer)

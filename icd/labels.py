"""Debug labels and markers: consumed by the driver, as Mali's driver does.

VK_EXT_debug_utils command-buffer and queue labels and VK_EXT_debug_marker
markers are recorded into the shadow recording (command buffers) or the
queue's label stack, where the emulated timeline reads them; they are not
passed to the backend, which needs none of them (and lavapipe crashes on
labels that open in one command buffer and close in another, which Vulkan
allows and the layer's split render-pass tags rely on). Object names and
tags are object_names.py's.
"""
from __future__ import annotations

from tessera.vkapi import structs
from tessera.vkapi.ops import LABEL_END, LabelBegin, LabelInsert

from .driver import Driver
from .objects import CommandBuffer, Queue


class DebugLabels:
    """Labels and markers into the shadow recording (command buffers) or the queue's label stack; one
    method per command (HookSet.bind): replacements (the backend never sees them) and the appliers of
    the records made in C."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi, self.objects = drv, drv.ffi, drv.objects

    def _record(self, commandBuffer, op) -> None:
        self.objects.get(commandBuffer, CommandBuffer).ops.append(op)

    def _text(self, name_ptr) -> str:
        return structs.string(self.ffi, name_ptr)

    # ---- command buffers: recorded in Python --------------------------------------------------
    def replace_vkCmdBeginDebugUtilsLabelEXT(self, commandBuffer, pLabelInfo):
        self._record(commandBuffer, LabelBegin(self._text(pLabelInfo.pLabelName)))

    def replace_vkCmdEndDebugUtilsLabelEXT(self, commandBuffer):
        self._record(commandBuffer, LABEL_END)

    def replace_vkCmdInsertDebugUtilsLabelEXT(self, commandBuffer, pLabelInfo):
        self._record(commandBuffer, LabelInsert(self._text(pLabelInfo.pLabelName)))

    def replace_vkCmdDebugMarkerBeginEXT(self, commandBuffer, pMarkerInfo):
        self._record(commandBuffer, LabelBegin(self._text(pMarkerInfo.pMarkerName)))

    def replace_vkCmdDebugMarkerEndEXT(self, commandBuffer):
        self._record(commandBuffer, LABEL_END)

    def replace_vkCmdDebugMarkerInsertEXT(self, commandBuffer, pMarkerInfo):
        self._record(commandBuffer, LabelInsert(self._text(pMarkerInfo.pMarkerName)))

    # ---- command buffers: recorded in C (shim_spec.RECORDED), applied with the label text already copied
    def apply_vkCmdBeginDebugUtilsLabelEXT(self, cb: CommandBuffer, commandBuffer, name: str | None = None) -> None:
        cb.ops.append(LabelBegin(name))

    def apply_vkCmdEndDebugUtilsLabelEXT(self, cb: CommandBuffer, commandBuffer, name: str | None = None) -> None:
        cb.ops.append(LABEL_END)   # an end carries no text

    def apply_vkCmdInsertDebugUtilsLabelEXT(self, cb: CommandBuffer, commandBuffer, name: str | None = None) -> None:
        cb.ops.append(LabelInsert(name))

    def apply_vkCmdDebugMarkerBeginEXT(self, cb: CommandBuffer, commandBuffer, name: str | None = None) -> None:
        cb.ops.append(LabelBegin(name))

    def apply_vkCmdDebugMarkerEndEXT(self, cb: CommandBuffer, commandBuffer, name: str | None = None) -> None:
        cb.ops.append(LABEL_END)   # an end carries no text

    def apply_vkCmdDebugMarkerInsertEXT(self, cb: CommandBuffer, commandBuffer, name: str | None = None) -> None:
        cb.ops.append(LabelInsert(name))

    # ---- queues ---------------------------------------------------------------------------------
    # The queue's label stack changes in call order with its submits, on the timeline's worker. The
    # shim's C path records begin and end in the submit ledger (vkapi/submits.py); these hooks run when
    # it is off (TESSERA_C_SUBMITS=0).
    def replace_vkQueueBeginDebugUtilsLabelEXT(self, queue, pLabelInfo):
        self.drv.timeline.queue_label(self.objects.get(queue, Queue), structs.string(self.ffi, pLabelInfo.pLabelName))

    def replace_vkQueueEndDebugUtilsLabelEXT(self, queue):
        self.drv.timeline.queue_label(self.objects.get(queue, Queue), None)

    def replace_vkQueueInsertDebugUtilsLabelEXT(self, queue, pLabelInfo):
        self.objects.get(queue, Queue)  # a point label: nothing stays open


def register(drv: Driver) -> None:
    drv.hooks.bind(DebugLabels(drv))

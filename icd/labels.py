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
from tessera.vkapi.vkconst import vk

from .driver import Driver
from .objects import CommandBuffer, Queue


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects

    def record(commandBuffer, op: str, name_ptr=None) -> None:
        name = structs.string(ffi, name_ptr) if name_ptr is not None else None
        objects.get(commandBuffer, CommandBuffer).ops.append((op, name))

    # Recorded in C (shim_spec.RECORDED): applied with the label text already copied.
    def applier(op: str):
        def apply(cb: CommandBuffer, commandBuffer, name: str | None = None) -> None:
            cb.ops.append((op, name))
        return apply

    for name, op in (("vkCmdBeginDebugUtilsLabelEXT", "begin"), ("vkCmdEndDebugUtilsLabelEXT", "end"),
                     ("vkCmdInsertDebugUtilsLabelEXT", "insert"), ("vkCmdDebugMarkerBeginEXT", "begin"),
                     ("vkCmdDebugMarkerEndEXT", "end"), ("vkCmdDebugMarkerInsertEXT", "insert")):
        hooks.applies(name)(applier(op))

    @hooks.replace("vkCmdBeginDebugUtilsLabelEXT")
    def cmd_begin_label(commandBuffer, pLabelInfo):
        record(commandBuffer, "begin", pLabelInfo.pLabelName)

    @hooks.replace("vkCmdEndDebugUtilsLabelEXT")
    def cmd_end_label(commandBuffer):
        record(commandBuffer, "end")

    @hooks.replace("vkCmdInsertDebugUtilsLabelEXT")
    def cmd_insert_label(commandBuffer, pLabelInfo):
        record(commandBuffer, "insert", pLabelInfo.pLabelName)

    @hooks.replace("vkCmdDebugMarkerBeginEXT")
    def marker_begin(commandBuffer, pMarkerInfo):
        record(commandBuffer, "begin", pMarkerInfo.pMarkerName)

    @hooks.replace("vkCmdDebugMarkerEndEXT")
    def marker_end(commandBuffer):
        record(commandBuffer, "end")

    @hooks.replace("vkCmdDebugMarkerInsertEXT")
    def marker_insert(commandBuffer, pMarkerInfo):
        record(commandBuffer, "insert", pMarkerInfo.pMarkerName)

    # The queue's label stack changes in call order with its submits, on the timeline's worker. The
    # shim's C path records begin and end in the submit ledger (vkapi/submits.py); these hooks run when
    # it is off (TESSERA_C_SUBMITS=0).
    @hooks.replace("vkQueueBeginDebugUtilsLabelEXT")
    def queue_begin_label(queue, pLabelInfo):
        drv.timeline.queue_label(objects.get(queue, Queue), structs.string(ffi, pLabelInfo.pLabelName))

    @hooks.replace("vkQueueEndDebugUtilsLabelEXT")
    def queue_end_label(queue):
        drv.timeline.queue_label(objects.get(queue, Queue), None)

    @hooks.replace("vkQueueInsertDebugUtilsLabelEXT")
    def queue_insert_label(queue, pLabelInfo):
        objects.get(queue, Queue)  # a point label: nothing stays open

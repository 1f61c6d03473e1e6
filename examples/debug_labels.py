"""Debug-label sample: nested application labels around dispatches and transfers.

Run (plain lavapipe; add VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation to validate):
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python examples/debug_labels.py

Enables the VK_EXT_debug_utils instance extension (required) and the
VK_EXT_debug_marker device extension when the device or an enabled layer lists
it (optional: plain lavapipe does not, the validation layer does; it also needs
the VK_EXT_debug_report instance extension, enabled when available). Extension functions come from
vkGetInstanceProcAddr (debug utils) and vkGetDeviceProcAddr (debug marker).
Label structure of the one submit (two command buffers, one batch):
  queue label "frame 0"  (vkQueueBeginDebugUtilsLabelEXT ... End, plus
                          vkQueueInsertDebugUtilsLabelEXT "submit")
    cmd 1: "frame 0 compute"
             "compute"
               [marker "collatz 0..255"] vkCmdDispatch          [/marker]
               insert "between dispatches"
               "second half"
                 [marker "collatz 256..511"] vkCmdDispatchBase  [/marker]
    cmd 2: "frame 0 transfers"
             "transfers"
               vkCmdFillBuffer, insert "copy next", vkCmdCopyBuffer
Labels are balanced within each command buffer: Vulkan allows a label to be
ended in a later command buffer of the same queue, but Mesa's common runtime
(lavapipe, Mesa 23) corrupts its label stack and crashes on such an end.
Objects are also named with vkSetDebugUtilsObjectNameEXT.
What it checks: the Collatz outputs against a Python reference, and the fill
and copy results byte for byte.
Exit 0 and one 'debug_labels: OK ...' line on success.
"""

from __future__ import annotations

import numpy as np
import vulkan as vk

import vkapp
from compute_collatz import DISPATCH_BASE_BIT, collatz_reference

COUNT = 512
LOCAL_SIZE = 64
FILL = 0x5EED5EED


class Labels:
    """Debug utils and (optional) debug marker entry points of one device."""

    def __init__(self, ctx: vkapp.Context) -> None:
        get = lambda name: vk.vkGetInstanceProcAddr(ctx.instance, name)  # noqa: E731
        self.cmd_begin = get("vkCmdBeginDebugUtilsLabelEXT")
        self.cmd_end = get("vkCmdEndDebugUtilsLabelEXT")
        self.cmd_insert = get("vkCmdInsertDebugUtilsLabelEXT")
        self.queue_begin = get("vkQueueBeginDebugUtilsLabelEXT")
        self.queue_end = get("vkQueueEndDebugUtilsLabelEXT")
        self.queue_insert = get("vkQueueInsertDebugUtilsLabelEXT")
        self.set_name = get("vkSetDebugUtilsObjectNameEXT")
        self.has_marker = "VK_EXT_debug_marker" in ctx.device_extensions
        if self.has_marker:
            self.marker_begin = vk.vkGetDeviceProcAddr(ctx.device, "vkCmdDebugMarkerBeginEXT")
            self.marker_end = vk.vkGetDeviceProcAddr(ctx.device, "vkCmdDebugMarkerEndEXT")
            self.marker_insert = vk.vkGetDeviceProcAddr(ctx.device, "vkCmdDebugMarkerInsertEXT")
        self.device = ctx.device
        self.kept: list[object] = []  # label structs own their strings; keep them until the submit is done

    def label(self, name: str, color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)) -> object:
        info = vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName=name,
                                       color=list(color))
        self.kept.append(info)
        return info

    def marker(self, name: str) -> object:
        info = vk.VkDebugMarkerMarkerInfoEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_MARKER_MARKER_INFO_EXT,
                                             pMarkerName=name, color=[0.2, 0.4, 0.8, 1.0])
        self.kept.append(info)
        return info

    def name(self, object_type: int, handle: object, name: str) -> None:
        info = vk.VkDebugUtilsObjectNameInfoEXT(
            sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT, objectType=object_type,
            objectHandle=int(vk.ffi.cast("uint64_t", handle)), pObjectName=name,
        )
        self.set_name(self.device, info)


def body(ctx: vkapp.Context) -> str:
    if not ctx.has_debug_utils:
        raise vkapp.CheckFailed("VK_EXT_debug_utils instance extension not available")
    labels = Labels(ctx)

    rng = np.random.default_rng(99)
    inputs = rng.integers(1, 50_000, size=COUNT, dtype=np.uint32)
    expected = np.array([collatz_reference(int(v)) for v in inputs], dtype=np.uint32)
    storage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
    transfer = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
    inbuf = ctx.buffer(COUNT * 4, storage, inputs)
    outbuf = ctx.buffer(COUNT * 4, storage | transfer, np.zeros(COUNT, dtype=np.uint32))
    copy = ctx.buffer(2 * COUNT * 4, transfer, np.zeros(2 * COUNT, dtype=np.uint32))

    stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    pipeline = ctx.compute_pipeline("collatz.comp", layout, spec={0: LOCAL_SIZE}, flags=DISPATCH_BASE_BIT)
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])
    labels.name(vk.VK_OBJECT_TYPE_PIPELINE, pipeline, "collatz pipeline")
    labels.name(vk.VK_OBJECT_TYPE_BUFFER, inbuf.handle, "collatz inputs")
    labels.name(vk.VK_OBJECT_TYPE_BUFFER, outbuf.handle, "collatz outputs")
    labels.name(vk.VK_OBJECT_TYPE_BUFFER, copy.handle, "copy destination")

    count = vk.ffi.new("uint32_t[1]", [COUNT])
    half_groups = COUNT // 2 // LOCAL_SIZE
    cmd1 = ctx.command_buffer()
    labels.name(vk.VK_OBJECT_TYPE_COMMAND_BUFFER, cmd1, "labels cmd 1")
    labels.cmd_begin(cmd1, labels.label("frame 0 compute", (1.0, 1.0, 1.0, 1.0)))
    labels.cmd_begin(cmd1, labels.label("compute", (0.0, 0.5, 1.0, 1.0)))
    vk.vkCmdBindPipeline(cmd1, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    vk.vkCmdBindDescriptorSets(cmd1, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd1, layout, stage, 0, 4, count)
    if labels.has_marker:
        labels.marker_begin(cmd1, labels.marker(f"collatz 0..{COUNT // 2 - 1}"))
    vk.vkCmdDispatch(cmd1, half_groups, 1, 1)
    if labels.has_marker:
        labels.marker_end(cmd1)
    labels.cmd_insert(cmd1, labels.label("between dispatches"))
    labels.cmd_begin(cmd1, labels.label("second half"))
    if labels.has_marker:
        labels.marker_begin(cmd1, labels.marker(f"collatz {COUNT // 2}..{COUNT - 1}"))
        labels.marker_insert(cmd1, labels.marker("dispatch base next"))
    vk.vkCmdDispatchBase(cmd1, half_groups, 0, 0, half_groups, 1, 1)
    if labels.has_marker:
        labels.marker_end(cmd1)
    labels.cmd_end(cmd1)  # "second half"
    labels.cmd_end(cmd1)  # "compute"
    labels.cmd_end(cmd1)  # "frame 0 compute"

    cmd2 = ctx.command_buffer()
    labels.name(vk.VK_OBJECT_TYPE_COMMAND_BUFFER, cmd2, "labels cmd 2")
    labels.cmd_begin(cmd2, labels.label("frame 0 transfers", (1.0, 1.0, 1.0, 1.0)))
    labels.cmd_begin(cmd2, labels.label("transfers", (0.0, 1.0, 0.0, 1.0)))
    vkapp.memory_barrier(cmd2, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                         vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
    vk.vkCmdFillBuffer(cmd2, copy.handle, COUNT * 4, COUNT * 4, FILL)
    labels.cmd_insert(cmd2, labels.label("copy next"))
    region = vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=COUNT * 4)
    vk.vkCmdCopyBuffer(cmd2, outbuf.handle, copy.handle, 1, [region])
    vkapp.host_barrier(cmd2)
    labels.cmd_end(cmd2)  # "transfers"
    labels.cmd_end(cmd2)  # "frame 0 transfers"

    queue_label, queue_insert = labels.label("frame 0", (1.0, 0.0, 0.0, 1.0)), labels.label("submit")

    def before() -> None:
        labels.queue_begin(ctx.queue, queue_label)
        labels.queue_insert(ctx.queue, queue_insert)

    ctx.submit([cmd1, cmd2], before=before, after=lambda: labels.queue_end(ctx.queue))

    got = copy.array(np.uint32).copy()
    vkapp.check_equal("collatz outputs (via copy)", got[:COUNT], expected)
    vkapp.check_equal("filled half", got[COUNT:], np.full(COUNT, FILL, dtype=np.uint32))
    marker = "with VK_EXT_debug_marker" if labels.has_marker else "without VK_EXT_debug_marker (device lacks it)"
    return (f"{COUNT} collatz results and {COUNT} filled words checked under nested debug-utils labels "
            f"in 2 command buffers, queue labels, {marker}; on {ctx.device_name}")


if __name__ == "__main__":
    vkapp.run_main("debug_labels", body, optional_instance_extensions=["VK_EXT_debug_report"],
                   optional_device_extensions=["VK_EXT_debug_marker"])

"""Tagged workloads: dispatches, trace rays, acceleration-structure builds and copies, buffer and
image transfers, tensor copies (VK_ARM_tensors; tensor sizes remembered by tensors.py).

Each command becomes a `Workload` with a fresh tagID, wrapped in a
`t<tagID>` label (pushed just before the command, popped just after), and
it is described when it is recorded (its command buffer's WORKLOADS batch,
descriptions.py): sizes are in work items
(work-group size from the pipeline's SPIR-V), bytes (VK_WHOLE_SIZE resolved
from tracked buffer sizes) and pixels. Indirect sizes are captured
(indirect.py) and arrive later as an ANNEX.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from tessera.schemas.labels import tag_label
from tessera.vkapi import accel, pipelines
from tessera.vkapi.transfers import ENDPOINTS, TRANSFERS, tensor_copy
from tessera.vkapi.vkconst import vk

from . import descriptions, tensors
from .tagging import Labeller
from .trackers import CommandBufferTracker, Workload

# describe(command, dev, tracker, command buffer, *command args) -> (kind, metadata, capture or None)
Describe = Callable[..., tuple]


class Workloads:
    """Tagged workloads: for each command, describe + tag before, close the tag after (one method per
    command and kind, HookSet.bind, each calling the shared `_tag`, `_track`, `_untag`). When the shim
    records the command in C (shim_spec.RECORDED), C took the tag and sent its label down, and the
    record is applied later with that tag (`apply_…`). State: on each command buffer's tracker (the
    compute pipeline bound, the shader objects bound, whether a label is pushed)."""

    def __init__(self, state, labeller: Labeller, capture) -> None:
        """`capture` is the indirect.Capturer used for indirect dispatches."""
        self.state = state
        self.labeller = labeller
        self.capture = capture

    def before_vkCmdBindShadersEXT(self, dev, commandBuffer, count, pStages, pShaders):
        """Shader objects: a compute shader bound this way sizes dispatches like a pipeline."""
        t = self.state.command_buffer(dev, commandBuffer)
        now = pipelines.bind_shader_objects(dev.res, t.shader_objects, count, pStages,
                                            None if pShaders == self.state.ffi.NULL else pShaders)
        if any(pStages[i] == vk.VK_SHADER_STAGE_COMPUTE_BIT for i in range(count)):
            t.compute_pipeline = now[vk.VK_PIPELINE_BIND_POINT_COMPUTE]

    def before_vkCmdBindPipeline(self, dev, commandBuffer, bindPoint, pipeline):
        if bindPoint == vk.VK_PIPELINE_BIND_POINT_COMPUTE:
            self.state.command_buffer(dev, commandBuffer).compute_pipeline = dev.res.pipelines.get(int(pipeline))

    def apply_vkCmdBindPipeline(self, dev, commandBuffer, bindPoint, pipeline):
        self.before_vkCmdBindPipeline(dev, commandBuffer, bindPoint, pipeline)

    # ---- the shared hooks of every tagged command ---------------------------------
    def _track(self, command: str, describe: Describe, dev, commandBuffer, args, tag: int) -> CommandBufferTracker:
        t = self.state.command_buffer(dev, commandBuffer)
        kind, meta, capture = describe(command, dev, t, commandBuffer, *args)
        w = Workload(tag, tuple(t.labels), t.pops_below_start, capture)
        t.ops.append(w)
        descriptions.describe(self.state, dev, t, w, kind, {"command": command, **meta}, capture is not None)
        return t

    def _tag(self, command: str, describe: Describe, dev, commandBuffer, args) -> None:
        tag = self.labeller.next_tag()
        t = self._track(command, describe, dev, commandBuffer, args, tag)
        t.label_pushed = self.labeller.push(dev, commandBuffer, tag_label(tag))

    def _untag(self, dev, commandBuffer) -> None:
        t = self.state.command_buffer(dev, commandBuffer)
        if t.label_pushed:
            t.label_pushed = False
            self.labeller.pop(dev, commandBuffer)

    # ---- what each command is (Describe) ----------------------------------------------
    @staticmethod
    def group_size(t: CommandBufferTracker):
        p = t.compute_pipeline
        return p.group_size if p is not None and p.group_size else None

    def dispatch_meta(self, t, groups, base=None) -> dict:
        size = self.group_size(t)
        meta = {"groups": list(groups), "group_size": list(size) if size else [-1, -1, -1],
                "items": math.prod(groups) * math.prod(size) if size else -1, "indirect": False}
        if base and any(base):
            meta["base_group"] = list(base)
        return meta

    def _dispatch(self, command, dev, t, cb, x, y, z):
        return "dispatch", self.dispatch_meta(t, (x, y, z)), None

    def _dispatch_base(self, command, dev, t, cb, bx, by, bz, x, y, z):
        return "dispatch", self.dispatch_meta(t, (x, y, z), (bx, by, bz)), None

    def _dispatch_indirect(self, command, dev, t, cb, buffer, offset):
        size = self.group_size(t)
        cap = self.capture.dispatch(dev, cb, buffer, offset, size)
        return "dispatch", {"groups": [-1, -1, -1], "group_size": list(size) if size else [-1, -1, -1],
                            "items": -1, "indirect": True}, cap

    def _trace_rays(self, command, dev, t, cb, raygen, miss, hit, callable_, width, height, depth):
        return "trace_rays", {"width": width, "height": height, "depth": depth, "items": width * height * depth}, None

    def _trace_rays_indirect(self, command, dev, t, cb, raygen, miss, hit, callable_, address):
        # Parameters live at a device address: copied from the tracked buffer holding that address
        # (indirect.Capturer.trace_rays); they arrive as an ANNEX.
        cap = self.capture.trace_rays(dev, cb, int(address))
        return "trace_rays", {"width": -1, "height": -1, "depth": -1, "items": -1, "indirect": True}, cap

    def _transfer(self, command, dev, t, cb, *args):
        """Sizes from the table shared with the driver (vkapi/transfers.py)."""
        tr = TRANSFERS[command](dev.res, *args)
        src, dst = ENDPOINTS[command](*args)
        resources = {"src": f"0x{src:x}"} if src else {}
        if dst:
            resources["dst"] = f"0x{dst:x}"
        return tr.kind, {"subtype": tr.stage, **tr.fields(), "resources": resources}, None

    def _copy_tensor(self, command, dev, t, cb, info):
        tr = tensor_copy(dev.res, info)
        return tr.kind, {"subtype": tr.stage, **tr.fields()}, None

    def _accel(self, command, dev, t, cb, *args):
        """Sizes from the table shared with the driver (vkapi/accel.py)."""
        work = accel.DESCRIBE[command](dev.res, *args)
        return work.kind, dict(work.fields), None

    # ---- dispatches and trace rays ---------------------------------------------
    def before_vkCmdDispatch(self, dev, commandBuffer, *args):
        self._tag("vkCmdDispatch", self._dispatch, dev, commandBuffer, args)

    def apply_vkCmdDispatch(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdDispatch", self._dispatch, dev, commandBuffer, args, tag)

    def after_vkCmdDispatch(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdDispatchBase(self, dev, commandBuffer, *args):
        self._tag("vkCmdDispatchBase", self._dispatch_base, dev, commandBuffer, args)

    def apply_vkCmdDispatchBase(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdDispatchBase", self._dispatch_base, dev, commandBuffer, args, tag)

    def after_vkCmdDispatchBase(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdDispatchIndirect(self, dev, commandBuffer, *args):
        self._tag("vkCmdDispatchIndirect", self._dispatch_indirect, dev, commandBuffer, args)

    def apply_vkCmdDispatchIndirect(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdDispatchIndirect", self._dispatch_indirect, dev, commandBuffer, args, tag)

    def after_vkCmdDispatchIndirect(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdTraceRaysKHR(self, dev, commandBuffer, *args):
        self._tag("vkCmdTraceRaysKHR", self._trace_rays, dev, commandBuffer, args)

    def apply_vkCmdTraceRaysKHR(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdTraceRaysKHR", self._trace_rays, dev, commandBuffer, args, tag)

    def after_vkCmdTraceRaysKHR(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdTraceRaysIndirectKHR(self, dev, commandBuffer, *args):
        self._tag("vkCmdTraceRaysIndirectKHR", self._trace_rays_indirect, dev, commandBuffer, args)

    def apply_vkCmdTraceRaysIndirectKHR(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdTraceRaysIndirectKHR", self._trace_rays_indirect, dev, commandBuffer, args, tag)

    def after_vkCmdTraceRaysIndirectKHR(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)
    # ---- transfers (sizes from the table shared with the driver) ---------------
    def before_vkCmdFillBuffer(self, dev, commandBuffer, *args):
        self._tag("vkCmdFillBuffer", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdFillBuffer(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdFillBuffer", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdFillBuffer(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdUpdateBuffer(self, dev, commandBuffer, *args):
        self._tag("vkCmdUpdateBuffer", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdUpdateBuffer(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdUpdateBuffer", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdUpdateBuffer(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyBuffer(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyBuffer", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdCopyBuffer(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyBuffer", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdCopyBuffer(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyBuffer2(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyBuffer2", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdCopyBuffer2(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyBuffer2", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdCopyBuffer2(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdClearColorImage(self, dev, commandBuffer, *args):
        self._tag("vkCmdClearColorImage", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdClearColorImage(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdClearColorImage", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdClearColorImage(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdClearDepthStencilImage(self, dev, commandBuffer, *args):
        self._tag("vkCmdClearDepthStencilImage", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdClearDepthStencilImage(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdClearDepthStencilImage", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdClearDepthStencilImage(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyImage(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyImage", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdCopyImage(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyImage", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdCopyImage(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyImage2(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyImage2", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdCopyImage2(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyImage2", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdCopyImage2(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdBlitImage(self, dev, commandBuffer, *args):
        self._tag("vkCmdBlitImage", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdBlitImage(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdBlitImage", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdBlitImage(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdBlitImage2(self, dev, commandBuffer, *args):
        self._tag("vkCmdBlitImage2", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdBlitImage2(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdBlitImage2", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdBlitImage2(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdResolveImage(self, dev, commandBuffer, *args):
        self._tag("vkCmdResolveImage", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdResolveImage(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdResolveImage", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdResolveImage(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdResolveImage2(self, dev, commandBuffer, *args):
        self._tag("vkCmdResolveImage2", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdResolveImage2(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdResolveImage2", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdResolveImage2(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyBufferToImage(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyBufferToImage", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdCopyBufferToImage(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyBufferToImage", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdCopyBufferToImage(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyBufferToImage2(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyBufferToImage2", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdCopyBufferToImage2(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyBufferToImage2", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdCopyBufferToImage2(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyImageToBuffer(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyImageToBuffer", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdCopyImageToBuffer(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyImageToBuffer", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdCopyImageToBuffer(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyImageToBuffer2(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyImageToBuffer2", self._transfer, dev, commandBuffer, args)

    def apply_vkCmdCopyImageToBuffer2(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyImageToBuffer2", self._transfer, dev, commandBuffer, args, tag)

    def after_vkCmdCopyImageToBuffer2(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)
    # ---- tensor copies (VK_ARM_tensors): a transfer sized from the tensors remembered at creation (tensors.py)
    def before_vkCmdCopyTensorARM(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyTensorARM", self._copy_tensor, dev, commandBuffer, args)

    def apply_vkCmdCopyTensorARM(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyTensorARM", self._copy_tensor, dev, commandBuffer, args, tag)

    def after_vkCmdCopyTensorARM(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)
    # ---- data-graph dispatches (VK_ARM_data_graph): one workload; the driver costs its operators (icd/data_graph/)
    def _data_graph(self, command, dev, t, cb, session, info):
        return "data_graph", {}, None

    def before_vkCmdDispatchDataGraphARM(self, dev, commandBuffer, *args):
        self._tag("vkCmdDispatchDataGraphARM", self._data_graph, dev, commandBuffer, args)

    def after_vkCmdDispatchDataGraphARM(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)
    # ---- acceleration structures (sizes from the table shared with the driver) ---------------
    def before_vkCmdBuildAccelerationStructuresKHR(self, dev, commandBuffer, *args):
        self._tag("vkCmdBuildAccelerationStructuresKHR", self._accel, dev, commandBuffer, args)

    def apply_vkCmdBuildAccelerationStructuresKHR(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdBuildAccelerationStructuresKHR", self._accel, dev, commandBuffer, args, tag)

    def after_vkCmdBuildAccelerationStructuresKHR(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdBuildAccelerationStructuresIndirectKHR(self, dev, commandBuffer, *args):
        self._tag("vkCmdBuildAccelerationStructuresIndirectKHR", self._accel, dev, commandBuffer, args)

    def apply_vkCmdBuildAccelerationStructuresIndirectKHR(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdBuildAccelerationStructuresIndirectKHR", self._accel, dev, commandBuffer, args, tag)

    def after_vkCmdBuildAccelerationStructuresIndirectKHR(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyAccelerationStructureKHR(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyAccelerationStructureKHR", self._accel, dev, commandBuffer, args)

    def apply_vkCmdCopyAccelerationStructureKHR(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyAccelerationStructureKHR", self._accel, dev, commandBuffer, args, tag)

    def after_vkCmdCopyAccelerationStructureKHR(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyAccelerationStructureToMemoryKHR(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyAccelerationStructureToMemoryKHR", self._accel, dev, commandBuffer, args)

    def apply_vkCmdCopyAccelerationStructureToMemoryKHR(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyAccelerationStructureToMemoryKHR", self._accel, dev, commandBuffer, args, tag)

    def after_vkCmdCopyAccelerationStructureToMemoryKHR(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)

    def before_vkCmdCopyMemoryToAccelerationStructureKHR(self, dev, commandBuffer, *args):
        self._tag("vkCmdCopyMemoryToAccelerationStructureKHR", self._accel, dev, commandBuffer, args)

    def apply_vkCmdCopyMemoryToAccelerationStructureKHR(self, dev, commandBuffer, *args, tag: int):
        self._track("vkCmdCopyMemoryToAccelerationStructureKHR", self._accel, dev, commandBuffer, args, tag)

    def after_vkCmdCopyMemoryToAccelerationStructureKHR(self, dev, result, commandBuffer, *args):
        self._untag(dev, commandBuffer)


def register(hooks, state, labeller: Labeller, capture) -> None:
    """`capture` is the indirect.Capturer used for indirect dispatches."""
    hooks.bind(Workloads(state, labeller, capture))
    tensors.register(hooks)   # tensor sizes, for vkCmdCopyTensorARM
    accel.register(hooks)   # acceleration structures' sizes and buffer addresses

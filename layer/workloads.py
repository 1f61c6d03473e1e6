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
from tessera.vkapi.commands import ACCELERATION_STRUCTURES
from tessera.vkapi.transfers import TRANSFERS, tensor_copy
from tessera.vkapi.vkconst import vk

from . import descriptions, tensors
from .tagging import Labeller
from .trackers import CommandBufferTracker, Workload

# Tensor copies: a transfer sized from the tensors remembered at creation (tensors.py).
TENSOR_COPY = "vkCmdCopyTensorARM"

# describe(dev, tracker, *command args) -> (kind, metadata, capture or None)
Describe = Callable[..., tuple]


def tag_command(hooks, state, labeller: Labeller, name: str, describe: Describe) -> None:
    """Hooks for one workload command: describe + tag before, close the tag after. When the shim
    records the command in C (shim_spec.RECORDED), C took the tag and sent its label down, and
    the record is applied later with that tag."""

    def track(dev, commandBuffer, args, tag: int) -> CommandBufferTracker:
        t = state.command_buffer(dev, commandBuffer)
        kind, meta, capture = describe(dev, t, commandBuffer, *args)
        w = Workload(tag, tuple(t.labels), t.pops_below_start, capture)
        t.ops.append(("workload", w))
        descriptions.describe(state, dev, t, w, kind, {"command": name, **meta}, capture is not None)
        return t

    @hooks.before(name)
    def before(dev, commandBuffer, *args):
        tag = labeller.next_tag()
        t = track(dev, commandBuffer, args, tag)
        t.label_pushed = labeller.push(dev, commandBuffer, tag_label(tag))

    @hooks.applies(name)
    def apply(dev, commandBuffer, *args, tag: int):
        track(dev, commandBuffer, args, tag)

    @hooks.after(name)
    def after(dev, result, commandBuffer, *args):
        t = state.command_buffer(dev, commandBuffer)
        if t.label_pushed:
            t.label_pushed = False
            labeller.pop(dev, commandBuffer)


def register(hooks, state, labeller: Labeller, capture) -> None:
    """`capture` is the indirect.Capturer used for indirect dispatches."""

    @hooks.before("vkCmdBindShadersEXT")
    def before_bind_shaders(dev, commandBuffer, count, pStages, pShaders):
        """Shader objects: a compute shader bound this way sizes dispatches like a pipeline."""
        t = state.command_buffer(dev, commandBuffer)
        now = pipelines.bind_shader_objects(dev.res, t.shader_objects, count, pStages,
                                            None if pShaders == state.ffi.NULL else pShaders)
        if any(pStages[i] == vk.VK_SHADER_STAGE_COMPUTE_BIT for i in range(count)):
            t.compute_pipeline = now[vk.VK_PIPELINE_BIND_POINT_COMPUTE]

    @hooks.applies("vkCmdBindPipeline")
    @hooks.before("vkCmdBindPipeline")
    def before_bind(dev, commandBuffer, bindPoint, pipeline):
        if bindPoint == vk.VK_PIPELINE_BIND_POINT_COMPUTE:
            state.command_buffer(dev, commandBuffer).compute_pipeline = dev.res.pipelines.get(int(pipeline))

    def group_size(t: CommandBufferTracker):
        p = t.compute_pipeline
        return p.group_size if p is not None and p.group_size else None

    def dispatch_meta(t, groups, base=None) -> dict:
        size = group_size(t)
        meta = {"groups": list(groups), "group_size": list(size) if size else [-1, -1, -1],
                "items": math.prod(groups) * math.prod(size) if size else -1, "indirect": False}
        if base and any(base):
            meta["base_group"] = list(base)
        return meta

    def dispatch(dev, t, cb, x, y, z):
        return "dispatch", dispatch_meta(t, (x, y, z)), None

    def dispatch_base(dev, t, cb, bx, by, bz, x, y, z):
        return "dispatch", dispatch_meta(t, (x, y, z), (bx, by, bz)), None

    def dispatch_indirect(dev, t, cb, buffer, offset):
        size = group_size(t)
        cap = capture.dispatch(dev, cb, buffer, offset, size)
        return "dispatch", {"groups": [-1, -1, -1], "group_size": list(size) if size else [-1, -1, -1],
                            "items": -1, "indirect": True}, cap

    def trace_rays(dev, t, cb, raygen, miss, hit, callable_, width, height, depth):
        return "trace_rays", {"width": width, "height": height, "depth": depth, "items": width * height * depth}, None

    def trace_rays_indirect(dev, t, cb, raygen, miss, hit, callable_, address):
        # Parameters live at a device address: copied from the tracked buffer holding that address
        # (indirect.Capturer.trace_rays); they arrive as an ANNEX.
        cap = capture.trace_rays(dev, cb, int(address))
        return "trace_rays", {"width": -1, "height": -1, "depth": -1, "items": -1, "indirect": True}, cap

    for name, fn in (("vkCmdDispatch", dispatch), ("vkCmdDispatchBase", dispatch_base),
                     ("vkCmdDispatchIndirect", dispatch_indirect), ("vkCmdTraceRaysKHR", trace_rays),
                     ("vkCmdTraceRaysIndirectKHR", trace_rays_indirect)):
        tag_command(hooks, state, labeller, name, fn)

    # ---- transfers (sizes from the table shared with the driver) ---------------
    def transfer(name: str):
        size = TRANSFERS[name]

        def describe(dev, t, cb, *args):
            tr = size(dev.res, *args)
            return tr.kind, {"subtype": tr.stage, **tr.fields()}, None
        return describe

    for name in TRANSFERS:
        tag_command(hooks, state, labeller, name, transfer(name))

    # ---- tensor copies (VK_ARM_tensors) ----------------------------------------
    tensors.register(hooks)

    def copy_tensor(dev, t, cb, info):
        tr = tensor_copy(dev.res, info)
        return tr.kind, {"subtype": tr.stage, **tr.fields()}, None

    tag_command(hooks, state, labeller, TENSOR_COPY, copy_tensor)

    # ---- acceleration structures (sizes from the table shared with the driver) ---------------
    accel.register(hooks, state.ffi)

    def accel_describe(name: str):
        describe = accel.DESCRIBE[name]

        def describe_accel(dev, t, cb, *args):
            work = describe(dev.res, *args)
            return work.kind, dict(work.fields), None
        return describe_accel

    for name in ACCELERATION_STRUCTURES:
        tag_command(hooks, state, labeller, name, accel_describe(name))

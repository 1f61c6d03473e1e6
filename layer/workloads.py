"""Tagged workloads: dispatches, trace rays, buffer and image transfers.

Each command becomes a `Workload` with a fresh tagID, wrapped in a
`t<tagID>` label (pushed just before the command, popped just after), and
its WORKLOAD message is sent when it is recorded: sizes are in work items
(work-group size from the pipeline's SPIR-V), bytes (VK_WHOLE_SIZE resolved
from tracked buffer sizes) and pixels. Indirect sizes are captured
(indirect.py) and arrive later as an ANNEX.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from tessera.vkapi.resources import (blit_pixels, buffer_image_pixels, fill_bytes, image_bytes, image_copy_pixels,
                                     subresource_pixels)
from tessera.vkapi.commands import BUFFER_TRANSFERS, DISPATCHES, IMAGE_TRANSFERS, TRACE_RAYS
from tessera.vkapi.vkconst import vk

from . import encoder
from .tagging import Labeller, next_tag
from .trackers import CommandBufferTracker, Workload

WORKLOAD_HOOKS = ("vkCmdBindPipeline",) + DISPATCHES + TRACE_RAYS + BUFFER_TRANSFERS + IMAGE_TRANSFERS

# describe(dev, tracker, *command args) -> (kind, metadata, capture or None)
Describe = Callable[..., tuple]


def tag_command(hooks, state, labeller: Labeller, name: str, describe: Describe) -> None:
    """Hooks for one workload command: describe + tag before, close the tag after."""

    @hooks.before(name)
    def before(dev, commandBuffer, *args):
        t = state.command_buffer(dev, commandBuffer)
        kind, meta, capture = describe(dev, t, commandBuffer, *args)
        w = Workload(next_tag(), kind, {"command": name, **meta}, tuple(t.labels), t.pops_below_start, capture)
        t.label_pushed = labeller.push(dev, commandBuffer, f"t{w.tag}")
        t.ops.append(("workload", w))
        state.session.transport.send(encoder.workload, w, dev.address, t.address, capture is not None)

    @hooks.after(name)
    def after(dev, result, commandBuffer, *args):
        t = state.command_buffer(dev, commandBuffer)
        if t.label_pushed:
            t.label_pushed = False
            labeller.pop(dev, commandBuffer)


def register(hooks, state, labeller: Labeller, capture) -> None:
    """`capture` is the indirect.Capturer used for indirect dispatches."""

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
        # Parameters live at a device address: not captured (no buffer to copy from).
        return "trace_rays", {"width": -1, "height": -1, "depth": -1, "items": -1, "indirect": True}, None

    for name, fn in (("vkCmdDispatch", dispatch), ("vkCmdDispatchBase", dispatch_base),
                     ("vkCmdDispatchIndirect", dispatch_indirect), ("vkCmdTraceRaysKHR", trace_rays),
                     ("vkCmdTraceRaysIndirectKHR", trace_rays_indirect)):
        tag_command(hooks, state, labeller, name, fn)

    # ---- transfers ---------------------------------------------------------
    def buffer_transfer(subtype: str, nbytes: int, **more) -> tuple:
        return "buffer_transfer", {"subtype": subtype, "bytes": nbytes, **more}, None

    def image_transfer(dev, subtype: str, image, pixels: int, regions: int) -> tuple:
        nbytes = image_bytes(dev.res.images.get(int(image)), pixels)
        return "image_transfer", {"subtype": subtype, "pixels": pixels, "bytes": nbytes, "regions": regions}, None

    def total(regions, count, pixels_of) -> int:
        return sum(pixels_of(regions[i]) for i in range(count))

    def clear_pixels(dev, image, count, ranges) -> int:
        img = dev.res.images.get(int(image))
        return sum(subresource_pixels(img, ranges[i]) for i in range(count)) if img else -1

    def sizes(regions, count) -> int:
        return sum(regions[i].size for i in range(count))

    transfers = {
        "vkCmdFillBuffer": lambda dev, t, cb, buf, off, size, data: buffer_transfer(
            "fill buffer", fill_bytes(size, off, dev.res.buffers.get(int(buf)))),
        "vkCmdUpdateBuffer": lambda dev, t, cb, buf, off, size, data: buffer_transfer("update buffer", size),
        "vkCmdCopyBuffer": lambda dev, t, cb, src, dst, n, regions: buffer_transfer(
            "copy buffer", sizes(regions, n), regions=n),
        "vkCmdCopyBuffer2": lambda dev, t, cb, info: buffer_transfer(
            "copy buffer", sizes(info.pRegions, info.regionCount), regions=info.regionCount),
        "vkCmdClearColorImage": lambda dev, t, cb, image, layout, color, n, ranges: image_transfer(
            dev, "clear image", image, clear_pixels(dev, image, n, ranges), n),
        "vkCmdClearDepthStencilImage": lambda dev, t, cb, image, layout, value, n, ranges: image_transfer(
            dev, "clear image", image, clear_pixels(dev, image, n, ranges), n),
        "vkCmdCopyImage": lambda dev, t, cb, src, sl, dst, dl, n, regions: image_transfer(
            dev, "copy image", src, total(regions, n, image_copy_pixels), n),
        "vkCmdCopyImage2": lambda dev, t, cb, info: image_transfer(
            dev, "copy image", info.srcImage, total(info.pRegions, info.regionCount, image_copy_pixels),
            info.regionCount),
        "vkCmdBlitImage": lambda dev, t, cb, src, sl, dst, dl, n, regions, flt: image_transfer(
            dev, "blit image", dst, total(regions, n, blit_pixels), n),
        "vkCmdBlitImage2": lambda dev, t, cb, info: image_transfer(
            dev, "blit image", info.dstImage, total(info.pRegions, info.regionCount, blit_pixels), info.regionCount),
        "vkCmdResolveImage": lambda dev, t, cb, src, sl, dst, dl, n, regions: image_transfer(
            dev, "resolve image", src, total(regions, n, image_copy_pixels), n),
        "vkCmdResolveImage2": lambda dev, t, cb, info: image_transfer(
            dev, "resolve image", info.srcImage, total(info.pRegions, info.regionCount, image_copy_pixels),
            info.regionCount),
        "vkCmdCopyBufferToImage": lambda dev, t, cb, buf, image, layout, n, regions: image_transfer(
            dev, "copy buffer to image", image, total(regions, n, buffer_image_pixels), n),
        "vkCmdCopyBufferToImage2": lambda dev, t, cb, info: image_transfer(
            dev, "copy buffer to image", info.dstImage,
            total(info.pRegions, info.regionCount, buffer_image_pixels), info.regionCount),
        "vkCmdCopyImageToBuffer": lambda dev, t, cb, image, layout, buf, n, regions: image_transfer(
            dev, "copy image to buffer", image, total(regions, n, buffer_image_pixels), n),
        "vkCmdCopyImageToBuffer2": lambda dev, t, cb, info: image_transfer(
            dev, "copy image to buffer", info.srcImage,
            total(info.pRegions, info.regionCount, buffer_image_pixels), info.regionCount),
    }
    for name, fn in transfers.items():
        tag_command(hooks, state, labeller, name, fn)

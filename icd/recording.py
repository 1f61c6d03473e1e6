"""Shadow recording: what each command buffer will execute, in command order.

Each recorded command appends one op to `CommandBuffer.ops`:

    ("begin", name) / ("end", None) / ("insert", name)   debug labels (labels.py)
    ("pass_begin", PassInfo)   render pass or dynamic rendering begins (or resumes)
    ("subpass", None)
    ("draw", Draw)
    ("pass_end", suspending)   ends (or suspends) the current render pass
    ("work", Work)             a dispatch, trace rays or transfer
    ("barrier", None)          pipeline barrier / wait events: later work waits for earlier
    ("execute", [CommandBuffer, ...])   secondaries, expanded at submit

Sizes that depend only on the recording are computed here; what depends on
submission (split render passes, label stacks) is resolved in submit.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tessera.vkapi.vkconst import vk

from . import timing
from .driver import Driver
from .objects import CommandBuffer
from .resources import format_name, texel_bytes


@dataclass
class PassInfo:
    command: str
    handle: int                  # VkRenderPass, 0 for dynamic rendering
    width: int
    height: int
    layers: int
    subpasses: int
    attachments: list[dict]      # aspect, format, samples, load_op, store_op, resolve
    load_bytes: int
    store_bytes: int
    dynamic: bool
    resuming: bool = False
    suspending: bool = False
    waits_after: bool = False    # external subpass dependency: later work waits for this pass


@dataclass
class Draw:
    vertices: int
    primitives: int
    estimated: bool              # indirect: sizes not readable at record time
    vertex_cycles: float | None
    fragment_cycles: float | None


@dataclass
class Work:
    kind: str                    # dispatch, trace_rays, transfer
    stage: str                   # stage name in the trace
    command: str
    info: dict = field(default_factory=dict)   # sizes for the trace's extra_data
    invocations: int = 0
    cycles: float | None = None
    nbytes: int = 0
    estimated: bool = False


_OP_NAMES = {v: k.removeprefix("VK_ATTACHMENT_LOAD_OP_").lower() for k, v in vars(vk).items()
             if k.startswith("VK_ATTACHMENT_LOAD_OP_") and not k.endswith(("_EXT", "_KHR"))}
_STORE_NAMES = {v: k.removeprefix("VK_ATTACHMENT_STORE_OP_").lower() for k, v in vars(vk).items()
                if k.startswith("VK_ATTACHMENT_STORE_OP_") and not k.endswith(("_EXT", "_KHR", "_QCOM"))}


def _primitives(vertices: int) -> int:
    return vertices // 3   # triangle lists; strips and fans shade about as many vertices


def register(drv: Driver) -> None:
    ffi, hooks = drv.ffi, drv.hooks
    res = lambda cb: cb.device.res  # noqa: E731

    def add(cb: CommandBuffer, op: str, value=None) -> None:
        cb.ops.append((op, value))

    # ---- render passes -------------------------------------------------
    def attachment(aspect: str, fmt: int, samples: int, load: int, store: int, resolve: bool,
                   area: int, layers: int) -> tuple[dict, int, int]:
        size = int(area * layers * texel_bytes(fmt) * max(1, samples))
        info = {"aspect": aspect, "format": format_name(fmt), "samples": samples,
                "load_op": _OP_NAMES.get(load, str(load)), "store_op": _STORE_NAMES.get(store, str(store)),
                "resolve": resolve}
        return info, size if load == vk.VK_ATTACHMENT_LOAD_OP_LOAD else 0, \
            size if store == vk.VK_ATTACHMENT_STORE_OP_STORE else 0

    def begin_render_pass(cb, begin, command: str):
        rp = res(cb).render_passes.get(int(begin.renderPass))
        fb = res(cb).framebuffers.get(int(begin.framebuffer))
        ext = begin.renderArea.extent
        layers = fb.layers if fb else 1
        atts, load, store = [], 0, 0
        if rp is not None:
            for i, a in enumerate(rp.attachments):
                fmt = a.format
                is_ds = "D" in format_name(fmt).split("_")[0] or format_name(fmt).startswith("S8")
                aspect = "resolve" if i in rp.resolves else ("depth_stencil" if is_ds else "color")
                info, lb, sb = attachment(aspect, fmt, a.samples, a.load_op, a.store_op, i in rp.resolves,
                                          ext.width * ext.height, layers)
                atts.append(info)
                load, store = load + lb, store + sb
        if rp is not None and rp.waits_before:
            add(cb, "barrier")   # spec 8.1: a dependency from VK_SUBPASS_EXTERNAL orders earlier work first
        add(cb, "pass_begin", PassInfo(command, int(begin.renderPass), ext.width, ext.height, layers,
                                       rp.subpasses if rp else 1, atts, load, store, dynamic=False,
                                       waits_after=bool(rp and rp.waits_after)))

    def end_render_pass(cb) -> None:
        begin = next((v for op, v in reversed(cb.ops) if op == "pass_begin"), None)
        add(cb, "pass_end", False)
        if begin is not None and begin.waits_after:
            add(cb, "barrier")

    @hooks.before("vkCmdBeginRenderPass")
    def cmd_begin_render_pass(cb, commandBuffer, pRenderPassBegin, contents):
        begin_render_pass(cb, pRenderPassBegin, "vkCmdBeginRenderPass")

    @hooks.before("vkCmdBeginRenderPass2")
    def cmd_begin_render_pass2(cb, commandBuffer, pRenderPassBegin, pSubpassBeginInfo):
        begin_render_pass(cb, pRenderPassBegin, "vkCmdBeginRenderPass2")

    @hooks.before("vkCmdNextSubpass")
    def cmd_next_subpass(cb, commandBuffer, contents):
        add(cb, "subpass")

    @hooks.before("vkCmdNextSubpass2")
    def cmd_next_subpass2(cb, commandBuffer, pSubpassBeginInfo, pSubpassEndInfo):
        add(cb, "subpass")

    @hooks.before("vkCmdEndRenderPass")
    def cmd_end_render_pass(cb, commandBuffer):
        end_render_pass(cb)

    @hooks.before("vkCmdEndRenderPass2")
    def cmd_end_render_pass2(cb, commandBuffer, pSubpassEndInfo):
        end_render_pass(cb)

    @hooks.before("vkCmdBeginRendering")
    def cmd_begin_rendering(cb, commandBuffer, info):
        ext = info.renderArea.extent
        area, layers = ext.width * ext.height, max(1, info.layerCount)
        atts, load, store = [], 0, 0

        def view_format(view) -> tuple[int, int]:
            v = res(cb).views.get(int(view))
            img = res(cb).images.get(v.image) if v else None
            return (v.format if v else vk.VK_FORMAT_UNDEFINED), (img.samples if img else 1)

        def one(aspect: str, a) -> None:
            nonlocal load, store
            if a == ffi.NULL or not int(a.imageView):
                return
            fmt, samples = view_format(a.imageView)
            entry, lb, sb = attachment(aspect, fmt, samples, a.loadOp, a.storeOp, False, area, layers)
            atts.append(entry)
            load, store = load + lb, store + sb
            if a.resolveMode and int(a.resolveImageView):
                rfmt, _ = view_format(a.resolveImageView)
                entry, _, sb = attachment("resolve", rfmt, 1, vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
                                          vk.VK_ATTACHMENT_STORE_OP_STORE, True, area, layers)
                atts.append(entry)
                store += sb

        for i in range(info.colorAttachmentCount):
            one("color", info.pColorAttachments + i)
        one("depth", info.pDepthAttachment)
        one("stencil", info.pStencilAttachment)
        flags = info.flags
        add(cb, "pass_begin", PassInfo("vkCmdBeginRendering", 0, ext.width, ext.height, layers, 1, atts, load, store,
                                       dynamic=True, resuming=bool(flags & vk.VK_RENDERING_RESUMING_BIT),
                                       suspending=bool(flags & vk.VK_RENDERING_SUSPENDING_BIT)))

    @hooks.before("vkCmdEndRendering")
    def cmd_end_rendering(cb, commandBuffer):
        begin = next((v for op, v in reversed(cb.ops) if op == "pass_begin"), None)
        add(cb, "pass_end", bool(begin and begin.suspending))

    # ---- draws ---------------------------------------------------------
    def draw(cb, vertices: int, estimated: bool) -> None:
        costs = cb.graphics_pipeline.shader_cycles if cb.graphics_pipeline else {}
        add(cb, "draw", Draw(vertices, _primitives(vertices), estimated, costs.get("vertex"), costs.get("fragment")))

    @hooks.before("vkCmdDraw")
    def cmd_draw(cb, commandBuffer, vertexCount, instanceCount, firstVertex, firstInstance):
        draw(cb, vertexCount * instanceCount, False)

    @hooks.before("vkCmdDrawIndexed")
    def cmd_draw_indexed(cb, commandBuffer, indexCount, instanceCount, firstIndex, vertexOffset, firstInstance):
        draw(cb, indexCount * instanceCount, False)

    @hooks.before("vkCmdDrawIndirect")
    def cmd_draw_indirect(cb, commandBuffer, buffer, offset, drawCount, stride):
        for _ in range(drawCount):
            draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    @hooks.before("vkCmdDrawIndexedIndirect")
    def cmd_draw_indexed_indirect(cb, commandBuffer, buffer, offset, drawCount, stride):
        for _ in range(drawCount):
            draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    @hooks.before("vkCmdDrawIndirectCount")
    def cmd_draw_indirect_count(cb, commandBuffer, buffer, offset, countBuffer, countOffset, maxDrawCount, stride):
        draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    @hooks.before("vkCmdDrawIndexedIndirectCount")
    def cmd_draw_indexed_indirect_count(cb, commandBuffer, buffer, offset, countBuffer, countOffset,
                                        maxDrawCount, stride):
        draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    # ---- compute and trace rays ---------------------------------------
    @hooks.before("vkCmdBindPipeline")
    def cmd_bind_pipeline(cb, commandBuffer, bindPoint, pipeline):
        p = res(cb).pipelines.get(int(pipeline))
        if bindPoint == vk.VK_PIPELINE_BIND_POINT_COMPUTE:
            cb.compute_pipeline = p
        elif bindPoint == vk.VK_PIPELINE_BIND_POINT_GRAPHICS:
            cb.graphics_pipeline = p

    def dispatch(cb, command: str, groups: tuple[int, int, int] | None, base=(0, 0, 0)) -> None:
        p = cb.compute_pipeline
        size = p.group_size if p and p.group_size else None
        estimated = groups is None
        g = groups or (timing.INDIRECT_DISPATCH_GROUPS, 1, 1)
        per_group = size[0] * size[1] * size[2] if size else 1
        info = {"groups": list(groups) if groups else [-1, -1, -1],
                "group_size": list(size) if size else [-1, -1, -1]}
        if any(base):
            info["base_group"] = list(base)
        add(cb, "work", Work("dispatch", "compute", command, info, invocations=g[0] * g[1] * g[2] * per_group,
                             cycles=p.shader_cycles.get("compute") if p else None, estimated=estimated))

    @hooks.before("vkCmdDispatch")
    def cmd_dispatch(cb, commandBuffer, x, y, z):
        dispatch(cb, "vkCmdDispatch", (x, y, z))

    @hooks.before("vkCmdDispatchBase")
    def cmd_dispatch_base(cb, commandBuffer, bx, by, bz, x, y, z):
        dispatch(cb, "vkCmdDispatchBase", (x, y, z), (bx, by, bz))

    @hooks.before("vkCmdDispatchIndirect")
    def cmd_dispatch_indirect(cb, commandBuffer, buffer, offset):
        dispatch(cb, "vkCmdDispatchIndirect", None)

    @hooks.before("vkCmdTraceRaysKHR")
    def cmd_trace_rays(cb, commandBuffer, raygen, miss, hit, callable_, width, height, depth):
        add(cb, "work", Work("trace_rays", "trace_rays", "vkCmdTraceRaysKHR",
                             {"width": width, "height": height, "depth": depth}, invocations=width * height * depth))

    @hooks.before("vkCmdTraceRaysIndirectKHR")
    def cmd_trace_rays_indirect(cb, commandBuffer, raygen, miss, hit, callable_, address):
        add(cb, "work", Work("trace_rays", "trace_rays", "vkCmdTraceRaysIndirectKHR", {"width": -1},
                             invocations=timing.INDIRECT_DISPATCH_GROUPS * 64, estimated=True))

    # ---- transfers -------------------------------------------------------
    def transfer(cb, stage: str, command: str, nbytes: int, **info) -> None:
        add(cb, "work", Work("transfer", stage, command, {"bytes": nbytes, **info}, nbytes=nbytes))

    def image_transfer(cb, stage: str, command: str, image: int, pixels: int, regions: int) -> None:
        img = res(cb).images.get(int(image))
        nbytes = int(pixels * texel_bytes(img.format) * img.samples) if img else 0
        transfer(cb, stage, command, nbytes, pixels=pixels, regions=regions)

    @hooks.before("vkCmdFillBuffer")
    def cmd_fill_buffer(cb, commandBuffer, buffer, offset, size, data):
        if size == vk.VK_WHOLE_SIZE:
            size = (res(cb).buffers.get(int(buffer), offset) - offset) & ~3
        transfer(cb, "fill buffer", "vkCmdFillBuffer", size)

    @hooks.before("vkCmdUpdateBuffer")
    def cmd_update_buffer(cb, commandBuffer, buffer, offset, dataSize, pData):
        transfer(cb, "update buffer", "vkCmdUpdateBuffer", dataSize)

    @hooks.before("vkCmdCopyBuffer")
    def cmd_copy_buffer(cb, commandBuffer, src, dst, count, pRegions):
        transfer(cb, "copy buffer", "vkCmdCopyBuffer", sum(pRegions[i].size for i in range(count)), regions=count)

    @hooks.before("vkCmdCopyBuffer2")
    def cmd_copy_buffer2(cb, commandBuffer, info):
        n = info.regionCount
        transfer(cb, "copy buffer", "vkCmdCopyBuffer2", sum(info.pRegions[i].size for i in range(n)), regions=n)

    def clear_pixels(cb, image, count, pRanges) -> int:
        img = res(cb).images.get(int(image))
        if img is None:
            return 0
        total = 0
        for i in range(count):
            r = pRanges[i]
            levels = img.mips - r.baseMipLevel if r.levelCount == vk.VK_REMAINING_MIP_LEVELS else r.levelCount
            layers = img.layers - r.baseArrayLayer if r.layerCount == vk.VK_REMAINING_ARRAY_LAYERS else r.layerCount
            for m in range(r.baseMipLevel, r.baseMipLevel + levels):
                total += max(1, img.width >> m) * max(1, img.height >> m) * max(1, img.depth >> m) * layers
        return total

    @hooks.before("vkCmdClearColorImage")
    def cmd_clear_color(cb, commandBuffer, image, layout, pColor, count, pRanges):
        image_transfer(cb, "clear image", "vkCmdClearColorImage", image, clear_pixels(cb, image, count, pRanges), count)

    @hooks.before("vkCmdClearDepthStencilImage")
    def cmd_clear_depth(cb, commandBuffer, image, layout, pValue, count, pRanges):
        image_transfer(cb, "clear image", "vkCmdClearDepthStencilImage", image,
                       clear_pixels(cb, image, count, pRanges), count)

    def extent_pixels(e, layers: int) -> int:
        return e.width * e.height * e.depth * layers

    def copy_regions(regions, count, extent_of) -> int:
        return sum(extent_of(regions[i]) for i in range(count))

    def image_copy_pixels(r) -> int:
        return extent_pixels(r.extent, r.srcSubresource.layerCount)

    def buffer_image_pixels(r) -> int:
        e = r.imageExtent
        return extent_pixels(e, r.imageSubresource.layerCount)

    def blit_pixels(r) -> int:
        a, b = r.dstOffsets[0], r.dstOffsets[1]
        return abs(b.x - a.x) * abs(b.y - a.y) * max(1, abs(b.z - a.z)) * r.dstSubresource.layerCount

    @hooks.before("vkCmdCopyImage")
    def cmd_copy_image(cb, commandBuffer, src, srcLayout, dst, dstLayout, count, pRegions):
        image_transfer(cb, "copy image", "vkCmdCopyImage", src, copy_regions(pRegions, count, image_copy_pixels), count)

    @hooks.before("vkCmdCopyImage2")
    def cmd_copy_image2(cb, commandBuffer, info):
        image_transfer(cb, "copy image", "vkCmdCopyImage2", info.srcImage,
                       copy_regions(info.pRegions, info.regionCount, image_copy_pixels), info.regionCount)

    @hooks.before("vkCmdBlitImage")
    def cmd_blit_image(cb, commandBuffer, src, srcLayout, dst, dstLayout, count, pRegions, filter_):
        image_transfer(cb, "blit image", "vkCmdBlitImage", dst, copy_regions(pRegions, count, blit_pixels), count)

    @hooks.before("vkCmdBlitImage2")
    def cmd_blit_image2(cb, commandBuffer, info):
        image_transfer(cb, "blit image", "vkCmdBlitImage2", info.dstImage,
                       copy_regions(info.pRegions, info.regionCount, blit_pixels), info.regionCount)

    @hooks.before("vkCmdResolveImage")
    def cmd_resolve_image(cb, commandBuffer, src, srcLayout, dst, dstLayout, count, pRegions):
        image_transfer(cb, "resolve image", "vkCmdResolveImage", src,
                       copy_regions(pRegions, count, image_copy_pixels), count)

    @hooks.before("vkCmdResolveImage2")
    def cmd_resolve_image2(cb, commandBuffer, info):
        image_transfer(cb, "resolve image", "vkCmdResolveImage2", info.srcImage,
                       copy_regions(info.pRegions, info.regionCount, image_copy_pixels), info.regionCount)

    @hooks.before("vkCmdCopyBufferToImage")
    def cmd_copy_buffer_to_image(cb, commandBuffer, buffer, image, layout, count, pRegions):
        image_transfer(cb, "copy buffer to image", "vkCmdCopyBufferToImage", image,
                       copy_regions(pRegions, count, buffer_image_pixels), count)

    @hooks.before("vkCmdCopyBufferToImage2")
    def cmd_copy_buffer_to_image2(cb, commandBuffer, info):
        image_transfer(cb, "copy buffer to image", "vkCmdCopyBufferToImage2", info.dstImage,
                       copy_regions(info.pRegions, info.regionCount, buffer_image_pixels), info.regionCount)

    @hooks.before("vkCmdCopyImageToBuffer")
    def cmd_copy_image_to_buffer(cb, commandBuffer, image, layout, buffer, count, pRegions):
        image_transfer(cb, "copy image to buffer", "vkCmdCopyImageToBuffer", image,
                       copy_regions(pRegions, count, buffer_image_pixels), count)

    @hooks.before("vkCmdCopyImageToBuffer2")
    def cmd_copy_image_to_buffer2(cb, commandBuffer, info):
        image_transfer(cb, "copy image to buffer", "vkCmdCopyImageToBuffer2", info.srcImage,
                       copy_regions(info.pRegions, info.regionCount, buffer_image_pixels), info.regionCount)

    # ---- ordering and secondaries ---------------------------------------
    for name in ("vkCmdPipelineBarrier", "vkCmdPipelineBarrier2", "vkCmdWaitEvents", "vkCmdWaitEvents2"):
        hooks.before(name)(lambda cb, *args: add(cb, "barrier"))

    @hooks.before("vkCmdExecuteCommands")
    def cmd_execute(cb, commandBuffer, count, pCommandBuffers):
        objects = drv.objects
        add(cb, "execute", [objects.get(pCommandBuffers[i], CommandBuffer) for i in range(count)])


RECORDING_HOOKS = (
    "vkCmdBeginRenderPass", "vkCmdBeginRenderPass2", "vkCmdNextSubpass", "vkCmdNextSubpass2",
    "vkCmdEndRenderPass", "vkCmdEndRenderPass2", "vkCmdBeginRendering", "vkCmdEndRendering",
    "vkCmdDraw", "vkCmdDrawIndexed", "vkCmdDrawIndirect", "vkCmdDrawIndexedIndirect",
    "vkCmdDrawIndirectCount", "vkCmdDrawIndexedIndirectCount",
    "vkCmdBindPipeline", "vkCmdDispatch", "vkCmdDispatchBase", "vkCmdDispatchIndirect",
    "vkCmdTraceRaysKHR", "vkCmdTraceRaysIndirectKHR",
    "vkCmdFillBuffer", "vkCmdUpdateBuffer", "vkCmdCopyBuffer", "vkCmdCopyBuffer2",
    "vkCmdClearColorImage", "vkCmdClearDepthStencilImage", "vkCmdCopyImage", "vkCmdCopyImage2",
    "vkCmdBlitImage", "vkCmdBlitImage2", "vkCmdResolveImage", "vkCmdResolveImage2",
    "vkCmdCopyBufferToImage", "vkCmdCopyBufferToImage2", "vkCmdCopyImageToBuffer", "vkCmdCopyImageToBuffer2",
    "vkCmdPipelineBarrier", "vkCmdPipelineBarrier2", "vkCmdWaitEvents", "vkCmdWaitEvents2",
    "vkCmdExecuteCommands",
)

"""Per-region counters: what a captured render pass instance records, and where its values go.

Role: the pieces of a capture hooks.py's hooks put together. At begin: `split` finds (and
strips) VkRenderPassPerformanceCountersByRegionBeginInfoARM, `render_pass_geometry` /
`rendering_geometry` count the arrays per subpass (layers or views) and the tile write-back bytes
per pixel, and `plan` validates the request and lays out driver memory: per subpass a template
(the header the counting shader reads, then the regions in exactly the application's layout with
zeros, and the computed write-back bytes) and a working slice, plus the copy runs (one per counter
run, so alignment padding is never written) into the buffer holding each counter address; its
steps are `counter_ids`, `layout`, `array_targets` and `template_and_copies`.
`begin_commands` records template -> working slice (so a command buffer submitted again starts from
zero); at end, `end_commands` records the copies out with their barriers.

Why a GPU copy rather than a host write after completion: the application's buffer need not be
host-visible, and the application may consume the values on the device later in the same command
buffer (the extension's synchronisation section); a copy in the command stream is exact for both.

Threads: the thread recording the command buffer (external synchronisation); chunks come from
state.reserve (the device's free list under its lock).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

from tessera.vkapi import accel, structs
from tessera.vkapi.resources import texel_bytes
from tessera.vkapi.vkconst import vk

from ..objects import CommandBuffer
from .props import BY_ID, MAX_COUNTERS, REGION_ALIGNMENT, REGION_SIZE, align, row_bytes
from .state import (CHUNK_BYTES, SECTION_MAX_BYTES, ArrayCopy, Capture, DeviceRegions, cb_state,
                            reserve)

COLOR_OUTPUT = vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT
FRAGMENT = vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT
TRANSFER = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
BEGIN_INFO_STYPE = vk.VK_STRUCTURE_TYPE_RENDER_PASS_PERFORMANCE_COUNTERS_BY_REGION_BEGIN_INFO_ARM
Warn = Callable[[str, str], None]   # (key, message): reported once per key


def split(ffi, pnext, keep):
    """(the begin info struct or None, the chain without it)."""
    nodes = list(structs.chain(ffi, pnext))
    ours = [n for n in nodes if n.sType == BEGIN_INFO_STYPE]
    if not ours:
        return None, pnext
    rest = [n for n in nodes if n.sType != BEGIN_INFO_STYPE]
    return (ffi.cast("VkRenderPassPerformanceCountersByRegionBeginInfoARM *", ours[0]),
            structs.rebuild_chain(ffi, rest, keep) if rest else ffi.NULL)


def plan(ffi, warn: Warn, cb: CommandBuffer, state: DeviceRegions, request, area, subpass_arrays: list[int],
         writeback: list[list[float]], command: str) -> Capture | None:
    """Validate the request and prepare the capture (None: nothing is written)."""
    ids = counter_ids(ffi, warn, request, command)
    if ids is None:
        return None
    c = len(ids)
    _, _, w, h = area
    if w == 0 or h == 0:
        return None
    arrays = sum(subpass_arrays)
    given = request.counterAddressCount if request.pCounterAddresses != ffi.NULL else 0
    if given < arrays:
        warn(f"addresses:{given}:{arrays}", f"{command}: counterAddressCount {given} is less than the {arrays} "
             "arrays of this render pass instance (subpasses x layers or views): arrays without an address "
             "are not written")
    lay = layout(area, c, subpass_arrays, state.limits.alignment)
    if lay.section > SECTION_MAX_BYTES or 2 * lay.section * len(subpass_arrays) > CHUNK_BYTES:
        warn(f"large:{w}x{h}", f"{command}: a {w}x{h} render area with {c} counters needs more than the "
             f"{SECTION_MAX_BYTES >> 20} MiB per subpass this driver reserves: nothing captured")
        return None
    dev = cb.device
    copies = array_targets(warn, dev.res, request, arrays, given, lay.layer_bytes, command)
    regions = cb_state(state, cb)
    total = 2 * lay.section * len(subpass_arrays)
    chunk, template = reserve(ffi, dev, state, regions, total)
    work = template + lay.section * len(subpass_arrays)
    image, out = template_and_copies(lay, ids, subpass_arrays, writeback, copies, work)
    ffi.memmove(chunk.mapped + template, bytes(image), len(image))
    return Capture(chunk, work, lay.section, out)


def counter_ids(ffi, warn: Warn, request, command: str) -> list[int] | None:
    """The request's counter IDs, validated (None, warned but for a count of 0: nothing captured)."""
    c = request.counterIndexCount
    ids = [request.pCounterIndices[i] for i in range(c)] if c and request.pCounterIndices != ffi.NULL else []
    if c == 0:
        return None
    if c > MAX_COUNTERS:
        warn(f"too-many:{c}", f"{command}: counterIndexCount {c} is more than maxPerRegionPerformanceCounters "
             f"({MAX_COUNTERS}): nothing captured")
        return None
    if len(ids) != c:
        warn("no-indices", f"{command}: pCounterIndices is NULL: nothing captured")
        return None
    unknown = [i for i in ids if i not in BY_ID]
    if unknown:
        warn(f"unknown:{unknown}", f"{command}: unknown counter ID(s) {', '.join(hex(i) for i in unknown)} "
             "(see vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM): nothing captured")
        return None
    if len(set(ids)) != len(ids):
        warn("duplicate", f"{command}: a counter ID appears twice in pCounterIndices: nothing captured")
        return None
    return ids


@dataclass(frozen=True)
class Layout:
    """Where a capture's values are, the same in the template and the working slice: per subpass a
    section (aligned), the header the counting shader reads, then `layers` arrays of `rows` x `cols`
    regions of `counters` values each, in exactly the application's layout."""
    x: int
    y: int
    w: int
    h: int
    counters: int
    cols: int
    rows: int
    region_stride: int
    row_stride: int
    layer_bytes: int       # one array: also what the application's buffer must hold from its address
    header_bytes: int
    layers: int            # arrays allocated per subpass (the most any subpass has)
    section: int


def layout(area, counters: int, subpass_arrays: list[int], alignment: int) -> Layout:
    from tessera.spirv.passes.region_counters import HEADER_WORDS

    x, y, w, h = area
    rw, rh = REGION_SIZE
    cols, rows = -(-w // rw), -(-h // rh)
    region_stride = align(counters * 4, REGION_ALIGNMENT)
    row_stride = row_bytes(w, counters)
    layer_bytes = row_stride * rows
    header_bytes = HEADER_WORDS * 4
    layers = max(subpass_arrays) if subpass_arrays else 1
    section = align(header_bytes + layers * layer_bytes, alignment)
    return Layout(x, y, w, h, counters, cols, rows, region_stride, row_stride, layer_bytes, header_bytes, layers,
                  section)


def array_targets(warn: Warn, res, request, arrays: int, given: int, size: int,
                  command: str) -> list[ArrayCopy | None]:
    """Where each array goes (None: not written): the application's buffer must hold the whole array
    (`size` bytes) from its address."""
    copies: list[ArrayCopy | None] = []
    for a in range(arrays):
        if a >= given:
            copies.append(None)
            continue
        address = int(request.pCounterAddresses[a])
        found = accel.buffer_at(res, address)
        if found is None:
            warn(f"address:{address:#x}", f"{command}: counter address {address:#x} (array {a}) is not inside a "
                 "buffer whose address was queried with vkGetBufferDeviceAddress: that array is not written")
            copies.append(None)
            continue
        buffer, offset = found
        if offset + size > res.buffers.get(buffer, 0):
            warn(f"small:{address:#x}:{size}", f"{command}: counter address {address:#x} (array {a}) has fewer "
                 f"than the {size} bytes the array needs before its buffer ends: that array is not written")
            copies.append(None)
            continue
        copies.append(ArrayCopy(buffer, [(0, offset, 0)]))   # regions filled by template_and_copies
    return copies


def template_and_copies(lay: Layout, ids: list[int], subpass_arrays: list[int], writeback: list[list[float]],
                        targets: list[ArrayCopy | None], work: int) -> tuple[bytearray, list[ArrayCopy]]:
    """The template's bytes (per subpass: the header, then per array zeros and the computed write-back
    bytes) and, for each array with a target, its copy runs out of the working slice at `work`."""
    from tessera.spirv.passes.region_counters import NONE, RAW_COUNTERS

    slots = [NONE] * len(RAW_COUNTERS)
    for j, counter_id in enumerate(ids):
        raw = BY_ID[counter_id].raw
        if raw is not None:
            slots[RAW_COUNTERS.index(raw)] = j
    wb_slot = next((j for j, i in enumerate(ids) if BY_ID[i].raw is None), None)
    image = bytearray(lay.section * len(subpass_arrays))
    out: list[ArrayCopy] = []
    array = 0
    for s, n in enumerate(subpass_arrays):
        base = s * lay.section
        struct.pack_into(f"<9I{len(slots)}I", image, base, lay.x, lay.y, lay.cols, lay.rows, lay.layers,
                         lay.row_stride // 4, lay.region_stride // 4, lay.layer_bytes // 4, 0, *slots)
        for layer in range(n):
            data = base + lay.header_bytes + layer * lay.layer_bytes
            if wb_slot is not None and writeback[s][layer]:
                pack_writeback(image, data, lay, wb_slot, writeback[s][layer])
            target = targets[array]
            array += 1
            if target is None:
                continue
            src = work + (data - base) + s * lay.section
            out.append(ArrayCopy(target.buffer, copy_runs(lay, src, target.regions[0][1])))
    return image, out


def pack_writeback(image: bytearray, data: int, lay: Layout, slot: int, per_pixel: float) -> None:
    """Each region's write-back bytes (its pixels x `per_pixel`, saturated) in counter `slot` of the
    array at `data`."""
    rw, rh = REGION_SIZE
    for ry in range(lay.rows):
        hh = min(rh, lay.h - ry * rh)
        for rx in range(lay.cols):
            ww = min(rw, lay.w - rx * rw)
            struct.pack_into("<I", image, data + ry * lay.row_stride + rx * lay.region_stride + 4 * slot,
                             min(0xFFFFFFFF, int(ww * hh * per_pixel)))


def copy_runs(lay: Layout, src0: int, dst0: int) -> list[tuple[int, int, int]]:
    """(src, dst, bytes) runs copying one array's regions from `src0` to `dst0`: one per counter run,
    so alignment padding is never written; regions contiguous in both merge."""
    runs: list[list[int]] = []
    size = 4 * lay.counters
    for ry in range(lay.rows):
        for rx in range(lay.cols):
            src = src0 + ry * lay.row_stride + rx * lay.region_stride
            dst = dst0 + ry * lay.row_stride + rx * lay.region_stride
            if runs and runs[-1][0] + runs[-1][2] == src and runs[-1][1] + runs[-1][2] == dst:
                runs[-1][2] += size
            else:
                runs.append([src, dst, size])
    return [tuple(r) for r in runs]


def begin_commands(ffi, cb: CommandBuffer, capture: Capture, sections: int) -> None:
    """Template -> working slice, visible to the fragment shaders."""
    dev, handle = cb.device, cb.handle
    region = ffi.new("VkBufferCopy *", {"srcOffset": capture.work - capture.section * sections,
                                        "dstOffset": capture.work, "size": capture.section * sections})
    dev.next.vkCmdCopyBuffer(handle, capture.chunk.buffer, capture.chunk.buffer, 1, region)
    barrier(ffi, cb, TRANSFER, vk.VK_ACCESS_TRANSFER_WRITE_BIT, FRAGMENT,
            vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)


def barrier(ffi, cb: CommandBuffer, src_stage: int, src_access: int, dst_stage: int, dst_access: int) -> None:
    mb = ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                       "srcAccessMask": src_access, "dstAccessMask": dst_access})
    cb.device.next.vkCmdPipelineBarrier(cb.handle, src_stage, dst_stage, 0, 1, mb, 0, ffi.NULL, 0, ffi.NULL)


def bound_handle(cb: CommandBuffer) -> int:
    record = cb.graphics_pipeline
    if record is None:
        return 0
    return next((h for h, p in cb.device.res.pipelines.items() if p is record), 0)


def render_pass_geometry(cb: CommandBuffer, state: DeviceRegions | None,
                         begin) -> tuple[list[int], list[list[float]]]:
    """Arrays per subpass and write-back bytes per pixel per (subpass, array), for a VkRenderPass."""
    res = cb.device.res
    rp = res.render_passes.get(int(begin.renderPass))
    fb = res.framebuffers.get(int(begin.framebuffer))
    masks = state.view_masks.get(int(begin.renderPass), ()) if state is not None else ()
    subpasses = rp.subpasses if rp is not None else max(1, len(masks))
    layers = fb.layers if fb is not None else 1
    arrays = [bin(masks[s]).count("1") if s < len(masks) and masks[s] else layers for s in range(subpasses)]
    stored = 0.0
    if rp is not None:
        for a in rp.attachments:
            if a.store_op == vk.VK_ATTACHMENT_STORE_OP_STORE or a.stencil_store_op == vk.VK_ATTACHMENT_STORE_OP_STORE:
                stored += texel_bytes(a.format) * a.samples
    # Write-back happens once, at the end of the instance: counted in the last subpass's arrays.
    wb = [[stored if s == subpasses - 1 else 0.0] * arrays[s] for s in range(subpasses)]
    return arrays, wb


def rendering_geometry(ffi, cb: CommandBuffer, info) -> tuple[list[int], list[list[float]]]:
    """The same for a dynamic rendering instance (one subpass)."""
    res = cb.device.res
    views = bin(info.viewMask).count("1")
    n = views if info.viewMask else max(1, info.layerCount)

    def bytes_of(view: int, samples: bool = True) -> float:
        v = res.views.get(int(view)) if int(view) else None
        if v is None:
            return 0.0
        img = res.images.get(v.image)
        return texel_bytes(v.format) * (img.samples if img is not None and samples else 1)

    stored = 0.0
    for i in range(info.colorAttachmentCount):
        a = info.pColorAttachments[i]
        if a.storeOp == vk.VK_ATTACHMENT_STORE_OP_STORE:
            stored += bytes_of(a.imageView)
        if a.resolveMode and int(a.resolveImageView):
            stored += bytes_of(a.resolveImageView, samples=False)
    depth = info.pDepthAttachment if info.pDepthAttachment != ffi.NULL else None
    stencil = info.pStencilAttachment if info.pStencilAttachment != ffi.NULL else None
    if depth is not None and depth.storeOp == vk.VK_ATTACHMENT_STORE_OP_STORE:
        stored += bytes_of(depth.imageView)
    if stencil is not None and stencil.storeOp == vk.VK_ATTACHMENT_STORE_OP_STORE and (
            depth is None or int(depth.imageView) != int(stencil.imageView)
            or depth.storeOp != vk.VK_ATTACHMENT_STORE_OP_STORE):
        stored += bytes_of(stencil.imageView)
    return [n], [[stored] * n]


def area_of(rect) -> tuple[int, int, int, int]:
    return rect.offset.x, rect.offset.y, rect.extent.width, rect.extent.height


def end_commands(ffi, cb: CommandBuffer, commandBuffer, capture: Capture) -> None:
    """After the pass: the application's pipeline bound again, then the counter arrays copied out."""
    dev = cb.device
    if capture.variant is not None and capture.app_pipeline:
        dev.next.vkCmdBindPipeline(commandBuffer, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, capture.app_pipeline)
    barrier(ffi, cb, FRAGMENT | COLOR_OUTPUT, vk.VK_ACCESS_SHADER_WRITE_BIT, TRANSFER, vk.VK_ACCESS_TRANSFER_READ_BIT)
    for target in capture.copies:
        regions = ffi.new("VkBufferCopy[]", [{"srcOffset": s, "dstOffset": d, "size": n}
                                             for s, d, n in target.regions])
        dev.next.vkCmdCopyBuffer(commandBuffer, capture.chunk.buffer, target.buffer, len(target.regions), regions)
    # vk.xml: the values are written in COLOR_ATTACHMENT_OUTPUT; make the copies visible there and later.
    barrier(ffi, cb, TRANSFER, vk.VK_ACCESS_TRANSFER_WRITE_BIT, COLOR_OUTPUT | vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
            vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)

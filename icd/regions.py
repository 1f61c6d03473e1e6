"""VK_ARM_performance_counters_by_region in the emulated Mali: per-region counters from real execution.

Role: the whole extension (vk.xml 1.4.366: extension 606, spec version 1). A device that enabled
the `performanceCountersByRegion` feature gets, for every graphics pipeline with a fragment stage,
a second "counting" pipeline: the same create info with the fragment shader rewritten by the
SPIR-V toolkit's region-counter pass (spirv/passes/region_counters.py) and a driver-made pipeline
layout with one more descriptor set (a dynamic storage buffer of driver memory). A render pass
instance whose VkRenderPassBeginInfo / VkRenderingInfo carries
VkRenderPassPerformanceCountersByRegionBeginInfoARM (stripped before the backend) is captured:

- record time, before the pass begins: the driver takes a slice of its host-visible memory, writes
  a template (per subpass: a header the shader reads, then the regions in exactly the
  application's layout with zeros, and the computed tile write-back bytes) and records a copy
  template -> working slice and a barrier (so a command buffer submitted again starts from zero);
- inside the pass: graphics pipeline binds take the counting variant, and every draw binds the
  working slice of the current subpass (dynamic offset);
- after the pass ends: the application's pipeline is bound again, and a barrier, one
  vkCmdCopyBuffer per array (one region per counter run, so alignment padding is never written)
  into the buffer that holds each address (from the tracked vkGetBufferDeviceAddress results),
  and a barrier making the writes visible to COLOR_ATTACHMENT_OUTPUT and later stages.

Why a GPU copy rather than a host write after completion: the application's buffer need not be
host-visible, and the application may consume the values on the device later in the same command
buffer (the extension's synchronisation section); a copy in the command stream is exact for both.

Counters (`COUNTERS`: stable IDs, names; docs/regions.md says how each is computed): fragment
threads, covered samples, killed fragments, thread-operations per pipe (FMA, CVT, SFU, LS,
texture, varying: measured block executions x the compiler model's per-block costs), tile
write-back bytes (computed). Helper threads are not offered: a helper invocation's atomics have
no effect (Vulkan "Helper Invocations"), so the rewrite cannot count them.

Arrays: one per (subpass x layer) or, for multiview subpasses, per (subpass x view), in that
order; a subpass's arrays follow the previous subpass's. Subpasses are captured as physical
subpasses (this driver merges none).

Limits (reported once, never crashing): draws recorded in secondary command buffers inside a
captured pass, pipelines from pipeline libraries, shader objects and pipelines also flagged for
shader instrumentation are not counted; a resumed (dynamic rendering) instance is captured per
begin/end pair.

Threads: per-command-buffer state belongs to the recording thread (external synchronisation);
device state (pipelines, layouts, free memory) is guarded by `DeviceRegions.lock`.
"""
from __future__ import annotations

import itertools
import struct
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi import accel, structs
from tessera.vkapi.commands import DRAWS
from tessera.vkapi.resources import texel_bytes
from tessera.vkapi.vkconst import vk

from . import counter_memory
from .counter_memory import Chunk
from .driver import Driver
from .objects import CommandBuffer, Device, PhysicalDevice

EXTENSION = "VK_ARM_performance_counters_by_region"
SPEC_VERSION = 1
REGION_SIZE = (32, 32)          # 2x2 of the emulated 16x16 tiles
ROW_STRIDE_ALIGNMENT = 64       # bytes
REGION_ALIGNMENT = 16           # bytes
IDENTITY_TRANSFORM_ORDER = True
CHUNK_BYTES = 8 << 20           # driver memory per chunk (templates and working slices)
SECTION_MAX_BYTES = 4 << 20     # one subpass's slice: the descriptor's range
COLOR_OUTPUT = vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT
FRAGMENT = vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT
TRANSFER = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
BEGIN_INFO_STYPE = vk.VK_STRUCTURE_TYPE_RENDER_PASS_PERFORMANCE_COUNTERS_BY_REGION_BEGIN_INFO_ARM


@dataclass(frozen=True)
class Counter:
    id: int
    name: str
    raw: str | None          # the region-counter pass's counter, None when computed by the driver
    description: str


# Stable IDs (never reuse one); shader-core counters only, as the proposal's security model requires.
COUNTERS = (
    Counter(0x1001, "Fragment threads", "threads", "fragment shader invocations started (helpers excluded)"),
    Counter(0x1002, "Covered samples", "samples", "popcount(SampleMaskIn) summed over fragment invocations"),
    Counter(0x1003, "Killed fragments", "killed", "invocations that executed discard / terminate / demote"),
    Counter(0x1004, "FMA pipe thread-operations", "fma", "sum over executed blocks of the compiler model's FMA ops"),
    Counter(0x1005, "CVT pipe thread-operations", "cvt", "sum over executed blocks of the compiler model's CVT ops"),
    Counter(0x1006, "SFU pipe thread-operations", "sfu", "sum over executed blocks of the compiler model's SFU ops"),
    Counter(0x1007, "LS pipe thread-operations", "ls", "sum over executed blocks of the compiler model's LS ops"),
    Counter(0x1008, "Texture pipe thread-operations", "tex", "sum over executed blocks of the texture ops"),
    Counter(0x1009, "Varying pipe thread-operations", "var", "sum over executed blocks of the varying ops"),
    Counter(0x100A, "Tile write-back bytes", None,
            "pixels of the region inside the render area x bytes per texel (x samples) of stored attachments"),
)
BY_ID = {c.id: c for c in COUNTERS}
MAX_COUNTERS = len(COUNTERS)
_OPS_INDEX = {"fma": 0, "cvt": 1, "sfu": 2, "ls": 3, "var": 4, "tex": 5}   # compiler BlockCost.ops order
_chunk_ids = itertools.count(1)


class RegionsError(Exception):
    """Something this driver cannot set up (a pipeline without a counting variant, a pass not captured)."""


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def array_bytes(width: int, height: int, counters: int) -> int:
    """vk.xml: align(ceil(w/rw) * align(c*4, regionAlignment), rowStrideAlignment) * ceil(h/rh)."""
    rw, rh = REGION_SIZE
    return row_bytes(width, counters) * -(-height // rh)


def row_bytes(width: int, counters: int) -> int:
    return align(-(-width // REGION_SIZE[0]) * align(counters * 4, REGION_ALIGNMENT), ROW_STRIDE_ALIGNMENT)


@dataclass
class Variant:
    pipeline: int
    layout: int
    set_index: int


@dataclass
class ArrayCopy:
    buffer: int                        # the application's buffer holding the address
    regions: list[tuple[int, int, int]]   # (src offset in the chunk, dst offset in the buffer, bytes)


@dataclass
class Capture:
    """One captured render pass instance."""
    chunk: Chunk
    work: int                          # offset of subpass 0's working slice in the chunk
    section: int                       # bytes per subpass slice
    copies: list[ArrayCopy]
    subpass: int = 0
    app_pipeline: int = 0              # the application's graphics pipeline while the pass runs
    variant: Variant | None = None     # bound in its place


@dataclass
class CommandBufferRegions:
    chunks: list[Chunk] = field(default_factory=list)
    capture: Capture | None = None
    pool: int = 0


@dataclass
class DeviceRegions:
    """Per device that enabled the feature."""
    limits: counter_memory.Limits
    own_layouts: list[int] = field(default_factory=list)
    variants: dict[int, Variant] = field(default_factory=dict)        # application pipeline -> counting one
    view_masks: dict[int, tuple[int, ...]] = field(default_factory=dict)   # render pass -> per-subpass viewMask
    free: list[Chunk] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    buffers: dict[int, CommandBufferRegions] = field(default_factory=dict)   # command buffer address -> state
    lock: threading.Lock = field(default_factory=threading.Lock)


def wants_regions(ffi, pnext) -> bool:
    f = structs.find(ffi, pnext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_COUNTERS_BY_REGION_FEATURES_ARM,
                     "VkPhysicalDevicePerformanceCountersByRegionFeaturesARM *")
    return f is not None and bool(f.performanceCountersByRegion)


def apply_properties(ffi, p) -> None:
    s = ffi.cast("VkPhysicalDevicePerformanceCountersByRegionPropertiesARM *", p)
    s.maxPerRegionPerformanceCounters = MAX_COUNTERS
    s.performanceCounterRegionSize.width, s.performanceCounterRegionSize.height = REGION_SIZE
    s.rowStrideAlignment = ROW_STRIDE_ALIGNMENT
    s.regionAlignment = REGION_ALIGNMENT
    s.identityTransformOrder = vk.VK_TRUE if IDENTITY_TRANSFORM_ORDER else vk.VK_FALSE


def apply_features(ffi, p) -> None:
    ffi.cast("VkPhysicalDevicePerformanceCountersByRegionFeaturesARM *", p).performanceCountersByRegion = vk.VK_TRUE


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects
    log = hooks.errors.log
    warned: set[str] = set()
    states: dict[int, DeviceRegions] = {}    # device address -> state

    def warn(key: str, message: str) -> None:
        if key not in warned:
            warned.add(key)
            log.warning("%s", message)
            print(f"tessera: performance counters by region: {message}", file=sys.stderr)

    def state_of(dev: Device) -> DeviceRegions | None:
        return states.get(objects.address(dev.handle))

    def check(result: int, what: str) -> None:
        if result != vk.VK_SUCCESS:
            raise RegionsError(f"{what} failed ({result})")

    # ---- device ------------------------------------------------------------------------------
    def setup(dev: Device) -> None:
        states[objects.address(dev.handle)] = DeviceRegions(
            counter_memory.setup(ffi, dev, vk.VK_SHADER_STAGE_FRAGMENT_BIT))

    def teardown(dev: Device) -> None:
        state = states.pop(objects.address(dev.handle), None)
        if state is None:
            return
        for variant in state.variants.values():
            dev.next.vkDestroyPipeline(dev.handle, variant.pipeline, ffi.NULL)
        for chunk in state.chunks:
            counter_memory.destroy_chunk(ffi, dev, chunk)
        for layout in state.own_layouts:
            dev.next.vkDestroyPipelineLayout(dev.handle, layout, ffi.NULL)
        dev.next.vkDestroyDescriptorSetLayout(dev.handle, state.limits.set_layout, ffi.NULL)

    drv.regions_setup, drv.regions_teardown = setup, teardown

    # ---- counter enumeration ---------------------------------------------------------------
    @hooks.replace("vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM")
    def enumerate_counters(physicalDevice, queueFamilyIndex, pCounterCount, pCounters, pCounterDescriptions):
        objects.get(physicalDevice, PhysicalDevice)
        if pCounters == ffi.NULL and pCounterDescriptions == ffi.NULL:
            pCounterCount[0] = len(COUNTERS)
            return vk.VK_SUCCESS
        n = min(pCounterCount[0], len(COUNTERS))
        for i in range(n):
            if pCounters != ffi.NULL:
                pCounters[i].counterID = COUNTERS[i].id
            if pCounterDescriptions != ffi.NULL:
                d = pCounterDescriptions[i]
                d.flags = 0
                data = COUNTERS[i].name.encode()[: ffi.sizeof(d.name) - 1] + b"\0"
                ffi.memmove(d.name, data, len(data))
        pCounterCount[0] = n
        return vk.VK_INCOMPLETE if n < len(COUNTERS) else vk.VK_SUCCESS

    # ---- pipeline layouts and render passes the counting pipelines need -------------------------
    def remember_views(dev, ci, pRenderPass, subpass_masks) -> None:
        state = state_of(dev)
        if state is not None:
            state.view_masks[int(pRenderPass[0])] = tuple(subpass_masks)

    @hooks.also_after("vkCreateRenderPass")
    def after_create_render_pass(dev, result, device, ci, pAllocator, pRenderPass):
        if result != vk.VK_SUCCESS:
            return
        mv = structs.find(ffi, ci.pNext, vk.VK_STRUCTURE_TYPE_RENDER_PASS_MULTIVIEW_CREATE_INFO,
                          "VkRenderPassMultiviewCreateInfo *")
        masks = [mv.pViewMasks[i] if mv is not None and i < mv.subpassCount else 0 for i in range(ci.subpassCount)]
        remember_views(dev, ci, pRenderPass, masks)

    @hooks.also_after("vkCreateRenderPass2")
    def after_create_render_pass2(dev, result, device, ci, pAllocator, pRenderPass):
        if result == vk.VK_SUCCESS:
            remember_views(dev, ci, pRenderPass, [ci.pSubpasses[i].viewMask for i in range(ci.subpassCount)])

    # ---- counting pipelines ---------------------------------------------------------------------
    def extended_layout(dev: Device, state: DeviceRegions, app_layout: int) -> tuple[int, int]:
        layout, set_index = counter_memory.counters_layout(ffi, dev, state.limits, app_layout)
        with state.lock:
            state.own_layouts.append(layout)
        return layout, set_index

    def view_mask_of(state: DeviceRegions, info) -> int:
        if int(info.renderPass):
            masks = state.view_masks.get(int(info.renderPass), ())
            return masks[info.subpass] if info.subpass < len(masks) else 0
        rendering = structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
                                 "VkPipelineRenderingCreateInfo *")
        return rendering.viewMask if rendering is not None else 0

    def make_variant(dev: Device, state: DeviceRegions, src) -> Variant | None:
        """The counting pipeline of one graphics create info (None: nothing to count)."""
        from tessera.compiler import api
        from tessera.spirv import parse
        from tessera.spirv.passes.region_counters import PIPES, add_region_counters
        from tessera.vkapi.pipelines import _spec_values, _stage_code

        if src.flags & vk.VK_PIPELINE_CREATE_LIBRARY_BIT_KHR or structs.find(
                ffi, src.pNext, vk.VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR, "VkBaseInStructure *"):
            raise RegionsError("pipeline libraries are not supported")
        stage_bits = [src.pStages[s].stage for s in range(src.stageCount)]
        if vk.VK_SHADER_STAGE_FRAGMENT_BIT not in stage_bits:
            return None
        index = stage_bits.index(vk.VK_SHADER_STAGE_FRAGMENT_BIT)
        keep: list = []
        info = ffi.new("VkGraphicsPipelineCreateInfo *")
        ffi.memmove(info, src, ffi.sizeof("VkGraphicsPipelineCreateInfo"))
        stages = ffi.new("VkPipelineShaderStageCreateInfo[]", src.stageCount)
        ffi.memmove(stages, src.pStages, ffi.sizeof("VkPipelineShaderStageCreateInfo") * src.stageCount)
        info.pStages = stages
        stage = stages[index]
        code = _stage_code(ffi, dev, stage)
        if code is None:
            raise RegionsError("its fragment shader's SPIR-V is unknown to the driver")
        entry = structs.string(ffi, stage.pName)
        cost = api.shader_cost(code, entry, drv.profile.key, _spec_values(ffi, stage.pSpecializationInfo))
        ops = [{p: b.ops[_OPS_INDEX[p]] for p in PIPES} for b in cost.blocks]
        mask = view_mask_of(state, src)
        source = "view" if mask else "layer" if vk.VK_SHADER_STAGE_GEOMETRY_BIT in stage_bits else None
        layout, set_index = extended_layout(dev, state, int(src.layout))
        module = parse(code)
        add_region_counters(module, entry, set_index, 0, REGION_SIZE, ops, source)
        rewritten = module.to_bytes()
        words = ffi.new("uint32_t[]", len(rewritten) // 4)
        ffi.memmove(words, rewritten, len(rewritten))
        minfo = ffi.new("VkShaderModuleCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                       "codeSize": len(rewritten), "pCode": words})
        shader = ffi.new("VkShaderModule *")
        check(dev.next.vkCreateShaderModule(dev.handle, minfo, ffi.NULL, shader), "vkCreateShaderModule")
        stage.module = shader[0]
        if stage.pNext != ffi.NULL:   # an inline VkShaderModuleCreateInfo would override the module
            stage.pNext = structs.rebuild_chain(ffi, [n for n in structs.chain(ffi, stage.pNext)
                                                      if n.sType != vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO],
                                                keep)
        info.layout = layout
        info.flags &= ~vk.VK_PIPELINE_CREATE_DERIVATIVE_BIT
        info.basePipelineHandle, info.basePipelineIndex = 0, -1
        out = ffi.new("VkPipeline *")
        try:
            check(dev.next.vkCreateGraphicsPipelines(dev.handle, 0, 1, info, ffi.NULL, out),
                  "vkCreateGraphicsPipelines")
        finally:
            dev.next.vkDestroyShaderModule(dev.handle, shader[0], ffi.NULL)
        return Variant(int(out[0]), layout, set_index)

    @hooks.also_after("vkCreateGraphicsPipelines")
    def after_create_graphics(dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        state = state_of(dev)
        if state is None:
            return
        for i in range(count):
            handle = int(pPipelines[i])
            if not handle:
                continue
            record = dev.res.pipelines.get(handle)
            if record is not None and record.instrumented is not None:
                warn("instrumented", "a pipeline instrumented for VK_ARM_shader_instrumentation gets no per-region "
                     "counting variant: its draws are not counted")
                continue
            try:
                variant = make_variant(dev, state, ffi.addressof(pInfos, i))
            except Exception as e:
                warn(f"variant:{e}", f"a graphics pipeline cannot count per region ({e}): its draws are not counted")
                continue
            if variant is not None:
                with state.lock:
                    state.variants[handle] = variant

    @hooks.also_before("vkDestroyPipeline")
    def before_destroy_pipeline(dev, device, pipeline, pAllocator):
        state = state_of(dev)
        if state is None:
            return
        with state.lock:
            variant = state.variants.pop(int(pipeline), None)
        if variant is not None:
            dev.next.vkDestroyPipeline(device, variant.pipeline, ffi.NULL)

    # ---- driver memory -------------------------------------------------------------------------
    def new_chunk(dev: Device, state: DeviceRegions) -> Chunk:
        chunk = counter_memory.new_chunk(ffi, dev, state.limits, CHUNK_BYTES, SECTION_MAX_BYTES,
                                         vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        state.chunks.append(chunk)
        return chunk

    def cb_state(state: DeviceRegions, cb: CommandBuffer) -> CommandBufferRegions:
        regions = state.buffers.get(cb.address)
        if regions is None:
            regions = state.buffers[cb.address] = CommandBufferRegions(pool=cb.pool)
        return regions

    def reserve(dev: Device, state: DeviceRegions, regions: CommandBufferRegions, size: int) -> tuple[Chunk, int]:
        chunk = regions.chunks[-1] if regions.chunks else None
        if chunk is None or chunk.used + size > CHUNK_BYTES:
            with state.lock:
                chunk = state.free.pop() if state.free else None
            if chunk is None:
                chunk = new_chunk(dev, state)
            chunk.used = 0
            regions.chunks.append(chunk)
        offset = chunk.used
        chunk.used = align(offset + size, state.limits.alignment)
        return chunk, offset

    def release(state: DeviceRegions, address: int) -> None:
        regions = state.buffers.pop(address, None)
        if regions is not None:
            with state.lock:
                state.free.extend(regions.chunks)

    @hooks.also_before("vkBeginCommandBuffer")
    def before_begin(cb, commandBuffer, pBeginInfo):
        state = state_of(cb.device)
        if state is not None:
            release(state, cb.address)

    @hooks.also_before("vkResetCommandBuffer")
    def before_reset(cb, commandBuffer, flags):
        state = state_of(cb.device)
        if state is not None:
            release(state, cb.address)

    @hooks.also_before("vkFreeCommandBuffers")
    def before_free(dev, device, commandPool, count, pCommandBuffers):
        state = state_of(dev)
        if state is not None:
            for i in range(count):
                if pCommandBuffers[i] != ffi.NULL:
                    release(state, objects.address(pCommandBuffers[i]))

    def release_pool(dev, commandPool) -> None:
        state = state_of(dev)
        if state is not None:
            for address in [a for a, r in state.buffers.items() if r.pool == int(commandPool)]:
                release(state, address)

    hooks.also_before("vkDestroyCommandPool")(lambda dev, device, pool, pAllocator: release_pool(dev, pool))
    hooks.also_before("vkResetCommandPool")(lambda dev, device, pool, flags: release_pool(dev, pool))

    # ---- capture: begin ----------------------------------------------------------------------------
    def split(pnext, keep):
        """(the begin info struct or None, the chain without it)."""
        nodes = list(structs.chain(ffi, pnext))
        ours = [n for n in nodes if n.sType == BEGIN_INFO_STYPE]
        if not ours:
            return None, pnext
        rest = [n for n in nodes if n.sType != BEGIN_INFO_STYPE]
        return (ffi.cast("VkRenderPassPerformanceCountersByRegionBeginInfoARM *", ours[0]),
                structs.rebuild_chain(ffi, rest, keep) if rest else ffi.NULL)

    def plan(cb: CommandBuffer, state: DeviceRegions, request, area, subpass_arrays: list[int],
             writeback: list[list[float]], command: str) -> Capture | None:
        """Validate the request and prepare the capture (None: nothing is written)."""
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
        x, y, w, h = area
        if w == 0 or h == 0:
            return None
        arrays = sum(subpass_arrays)
        given = request.counterAddressCount if request.pCounterAddresses != ffi.NULL else 0
        if given < arrays:
            warn(f"addresses:{given}:{arrays}", f"{command}: counterAddressCount {given} is less than the {arrays} "
                 "arrays of this render pass instance (subpasses x layers or views): arrays without an address "
                 "are not written")
        rw, rh = REGION_SIZE
        cols, rows = -(-w // rw), -(-h // rh)
        region_stride = align(c * 4, REGION_ALIGNMENT)
        row_stride = row_bytes(w, c)
        layer_bytes = row_stride * rows
        size = layer_bytes
        from tessera.spirv.passes.region_counters import HEADER_WORDS, NONE, RAW_COUNTERS

        header_bytes = HEADER_WORDS * 4
        layers_alloc = max(subpass_arrays) if subpass_arrays else 1
        section = align(header_bytes + layers_alloc * layer_bytes, state.limits.alignment)
        if section > SECTION_MAX_BYTES or 2 * section * len(subpass_arrays) > CHUNK_BYTES:
            warn(f"large:{w}x{h}", f"{command}: a {w}x{h} render area with {c} counters needs more than the "
                 f"{SECTION_MAX_BYTES >> 20} MiB per subpass this driver reserves: nothing captured")
            return None
        # Where each array goes: the application's buffer must hold the whole array.
        dev = cb.device
        copies: list[ArrayCopy | None] = []
        for a in range(arrays):
            if a >= given:
                copies.append(None)
                continue
            address = int(request.pCounterAddresses[a])
            found = accel.buffer_at(dev.res, address)
            if found is None:
                warn(f"address:{address:#x}", f"{command}: counter address {address:#x} (array {a}) is not inside a "
                     "buffer whose address was queried with vkGetBufferDeviceAddress: that array is not written")
                copies.append(None)
                continue
            buffer, offset = found
            if offset + size > dev.res.buffers.get(buffer, 0):
                warn(f"small:{address:#x}:{size}", f"{command}: counter address {address:#x} (array {a}) has fewer "
                     f"than the {size} bytes the array needs before its buffer ends: that array is not written")
                copies.append(None)
                continue
            copies.append(ArrayCopy(buffer, [(0, offset, 0)]))   # regions filled below
        regions = cb_state(state, cb)
        total = 2 * section * len(subpass_arrays)
        chunk, template = reserve(dev, state, regions, total)
        work = template + section * len(subpass_arrays)
        slots = [NONE] * len(RAW_COUNTERS)
        for j, counter_id in enumerate(ids):
            raw = BY_ID[counter_id].raw
            if raw is not None:
                slots[RAW_COUNTERS.index(raw)] = j
        wb_slot = next((j for j, i in enumerate(ids) if BY_ID[i].raw is None), None)
        image = bytearray(section * len(subpass_arrays))
        out: list[ArrayCopy] = []
        array = 0
        for s, n in enumerate(subpass_arrays):
            base = s * section
            struct.pack_into(f"<9I{len(slots)}I", image, base, x, y, cols, rows, layers_alloc, row_stride // 4,
                             region_stride // 4, layer_bytes // 4, 0, *slots)
            for layer in range(n):
                data = base + header_bytes + layer * layer_bytes
                if wb_slot is not None and writeback[s][layer]:
                    for ry in range(rows):
                        hh = min(rh, h - ry * rh)
                        for rx in range(cols):
                            ww = min(rw, w - rx * rw)
                            struct.pack_into("<I", image, data + ry * row_stride + rx * region_stride + 4 * wb_slot,
                                             min(0xFFFFFFFF, int(ww * hh * writeback[s][layer])))
                target = copies[array]
                array += 1
                if target is None:
                    continue
                dst0 = target.regions[0][1]
                runs: list[list[int]] = []
                for ry in range(rows):
                    for rx in range(cols):
                        src = work + (data - base) + s * section + ry * row_stride + rx * region_stride
                        dst = dst0 + ry * row_stride + rx * region_stride
                        if runs and runs[-1][0] + runs[-1][2] == src and runs[-1][1] + runs[-1][2] == dst:
                            runs[-1][2] += 4 * c
                        else:
                            runs.append([src, dst, 4 * c])
                out.append(ArrayCopy(target.buffer, [tuple(r) for r in runs]))
        ffi.memmove(chunk.mapped + template, bytes(image), len(image))
        return Capture(chunk, work, section, out)

    def begin_commands(cb: CommandBuffer, capture: Capture, sections: int) -> None:
        """Template -> working slice, visible to the fragment shaders."""
        dev, handle = cb.device, cb.handle
        region = ffi.new("VkBufferCopy *", {"srcOffset": capture.work - capture.section * sections,
                                            "dstOffset": capture.work, "size": capture.section * sections})
        dev.next.vkCmdCopyBuffer(handle, capture.chunk.buffer, capture.chunk.buffer, 1, region)
        barrier(cb, TRANSFER, vk.VK_ACCESS_TRANSFER_WRITE_BIT, FRAGMENT,
                vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)

    def barrier(cb: CommandBuffer, src_stage: int, src_access: int, dst_stage: int, dst_access: int) -> None:
        mb = ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                           "srcAccessMask": src_access, "dstAccessMask": dst_access})
        cb.device.next.vkCmdPipelineBarrier(cb.handle, src_stage, dst_stage, 0, 1, mb, 0, ffi.NULL, 0, ffi.NULL)

    def bound_handle(cb: CommandBuffer) -> int:
        record = cb.graphics_pipeline
        if record is None:
            return 0
        return next((h for h, p in cb.device.res.pipelines.items() if p is record), 0)

    def start(cb: CommandBuffer, commandBuffer, request, area, subpass_arrays, writeback, command: str) -> None:
        state = state_of(cb.device)
        if state is None:
            warn("feature", f"{command} with VkRenderPassPerformanceCountersByRegionBeginInfoARM on a device that did "
                 "not enable the performanceCountersByRegion feature: ignored")
            return
        regions = cb_state(state, cb)
        if cb.level != vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY:
            warn("secondary", f"{command} in a secondary command buffer: not captured")
            return
        capture = plan(cb, state, request, area, subpass_arrays, writeback, command)
        if capture is None:
            return
        begin_commands(cb, capture, len(subpass_arrays))
        capture.app_pipeline = bound_handle(cb)
        regions.capture = capture
        hooks.recorder.python_path(commandBuffer, True)

    def after_start(cb: CommandBuffer) -> None:
        """Inside the pass: the pipeline bound before it is replaced by its counting variant."""
        state = state_of(cb.device)
        regions = state.buffers.get(cb.address) if state is not None else None
        if regions is None or regions.capture is None or not regions.capture.app_pipeline:
            return
        bind(cb, state, regions.capture, regions.capture.app_pipeline)

    def bind(cb: CommandBuffer, state: DeviceRegions, capture: Capture, pipeline: int) -> int:
        capture.app_pipeline = pipeline
        capture.variant = state.variants.get(pipeline)
        if capture.variant is None:
            return pipeline
        cb.device.next.vkCmdBindPipeline(cb.handle, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, capture.variant.pipeline)
        return capture.variant.pipeline

    def render_pass_geometry(cb: CommandBuffer, begin) -> tuple[list[int], list[list[float]]]:
        """Arrays per subpass and write-back bytes per pixel per (subpass, array), for a VkRenderPass."""
        res = cb.device.res
        rp = res.render_passes.get(int(begin.renderPass))
        fb = res.framebuffers.get(int(begin.framebuffer))
        state = state_of(cb.device)
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

    def rendering_geometry(cb: CommandBuffer, info) -> tuple[list[int], list[list[float]]]:
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

    def begin_render_pass(cb, commandBuffer, pBegin, rest, command: str):
        keep: list = []
        request, chain = split(pBegin.pNext, keep)
        if request is None:
            return None
        try:
            arrays, wb = render_pass_geometry(cb, pBegin)
            start(cb, commandBuffer, request, area_of(pBegin.renderArea), arrays, wb, command)
        except Exception:
            hooks.errors.report(command, "capturing per-region counters; the pass runs uncaptured")
        copy = ffi.new("VkRenderPassBeginInfo *")
        ffi.memmove(copy, pBegin, ffi.sizeof("VkRenderPassBeginInfo"))
        copy.pNext = chain
        stripped[objects.address(commandBuffer)] = (copy, keep)
        return (commandBuffer, copy, *rest)

    stripped: dict[int, tuple] = {}   # command buffer -> the begin info copy passed down (kept alive)

    @hooks.also_before("vkCmdBeginRenderPass")
    def before_begin_render_pass(cb, commandBuffer, pRenderPassBegin, contents):
        return begin_render_pass(cb, commandBuffer, pRenderPassBegin, (contents,), "vkCmdBeginRenderPass")

    @hooks.also_before("vkCmdBeginRenderPass2")
    def before_begin_render_pass2(cb, commandBuffer, pRenderPassBegin, pSubpassBeginInfo):
        return begin_render_pass(cb, commandBuffer, pRenderPassBegin, (pSubpassBeginInfo,), "vkCmdBeginRenderPass2")

    @hooks.also_before("vkCmdBeginRendering")
    def before_begin_rendering(cb, commandBuffer, pRenderingInfo):
        keep: list = []
        request, chain = split(pRenderingInfo.pNext, keep)
        if request is None:
            return None
        try:
            if pRenderingInfo.flags & vk.VK_RENDERING_RESUMING_BIT:
                warn("resuming", "vkCmdBeginRendering resuming a suspended instance: captured per begin/end pair")
            arrays, wb = rendering_geometry(cb, pRenderingInfo)
            start(cb, commandBuffer, request, area_of(pRenderingInfo.renderArea), arrays, wb, "vkCmdBeginRendering")
        except Exception:
            hooks.errors.report("vkCmdBeginRendering", "capturing per-region counters; the pass runs uncaptured")
        copy = ffi.new("VkRenderingInfo *")
        ffi.memmove(copy, pRenderingInfo, ffi.sizeof("VkRenderingInfo"))
        copy.pNext = chain
        stripped[objects.address(commandBuffer)] = (copy, keep)
        return (commandBuffer, copy)

    for name in ("vkCmdBeginRenderPass", "vkCmdBeginRenderPass2", "vkCmdBeginRendering"):
        hooks.also_after(name)(lambda cb, result, commandBuffer, *a: (
            stripped.pop(objects.address(commandBuffer), None), after_start(cb)))

    # ---- capture: inside the pass ---------------------------------------------------------------
    def active(cb: CommandBuffer) -> tuple[DeviceRegions, Capture] | tuple[None, None]:
        state = state_of(cb.device)
        regions = state.buffers.get(cb.address) if state is not None else None
        if regions is None or regions.capture is None:
            return None, None
        return state, regions.capture

    @hooks.also_before("vkCmdBindPipeline")
    def before_bind_pipeline(cb, commandBuffer, bindPoint, pipeline):
        if bindPoint != vk.VK_PIPELINE_BIND_POINT_GRAPHICS:
            return None
        state, capture = active(cb)
        if capture is None:
            return None
        capture.app_pipeline = int(pipeline)
        capture.variant = state.variants.get(int(pipeline))
        return (commandBuffer, bindPoint, capture.variant.pipeline) if capture.variant is not None else None

    def before_draw(cb, commandBuffer, *args):
        state, capture = active(cb)
        if capture is None or capture.variant is None:
            return None
        v = capture.variant
        sets = ffi.new("VkDescriptorSet[1]", [capture.chunk.descriptor_set])
        offsets = ffi.new("uint32_t[1]", [capture.work + capture.subpass * capture.section])
        cb.device.next.vkCmdBindDescriptorSets(commandBuffer, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, v.layout,
                                               v.set_index, 1, sets, 1, offsets)
        return None

    for name in DRAWS:
        hooks.also_before(name)(before_draw)

    def next_subpass(cb, commandBuffer, *args):
        state, capture = active(cb)
        if capture is not None:
            capture.subpass += 1

    hooks.also_after("vkCmdNextSubpass")(lambda cb, result, *a: next_subpass(cb, *a))
    hooks.also_after("vkCmdNextSubpass2")(lambda cb, result, *a: next_subpass(cb, *a))

    @hooks.also_before("vkCmdExecuteCommands")
    def before_execute(cb, commandBuffer, count, pCommandBuffers):
        if active(cb)[1] is not None:
            warn("execute", "vkCmdExecuteCommands inside a captured render pass instance: the secondaries' draws "
                 "are not counted")

    # ---- capture: end ---------------------------------------------------------------------------
    def end(cb, commandBuffer, *args):
        state, capture = active(cb)
        if capture is None:
            return
        state.buffers[cb.address].capture = None
        if cb.instrumentation is None:
            hooks.recorder.python_path(commandBuffer, False)
        dev = cb.device
        if capture.variant is not None and capture.app_pipeline:
            dev.next.vkCmdBindPipeline(commandBuffer, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, capture.app_pipeline)
        barrier(cb, FRAGMENT | COLOR_OUTPUT, vk.VK_ACCESS_SHADER_WRITE_BIT, TRANSFER, vk.VK_ACCESS_TRANSFER_READ_BIT)
        for target in capture.copies:
            regions = ffi.new("VkBufferCopy[]", [{"srcOffset": s, "dstOffset": d, "size": n}
                                                 for s, d, n in target.regions])
            dev.next.vkCmdCopyBuffer(commandBuffer, capture.chunk.buffer, target.buffer, len(target.regions), regions)
        # vk.xml: the values are written in COLOR_ATTACHMENT_OUTPUT; make the copies visible there and later.
        barrier(cb, TRANSFER, vk.VK_ACCESS_TRANSFER_WRITE_BIT, COLOR_OUTPUT | vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)

    for name in ("vkCmdEndRenderPass", "vkCmdEndRenderPass2", "vkCmdEndRendering"):
        hooks.also_after(name)(lambda cb, result, commandBuffer, *a: end(cb, commandBuffer, *a))

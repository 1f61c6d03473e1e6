"""`tessera run --regions [COUNTERS]`: the layer drives VK_ARM_performance_counters_by_region.

Role: like instrument.py for shader instrumentation. On devices whose driver offers the extension
(and whose application did not enable it itself) the layer enables the extension, its feature and
bufferDeviceAddress, hides the extension from the application, and chains a
VkRenderPassPerformanceCountersByRegionBeginInfoARM to every render pass instance it sees begin
(vkCmdBeginRenderPass/2, vkCmdBeginRendering not resuming), with addresses in buffers it owns:
host-visible, one buffer per instance holding its arrays (subpass x layer or view), recycled when
the command buffer is recorded again. When a submit has completed (indirect.py's fence readers)
every instance of its command buffers is read and sent as one REGIONS message (sequence =
submitID, tag = the render pass's tagID), the grids row by row.

Counters: the names given (case-insensitive, as enumerated by the driver) or "all"; at most the
driver's maxPerRegionPerformanceCounters, in enumeration order.

`Extensions` combines this and instrument.py behind the one interface chain.py and queues.py call
(device_info, device_created, hidden, readers), so either, both or neither can be on.

Threads: tracker state is the recording thread's; readers run where the capturer polls.
"""
from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi import structs
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.vkconst import vk

from . import encoder
from .state import DeviceState, LayerState

EXTENSION = "VK_ARM_performance_counters_by_region"
ADDRESS_ALIGNMENT = 256


@dataclass
class Limits:
    counters: list[tuple[int, str]]     # the captured counters (id, name), in order
    region: tuple[int, int]
    row_alignment: int
    region_alignment: int

    def array_bytes(self, width: int, height: int) -> int:
        return self.row_bytes(width) * -(-height // self.region[1])

    def region_stride(self) -> int:
        c = len(self.counters)
        return -(-c * 4 // self.region_alignment) * self.region_alignment

    def row_bytes(self, width: int) -> int:
        cols = -(-width // self.region[0])
        return -(-cols * self.region_stride() // self.row_alignment) * self.row_alignment


@dataclass
class Buffer:
    size: int
    buffer: int
    memory: int
    mapped: Any
    address: int


@dataclass
class Instance:
    """One captured render pass instance."""
    tag: int | None
    labels: list[str]
    area: tuple[int, int, int, int]
    arrays: list[tuple[int, int]]       # (subpass, layer or view ordinal) per address
    buffer: Buffer
    stride: int                         # bytes between arrays in the buffer
    keep: list = field(default_factory=list)


class Regions:
    def pipe_rates(self, dev, device_name: str) -> None:
        """Per-pipe rates for the DEVICE message are the instrumenter's (instrument.py)."""
        return None

    def __init__(self, ffi, state: LayerState, send, errors, names: tuple[str, ...]) -> None:
        self.ffi, self.state, self.send, self.errors = ffi, state, send, errors
        self.names = names
        self.limits: dict[int, Limits] = {}              # device address -> what it captures
        self.instances: dict[int, list[Instance]] = {}   # command buffer address -> its instances
        self.free: dict[int, list[Buffer]] = {}           # device address -> buffers to reuse
        self.view_masks: dict[int, tuple[int, ...]] = {}
        self.hidden = frozenset({EXTENSION})
        self.hooks: HookSet | None = None   # set by register

    # ---- device ------------------------------------------------------------------------------
    def device_info(self, info, app_names: list[str], below: dict[str, int], keep):
        ffi = self.ffi
        if EXTENSION in app_names or EXTENSION not in below:
            if EXTENSION not in below:
                print("tessera: --regions: the driver does not offer VK_ARM_performance_counters_by_region; "
                      "no per-region counters", file=sys.stderr)
            return info, False
        current = structs.extension_names(ffi, info)
        info = structs.with_extensions(ffi, "VkDeviceCreateInfo *", info, [*current, EXTENSION], keep)
        nodes = list(structs.chain(ffi, info.pNext))
        head = structs.rebuild_chain(ffi, nodes, keep) if nodes else ffi.NULL
        has_address = False
        for node in structs.chain(ffi, head):   # copies: bufferDeviceAddress where the app's chain has it
            if node.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES:
                ffi.cast("VkPhysicalDeviceVulkan12Features *", node).bufferDeviceAddress = vk.VK_TRUE
                has_address = True
            elif node.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES:
                ffi.cast("VkPhysicalDeviceBufferDeviceAddressFeatures *", node).bufferDeviceAddress = vk.VK_TRUE
                has_address = True
        if not has_address:
            bda = ffi.new("VkPhysicalDeviceBufferDeviceAddressFeatures *", {
                "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES, "pNext": head,
                "bufferDeviceAddress": vk.VK_TRUE})
            keep.append(bda)
            head = bda
        feature = ffi.new("VkPhysicalDevicePerformanceCountersByRegionFeaturesARM *", {
            "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_COUNTERS_BY_REGION_FEATURES_ARM,
            "pNext": head, "performanceCountersByRegion": vk.VK_TRUE})
        keep.append(feature)
        info.pNext = feature
        return info, True

    def device_created(self, dev: DeviceState, enabled: bool) -> None:
        if not enabled:
            return
        ffi = self.ffi
        props = ffi.new("VkPhysicalDevicePerformanceCountersByRegionPropertiesARM *", {
            "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_COUNTERS_BY_REGION_PROPERTIES_ARM})
        props2 = ffi.new("VkPhysicalDeviceProperties2 *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                                           "pNext": props})
        dev.instance.next.vkGetPhysicalDeviceProperties2(dev.physical, props2)
        enumerate_ = dev.instance.next.vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM
        count = ffi.new("uint32_t *")
        enumerate_(dev.physical, 0, count, ffi.NULL, ffi.NULL)
        ids = ffi.new("VkPerformanceCounterARM[]", count[0])
        descs = ffi.new("VkPerformanceCounterDescriptionARM[]", count[0])
        for i in range(count[0]):
            ids[i].sType = vk.VK_STRUCTURE_TYPE_PERFORMANCE_COUNTER_ARM
            descs[i].sType = vk.VK_STRUCTURE_TYPE_PERFORMANCE_COUNTER_DESCRIPTION_ARM
        enumerate_(dev.physical, 0, count, ids, descs)
        available = [(ids[i].counterID, structs.string(ffi, descs[i].name)) for i in range(count[0])]
        wanted = {n.lower() for n in self.names}
        chosen = available if "all" in wanted or not wanted else [c for c in available if c[1].lower() in wanted]
        unknown = wanted - {"all"} - {name.lower() for _, name in available}
        if unknown:
            print(f"tessera: --regions: unknown counter(s) {', '.join(sorted(unknown))}; the driver has: "
                  f"{', '.join(n for _, n in available)}", file=sys.stderr)
        chosen = chosen[:props.maxPerRegionPerformanceCounters]
        if chosen:
            self.limits[dev.address] = Limits(chosen, (props.performanceCounterRegionSize.width,
                                                       props.performanceCounterRegionSize.height),
                                              props.rowStrideAlignment, props.regionAlignment)

    # ---- buffers -----------------------------------------------------------------------------
    def buffer(self, dev: DeviceState, size: int) -> Buffer:
        ffi = self.ffi
        pool = self.free.setdefault(dev.address, [])
        for i, b in enumerate(pool):
            if b.size >= size:
                return pool.pop(i)
        size = max(4096, 1 << (size - 1).bit_length())
        info = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                                "usage": vk.VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT
                                                | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT})
        out = ffi.new("VkBuffer *")
        if dev.next.vkCreateBuffer(dev.handle, info, ffi.NULL, out) != vk.VK_SUCCESS:
            raise RuntimeError("vkCreateBuffer failed")
        reqs = ffi.new("VkMemoryRequirements *")
        dev.next.vkGetBufferMemoryRequirements(dev.handle, out[0], reqs)
        mem_props = ffi.new("VkPhysicalDeviceMemoryProperties *")
        dev.instance.next.vkGetPhysicalDeviceMemoryProperties(dev.physical, mem_props)
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        index = next(i for i in range(mem_props.memoryTypeCount) if reqs.memoryTypeBits & (1 << i)
                     and mem_props.memoryTypes[i].propertyFlags & want == want)
        flags = ffi.new("VkMemoryAllocateFlagsInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                                        "flags": vk.VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT})
        ainfo = ffi.new("VkMemoryAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": flags,
                                                   "allocationSize": reqs.size, "memoryTypeIndex": index})
        mem = ffi.new("VkDeviceMemory *")
        if dev.next.vkAllocateMemory(dev.handle, ainfo, ffi.NULL, mem) != vk.VK_SUCCESS:
            dev.next.vkDestroyBuffer(dev.handle, out[0], ffi.NULL)
            raise RuntimeError("vkAllocateMemory failed")
        dev.next.vkBindBufferMemory(dev.handle, out[0], mem[0], 0)
        ptr = ffi.new("void **")
        dev.next.vkMapMemory(dev.handle, mem[0], 0, vk.VK_WHOLE_SIZE, 0, ptr)
        ainfo2 = ffi.new("VkBufferDeviceAddressInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                                         "buffer": out[0]})
        address = dev.next.vkGetBufferDeviceAddress(dev.handle, ainfo2)
        return Buffer(size, int(out[0]), int(mem[0]), ffi.cast("char *", ptr[0]), int(address))

    def recycle(self, dev: DeviceState, commandBuffer) -> None:
        for inst in self.instances.pop(self.state.address(commandBuffer), []):
            self.free.setdefault(dev.address, []).append(inst.buffer)

    def destroy(self, dev: DeviceState) -> None:
        ffi = self.ffi
        buffers = self.free.pop(dev.address, [])
        for key in list(self.instances):
            for inst in self.instances[key]:
                buffers.append(inst.buffer)
        for b in buffers:
            dev.next.vkDestroyBuffer(dev.handle, b.buffer, ffi.NULL)
            dev.next.vkFreeMemory(dev.handle, b.memory, ffi.NULL)

    # ---- hooks: one method per command (HookSet.bind) -----------------------------------------
    def register(self, hooks) -> None:
        self.hooks = hooks   # its recorder (entry.py made it before any module registered)
        hooks.bind(self)

    def _attach(self, dev, commandBuffer, pnext_owner, area, arrays: list[tuple[int, int]], ctype: str):
        ffi = self.ffi
        limits = self.limits.get(dev.address)
        if limits is None or not arrays:
            return None
        t = self.state.command_buffer(dev, commandBuffer)
        part = t.part
        tag = part.workload.tag if part is not None and part.workload is not None else None
        x, y, w, h = area
        size = limits.array_bytes(w, h)
        stride = -(-size // ADDRESS_ALIGNMENT) * ADDRESS_ALIGNMENT
        buf = self.buffer(dev, stride * len(arrays))
        keep: list = []
        addresses = ffi.new("VkDeviceAddress[]", [buf.address + i * stride for i in range(len(arrays))])
        ids = ffi.new("uint32_t[]", [cid for cid, _ in limits.counters])
        info = ffi.new("VkRenderPassPerformanceCountersByRegionBeginInfoARM *", {
            "sType": vk.VK_STRUCTURE_TYPE_RENDER_PASS_PERFORMANCE_COUNTERS_BY_REGION_BEGIN_INFO_ARM,
            "pNext": pnext_owner.pNext, "counterAddressCount": len(arrays), "pCounterAddresses": addresses,
            "serializeRegions": vk.VK_FALSE, "counterIndexCount": len(limits.counters),
            "pCounterIndices": ids})
        copy = ffi.new(f"{ctype} *")
        ffi.memmove(copy, pnext_owner, ffi.sizeof(ctype))
        copy.pNext = info
        keep += [addresses, ids, info, copy]
        labels = list(t.labels)
        self.instances.setdefault(t.address, []).append(
            Instance(tag, labels, area, arrays, buf, stride, keep))
        return copy

    def arrays_of_pass(self, dev, pBegin) -> list[tuple[int, int]]:
        """(subpass, layer or view ordinal) of each array a render pass instance fills."""
        rp = dev.res.render_passes.get(int(pBegin.renderPass))
        fb = dev.res.framebuffers.get(int(pBegin.framebuffer))
        masks = self.view_masks.get(int(pBegin.renderPass), ())
        subpasses = rp.subpasses if rp is not None else max(1, len(masks))
        layers = fb.layers if fb is not None else 1
        out = []
        for s in range(subpasses):
            n = bin(masks[s]).count("1") if s < len(masks) and masks[s] else layers
            out += [(s, layer) for layer in range(n)]
        return out

    def _begin_pass(self, dev, commandBuffer, pBegin, rest):
        try:
            copy = self._attach(dev, commandBuffer, pBegin, area_of(pBegin.renderArea),
                                self.arrays_of_pass(dev, pBegin), "VkRenderPassBeginInfo")
        except Exception:
            self.hooks.errors.report("vkCmdBeginRenderPass", "attaching per-region counters; not captured")
            return None
        return (commandBuffer, copy, *rest) if copy is not None else None

    def before_vkCmdBeginRenderPass(self, dev, commandBuffer, pBegin, contents):
        return self._begin_pass(dev, commandBuffer, pBegin, (contents,))

    def before_vkCmdBeginRenderPass2(self, dev, commandBuffer, pBegin, pSubpassBeginInfo):
        return self._begin_pass(dev, commandBuffer, pBegin, (pSubpassBeginInfo,))

    def before_vkCmdBeginRendering(self, dev, commandBuffer, info):
        if info.flags & vk.VK_RENDERING_RESUMING_BIT:
            return None
        arrays = rendering_arrays(info)
        try:
            copy = self._attach(dev, commandBuffer, info, area_of(info.renderArea), arrays, "VkRenderingInfo")
        except Exception:
            self.hooks.errors.report("vkCmdBeginRendering", "attaching per-region counters; not captured")
            return None
        return (commandBuffer, copy) if copy is not None else None

    def _remember(self, dev, result, pRenderPass, masks) -> None:
        if result == vk.VK_SUCCESS and dev.address in self.limits:
            self.view_masks[int(pRenderPass[0])] = tuple(masks)

    def after_vkCreateRenderPass(self, dev, result, device, ci, pAllocator, pRenderPass):
        mv = structs.find(self.ffi, ci.pNext, vk.VK_STRUCTURE_TYPE_RENDER_PASS_MULTIVIEW_CREATE_INFO,
                          "VkRenderPassMultiviewCreateInfo *")
        self._remember(dev, result, pRenderPass,
                       [mv.pViewMasks[i] if mv is not None and i < mv.subpassCount else 0
                        for i in range(ci.subpassCount)])

    def after_vkCreateRenderPass2(self, dev, result, device, ci, pAllocator, pRenderPass):
        self._remember(dev, result, pRenderPass, [ci.pSubpasses[i].viewMask for i in range(ci.subpassCount)])

    def after_vkBeginCommandBuffer(self, dev, result, commandBuffer, pBeginInfo):
        if dev.address in self.limits:
            self.recycle(dev, commandBuffer)
            # Every render pass begin gets its capture request at record time: no pass is begun
            # in C (recorder.Recorded.opens_pass), nor anything else in this buffer.
            self.hooks.recorder.python_path(commandBuffer, True)

    # ---- results -----------------------------------------------------------------------------
    def readers(self, dev: DeviceState, submit_id: int, trackers) -> list:
        if dev.address not in self.limits:
            return []
        return [lambda insts=insts: self.read(dev, submit_id, insts)
                for t in trackers if (insts := self.instances.get(t.address))]

    def read(self, dev: DeviceState, submit_id: int, instances: list[Instance]) -> None:
        limits = self.limits[dev.address]
        c = len(limits.counters)
        rw, rh = limits.region
        region_stride = limits.region_stride()
        for inst in instances:
            if inst.tag is None:
                continue
            x, y, w, h = inst.area
            rows, cols = -(-h // rh), -(-w // rw)
            row = limits.row_bytes(w)
            raw = bytes(self.ffi.buffer(inst.buffer.mapped, inst.stride * len(inst.arrays)))
            arrays = []
            for a, (subpass, layer) in enumerate(inst.arrays):
                base = a * inst.stride
                values = [[[struct.unpack_from("<I", raw, base + ry * row + rx * region_stride + 4 * k)[0]
                            for rx in range(cols)] for ry in range(rows)] for k in range(c)]
                arrays.append({"subpass": subpass, "layer": layer, "values": values})
            payload = {"render_area": list(inst.area), "region_size": [rw, rh],
                       "counters": [{"id": i, "name": n} for i, n in limits.counters], "arrays": arrays}
            if inst.labels:
                payload["labels"] = inst.labels[:64]
            self.send(encoder.regions, submit_id, inst.tag, dev.address, payload)


def area_of(r) -> tuple[int, int, int, int]:
    """A VkRect2D as (x, y, width, height)."""
    return r.offset.x, r.offset.y, r.extent.width, r.extent.height


def rendering_arrays(info) -> list[tuple[int, int]]:
    """The arrays of a dynamic render pass instance: one per view, else per layer (subpass 0)."""
    n = bin(info.viewMask).count("1") if info.viewMask else max(1, info.layerCount)
    return [(0, i) for i in range(n)]


class Extensions:
    """instrument.Instrumenter and Regions behind chain.py's and queues.py's one extension slot."""

    def __init__(self, *items) -> None:
        self.items = [i for i in items if i is not None]
        self.hidden = frozenset().union(*(i.hidden for i in self.items))

    def device_info(self, info, app_names, below, keep):
        flags = []
        for item in self.items:
            info, flag = item.device_info(info, app_names, below, keep)
            flags.append(flag)
        return info, tuple(flags)

    def device_created(self, dev, flags) -> None:
        for item, flag in zip(self.items, flags or (False,) * len(self.items)):
            item.device_created(dev, flag)

    def readers(self, dev, submit_id: int, trackers) -> list:
        return [r for item in self.items for r in item.readers(dev, submit_id, trackers)]

    def pipe_rates(self, dev, device_name: str) -> dict[str, float] | None:
        return next((rates for item in self.items if (rates := item.pipe_rates(dev, device_name))), None)

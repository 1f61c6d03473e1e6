"""VK_ARM_tensors: push descriptors and descriptor update templates with tensor descriptors.

Role: the backend (lavapipe) has VK_KHR_push_descriptor and update templates but no
VK_DESCRIPTOR_TYPE_TENSOR_ARM, so both are translated here like vkUpdateDescriptorSets is in
descriptors.py (a tensor descriptor = a storage buffer + a metadata record):

- push descriptors (vkCmdPushDescriptorSet, ...2): tensor writes become storage-buffer writes,
  and one more write points the set's metadata binding at a copy of the set's records in a
  host-visible chunk the command buffer owns (the records of earlier pushes to the same set
  stay, as pushed descriptors do). A command buffer's chunks are reused when it is begun or reset
  again and returned to the device when it is freed; maxPushDescriptors is reported one below
  the backend's, room for that metadata binding;
- update templates whose set layout has tensor bindings are emulated: the driver keeps the
  entries and turns vkUpdateDescriptorSetWithTemplate / vkCmdPushDescriptorSetWithTemplate(2)
  into the writes they stand for (every descriptor type a template can hold: images, buffers,
  texel buffers, inline uniform blocks, acceleration structures, tensors), then into the paths
  above. Other templates are the backend's, untouched.

Threads: templates are created under the application's synchronisation; a command buffer's push
state is touched only by its recording thread; the device's free chunk list is a list used
under the GIL.
"""
from __future__ import annotations

import sys
import weakref
from typing import Any, Callable, Protocol

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from ..driver import Driver
from ..objects import CommandBuffer, Device, EmulatedObject, adopt, release
from . import resources

TENSOR = vk.VK_DESCRIPTOR_TYPE_TENSOR_ARM
STORAGE = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
CHUNK_BYTES = 64 * 1024
ALIGN = 256              # >= any minStorageBufferOffsetAlignment (the spec caps it at 256)
_IMAGE_TYPES = {vk.VK_DESCRIPTOR_TYPE_SAMPLER, vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
                vk.VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE, vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE,
                vk.VK_DESCRIPTOR_TYPE_INPUT_ATTACHMENT}
_BUFFER_TYPES = {vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                 vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC}
_TEXEL_TYPES = {vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, vk.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER}


class Chunk:
    """A host-visible storage buffer the pushed records are copied into."""
    __slots__ = ("buffer", "memory", "mapped", "used")

    def __init__(self, buffer: int, memory: int, mapped: Any) -> None:
        self.buffer, self.memory, self.mapped, self.used = buffer, memory, mapped, 0


class Template(EmulatedObject):
    """An emulated update template (its set layout has tensor bindings)."""
    OBJECT_TYPE = vk.VK_OBJECT_TYPE_DESCRIPTOR_UPDATE_TEMPLATE
    __slots__ = ("handle", "entries", "push", "bind_point", "pipeline_layout", "set", "layout")

    def __init__(self, handle: int, entries: list[tuple[int, int, int, int, int, int]], push: bool, bind_point: int,
                 pipeline_layout: int, set_index: int, layout: Any) -> None:
        self.handle = handle
        self.entries = entries          # binding, array element, count, type, offset, stride
        self.push, self.bind_point, self.pipeline_layout, self.set = push, bind_point, pipeline_layout, set_index
        self.layout = layout            # descriptors.SetLayoutInfo


class PushState:
    """One command buffer's pushed tensor records and metadata chunks."""
    __slots__ = ("device", "records", "chunks")

    def __init__(self, device: int) -> None:
        self.device = device                                          # id() of its Device
        self.records: dict[tuple[int, int, int], bytearray] = {}     # (bind point, layout, set) -> records
        self.chunks: list[Chunk] = []


class Translation(Protocol):
    """What the push paths take from descriptors.py (its TensorDescriptors): the device's
    descriptor state, the write translation (for sets and for any layout) and the host-visible
    memory type."""

    def state(self, dev: Device) -> Any: ...

    def set_writes(self, dev: Device, st: Any, command: str, count: int, pWrites, keep: list): ...

    def translate_writes(self, dev: Device, command: str, count: int, pWrites, layout_of: Callable, sink: Callable,
                         keep: list): ...

    def memory_type(self, dev: Device, st: Any) -> int: ...


class TensorPush:
    """Push descriptors and update templates with tensors: one method per command (HookSet.bind); the
    emulated templates and each command buffer's push state are on the object. Built and bound by
    descriptors.register, with its TensorDescriptors as the `translation`."""

    def __init__(self, drv: Driver, translation: Translation, record_bytes: int) -> None:
        self.ffi, self.objects = drv.ffi, drv.objects
        self.log = drv.hooks.errors.log
        self.translation, self.record_bytes = translation, record_bytes
        self.templates: dict[int, Template] = {}
        self.free_chunks: dict[int, list[Chunk]] = {}    # id(Device) -> chunks back from freed command buffers
        self.pushes: dict[int, PushState] = {}           # id(CommandBuffer) -> its state (dropped with the object)

    def refuse(self, command: str, message: str) -> None:
        self.log.warning("%s: %s", command, message)
        print(f"tessera: {resources.EXTENSION}: {command}: {message}", file=sys.stderr, flush=True)

    # ---- metadata chunks ------------------------------------------------------------------
    def new_chunk(self, dev: Device) -> Chunk:
        ffi = self.ffi
        st = self.translation.state(dev)
        binfo = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                                 "size": CHUNK_BYTES, "usage": vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT})
        buf = ffi.new("VkBuffer *")
        if dev.next.vkCreateBuffer(dev.handle, binfo, ffi.NULL, buf) != vk.VK_SUCCESS:
            raise RuntimeError("vkCreateBuffer failed for push-descriptor tensor metadata")
        reqs = ffi.new("VkMemoryRequirements *")
        dev.next.vkGetBufferMemoryRequirements(dev.handle, buf[0], reqs)
        ainfo = ffi.new("VkMemoryAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                   "allocationSize": reqs.size,
                                                   "memoryTypeIndex": self.translation.memory_type(dev, st)})
        mem = ffi.new("VkDeviceMemory *")
        if dev.next.vkAllocateMemory(dev.handle, ainfo, ffi.NULL, mem) != vk.VK_SUCCESS:
            dev.next.vkDestroyBuffer(dev.handle, buf[0], ffi.NULL)
            raise RuntimeError("vkAllocateMemory failed for push-descriptor tensor metadata")
        dev.next.vkBindBufferMemory(dev.handle, buf[0], mem[0], 0)
        ptr = ffi.new("void **")
        dev.next.vkMapMemory(dev.handle, mem[0], 0, vk.VK_WHOLE_SIZE, 0, ptr)
        return Chunk(int(buf[0]), int(mem[0]), ffi.cast("char *", ptr[0]))

    def push_state(self, cb: CommandBuffer) -> PushState:
        ps = self.pushes.get(id(cb))
        if ps is None:
            ps = self.pushes[id(cb)] = PushState(id(cb.device))
            # the command buffer object goes with vkFreeCommandBuffers: its chunks come back (keyed
            # by id(), which no other object can have before this finalizer has run)
            weakref.finalize(cb, self.gone, id(cb), ps)
        return ps

    def gone(self, key: int, ps: PushState) -> None:
        if self.pushes.get(key) is ps:
            del self.pushes[key]
            self.free_chunks.setdefault(ps.device, []).extend(ps.chunks)

    def place(self, dev: Device, ps: PushState, data: bytes) -> tuple[int, int]:
        """Copy `data` into the command buffer's chunks: (buffer, offset)."""
        size = (len(data) + ALIGN - 1) // ALIGN * ALIGN
        chunk = ps.chunks[-1] if ps.chunks and ps.chunks[-1].used + size <= CHUNK_BYTES else None
        if chunk is None:
            try:
                chunk = self.free_chunks.setdefault(id(dev), []).pop()
            except IndexError:
                chunk = self.new_chunk(dev)
            chunk.used = 0
            ps.chunks.append(chunk)
        offset = chunk.used
        self.ffi.memmove(chunk.mapped + offset, data, len(data))
        chunk.used += size
        return chunk.buffer, offset

    def recycle(self, cb: CommandBuffer) -> None:
        ps = self.pushes.get(id(cb))
        if ps is not None:
            ps.records.clear()
            for chunk in ps.chunks:
                chunk.used = 0
            self.free_chunks.setdefault(id(cb.device), []).extend(ps.chunks[1:])
            del ps.chunks[1:]

    def after_vkBeginCommandBuffer(self, cb, result, commandBuffer, pBeginInfo):
        self.recycle(cb)

    def after_vkResetCommandBuffer(self, cb, result, commandBuffer, flags):
        self.recycle(cb)

    def after_vkGetPhysicalDeviceProperties2(self, phys, result, physicalDevice, pProperties):
        """maxPushDescriptors leaves room for the metadata binding a push set with tensors gets."""
        p = structs.find(self.ffi, pProperties.pNext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES,
                         "VkPhysicalDevicePushDescriptorProperties *")
        if p is not None and p.maxPushDescriptors > 1:
            p.maxPushDescriptors -= 1

    # ---- push descriptors -----------------------------------------------------------------
    def set_layout_of(self, dev: Device, pipeline_layout: int, set_index: int):
        st = self.translation.state(dev)
        layouts = dev.pipeline_layouts.get(int(pipeline_layout), ([], []))[0]
        if st is None or set_index >= len(layouts):
            return None
        return st.layouts.get(layouts[set_index])

    def push_writes(self, cb: CommandBuffer, command: str, bind_point: int, pipeline_layout: int, set_index: int,
                    count: int, pWrites, keep: list):
        """The writes a push of a set with tensor bindings sends to the backend, with its metadata
        write; None when the set has no tensors (the application's writes go as they are)."""
        ffi, record_bytes = self.ffi, self.record_bytes
        dev = cb.device
        layout = self.set_layout_of(dev, pipeline_layout, set_index)
        if layout is None:
            return None
        ps = self.push_state(cb)
        key = (int(bind_point), int(pipeline_layout), int(set_index))
        records = ps.records.setdefault(key, bytearray(max(1, layout.records) * record_bytes))

        def sink(w, index: int, data: bytes) -> None:
            records[index * record_bytes:(index + 1) * record_bytes] = data
        out = self.translation.translate_writes(dev, command, count, pWrites, lambda w: layout, sink, keep)
        n, writes = out if out is not None else (count, pWrites)
        buffer, offset = self.place(dev, ps, bytes(records))
        info = ffi.new("VkDescriptorBufferInfo *", {"buffer": buffer, "offset": offset, "range": len(records)})
        array = ffi.new("VkWriteDescriptorSet[]", n + 1)
        keep += [info, array]
        for i in range(n):
            array[i] = writes[i]
        array[n] = {"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstBinding": layout.meta_binding,
                    "descriptorCount": 1, "descriptorType": STORAGE, "pBufferInfo": info}
        return n + 1, array

    def replace_vkCmdPushDescriptorSet(self, commandBuffer, bind_point, layout, set_index, count, pWrites):
        cb = self.objects.get(commandBuffer, CommandBuffer)
        keep: list = []
        out = self.push_writes(cb, "vkCmdPushDescriptorSet", bind_point, layout, set_index, count, pWrites, keep)
        n, writes = out if out is not None else (count, pWrites)
        cb.device.next.vkCmdPushDescriptorSet(commandBuffer, bind_point, layout, set_index, n, writes)

    def replace_vkCmdPushDescriptorSet2(self, commandBuffer, pInfo):
        cb = self.objects.get(commandBuffer, CommandBuffer)
        keep: list = []
        info = self.ffi.new("VkPushDescriptorSetInfo *")
        self.ffi.memmove(info, pInfo, self.ffi.sizeof("VkPushDescriptorSetInfo"))
        for bind_point in bind_points(pInfo.stageFlags):
            out = self.push_writes(cb, "vkCmdPushDescriptorSet2", bind_point, pInfo.layout, pInfo.set,
                                   pInfo.descriptorWriteCount, pInfo.pDescriptorWrites, keep)
            if out is not None:
                info.descriptorWriteCount, info.pDescriptorWrites = out
        cb.device.next.vkCmdPushDescriptorSet2(commandBuffer, info)

    # ---- update templates -----------------------------------------------------------------
    def replace_vkCreateDescriptorUpdateTemplate(self, device, pCreateInfo, pAllocator, pTemplate):
        dev = self.objects.get(device, Device)
        info = pCreateInfo
        entries = [info.pDescriptorUpdateEntries[i] for i in range(info.descriptorUpdateEntryCount)]
        push = info.templateType == vk.VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS
        st = self.translation.state(dev)
        layout = None
        if st is not None:
            layout = (self.set_layout_of(dev, info.pipelineLayout, info.set) if push
                      else st.layouts.get(int(info.descriptorSetLayout)))
        if layout is None:
            if any(e.descriptorType == TENSOR for e in entries):
                self.refuse("vkCreateDescriptorUpdateTemplate", "an entry is of type VK_DESCRIPTOR_TYPE_TENSOR_ARM "
                            "but the template's set layout has no tensor binding")
                return resources.VALIDATION_FAILED
            return dev.next.vkCreateDescriptorUpdateTemplate(device, pCreateInfo, pAllocator, pTemplate)
        handle = next(resources._handles)
        self.templates[handle] = Template(handle, [(e.dstBinding, e.dstArrayElement, e.descriptorCount,
                                                    e.descriptorType, e.offset, e.stride) for e in entries],
                                          push, info.pipelineBindPoint, int(info.pipelineLayout), info.set, layout)
        adopt(dev, self.templates[handle])
        pTemplate[0] = handle
        return vk.VK_SUCCESS

    def replace_vkDestroyDescriptorUpdateTemplate(self, device, template, pAllocator):
        dev = self.objects.get(device, Device)
        if self.templates.pop(int(template), None) is not None:
            release(dev, template)
        elif int(template):
            dev.next.vkDestroyDescriptorUpdateTemplate(device, template, pAllocator)

    def template_writes(self, t: Template, dst_set, pData, keep: list):
        """The VkWriteDescriptorSet array a template's entries read from pData stand for."""
        ffi = self.ffi
        base = ffi.cast("char *", pData)
        writes = ffi.new("VkWriteDescriptorSet[]", max(1, len(t.entries)))
        keep.append(writes)
        for i, (binding, element, count, dtype, offset, stride) in enumerate(t.entries):
            w = writes[i]
            w.sType, w.dstSet, w.dstBinding = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, dst_set, binding
            w.dstArrayElement, w.descriptorCount, w.descriptorType = element, count, dtype
            if dtype == vk.VK_DESCRIPTOR_TYPE_INLINE_UNIFORM_BLOCK:
                block = ffi.new("VkWriteDescriptorSetInlineUniformBlock *", {
                    "sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_INLINE_UNIFORM_BLOCK,
                    "dataSize": count, "pData": base + offset})
                keep.append(block)
                w.pNext = block
                continue
            if dtype in _IMAGE_TYPES:
                ctype, field_ = "VkDescriptorImageInfo", "pImageInfo"
            elif dtype in _BUFFER_TYPES:
                ctype, field_ = "VkDescriptorBufferInfo", "pBufferInfo"
            elif dtype in _TEXEL_TYPES:
                ctype, field_ = "VkBufferView", "pTexelBufferView"
            elif dtype in (TENSOR, vk.VK_DESCRIPTOR_TYPE_ACCELERATION_STRUCTURE_KHR):
                ctype, field_ = "uint64_t", None     # handles
            else:
                raise resources.TensorError(f"descriptor type {dtype} in an update template is not emulated")
            size = ffi.sizeof(ctype)
            array = ffi.new(f"{ctype}[]", max(1, count))
            keep.append(array)
            for k in range(count):
                ffi.memmove(ffi.cast("char *", array) + k * size, base + offset + k * stride, size)
            if field_ is not None:
                setattr(w, field_, array)
            elif dtype == TENSOR:
                ext = ffi.new("VkWriteDescriptorSetTensorARM *", {
                    "sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_TENSOR_ARM, "tensorViewCount": count,
                    "pTensorViews": ffi.cast("VkTensorViewARM *", array)})
                keep.append(ext)
                w.pNext = ext
            else:
                ext = ffi.new("VkWriteDescriptorSetAccelerationStructureKHR *", {
                    "sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_ACCELERATION_STRUCTURE_KHR,
                    "accelerationStructureCount": count,
                    "pAccelerationStructures": ffi.cast("VkAccelerationStructureKHR *", array)})
                keep.append(ext)
                w.pNext = ext
        return len(t.entries), writes

    def replace_vkUpdateDescriptorSetWithTemplate(self, device, descriptorSet, template, pData):
        dev = self.objects.get(device, Device)
        t = self.templates.get(int(template))
        if t is None:
            return dev.next.vkUpdateDescriptorSetWithTemplate(device, descriptorSet, template, pData)
        keep: list = []
        try:
            count, writes = self.template_writes(t, descriptorSet, pData, keep)
        except resources.TensorError as e:
            self.refuse("vkUpdateDescriptorSetWithTemplate", f"{e}: nothing is written")
            return
        out = self.translation.set_writes(dev, self.translation.state(dev), "vkUpdateDescriptorSetWithTemplate",
                                          count, writes, keep)
        n, final = out if out is not None else (count, writes)
        dev.next.vkUpdateDescriptorSets(device, n, final, 0, self.ffi.NULL)

    def push_with_template(self, cb: CommandBuffer, command: str, t: Template, layout, set_index, pData) -> None:
        keep: list = []
        try:
            count, writes = self.template_writes(t, self.ffi.cast("VkDescriptorSet", 0), pData, keep)
        except resources.TensorError as e:
            self.refuse(command, f"{e}: nothing is pushed")
            return
        out = self.push_writes(cb, command, t.bind_point, layout, set_index, count, writes, keep)
        n, final = out if out is not None else (count, writes)
        cb.device.next.vkCmdPushDescriptorSet(cb.handle, t.bind_point, layout, set_index, n, final)

    def replace_vkCmdPushDescriptorSetWithTemplate(self, commandBuffer, template, layout, set_index, pData):
        cb = self.objects.get(commandBuffer, CommandBuffer)
        t = self.templates.get(int(template))
        if t is None:
            return cb.device.next.vkCmdPushDescriptorSetWithTemplate(commandBuffer, template, layout, set_index, pData)
        self.push_with_template(cb, "vkCmdPushDescriptorSetWithTemplate", t, layout, set_index, pData)

    def replace_vkCmdPushDescriptorSetWithTemplate2(self, commandBuffer, pInfo):
        cb = self.objects.get(commandBuffer, CommandBuffer)
        t = self.templates.get(int(pInfo.descriptorUpdateTemplate))
        if t is None:
            return cb.device.next.vkCmdPushDescriptorSetWithTemplate2(commandBuffer, pInfo)
        self.push_with_template(cb, "vkCmdPushDescriptorSetWithTemplate2", t, pInfo.layout, pInfo.set, pInfo.pData)

    def teardown(self, dev: Device) -> None:
        """Before vkDestroyDevice: the metadata chunks of its command buffers."""
        chunks = self.free_chunks.pop(id(dev), [])
        for key, ps in list(self.pushes.items()):
            if ps.device == id(dev):
                chunks += ps.chunks
                ps.chunks = []
                self.pushes.pop(key, None)
        for chunk in chunks:
            dev.next.vkDestroyBuffer(dev.handle, chunk.buffer, self.ffi.NULL)
            dev.next.vkFreeMemory(dev.handle, chunk.memory, self.ffi.NULL)


def bind_points(stages: int) -> list[int]:
    out = []
    if stages & vk.VK_SHADER_STAGE_COMPUTE_BIT:
        out.append(vk.VK_PIPELINE_BIND_POINT_COMPUTE)
    if stages & vk.VK_SHADER_STAGE_ALL_GRAPHICS:
        out.append(vk.VK_PIPELINE_BIND_POINT_GRAPHICS)
    return out[:1]   # one translation: the records are the same for every bind point


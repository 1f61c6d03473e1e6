"""Driver-owned counter memory: host-visible chunks bound through one dynamic storage-buffer set.

Role: what shader instrumentation (icd/instrumentation/) and per-region counters (icd/regions/) both
need beside the application's descriptor sets: a descriptor set layout with one dynamic storage
buffer, the limits their regions obey, and chunks of host-visible, coherent memory, each a
backend VkBuffer mapped for good, with its own descriptor set (range `window`: a dynamic offset
plus the window must stay inside the chunk, so a chunk is `capacity + window` bytes and regions
are placed in its first `capacity`). Callers own the chunks and their `used` counters; nothing
here is shared between devices or threads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tessera.vkapi.vkconst import vk

from . import layouts

HOST_COHERENT = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT


class CounterMemoryError(Exception):
    """A backend call the counter memory needs failed (the feature then cannot work)."""


@dataclass
class Chunk:
    buffer: int
    memory: int
    mapped: Any                # char* of the whole chunk
    descriptor_set: Any
    pool: int
    used: int = 0


@dataclass(frozen=True)
class Limits:
    set_layout: int            # one dynamic storage buffer at binding 0
    alignment: int             # minStorageBufferOffsetAlignment (at least 4)
    max_sets: int              # maxBoundDescriptorSets
    memory_type: int           # host-visible and coherent


def _check(result: int, what: str) -> None:
    if result != vk.VK_SUCCESS:
        raise CounterMemoryError(f"{what} failed ({result})")


def setup(ffi, dev, stages: int) -> Limits:
    """The set layout (visible to `stages`) and the limits, for one device."""
    binding = ffi.new("VkDescriptorSetLayoutBinding *", {
        "binding": 0, "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC, "descriptorCount": 1,
        "stageFlags": stages})
    info = ffi.new("VkDescriptorSetLayoutCreateInfo *", {
        "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, "bindingCount": 1, "pBindings": binding})
    out = ffi.new("VkDescriptorSetLayout *")
    _check(dev.next.vkCreateDescriptorSetLayout(dev.handle, info, ffi.NULL, out), "vkCreateDescriptorSetLayout")
    props = ffi.new("VkPhysicalDeviceProperties *")
    dev.physical.next.vkGetPhysicalDeviceProperties(dev.physical.handle, props)
    if dev.physical.device_profile is not None:   # the emulated device's limits: a real Mali's sets
        dev.physical.device_profile.apply_properties(ffi, props)
    mem = ffi.new("VkPhysicalDeviceMemoryProperties *")
    dev.physical.next.vkGetPhysicalDeviceMemoryProperties(dev.physical.handle, mem)
    memory_type = next((i for i in range(mem.memoryTypeCount)
                        if mem.memoryTypes[i].propertyFlags & HOST_COHERENT == HOST_COHERENT), None)
    if memory_type is None:
        raise CounterMemoryError("the backend has no host-visible, coherent memory")
    return Limits(int(out[0]), max(4, props.limits.minStorageBufferOffsetAlignment),
                  props.limits.maxBoundDescriptorSets, memory_type)


def track_pipeline_layouts(hooks) -> None:
    """Keep every application pipeline layout's set layouts and push-constant ranges on the driver's
    Device (`pipeline_layouts`): counters_layout derives the driver's layouts from them."""

    @hooks.after("vkCreatePipelineLayout")
    def after_create_layout(dev, result, device, info, pAllocator, pLayout):
        if result != vk.VK_SUCCESS:
            return
        sets = [int(info.pSetLayouts[i]) for i in range(info.setLayoutCount)]
        ranges = [(r.stageFlags, r.offset, r.size) for r in (info.pPushConstantRanges[i]
                                                               for i in range(info.pushConstantRangeCount))]
        dev.pipeline_layouts[int(pLayout[0])] = (sets, ranges)

    @hooks.before("vkDestroyPipelineLayout")
    def before_destroy_layout(dev, device, layout, pAllocator):
        dev.pipeline_layouts.pop(int(layout), None)


def counters_layout(ffi, dev, limits: Limits, app_layout: int) -> tuple[int, int]:
    """(a pipeline layout of the application layout's set layouts and push-constant ranges plus the
    counters' set after them, that set's index): compatible with the application's layout for every
    set the application binds. The caller destroys the layout with the device."""
    sets, ranges = dev.pipeline_layouts.get(app_layout, (None, None))
    if sets is None:
        raise CounterMemoryError("its pipeline layout is unknown to the driver")
    return layout_with_counters(ffi, dev, limits, sets, ranges)


def layout_with_counters(ffi, dev, limits: Limits, sets, ranges) -> tuple[int, int]:
    """counters_layout from set layouts and (stageFlags, offset, size) push-constant ranges (a
    shader object's, which has no pipeline layout)."""
    if len(sets) + 1 > limits.max_sets:
        raise CounterMemoryError(f"its layout uses all {limits.max_sets} descriptor sets; none is left for the "
                                 "counters")
    return layouts.with_set(ffi, dev, sets, ranges, limits.set_layout, _check)


def new_chunk(ffi, dev, limits: Limits, capacity: int, window: int, usage: int) -> Chunk:
    """A zeroed chunk of `capacity + window` bytes and its descriptor set (range `window`)."""
    size = capacity + window
    binfo = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                             "usage": usage | vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT})
    buf = ffi.new("VkBuffer *")
    _check(dev.next.vkCreateBuffer(dev.handle, binfo, ffi.NULL, buf), "vkCreateBuffer")
    reqs = ffi.new("VkMemoryRequirements *")
    dev.next.vkGetBufferMemoryRequirements(dev.handle, buf[0], reqs)
    ainfo = ffi.new("VkMemoryAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                               "allocationSize": reqs.size, "memoryTypeIndex": limits.memory_type})
    mem = ffi.new("VkDeviceMemory *")
    _check(dev.next.vkAllocateMemory(dev.handle, ainfo, ffi.NULL, mem), "vkAllocateMemory")
    _check(dev.next.vkBindBufferMemory(dev.handle, buf[0], mem[0], 0), "vkBindBufferMemory")
    ptr = ffi.new("void **")
    _check(dev.next.vkMapMemory(dev.handle, mem[0], 0, vk.VK_WHOLE_SIZE, 0, ptr), "vkMapMemory")
    mapped = ffi.cast("char *", ptr[0])
    ffi.memmove(mapped, bytes(size), size)
    psize = ffi.new("VkDescriptorPoolSize *", {"type": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC,
                                               "descriptorCount": 1})
    pinfo = ffi.new("VkDescriptorPoolCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                                     "maxSets": 1, "poolSizeCount": 1, "pPoolSizes": psize})
    pool = ffi.new("VkDescriptorPool *")
    _check(dev.next.vkCreateDescriptorPool(dev.handle, pinfo, ffi.NULL, pool), "vkCreateDescriptorPool")
    layouts = ffi.new("VkDescriptorSetLayout[1]", [limits.set_layout])
    sinfo = ffi.new("VkDescriptorSetAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                                      "descriptorPool": pool[0], "descriptorSetCount": 1,
                                                      "pSetLayouts": layouts})
    dset = ffi.new("VkDescriptorSet *")
    _check(dev.next.vkAllocateDescriptorSets(dev.handle, sinfo, dset), "vkAllocateDescriptorSets")
    binfo2 = ffi.new("VkDescriptorBufferInfo *", {"buffer": buf[0], "offset": 0, "range": window})
    write = ffi.new("VkWriteDescriptorSet *", {"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                               "dstSet": dset[0], "dstBinding": 0, "descriptorCount": 1,
                                               "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC,
                                               "pBufferInfo": binfo2})
    dev.next.vkUpdateDescriptorSets(dev.handle, 1, write, 0, ffi.NULL)
    return Chunk(int(buf[0]), int(mem[0]), mapped, dset[0], int(pool[0]))


def destroy_chunk(ffi, dev, chunk: Chunk) -> None:
    dev.next.vkDestroyDescriptorPool(dev.handle, chunk.pool, ffi.NULL)
    dev.next.vkDestroyBuffer(dev.handle, chunk.buffer, ffi.NULL)
    dev.next.vkFreeMemory(dev.handle, chunk.memory, ffi.NULL)

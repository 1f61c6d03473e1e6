"""The data-graph operator shaders as backend compute pipelines, and the driver's own backend buffers.

Role: the backend objects a data-graph dispatch records with (feature.py): per device one push-descriptor
set layout (binding 0 the kernel's parameters, 1–3 its input tensors, 4 its output; all storage buffers),
and per (application compute layout, shader) a pipeline layout and a compute pipeline. The operator set
sits at the index after the sets of the application's bound compute pipeline layout, in a layout made of
that layout's set layouts and push-constant ranges plus the operator set (icd/layouts.py, as for the
counters): pushing it disturbs none of the application's descriptor sets and keeps
its push constants (Vulkan spec, "Pipeline Layout Compatibility"). The shader's DescriptorSet decorations
are rewritten to that index. The shaders are compiled at build time (`make graph-shaders`:
icd/data_graph/shaders/*.comp -> build/data_graph/*.spv); a missing one is a clear error.

Also: host-visible backend buffers (a pipeline's constants and parameter blocks) and device buffers bound
to the application's memory (a session's transient memory).
Threads: command buffers of one device may be recorded on several threads at once, so the caches are
filled under the Kernels' lock (a backend pipeline is made once per layout and shader).
"""
from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tessera.vkapi import paths
from tessera.vkapi.vkconst import vk

from .. import layouts, shader_modules
from ..counter_memory import HOST_COHERENT

SHADER_DIR = paths.BUILD_DIR / "data_graph"
SOURCE_DIR = Path(__file__).resolve().parent / "shaders"
BINDINGS = 5                      # params, three inputs, output
STORAGE = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
OP_DECORATE, DESCRIPTOR_SET = 71, 34


class KernelError(Exception):
    """A backend object the data-graph kernels need could not be made: the message says which."""


def _check(result: int, what: str) -> None:
    if result != vk.VK_SUCCESS:
        raise KernelError(f"backend {what} failed ({result})")


def shader_code(name: str) -> bytes:
    """The compiled shader `name` (build/data_graph/<name>.spv)."""
    path = SHADER_DIR / f"{name}.spv"
    try:
        return path.read_bytes()
    except OSError:
        raise KernelError(f"{path} is missing: the data-graph operator shaders are built by `make graph-shaders` "
                          f"(glslangValidator, from {SOURCE_DIR})") from None


def with_set_index(code: bytes, index: int) -> bytes:
    """`code` with every DescriptorSet decoration set to `index`."""
    words = list(struct.unpack(f"<{len(code) // 4}I", code))
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if opcode == OP_DECORATE and count == 4 and words[i + 2] == DESCRIPTOR_SET:
            words[i + 3] = index
        i += count
    return struct.pack(f"<{len(words)}I", *words)


@dataclass
class HostBuffer:
    buffer: int
    memory: int
    mapped: Any
    size: int


@dataclass
class Kernels:
    """A device's operator pipelines (made on first use) and its operator set layout."""
    set_layout: int
    memory_type: int                                             # host-visible, coherent
    alignment: int                                               # minStorageBufferOffsetAlignment
    max_sets: int
    layouts: dict[Any, tuple[int, int]] = field(default_factory=dict)   # app layout key -> (our layout, set index)
    pipelines: dict[tuple[Any, str], int] = field(default_factory=dict)
    modules: dict[tuple[str, int], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def setup(ffi, dev) -> Kernels:
    bindings = ffi.new("VkDescriptorSetLayoutBinding[]", [
        {"binding": b, "descriptorType": STORAGE, "descriptorCount": 1, "stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT}
        for b in range(BINDINGS)])
    info = ffi.new("VkDescriptorSetLayoutCreateInfo *", {
        "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        "flags": vk.VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT, "bindingCount": BINDINGS,
        "pBindings": bindings})
    out = ffi.new("VkDescriptorSetLayout *")
    _check(dev.next.vkCreateDescriptorSetLayout(dev.handle, info, ffi.NULL, out), "vkCreateDescriptorSetLayout")
    props = ffi.new("VkPhysicalDeviceProperties *")
    dev.physical.next.vkGetPhysicalDeviceProperties(dev.physical.handle, props)
    mem = ffi.new("VkPhysicalDeviceMemoryProperties *")
    dev.physical.next.vkGetPhysicalDeviceMemoryProperties(dev.physical.handle, mem)
    memory_type = next((i for i in range(mem.memoryTypeCount)
                        if mem.memoryTypes[i].propertyFlags & HOST_COHERENT == HOST_COHERENT), None)
    if memory_type is None:
        raise KernelError("the backend has no host-visible, coherent memory")
    return Kernels(int(out[0]), memory_type, max(4, props.limits.minStorageBufferOffsetAlignment),
                   props.limits.maxBoundDescriptorSets)


def layout_for(ffi, dev, k: Kernels, app: tuple | None) -> tuple[int, int]:
    """(pipeline layout, operator set index) compatible with `app` = (set layouts, push ranges) of the
    application's bound compute pipeline layout (None: no compute pipeline bound). Under k.lock."""
    key = None if app is None else (tuple(app[0]), tuple(app[1]))
    if key in k.layouts:
        return k.layouts[key]
    sets, ranges = ([], []) if app is None else (list(app[0]), list(app[1]))
    if len(sets) + 1 > k.max_sets:
        raise KernelError(f"the bound compute pipeline layout uses all {k.max_sets} descriptor sets; none is left "
                          "for the data-graph operators")
    k.layouts[key] = layouts.with_set(ffi, dev, sets, ranges, k.set_layout, _check)
    return k.layouts[key]


def pipeline_for(ffi, dev, k: Kernels, app: tuple | None, shader: str) -> tuple[int, int, int]:
    """(compute pipeline, its layout, operator set index) of `shader` beside the application's layout."""
    with k.lock:
        return _pipeline_for(ffi, dev, k, app, shader)


def _pipeline_for(ffi, dev, k: Kernels, app: tuple | None, shader: str) -> tuple[int, int, int]:
    layout, index = layout_for(ffi, dev, k, app)
    key = (None if app is None else (tuple(app[0]), tuple(app[1])), shader)
    if key not in k.pipelines:
        module = k.modules.get((shader, index))
        if module is None:
            result, created = shader_modules.create(ffi, dev, with_set_index(shader_code(shader), index))
            _check(result, "vkCreateShaderModule")
            module = k.modules[(shader, index)] = int(created)
        name = ffi.new("char[]", b"main")
        info = ffi.new("VkComputePipelineCreateInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            "stage": {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      "stage": vk.VK_SHADER_STAGE_COMPUTE_BIT, "module": module, "pName": name},
            "layout": layout})
        out = ffi.new("VkPipeline *")
        _check(dev.next.vkCreateComputePipelines(dev.handle, 0, 1, info, ffi.NULL, out), "vkCreateComputePipelines")
        k.pipelines[key] = int(out[0])
    return k.pipelines[key], layout, index


def destroy(ffi, dev, k: Kernels) -> None:
    for p in k.pipelines.values():
        dev.next.vkDestroyPipeline(dev.handle, p, ffi.NULL)
    for m in k.modules.values():
        dev.next.vkDestroyShaderModule(dev.handle, m, ffi.NULL)
    for layout, _ in k.layouts.values():
        dev.next.vkDestroyPipelineLayout(dev.handle, layout, ffi.NULL)
    dev.next.vkDestroyDescriptorSetLayout(dev.handle, k.set_layout, ffi.NULL)
    k.pipelines.clear()
    k.modules.clear()
    k.layouts.clear()


def storage_buffer(ffi, dev, size: int) -> int:
    """An unbound backend storage buffer of `size` bytes."""
    info = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                            "usage": vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT})
    out = ffi.new("VkBuffer *")
    _check(dev.next.vkCreateBuffer(dev.handle, info, ffi.NULL, out), "vkCreateBuffer")
    return int(out[0])


def host_buffer(ffi, dev, k: Kernels, data: bytes) -> HostBuffer:
    """A host-visible, coherent backend storage buffer holding `data` (mapped for good)."""
    size = max(len(data), 16)
    buf = storage_buffer(ffi, dev, size)
    reqs = ffi.new("VkMemoryRequirements *")
    dev.next.vkGetBufferMemoryRequirements(dev.handle, buf, reqs)
    ainfo = ffi.new("VkMemoryAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                               "allocationSize": reqs.size, "memoryTypeIndex": k.memory_type})
    mem = ffi.new("VkDeviceMemory *")
    _check(dev.next.vkAllocateMemory(dev.handle, ainfo, ffi.NULL, mem), "vkAllocateMemory")
    _check(dev.next.vkBindBufferMemory(dev.handle, buf, mem[0], 0), "vkBindBufferMemory")
    ptr = ffi.new("void **")
    _check(dev.next.vkMapMemory(dev.handle, mem[0], 0, vk.VK_WHOLE_SIZE, 0, ptr), "vkMapMemory")
    mapped = ffi.cast("char *", ptr[0])
    ffi.memmove(mapped, data.ljust(size, b"\0"), size)
    return HostBuffer(buf, int(mem[0]), mapped, size)


def free_host_buffer(ffi, dev, b: HostBuffer) -> None:
    dev.next.vkDestroyBuffer(dev.handle, b.buffer, ffi.NULL)
    dev.next.vkFreeMemory(dev.handle, b.memory, ffi.NULL)

"""VK_ARM_tensors: external memory of tensors in the emulated Mali.

Role: a tensor's memory is a backend VkBuffer's (resources.py: storage + transfer usage), so what
a tensor can export or import is exactly what the backend allows for such a buffer:
vkGetPhysicalDeviceExternalTensorPropertiesARM answers with the backend's
vkGetPhysicalDeviceExternalBufferProperties for that usage and handle type (lavapipe: opaque fd
and dma-buf), and a tensor created with VkExternalMemoryTensorCreateInfoARM gets a backing buffer
created with VkExternalMemoryBufferCreateInfo of the same handle types. Memory is allocated,
exported and imported by the application with the core/KHR commands, which go to the backend
unchanged.

The two structs are written as raw words here (they are not in the shim's cffi declarations).
Threads: stateless.
"""
from __future__ import annotations

from tessera.vkapi.vkconst import vk

BUFFER_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)


def buffer_properties(drv, phys, handle_type: int) -> tuple[int, int, int]:
    """(externalMemoryFeatures, exportFromImportedHandleTypes, compatibleHandleTypes) the backend
    gives a tensor's backing buffer for `handle_type`; zeros when it has no answer."""
    ffi = drv.ffi
    address = drv.backend.gipa(phys.instance.handle, b"vkGetPhysicalDeviceExternalBufferProperties")
    if address == ffi.NULL or not handle_type or handle_type & (handle_type - 1):
        return 0, 0, 0
    get = ffi.cast("void (*)(void *, uint32_t *, uint32_t *)", address)
    # VkPhysicalDeviceExternalBufferInfo {sType, pNext, flags, usage, handleType} (32 bytes)
    info = ffi.new("uint32_t[8]", [vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO, 0, 0, 0, 0,
                                   BUFFER_USAGE, handle_type, 0])
    # VkExternalBufferProperties {sType, pNext, {features, exportFrom, compatible}} (32 bytes)
    props = ffi.new("uint32_t[8]", [vk.VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES])
    get(ffi.cast("void *", phys.handle), info, props)
    return int(props[4]), int(props[5]), int(props[6])


def buffer_create_chain(ffi, handle_types: int, keep: list):
    """A VkExternalMemoryBufferCreateInfo {sType, pNext, handleTypes} for a backing buffer's pNext."""
    node = ffi.new("uint32_t[6]", [vk.VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, 0, 0, 0, handle_types])
    keep.append(node)
    return ffi.cast("void *", node)

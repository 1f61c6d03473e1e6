"""Device memory allocations (#28): how many the application made, and how many were small or dedicated.

Role: the layer counts each device's vkAllocateMemory calls and the binds of buffers and images to
them, by the Khronos validation layer's Best Practices rules, and sends the counts as the device's
`allocations` (schemas/json/device.schema.json) in a second DEVICE message when the device is
destroyed (hostd keeps a device's last DEVICE payload). hostd's advisor (rules.py
`small_allocations`) turns them into advice.

  - small: an allocation under SMALL_ALLOCATION_BYTES (256 KiB: the validation layer's
    vkAllocateMemory-small-allocation threshold, kMinDeviceAllocationSize);
  - small dedicated: a bind of a buffer or image to memory whose allocation size equals the
    resource's memory requirements (the resource consumes the whole block) under
    SMALL_DEDICATED_BYTES (1 MiB: the validation layer's vkBindMemory-small-dedicated-allocation
    threshold, kMinDedicatedAllocationSize), counted per bind as the validation layer does;
  - page waste: the bytes each small allocation leaves unused in its last PAGE_BYTES page. The
    model's choice: Mali's kernel driver (kbase) backs each VkDeviceMemory with whole 4 KiB CPU
    pages, so allocations sub-allocated from one block would not each round up.

The layer's own allocations (capture buffers, region counters) call down directly and are not seen.
Threads: the hooks run on the application's threads; one lock per device's counts.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tessera.vkapi.vkconst import vk

SMALL_ALLOCATION_BYTES = 256 * 1024
SMALL_DEDICATED_BYTES = 1024 * 1024
PAGE_BYTES = 4096


@dataclass
class DeviceAllocations:
    """One device's counts (on DeviceState.allocations)."""
    sizes: dict[int, int] = field(default_factory=dict)      # VkDeviceMemory -> allocationSize
    made: int = 0
    small: int = 0
    small_bytes: int = 0
    page_waste_bytes: int = 0
    small_dedicated: int = 0
    small_dedicated_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def allocated(self, memory: int, size: int) -> None:
        with self.lock:
            self.sizes[memory] = size
            self.made += 1
            if size < SMALL_ALLOCATION_BYTES:
                self.small += 1
                self.small_bytes += size
                self.page_waste_bytes += -size % PAGE_BYTES

    def bound(self, memory: int, required: int) -> None:
        with self.lock:
            size = self.sizes.get(memory)
            if size is not None and size == required and size < SMALL_DEDICATED_BYTES:
                self.small_dedicated += 1
                self.small_dedicated_bytes += size

    def to_json(self) -> dict:
        return {"made": self.made, "small": self.small, "small_bytes": self.small_bytes,
                "page_waste_bytes": self.page_waste_bytes, "small_dedicated": self.small_dedicated,
                "small_dedicated_bytes": self.small_dedicated_bytes}


class Allocations:
    """The hooks of vkAllocateMemory and the binds (HookSet.bind)."""

    def __init__(self, ffi) -> None:
        self.ffi = ffi

    def _counts(self, dev) -> DeviceAllocations:
        if dev.allocations is None:
            dev.allocations = DeviceAllocations()
        return dev.allocations

    def _int(self, handle) -> int:
        return int(self.ffi.cast("uintptr_t", handle))

    def after_vkAllocateMemory(self, dev, result, device, pAllocateInfo, pAllocator, pMemory):
        if result == vk.VK_SUCCESS:
            self._counts(dev).allocated(self._int(pMemory[0]), int(pAllocateInfo.allocationSize))

    def _buffer(self, dev, buffer, memory) -> None:
        reqs = self.ffi.new("VkMemoryRequirements *")
        dev.next.vkGetBufferMemoryRequirements(dev.handle, buffer, reqs)
        self._counts(dev).bound(self._int(memory), int(reqs.size))

    def _image(self, dev, image, memory) -> None:
        reqs = self.ffi.new("VkMemoryRequirements *")
        dev.next.vkGetImageMemoryRequirements(dev.handle, image, reqs)
        self._counts(dev).bound(self._int(memory), int(reqs.size))

    def after_vkBindBufferMemory(self, dev, result, device, buffer, memory, memoryOffset):
        if result == vk.VK_SUCCESS:
            self._buffer(dev, buffer, memory)

    def after_vkBindImageMemory(self, dev, result, device, image, memory, memoryOffset):
        if result == vk.VK_SUCCESS:
            self._image(dev, image, memory)

    def after_vkBindBufferMemory2(self, dev, result, device, bindInfoCount, pBindInfos):
        if result == vk.VK_SUCCESS:
            for i in range(bindInfoCount):
                self._buffer(dev, pBindInfos[i].buffer, pBindInfos[i].memory)

    def after_vkBindImageMemory2(self, dev, result, device, bindInfoCount, pBindInfos):
        if result == vk.VK_SUCCESS:
            for i in range(bindInfoCount):
                if pBindInfos[i].memory:      # swapchain image binds (VkBindImageMemorySwapchainInfoKHR) have none
                    self._image(dev, pBindInfos[i].image, pBindInfos[i].memory)


def register(hooks, ffi) -> None:
    hooks.bind(Allocations(ffi))

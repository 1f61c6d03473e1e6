"""Knowing when a submit's GPU work has completed, without the application's fence.

Some workload facts exist only once the GPU has run: the sizes an indirect
command reads from device memory, the block executions shader
instrumentation counts. The driver (icd/submit.py, when a submitted command
buffer holds such a workload: `CommandBuffer.needs_completion`) and the layer
(layer/indirect.py, when it captured indirect parameters) submit a fence of
their own right after the application's submit: a fence submitted with no
batches signals once all work submitted earlier to the queue has completed
(spec 7.3, vkQueueSubmit: "If submitCount is zero but fence is not
VK_NULL_HANDLE, the fence will still be submitted to the queue and will
become signaled when all work previously submitted to the queue has
completed"). The driver's timeline worker waits for it before timing the
batch; the layer reads its captures back once it signalled.

Fences are pooled per device (created on demand, reset and reused, destroyed
with the device). The thread that submits takes a fence; whoever waits for
it gives it back. `device` is anything with the device's `handle` and its
next element's dispatch table as `next`.
"""
from __future__ import annotations

import threading
from typing import Callable

from .vkconst import vk

# How long the worker waits for a fence in one go; between waits it says it is stalled (settle() then
# stops waiting for it: the application may be about to signal what the GPU waits for).
WAIT_SLICE_NS = 5_000_000


class Fences:
    """The completion fences of one device."""

    def __init__(self, ffi, device) -> None:
        self.ffi, self.device = ffi, device
        self._free: list = []
        self._all: list = []
        self._lock = threading.Lock()
        self._wait_handle = ffi.new("VkFence *")

    def signal_after(self, queue):
        """Submit a fence behind everything submitted to `queue` (a VkQueue) so far; None if that failed."""
        ffi, dev = self.ffi, self.device
        with self._lock:
            fence = self._free.pop() if self._free else None
        if fence is None:
            info = ffi.new("VkFenceCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})
            out = ffi.new("VkFence *")
            if dev.next.vkCreateFence(dev.handle, info, ffi.NULL, out) != vk.VK_SUCCESS:
                return None
            fence = out[0]
            with self._lock:
                self._all.append(fence)
        if dev.next.vkQueueSubmit(queue, 0, ffi.NULL, fence) != vk.VK_SUCCESS:
            self.give_back(fence, signaled=False)
            return None
        return fence

    def wait(self, fence, stalled: Callable[[], None]) -> bool:
        """On the worker: wait until `fence` signals (calling `stalled` each time a slice passes without
        it); the caller gives it back. False if the device was lost."""
        dev, pfence = self.device, self._wait_handle
        pfence[0] = fence
        while True:
            result = dev.next.vkWaitForFences(dev.handle, 1, pfence, vk.VK_TRUE, WAIT_SLICE_NS)
            if result != vk.VK_TIMEOUT:
                break
            stalled()
        return result == vk.VK_SUCCESS

    def signaled(self, fence) -> bool:
        """Any thread, while `fence` is taken (not given back)."""
        return self.device.next.vkGetFenceStatus(self.device.handle, fence) == vk.VK_SUCCESS

    def give_back(self, fence, signaled: bool) -> None:
        if signaled:
            pfence = self.ffi.new("VkFence *", fence)
            self.device.next.vkResetFences(self.device.handle, 1, pfence)
        with self._lock:
            self._free.append(fence)

    def destroy(self) -> None:
        """At vkDestroyDevice, once nothing waits for one of them."""
        dev = self.device
        with self._lock:
            fences, self._all, self._free = self._all, [], []
        for fence in fences:
            dev.next.vkDestroyFence(dev.handle, fence, self.ffi.NULL)

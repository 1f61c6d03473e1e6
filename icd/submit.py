"""Queue submit hooks: hand each submitted batch to the emulated timeline.

The timeline is written after the backend accepted the submit (a rejected
submit executes nothing), with the host time taken when the hook runs.
"""
from __future__ import annotations

from tessera.vkapi.vkconst import vk

from .driver import Driver
from .objects import CommandBuffer
from .timeline import Batch


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects

    def cbs(handles, count) -> list[CommandBuffer]:
        return [objects.get(handles[i], CommandBuffer) for i in range(count)]

    @hooks.after("vkQueueSubmit")
    def after_submit(queue, result, vkqueue, count, pSubmits, fence):
        if result != vk.VK_SUCCESS:
            return
        batches = []
        for i in range(count):
            s = pSubmits[i]
            batches.append(Batch(cbs(s.pCommandBuffers, s.commandBufferCount),
                                 [int(s.pWaitSemaphores[j]) for j in range(s.waitSemaphoreCount)],
                                 [int(s.pSignalSemaphores[j]) for j in range(s.signalSemaphoreCount)]))
        drv.timeline.submit(queue, batches)

    @hooks.after("vkQueueSubmit2")
    def after_submit2(queue, result, vkqueue, count, pSubmits, fence):
        if result != vk.VK_SUCCESS:
            return
        batches = []
        for i in range(count):
            s = pSubmits[i]
            handles = [s.pCommandBufferInfos[j].commandBuffer for j in range(s.commandBufferInfoCount)]
            batches.append(Batch([objects.get(h, CommandBuffer) for h in handles],
                                 [int(s.pWaitSemaphoreInfos[j].semaphore) for j in range(s.waitSemaphoreInfoCount)],
                                 [int(s.pSignalSemaphoreInfos[j].semaphore)
                                  for j in range(s.signalSemaphoreInfoCount)]))
        drv.timeline.submit(queue, batches)

    @hooks.before("vkDestroySemaphore")
    def before_destroy_semaphore(dev, device, semaphore, pAllocator):
        drv.timeline.forget_semaphore(int(semaphore))


SUBMIT_HOOKS = ("vkQueueSubmit", "vkQueueSubmit2", "vkDestroySemaphore")

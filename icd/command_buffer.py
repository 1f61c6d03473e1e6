"""Command buffer lifecycle (Vulkan spec 6.1) and the pool -> buffers map."""
from __future__ import annotations

from tessera.vkapi.vkconst import vk

from .driver import Driver
from .objects import CommandBuffer, CommandBufferState


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects

    @hooks.after("vkAllocateCommandBuffers")
    def after_allocate(dev, result, device, pAllocateInfo, pCommandBuffers):
        if result != vk.VK_SUCCESS:
            return
        pool = int(pAllocateInfo.commandPool)
        members = objects.pools.setdefault(pool, set())
        for i in range(pAllocateInfo.commandBufferCount):
            address = objects.address(pCommandBuffers[i])
            objects.add(CommandBuffer(pCommandBuffers[i], dev, pool, pAllocateInfo.level, address=address))
            members.add(address)

    def forget(pool: int, handle) -> None:
        address = objects.address(handle)
        objects.pools.get(pool, set()).discard(address)
        objects.remove(handle)

    @hooks.before("vkFreeCommandBuffers")
    def before_free(dev, device, commandPool, count, pCommandBuffers):
        for i in range(count):
            if pCommandBuffers[i] != ffi.NULL:
                forget(int(commandPool), pCommandBuffers[i])

    @hooks.before("vkDestroyCommandPool")
    def before_destroy_pool(dev, device, commandPool, pAllocator):
        for address in objects.pools.pop(int(commandPool), set()):
            objects.by_address.pop(address, None)

    @hooks.after("vkResetCommandPool")
    def after_reset_pool(dev, result, device, commandPool, flags):
        for address in objects.pools.get(int(commandPool), ()):
            cb = objects.by_address.get(address)
            if isinstance(cb, CommandBuffer):
                cb.reset()

    @hooks.after("vkBeginCommandBuffer")
    def after_begin(cb, result, commandBuffer, pBeginInfo):
        if result == vk.VK_SUCCESS:
            cb.reset()  # vkBeginCommandBuffer implicitly resets (spec 6.4)
            cb.state = CommandBufferState.RECORDING

    @hooks.after("vkEndCommandBuffer")
    def after_end(cb, result, commandBuffer):
        cb.state = CommandBufferState.EXECUTABLE if result == vk.VK_SUCCESS else CommandBufferState.INVALID

    @hooks.after("vkResetCommandBuffer")
    def after_reset(cb, result, commandBuffer, flags):
        if result == vk.VK_SUCCESS:
            cb.reset()

"""Command buffer lifecycle (Vulkan spec 6.1) and the pool -> buffers map."""
from __future__ import annotations

from tessera.vkapi.commands import track_command_buffers
from tessera.vkapi.vkconst import vk

from .driver import Driver
from .objects import CommandBuffer, CommandBufferState


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects

    def added(dev, handle, address: int, level: int, pool: int) -> None:
        objects.add(CommandBuffer(handle, dev, pool, level, address=address))
        recorder = hooks.recorder
        if dev.recording_table is None:   # the backend's functions, for the commands recorded in C
            dev.recording_table = recorder.device_table(dev.next)
        recorder.register(handle, dev.recording_table)

    def gone(dev, address: int) -> None:
        drv.timeline.pull()   # the submits made in C of this buffer reach the timeline first
        with objects.lock:
            cb = objects.by_address.pop(address, None)
        if isinstance(cb, CommandBuffer):
            hooks.recorder.unregister(cb.handle)

    def reset(dev, address: int) -> None:
        cb = objects.by_address.get(address)
        if isinstance(cb, CommandBuffer):
            drv.timeline.pull()
            hooks.recorder.reset(cb.handle)
            cb.reset()

    track_command_buffers(hooks, ffi, lambda dev: objects.pools, added, gone, reset)

    @hooks.after("vkBeginCommandBuffer")
    def after_begin(cb, result, commandBuffer, pBeginInfo):
        if result == vk.VK_SUCCESS:
            drv.timeline.pull()
            hooks.recorder.reset(commandBuffer)
            cb.reset()  # vkBeginCommandBuffer implicitly resets (spec 6.4)
            cb.state = CommandBufferState.RECORDING

    @hooks.after("vkEndCommandBuffer")
    def after_end(cb, result, commandBuffer):
        cb.state = CommandBufferState.EXECUTABLE if result == vk.VK_SUCCESS else CommandBufferState.INVALID

    @hooks.at_record("vkEndCommandBuffer")
    def at_end(cb, commandBuffer):
        """On the application's thread, before the worker applies the recording: its submits may skip
        Python unless they hold work timed only after execution (submit.py). Work timed so is recorded
        by Python hooks, whose ops exist by now; the commands recorded in C never are."""
        drv.timeline.start()
        hooks.recorder.set_submit_ok(commandBuffer, drv.c_submits and not cb.needs_completion)

    @hooks.after("vkResetCommandBuffer")
    def after_reset(cb, result, commandBuffer, flags):
        if result == vk.VK_SUCCESS:
            drv.timeline.pull()
            hooks.recorder.reset(commandBuffer)
            cb.reset()

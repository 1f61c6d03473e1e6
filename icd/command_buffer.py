"""Command buffer lifecycle (Vulkan spec 6.1) and the pool -> buffers map."""
from __future__ import annotations

from tessera.vkapi.commands import track_command_buffers
from tessera.vkapi.vkconst import vk

from .driver import Driver
from .objects import CommandBuffer, CommandBufferState, Device


class CommandBufferLifecycle:
    """The driver's command buffers: made, dropped and reset with their pools (the pool callbacks of
    vkapi/commands.track_command_buffers), and their state through begin, end and reset; one method per
    command (HookSet.bind). The recorder is the hooks' (made when they are installed): read when used."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.hooks, self.objects = drv, drv.hooks, drv.objects

    # ---- pools (vkapi/commands.track_command_buffers) ----------------------------------------
    def pools_of(self, dev: Device) -> dict:
        return self.objects.pools

    def added(self, dev: Device, handle, address: int, level: int, pool: int) -> None:
        self.objects.add(CommandBuffer(handle, dev, pool, level, address=address))
        recorder = self.hooks.recorder
        if dev.recording_table is None:   # the backend's functions, for the commands recorded in C
            dev.recording_table = recorder.device_table(dev.next)
            recorder.defer_lifecycle(dev.recording_table, dev, dev.res)
        recorder.register(handle, dev.recording_table, level == vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, pool)

    def gone(self, dev: Device, address: int) -> None:
        self.drv.timeline.pull()   # the submits made in C of this buffer reach the timeline first
        with self.objects.lock:
            cb = self.objects.by_address.pop(address, None)
        if isinstance(cb, CommandBuffer):
            self.hooks.recorder.unregister(cb.handle)

    def reset_later(self, handle) -> None:
        """A pool reset C made (vkapi/lifecycle.py), for one of its buffers, when something looks at it."""
        cb = self.objects.get(handle, CommandBuffer)
        self.reset(cb.device, cb.address)

    def reset(self, dev: Device, address: int) -> None:
        cb = self.objects.by_address.get(address)
        if isinstance(cb, CommandBuffer):
            self.drv.timeline.pull()
            self.hooks.recorder.reset(cb.handle)
            cb.reset()

    # ---- begin, end, reset -------------------------------------------------------------------
    def after_vkBeginCommandBuffer(self, cb: CommandBuffer, result, commandBuffer, pBeginInfo):
        if result == vk.VK_SUCCESS:
            self.drv.timeline.pull()
            self.hooks.recorder.reset(commandBuffer)
            cb.reset()  # vkBeginCommandBuffer implicitly resets (spec 6.4)
            cb.state = CommandBufferState.RECORDING

    def after_vkEndCommandBuffer(self, cb: CommandBuffer, result, commandBuffer):
        cb.state = CommandBufferState.EXECUTABLE if result == vk.VK_SUCCESS else CommandBufferState.INVALID

    def at_record_vkEndCommandBuffer(self, cb: CommandBuffer, commandBuffer):
        """On the application's thread, before the worker applies the recording: its submits may skip
        Python unless they hold work timed only after execution (submit.py). Work timed so is recorded
        by Python hooks, whose ops exist by now; the commands recorded in C never are."""
        self.drv.timeline.start()
        self.hooks.recorder.set_submit_ok(commandBuffer, self.drv.c_submits and not cb.needs_completion)

    def after_vkResetCommandBuffer(self, cb: CommandBuffer, result, commandBuffer, flags):
        if result == vk.VK_SUCCESS:
            self.drv.timeline.pull()
            self.hooks.recorder.reset(commandBuffer)
            cb.reset()


def register(drv: Driver) -> None:
    buffers = drv.hooks.bind(CommandBufferLifecycle(drv))
    track_command_buffers(drv.hooks, drv.ffi, buffers.pools_of, buffers.added, buffers.gone, buffers.reset)
    drv.hooks.recorder.reset_later(buffers.reset_later)

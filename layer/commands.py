"""Command buffers, queues and the application's debug labels.

Application labels (VK_EXT_debug_utils command-buffer and queue labels,
VK_EXT_debug_marker markers) are recorded by the layer and not passed down,
as in Arm's layer: below the layer, the label stack holds only the layer's
`t<tagID>` and `s<submitID>` labels. Each workload carries the application
stack in effect when it began, resolved per queue at submit (queues.py).
"""
from __future__ import annotations

from tessera.vkapi import structs
from tessera.vkapi.commands import track_command_buffers, track_device_queues
from tessera.vkapi.ops import LABEL_END, Execute, LabelBegin, LabelInsert
from tessera.vkapi.vkconst import vk

from .descriptions import send_pending
from .state import LayerState
from .trackers import CommandBufferTracker, QueueTracker


class Commands:
    """Command-buffer and queue tracking and the application's labels: one method per command
    (HookSet.bind). State: the trackers on each device (`dev.command_buffers`, `dev.queues`)."""

    def __init__(self, hooks, state: LayerState, ffi, release_captures, reporter) -> None:
        """`release_captures(dev, tracker)` frees a buffer's indirect-capture regions (indirect.py);
        `reporter`: queues.QueueReporter (`pull`: report the submits made in C so far; `note_queue`:
        a queue's labels or suspended pass changed)."""
        self.hooks = hooks   # its recorder (entry.py made it before any module registered)
        self.state = state
        self.ffi = ffi
        self.release_captures = release_captures
        self.reporter = reporter

    # ---- command buffers ---------------------------------------------------
    def added(self, dev, handle, address: int, level: int, pool: int) -> None:
        recorder = self.hooks.recorder
        dev.command_buffers[address] = CommandBufferTracker(handle, address, level, pool)
        if dev.recording_table is None:   # the driver's functions, and its label commands for t<tag>
            dev.recording_table = recorder.device_table(dev.next, label_source=dev.next)
            recorder.defer_lifecycle(dev.recording_table, dev, dev.res)
        recorder.register(handle, dev.recording_table, level == vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, pool)

    def pull(self) -> None:
        """Submits made in C are reported before their buffers or queues change (queues.py)."""
        self.reporter.pull()

    def gone(self, dev, address: int) -> None:
        self.pull()
        tracker = dev.command_buffers.pop(address, None)
        if tracker is not None:
            send_pending(self.state, dev, tracker)   # a recording never ended keeps its descriptions
            self.hooks.recorder.unregister(tracker.handle)
            self.release_captures(dev, tracker)

    def reset(self, dev, tracker: CommandBufferTracker) -> None:
        self.pull()
        self.release_captures(dev, tracker)
        send_pending(self.state, dev, tracker)
        tracker.reset()
        self.hooks.recorder.reset(tracker.handle)   # and the C side's records and submit count

    def pool_reset(self, dev, address: int) -> None:
        if address in dev.command_buffers:
            self.reset(dev, dev.command_buffers[address])

    def before_vkBeginCommandBuffer(self, dev, commandBuffer, pBeginInfo):
        tracker = self.state.command_buffer(dev, commandBuffer)
        self.reset(dev, tracker)   # spec 6.4: begin implicitly resets
        tracker.one_time = bool(pBeginInfo.flags & vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)

    def after_vkResetCommandBuffer(self, dev, result, commandBuffer, flags):
        self.reset(dev, self.state.command_buffer(dev, commandBuffer))

    # vkEndCommandBuffer: a render pass still suspended is finished by render_passes.py.

    def track_queue(self, dev, handle, family: int, index: int) -> None:
        address = self.state.address(handle)
        if handle != self.ffi.NULL and address not in dev.queues:
            dev.queues[address] = QueueTracker(handle, f"queue {family}.{index}")

    # ---- application labels: recorded, not passed down --------------------
    # Recorded in C (intercepts.APP_LABEL, APP_MARKER, APP_LABEL_END): the apply_ methods apply the
    # records later, in order, with the text copied; the replacements serve command buffers the C side
    # does not know.
    def _recorded(self, commandBuffer) -> CommandBufferTracker:
        return self.state.command_buffer(self.state.owner_of(commandBuffer), commandBuffer)

    def _text(self, info, field: str) -> str:
        return structs.string(self.ffi, getattr(info, field))

    def apply_vkCmdBeginDebugUtilsLabelEXT(self, dev, commandBuffer, name: str | None = None) -> None:
        label_begin(self.state.command_buffer(dev, commandBuffer), name)

    def replace_vkCmdBeginDebugUtilsLabelEXT(self, commandBuffer, pLabelInfo) -> None:
        label_begin(self._recorded(commandBuffer), self._text(pLabelInfo, "pLabelName"))

    def apply_vkCmdEndDebugUtilsLabelEXT(self, dev, commandBuffer, name: str | None = None) -> None:
        label_end(self.state.command_buffer(dev, commandBuffer))

    def replace_vkCmdEndDebugUtilsLabelEXT(self, commandBuffer) -> None:
        label_end(self._recorded(commandBuffer))

    def apply_vkCmdInsertDebugUtilsLabelEXT(self, dev, commandBuffer, name: str | None = None) -> None:
        label_insert(self.state.command_buffer(dev, commandBuffer), name)

    def replace_vkCmdInsertDebugUtilsLabelEXT(self, commandBuffer, pLabelInfo) -> None:
        label_insert(self._recorded(commandBuffer), self._text(pLabelInfo, "pLabelName"))

    def apply_vkCmdDebugMarkerBeginEXT(self, dev, commandBuffer, name: str | None = None) -> None:
        label_begin(self.state.command_buffer(dev, commandBuffer), name)

    def replace_vkCmdDebugMarkerBeginEXT(self, commandBuffer, pMarkerInfo) -> None:
        label_begin(self._recorded(commandBuffer), self._text(pMarkerInfo, "pMarkerName"))

    def apply_vkCmdDebugMarkerEndEXT(self, dev, commandBuffer, name: str | None = None) -> None:
        label_end(self.state.command_buffer(dev, commandBuffer))

    def replace_vkCmdDebugMarkerEndEXT(self, commandBuffer) -> None:
        label_end(self._recorded(commandBuffer))

    def apply_vkCmdDebugMarkerInsertEXT(self, dev, commandBuffer, name: str | None = None) -> None:
        label_insert(self.state.command_buffer(dev, commandBuffer), name)

    def replace_vkCmdDebugMarkerInsertEXT(self, commandBuffer, pMarkerInfo) -> None:
        label_insert(self._recorded(commandBuffer), self._text(pMarkerInfo, "pMarkerName"))

    def _queue(self, queue) -> QueueTracker:
        return self.state.owner_of(queue).queues[self.state.address(queue)]

    def replace_vkQueueBeginDebugUtilsLabelEXT(self, queue, pLabelInfo):
        self.pull()
        q = self._queue(queue)
        q.labels.append(structs.string(self.ffi, pLabelInfo.pLabelName))
        self.reporter.note_queue(q)

    def replace_vkQueueEndDebugUtilsLabelEXT(self, queue):
        self.pull()
        q = self._queue(queue)
        if q.labels:   # a pop without a push is tolerated
            q.labels.pop()
        self.reporter.note_queue(q)

    def replace_vkQueueInsertDebugUtilsLabelEXT(self, queue, pLabelInfo):
        self._queue(queue)

    def before_vkCmdExecuteCommands(self, dev, commandBuffer, count, pCommandBuffers):
        t = self.state.command_buffer(dev, commandBuffer)
        secondaries = [self.state.command_buffer(dev, pCommandBuffers[i]) for i in range(count)]
        t.ops.append(Execute(secondaries))
        if t.part is not None:   # draws recorded in secondaries continue this render pass
            t.part.draws += sum(_draws(s) for s in secondaries)

    apply_vkCmdExecuteCommands = before_vkCmdExecuteCommands   # recorded in C (intercepts.EXECUTE)


def label_begin(t: CommandBufferTracker, name: str) -> None:
    t.ops.append(LabelBegin(name))
    t.labels.append(name)


def label_end(t: CommandBufferTracker) -> None:
    t.ops.append(LABEL_END)
    if t.labels:
        t.labels.pop()
    else:
        t.pops_below_start += 1   # closes a label opened in an earlier command buffer


def label_insert(t: CommandBufferTracker, name: str) -> None:
    t.ops.append(LabelInsert(name))


def register(hooks, state: LayerState, ffi, release_captures, reporter) -> None:
    """`release_captures(dev, tracker)` frees a buffer's indirect-capture regions (indirect.py);
    `reporter`: the queues.QueueReporter entry.py made."""
    commands = hooks.bind(Commands(hooks, state, ffi, release_captures, reporter))
    track_command_buffers(hooks, ffi, lambda dev: dev.pools, commands.added, commands.gone, commands.pool_reset)
    # a pool reset C made (vkapi/lifecycle.py): each of its buffers is reset when something looks at it
    hooks.recorder.reset_later(lambda handle: commands.pool_reset(state.owner_of(handle), state.address(handle)))
    track_device_queues(hooks, commands.track_queue)


def _draws(tracker: CommandBufferTracker) -> int:
    """Draws a secondary records inside the render pass it continues."""
    return tracker.continued_draws

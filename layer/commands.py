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
from tessera.vkapi.vkconst import vk

from .descriptions import send_pending
from .state import LayerState
from .trackers import CommandBufferTracker, QueueTracker



def register(hooks, state: LayerState, ffi, release_captures) -> None:
    """`release_captures(dev, tracker)` frees a buffer's indirect-capture regions (indirect.py)."""

    def added(dev, handle, address: int, level: int, pool: int) -> None:
        dev.command_buffers[address] = CommandBufferTracker(handle, address, level, pool)
        if dev.recording_table is None:   # the driver's functions, and its label commands for t<tag>
            dev.recording_table = hooks.recorder.device_table(dev.next, label_source=dev.next)
        hooks.recorder.register(handle, dev.recording_table)

    def pull() -> None:
        """Submits made in C are reported before their buffers or queues change (queues.py)."""
        state.session.pull_submits()

    def gone(dev, address: int) -> None:
        pull()
        tracker = dev.command_buffers.pop(address, None)
        if tracker is not None:
            send_pending(state, dev, tracker)   # a recording never ended keeps its descriptions
            hooks.recorder.unregister(tracker.handle)
            release_captures(dev, tracker)

    def reset(dev, tracker: CommandBufferTracker) -> None:
        pull()
        release_captures(dev, tracker)
        send_pending(state, dev, tracker)
        tracker.reset()
        hooks.recorder.reset(tracker.handle)   # and the C side's records and submit count

    def pool_reset(dev, address: int) -> None:
        if address in dev.command_buffers:
            reset(dev, dev.command_buffers[address])

    track_command_buffers(hooks, ffi, lambda dev: dev.pools, added, gone, pool_reset)

    @hooks.before("vkBeginCommandBuffer")
    def before_begin(dev, commandBuffer, pBeginInfo):
        tracker = state.command_buffer(dev, commandBuffer)
        reset(dev, tracker)   # spec 6.4: begin implicitly resets
        tracker.one_time = bool(pBeginInfo.flags & vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)

    @hooks.after("vkResetCommandBuffer")
    def after_reset(dev, result, commandBuffer, flags):
        reset(dev, state.command_buffer(dev, commandBuffer))

    # vkEndCommandBuffer: a render pass still suspended is finished by render_passes.py.

    def track_queue(dev, handle, family: int, index: int) -> None:
        address = state.address(handle)
        if handle != ffi.NULL and address not in dev.queues:
            dev.queues[address] = QueueTracker(handle, f"queue {family}.{index}")

    track_device_queues(hooks, track_queue)

    # ---- application labels: recorded, not passed down --------------------
    def label_begin(t: CommandBufferTracker, name: str) -> None:
        t.ops.append(("label_begin", name))
        t.labels.append(name)

    def label_end(t: CommandBufferTracker, name: None = None) -> None:
        t.ops.append(("label_end", None))
        if t.labels:
            t.labels.pop()
        else:
            t.pops_below_start += 1   # closes a label opened in an earlier command buffer

    def label_insert(t: CommandBufferTracker, name: str) -> None:
        t.ops.append(("label_insert", name))

    # Recorded in C (intercepts.APP_LABEL, APP_MARKER, APP_LABEL_END): applied later, in order, with
    # the text copied; the hooks below serve command buffers the C side does not know.
    def applier(op):
        def apply(dev, commandBuffer, name: str | None = None) -> None:
            op(state.command_buffer(dev, commandBuffer), name)
        return apply

    def hook(op, text=None):
        def replacement(commandBuffer, *info) -> None:
            t = state.command_buffer(state.owner_of(commandBuffer), commandBuffer)
            op(t, structs.string(ffi, getattr(info[0], text)) if text else None)
        return replacement

    for name, op, text in (("vkCmdBeginDebugUtilsLabelEXT", label_begin, "pLabelName"),
                           ("vkCmdEndDebugUtilsLabelEXT", label_end, None),
                           ("vkCmdInsertDebugUtilsLabelEXT", label_insert, "pLabelName"),
                           ("vkCmdDebugMarkerBeginEXT", label_begin, "pMarkerName"),
                           ("vkCmdDebugMarkerEndEXT", label_end, None),
                           ("vkCmdDebugMarkerInsertEXT", label_insert, "pMarkerName")):
        hooks.applies(name)(applier(op))
        hooks.replace(name)(hook(op, text))

    def queue_of(queue) -> QueueTracker:
        return state.owner_of(queue).queues[state.address(queue)]

    @hooks.replace("vkQueueBeginDebugUtilsLabelEXT")
    def queue_begin_label(queue, pLabelInfo):
        pull()
        q = queue_of(queue)
        q.labels.append(structs.string(ffi, pLabelInfo.pLabelName))
        state.session.note_queue(q)

    @hooks.replace("vkQueueEndDebugUtilsLabelEXT")
    def queue_end_label(queue):
        pull()
        q = queue_of(queue)
        if q.labels:   # a pop without a push is tolerated
            q.labels.pop()
        state.session.note_queue(q)

    @hooks.replace("vkQueueInsertDebugUtilsLabelEXT")
    def queue_insert_label(queue, pLabelInfo):
        queue_of(queue)

    @hooks.before("vkCmdExecuteCommands")
    def before_execute(dev, commandBuffer, count, pCommandBuffers):
        t = state.command_buffer(dev, commandBuffer)
        secondaries = [state.command_buffer(dev, pCommandBuffers[i]) for i in range(count)]
        t.ops.append(("execute", secondaries))
        if t.part is not None:   # draws recorded in secondaries continue this render pass
            t.part.draws += sum(_draws(s) for s in secondaries)


def _draws(tracker: CommandBufferTracker) -> int:
    """Draws a secondary records inside the render pass it continues."""
    return tracker.continued_draws

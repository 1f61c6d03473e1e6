"""WORKLOAD descriptions, batched per command buffer (schemas/workloads.py).

Every tagged workload is described once, with what is known when it is recorded. Instead of a
frame per workload (and a wake-up of the sender each), a command buffer's descriptions wait
on its tracker and go as one WORKLOADS frame when its recording ends, before it is reset or
freed, or every `BATCH` workloads (so a frame, and what waits, stays bounded). Recording ends
on the recorder's worker (vkapi/dispatch.py) or, for a short recording, on the application's
thread; either way the batch is only queued (`send_soon`: the sender takes it at its next
round, without a wake-up per command buffer) and encoded on the sender thread. A submit in
Python waits for the worker first, so a command buffer's WORKLOADS frame precedes the SUBMIT
frames naming it in the queue.
"""
from __future__ import annotations

from tessera.schemas.workloads import BATCH

from . import encoder
from .descriptors import BIND_POINT_OF_KIND, resources
from .trackers import CommandBufferTracker, Workload


def describe(state, dev, t: CommandBufferTracker, w: Workload, kind: str, meta: dict, annex: bool) -> None:
    """Describe `w` (recorded into `t`): its `kind` and WORKLOAD fields `meta` (schemas/json/
    workload.schema.json); `annex`: parts of it come per submit (ANNEX). Under --content a dispatch or
    trace rays also names the images its bound descriptor sets hold (descriptors.py)."""
    if kind in BIND_POINT_OF_KIND and getattr(state, "track_descriptors", False):
        read = resources(t.descriptors, BIND_POINT_OF_KIND[kind])
        if read is not None:
            meta["resources"] = {**meta.get("resources", {}), **read}
    t.described.append((w, kind, meta, annex))
    if len(t.described) >= BATCH:
        send_pending(state, dev, t)


def send_pending(state, dev, t: CommandBufferTracker) -> None:
    """Queue the descriptions `t` holds as one frame (the list is handed over, not copied)."""
    if t.described:
        batch, t.described = t.described, []
        state.session.transport.send_soon(encoder.workloads, dev.address, t.address, batch)


class Descriptions:
    """A command buffer's WORKLOAD descriptions, sent when its recording ends."""

    def __init__(self, state) -> None:
        self.state = state

    def after_vkEndCommandBuffer(self, dev, result, commandBuffer):
        """Runs after the other end hooks (a pass suspended at the end is described by then)."""
        send_pending(self.state, dev, self.state.command_buffer(dev, commandBuffer))


def register(hooks, state) -> None:
    hooks.bind(Descriptions(state))

"""Submits and frames: submitIDs, annexes, `s<submitID>` wrapping, frame boundaries.

At each vkQueueSubmit/vkQueueSubmit2 the layer walks the submitted command
buffers in order (secondaries expanded) against the queue's application
label stack and any render pass still suspended on that queue, and works
out what is known only now: each workload's full label stack (when it
differs from what its WORKLOAD message said), the draw count of render
passes split across command buffers, and which workloads carry indirect
captures. If anything needs an ANNEX, or a command buffer is submitted again
(its tags repeat), the submit is wrapped in an `s<submitID>` queue label, so
the driver's events carry `s<submitID> / … / t<tagID>` and `submitID.tagID`
names one running workload. Frames end at vkQueuePresentKHR or at a
VkFrameBoundaryEXT (VK_EXT_frame_boundary, emulated by the layer when the
driver lacks it) in a submit or present.

Most submits never reach Python when they are made: a command buffer whose
submits need nothing of the queue's state (`reported_from_c`: its labels
balance, no split pass, no capture; decided once, at vkEndCommandBuffer) is submitted by
the shim's C path (vkapi/submits.py), which numbers the submit and wraps it
when the buffer was submitted before or the queue is inside the application's
queue labels (which the C path records in the same ledger, in order), as the
Python path does, while no queue has a suspended pass or labels the C path
does not know of open (`python_submits`). `pull` reports those submits and
labels, in order, before anything they depend on changes (Python submits,
resets, frames, waits, flushes) and from the transport's sender when it is
idle.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from tessera.schemas.labels import submit_label
from tessera.vkapi import structs, submits
from tessera.vkapi.ops import Execute, LabelBegin, LabelEnd, LabelInsert, OpWalker, PassBegin, PassEnd
from tessera.vkapi.vkconst import vk

from . import encoder
from .forwarding import forwarding
from .trackers import (Capture, CommandBufferTracker, OpenPass, QueueTracker, Workload, executed,
                       walked_workloads)
from .transport import HAND_OVER_S



@dataclass
class Plan:
    submit_id: int
    trackers: list[CommandBufferTracker] = field(default_factory=list)   # every buffer run, secondaries too
    primaries: list[CommandBufferTracker] = field(default_factory=list)
    tags: list[int] = field(default_factory=list)
    annexes: dict[int, dict] = field(default_factory=dict)                # tag -> fields
    captures: list[tuple[int, Capture]] = field(default_factory=list)
    reused: bool = False
    # VkFrameBoundaryEXT: frame ids, or (frame id, its pImages) (frame_boundaries)
    frame_ends: list[int | tuple[int, tuple[int, ...]]] = field(default_factory=list)

    @property
    def wrap(self) -> bool:
        return bool(self.annexes or self.captures or self.reused)


def plan_submit(submit_id: int, queue: QueueTracker, batches: list[list[CommandBufferTracker]]) -> Plan:
    if not queue.labels and queue.open_pass is None:
        plan = _plain_plan(submit_id, batches)
        if plan is not None:
            return plan
    plan = Plan(submit_id)
    # the queue's application label stack and suspended pass: updated as buffers run
    planner = _Planner(plan, queue.labels, queue.open_pass)
    try:
        for batch in batches:
            for t in batch:
                t.submits += 1
                plan.reused |= t.submits > 1
                plan.primaries.append(t)
                planner.walk(t)
    finally:
        queue.open_pass = planner.suspended
    return plan


def _plain_plan(submit_id: int, batches: list[list[CommandBufferTracker]]) -> Plan | None:
    """What the walk plans, without walking, for a submit of buffers that each plan to their tags alone
    (`plain_tags`) on a queue with no labels and no pass open: their tags in order, nothing else. None
    when a buffer does not."""
    for batch in batches:
        for t in batch:
            if t.plain_tags is None:
                t.plain_tags = plain_tags(t)
            if t.plain_tags is False:
                return None
    plan = Plan(submit_id)
    for batch in batches:
        for t in batch:
            t.submits += 1
            plan.reused |= t.submits > 1
            plan.primaries.append(t)
            plan.trackers.append(t)
            plan.trackers += executed(t.ops)
            plan.tags += t.plain_tags
    return plan


def plain_tags(t: CommandBufferTracker) -> list[int] | bool:
    """The tags a submit of `t` plans to when it plans to nothing else (reported_from_c: no ANNEX, no
    capture, no change to the queue's labels or open pass), in the walk's order; False otherwise."""
    if not reported_from_c(t):
        return False
    return [w.tag for w in walked_workloads(t.ops)]   # every pass part holds a workload (reported_from_c)


class _Planner(OpWalker):
    """What a submit's walk (vkapi/ops.py's walker: labels, passes suspended and resumed, secondaries)
    means to the layer: each workload's tag, the ANNEX of what its WORKLOAD message could not know
    (labels, a split pass's draws), its captures."""

    def __init__(self, plan: Plan, labels: list[str], suspended: OpenPass | None) -> None:
        super().__init__(labels, suspended)
        self.plan = plan

    def entered(self, t: CommandBufferTracker) -> None:
        self.plan.trackers.append(t)

    def other(self, w: Workload, kind: type, t: CommandBufferTracker) -> None:   # the only other op: Workload
        plan, stack = self.plan, self.labels
        if w.capture is not None:
            plan.tags.append(w.capture.tag)   # the capture copy runs just before the workload
        if list(w.local_labels) != stack or w.pops_below_start:
            plan.annexes.setdefault(w.tag, {})["labels"] = list(stack)
        plan.tags.append(w.tag)
        if w.capture is not None:
            plan.captures.append((w.tag, w.capture))

    def opened(self, op: PassBegin, t: CommandBufferTracker) -> OpenPass | None:
        part = op.info
        if part.workload is None:                         # resumes, with no pass suspended on this queue:
            return None                                   # invalid usage; nothing to join
        self.plan.tags.append(part.workload.tag)
        return OpenPass(part.workload, list(self.labels), part.draws, captures=list(part.captures))

    def resumed(self, opened: OpenPass, op: PassBegin) -> None:
        part = op.info
        opened.draws += part.draws
        opened.parts += 1
        opened.captures += part.captures

    def closed(self, opened: OpenPass) -> None:
        plan, w = self.plan, opened.workload
        fields = {}
        if opened.labels != list(w.local_labels) or w.pops_below_start:
            fields["labels"] = opened.labels
        if opened.parts > 1:
            fields["draw_call_count"] = opened.draws
            fields["parts"] = opened.parts
        if fields:
            plan.annexes.setdefault(w.tag, {}).update(fields)
        plan.captures += [(w.tag, c) for c in opened.captures]
        plan.tags += [c.tag for c in opened.captures]   # copies recorded after the pass ended


def reported_from_c(t: CommandBufferTracker) -> bool:
    """Whether a submit of this buffer, with no queue labels and no pass open on its queue, plans to
    its tags alone: no ANNEX, no capture, nothing that changes the queue's state. Its labels (applied
    so far) balance and close none opened before it, so each workload's label stack at submit is the
    one it was described with (its local labels)."""
    depth = 0
    for op in t.ops:
        kind = type(op)
        if kind is Workload:
            if op.capture is not None:
                return False
        elif kind is PassBegin:
            part = op.info
            if part.workload is None or part.suspends or part.captures:
                return False
        elif kind is LabelBegin:
            depth += 1
        elif kind is LabelEnd:
            depth -= 1
            if depth < 0:
                return False
        elif kind is Execute:   # their workloads' labels are the walk's when none of this buffer's is open
            if depth != 0 or not all(reported_from_c(s) for s in op.secondaries):
                return False
        elif kind is not PassEnd and kind is not LabelInsert:
            return False
    return depth == 0


def _monotonic_raw_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)


class QueueReporter:
    """The queues' state across submits, and what the layer reports of them: submits planned,
    wrapped and sent (SUBMIT, ANNEX), submits made in C pulled from the ledger, frames (FRAME).

    Free of Vulkan structures: queues and command buffers come as their trackers or addresses,
    frame boundaries as frame ids; handles are passed through to the collaborators untouched.
    Collaborators: `session` (state.Session: submit numbers, the frame), `send` (the transport's
    send), `queue_at(address) -> (device, queue handle)` (the owner of a queue the C path
    reported), `labeller` (queue_push/queue_pop of s<submitID>), `capturer` (indirect.Capturer:
    before_submit, after_submit, poll), `errors` (HookErrors), `instrumenter` (readers; None
    without --instrument/--regions), `ledger` (vkapi.submits.SubmitLedger; None: no C submit
    path), `recorder` (the shim's Recorder: wait, count_submit, set_submit_ok; entry.py makes it
    before any module registers), `c_submits` (False: every submit takes the Python path), `clock`
    (host time, ns)."""

    def __init__(self, session, send, queue_at, labeller, capturer, errors, instrumenter=None, ledger=None,
                 recorder=None, c_submits: bool = True, clock=_monotonic_raw_ns) -> None:
        self.session = session
        self.send = send
        self.queue_at = queue_at
        self.labeller = labeller
        self.capturer = capturer
        self.errors = errors
        self.instrumenter = instrumenter
        self.ledger = ledger
        self.recorder = recorder
        self.c_submits = c_submits
        self.clock = clock
        self.order = threading.Lock()   # reporting submits made in C, and planning one in Python: one at a time
        self._pulling = submits.ReadingLedger()
        self.reported = None   # reported_submits.ReportedSubmits: C reports submits like those read here (entry.py)

    # ---- submits made in C ------------------------------------------------------------------
    def pull(self) -> None:
        """Report the submits made in C so far, in order (a thread reporting them already does not)."""
        pulling = self._pulling
        if self.ledger is None or pulling.on:
            return
        with self.order:
            pulling.on = True
            try:
                self._pull()
            finally:
                pulling.on = False

    def _pull(self) -> None:
        taken = self.ledger.take()
        if not taken:
            return
        for s in taken:
            try:
                dev, queue = self.queue_at(s.queue)
                q = dev.queues[s.queue]
                if type(s) is submits.QueueLabel:   # the application's, which the layer consumes
                    if s.name is not None:
                        q.labels.append(s.name)
                        q.ledger_labels += 1
                    else:   # a pop without a push is tolerated
                        if q.labels:
                            q.labels.pop()
                        q.ledger_labels -= q.ledger_labels > 0
                    self.note_queue(q)
                    continue
                plan = self._read_without_hooks(dev, q, s)
                if plan is None:
                    for cbs, _, _ in s.batches:   # their recordings, applied by the recorder's worker or begun in C
                        for address in cbs:
                            self.recorder.wait(address, reading=True)
                    batches = [[dev.command_buffers[a] for a in cbs] for cbs, _, _ in s.batches]
                    plan = plan_submit(s.submit_id, q, batches)
                    if self.reported is not None and s.serials:   # its buffers as they are, submitted again
                        self.reported.attach_recordings(plan, s.serials)
                self.report(dev, q, queue, plan, s.wrapped, s.called_ns, s.returned_ns - s.called_ns, s.frame)
            except Exception:
                self.errors.report("vkQueueSubmit", "reporting a submit made in C")
        self.ledger.read()

    def _read_without_hooks(self, dev, q: QueueTracker, s) -> Plan | None:
        """The plan of a submit made in C whose every buffer holds a recording begun and ended in C that equals a
        kept one planning to its tags alone (layer/replay.py `plain`), on a queue with no pass open: made from
        those products, the recordings' hooks not run (vkapi/lifecycle.py); the WORKLOADS of each recording read
        for the first time sent first, as its end hook would have. Inside the queue's labels, each workload's
        ANNEX says its label stack then, as the walk's (_Planner): the queue's labels, then its own (the C path
        wrapped the submit). None: run the hooks and plan."""
        if q.open_pass is not None:
            return None
        recorder = self.recorder
        batches = s.batches
        addresses = batches[0][0] if len(batches) == 1 else [a for cbs, _, _ in batches for a in cbs]
        reads = recorder.reading_all(dev, addresses)
        for read in reads:
            if read is None or read.product.plain is None:
                return None
        # the secondaries the products execute: their recordings, read so too, describe their workloads (those whose
        # hooks ran described them then)
        secondaries = [a for read in reads for a in read.product.executes]
        if secondaries:
            secondaries = recorder.ended_in_c(secondaries)
        secondary_reads = recorder.reading_all(dev, secondaries) if secondaries else []
        if None in secondary_reads:
            return None
        plan = Plan(s.submit_id)
        command_buffers, tags = dev.command_buffers, plan.tags
        described = []
        reported = self.reported
        for address, read, first in zip(secondaries, secondary_reads, recorder.read_all(secondaries, secondary_reads)):
            if first and read.product.described_rows:
                described.append((address, read.product.described_rows, read.tags))
            if reported is not None:   # C describes it with a primary's submit (reported_submits.c)
                reported.attach(dev.address, address, read)
        for address, read, first in zip(addresses, reads, recorder.read_all(addresses, reads)):
            product = read.product
            if first and product.described_rows:
                described.append((address, product.described_rows, read.tags))
            if reported is not None:
                reported.attach(dev.address, address, read)
            plan.primaries.append(command_buffers[address])
            tags += map(read.tags.__getitem__, product.plain)
            if q.labels:
                for k, local in zip(product.plain, product.plain_labels):
                    plan.annexes[read.tags[k]] = {"labels": [*q.labels, *local]}
        if described:
            self.send(encoder.workloads_again, dev.address, described)
        return plan

    def note_queue(self, q: QueueTracker) -> None:
        """Submits take the Python path while a queue has a suspended pass open, or labels the C path does not know
        of: opened by a command buffer's walk, or by the labels' Python hooks (TESSERA_C_SUBMITS=0). Inside the
        labels its ledger recorded, the C path wraps each submit itself (its ANNEX: _read_without_hooks)."""
        known = q.ledger_labels if self.ledger is not None and self.c_submits else 0
        busy = q.open_pass is not None or len(q.labels) > known
        if self.ledger is not None and busy != q.python_submits:
            q.python_submits = busy
            self.ledger.python_reason(busy)

    def end_recording(self, dev, address: int, handle) -> None:
        """At vkEndCommandBuffer, on the application's thread, before the worker applies the
        recording: whether the C path may submit the buffer, as far as what was applied so far says.
        The commands still to apply were recorded in C: workloads, whole passes and application labels,
        whose balance C checks itself (Recorded.label_depth)."""
        if self.ledger is not None and self.c_submits:
            t = dev.command_buffers[address]
            # A secondary's: whether a primary executing it may (runtime/lifecycle.c tessera_execute_in_c). A
            # vkCmdExecuteCommands that took its hook holds the secondaries' trackers, which a later recording
            # of theirs changes before the ledger is read: such a primary submits in Python, its walk at once.
            self.recorder.set_submit_ok(handle, self.instrumenter is None and t.part is None and reported_from_c(t)
                                        and not executed(t.ops))

    # ---- submits made in Python -------------------------------------------------------------
    def submit(self, dev, q: QueueTracker, queue, called_ns: int, batches_of, frame_ends, forward):
        """Plan (guarded), wrap, forward, then report; the forward always happens exactly once.
        `batches_of()`: the command-buffer addresses of each batch; `frame_ends()`: the frame ids
        of the submit's VkFrameBoundaryEXT; `forward()`: the call down, returning its VkResult."""
        session, ledger = self.session, self.ledger
        plan = None
        try:
            with self.order:
                if ledger is not None:
                    self._pull()
                    ledger.made_in_python += 1
                batches = [[dev.command_buffers[a] for a in addresses] for addresses in batches_of()]
                plan = plan_submit(session.next_submit(), q, batches)
                self.note_queue(q)
            if ledger is not None:
                for t in plan.primaries:   # the C path's count of earlier submits, for its reuse test
                    self.recorder.count_submit(t.handle)
            plan.frame_ends = frame_ends()
            self.capturer.before_submit(dev, plan.trackers)
        except Exception:
            self.errors.report("vkQueueSubmit", "planning the submit; forwarded without metadata")
        wrapped = False
        if plan is not None and plan.wrap:
            try:
                wrapped = self.labeller.queue_push(dev, queue, submit_label(plan.submit_id))
            except Exception:
                self.errors.report("vkQueueSubmit", "wrapping in s<submitID>; forwarded unwrapped")
        result = forward()
        returned_ns = self.clock()
        if wrapped:
            self.labeller.queue_pop(dev, queue)
        if plan is not None and result == vk.VK_SUCCESS:
            try:
                self.report(dev, q, queue, plan, wrapped, called_ns, returned_ns - called_ns, session.frame)
            except Exception:
                self.errors.report("vkQueueSubmit", "sending the submit's metadata")
        return result

    def report(self, dev, q: QueueTracker, queue, plan: Plan, wrapped: bool, time_ns: int, duration_ns: int,
               frame: int) -> None:
        send = self.send
        send(encoder.submit, plan.submit_id, dev.address, q.name, [t.address for t in plan.primaries], plan.tags,
             frame, wrapped, time_ns, duration_ns)
        if plan.annexes:
            send(encoder.annexes, plan.submit_id, plan.annexes)
        readers = self.instrumenter.readers(dev, plan.submit_id, plan.trackers) if self.instrumenter else []
        if plan.captures or readers:
            self.capturer.after_submit(dev, queue, plan.submit_id, plan.captures, plan.trackers, readers)
        for end in plan.frame_ends:
            frame_id, images = _frame_end(end)
            self.end_frame(dev, q, "frame_boundary", frame_id, images)

    # ---- frames and waits -------------------------------------------------------------------
    def end_frame(self, dev, q: QueueTracker, source: str, frame_id: int | None = None,
                  images: tuple[int, ...] | None = None) -> None:
        """`images`: what a present showed (the FRAME's `images`)."""
        if self.reported is not None:
            self.reported.revoke()   # the frames C counted first (its presents)
        session = self.session
        number = frame_id if frame_id is not None else session.frame
        self.send(encoder.frame, number, dev.address, q.name, source, encoder.now_ns(), images)
        session.frame = max(session.frame, number) + 1

    def present(self, dev, address: int, frame_ends, images=lambda: None) -> None:
        """After vkQueuePresentKHR on the queue at `address`; `frame_ends()`: the frame ids of the
        present's VkFrameBoundaryEXT (the first one names the frame); `images()`: the swapchain
        images it showed (presented_images)."""
        self.pull()   # the frame's submits made in C, before the frame ends
        q = dev.queues.get(address)
        if q is None:
            return
        ends = frame_ends()
        frame_id, boundary_images = _frame_end(ends[0]) if ends else (None, None)
        try:
            shown = images()
        except Exception:   # the frame still ends, naming no image
            self.errors.report("vkQueuePresentKHR", "naming the presented images; the frame names none")
            shown = None
        if boundary_images:   # the present's VkFrameBoundaryEXT names more of the frame's output
            shown = (*(shown or ()), *boundary_images)
        self.end_frame(dev, q, "present", frame_id, shown)
        self.capturer.poll(dev)

    def waited(self, dev) -> bool:
        """After a wait (queue, device, fences): report what C submitted, read back captures.
        True when captures were read back (their frames sent)."""
        self.pull()
        return bool(self.capturer.poll(dev))


def presented_images(ffi, swapchains: dict[int, tuple[int, ...]], info) -> tuple[int, ...]:
    """The VkImage each swapchain of a VkPresentInfoKHR shows (pImageIndices into the images
    vkGetSwapchainImagesKHR returned), 0 for a swapchain or index the layer does not know."""
    out = []
    for i in range(info.swapchainCount):
        images = swapchains.get(int(ffi.cast("uint64_t", info.pSwapchains[i])), ())
        index = info.pImageIndices[i]
        out.append(images[index] if index < len(images) else 0)
    return tuple(out)


def _frame_end(end: int | tuple[int, tuple[int, ...]]) -> tuple[int, tuple[int, ...] | None]:
    """(frame id, the images the frame boundary names, None when it names none) of a frame end."""
    if isinstance(end, tuple):
        return end[0], end[1] or None
    return end, None


def frame_boundaries(ffi, pnext) -> list[tuple[int, tuple[int, ...]]]:
    """(frame id, its pImages: the images that are the frame's output) of a VkFrameBoundaryEXT ending a
    frame in the chain `pnext`, as a list."""
    fb = structs.find(ffi, pnext, vk.VK_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT, "VkFrameBoundaryEXT *")
    if fb is None or not fb.flags & vk.VK_FRAME_BOUNDARY_FRAME_END_BIT_EXT:
        return []
    images = tuple(int(ffi.cast("uint64_t", fb.pImages[i])) for i in range(fb.imageCount)) if fb.pImages else ()
    return [(fb.frameID, images)]


def for_driver(ffi, errors, dev, ctype: str, count: int, pSubmits, keep: list):
    """The submits as the driver may see them: without VkFrameBoundaryEXT when the layer emulates
    VK_EXT_frame_boundary (the driver never enabled it; an unknown struct is invalid usage)."""
    try:
        return _without_frame_boundary(ffi, dev, ctype, count, pSubmits, keep)
    except Exception:   # forwarded as the application wrote it
        errors.report("vkQueueSubmit", "removing VkFrameBoundaryEXT; forwarded unchanged")
        return pSubmits


def _without_frame_boundary(ffi, dev, ctype: str, count: int, pSubmits, keep: list):
    if "VK_EXT_frame_boundary" not in dev.emulated_extensions or not any(
            n.sType == vk.VK_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT
            for i in range(count) for n in structs.chain(ffi, pSubmits[i].pNext)):
        return pSubmits
    copies = ffi.new(f"{ctype}[]", count)
    keep.append(copies)
    ffi.memmove(copies, pSubmits, ffi.sizeof(ctype) * count)
    for i in range(count):
        nodes = [n for n in structs.chain(ffi, pSubmits[i].pNext)
                 if n.sType != vk.VK_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT]
        copies[i].pNext = structs.rebuild_chain(ffi, nodes, keep)
    return copies


class Queues:
    """The submit, present and wait hooks: one method per command (HookSet.bind). They read the
    Vulkan structures and hand plain values to a QueueReporter (`reporter`, Vulkan-free), which keeps
    the queues' state across submits. vkQueueSubmit/2 call down themselves: their methods
    (`forwarding_vk…`) are registered by `register` with forwarding.py, not bound."""

    def __init__(self, state, ffi, reporter: QueueReporter, errors) -> None:
        self.state = state
        self.ffi = ffi
        self.errors = errors
        self.session = state.session
        self.reporter = reporter
        self.writing = threading.local()   # per thread: the hand-over to the kernel a wait started

    def at_record_vkEndCommandBuffer(self, dev, commandBuffer):
        self.reporter.end_recording(dev, self.state.address(commandBuffer), commandBuffer)

    def _submit(self, call_down, queue, name: str, ctype: str, count: int, pSubmits, fence):
        """`call_down`: the next element's function (forwarding.CallDown: an exception here before it
        is called still forwards the submit, after it returns its result)."""
        ffi, address = self.ffi, self.state.address
        called_ns = self.reporter.clock()   # the submit's host time: when it was called
        dev = self.state.owner_of(queue)
        q = dev.queues[address(queue)]
        keep: list = []
        return self.reporter.submit(
            dev, q, queue, called_ns,
            lambda: [[address(h) for h in buffers] for buffers in submits.batch_buffers(name, count, pSubmits)],
            lambda: [f for i in range(count) for f in frame_boundaries(ffi, pSubmits[i].pNext)],
            lambda: call_down(queue, count, for_driver(ffi, self.errors, dev, ctype, count, pSubmits, keep), fence))

    def forwarding_vkQueueSubmit(self, call_down, queue, count, pSubmits, fence):
        return self._submit(call_down, queue, "vkQueueSubmit", "VkSubmitInfo", count, pSubmits, fence)

    def forwarding_vkQueueSubmit2(self, call_down, queue, count, pSubmits, fence):
        return self._submit(call_down, queue, "vkQueueSubmit2", "VkSubmitInfo2", count, pSubmits, fence)

    def after_vkQueuePresentKHR(self, dev, result, queue, pPresentInfo):
        ffi = self.ffi
        self.reporter.present(dev, self.state.address(queue), lambda: frame_boundaries(ffi, pPresentInfo.pNext),
                              lambda: presented_images(ffi, dev.swapchains, pPresentInfo))

    # Swapchain images (cold: once per swapchain), so a present names the images it shows.
    def after_vkGetSwapchainImagesKHR(self, dev, result, device, swapchain, pCount, pImages):
        if pImages != self.ffi.NULL and result in (vk.VK_SUCCESS, vk.VK_INCOMPLETE):
            cast = self.ffi.cast
            images = dev.swapchains[int(cast("uint64_t", swapchain))] = tuple(
                int(cast("uint64_t", pImages[i])) for i in range(pCount[0]))
            self._swapchain_images(int(cast("uint64_t", swapchain)), images)

    def before_vkDestroySwapchainKHR(self, dev, device, swapchain, pAllocator):
        dev.swapchains.pop(int(self.ffi.cast("uint64_t", swapchain)), None)
        self._swapchain_images(int(self.ffi.cast("uint64_t", swapchain)), ())

    def _swapchain_images(self, swapchain: int, images: tuple[int, ...]) -> None:
        """What a present the shim's C reports shows (reported_submits.py), when it reports them."""
        reported = self.reporter.reported if self.reporter is not None else None
        if reported is not None:
            reported.swapchain_images(swapchain, images)

    # The application observes completion: what it knows has run keeps its metadata, whatever it does
    # next (transport.hand_to_kernel). The sender writes the frames while the driver waits; after the
    # wait the hook only waits for that, unless the wait read captures back (more frames).
    def _waiting(self) -> None:
        self.writing.done = self.session.transport.hand_to_kernel()

    def _waited(self, dev) -> None:
        read_back = self.reporter.waited(dev)
        done, self.writing.done = getattr(self.writing, "done", None), None
        if read_back or done is None:
            done = self.session.transport.hand_to_kernel()
        if done.wait(HAND_OVER_S) and self.reporter.reported is not None:
            self.reporter.reported.grant()   # until something else is sent, C reports submits like these

    def before_vkQueueWaitIdle(self, dev, queue):
        self._waiting()

    def after_vkQueueWaitIdle(self, dev, result, queue):
        self._waited(dev)

    def before_vkDeviceWaitIdle(self, dev, device):
        self._waiting()

    def after_vkDeviceWaitIdle(self, dev, result, device):
        self._waited(dev)

    def before_vkWaitForFences(self, dev, device, fenceCount, pFences, waitAll, timeout):
        self._waiting()

    def after_vkWaitForFences(self, dev, result, device, fenceCount, pFences, waitAll, timeout):
        self._waited(dev)

    def before_vkWaitSemaphores(self, dev, device, pWaitInfo, timeout):
        self._waiting()

    def after_vkWaitSemaphores(self, dev, result, device, pWaitInfo, timeout):
        self._waited(dev)

    # A poll observes completion too (a program may poll its fence, then _exit).
    def after_vkGetFenceStatus(self, dev, result, device, fence):
        if result == vk.VK_SUCCESS:
            self._waited(dev)

    def after_vkGetSemaphoreCounterValue(self, dev, result, device, semaphore, pValue):
        if result == vk.VK_SUCCESS:
            self._waited(dev)


def queue_owner(state, ffi):
    """`queue_at(queue_address)` for a QueueReporter: the owner of the queue at that address (a queue
    the C path reported) and its handle."""
    def queue_at(queue_address: int):
        queue = ffi.cast("VkQueue", queue_address)
        return state.owner_of(queue), queue
    return queue_at


def register(hooks, state, ffi, reporter: QueueReporter, errors) -> None:
    """`reporter`: the QueueReporter entry.py made before any registration (the commands' hooks
    use it too)."""
    queues = hooks.bind(Queues(state, ffi, reporter, errors))
    forwarding(hooks, "vkQueueSubmit", lambda queue: state.owner_of(queue).next.vkQueueSubmit)(
        queues.forwarding_vkQueueSubmit)
    forwarding(hooks, "vkQueueSubmit2", lambda queue: state.owner_of(queue).next.vkQueueSubmit2)(
        queues.forwarding_vkQueueSubmit2)


"""Submits placed in C: a re-recording frame loop's submit and wait cost the driver no Python.

The timeline places every submit in a job, in call order (timeline.py). A submit whose every command
buffer holds a recording C ended (vkapi/lifecycle.py) equal to a kept one that the timeline has placed
from a native plan before needs nothing of Python's to be placed again: its events come from that plan
(icd/placement_plans.py), attached to the kept product in C once it was made (`attach`: per command
buffer and GPU), and where they land from a few numbers. So does a buffer submitted again as it is
(a pre-recorded one, as vkcube's): its plan, which holds its labels whole, is attached to that recording
of the buffer (`attach_recording`, by the serial the C path's ledger gives each recording; the next begin
or reset drops it). So while the timeline has no job queued or running, it grants the driver shim's C a
licence (`grant`) with those numbers: each queue's class floors and ends, each emulated GPU's hardware
queues' free times, the submission, event and render-pass-instance counters, the end of each binary
semaphore's last signal and each timeline semaphore's last SIGNALS_KEPT signals' values and times (a submit
starts no earlier than its waits are met, `Timeline._signalled_at`, and signals its own when it ends, as
`Timeline._place_submit`; a timeline wait's value comes from the submit's VkTimelineSemaphoreSubmitInfo or
VkSemaphoreSubmitInfo), and the trace file. The submit's guard
(vkapi/runtime/placed_submits.c) then places such a submit at once, under the ledger lock, and appends
its packets to the trace before the submit returns, through the trace's stage (tessera.schemas.staged: a
shared mapping beside it, written to the trace in 64 KiB writes and at every revoke, adopted after a crash);
the wait guards (vkQueueWaitIdle, vkDeviceWaitIdle, vkWaitForFences, vkWaitSemaphores) forward without
Python while the licence holds, since their hooks would find nothing to place. Any record the C submit
path appends to its ledger ends the licence (a job follows), and before every job the timeline queues
it takes the numbers back (`revoke`), so Python and C never place at once and each sees the other's
events in order.

Taken by the timeline's jobs as before: a submit of more than 16 batches, 64 command buffers or 16 wait or signal
semaphores or naming a buffer twice, with a semaphore when the timeline knows over 256 binary or 64 timeline semaphores,
on a queue with labels open when the licence was granted, or with more than MAX_PENDING_LABELS begun under
it (C keeps those, an application's or the layer's s<submitID> around a buffer submitted again, as the
submits' labels on entry), after a t<tag> queue label, a buffer with no native plan attached for that GPU and
those labels yet, a damaged plan.
A grant that placed nothing before it ended is not repeated for a while (submits.Licence: a frame loop that
never qualifies pays no grant per frame).

TESSERA_C_PLACEMENT=0: no licence is granted (every submit is placed by the timeline's jobs).
TESSERA_C_PLACEMENT=check: C places the submits it can but writes and changes nothing, and the submit takes the
ledger as before; the timeline places it again from the same state and compares its packets with C's, byte
for byte, start times included (`compare`; TESSERA_LOG=info counts them): what a test of two runs cannot
compare, since host times differ between runs.
"""
from __future__ import annotations

import os
import struct

from tessera.schemas.labels import TAG_LABEL
from tessera.vkapi import replay, submits

SWITCH = "TESSERA_C_PLACEMENT"
# runtime/placed_submits.c's state words: a head, then per GPU and per queue (its layout comment)
HEAD, GPU_WORDS, QUEUE_WORDS = 5, 3, 10
MAX_GPUS, MAX_QUEUES = 8, 64
MAX_SEMAPHORES, MAX_TIMELINES = 256, 64   # ... TESSERA_PLACED_SEMAPHORES, TESSERA_PLACED_TIMELINES
MAX_PENDING_LABELS = 4    # ... TESSERA_PENDING_LABELS: queue labels C keeps on one queue
# A timeline semaphore's signals the timeline keeps for the waits that follow (a frame's wait names a recent
# value): ... TESSERA_PLACED_SIGNALS
SIGNALS_KEPT = 64
_TIMELINE_WORDS = MAX_TIMELINES * (2 + 2 * SIGNALS_KEPT)   # (handle, count, (value, time) each): C's room
_STATE_WORDS = 16   # tessera_place_events' state (TESSERA_PLAN_STATE)


class PlacedSubmits:
    """The licence's Python side: one per driver, used by the timeline under its `_order` lock."""

    def __init__(self, ffi, lib, warn) -> None:
        self.ffi, self.lib, self.warn = ffi, lib, warn
        self.enabled = os.environ.get(SWITCH) != "0"
        self.check = os.environ.get(SWITCH) == "check"
        self._expected: dict[int, tuple] = {}   # checking: submission id -> what C made of it (_take_checked)
        self.checked = self.differing = 0
        self._checked_len = ffi.new("size_t *")
        self._semaphores = ffi.new("int64_t[]", 2 * MAX_SEMAPHORES)   # (handle, time) pairs, both ways
        self._timelines = ffi.new("int64_t[]", _TIMELINE_WORDS)   # runtime/placed_submits.c tessera_timelines_read
        self.granted = False     # granted, and not taken back yet (C may have placed since)
        self._exported: list = []   # the EmulatedGpus, then the QueueOrders, in the granted state's order
        self._gpus = 0
        self._layout: struct.Struct | None = None
        self._state = None       # the granted state's words, in C's memory
        self._write_error = ffi.new("int *")
        self._attached: set[tuple] = set()   # (id(plan), gpu id, address[, serial]) attached once
        self.licence = submits.Licence(ffi, lib.tessera_placement_counts, "placed")
        self._staged_fd: int | None = None   # the trace descriptor C's appends are staged for

    def attach(self, plan, gpu_id: int, address: int, kept, shape: int) -> None:
        """After `plan` was placed natively for the buffer at `address` on GPU `gpu_id` (its bytes in
        `plan.native`), from a product C keeps (`kept`, vkapi/replay's entry), after labels of `shape`
        (`entry_shape`): let C place it again (once per plan, GPU and buffer)."""
        data = self._first_attach(plan, (id(plan), gpu_id, address), gpu_id, address)
        if data is not None:
            replay.attach(self.lib, kept, (address, gpu_id | shape << 32), data)

    def attach_recording(self, plan, gpu_id: int, address: int, serial: int, shape: int) -> None:
        """After `plan`, whose events carry their labels whole (no tag slots), was placed natively for the
        recording `serial` of the buffer at `address` (a buffer submitted again as it is) on GPU `gpu_id`, after
        labels of `shape`: let C place that recording again (once per plan, GPU, buffer and recording)."""
        data = self._first_attach(plan, (id(plan), gpu_id, address, serial), gpu_id, address)
        if data is not None:
            self.lib.tessera_cb_attach(self.ffi.cast("void *", address), serial, gpu_id | shape << 32, data,
                                       len(data))

    def _first_attach(self, plan, key: tuple, gpu_id: int, address: int) -> bytes | None:
        """What C keeps of `plan` for the buffer at `address` on GPU `gpu_id` (the most bytes its packets take
        but the slots', its slot tokens, then the plan's bytes: runtime/placed_submits.c), the first time `key`
        asks for it; None after, or when the plan was not placed natively or changes the labels."""
        made = plan.native.get((gpu_id, address))
        if made is None or not plan.keeps_entry or key in self._attached:
            return None
        if len(self._attached) >= 4 * MAX_QUEUES * MAX_GPUS:   # bounded: a later attach finds them attached
            self._attached.clear()
        self._attached.add(key)
        blob, size, fixed, slot_tokens = made
        return struct.pack("<QQ", fixed, slot_tokens) + self.ffi.buffer(blob, size)[:]

    def grant(self, tl) -> None:
        """(the timeline's `_order` held, every job handed over done) Grant the licence with `tl`'s numbers."""
        if self.licence.skip():
            return
        trace = tl._trace
        fd = trace.appending_fd() if trace is not None else None
        gpus = list(tl._gpus.values())   # (gpu id, EmulatedGpu), in gpu id order
        if fd is None or not gpus or len(gpus) > MAX_GPUS:
            return
        if fd != self._staged_fd:   # what C appends to the trace goes through its stage
            self._staged_fd = fd
            if (refused := submits.open_stage(self.lib, fd, trace.path)) is not None:
                self.warn(refused)
        words = [tl._submissions, trace._next_event, tl._render_pass_instances, len(gpus), 0]
        exported = []
        for _, gpu in gpus:
            words += gpu.free_at.values()
            exported.append(gpu)
        cast = self.ffi.cast
        for key, order in tl._orders.items():
            queue = tl._queues.get(key)
            if queue is None or queue.labels or words[4] == MAX_QUEUES:
                continue
            words += (int(cast("uintptr_t", queue.handle)), tl._gpus[id(queue.device.physical)][0],
                      *order.floors.values(), *order.ends.values())
            exported.append(order)
            words[4] += 1
        if self._layout is None or self._layout.size != 8 * len(words):
            self._layout = struct.Struct(f"<{len(words)}q")
            self._state = self.ffi.new("int64_t[]", len(words))
        self._layout.pack_into(self.ffi.buffer(self._state), 0, *words)
        # the binary semaphores' last signals and the timeline semaphores' last signals (all of them, or none: then
        # submits with semaphores take Python)
        binary, timelines = tl._semaphores, tl._timelines
        nsemaphores = len(binary) if len(binary) <= MAX_SEMAPHORES and len(timelines) <= MAX_TIMELINES else -1
        if nsemaphores > 0:
            self._semaphores[0:2 * nsemaphores] = [x for h, t in binary.items() for x in (_signed(h), t)]
        ntimelines = len(timelines) if nsemaphores >= 0 else 0
        timeline_words = [x for h, signals in timelines.items()
                          for x in (_signed(h), len(signals), *(y for v, t in signals for y in (_signed(v), t)))
                          ] if ntimelines else []
        self._timelines[0:len(timeline_words)] = timeline_words
        if self.lib.tessera_placement_grant(fd, self._state, len(words), 1 if self.check else 0, self._semaphores,
                                            nsemaphores, self._timelines, len(timeline_words), ntimelines):
            self.granted, self._exported, self._gpus = True, exported, len(gpus)


    def revoke(self, tl) -> None:
        """(the timeline's `_order` held, before its next job) End the licence; what C placed since is taken
        into `tl`'s numbers."""
        self.granted = False
        placed = self.lib.tessera_placement_revoke(self._state, self._layout.size // 8, self._write_error)
        if self._write_error[0]:
            tl.trace.write_failed(OSError(self._write_error[0], os.strerror(self._write_error[0])))
        self.licence.ended(placed)
        if not placed:
            return
        if self.check:
            self._take_checked()
        state = self._layout.unpack_from(self.ffi.buffer(self._state))
        tl._submissions, tl.trace._next_event, tl._render_pass_instances = state[0], state[1], state[2]
        at = HEAD
        for i, target in enumerate(self._exported):
            if i < self._gpus:
                target.free_at.update(zip(target.free_at, state[at:at + GPU_WORDS]))
                at += GPU_WORDS
            else:
                target.floors.update(zip(target.floors, state[at + 2:at + 6]))
                target.ends.update(zip(target.ends, state[at + 6:at + 10]))
                at += QUEUE_WORDS
        n = self.lib.tessera_placement_semaphores(self._semaphores)
        if n >= 0:   # C kept every binary semaphore's time, and those it signalled
            pairs = self.ffi.unpack(self._semaphores, 2 * n)
            tl._semaphores.clear()
            tl._semaphores.update(zip(map(_unsigned, pairs[0::2]), pairs[1::2]))
        n = self.lib.tessera_placement_timelines(self._timelines, _TIMELINE_WORDS)
        if n >= 0:   # and every timeline semaphore's last signals, with those it signalled
            words, at = self.ffi.unpack(self._timelines, n), 0
            while at < n:
                handle, count = _unsigned(words[at]), words[at + 1]
                pairs = words[at + 2:at + 2 + 2 * count]
                tl._timelines[handle] = list(zip(map(_unsigned, pairs[0::2]), pairs[1::2]))
                at += 2 + 2 * count

    def _take_checked(self) -> None:
        """(checking, after a revoke) What C made of each submit it placed, by submission id: its packets, and the
        state it would have left (runtime/placed_submits.c's `checked` layout)."""
        data = self.lib.tessera_placement_checked(self._checked_len)
        raw = self.ffi.buffer(data, self._checked_len[0])[:] if self._checked_len[0] else b""
        at = 0
        while at + 8 * (3 + _STATE_WORDS) <= len(raw):
            submission, n, *state = struct.unpack_from(f"<{2 + _STATE_WORDS}q", raw, at)
            at += 8 * (2 + _STATE_WORDS)
            (nsignal,) = struct.unpack_from("<q", raw, at)
            pairs = struct.unpack_from(f"<{2 * nsignal}q", raw, at + 8)
            at += 8 + 16 * nsignal
            if len(self._expected) < MAX_QUEUES:   # bounded: one per grant, taken by the next job
                signals = dict(zip(map(_unsigned, pairs[0::2]), pairs[1::2]))
                self._expected[submission] = (raw[at:at + n], state, signals)
            at += n

    def compare(self, tl, queue, gpu, order, packets: bytes) -> None:
        """(checking) The timeline placed its submission `tl._submissions` on `queue` (its EmulatedGpu `gpu`, its
        QueueOrder `order`), writing `packets`: against what C made of it, if C placed it."""
        expected = self._expected.pop(tl._submissions, None)
        if expected is None:
            return
        c_packets, st, signals = expected
        self.checked += 1
        # tessera_place_events' state: [2] submission, [3] next event, [4] passes, [5..7] free times, [8..15]
        # the class floors and ends (`earliest` and `end`, [0] and [1], are the submit's own)
        after = [tl._submissions, tl.trace._next_event, tl._render_pass_instances, *gpu.free_at.values(),
                 *order.floors.values(), *order.ends.values()]
        if (c_packets != packets or after != st[2:] or
                any(_last_signal(tl, s) != t for s, t in signals.items())):
            self.differing += 1

    def check_counts(self) -> str:
        return f"submits placed in C and checked: {self.checked}, differing: {self.differing}"


def _last_signal(tl, semaphore: int) -> int | None:
    """The time of `semaphore`'s last signal on `tl`'s emulated GPU (None: never signalled)."""
    signals = tl._timelines.get(semaphore)
    if signals is None:
        return tl._semaphores.get(semaphore)
    return signals[-1][1] if signals else None


def _signed(handle: int) -> int:
    """A u64 handle as the int64 C keeps it in (the same bits)."""
    return handle - (1 << 64) if handle >= 1 << 63 else handle


def _unsigned(word: int) -> int:
    return word + (1 << 64) if word < 0 else word


def entry_shape(entry: tuple[str, ...]) -> int | None:
    """Which queue labels on entry C places a plan after (a plan's key says which of them are t<tag> labels:
    Plans.of): as many as C keeps while the licence holds (runtime/placed_submits.c tessera_label_in_c: an
    application's, the layer's s<submitID>), none of them a t<tag> label: their count; None for any other."""
    if len(entry) > MAX_PENDING_LABELS or any(TAG_LABEL.match(label) for label in entry):
        return None
    return len(entry)

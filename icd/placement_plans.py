"""Placement plans: a recording's GPU events placed without walking its ops.

Two kinds of recording come back to the timeline unchanged but for a few labels: one the shim made
again from an earlier one (vkapi/replay.py; its op list is an icd/replay.ReplayedOps: that recording's
ops, new t<tag> labels), and one submitted again as it is (a pre-recorded command buffer; the layer
wraps each submit of it in a new s<submitID> queue label). What placing either writes is known ahead
but for where the events land and those labels: each event's phase, args, stage and label stack come
from the ops once, with the labels that change as slots (the queue's labels on entry, then the
recording's tags); each placement runs the scheduler over the plan's steps and patches each event's
start, id, slot labels, submission and render pass instance into its pre-encoded packet
(icd/event_packets.py EventShape), in C where the driver shim is loaded (NativePlacer). The events and
the queue's label stack come out as `_Placer.walk` would leave them (tests/icd/test_native_placement.py
compares the bytes of the walk, the plans in Python and in C; tests/integration/test_replay.py the merged
traces of the same program with reuse off and on).

A plan is made only for what it can place alone: no pass suspended or resumed, no secondaries executing
secondaries, no workload whose facts are read after execution or measured; which of the queue's labels on entry are
t<tag> labels is part of its key. Anything else is walked, and so is an op list placed for the first time.
Bounded (Plans.CACHE). Used by the timeline's one placing thread at a time.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from tessera.schemas.labels import TAG_LABEL, tag_label, tag_labels
from tessera.vkapi.ops import Barrier, Execute, LabelBegin, LabelEnd, PassBegin, PassEnd

from .recording import Draw, Work
from .replay import ProductOps, ReplayedOps
from .scheduler import CLASSES, EmulatedGpu, work_class

if TYPE_CHECKING:
    from .timeline import _Placer, _Template

# A label in a plan's stack: its text, or a slot: the index of its text in each placement's `texts` (the
# queue's labels on entry, then the recording's t<tag> labels when it was made again).
Token = Union[str, int]


@dataclass
class _Event:
    """One event of a plan: its phase's class and template parts, and the label stack it carries."""
    cls: str
    queue: str
    duration_ns: int
    stage: str
    args: bytes
    labels: tuple[Token, ...]
    tag_at: int                      # where in `labels` the innermost t<tag> label is (innermost_tag); -1: none
    render_pass: int | None = None   # a pass's phases: the pass's handle
    follows_binning: bool = False    # a pass's main phase
    command_buffer: int | None = None   # the secondary it was recorded in (None: the recording placed)


@dataclass
class Plan:
    steps: list                       # _Event, or a Barrier's scope (a tuple, or None for a full barrier)
    exit_labels: tuple[Token, ...]    # the queue's label stack after the recording
    keeps_entry: bool                 # ... is the one on entry (every label the recording opens, it closes)
    shapes: dict = field(default_factory=dict)   # (gpu id, command buffer address) -> each event's EventShape
    native: dict = field(default_factory=dict)   # (gpu id, command buffer address) -> its bytes for C, their
                                                 # size and the most bytes its packets take (NativePlacer)

    def labels_after(self, entry: tuple[str, ...], tags) -> tuple[str, ...]:
        """The queue's label stack after a recording with `tags` placed after the labels `entry` (`entry`
        itself when the recording keeps it)."""
        if self.keeps_entry:
            return entry
        texts = [*entry, *tag_labels(tags)]
        return tuple([n if type(n) is str else texts[n] for n in self.exit_labels])

    def place(self, placer: "_Placer", address: int, entry: tuple[str, ...], tags) -> None:
        """Place the plan's events for a recording at `address` with `tags` after the queue's labels `entry`,
        and encode them in Python (what NativePlacer does in C)."""
        names = [*entry, *tag_labels(tags)]   # the slots' texts
        tl, gpu, order = placer.tl, placer.gpu, placer.order
        trace = tl.trace
        shapes = self.shapes.get((placer.gpu_id, address))
        if shapes is None:
            shapes = self.shapes[(placer.gpu_id, address)] = [
                None if type(s) is not _Event else trace.shape(
                    duration_ns=s.duration_ns, queue=s.queue, stage=s.stage, gpu_id=placer.gpu_id,
                    command_buffer=address if s.command_buffer is None else s.command_buffer, args=s.args,
                    render_pass_handle=s.render_pass)
                for s in self.steps]
        free_at, floors, ends = gpu.free_at, order.floors, order.ends
        earliest, submission, end = placer.earliest, tl._submissions, placer.end
        binning_end = 0
        last_tokens, labels = None, b""
        for step, shape in zip(self.steps, shapes):
            if shape is None:
                order.barrier(*step) if step else order.barrier()
                continue
            cls, queue = step.cls, step.queue
            start = max(earliest, floors[cls], free_at[queue])
            instance = None
            if step.render_pass is not None:
                if step.follows_binning:   # a main phase starts after its pass's binning
                    start = max(start, binning_end)
                else:
                    tl._render_pass_instances += 1
                instance = tl._render_pass_instances
            stop = start + step.duration_ns
            if instance is not None and not step.follows_binning:
                binning_end = stop
            free_at[queue] = stop
            if stop > ends[cls]:
                ends[cls] = stop
            if stop > end:
                end = stop
            if step.labels is not last_tokens:   # a pass's two events share theirs
                last_tokens = step.labels
                texts = [n if type(n) is str else names[n] for n in last_tokens]
                labels = trace.label_entries(texts, texts[step.tag_at] if step.tag_at >= 0 else None)
            trace.emit(shape, start, labels, submission, instance)
        placer.end = end


class NativePlacer:
    """Plan.place in C (vkapi/runtime/event_packets.c `tessera_place_all`): the plan as bytes, made once per
    plan and command buffer (`_native_plan`), and per stretch of planned recordings in a batch one call that
    places every event of them and appends their packets. What C refuses (a label stack longer than its
    4 KiB, a damaged plan) Python places. `lib`/`ffi`: the driver shim's."""
    QUEUES = tuple(EmulatedGpu().free_at)

    _STATE = struct.Struct("<16q")   # tessera_place_events' `state`, in its order

    def __init__(self, ffi, lib) -> None:
        self.ffi, self.lib = ffi, lib
        self._state = bytearray(self._STATE.size)
        self._state_c = ffi.from_buffer("int64_t[]", self._state)
        self._placed = ffi.new("size_t *")
        self._out, self._cap = ffi.NULL, 0   # the packets' buffer, as large as the largest stretch's bound
        self._entry_of: tuple[str, ...] | None = None   # the labels on entry encoded last (_entry_bytes)
        self._entry_encoded: tuple[bytes | None, int] = (None, 0)

    def place_all(self, placer: "_Placer", planned: list[tuple[Plan, int, tuple[str, ...], list[int]]]) -> int:
        """Place each (plan, command buffer address, the queue's labels on entry, the recording's tags) of
        `planned`, in order: in C, one call for each stretch C takes, and in Python one that C refuses or
        cannot take (a label longer than a u16 says). Returns how many C placed."""
        in_c = start = 0
        gpu_id, native_plan, ffi = placer.gpu_id, _native_plan, self.ffi
        while start < len(planned):
            blobs, sizes, texts, bound = [], [], [], 0   # tessera_place_all's arguments for the stretch
            entry_of = None
            for plan, address, entry, tags in (planned[start:] if start else planned):
                if entry is not entry_of:
                    entry_bytes, longest = self._entry_bytes(entry)
                    if entry_bytes is None:   # a slot's length is a u16
                        break
                    entry_of = entry
                made = plan.native.get((gpu_id, address))
                if made is None:
                    blob, fixed, slot_tokens = native_plan(plan, placer, address)
                    made = plan.native[(gpu_id, address)] = (ffi.from_buffer("uint8_t[]", blob), len(blob), fixed,
                                                             slot_tokens)
                blobs.append(made[0])
                sizes.append(made[1])
                texts.append(entry_bytes)
                texts.append(_TAG_LAYOUTS[len(tags)].pack(len(tags), *tags))
                # each slot token's text written twice at most (the label stack and the innermost t<tag> label)
                bound += made[2] + 2 * made[3] * longest
            placed = self._call(placer, blobs, sizes, b"".join(texts), bound) if blobs else 0
            in_c += placed
            start += placed
            if start < len(planned):
                plan, address, entry, tags = planned[start]
                plan.place(placer, address, entry, tags)
                start += 1
        return in_c

    def _entry_bytes(self, entry: tuple[str, ...]) -> tuple[bytes | None, int]:
        """The queue's labels on entry as tessera_place_all takes them (a u32 size, then each label's u16
        length and bytes), and the longest slot text it may write; None when a label is too long for a u16.
        The last one is kept: a batch's recordings, and a frame's, mostly find the same labels."""
        if entry == self._entry_of:
            return self._entry_encoded
        encoded = [t.encode() for t in entry]
        longest = max(map(len, encoded), default=0)
        if longest > 0xFFFF:
            return None, 0
        slots = b"".join([len(b).to_bytes(2, "little") + b for b in encoded])
        self._entry_of, self._entry_encoded = entry, (len(slots).to_bytes(4, "little") + slots,
                                                      max(longest, _TAG_LABEL_MAX))
        return self._entry_encoded

    def _call(self, placer: "_Placer", blobs: list, sizes: list[int], texts: bytes, bound: int) -> int:
        """Place a stretch in one call of C (tessera_place_all), as far as it takes it; how many it placed."""
        if bound > self._cap:
            self._out, self._cap = self.ffi.new("uint8_t[]", bound), bound
        out = self._out
        tl, gpu, order = placer.tl, placer.gpu, placer.order
        trace = tl.trace
        # the dicts' values in QUEUES' and CLASSES' order: the order they were made in (scheduler.py)
        free_at, floors, ends = gpu.free_at, order.floors, order.ends
        self._STATE.pack_into(self._state, 0, placer.earliest, placer.end, tl._submissions, trace._next_event,
                              tl._render_pass_instances, *free_at.values(), *floors.values(), *ends.values())
        n = self.lib.tessera_place_all(blobs, sizes, len(blobs), texts, len(texts), self._state_c, out, bound,
                                       self._placed)
        placed = self._placed[0]
        if placed:
            state = self._STATE.unpack_from(self._state)
            placer.end, next_event, tl._render_pass_instances = state[1], state[3], state[4]
            free_at.update(zip(self.QUEUES, state[5:8]))
            floors.update(zip(CLASSES, state[8:12]))
            ends.update(zip(CLASSES, state[12:16]))
            trace.emit_encoded(self.ffi.buffer(out, n)[:], next_event - trace._next_event)
        return placed


_TAG_LABEL_MAX = len(tag_label(2 ** 64 - 1))   # the longest t<tag> label C writes (a u64 tag)


class _TagLayouts(dict):
    """Tag count n -> the layout of a recording's n tags as tessera_place_all takes them: a u32 count and
    each tag as a u64 (`_TAG_LAYOUTS[n].pack(n, *tags)`). Bounded."""

    def __missing__(self, n: int) -> struct.Struct:
        if len(self) >= Plans.CACHE:
            self.clear()
        layout = self[n] = struct.Struct(f"<I{n}Q")
        return layout


_TAG_LAYOUTS = _TagLayouts()


def _native_plan(plan: Plan, placer: "_Placer", address: int) -> tuple[bytes, int, int]:
    """`plan`'s bytes for tessera_place_events (the format is in vkapi/runtime/event_packets.c), the most
    bytes its events take but their slots' texts, and how many slot tokens its events have."""
    trace = placer.tl.trace
    parts = trace.constant_parts()
    out = [struct.pack("<I", len(plan.steps))]
    out += [struct.pack("<H", len(b)) + b for b in parts]
    bound = slot_tokens = 0
    classes = {c: i for i, c in enumerate(CLASSES)}
    queues = {q: i for i, q in enumerate(NativePlacer.QUEUES)}
    for step in plan.steps:
        if type(step) is not _Event:   # a barrier: its scope's classes as bits (None: every class)
            src, dst = step if step else (CLASSES, CLASSES)
            out.append(struct.pack("<BBB", 1, sum(1 << classes[c] for c in src), sum(1 << classes[c] for c in dst)))
            continue
        shape = trace.shape(duration_ns=step.duration_ns, queue=step.queue, stage=step.stage, gpu_id=placer.gpu_id,
                            command_buffer=address if step.command_buffer is None else step.command_buffer,
                            args=step.args, render_pass_handle=step.render_pass)
        flags = (1 if step.render_pass is not None else 0) | (2 if step.follows_binning else 0)
        out.append(struct.pack("<BBBBqhH", 0, classes[step.cls], queues[step.queue], flags, step.duration_ns,
                               step.tag_at, len(step.labels)))
        text = 0
        for token in step.labels:
            if type(token) is int:
                out.append(struct.pack("<BI", 1, token))
                slot_tokens += 1
            else:
                data = token.encode()
                out.append(struct.pack("<BH", 0, len(data)) + data)
                text += len(data)
        for part in shape:
            out.append(struct.pack("<I", len(part)) + part)
        # the packet: its parts, the labels (text twice at most, with keys and lengths), and 7 varints
        bound += sum(map(len, shape)) + sum(map(len, parts)) + 2 * text + 3 * len(step.labels) + 128
    return b"".join(out), bound, slot_tokens


class Plans:
    """The plans of the recordings placed so far, by the identity of what they were made from and which
    of the queue's labels on entry are t<tag> labels (their texts are slots): a reused recording's product
    (icd/replay.py), or an op list placed again unchanged (a command buffer submitted again, as vkcube
    submits its pre-recorded buffers), planned the second time it is placed. Bounded: CACHE plans and
    CACHE op lists seen once, each entry holding its key's object (so no identity is reused while it
    lives)."""
    CACHE = 512

    def __init__(self) -> None:
        self._made: dict[tuple, tuple[Plan | None, object]] = {}
        self._seen: dict[int, list] = {}   # op lists placed once, by identity
        self.placed = 0   # recordings placed from a plan (the driver logs it with its counts)
        self._entry_of: tuple[str, ...] | None = None   # the labels on entry `of` saw last, and which are tags
        self._entry_tags: tuple[bool, ...] = ()

    def counts(self) -> str:
        return f"recordings placed from a plan: {self.placed}"

    def of(self, placer: "_Placer", ops: list, entry: tuple[str, ...]) -> tuple[Plan | None, list[int]]:
        """The plan placing `ops` after the queue's labels `entry`, and the recording's tags (its slots after
        the entry's: none for an op list placed again); None when the ops need the walk (or are seen for the
        first time)."""
        if type(ops) is ReplayedOps or type(ops) is ProductOps:
            owner, made_of, tag_ops, tags = ops.product, ops.product.ops, ops.product.tag_ops, ops.tags
        else:
            if self._seen.get(id(ops)) is not ops:
                if len(self._seen) >= self.CACHE:
                    self._seen.clear()
                self._seen[id(ops)] = ops
                return None, []
            owner, made_of, tag_ops, tags = ops, ops, (), []
        if entry is not self._entry_of:   # a batch's recordings mostly share the labels on entry
            self._entry_of = entry
            self._entry_tags = tuple([bool(TAG_LABEL.match(label)) for label in entry]) if entry else ()
        entry_tags = self._entry_tags
        key = (id(owner), entry_tags)
        hit = self._made.get(key)
        if hit is None:
            if len(self._made) >= self.CACHE:
                self._made.clear()
            hit = self._made[key] = (_make(placer, made_of, tag_ops, entry_tags), owner)
        return hit[0], tags


def _make(placer: "_Placer", ops, tag_ops, entry_tags: tuple[bool, ...]) -> Plan | None:
    """What placing `ops` writes, as `_Placer` places them, after the queue's labels on entry (slots 0 ..,
    `entry_tags`: which are t<tag> labels), the LabelBegin ops at `tag_ops`' positions being the
    recording's tags (slots after them); the secondaries an Execute runs as the walk meets them, their events
    naming their own command buffers. None if the ops need the walk."""
    from .timeline import PassRun   # the timeline imports this module

    first_tag = len(entry_tags)
    tag_of = {at: first_tag + k for at, _, k in tag_ops}   # op position -> its tag's slot
    stack: list[Token] = list(range(first_tag))
    steps: list = []
    run = labels = tag_at = run_owner = None

    def is_tag(token: Token) -> bool:
        if type(token) is int:   # a slot: the entry's own label, or one of the recording's tags
            return entry_tags[token] if token < first_tag else True
        return bool(TAG_LABEL.match(token))

    def innermost() -> int:
        """Where innermost_tag finds the t<tag> label of `stack`; -1: nowhere."""
        return next((i for i in range(len(stack) - 1, -1, -1) if is_tag(stack[i])), -1)

    def visit(ops, within: tuple | None, owner: int | None) -> bool:
        """Plan `ops` (a secondary's: `within` (i, j) says where it runs, `owner` its address); False: walk them."""
        nonlocal run, labels, tag_at, run_owner
        for i, op in enumerate(ops):
            kind = type(op)
            if kind is LabelBegin:
                stack.append(tag_of.get(i if within is None else (*within, i), op.name))
            elif kind is LabelEnd:
                if stack:
                    stack.pop()
            elif kind is Work:
                if op.at_completion is not None or op.measured is not None:
                    return False
                t = placer._work_template(op)
                cls = work_class(op.kind)
                steps.append(_Event(cls, t.binning.queue, t.binning.duration_ns, t.binning.stage, t.binning_args,
                                    tuple(stack), innermost(), command_buffer=owner))
            elif kind is Draw:
                if op.at_completion is not None or op.measured is not None:
                    return False
                if run is not None:
                    run.draws.append(op)
            elif kind is Barrier:
                steps.append(op.scope)
            elif kind is PassBegin:
                if op.resuming or run is not None:
                    return False
                run, run_owner = PassRun(op.info, [], 0), owner
                labels, tag_at = tuple(stack), innermost()
            elif kind is PassEnd:
                if op.suspending or run is None:
                    return False
                t: _Template = placer._pass_template(run)
                handle = run.info.handle
                steps.append(_Event("vertex", t.binning.queue, t.binning.duration_ns, t.binning.stage,
                                    t.binning_args, labels, tag_at, handle, command_buffer=run_owner))
                steps.append(_Event("fragment", t.main.queue, t.main.duration_ns, t.main.stage, t.main_args,
                                    labels, tag_at, handle, follows_binning=True, command_buffer=run_owner))
                run = None
            elif kind is Execute:
                if within is not None:   # nested secondaries: walked
                    return False
                for j, secondary in enumerate(op.secondaries):
                    if not visit(secondary.ops, (i, j), secondary.address):
                        return False
        return True

    if not visit(ops, None, None):
        return None
    if run is not None:
        return None
    return Plan(steps, tuple(stack), tuple(stack) == tuple(range(first_tag)))

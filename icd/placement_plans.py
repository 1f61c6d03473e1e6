"""Placement plans: a reused recording's events placed without walking its ops.

A recording the shim made again from an earlier one (vkapi/replay.py; its op list is an
icd/replay.ReplayedOps) has that recording's ops but its tag labels. What placing it writes is then
known ahead but for where the events land and a few numbers: each event's phase, args, stage and
label stack (with the tags as slots) come from the product, once; each placement only runs the
scheduler over the plan's steps and patches each event's start, id, tag labels, submission and
render pass instance into its pre-encoded packet (icd/event_packets.py EventShape). The events and
the queue's label stack come out as `_Placer.walk` would leave them (tests/integration/test_replay.py
compares the merged traces of the same program with reuse off and on).

A plan is made only for what it can place alone: no pass suspended or resumed, no secondaries, no
workload whose facts are read after execution or measured; the queue's label stack on entry is part
of its key. Anything else is walked. Bounded: CACHE plans, each holding its product (so no identity
is reused while it lives). Used by the timeline's one placing thread at a time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from tessera.schemas.labels import TAG_LABEL, tag_label
from tessera.vkapi.ops import Barrier, Execute, LabelBegin, LabelEnd, PassBegin, PassEnd

from .recording import Draw, Work

if TYPE_CHECKING:
    from .timeline import _Placer, _Template

# A label in a plan's stack: its text, or the index of the tag it carries (in the recording's tags).
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
    tag: Token | None                # the innermost t<tag> label of `labels` (schemas/labels.innermost_tag)
    render_pass: int | None = None   # a pass's phases: the pass's handle
    follows_binning: bool = False    # a pass's main phase


@dataclass
class Plan:
    steps: list                       # _Event, or a Barrier's scope (a tuple, or None for a full barrier)
    exit_labels: tuple[Token, ...]    # the queue's label stack after the recording
    shapes: dict = field(default_factory=dict)   # (gpu id, command buffer address) -> each event's EventShape

    def place(self, placer: "_Placer", address: int, tags: list[int]) -> None:
        tl, gpu, order = placer.tl, placer.gpu, placer.order
        trace = tl.trace
        names = [tag_label(t) for t in tags]
        shapes = self.shapes.get((placer.gpu_id, address))
        if shapes is None:
            shapes = self.shapes[(placer.gpu_id, address)] = [
                None if type(s) is not _Event else trace.shape(
                    duration_ns=s.duration_ns, queue=s.queue, stage=s.stage, gpu_id=placer.gpu_id,
                    command_buffer=address, args=s.args, render_pass_handle=s.render_pass)
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
                last_tokens, tag = step.labels, step.tag
                labels = trace.label_entries([n if type(n) is str else names[n] for n in last_tokens],
                                             tag if type(tag) is not int else names[tag])
            trace.emit(shape, start, labels, submission, instance)
        placer.end = end
        tl.plans.placed += 1
        placer.labels[:] = [n if type(n) is str else names[n] for n in self.exit_labels]


class Plans:
    """The plans of the products placed so far, by (product identity, label stack on entry)."""
    CACHE = 512

    def __init__(self) -> None:
        self._made: dict[tuple, tuple[Plan | None, object]] = {}
        self.placed = 0   # recordings placed from a plan (the driver logs it with its counts)

    def counts(self) -> str:
        return f"recordings placed from a plan: {self.placed}"

    def of(self, placer: "_Placer", product, entry: tuple[str, ...]) -> Plan | None:
        """The plan placing `product` after a label stack `entry`, or None when it needs the walk."""
        key = (id(product), entry)
        hit = self._made.get(key)
        if hit is None:
            if len(self._made) >= self.CACHE:
                self._made.clear()
            hit = self._made[key] = (_make(placer, product, entry), product)
        return hit[0]


def _make(placer: "_Placer", product, entry: tuple[str, ...]) -> Plan | None:
    """What placing `product`'s ops writes, as `_Placer` places them; None if one needs the walk."""
    from .timeline import PassRun   # the timeline imports this module

    tag_at = {i: k for i, _, k in product.tag_ops}
    stack: list[Token] = list(entry)
    steps: list = []
    run = None
    for i, op in enumerate(product.ops):
        kind = type(op)
        if kind is LabelBegin:
            stack.append(tag_at.get(i, op.name))
        elif kind is LabelEnd:
            if stack:
                stack.pop()
        elif kind is Work:
            if op.at_completion is not None or op.measured is not None:
                return None
            t = placer._work_template(op)
            cls = "transfer" if op.kind in ("transfer", "acceleration_structure_copy") else "compute"
            steps.append(_Event(cls, t.binning.queue, t.binning.duration_ns, t.binning.stage, t.binning_args,
                                tuple(stack), _innermost_tag(stack)))
        elif kind is Draw:
            if op.at_completion is not None or op.measured is not None:
                return None
            if run is not None:
                run.draws.append(op)
        elif kind is Barrier:
            steps.append(op.scope)
        elif kind is PassBegin:
            if op.resuming or run is not None:
                return None
            run = PassRun(op.info, [], 0)
            labels, tag = tuple(stack), _innermost_tag(stack)
        elif kind is PassEnd:
            if op.suspending or run is None:
                return None
            t: _Template = placer._pass_template(run)
            handle = run.info.handle
            steps.append(_Event("vertex", t.binning.queue, t.binning.duration_ns, t.binning.stage, t.binning_args,
                                labels, tag, handle))
            steps.append(_Event("fragment", t.main.queue, t.main.duration_ns, t.main.stage, t.main_args,
                                labels, tag, handle, follows_binning=True))
            run = None
        elif kind is Execute:
            return None
    if run is not None:
        return None
    return Plan(steps, tuple(stack))


def _innermost_tag(stack: list[Token]) -> Token | None:
    """innermost_tag of a plan's label stack: a tag slot is a t<tag> label."""
    return next((t for t in reversed(stack) if type(t) is int or TAG_LABEL.match(t)), None)

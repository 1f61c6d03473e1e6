"""The layer's re-recordings (vkapi/replay.py): a command buffer's tracker state made again.

What applying a whole recording sets on a `CommandBufferTracker` (trackers.py) is its ops, the
descriptions waiting to be sent (descriptions.py), its open labels and what is bound. Its tags are
its `Workload`s' (each tagged record made one); a restored recording gets new Workload objects (and
new PassParts holding them) with the new tags, and shares everything else, which nothing changes
once the recording has ended: the descriptions' fields, the labels, the ops without tags.

A primary whose vkCmdExecuteCommands C recorded (runtime/lifecycle.c tessera_execute_in_c) has among its tags
its secondaries' (C copied them into the record), in command order: its product holds what the secondaries
held when it was made (their ops, with slots for their workloads), so that a restored primary executes
trackers of their own with the new tags; the secondaries' descriptions stay theirs (a restored primary runs
their hooks; a submit read without hooks reads them too). A secondary that executes secondaries is not made
again.

A submit of a recording begun and ended in C (vkapi/lifecycle.py) may be reported straight from its product,
its hooks not run (QueueReporter._read_without_hooks): a product says the tags such a submit plans to
(`plain`, when it plans to nothing else) and the rows of its WORKLOADS message (`described_rows`).

Not made again: a recording with a capture (indirect parameters are copied per recording), a render
pass left open, a workload whose description went out during the recording (BATCH reached), or
shader objects bound (kept across resets). The layer's shader instrumentation and per-region
counters keep per-recording state outside the tracker, and --content describes workloads with the
descriptor sets bound before the recording: layer/entry.py turns reuse off with them.
"""
from __future__ import annotations

from dataclasses import dataclass

from tessera.vkapi.ops import Execute, PassBegin
from tessera.vkapi.vkconst import vk

from .queues import reported_from_c
from .trackers import CommandBufferTracker, Workload, executed, walked_workloads


@dataclass(frozen=True)
class _Recording:
    ops: tuple
    workloads: tuple[tuple[Workload, int], ...]   # (a workload, its tag's index), in walk order (secondaries' too)
    op_slots: tuple                               # the ops to remake: _op_slots
    described: tuple                              # (index in `workloads`, (kind, fields, annex)): describe's
    labels: tuple[str, ...]
    pops_below_start: int
    compute_pipeline: object
    index_binding: tuple | None
    plain: tuple[int, ...] | None   # the index of each tag a submit plans to when it plans to nothing else
                                    # (queues.plain_tags, in its order); None when it plans to more
    described_rows: tuple           # (tag index, workload, kind, fields, annex) of each description, in order
    plain_labels: tuple             # with `plain`: each of those workloads' local labels (its ANNEX inside a
                                    # queue's labels: queues._read_without_hooks)
    continued_draws: int            # a secondary's draws inside the render pass it continues
    executes: tuple[int, ...]       # the addresses of the secondaries it executes, in order (their own recordings
                                    # describe their workloads: queues._read_without_hooks reads them too)


def _op_slots(ops, position: dict[int, int]) -> tuple:
    """(position in `ops`, what it holds) of each op a recording made again remakes: a Workload's or a pass part's
    workload (its index in `position`, None for a part that holds none), or an Execute's secondaries, each as
    (its tracker's fixed fields, its ops, their own op slots)."""
    slots = []
    for i, op in enumerate(ops):
        kind = type(op)
        if kind is Workload:
            slots.append((i, position[id(op)]))
        elif kind is PassBegin:   # each part is made again (a resuming one holds no workload)
            slots.append((i, None if op.info.workload is None else position[id(op.info.workload)]))
        elif kind is Execute:
            slots.append((i, tuple(((s.handle, s.address, s.level, s.pool, s.continued_draws), tuple(s.ops),
                                    _op_slots(s.ops, position)) for s in op.secondaries)))
    return tuple(slots)


def _remade(ops, op_slots, new: list[Workload]) -> list:
    """`ops` with the workloads `new` where `op_slots` says; an Execute's secondaries become trackers of their own
    holding their ops so remade (what the submit's walk reads of them: queues.py)."""
    ops = list(ops)
    for i, held in op_slots:
        op = ops[i]
        kind = type(op)
        if kind is Workload:
            ops[i] = new[held]
        elif kind is PassBegin:
            ops[i] = PassBegin(op.info.again(None if held is None else new[held]), op.resuming)
        else:
            ops[i] = Execute([CommandBufferTracker(handle, address, level, pool, _remade(sub, sub_slots, new),
                                                   continued_draws=draws)
                              for (handle, address, level, pool, draws), sub, sub_slots in held])
    return ops


def _capturing(ops) -> bool:
    """Whether a render pass part of `ops` (or of a secondary they execute) holds captures."""
    return any((type(op) is PassBegin and op.info.captures)
               or (type(op) is Execute and any(_capturing(s.ops) for s in op.secondaries)) for op in ops)


class TrackerProducts:
    """vkapi/replay.Products for the layer: the owner of a command buffer's records is its DeviceState.
    `wait(address)`: run the hooks of a begin and end C made of the buffer at `address` (Recorder.wait), which a
    primary restored runs for the secondaries it executes (their end describes their workloads)."""

    def __init__(self, state, wait=lambda address: None) -> None:
        self.state = state
        self.wait = wait

    def resources(self, dev):
        return dev.res

    def table(self, dev):
        return dev.recording_table

    def deferrable(self, dev) -> bool:
        """Always, where reuse is on: the layer's begin hooks that act at once (instrumentation, region
        counters) turn reuse off (entry.py)."""
        return True

    def snapshot(self, dev, handle, tags: list[int]) -> _Recording | None:
        t: CommandBufferTracker = self.state.command_buffer(dev, handle)
        primary = t.level == vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY
        if t.part is not None or t.label_pushed or t.shader_objects or t.deferred_captures \
                or (not primary and executed(t.ops)):   # nested secondaries: not made again
            return None
        workloads = walked_workloads(t.ops)
        own = {id(op if type(op) is Workload else op.info.workload) for op in t.ops
               if type(op) is Workload or (type(op) is PassBegin and op.info.workload is not None)}
        index = {tag: i for i, tag in enumerate(tags)}
        if (len(workloads) != len(tags) or len(index) != len(tags) or len(t.described) != len(own)
                or any(w.capture is not None or w.tag not in index for w in workloads)
                or {id(d[0]) for d in t.described} != own or _capturing(t.ops)):
            return None
        position = {id(w): i for i, w in enumerate(workloads)}
        # reported_from_c: every pass part holds a workload, so the plain tags are the workloads' in walk order
        plain = tuple(index[w.tag] for w in workloads) if reported_from_c(t) else None
        return _Recording(tuple(t.ops), tuple((w, index[w.tag]) for w in workloads), _op_slots(t.ops, position),
                          tuple((position[id(w)], tuple(rest)) for w, *rest in t.described),
                          tuple(t.labels), t.pops_below_start, t.compute_pipeline, t.index_binding, plain,
                          tuple((index[w.tag], w, *rest) for w, *rest in t.described),
                          tuple(tuple(w.local_labels) for w in workloads) if plain is not None else (),
                          t.continued_draws,
                          tuple(s.address for s in executed(t.ops)))

    def fields(self, product: _Recording, tags: list[int]) -> dict:
        new = [Workload(tags[k], w.local_labels, w.pops_below_start) for w, k in product.workloads]
        return {"ops": _remade(product.ops, product.op_slots, new),
                "described": [(new[j], *rest) for j, rest in product.described],
                "labels": list(product.labels), "pops_below_start": product.pops_below_start,
                "compute_pipeline": product.compute_pipeline, "index_binding": product.index_binding,
                "continued_draws": product.continued_draws}

    def restore(self, dev, handle, product: _Recording, tags: list[int]) -> None:
        t = self.state.command_buffer(dev, handle)
        for name, value in self.fields(product, tags).items():
            setattr(t, name, value)
        for address in product.executes:   # applying the records would have run their hooks (Recorder._execute)
            self.wait(address)

    def was_read(self, dev, handle, submits: int) -> None:
        """Its WORKLOADS went out when its first submit was read; its submits were counted then."""
        t = self.state.command_buffer(dev, handle)
        t.described = []
        t.submits = submits

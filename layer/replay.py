"""The layer's re-recordings (vkapi/replay.py): a primary command buffer's tracker state made again.

What applying a whole recording sets on a `CommandBufferTracker` (trackers.py) is its ops, the
descriptions waiting to be sent (descriptions.py), its open labels and what is bound. Its tags are
its `Workload`s' (each tagged record made one); a restored recording gets new Workload objects (and
new PassParts holding them) with the new tags, and shares everything else, which nothing changes
once the recording has ended: the descriptions' fields, the labels, the ops without tags.

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

from tessera.vkapi.ops import PassBegin
from tessera.vkapi.vkconst import vk

from .queues import reported_from_c
from .trackers import CommandBufferTracker, Workload


@dataclass(frozen=True)
class _Recording:
    ops: tuple
    workloads: tuple[tuple[Workload, int], ...]   # (the recording's workload, its tag's index), in order
    op_slots: tuple[tuple[int, int | None], ...]  # (position in ops, index in `workloads`) of each op to remake
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


def _workloads(ops) -> list[Workload]:
    found = []
    for op in ops:
        if type(op) is Workload:
            found.append(op)
        elif type(op) is PassBegin and op.info.workload is not None:
            found.append(op.info.workload)
    return found


class TrackerProducts:
    """vkapi/replay.Products for the layer: the owner of a command buffer's records is its DeviceState."""

    def __init__(self, state) -> None:
        self.state = state

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
        if (t.level != vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY or t.part is not None or t.label_pushed
                or t.shader_objects or t.deferred_captures or t.continued_draws):
            return None
        workloads = _workloads(t.ops)
        index = {tag: i for i, tag in enumerate(tags)}
        if (len(workloads) != len(tags) or len(t.described) != len(workloads)
                or any(w.capture is not None or w.tag not in index for w in workloads)
                or {id(d[0]) for d in t.described} != {id(w) for w in workloads}
                or any(type(op) is PassBegin and op.info.captures for op in t.ops)):
            return None
        position = {id(w): i for i, w in enumerate(workloads)}
        op_slots = []
        for i, op in enumerate(t.ops):
            if type(op) is Workload:
                op_slots.append((i, position[id(op)]))
            elif type(op) is PassBegin:   # each part is made again (a resuming one holds no workload)
                op_slots.append((i, None if op.info.workload is None else position[id(op.info.workload)]))
        # reported_from_c: every pass part holds a workload, so the plain tags are the workloads' in op order
        plain = tuple(index[w.tag] for w in workloads) if reported_from_c(t) else None
        return _Recording(tuple(t.ops), tuple((w, index[w.tag]) for w in workloads), tuple(op_slots),
                          tuple((position[id(w)], tuple(rest)) for w, *rest in t.described),
                          tuple(t.labels), t.pops_below_start, t.compute_pipeline, t.index_binding, plain,
                          tuple((index[w.tag], w, *rest) for w, *rest in t.described),
                          tuple(tuple(w.local_labels) for w in workloads) if plain is not None else ())

    def fields(self, product: _Recording, tags: list[int]) -> dict:
        new = [Workload(tags[k], w.local_labels, w.pops_below_start) for w, k in product.workloads]
        ops = list(product.ops)
        for i, j in product.op_slots:
            op = ops[i]
            if type(op) is Workload:
                ops[i] = new[j]
            else:
                ops[i] = PassBegin(op.info.again(None if j is None else new[j]), op.resuming)
        return {"ops": ops, "described": [(new[j], *rest) for j, rest in product.described],
                "labels": list(product.labels), "pops_below_start": product.pops_below_start,
                "compute_pipeline": product.compute_pipeline, "index_binding": product.index_binding}

    def restore(self, dev, handle, product: _Recording, tags: list[int]) -> None:
        t = self.state.command_buffer(dev, handle)
        for name, value in self.fields(product, tags).items():
            setattr(t, name, value)

    def was_read(self, dev, handle, submits: int) -> None:
        """Its WORKLOADS went out when its first submit was read; its submits were counted then."""
        t = self.state.command_buffer(dev, handle)
        t.described = []
        t.submits = submits

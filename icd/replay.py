"""The driver's re-recordings (vkapi/replay.py): a command buffer's shadow recording made again.

What applying a whole recording sets on a `CommandBuffer` (objects.py) is its ops and the pipelines
bound at its end, and what features keep of the recording in the buffer's slots (vkapi/slots.py;
shared, as nothing changes them once the recording has ended). Its tags are the layer's t<tag> labels, each one `LabelBegin` or `LabelInsert`
op; every other op is kept as it is (ops are not changed once the recording ends: what changes after
execution, `at_completion`, comes only from commands that take their Python hooks, and a recording
with any of those is not whole). A recording that bound shader objects (kept across resets) is not
made again, nor a secondary that executes secondaries. A primary whose vkCmdExecuteCommands C recorded
(runtime/lifecycle.c tessera_execute_in_c) has its secondaries' tags among its own, in command order: their
labels in the Execute's recordings are tag ops too, remade in lists of their own.
"""
from __future__ import annotations

from dataclasses import dataclass

from tessera.schemas.labels import tag_labels
from tessera.vkapi.ops import Execute, LabelBegin, LabelInsert, Recording
from tessera.vkapi.vkconst import vk

from .objects import CommandBuffer

# The fields applying records sets, kept as they were at the end of the recording.
_BOUND = ("compute_pipeline", "graphics_pipeline", "ray_tracing_pipeline")


@dataclass(frozen=True)
class _Recording:
    ops: tuple                                  # the ops, tag labels included as they were
    tag_ops: tuple[tuple, ...]                  # (position, LabelBegin or LabelInsert, tag index); the position in
                                                # ops, or (i, j, p): op p of the j-th secondary the Execute at i runs
    bound: tuple
    slots: tuple                                # the buffer's slots' (kind, state) at the end


class ReplayedOps(list):
    """A restored recording's op list, saying which product and tags it was made from: the timeline
    places such a list from that product's placement plan (icd/placement_plans.py) instead of walking it."""
    __slots__ = ("product", "tags")


class ProductOps:
    """The op list of a recording read from its kept product without running its hooks (icd/submit.py), not
    made yet: the timeline places it from the product's plan, which needs only the product and the tags
    (icd/placement_plans.py), and makes the list (`made`) only to walk it. `kept`: the vkapi/replay entry keeping
    the product in C, where a native plan of it may be attached (icd/placed_submits.py); None: not kept there."""
    __slots__ = ("product", "tags", "kept")

    def __init__(self, product: _Recording, tags: list[int], kept=None) -> None:
        self.product, self.tags, self.kept = product, tags, kept

    def made(self) -> ReplayedOps:
        return ShadowProducts.ops(self.product, self.tags)


class ShadowProducts:
    """vkapi/replay.Products for the driver: the owner of a command buffer's records is its CommandBuffer."""

    def resources(self, cb: CommandBuffer):
        return cb.device.res

    def table(self, cb: CommandBuffer):
        return cb.device.recording_table

    def deferrable(self, dev) -> bool:
        return dev.defers_begin

    def snapshot(self, cb: CommandBuffer, handle, tags: list[int]) -> _Recording | None:
        if cb.shader_objects or cb.needs_completion or cb.instrumentation is not None:
            return None
        if cb.level != vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY and any(type(op) is Execute for op in cb.ops):
            return None   # a secondary executing secondaries: not made again
        names = tag_labels(tags)
        found: list = []

        def scan(ops, within: tuple | None) -> None:
            for i, op in enumerate(ops):
                kind = type(op)
                if kind is Execute and within is None:
                    for j, secondary in enumerate(op.secondaries):
                        scan(secondary.ops, (i, j))
                elif len(found) < len(names) and (kind is LabelBegin or kind is LabelInsert) \
                        and op.name == names[len(found)]:
                    found.append((i if within is None else (*within, i), kind, len(found)))

        scan(cb.ops, None)
        if len(found) != len(names):
            return None
        return _Recording(tuple(cb.ops), tuple(found), tuple(getattr(cb, f) for f in _BOUND), tuple(cb.slots.items()))

    @staticmethod
    def ops(product: _Recording, tags: list[int]) -> ReplayedOps:
        """The op list `product` makes for `tags` (what the timeline places: a submit read without running
        the recording's hooks takes it alone, icd/submit.py); an Execute holding tags gets lists of its own."""
        ops = ReplayedOps(product.ops)
        ops.product, ops.tags = product, tags
        names = tag_labels(tags)
        executes: dict[int, Execute] = {}
        for at, kind, k in product.tag_ops:
            if type(at) is int:
                ops[at] = kind(names[k])
                continue
            i, j, position = at
            execute = executes.get(i)
            if execute is None:
                execute = executes[i] = ops[i] = Execute([Recording(r.address, list(r.ops))
                                                          for r in product.ops[i].secondaries])
            execute.secondaries[j].ops[position] = kind(names[k])
        return ops

    def fields(self, product: _Recording, tags: list[int]) -> dict:
        return {"ops": self.ops(product, tags), **dict(zip(_BOUND, product.bound)), "slots": dict(product.slots)}

    def restore(self, cb: CommandBuffer, handle, product: _Recording, tags: list[int]) -> None:
        fields = self.fields(product, tags)
        cb.slots.update(fields.pop("slots"))   # empty since the buffer was begun
        for name, value in fields.items():
            setattr(cb, name, value)

    def was_read(self, cb: CommandBuffer, handle, submits: int) -> None:
        """Nothing to leave: the timeline took the reads' op lists, and the buffer keeps no count of its submits."""

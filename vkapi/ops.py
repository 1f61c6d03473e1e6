"""Shadow recordings: the ops the layer and the driver share, and the one walker of them.

Both the layer (layer/trackers.py: `CommandBufferTracker.ops`) and the driver (icd/recording.py:
`CommandBuffer.ops`) keep, per command buffer, a list of typed ops in command order, and walk the
buffers of each submit in order, secondaries expanded, against the queue's debug-label stack and
the render pass suspended on it (layer/queues.py `plan_submit`, icd/timeline.py `_Placer`). What
both mean the same way is defined here:

    LabelBegin(name) / LABEL_END / LabelInsert(name)   debug labels and markers
    PassBegin(info, resuming)     a render pass (or a part of a suspended one) begins or resumes;
                                  `info`: the driver's vkapi.render_passes.PassInfo, the layer's PassPart
    PASS_END / PASS_SUSPEND       the current render pass ends / is suspended (resumed later)
    Barrier(scope)                barriers, waits: (source classes, destination classes), None: full
    Execute(secondaries)          vkCmdExecuteCommands: the secondaries' recordings (`.address`, `.ops`)

Each side adds records of its own, which the walker hands to its `other`: the layer's tagged
`Workload` (layer/trackers.py), the driver's `Draw` and `Work` (icd/recording.py).

`OpWalker` holds the one label-stack and pass suspend/resume logic; a subclass says what a resolved
event means to it (`opened`, `resumed`, `closed`, `entered`, `other`). Ops are dispatched by their
type (`type(op) is …`; docs/benchmarks.md compares the walks with the string-tagged ones they
replaced). The records are small slotted dataclasses, built on every recorded command (a hot
path); ops that carry nothing are shared constants, so recording them allocates nothing. Ops are
compared by type and fields (a LabelBegin never equals a LabelInsert of the same name).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(slots=True)
class LabelBegin:
    name: str | None


@dataclass(slots=True)
class LabelEnd:
    pass


@dataclass(slots=True)
class LabelInsert:
    name: str | None


@dataclass(slots=True)
class PassBegin:
    info: Any               # the driver's PassInfo, the layer's PassPart
    resuming: bool = False  # resumes a pass suspended earlier (VK_RENDERING_RESUMING_BIT)


@dataclass(slots=True)
class PassEnd:
    suspending: bool = False   # suspended: a later PassBegin(resuming=True) continues it


@dataclass(slots=True)
class Barrier:
    scope: tuple[frozenset[str], frozenset[str]] | None   # (source classes, destination classes); None: full


@dataclass(slots=True)
class Execute:
    secondaries: list       # each with `.address` and `.ops`: the layer's trackers, the driver's Recording


class Recording(NamedTuple):
    """A command buffer's recording as the driver hands it to the timeline: its handle's address
    and its op list as it was then (a reset gives the buffer a new list)."""
    address: int
    ops: list


LABEL_END = LabelEnd()
PASS_END = PassEnd(False)
PASS_SUSPEND = PassEnd(True)
FULL_BARRIER = Barrier(None)


class OpWalker:
    """Walks recordings in submission order: keeps `labels` (the queue's label stack, updated in
    place: a label may open in one command buffer and close in a later one; a pop without a push is
    tolerated), and the render pass being walked (`current`) or suspended (`suspended`, which a
    PassBegin(resuming=True) continues; without one, a resuming PassBegin opens a pass of its own).
    Subclasses say what each resolved event means:

    - `entered(recording)`: a recording (primary or secondary) is about to be walked;
    - `opened(op, recording)`: a PassBegin that starts a pass: the subclass's record of it, or None
      (nothing to track; its PassEnd is then ignored);
    - `resumed(run, op)`: a PassBegin continues `run`, the pass suspended before;
    - `closed(run)`: the pass ends (not suspended);
    - `other(op, kind, recording)`: an op of a type not walked here (`kind`: its type): the side's
      own records, and Barrier.
    """

    def __init__(self, labels: list, suspended: Any = None) -> None:
        self.labels = labels
        self.current: Any = None
        self.suspended: Any = suspended

    def walk(self, recording) -> None:
        labels, other = self.labels, self.other
        self.entered(recording)
        for op in recording.ops:
            kind = type(op)
            if kind not in _WALKED:          # the side's own records, barriers: most ops, one look-up
                other(op, kind, recording)
            elif kind is LabelBegin:
                labels.append(op.name)
            elif kind is LabelEnd:
                if labels:
                    labels.pop()
            elif kind is PassBegin:
                if op.resuming and self.suspended is not None:
                    self.current, self.suspended = self.suspended, None
                    self.resumed(self.current, op)
                else:
                    self.current = self.opened(op, recording)
            elif kind is PassEnd:
                current = self.current
                if current is not None:
                    if op.suspending:
                        self.suspended = current
                    else:
                        self.closed(current)
                    self.current = None
            elif kind is Execute:
                for secondary in op.secondaries:
                    self.walk(secondary)
            # LabelInsert: a point label, nothing stays open

    # ---- what the events mean: overridden -------------------------------------------------------
    def entered(self, recording) -> None:
        pass

    def opened(self, op: PassBegin, recording) -> Any:
        return None

    def resumed(self, run: Any, op: PassBegin) -> None:
        pass

    def closed(self, run: Any) -> None:
        pass

    def other(self, op: Any, kind: type, recording) -> None:
        pass


# What OpWalker.walk resolves itself (anything else goes to `other`).
_WALKED = frozenset({LabelBegin, LabelEnd, LabelInsert, PassBegin, PassEnd, Execute})

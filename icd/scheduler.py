"""Placement of workload phases on the emulated Mali's hardware queues.

Three queues per emulated GPU: non-fragment (binning, compute, trace rays),
fragment (main phases) and transfer. Each queue runs one phase at a time and
is monotonic. A phase starts at the latest of: the host time of its submit,
its queue being free, the barriers before it on its Vulkan queue, the
signals of the semaphores its batch waits for, and for a main phase the end
of its own binning phase.

Barriers are scoped by pipeline stage (Vulkan spec 7.6, execution
dependencies): work falls into classes (vertex = binning, fragment = main,
compute, transfer); a barrier makes the classes of its destination stages
wait for the end of all earlier work in the classes of its source stages.
So binning of pass N+1 overlaps main of pass N unless a barrier's
destination covers vertex stages, as on a tile-based GPU, and a barrier
that only feeds the host (or only reads indirect arguments) stalls nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .timing import Phase

CLASSES = ("vertex", "fragment", "compute", "transfer")
ALL = frozenset(CLASSES)
# The kinds of Work (icd/recording.py) that run as transfers; the others as compute.
TRANSFER_KINDS = frozenset({"transfer", "acceleration_structure_copy"})


def work_class(kind: str) -> str:
    """The class a Work of `kind` is ordered and placed in."""
    return "transfer" if kind in TRANSFER_KINDS else "compute"


@dataclass
class EmulatedGpu:
    free_at: dict[str, int] = field(default_factory=lambda: {"non-fragment": 0, "fragment": 0, "transfer": 0})

    def place(self, phase: Phase, earliest: int) -> int:
        """Start time of `phase`; its queue is busy until start + duration."""
        start = max(earliest, self.free_at[phase.queue])
        self.free_at[phase.queue] = start + phase.duration_ns
        return start


@dataclass
class QueueOrder:
    """Ordering state of one Vulkan queue's stream of work."""
    ends: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))     # last end per class
    floors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))   # earliest start per class

    @property
    def last_end(self) -> int:
        return max(self.ends.values())

    def barrier(self, src: frozenset[str] = ALL, dst: frozenset[str] = ALL) -> None:
        done = max((self.ends[c] for c in src), default=0)
        for c in dst:
            self.floors[c] = max(self.floors[c], done)

    def floor(self, cls: str) -> int:
        return self.floors[cls]

    def placed(self, cls: str, end: int) -> None:
        self.ends[cls] = max(self.ends[cls], end)

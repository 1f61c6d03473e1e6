"""Placement of workload phases on the emulated Mali's hardware queues.

Three queues per emulated GPU: non-fragment (binning, compute, trace rays),
fragment (main phases) and transfer. Each queue runs one phase at a time and
is monotonic. A phase starts at the latest of: the host time of its submit,
its queue being free, the last barrier of its Vulkan queue (everything
recorded before a pipeline barrier or event wait ends first), the signals of
the semaphores its batch waits for, and for a main phase the end of its own
binning phase. So binning of pass N+1 overlaps the main phase of pass N, as
on a tile-based GPU, while barriers and semaphores serialize what they must.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .timing import Phase


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
    barrier_floor: int = 0     # work after the last barrier starts no earlier
    last_end: int = 0          # end of everything placed so far

    def barrier(self) -> None:
        self.barrier_floor = max(self.barrier_floor, self.last_end)

    def placed(self, end: int) -> None:
        self.last_end = max(self.last_end, end)

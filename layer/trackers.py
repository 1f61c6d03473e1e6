"""Trackers: what the layer knows about command buffers and queues.

They record what the application did, free of any wire format (encoder.py
turns them into messages). Each command buffer's recording is a list of typed
ops (vkapi/ops.py, shared with the driver), walked in submission order at
submit time by vkapi/ops.py's walker (queues.py):

    LabelBegin(name) / LABEL_END / LabelInsert(name)
    Workload                    a tagged dispatch, transfer, trace rays
    PassBegin(PassPart, resuming), then PASS_END or PASS_SUSPEND
                                a render pass, or one part of a split one: both appended
                                when the part ends (its draws and captures are known then)
    Execute([CommandBufferTracker])   secondaries

Written by the application thread recording the command buffer (Vulkan
requires external synchronization of a command buffer), read at submit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tessera.vkapi.ops import Execute, PassBegin

if TYPE_CHECKING:
    from tessera.vkapi.pipelines import Pipeline


@dataclass
class Capture:
    """Indirect parameters copied into the layer's buffer for one tag."""
    offset: int            # in the device's capture buffer
    size: int
    kind: str              # dispatch, draw, draw_indexed
    count: int             # records (draws) in the region
    group_size: tuple[int, int, int] | None = None
    tag: int = 0           # the tag of the copy itself (a workload of its own on the GPU)
    draws: tuple = ()      # kind "content": the pass's content.DrawRecords (offset -1, size 0: nothing copied)
    first_draw: int = -1   # kinds draw, draw_indexed: the pass's draw number of its first record (-1: unknown)


@dataclass
class Workload:
    """What a submit needs of a tagged workload. What it is (kind, sizes) goes out in its WORKLOAD
    description (descriptions.py) and is not kept: one small object stays per recorded workload."""
    tag: int
    local_labels: tuple[str, ...]           # labels opened in this command buffer and still open
    pops_below_start: int                   # ends that closed labels opened before this command buffer
    capture: Capture | None = None


@dataclass
class PassPart:
    """One begin..end (or suspend) of a render pass in one command buffer."""
    workload: Workload | None               # None: resumes a pass begun in an earlier command buffer
    meta: dict | None = None                # its WORKLOAD fields until described (when the part ends)
    draws: int = 0
    captures: list[Capture] = field(default_factory=list)
    suspends: bool = False                  # ends suspended (resumed later)
    resumes: bool = False
    content: Any = None                     # content.ContentPart: its draws (tessera run --content)
    descriptor_reads: Any = None            # descriptors.PassReads: images its draws read (--content)

    def again(self, workload: Workload | None) -> "PassPart":
        """This part as a recording made again has it (layer/replay.py): `workload`, no captures, every
        other field shared (tests/layer/test_replay_parts.py checks that none is left out)."""
        return PassPart(workload, self.meta, self.draws, [], self.suspends, self.resumes, self.content,
                        self.descriptor_reads)


@dataclass
class CommandBufferTracker:
    handle: Any
    address: int
    level: int
    pool: int
    ops: list = field(default_factory=list)   # typed ops (vkapi/ops.py, Workload)
    one_time: bool = False
    submits: int = 0                         # times submitted since recorded
    part: PassPart | None = None             # render pass part being recorded
    labels: list[str] = field(default_factory=list)   # labels opened in this buffer and open now
    pops_below_start: int = 0
    compute_pipeline: Any = None
    deferred_captures: list = field(default_factory=list)   # indirect draws: copied after the pass ends
    pending_fence: Any = None                # layer fence of the last submit with captures, until read back
    continued_draws: int = 0                 # secondary: draws inside the render pass it continues
    label_pushed: bool = False               # a t<tag> label is open around the command being recorded
    described: list = field(default_factory=list)   # descriptions not sent yet (descriptions.py)
    # Shader objects bound (vkCmdBindShadersEXT): stage bit -> their Pipeline, workloads.py's (a compute
    # one sizes dispatches). Kept across a reset, as it always was.
    shader_objects: dict[int, Pipeline] = field(default_factory=dict)
    index_binding: tuple | None = None       # (VkBuffer, offset, VkIndexType) bound (content.py)
    descriptors: Any = None                  # descriptors.BoundSets: the sets bound (--content)
    # queues.plain_tags of the recording, once a submit asked (None: not yet): kept until the next reset
    plain_tags: list[int] | bool | None = None

    def reset(self) -> None:
        self.ops.clear()
        self.plain_tags = None
        self.submits = 0
        self.part = None
        self.labels.clear()
        self.pops_below_start = 0
        self.compute_pipeline = None
        self.deferred_captures.clear()
        self.continued_draws = 0
        self.label_pushed = False
        self.index_binding = None
        self.descriptors = None

    def has_captures(self) -> bool:
        return any((type(op) is Workload and op.capture) or (type(op) is PassBegin and op.info.captures)
                   for op in self.ops)


def walked_workloads(ops) -> list[Workload]:
    """The workloads of `ops` in the order a submit's walk meets them (queues.py): the secondaries' where they are
    executed; a pass part that holds none is passed over."""
    found = []
    for op in ops:
        kind = type(op)
        if kind is Workload:
            found.append(op)
        elif kind is PassBegin and op.info.workload is not None:
            found.append(op.info.workload)
        elif kind is Execute:
            for secondary in op.secondaries:
                found += walked_workloads(secondary.ops)
    return found


def executed(ops) -> list:
    """The secondaries `ops` execute, in order (their trackers, or what a restored recording holds of them)."""
    return [s for op in ops if type(op) is Execute for s in op.secondaries]


@dataclass
class QueueTracker:
    handle: Any
    name: str
    labels: list[str] = field(default_factory=list)   # the application's label stack on this queue
    # how deep in `labels` the C path knows the queue to be (its ledger's label records, counted as C counts
    # them: runtime/submits.c tessera_queue_label_depth): it wraps the queue's submits while above 0
    ledger_labels: int = 0
    open_pass: "OpenPass | None" = None                # a render pass suspended at the end of a submit
    python_submits: bool = False   # labels C does not know or an open pass: submits take the Python path


@dataclass
class OpenPass:
    workload: Workload
    labels: list[str]
    draws: int
    parts: int = 1
    captures: list[Capture] = field(default_factory=list)

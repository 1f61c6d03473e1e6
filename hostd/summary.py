"""The session summary: frames, submits, workloads by type, GPU time per queue, longest workloads.

Role: one code path for `tessera run` (fed the merged packets as the merge
writes them) and `tessera report` (fed a merged trace read back). Memory is
bounded: counters plus a heap of the `top` longest events.

What it reads in a merged trace (merge.py writes it so):
  - GPU render-stage events; queue and stage names from the interned specs of
    their sequence; the workload kind from the `kind` arg, `metadata=missing`
    marking events the merge found no metadata for; a render pass's binning
    and main phases (same render_pass_instance_id) count as one workload;
  - TrackEvent slices named `vkQueueSubmit` (submits) and instants on tracks
    named `Frames` (frames);
  - reading a merged trace (not during the merge, which ranks from the session
    logs), the `Shader …` args of instrumented slices (shaders.py), ranked by
    their `Shader thread-ops`;
  - the `internal` arg: an event of work the layer itself added (its
    indirect-capture copies; WORKLOAD `internal`) is the tool's, not the
    application's: counted apart (`internal_events`, `internal_workloads`,
    `internal_time_ns`) and left out of every application count (GPU events,
    workloads by type, GPU time per queue, longest workloads).
"""
from __future__ import annotations

import heapq
import json
from dataclasses import asdict, dataclass, field

from tessera.schemas.perfetto import QUEUE_OF, SEQ_INCREMENTAL_STATE_CLEARED, TracePacket
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from . import shaders as shader_cost

SUBMIT_SLICE = "vkQueueSubmit"
FRAMES_TRACK = "Frames"
MISSING_KEY = "metadata"
MISSING_VALUE = "missing"
INTERNAL_KEY = "internal"       # WORKLOAD field (schemas/json/workload.schema.json) the merge copies as an arg
# The only extra_data names the summary reads from a render-stage event: the `extras` a
# caller passes need hold no others.
OPERATORS_KEY = "Operators"      # a data-graph dispatch's operators and their modelled costs (icd/data_graph/), JSON
SUMMARY_READS = frozenset({MISSING_KEY, INTERNAL_KEY, "kind", "labels", "Labels", OPERATORS_KEY})
LABEL_WIDTH = 28                # the summary table's label column, at least (format_summary)
_SLICE_BEGIN = pb.TrackEvent.TYPE_SLICE_BEGIN
_INSTANT = pb.TrackEvent.TYPE_INSTANT


@dataclass(frozen=True)
class LongWorkload:
    duration_ns: int
    name: str
    queue: str
    stage: str
    labels: str
    kind: str


@dataclass
class Summary:
    processes: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)   # the emulated GPUs the driver's traces name
    frames: int = 0
    submits: int = 0
    gpu_events: int = 0                 # the application's: the tool's own events are internal_events
    workloads: dict[str, int] = field(default_factory=dict)
    gpu_time_ns: dict[str, int] = field(default_factory=dict)
    longest: list[LongWorkload] = field(default_factory=list)
    events_without_metadata: int = 0
    metadata_without_events: int | None = None     # known only to the merge
    # the most expensive draws and dispatches (shaders.py), when the session was instrumented:
    # from the session logs after a merge, from the slices' args when read from a merged trace
    shaders: shader_cost.ShaderReport | None = None
    # the tool's own GPU work (the layer's indirect-capture copies), never in the counts above
    internal_events: int = 0
    internal_workloads: dict[str, int] = field(default_factory=dict)    # by their `internal` name
    internal_time_ns: dict[str, int] = field(default_factory=dict)      # per queue
    # data-graph operators by TOSA name: [count, ops, bytes, modelled ns] summed over every dispatch
    operators: dict[str, list] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def first_values(e) -> dict[str, str]:
    """A render-stage event's extra_data as name -> value, the first entry of a name winning
    (as schemas.perfetto.extra() reads them), in one pass."""
    ex: dict[str, str] = {}
    for d in e.extra_data:
        name = d.name
        if name not in ex:
            ex[name] = d.value
    return ex


def kind_label(kind: str | None) -> str:
    return kind.replace("_", " ") if kind else "unknown"


class SummaryBuilder:
    """`shaders`: also rank the instrumented slices by the shader cost their args carry (reading
    a merged trace; the merge ranks from the session logs instead, with basic blocks)."""

    def __init__(self, top: int = 10, shaders: bool = False) -> None:
        self.top = top
        self.shaders = shaders
        self._shader_heap: list[tuple] = []
        self._shader_seen: set[tuple] = set()
        self._instrumented = 0
        self.s = Summary()
        self._specs: dict[tuple[int, int], str] = {}
        self._tracks: dict[int, str] = {}
        self._render_passes: set[tuple[int, int]] = set()
        self._heap: list[tuple[int, int, LongWorkload]] = []
        self._n = 0

    def feed(self, p: TracePacket, extras: dict[str, str] | None = None) -> None:
        """One packet of the merged trace. `extras`: its render-stage event's extra_data as
        name -> first value (at least the SUMMARY_READS names), when the caller has it
        already (the merge), else read here."""
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED:
            for key in [k for k in self._specs if k[0] == seq]:
                del self._specs[key]
        if p.HasField("interned_data"):
            for spec in p.interned_data.gpu_specifications:
                self._specs[(seq, spec.iid)] = spec.name
                gpu = spec.description.partition(QUEUE_OF)[2]
                if gpu and gpu not in self.s.gpus:
                    self.s.gpus.append(gpu)
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            self._tracks[d.uuid] = d.name
            if d.HasField("process"):
                self.s.processes.append(f"{d.process.process_name or '?'} [{d.process.pid}]")
        if p.HasField("track_event"):
            e = p.track_event
            self.track_event(e.type, e.track_uuid, e.name)
        if p.HasField("gpu_render_stage_event"):
            self.gpu_event(seq, p.gpu_render_stage_event, extras)

    def track_event(self, type_: int, track_uuid: int, name: str | None) -> None:
        """A TrackEvent of the merged trace (from feed(), or from the merge for the packets
        tracks.py encodes itself)."""
        if type_ == _SLICE_BEGIN and name == SUBMIT_SLICE:
            self.s.submits += 1
        elif type_ == _INSTANT and self._tracks.get(track_uuid) == FRAMES_TRACK:
            self.s.frames += 1

    def gpu_event(self, seq: int, e, ex: dict[str, str] | None = None) -> None:
        """The render-stage event of a packet on sequence `seq` (from feed(), or from the merge
        when the packet holds nothing else feed() reads)."""
        if ex is None:
            ex = first_values(e)
        s = self.s
        specs = self._specs
        q, st = e.hw_queue_iid, e.stage_iid
        queue = specs.get((seq, q))           # (the default built only when needed: hot path)
        if queue is None:
            queue = f"queue {q}"
        internal = ex.get(INTERNAL_KEY)
        if internal is not None:              # the tool's own work: counted apart, nowhere else
            self._internal(seq, e, internal, queue)
            return
        s.gpu_events += 1
        stage = specs.get((seq, st))
        if stage is None:
            stage = f"stage {st}"
        missing = ex.get(MISSING_KEY) == MISSING_VALUE
        s.events_without_metadata += missing
        kind = ex.get("kind")
        label = kind_label(kind) if kind else ("unknown (no metadata)" if missing else "unknown")
        rp = e.render_pass_instance_id
        if rp:
            key = (seq, rp)
            new = key not in self._render_passes
            if new:
                self._render_passes.add(key)
        else:
            new = True
        if new:
            s.workloads[label] = s.workloads.get(label, 0) + 1
        duration = e.duration
        s.gpu_time_ns[queue] = s.gpu_time_ns.get(queue, 0) + duration
        if (graph_ops := ex.get(OPERATORS_KEY)) is not None:
            self._operators(graph_ops)
        if self.shaders and shader_cost.OPS_KEY in ex:
            self._shader_slice(seq, e, ex, stage, label)
        if self.top <= 0:
            return
        if len(self._heap) >= self.top and duration <= self._heap[0][0]:
            return
        labels = ex.get("labels")
        try:
            app = json.loads(labels) if labels else []
        except ValueError:
            app = [labels]
        tag = ex.get("Labels")
        shown = " / ".join([*map(str, app if isinstance(app, list) else [app]), *([tag] if tag else [])])
        item = LongWorkload(e.duration, e.name or stage, queue, stage, shown, label)
        self._n += 1
        if len(self._heap) < self.top:
            heapq.heappush(self._heap, (e.duration, -self._n, item))
        else:
            heapq.heapreplace(self._heap, (e.duration, -self._n, item))

    def _internal(self, seq: int, e, name: str, queue: str) -> None:
        s = self.s
        s.internal_events += 1
        rp = e.render_pass_instance_id
        if not rp or (seq, rp) not in self._render_passes:
            if rp:
                self._render_passes.add((seq, rp))
            s.internal_workloads[name] = s.internal_workloads.get(name, 0) + 1
        s.internal_time_ns[queue] = s.internal_time_ns.get(queue, 0) + e.duration

    def _shader_slice(self, seq: int, e, ex: dict[str, str], stage: str, kind: str) -> None:
        """An instrumented slice of a merged trace: ranked by its `Shader thread-ops` (the binning
        and main phases of a render pass carry the same values: counted once)."""
        key = (seq, e.render_pass_instance_id) if e.render_pass_instance_id else (seq, "event", e.event_id)
        if key in self._shader_seen:
            return
        cost = shader_cost.from_args(ex)
        if cost is None:
            return
        self._shader_seen.add(key)
        self._instrumented += 1
        if self.top <= 0:
            return
        labels = ex.get("labels")
        try:
            app = json.loads(labels) if labels else []
        except ValueError:
            app = [labels]
        tag, submit = ex.get("tag", ""), ex.get("submit", "")
        item = {"name": e.name or stage, "kind": kind, "tag": int(tag) if tag.isdigit() else None,
                "submit": int(submit) if submit.isdigit() else None,
                "labels": [str(x) for x in app] if isinstance(app, list) else [str(app)], **cost}
        entry = (cost["thread_ops"], -self._instrumented, item)
        if len(self._shader_heap) < self.top:
            heapq.heappush(self._shader_heap, entry)
        elif entry[:2] > self._shader_heap[0][:2]:
            heapq.heapreplace(self._shader_heap, entry)

    def _operators(self, text: str) -> None:
        try:
            costs = json.loads(text)
        except ValueError:
            return
        for c in costs if isinstance(costs, list) else ():
            if isinstance(c, dict):
                row = self.s.operators.setdefault(str(c.get("operator")), [0, 0, 0, 0.0])
                row[0] += 1
                row[1] += int(c.get("ops", 0))
                row[2] += int(c.get("bytes", 0))
                row[3] += float(c.get("ns", 0.0))

    def result(self) -> Summary:
        self.s.longest = [item for _, _, item in sorted(self._heap, key=lambda x: (-x[0], -x[1]))]
        if self._instrumented:
            report = shader_cost.ShaderReport("merged trace args", shader_cost.RANKED_BY_SLICE,
                                              instrumented=self._instrumented)
            for n, (_, _, item) in enumerate(sorted(self._shader_heap, key=lambda x: x[:2], reverse=True), 1):
                report.ranked.append({"rank": n, **item})
            self.s.shaders = report
        return self.s


def summarize_trace(path, top: int = 10, problem=None) -> Summary:
    """The summary of a merged trace. Damage is read past as the merge reads it (the same
    reader, schemas.perfetto.read_packets): each damaged stretch goes to `problem(offset,
    message)`, or without one the first is raised as TraceFormatError after the rest is read.
    A file with no packet at all is a TraceFormatError either way."""
    from tessera.schemas.perfetto import TraceFormatError, read_packets

    b = SummaryBuilder(top, shaders=True)
    first: list[tuple[int, str]] = []

    def note(offset: int, message: str) -> None:
        if not first:
            first.append((offset, message))
        if problem is not None:
            problem(offset, message)

    packets = 0
    for p in read_packets(path, problem=note):
        b.feed(p)
        packets += 1
    if not packets:
        raise TraceFormatError(*(first[0] if first else (0, "no Perfetto packet in it (an empty file?)")))
    if first and problem is None:
        raise TraceFormatError(*first[0])
    return b.result()


def _ms(ns: int) -> str:
    return f"{ns / 1e6:10.3f} ms"


def format_summary(s: Summary, detail: bool = False) -> str:
    """The table; `detail`: the shader ranking with each stage's hottest blocks and their SPIR-V.

    The values start in one column, LABEL_WIDTH or wider when a workload label needs it
    ("acceleration structure build" is as wide as the default): a label is never run into
    its count."""
    nested = [*s.workloads, *s.internal_workloads]
    width = max([LABEL_WIDTH, *(len(k) + 3 for k in nested)])     # (2 to indent, 1 to part)
    queue_width = max([LABEL_WIDTH - 4, *(len(q) + 2 for q in s.gpu_time_ns)])
    lines = []
    if s.processes:
        lines.append(f"{'processes':<{width}}{', '.join(s.processes)}")
    if s.gpus:
        lines.append(f"{'GPU':<{width}}{', '.join(s.gpus)}")
    lines.append(f"{'frames':<{width}}{s.frames}")
    lines.append(f"{'submits':<{width}}{s.submits}")
    lines.append(f"{'GPU render-stage events':<{width}}{s.gpu_events}")
    lines.append("workloads by type")
    for kind, n in sorted(s.workloads.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  {kind:<{width - 2}}{n}")
    lines.append("GPU time per queue")
    for queue, ns in sorted(s.gpu_time_ns.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  {queue:<{queue_width}}{_ms(ns)}")
    if s.internal_events:
        lines.append(f"{'tool (internal) events':<{width}}{s.internal_events}, "
                     f"{sum(s.internal_time_ns.values()) / 1e6:.3f} ms, not counted above")
        for name, n in sorted(s.internal_workloads.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {name:<{width - 2}}{n}")
    if s.events_without_metadata or s.metadata_without_events:
        lines.append(f"{'GPU events without metadata':<{width}}{s.events_without_metadata}")
        if s.metadata_without_events is not None:
            lines.append(f"{'metadata without GPU events':<{width}}{s.metadata_without_events}")
    if s.longest:
        lines.append(f"{len(s.longest)} longest workloads")
        for w in s.longest:
            labels = f"  [{w.labels}]" if w.labels else ""
            lines.append(f"  {_ms(w.duration_ns)}  {w.queue:<13} {w.stage:<20} {w.name}{labels}")
    if s.operators:
        lines.append("data-graph operators (modelled on the emulated GPU)")
        lines.append(f"  {'operator':<{width - 2}}{'count':>6} {'ops':>12} {'bytes':>12} {'time':>12}")
        for name, (n, ops, nbytes, ns) in sorted(s.operators.items(), key=lambda kv: (-kv[1][3], kv[0])):
            lines.append(f"  {name:<{width - 2}}{n:>6} {ops:>12} {nbytes:>12} {ns:>10.1f} ns")
    if s.shaders is not None:
        lines += shader_cost.format_report(s.shaders, detail)
    return "\n".join(lines)

"""A session read as what CI compares: its workloads, matched by identity, and its canonical form.

Role: `read_run(target)` reads a session folder (merging it first when its merged trace is
missing or older than its inputs, as `tessera report` does) or a merged trace, with the
report's reader (summary.SummaryBuilder over schemas.perfetto.read_packets: the same queue and
stage interning, the same `internal` rule) extended by what CI needs: each GPU event's process
(its interned graphics context) and every arg, and the application tracks' submit slices (their
`frame` and `tags` give each workload its frame).

A **workload** is one tagged piece of GPU work in one submit: the GPU events of one
(process, submit, tag) (a render pass's binning and main phases are one workload). Its
**identity** is what it is, never its numbers: (process name, frame, label path, kind, order
among the workloads of that process, frame, label path and kind). Tag and submit numbers,
pids, handles and timestamps are not part of it: they change between runs or builds
(docs/ci.md "What is compared").

`canonical(run)`: the merged trace with everything that is not deterministic taken out
(timestamps, pids, raw handles, packet sequence ids and track uuids), as plain JSON-able
values: what the determinism test compares and what `tessera diff` compares workload by
workload. Single-threaded; no state outside one call.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tessera.schemas import slice_args as table
from tessera.schemas.counters import ARM_GPUS
from tessera.schemas.perfetto import SEQ_INCREMENTAL_STATE_CLEARED, TracePacket

from ..naming import app_labels, split_stack, submit_of, tag_of
from ..slice_args import HANDLE_ARGS
from ..summary import INTERNAL_KEY, SUBMIT_SLICE, Summary, SummaryBuilder, first_values
from .. import shaders as shader_cost

# The submit slices' and frame instants' raw handles (hostd/merge.py `_submits`, `_frames`): not compared.
TRACK_HANDLE_ARGS = frozenset({"device", "command_buffers"})
# The GPU slice args that are numbers the run chose, not what the work is: kept in the canonical
# form (a run gives the same ones again) but never part of a workload's identity or diff.
JOIN_ARGS = frozenset({table.TAG.label, table.SUBMIT.label, table.LABEL.label, table.LABEL_STACK.label})
LABEL_PATH_SEPARATOR = " / "
ARM_GPU_NAMES = frozenset(ARM_GPUS.values())
_SLICE_BEGIN = pb.TrackEvent.TYPE_SLICE_BEGIN
_INSTANT = pb.TrackEvent.TYPE_INSTANT


class RunError(Exception):
    """The target cannot be read as a session (one line, for the command)."""


@dataclass
class Workload:
    process: str                        # the process name (`name#2` for a second process of that name)
    frame: int | None
    labels: tuple[str, ...]             # the application's labels, outermost first
    kind: str
    ordinal: int = 0                    # order among the workloads of the same (process, frame, labels, kind)
    name: str = ""
    internal: bool = False              # the tool's own work (summary.py INTERNAL_KEY)
    tag: int | None = None
    submit: int | None = None
    events: int = 0
    queue_ns: dict[str, int] = field(default_factory=dict)     # GPU time per queue
    stage_ns: dict[str, int] = field(default_factory=dict)     # GPU time per stage
    args: dict[str, str] = field(default_factory=dict)         # the first event's args, handles and join args out
    # every event's args by stage (a render pass's binning and main slices may carry values of
    # their own, such as per-phase counters): what diff compares
    stage_args: dict[str, dict[str, str]] = field(default_factory=dict)
    order: tuple = ()                                           # where it ran: (process, submit, first event)

    @property
    def label_path(self) -> str:
        return LABEL_PATH_SEPARATOR.join(self.labels)

    @property
    def key(self) -> tuple:
        return (self.process, self.frame, self.label_path, self.kind, self.ordinal)

    @property
    def gpu_ns(self) -> int:
        return sum(self.queue_ns.values())

    @property
    def shader(self) -> dict[str, Any] | None:
        """Its shader cost (tessera run --instrument), as the slice args carry it (shaders.from_args)."""
        return shader_cost.from_args(self.args)

    def describe(self) -> str:
        """How a person finds it: the label path (else its name), kind, frame, order."""
        where = self.label_path or self.name
        nth = f" #{self.ordinal + 1}" if self.ordinal else ""
        frame = f"frame {self.frame}" if self.frame is not None else "no frame"
        return f"{where} [{self.kind.replace('_', ' ')}{nth}, {frame}, {self.process}]"


@dataclass
class Run:
    source: Path                        # the merged trace read
    summary: Summary
    processes: list[str]
    workloads: list[Workload]
    events: list[dict[str, Any]]        # per GPU event, canonical (no timestamp, pid, handles)
    slices: list[dict[str, Any]]        # the application tracks' slices and instants, canonical
    problems: list[str] = field(default_factory=list)
    # per GPU event (parallel to `events`): what the canonical form leaves out, for the tables:
    # (pid, timestamp in trace ns, its workload)
    placed: list[tuple[int | None, int, Workload]] = field(default_factory=list)
    # the Arm GPU (`Mali-G720`) whose counter descriptor the trace holds (hostd/counters.py Tracks
    # writes it once per GPU): whose equations derive the counters of its GPU slices' `Mali…` args
    counter_gpu: str | None = None

    def frame_ns(self) -> dict[int | None, dict[str, int]]:
        """The application's GPU time per frame and queue (the tool's own work left out)."""
        out: dict[int | None, dict[str, int]] = {}
        for w in self.workloads:
            if w.internal:
                continue
            per = out.setdefault(w.frame, {})
            for q, ns in w.queue_ns.items():
                per[q] = per.get(q, 0) + ns
        return out


def _annotation(a) -> Any:
    which = a.WhichOneof("value")
    return getattr(a, which) if which else None


class _RunBuilder(SummaryBuilder):
    """The report's reader, also keeping each GPU event with its process and every arg, and the
    application tracks' slices."""

    def __init__(self) -> None:
        super().__init__(top=0, shaders=False)
        self._contexts: dict[tuple[int, int], int] = {}     # (sequence, context iid) -> pid
        self._track_pid: dict[int, int | None] = {}
        self._track_name: dict[int, str] = {}
        self.names: dict[int, str] = {}                      # pid -> process name, in order of appearance
        self.first_submit: dict[tuple[int, int], int] = {}   # (pid, tag) -> lowest submit that ran it
        self.frame_of: dict[tuple[int, int], int] = {}       # (pid, submit) -> frame
        self.raw_events: list[tuple] = []
        self.slices: list[tuple] = []
        self.counter_gpu: str | None = None

    def feed(self, p: TracePacket, extras: dict[str, str] | None = None) -> None:
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED:
            for key in [k for k in self._contexts if k[0] == seq]:
                del self._contexts[key]
        if p.HasField("interned_data"):
            for gc in p.interned_data.graphics_contexts:
                self._contexts[(seq, gc.iid)] = gc.pid
                self.names.setdefault(gc.pid, "")
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("process"):
                self._track_pid[d.uuid] = d.process.pid
                if not self.names.get(d.process.pid):
                    self.names[d.process.pid] = d.process.process_name or "?"
            else:
                self._track_pid[d.uuid] = self._track_pid.get(d.parent_uuid)
            self._track_name[d.uuid] = d.name
        if p.HasField("track_event"):
            self._track_event(p.track_event)
        if self.counter_gpu is None and p.HasField("gpu_counter_event") \
                and p.gpu_counter_event.HasField("counter_descriptor"):
            self.counter_gpu = next((b.name for b in p.gpu_counter_event.counter_descriptor.blocks
                                     if b.name in ARM_GPU_NAMES), None)
        ex = None
        if p.HasField("gpu_render_stage_event"):
            ex = first_values(p.gpu_render_stage_event)
        super().feed(p, ex)
        if ex is not None:
            e = p.gpu_render_stage_event
            pid = self._contexts.get((seq, e.context)) if e.HasField("context") else None
            specs = self._specs
            queue = specs.get((seq, e.hw_queue_iid)) or f"queue {e.hw_queue_iid}"
            stage = specs.get((seq, e.stage_iid)) or f"stage {e.stage_iid}"
            self.raw_events.append((pid, queue, stage, e.name, e.duration, e.render_pass_instance_id,
                                    e.event_id, seq, ex, p.timestamp))

    def _track_event(self, e) -> None:
        if e.type not in (_SLICE_BEGIN, _INSTANT):
            return
        args = {a.name: _annotation(a) for a in e.debug_annotations}
        pid = self._track_pid.get(e.track_uuid)
        if e.type == _SLICE_BEGIN and e.name == SUBMIT_SLICE and pid is not None:
            submit, frame = args.get("submit"), args.get("frame")
            try:
                tags = json.loads(args.get("tags") or "[]")
            except ValueError:
                tags = []
            if isinstance(submit, int):
                if isinstance(frame, int):
                    self.frame_of[(pid, submit)] = frame
                for tag in tags if isinstance(tags, list) else ():
                    if isinstance(tag, int):
                        key = (pid, tag)
                        self.first_submit[key] = min(submit, self.first_submit.get(key, submit))
        shown = {k: v for k, v in args.items() if k not in TRACK_HANDLE_ARGS}
        self.slices.append((pid, self._track_name.get(e.track_uuid, ""), e.type, e.name, shown))


def _process_names(names: dict[int, str]) -> dict[int | None, str]:
    """pid -> the process's identity: its name, `name#2` for the second process of that name (in
    order of appearance), `?` for GPU work of no known process."""
    seen: dict[str, int] = {}
    out: dict[int | None, str] = {None: "?"}
    for pid, name in names.items():
        name = name or "?"
        seen[name] = seen.get(name, 0) + 1
        out[pid] = name if seen[name] == 1 else f"{name}#{seen[name]}"
    return out


def _labels(ex: dict[str, str]) -> tuple[str, ...]:
    """The application's labels, outermost first, by the slice name's rule (naming.app_labels): the
    metadata's `labels` arg, else the driver's label stack without the layer's labels."""
    text = ex.get("labels")
    meta = None
    if text:
        try:
            meta = {"labels": json.loads(text)}
        except ValueError:
            meta = {"labels": [text]}
    return tuple(app_labels(meta, split_stack(ex.get(table.LABEL_STACK.label))))


def _build(b: _RunBuilder, source: Path, problems: list[str]) -> Run:
    summary = b.result()
    names = _process_names(b.names)
    only = next(iter(b.names)) if len(b.names) == 1 else None     # the merge's rule: one process owns all
    groups: dict[tuple, Workload] = {}
    events: list[dict[str, Any]] = []
    placed: list[tuple[int | None, int, Workload]] = []
    label_lists: dict[str, tuple[str, ...]] = {}        # the `labels` arg's text -> its labels (decoded once)
    for i, (pid, queue, stage, name, duration, rp, event_id, seq, ex, ts) in enumerate(b.raw_events):
        if pid is None:
            pid = only
        stack = split_stack(ex.get(table.LABEL_STACK.label))
        tag = tag_of(ex.get(table.LABEL.label), stack)
        submit_text = ex.get(table.SUBMIT.label)
        submit = int(submit_text) if submit_text and submit_text.isdigit() else submit_of(stack)
        if submit is None and tag is not None:
            submit = b.first_submit.get((pid, tag))
        frame = b.frame_of.get((pid, submit)) if submit is not None else None
        args = {k: v for k, v in ex.items() if k not in HANDLE_ARGS}
        process = names.get(pid, "?")
        events.append({"process": process, "queue": queue, "stage": stage, "name": name, "duration_ns": duration,
                       "render_pass_instance_id": rp, "event_id": event_id, "frame": frame, "args": args})
        key = (pid, submit, tag) if tag is not None else (pid, "event", seq, rp or f"e{event_id}")
        w = groups.get(key)
        if w is None:
            kind = ex.get(table.KIND_FIELD) or ex.get(table.WORKLOAD.label, "").replace(" ", "_") or stage
            text = ex.get("labels")
            labels = label_lists.get(text) if text else None
            if labels is None:
                labels = _labels(ex)
                if text:
                    label_lists[text] = labels
            w = groups[key] = Workload(process, frame, labels, kind, name=name or stage,
                                       internal=INTERNAL_KEY in ex, tag=tag, submit=submit,
                                       args={k: v for k, v in args.items() if k not in JOIN_ARGS},
                                       order=(process, submit if submit is not None else -1, i))
        placed.append((pid, ts, w))
        if stage not in w.stage_args:
            w.stage_args[stage] = w.args if not w.stage_args else {k: v for k, v in args.items() if k not in JOIN_ARGS}
        w.events += 1
        w.queue_ns[queue] = w.queue_ns.get(queue, 0) + duration
        w.stage_ns[stage] = w.stage_ns.get(stage, 0) + duration
    workloads = sorted(groups.values(), key=lambda w: (w.frame if w.frame is not None else -1, w.order))
    counts: dict[tuple, int] = {}
    for w in workloads:
        k = (w.process, w.frame, w.labels, w.kind)
        w.ordinal = counts.get(k, 0)
        counts[k] = w.ordinal + 1
    slices = [{"process": names.get(pid, "?"), "track": track, "type": type_, "name": name, "args": args}
              for pid, track, type_, name, args in b.slices]
    slices.sort(key=lambda s: (s["process"], s["track"], s["args"].get("submit", -1), str(s["name"])))
    processes = [names[pid] for pid in b.names]
    return Run(source, summary, processes, workloads, events, slices, problems, placed, b.counter_gpu)


def read_trace(path: Path) -> Run:
    """A merged trace read as a Run; damaged stretches are read past and listed in `problems`
    (the report's rule); a file with no packet is a RunError."""
    from tessera.schemas.files import InputError, check_input
    from tessera.schemas.perfetto import read_packets

    problems: list[str] = []
    b = _RunBuilder()
    try:
        check_input(path, "merged trace")
        packets = 0
        for p in read_packets(path, problem=lambda off, msg: problems.append(f"{path}: at byte {off}: {msg}")):
            b.feed(p)
            packets += 1
    except InputError as e:
        raise RunError(str(e)) from None
    except OSError as e:
        raise RunError(f"{path}: cannot read it ({e.strerror or e})") from None
    if not packets:
        raise RunError(f"{path}: no Perfetto packet in it (an empty file or not a trace?)")
    return _build(b, Path(path), problems)


def merged_trace(target: Path) -> tuple[Path, list[str]]:
    """(the merged trace of `target`, problems of the merge if one ran): a session folder's
    `merged.perfetto-trace`, merged first when missing or older than its inputs (the rule of
    `tessera report`), else `target` itself."""
    from ..cli import _newer
    from ..merge import MERGED_NAME, MergeError, merge_session

    target = Path(target)
    if not target.exists():
        raise RunError(f"{target}: no such session folder or trace")
    if not target.is_dir():
        return target, []
    merged = target / MERGED_NAME
    if merged.exists() and _newer(merged, target):
        return merged, []
    try:
        result = merge_session(target)
    except MergeError as e:
        raise RunError(f"{target}: {e}") from None
    return result.output, list(result.problems)


def read_run(target: Path) -> Run:
    """A session folder or merged trace, read as a Run."""
    trace, problems = merged_trace(target)
    run = read_trace(trace)
    run.problems[:0] = problems
    return run


def canonical(run: Run) -> dict[str, Any]:
    """What two runs of one deterministic program have equal (JSON-able): the GPU events in
    trace order with every field but their timestamp, pid and handles; the workloads by
    identity; the application tracks' slices and instants without times, pids or handles."""
    return {
        "processes": run.processes,
        "gpu_events": run.events,
        "workloads": [{"key": list(w.key), "name": w.name, "internal": w.internal, "events": w.events,
                       "queue_ns": w.queue_ns, "stage_ns": w.stage_ns, "args": w.args} for w in run.workloads],
        "slices": run.slices,
        "summary": {"frames": run.summary.frames, "submits": run.summary.submits,
                    "gpu_events": run.summary.gpu_events, "workloads": run.summary.workloads,
                    "gpu_time_ns": run.summary.gpu_time_ns, "internal_time_ns": run.summary.internal_time_ns},
    }


def differences(a: dict[str, Any], b: dict[str, Any], limit: int = 10, path: str = "") -> list[str]:
    """Where two canonical forms differ (paths and values), at most `limit` lines: for a test's
    failure message."""
    out: list[str] = []

    def walk(x, y, at: str) -> None:
        if len(out) >= limit or x == y:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y), key=str):
                walk(x.get(k, "<absent>"), y.get(k, "<absent>"), f"{at}.{k}")
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                out.append(f"{at}: {len(x)} items vs {len(y)}")
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{at}[{i}]")
        else:
            out.append(f"{at}: {x!r} != {y!r}")

    walk(a, b, path)
    return out

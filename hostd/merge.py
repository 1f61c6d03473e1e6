"""Merge a session folder into one new Perfetto trace.

Role: `merge_session(session_dir)` finds, recursively, the layer's session
logs (`*.tessera-log`) and spool files (`*.spool`), read into an in-memory
MetadataIndex (metadata.py), and the emulated driver's `gpu*.perfetto-trace`
files, streamed packet by packet (memory stays bounded whatever their size).
It writes `merged.perfetto-trace` (docs/hostd.md "Merge rules"):

  - every packet of the GPU traces, unmodified packets copied byte for byte;
  - each render-stage event joined to its workload metadata by the tagID of
    its `Labels` extra_data (`t<N>`) in its process (pid of the event's
    graphics context), with the ANNEX of `s<M>.t<N>` merged over it when the
    `Label stack` holds an `s<M>` label; it keeps all its fields, gets a
    readable `name` (naming.py) and one extra_data per metadata field, plus
    `tag` and `submit`, each fact once (slice_args.py: the driver's entries
    the metadata states or supersedes are dropped, disagreements marked, raw
    handles last; the args come from `_ARG_SOURCES`, in its order, their
    names from schemas/slice_args.py); `Labels` stays exactly as the driver wrote it; an event
    with no metadata gets `metadata = missing` and keeps the driver's view;
  - one process track per application process (tracks.py): per queue a
    `vkQueueSubmit (<queue>)` track of submit slices, each holding one child
    slice per workload it ran, the render passes' with
    `correlation_id_str = "rp:#N"` matching the GPU's render_pass_instance_id;
    a `Frames` track of instants. Layer times are MONOTONIC_RAW, converted to
    BOOTTIME with the clock_sync of the HELLO before them.
  - Mali counters (the driver's `Mali<name>` args and descriptor): GPU counter tracks, one
    descriptor per GPU (the drivers' descriptor packets are not copied) and samples at every
    workload boundary of all its processes (counters.py `Tracks`);
  - with per-region counters (tessera run --regions): a render pass's GPU
    slices get `Regions <counter>` args (max, mean, hottest region;
    region_args.py), and the heatmaps are written to SESSION_DIR/regions/
    (regions.write_heatmaps; MergeResult.heatmaps).

Events without metadata and metadata without events are counted in the
MergeResult (and the summary), never dropped. Single-threaded, no state
outside one call.

Streaming keeps the per-packet work in `gpu_trace`'s loop (locals, the
sequence map looked up inline); a render-stage packet that holds nothing else
the summary reads goes to `SummaryBuilder.gpu_event` directly.

The join notes what each joined workload's child slice on the submit tracks
shows (name, kind, render pass?, and which ANNEX the metadata included): the
tracks reuse the note when their submit's metadata is the same, and decode
the WORKLOAD again only otherwise (`_remember`, `_child`).
"""
from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tessera.schemas import slice_args as table
from tessera.schemas import staged
from tessera.schemas.files import OutputError
from tessera.schemas.labels import tag_label
from tessera.schemas.perfetto import (LABEL_STACK_KEY, LABELS_KEY, SEQ_INCREMENTAL_STATE_CLEARED,
                                      TracePacket, iter_raw, varint)

from .metadata import MetadataIndex, ProcessMeta, load
from . import arm_inputs, region_args, shaders
from .counters import Tracks
from .naming import app_labels, arg_value, describe, slice_name, split_stack, submit_of, tag_of
from tessera.schemas.protowire import key as field_key
from .slice_args import HANDLE_ARGS, WORKLOAD_KEY, reconcile
from .summary import (FRAMES_TRACK, MISSING_KEY, MISSING_VALUE, SUBMIT_SLICE, SUMMARY_READS, Summary, SummaryBuilder,
                      first_values)
from .traceio import TraceOut
from .tracks import TrackWriter

MERGED_NAME = "merged.perfetto-trace"
NOMINAL_SUBMIT_NS = 10_000      # a submit slice's length when the layer did not measure it (SUBMIT.duration_ns)
PROGRESS_THRESHOLD = 32 << 20   # GPU trace bytes above which progress is shown by default
MAX_EXAMPLES = 5
# Field keys of what the join encodes itself, from the descriptors (protowire.py).
_EXTRA_DATA_FIELD = field_key(pb.GpuRenderStageEvent, "extra_data", "message")
_NAME_FIELD = field_key(pb.GpuRenderStageEvent, "name", "bytes")
_EXTRA_NAME = field_key(pb.GpuRenderStageEvent.ExtraData, "name", "bytes")
_EXTRA_VALUE = field_key(pb.GpuRenderStageEvent.ExtraData, "value", "bytes")
# Names of the args the join derives (schemas/slice_args.py).
_TAG, _SUBMIT, _LAYER_TWIN = table.TAG.label, table.SUBMIT.label, table.LAYER_TWIN.label


def _string_field(tag: bytes, text: str) -> bytes:
    data = text.encode("utf-8")
    return tag + varint(len(data)) + data


def _extra_data(name: str, value: str) -> bytes:
    """One encoded GpuRenderStageEvent.extra_data entry (ExtraData name, value)."""
    inner = _string_field(_EXTRA_NAME, name) + _string_field(_EXTRA_VALUE, value)
    return _EXTRA_DATA_FIELD + varint(len(inner)) + inner


class MergeError(Exception):
    """The session cannot be merged (nothing to merge, output not writable…)."""


@dataclass
class Inputs:
    logs: list[Path] = field(default_factory=list)
    spools: list[Path] = field(default_factory=list)
    gpu_traces: list[Path] = field(default_factory=list)
    arm: list[Path] = field(default_factory=list)    # Arm GPU Timeline: *.metadata, session.arm-log (arm_inputs.py)
    problems: list[str] = field(default_factory=list)  # inputs by name that are not files (a folder, a FIFO…)


@dataclass
class MergeResult:
    output: Path
    inputs: Inputs
    gpu_events: int = 0
    events_with_metadata: int = 0
    events_without_metadata: int = 0
    metadata_without_events: int = 0
    processes: int = 0
    submits: int = 0
    frames: int = 0
    problems: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)    # a few unmatched events / workloads, for the report
    # pid -> GPU events of a process that sent no layer metadata at all: the layer never loaded there
    events_without_layer: dict[int, int] = field(default_factory=dict)
    summary: Summary = field(default_factory=Summary)
    heatmaps: list[Path] = field(default_factory=list)   # per-region counters' PNGs written (regions.py)


def _input_name(name: str) -> bool:
    return (name.endswith((".tessera-log", ".spool")) or name.startswith("gpu") and name.endswith(".perfetto-trace")
            or arm_inputs.is_arm_input(Path(name)))


def find_inputs(session_dir: Path) -> Inputs:
    """The inputs of a merge under `session_dir`; one named like an input that is not a regular
    file (a folder, a FIFO, a device: never opened, a FIFO would block) is listed in `problems`.
    What processes that ended left staged joins its file first, and the blocks they reserved past its end are
    given back once no writer has it open (tessera.schemas.staged)."""
    inputs = Inputs()
    inputs.problems += staged.adopt(session_dir).problems
    for path in sorted(Path(session_dir).rglob("*")):
        if not path.is_file():
            if _input_name(path.name):
                what = "a folder" if path.is_dir() else "not a regular file"
                inputs.problems.append(f"{path}: {what}, not a session file; skipped")
            continue
        if path.name.endswith(".tessera-log"):
            inputs.logs.append(path)
        elif path.name.endswith(".spool"):
            inputs.spools.append(path)
        elif path.name.startswith("gpu") and path.name.endswith(".perfetto-trace"):
            inputs.gpu_traces.append(path)
        elif arm_inputs.is_arm_input(path):
            inputs.arm.append(path)
    for path in inputs.gpu_traces + inputs.spools:
        staged.release_reserved(path)
    return inputs


class _Progress:
    def __init__(self, total: int, enabled: bool, stream=None) -> None:
        self.total = max(total, 1)
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._last = 0.0
        self._shown = False

    def update(self, done: int, events: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.5:
            return
        self._last = now
        self._shown = True
        end = "\r" if self.stream.isatty() else "\n"
        self.stream.write(f"tessera merge: {100 * done // self.total:3d}% of the GPU trace, {events} events{end}")
        self.stream.flush()

    def done(self, events: int) -> None:
        if self._shown:
            self.stream.write(f"tessera merge: 100% of the GPU trace, {events} events\n")
            self.stream.flush()


class _Merger:
    def __init__(self, index: MetadataIndex, out: TraceOut, result: MergeResult, top: int) -> None:
        self.index = index
        self.out = out
        self.r = result
        self.summary = SummaryBuilder(top)
        self.counters = Tracks()                                      # GPU counter tracks (counters.py)
        self.contexts: dict[tuple[int, int], dict[int, int]] = {}   # (file, sequence) -> context iid -> pid
        self.specs: dict[tuple[int, int, int], str] = {}            # (file, sequence, iid) -> queue/stage name
        self.seqmap: dict[tuple[int, int], int] = {}                # (file, sequence) -> sequence in the output
        self.used: set[int] = set()
        self.matched: dict[int, dict[int, tuple]] = {}              # pid -> tag joined to a GPU event -> its child slice
        self._slices: dict[tuple, tuple] = {}                        # one tuple per distinct child slice (see _child)
        self._entries: dict[tuple[str, str], bytes] = {}             # (name, value) -> encoded extra_data entry
        self._last: tuple | None = None                              # the last join, reused (see _event)
        self._shaders: dict[int, shaders.ShaderIndex] = {}           # pid -> its INSTRUMENTATION/SHADER
        self.rp_links: dict[tuple[int, int | None, int], list[int]] = {}
        self.rp_seen: set[tuple[int, int]] = set()
        only = list(index.processes)
        self.default_pid = only[0] if len(only) == 1 else None

    def emit(self, packet: TracePacket, raw: bytes | None = None, extras: dict[str, str] | None = None) -> None:
        if raw is None:
            self.out.packet(packet)
        else:
            self.out.raw(raw)
        self.summary.feed(packet, extras)

    def emit_raw(self, field: bytes, type_: int, track: int, name: str | None) -> None:
        """A TrackEvent packet tracks.py encoded itself (TrackWriter's raw_sink)."""
        self.out.raw(field)
        self.summary.track_event(type_, track, name)

    # -- the GPU traces, streamed ------------------------------------------
    def gpu_trace(self, fi: int, path: Path, progress: _Progress, done_before: int) -> None:
        contexts, specs, seqmap = self.contexts, self.specs, self.seqmap
        out, summary, join, counters = self.out, self.summary, self._event, self.counters
        show = progress.enabled
        def problem(offset: int, message: str) -> None:
            self.r.problems.append(f"{path}: at byte {offset}: {message}")

        try:
            for buf, start, body, end, offset in iter_raw(path, problem=problem):
                p = TracePacket()
                try:
                    p.ParseFromString(buf[body:end])
                except Exception as e:  # protobuf DecodeError
                    self.r.problems.append(f"{path}: undecodable packet ending at byte {offset} ({e}); skipped")
                    continue
                seq = p.trusted_packet_sequence_id
                out_seq = seqmap.get((fi, seq))
                if out_seq is None:
                    out_seq = self._out_sequence(fi, seq)
                cleared = p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED
                if cleared or p.incremental_state_cleared:
                    contexts[(fi, seq)] = {}
                interned = p.HasField("interned_data")
                if interned:
                    ctx = contexts.setdefault((fi, seq), {})
                    for gc in p.interned_data.graphics_contexts:
                        ctx[gc.iid] = gc.pid
                    for spec in p.interned_data.gpu_specifications:
                        specs[(fi, seq, spec.iid)] = spec.name
                if p.HasField("gpu_render_stage_event"):
                    e = p.gpu_render_stage_event
                    if counters.wants(out_seq):      # the driver's counters, before the join adds args
                        counters.event(out_seq, p.timestamp, e)
                    try:
                        extras = join(fi, seq, e)
                    except Exception as x:  # noqa: BLE001 - one event's metadata never costs the merge
                        self.r.problems.append(f"{path}: GPU event {e.event_id} ending at byte {offset}: "
                                               f"cannot join its metadata ({type(x).__name__}: {x}); kept as is")
                        extras = first_values(e)
                    if show:
                        progress.update(done_before + offset, self.r.gpu_events)
                    p.trusted_packet_sequence_id = out_seq
                    out.packet(p)
                    if interned or cleared:
                        summary.feed(p, extras)
                    else:       # all that feed() would do with this packet
                        summary.gpu_event(out_seq, e, extras)
                else:
                    if p.HasField("gpu_counter_event") and p.gpu_counter_event.HasField("counter_descriptor"):
                        counters.descriptor(out_seq, p.gpu_counter_event)   # written once per GPU, with its samples
                        continue
                    if out_seq != seq:
                        p.trusted_packet_sequence_id = out_seq
                        self.emit(p)
                    else:
                        self.emit(p, buf[start:end])
        except OSError as e:
            self.r.problems.append(f"{path}: cannot read ({e})")

    def _out_sequence(self, fi: int, seq: int) -> int:
        out = self.seqmap.get((fi, seq))
        if out is None:
            out = seq
            if out in self.used:      # another GPU trace file used this id: give this one a fresh id
                out = max(self.used) + 1
            self.used.add(out)
            self.seqmap[(fi, seq)] = out
        return out

    def _event(self, fi: int, seq: int, e) -> dict[str, str]:
        """Join one render-stage event to its metadata, in place; returns its extra_data as
        name -> first value, for the summary: all of it for an event without metadata, else the
        SUMMARY_READS names (one dict shared by the events of one join: not to be changed).

        What the join adds (name, extra_data) depends only on the process and the driver's
        extra_data (Labels and Label stack give tag and submit; the names and values decide
        what slice_args.reconcile keeps of the driver's view; the index does not change), so
        it is built once as the encoded fields of a partial event (the args of each of
        _ARG_SOURCES in turn, the common ones kept encoded in `_entries`, then name) and merged
        in with one MergeFromString (repeated extra_data appended, name set: the same message
        as building it field by field); when a driver entry is dropped or renamed, the event's
        extra_data is cut there first and the partial event starts with the driver's entries
        after it that stay (the Labels and Label stack before it are never encoded again).
        The binning and main phases of a render pass are consecutive and share it (`_last`,
        keyed by pid and the driver's entries)."""
        self.r.gpu_events += 1
        pid = self.contexts.get((fi, seq), {}).get(e.context) if e.HasField("context") else None
        if pid is None:
            pid = self.default_pid
        ex = first_values(e)
        n = len(e.extra_data)
        names = tuple(ex)
        key = (pid, n, names, ex)         # the names in order, then the values (dict equality)
        if self._last is not None and self._last[0] == key:
            _, tag, submit, add, reads, cut = self._last
        else:
            stack = split_stack(ex.get(LABEL_STACK_KEY))
            tag = tag_of(ex.get(LABELS_KEY), stack)
            submit = submit_of(stack)
            proc = self.index.processes.get(pid) if pid is not None else None
            if proc is None and self.index.unowned:     # Arm .metadata without a pid (arm_inputs.adopt)
                proc = arm_inputs.adopt(self.index, pid)
            meta = proc.workload(tag, submit) if proc is not None and tag is not None else None
            if meta is None:
                return self._missing(fi, seq, e, ex, pid, proc, tag, stack)
            if not meta:
                key = None    # then the name depends on more than the key (the driver's view): not reused
            name, child_name = self._names(fi, seq, e, ex, meta, stack, tag)
            # Each fact once (slice_args.py): the event's extra_data is cut at the first driver
            # entry dropped or renamed (`cut`); what stays of it after that point is written again.
            changed, fields = reconcile(ex, meta)
            cut, driver = _cut(e, n, ex, names, changed)
            if changed and n != len(ex):    # a name twice: ex does not say what the entries were, not reused
                key = None
            join = _Join(pid, proc, tag, submit, ex, meta, changed, fields, driver)
            parts = []
            entries = self._entries
            for source, common in _ARG_SOURCES:
                args = source(self, join)
                if common:
                    for arg in args:      # (name, value): the key of its encoded entry in _entries
                        field = entries.get(arg)
                        parts.append(field if field is not None else self._entry(*arg))
                else:
                    parts += [_extra_data(k, v) for k, v in args]
            parts.append(_string_field(_NAME_FIELD, name))
            add = b"".join(parts)
            self._remember(pid, proc, tag, submit, meta, child_name)
            reads = _summary_reads(join)
            self._last = (key, tag, submit, add, reads, cut) if key is not None else None
        if cut is not None:
            if cut:
                del e.extra_data[cut:]
            else:
                e.ClearField("extra_data")
        e.MergeFromString(add)
        self.r.events_with_metadata += 1
        if e.render_pass_instance_id and (pid, e.render_pass_instance_id) not in self.rp_seen:
            self.rp_seen.add((pid, e.render_pass_instance_id))
            self.rp_links.setdefault((pid, submit, tag), []).append(e.render_pass_instance_id)
        return reads

    def _fallback(self, fi: int, seq: int, e, ex: dict[str, str]) -> tuple[str, str]:
        """(stage name, the slice's name from the driver's view): for an event without metadata."""
        stage = self.specs.get((fi, seq, e.stage_iid), "")
        return stage, e.name or ex.get(WORKLOAD_KEY) or (stage[:1].upper() + stage[1:]) or "GPU work"

    def _missing(self, fi: int, seq: int, e, ex: dict[str, str], pid: int | None, proc: ProcessMeta | None,
                 tag: int | None, stack: list[str]) -> dict[str, str]:
        """An event the join found no metadata for: named from the driver's view, marked, counted."""
        stage, fallback = self._fallback(fi, seq, e, ex)
        e.name = slice_name(None, stack, fallback)
        self.r.events_without_metadata += 1
        if proc is None and pid is not None:
            self.r.events_without_layer[pid] = self.r.events_without_layer.get(pid, 0) + 1
        d = e.extra_data.add()
        d.name, d.value = MISSING_KEY, MISSING_VALUE
        ex.setdefault(MISSING_KEY, MISSING_VALUE)
        if len(self.r.examples) < MAX_EXAMPLES:
            why = ("no Labels tag" if tag is None else "no process for its graphics context" if proc is None
                   else f"no WORKLOAD for t{tag} in pid {pid}")
            self.r.examples.append(f"GPU event {e.event_id} ({stage or 'stage ?'}): {why}")
        return ex

    def _names(self, fi: int, seq: int, e, ex: dict[str, str], meta: dict[str, Any], stack: list[str],
               tag: int) -> tuple[str, str]:
        """(the GPU slice's name, the submit track's child slice's name) of a joined event."""
        own = app_labels(meta, [])
        if own:       # the metadata's own label names both the GPU slice and the submit's child slice
            return own[-1], own[-1]
        fallback = self._fallback(fi, seq, e, ex)[1] if not meta else ""   # only for an empty WORKLOAD
        return slice_name(meta, stack, fallback), (describe(meta) if meta else tag_label(tag))

    # -- the application's tracks -------------------------------------------
    def app_tracks(self) -> None:
        seq = max(self.used | {0}) + 1
        w = TrackWriter(self.emit, seq, self.emit_raw)
        for pid in sorted(self.index.processes):
            proc = self.index.processes[pid]
            self.r.processes += 1
            ptrack = w.process(pid, proc.process)
            self._submits(w, ptrack, proc)
            self._frames(w, ptrack, proc)
            matched = self.matched.get(pid, {})
            unmatched = [t for t in proc.workloads if t not in matched]
            self.r.metadata_without_events += len(unmatched)
            for t in unmatched[:max(0, MAX_EXAMPLES - len(self.r.examples))]:
                self.r.examples.append(f"WORKLOAD t{t} of {proc.process or '?'}[{pid}]: no GPU event")

    def _entry(self, name: str, value: str) -> bytes:
        """One encoded GpuRenderStageEvent.extra_data entry; the common ones are kept."""
        field = self._entries.get((name, value))
        if field is None:
            field = _extra_data(name, value)
            if len(self._entries) < 1 << 16:
                self._entries[(name, value)] = field
        return field

    def _remember(self, pid: int, proc: ProcessMeta, tag: int, submit: int | None, meta: dict[str, Any],
                  name: str) -> None:
        """Note that `tag` was joined, with what its child slice on the submit track will show, so
        the tracks need not decode its WORKLOAD again: (the annex's submit or None, name, kind,
        render pass?). Equal tuples are shared (most workloads of a session look alike)."""
        kind = meta.get("kind", "unknown")
        child = ((submit if (submit, tag) in proc.annexes else None), name, kind, kind == "render_pass")
        try:
            child = self._slices.setdefault(child, child) if len(self._slices) < 1 << 16 else child
        except TypeError:       # a kind that is not hashable (a JSON list or object): not shared
            pass
        self.matched.setdefault(pid, {})[tag] = child

    def _child(self, proc: ProcessMeta, sid: int, tag: int, joined: dict[int, tuple]) -> tuple[str, Any, bool]:
        """Name, kind and render pass? of the child slice of workload `tag` in submit `sid`: what
        the join noted when it used the same metadata (no annex, or this submit's), else from the
        WORKLOAD (and ANNEX) decoded again."""
        child = joined.get(tag)
        if child is not None and child[0] == (sid if (sid, tag) in proc.annexes else None):
            return child[1], child[2], child[3]
        meta = proc.workload(tag, sid)
        return (slice_name(meta, [], tag_label(tag)), (meta or {}).get("kind", "unknown"),
                bool(meta) and meta.get("kind") == "render_pass")

    def _rp_link(self, pid: int, submit: int, tag: int) -> str | None:
        links = self.rp_links.get((pid, submit, tag)) or self.rp_links.get((pid, None, tag))
        return f"rp:#{links.pop(0)}" if links else None

    def _submits(self, w: TrackWriter, ptrack: int, proc: ProcessMeta) -> None:
        by_queue: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
        for sid, s in proc.submits.items():
            if isinstance(s.get("boot_ns"), int):
                by_queue.setdefault(str(s.get("queue", "?")), []).append((s["boot_ns"], sid, s))
            else:
                self.r.problems.append(f"SUBMIT s{sid} of pid {proc.pid} has no time; not on the timeline")
        joined = self.matched.get(proc.pid, {})
        for queue in sorted(by_queue):
            submits = sorted(by_queue[queue], key=lambda x: (x[0], x[1]))
            track = w.track(ptrack, f"{SUBMIT_SLICE} ({queue})")
            for i, (ts, sid, s) in enumerate(submits):
                try:    # everything that could fail, before the first packet of the submit is written
                    measured = s.get("duration_ns")
                    dur = measured if isinstance(measured, int) and measured > 0 else NOMINAL_SUBMIT_NS
                    if i + 1 < len(submits):
                        dur = max(1, min(dur, submits[i + 1][0] - ts))
                    tags = s.get("tags")
                    tags = [t for t in tags if isinstance(t, int)] if isinstance(tags, list) else []
                    args = {"submit": sid, "queue": queue, "tags": arg_value(tags)}
                    if isinstance(s.get("frame"), int):
                        args["frame"] = s["frame"]
                    # raw handles after the meaningful args, as on the GPU slices
                    args["device"] = str(s.get("device", ""))
                    args["command_buffers"] = arg_value(s.get("command_buffers", []))
                    step = dur // len(tags) if tags else 0
                    children = []
                    for k, tag in enumerate(tags):
                        name, kind, render_pass = self._child(proc, sid, tag, joined)
                        link = self._rp_link(proc.pid, sid, tag) if render_pass else None
                        children.append((ts + k * step, name, {"tag": tag, "kind": arg_value(kind)}, link))
                except Exception as x:  # noqa: BLE001 - one submit never costs the merge
                    self.r.problems.append(f"SUBMIT s{sid} of pid {proc.pid}: cannot draw it "
                                           f"({type(x).__name__}: {x}); not on the timeline")
                    continue
                self.r.submits += 1
                w.begin(track, ts, SUBMIT_SLICE, args)
                for start, name, child, link in children:
                    w.begin(track, start, name, child, correlation=link)
                    w.end(track, start + step)
                w.end(track, ts + dur)

    def _frames(self, w: TrackWriter, ptrack: int, proc: ProcessMeta) -> None:
        frames = sorted((f["boot_ns"], n, f) for n, f in proc.frames.items() if isinstance(f.get("boot_ns"), int))
        if not frames:
            return
        track = w.track(ptrack, FRAMES_TRACK)
        for ts, n, f in frames:
            self.r.frames += 1
            args = {k: v for k, v in f.items() if k in ("frame", "queue", "device", "source")}
            w.instant(track, ts, f"Frame {n}", args)


def _cut(e, n: int, ex: dict[str, str], names: tuple[str, ...], changed: dict[str, str | None]
         ) -> tuple[int | None, list[tuple[str, str]]]:
    """(where the event's extra_data is cut, the driver's entries from there on) when reconcile
    dropped or renamed some (`changed`, in ex's order), else (None, []); 0 when a name comes twice
    (ex does not say what the entries were: all are written again)."""
    if not changed:
        return None, []
    if n == len(ex):        # no name twice (n: the event's entries): they are ex's, in order
        cut = names.index(next(iter(changed)))
        return cut, [(k, ex[k]) for k in names[cut:]]
    return 0, [(d.name, d.value) for d in e.extra_data]


# ---- the join's arg sources ------------------------------------------------------------------
class _Join(NamedTuple):
    """One event's join: what its arg sources read."""
    pid: int | None
    proc: ProcessMeta
    tag: int
    submit: int | None
    ex: dict[str, str]                  # the driver's entries: name -> first value
    meta: dict[str, Any]                # the WORKLOAD, with its ANNEX merged over it
    changed: dict[str, str | None]      # slice_args.reconcile: driver entry -> new name, or None to drop it
    fields: dict[str, str | None]       # slice_args.reconcile: metadata field -> arg name, or None to leave out
    driver: list[tuple[str, str]]       # the driver's entries from the cut on, to write again


Args = list[tuple[str, str]]     # (name, value) pairs, in order


def _summary_reads(j: _Join) -> dict[str, str]:
    """What the summary reads of a joined event (SUMMARY_READS), the first value of each name: the
    driver's entries come first in the event, so theirs win over the layer's fields written under
    their own names (_metadata_fields); the same for every event of the join."""
    meta, fields, ex = j.meta, j.fields, j.ex
    reads = {}
    for k in SUMMARY_READS:
        v = ex.get(k)
        if v is None and k in meta and fields.get(k, k) is k:
            v = meta[k]
            v = v if v.__class__ is str else arg_value(v)
        if v is not None:
            reads[k] = v
    return reads


def _driver_entries(m: _Merger, j: _Join) -> Args:
    """What stays of the driver's entries after the cut, renamed where the layer disagrees."""
    get = j.changed.get
    out = []
    for k, v in j.driver:
        k = get(k, k)
        if k is not None:
            out.append((k, v))
    return out


def _metadata_fields(m: _Merger, j: _Join) -> Args:
    """The layer's fields under their own names (`layer <field>` where a driver entry of that name
    stays), but for those reconcile leaves out and the raw handles (_handles)."""
    ex, changed, fields = j.ex, j.changed, j.fields
    out = []
    for k, value in j.meta.items():
        arg = fields.get(k, k)
        if arg is k:
            if k in ex and changed.get(k, k) is not None:     # a driver entry of that name stays
                k = _LAYER_TWIN.format(field=k)
        elif arg is None or arg in HANDLE_ARGS:
            continue
        else:
            k = arg
        out.append((k, value if value.__class__ is str else arg_value(value)))
    return out


def _not_named(j: _Join, args: Args) -> Args:
    """`args` but those the driver or the layer already has an arg of that name for."""
    ex, meta = j.ex, j.meta
    return [(k, v) for k, v in args if k not in ex and k not in meta]


def _join_keys(m: _Merger, j: _Join) -> Args:
    """The workload's tag and the submit whose ANNEX the join used, unless the driver or the layer
    has an arg of that name (as _not_named)."""
    ex, meta = j.ex, j.meta
    out = []
    for k, v in ((_TAG, j.tag), (_SUBMIT, j.submit)):
        if v is not None and k not in ex and k not in meta:
            out.append((k, str(v)))
    return out


def _shader_cost(m: _Merger, j: _Join) -> Args:
    """tessera run --instrument: the workload's shader cost (shaders.py)."""
    if not j.proc.instrumentation:
        return []
    index = m._shaders.get(j.pid)
    if index is None:
        index = m._shaders[j.pid] = shaders.ShaderIndex(j.proc)
    return _not_named(j, shaders.slice_args(index, j.tag, j.submit))


def _region_counters(m: _Merger, j: _Join) -> Args:
    """tessera run --regions: max, mean and hottest region per counter (region_args.py)."""
    if not j.proc.regions:
        return []
    return _not_named(j, region_args.slice_args(j.proc.regions, j.tag, j.submit))


def _handles(m: _Merger, j: _Join) -> Args:
    """The layer's raw Vulkan handles, grouped as `handles.<field>`, after every meaningful arg."""
    get = j.fields.get
    out = []
    for k, value in j.meta.items():
        arg = get(k)
        if arg in HANDLE_ARGS:
            out.append((arg, value if value.__class__ is str else arg_value(value)))
    return out


# The args a joined event gets after the driver's own, in this order: (source, whether its entries
# are common enough to keep encoded in _Merger._entries; shader cost and region counters are not).
_ARG_SOURCES = (
    (_driver_entries, True),
    (_metadata_fields, True),
    (_join_keys, True),
    (_shader_cost, False),
    (_region_counters, False),
    (_handles, True),
)


def merge_session(session_dir: Path, output: Path | None = None, *, top: int = 10, blocks: int = 5,
                  progress: bool | None = None, progress_stream=None,
                  on_status: Callable[[str], None] | None = None) -> MergeResult:
    """Merge SESSION_DIR into `output` (default SESSION_DIR/merged.perfetto-trace).

    `progress`: a progress line on stderr while streaming the GPU traces;
    None shows it only when they exceed PROGRESS_THRESHOLD bytes. `top` and
    `blocks`: the summary's longest workloads and its shader ranking
    (shaders.rank: the `top` most expensive draws and dispatches, `blocks`
    hottest blocks per stage), when the session was instrumented.

    The cyclic garbage collector is paused while it runs (and restored after):
    what the merge allocates is acyclic, freed by reference counting, and the
    collector's full passes over the index and the join state cost ~10% of a
    million-event merge for nothing. Cycles made meanwhile are collected after.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _merge_session(session_dir, output, top=top, blocks=blocks, progress=progress,
                              progress_stream=progress_stream, on_status=on_status)
    finally:
        if paused:
            gc.enable()


def _merge_session(session_dir: Path, output: Path | None, *, top: int, blocks: int, progress: bool | None,
                   progress_stream,
                   on_status: Callable[[str], None] | None) -> MergeResult:
    session_dir = Path(session_dir)
    if not session_dir.is_dir():
        raise MergeError(f"{session_dir} is not a folder")
    output = Path(output) if output else session_dir / MERGED_NAME
    inputs = find_inputs(session_dir)
    if not (inputs.logs or inputs.spools or inputs.gpu_traces or inputs.arm):
        raise MergeError(f"nothing to merge in {session_dir}: no *.tessera-log, *.spool, *.metadata, "
                         f"session.arm-log or gpu*.perfetto-trace"
                         + "".join(f"\n  {p}" for p in inputs.problems[:MAX_EXAMPLES]))
    result = MergeResult(output, inputs, problems=list(inputs.problems))
    index = load(inputs.logs + inputs.spools)
    if inputs.arm:
        clock = arm_inputs.trace_clock(inputs.gpu_traces)
        for path in inputs.arm:
            arm_inputs.load_arm_file(index, path, clock)
    result.problems.extend(index.problems)
    if not inputs.gpu_traces:
        result.problems.append(f"no gpu*.perfetto-trace in {session_dir}: only the application's tracks are written")
    total = sum(p.stat().st_size for p in inputs.gpu_traces)
    show = total >= PROGRESS_THRESHOLD if progress is None else progress
    bar = _Progress(total, show, progress_stream)
    try:
        out = TraceOut(output)
    except OSError as e:
        raise MergeError(str(e)) from None
    merger = _Merger(index, out, result, top)
    try:
        done = 0
        for fi, path in enumerate(inputs.gpu_traces):
            merger.gpu_trace(fi, path, bar, done)
            done += path.stat().st_size
        bar.done(result.gpu_events)
        for packet in merger.counters.encoded():   # GPU counter samples at the workloads' boundaries
            out.raw(packet)
        merger.app_tracks()
        out.commit()
    except OutputError as e:        # a full disk: one line, the inputs untouched, no temporary left
        out.abort()
        raise MergeError(str(e)) from None
    except BaseException:
        out.abort()
        raise
    result.summary = merger.summary.result()
    result.summary.metadata_without_events = result.metadata_without_events
    try:
        result.summary.shaders = shaders.rank(index, top, blocks)
    except Exception as x:  # noqa: BLE001 - the ranking never costs the merged trace
        result.problems.append(f"cannot rank the shader cost ({type(x).__name__}: {x})")
    if any(proc.regions for proc in index.processes.values()):
        from .regions import write_heatmaps   # Pillow, only for sessions run with --regions

        try:
            result.heatmaps = write_heatmaps(session_dir)
        except Exception as x:  # noqa: BLE001 - the pictures never cost the merged trace
            result.problems.append(f"cannot write the per-region heatmaps ({type(x).__name__}: {x})")
    return result


def format_result(r: MergeResult) -> str:
    """The merge's own report: inputs, joins, problems."""
    lines = [f"merged {len(r.inputs.gpu_traces)} GPU trace(s), {len(r.inputs.logs)} session log(s), "
             f"{len(r.inputs.spools)} spool file(s)"
             + (f", {len(r.inputs.arm)} Arm GPU Timeline file(s)" if r.inputs.arm else "") + f" into {r.output}",
             f"GPU events: {r.gpu_events} ({r.events_with_metadata} with metadata, "
             f"{r.events_without_metadata} without); metadata without GPU events: {r.metadata_without_events}"]
    lines += [f"  {x}" for x in r.examples]
    if r.problems:
        lines.append(f"{len(r.problems)} problem(s) in the inputs:")
        lines += [f"  {p}" for p in r.problems[:20]]
        if len(r.problems) > 20:
            lines.append(f"  … and {len(r.problems) - 20} more")
    return "\n".join(lines)

"""Mali counters of a session: per workload, per frame, as Perfetto GPU counter tracks and as Arm's CSV.

Role: the driver writes each GPU event's counters as `Mali<name>` args and its GPU's counter
descriptor in a packet after its trace's first (icd/counters.py); this module reads them back
(and, for a session of Arm's layer_gpu_profile on a device, arm_profile.py's counters).

  - `read_session(SESSION_DIR)`: every workload's counters (a render pass's binning and main
    phases summed) and every frame's, with the derived counters evaluated from the sums by Arm's
    equations (schemas/counters.py) — the reader `tessera counters`, `tessera report`, budgets (#29)
    and advice (#28) call;
  - `Tracks`: what the merge feeds each GPU event to, and the GpuCounterEvent packets it writes at
    the end: per GPU one descriptor and samples at every workload boundary of all its processes,
    each sample the counter's increment since the previous one (a phase's counts spread evenly over
    its duration), as Android's GPU counter producers report them ("backwards looking":
    trace_processor shows each value over the interval before its timestamp);
  - `write_csv`: the files Arm's `lglpy/comms/service_gpu_profile.py` writes (frame_NNNNN.csv per
    frame of workloads: Index, Workload type, counters…, Label; capture.csv of frames: Frame ID,
    counters…), values formatted as it formats them.

MaliGPUActiveCy of a workload or a frame is the union of its phases' time, in the GPU's cycles
(the ratio of the phases' MaliGPUActiveCy to their duration), never a sum: phases overlap.
Single-threaded; no state outside the objects a call makes.
"""
from __future__ import annotations

import csv
import io
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tessera.schemas import counters as C
from tessera.schemas import slice_args as A
from tessera.schemas.perfetto import PACKET_TAG, read_packets, varint
from tessera.schemas.protowire import key as field_key

from .naming import app_labels, split_stack, submit_of, tag_of

if TYPE_CHECKING:
    import numpy as np

PREFIX = A.COUNTER.label.partition("{")[0]           # "Mali": every counter arg starts with it
_WORKLOAD, _LABEL_STACK, _LABELS = A.WORKLOAD.label, A.LABEL_STACK.label, A.LABEL.label
_MEASURED = A.MEASURED.label
# The driver's workload class (schemas/slice_args.py WORKLOAD_CLASSES values) -> the workload type Arm's
# layer_gpu_profile sends (source/submit_visitor.cpp: its messages' `type`, the CSV's "Workload type");
# transfers by their image or buffer stage.
ARM_TYPES = {"render pass": "renderpass", "dispatch": "compute", "trace rays": "tracerays",
             "acceleration structure build": "as_build", "acceleration structure copy": "as_transfer"}
_IMAGE_STAGES = ("clear image", "copy image", "blit image", "resolve image")


@dataclass
class Phase:
    start_ns: int
    duration_ns: int
    stage: str
    counters: dict[str, float]


@dataclass
class Workload:
    """One workload as the GPU ran it: its phases (a render pass: binning and main), its counters."""
    index: int                     # order in the session (GPU start time)
    pid: int | None
    tag: int | None
    submit: int | None
    frame: int | None
    kind: str                      # the driver's Workload class
    labels: list[str]              # the application's debug labels, outermost first
    phases: list[Phase] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)
    type: str | None = None        # Arm's workload type as its layer sent it (arm_profile.py), else derived
    # the counters the backend measured (the slices' `Measured` arg, icd/measured_counters.py); the others modelled
    measured: list[str] = field(default_factory=list)

    @property
    def start_ns(self) -> int | None:
        return min(p.start_ns for p in self.phases) if self.phases else None

    @property
    def arm_type(self) -> str:
        if self.type is not None:
            return self.type
        t = ARM_TYPES.get(self.kind)
        if t is None:
            stage = self.phases[0].stage if self.phases else ""
            t = "image_transfer" if stage in _IMAGE_STAGES or "image" in stage else "buffer_transfer"
        return t


@dataclass
class Frame:
    frame: int
    workloads: list[Workload]
    counters: dict[str, float] = field(default_factory=dict)


@dataclass
class SessionCounters:
    gpu: C.GpuCounters | None              # None: no Tessera GPU trace with counters
    workloads: list[Workload]
    frames: list[Frame]
    source: str = "tessera"                # or "arm": Arm's layer_gpu_profile on a device (arm_profile.py)
    arm_columns: list[tuple[str, str]] = field(default_factory=list)   # "arm": its counters, its order

    def columns(self) -> list[tuple[str, str]]:
        """(machine name, Arm's layer's name) of Arm's layer_gpu_profile counters this GPU has, in its
        order: the CSV's counter columns (Arm's own data: the layer's counters as it sent them)."""
        if self.source == "arm":
            return self.arm_columns
        if self.gpu is None:
            return []
        return [(n, label) for n, label in C.ARM_PROFILE_COUNTERS if self.gpu.has(n)]

    @property
    def empty(self) -> bool:
        return not self.workloads and not self.frames

    def has(self, name: str) -> bool:
        """A counter this session shows."""
        if self.gpu is not None:
            return self.gpu.has(name)
        return any(name in w.counters for w in self.workloads) or any(name in f.counters for f in self.frames)

    @property
    def device(self) -> str:
        return f"{self.gpu.gpu} (emulated)" if self.gpu is not None else "Arm layer_gpu_profile (device)"


def _union_ns(phases: list[Phase]) -> int:
    total, end = 0, None
    for s, e in sorted((p.start_ns, p.start_ns + p.duration_ns) for p in phases):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def aggregate(gpu: C.GpuCounters, phases: list[Phase], config: dict[str, float]) -> dict[str, float]:
    """The counters of a set of phases: the measured and modelled ones summed, the busy ones
    (schemas/counters.py BUSY: GPU and queue active cycles) the union of the phases that count them,
    in cycles; then the derived ones evaluated on those."""
    sums: dict[str, float] = {}
    busy: dict[str, list] = {}          # name -> [cycles, ns, phases]
    for p in phases:
        for name, v in p.counters.items():
            if name in C.BUSY:
                b = busy.setdefault(name, [0.0, 0, []])
                b[0] += v
                b[1] += p.duration_ns
                b[2].append(p)
                continue
            c = gpu.counters.get(name)
            if c is not None and not c.derived and not c.constant:
                sums[name] = sums.get(name, 0) + v
    for name, (cycles, ns, counted) in busy.items():
        sums[name] = round(_union_ns(counted) * cycles / ns) if ns else cycles
    for name, among in C.MEASURED_ONLY.items():    # a partial sum is no value
        if name in sums and any(among in p.counters and name not in p.counters for p in phases):
            del sums[name]
    return gpu.derive(sums, config)


# ---- reading a session ------------------------------------------------------------------------
def _gpu_traces(session_dir: Path) -> list[Path]:
    return sorted(p for p in Path(session_dir).rglob("gpu*.perfetto-trace") if p.is_file())


def _descriptor_gpu(event) -> str | None:
    for block in event.counter_descriptor.blocks:
        if block.name in C.ARM_GPUS.values():
            return block.name
    return None


def _metadata(session_dir: Path):
    from .merge import find_inputs
    from .metadata import load

    inputs = find_inputs(session_dir)
    return load(inputs.logs + inputs.spools)


def read_session(session_dir: Path, shader_cores: int | None = None) -> SessionCounters:
    """Every workload's and frame's counters in SESSION_DIR (its gpu*.perfetto-trace files, and the
    layer's logs for frames and labels); when its GPU traces carry none, those Arm's
    layer_gpu_profile streamed into hostd (arm_profile.py). `shader_cores`:
    MALI_CONFIG_SHADER_CORE_COUNT (only the counters that read it need it)."""
    s = _read_traces(session_dir, shader_cores)
    if s.gpu is None:
        from .arm_profile import read_profiles

        arm = read_profiles(session_dir)
        if arm is not None:
            return arm
    return s


def _read_traces(session_dir: Path, shader_cores: int | None) -> SessionCounters:
    index = _metadata(session_dir)
    gpu: C.GpuCounters | None = None
    by_key: dict[tuple, Workload] = {}
    for fi, path in enumerate(_gpu_traces(session_dir)):
        contexts: dict[int, dict[int, int]] = {}
        specs: dict[tuple[int, int], str] = {}
        for p in read_packets(path):
            seq = p.trusted_packet_sequence_id
            if p.HasField("interned_data"):
                for ctx in p.interned_data.graphics_contexts:
                    contexts.setdefault(seq, {})[ctx.iid] = ctx.pid
                for s in p.interned_data.gpu_specifications:
                    specs[(seq, s.iid)] = s.name
            if p.HasField("gpu_counter_event") and p.gpu_counter_event.HasField("counter_descriptor"):
                name = _descriptor_gpu(p.gpu_counter_event)
                if name is not None:
                    gpu = C.for_gpu(name)
            if not p.HasField("gpu_render_stage_event"):
                continue
            e = p.gpu_render_stage_event
            ex: dict[str, str] = {}
            values: dict[str, float] = {}
            for d in e.extra_data:
                if d.name.startswith(PREFIX):
                    values[d.name] = float(d.value)
                else:
                    ex.setdefault(d.name, d.value)
            if not values:
                continue
            pid = contexts.get(seq, {}).get(e.context)
            stack = split_stack(ex.get(_LABEL_STACK))
            rp = e.render_pass_instance_id if e.HasField("render_pass_instance_id") else None
            key = (fi, seq, "rp", rp) if rp is not None else (fi, seq, "event", e.event_id)
            w = by_key.get(key)
            if w is None:
                tag, submit = tag_of(ex.get(_LABELS), stack), submit_of(stack)
                proc = index.processes.get(pid) if pid is not None else None
                if submit is None and proc is not None and tag is not None:
                    submit = proc.first_submit(tag)
                s = proc.submits.get(submit) if proc is not None and submit is not None else None
                frame = s.get("frame") if isinstance(s, dict) and isinstance(s.get("frame"), int) else None
                meta = proc.workload(tag, submit) if proc is not None and tag is not None else None
                w = by_key[key] = Workload(0, pid, tag, submit, frame, ex.get(_WORKLOAD, "unknown"),
                                           app_labels(meta, stack))
            w.phases.append(Phase(p.timestamp, e.duration, specs.get((seq, e.stage_iid), ""), values))
            if _MEASURED in ex:
                w.measured += [n for n in ex[_MEASURED].split(", ") if n and n not in w.measured]
    workloads = sorted(by_key.values(), key=lambda w: (w.start_ns or 0, w.pid or 0, w.tag or 0))
    frames: list[Frame] = []
    if gpu is not None:
        config = gpu.config(shader_cores or 0)
        by_frame: dict[int, list[Workload]] = {}
        for i, w in enumerate(workloads):
            w.index = i
            w.counters = aggregate(gpu, w.phases, config)
            by_frame.setdefault(w.frame if w.frame is not None else 0, []).append(w)
        for n in sorted(by_frame):
            ws = by_frame[n]
            frames.append(Frame(n, ws, aggregate(gpu, [p for w in ws for p in w.phases], config)))
    return SessionCounters(gpu, workloads, frames)


# ---- Arm's CSV (lglpy/comms/service_gpu_profile.py) --------------------------------------------
def _value(v: float | None) -> str:
    return f"{(v if v is not None else 0):0.2f}"


def workload_rows(s: SessionCounters, frame: Frame) -> Iterator[list[str]]:
    cols = s.columns()
    yield ["Index", "Workload type", *(label for _, label in cols), "Label"]
    for i, w in enumerate(frame.workloads):
        yield [str(i), w.arm_type, *(_value(w.counters.get(c)) for c, _ in cols), "|".join(w.labels)]


def frame_rows(s: SessionCounters) -> Iterator[list[str]]:
    cols = s.columns()
    yield ["Frame ID", *(label for _, label in cols)]
    for f in s.frames:
        yield [str(f.frame), *(_value(f.counters.get(c)) for c, _ in cols)]


def write_csv(s: SessionCounters, out_dir: Path, per: str) -> list[Path]:
    """Arm's files in `out_dir`: per workload one frame_NNNNN.csv per frame, per frame capture.csv.
    A counter the GPU has but a workload has no value of is written 0.00 (Arm's columns are fixed)."""
    from tessera.schemas.files import write_atomic

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if per == "frame":
        jobs = [(out_dir / "capture.csv", frame_rows(s))]
    else:
        jobs = [(out_dir / f"frame_{f.frame:05d}.csv", workload_rows(s, f)) for f in s.frames]
    for path, rows in jobs:
        buf = io.StringIO(newline="")
        csv.writer(buf).writerows(rows)
        write_atomic(path, buf.getvalue().encode("utf-8"))
        written.append(path)
    return written


def as_json(s: SessionCounters, per: str) -> dict[str, Any]:
    units = {c.name: c.units for c in s.gpu.shown()} if s.gpu else {}
    doc: dict[str, Any] = {"gpu": s.gpu.gpu if s.gpu else None, "source": s.source, "units": units}
    if per == "frame":
        doc["frames"] = [{"frame": f.frame, "workloads": len(f.workloads), "counters": f.counters} for f in s.frames]
    else:
        doc["workloads"] = [{"index": w.index, "frame": w.frame, "pid": w.pid, "tag": w.tag, "submit": w.submit,
                             "type": w.arm_type, "labels": w.labels, "start_ns": w.start_ns,
                             "counters": w.counters, "measured": w.measured} for w in s.workloads]
    return doc


# ---- Perfetto counter tracks, at merge ----------------------------------------------------------
# Field keys of the GpuCounterEvent packets written here, from the protos' descriptors (protowire.py).
_GC = pb.GpuCounterEvent.GpuCounter
_K_TIMESTAMP = field_key(pb.TracePacket, "timestamp", "varint")
_K_SEQUENCE = field_key(pb.TracePacket, "trusted_packet_sequence_id", "varint")
_K_EVENT = field_key(pb.TracePacket, "gpu_counter_event", "message")
_K_COUNTERS = field_key(pb.GpuCounterEvent, "counters", "message")
_K_ID = field_key(_GC, "counter_id", "varint")
_K_INT = field_key(_GC, "int_value", "varint")
_K_DOUBLE = varint(_GC.DESCRIPTOR.fields_by_name["double_value"].number << 3 | 1)   # fixed64 wire type
_DOUBLE = struct.Struct("<d")


class Tracks:
    """GPU counter tracks of the merged trace, as a device's producer gives them: one set per GPU for
    the whole session (every process's work on it counts), whatever packet sequences the GPU traces
    used. Fed each GPU trace's descriptor and events while the merge streams them; `encoded` then
    gives, per GPU, its descriptor packet and its samples (Trace.packet fields, the bytes protobuf
    writes; tests/hostd/test_counter_tracks.py compares them). trace_processor keys GPU counter
    specs by counter_id across the whole trace, so each GPU's descriptor is written once."""

    def __init__(self) -> None:
        self._gpus: dict[str, tuple[C.GpuCounters, Any, int]] = {}   # Arm GPU -> (counters, descriptor, sequence)
        self._seq_gpu: dict[int, str] = {}                            # sequence -> Arm GPU
        self._phases: dict[str, list[Phase]] = {}

    def descriptor(self, out_seq: int, event) -> None:
        name = _descriptor_gpu(event)
        if name is None:
            return
        self._seq_gpu[out_seq] = name
        if name not in self._gpus:
            d = pb.GpuCounterDescriptor()
            d.CopyFrom(event.counter_descriptor)
            self._gpus[name] = (C.for_gpu(name), d, out_seq)

    def wants(self, out_seq: int) -> bool:
        return out_seq in self._seq_gpu

    def event(self, out_seq: int, start_ns: int, e) -> None:
        values = {d.name: float(d.value) for d in e.extra_data if d.name.startswith(PREFIX)}
        if values:
            self._phases.setdefault(self._seq_gpu[out_seq], []).append(Phase(start_ns, e.duration, "", values))

    def encoded(self) -> Iterator[bytes]:
        for name, (gpu, descriptor, seq) in sorted(self._gpus.items()):
            phases = self._phases.get(name, [])
            times, columns = samples(gpu, phases, gpu.config(0)) if phases else ([], {})
            first = pb.TracePacket(timestamp=int(times[0]) if len(times) else 0, trusted_packet_sequence_id=seq)
            first.gpu_counter_event.counter_descriptor.CopyFrom(descriptor)
            yield pb.Trace(packet=[first]).SerializeToString()
            head = _K_SEQUENCE + varint(seq)
            keys = {s.name: _K_ID + varint(s.counter_id) for s in descriptor.specs}
            # each column's samples encoded as GpuCounter fields (b"" for no value), one encoding per
            # distinct value: a frame loop repeats its values
            rows = [_column(keys[n], values.tolist()) for n, values in columns.items() if n in keys]
            for i, ts in enumerate(times.tolist() if len(times) else []):
                event = b"".join([r[i] for r in rows])
                packet = _K_TIMESTAMP + varint(ts) + head + _K_EVENT + varint(len(event)) + event
                yield PACKET_TAG + varint(len(packet)) + packet

    def packets(self) -> Iterator[pb.TracePacket]:
        """The same packets as protobuf messages (tests, small traces)."""
        for raw in self.encoded():
            t = pb.Trace()
            t.ParseFromString(raw)
            yield t.packet[0]


def _column(k: bytes, values: list[float]) -> list[bytes]:
    """GpuCounter fields (counter_id `k`) of one counter's samples: int_value when the value is whole,
    else double_value; nothing for NaN (no value)."""
    memo: dict[float, bytes] = {}
    out = []
    for v in values:
        field = memo.get(v)
        if field is None:
            if v != v:
                field = b""
            else:
                body = k + (_K_INT + varint(int(v)) if v.is_integer() else _K_DOUBLE + _DOUBLE.pack(v))
                field = _K_COUNTERS + varint(len(body)) + body
            if len(memo) < 1 << 16:
                memo[v] = field
        out.append(field)
    return out


# Counter samples are also taken every SAMPLE_PERIOD_NS of emulated GPU time (1 ms), the period
# widened so that a session gets at most MAX_PERIOD_SAMPLES of them.
SAMPLE_PERIOD_NS = 1_000_000
MAX_PERIOD_SAMPLES = 100_000


def samples(gpu: C.GpuCounters, phases: list[Phase], config: dict[str, float]
            ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(timestamps, counter -> values) at every phase boundary and every SAMPLE_PERIOD_NS: each
    counter's increment over the interval since the previous sample (every phase active in it contributes its count x overlap /
    its duration), the derived counters evaluated on those by Arm's equations (NaN where an equation
    divides by zero); the first boundary gives every counter 0. Vectorised with numpy: a sweep of
    each counter's rate over the boundaries."""
    import numpy as np

    starts = np.fromiter((p.start_ns for p in phases), np.int64, len(phases))
    durs = np.fromiter((p.duration_ns for p in phases), np.int64, len(phases))
    bounds = np.unique(np.concatenate([starts, starts + durs]))
    if len(bounds) == 0:
        return bounds, {}
    # and at a fixed emulated period in between (idle time shows as zeros), at most MAX_PERIOD_SAMPLES
    period = max(SAMPLE_PERIOD_NS, -(-int(bounds[-1] - bounds[0]) // MAX_PERIOD_SAMPLES))
    ticks = np.arange(-(-int(bounds[0]) // period) * period, int(bounds[-1]), period, dtype=np.int64)
    bounds = np.unique(np.concatenate([bounds, ticks]))
    width = np.diff(bounds).astype(np.float64)
    i0, i1 = np.searchsorted(bounds, starts), np.searchsorted(bounds, starts + durs)
    live = durs > 0
    names = [c.name for c in gpu.shown() if not c.derived and c.name not in C.BUSY]

    def swept(per_phase: np.ndarray) -> np.ndarray:
        delta = np.zeros(len(bounds), np.float64)
        np.add.at(delta, i0[live], per_phase[live])
        np.add.at(delta, i1[live], -per_phase[live])
        return np.cumsum(delta)[:-1]

    safe = np.where(live, durs, 1).astype(np.float64)
    base: dict[str, np.ndarray] = {}
    present = {n for p in phases for n in p.counters}
    for n in names:
        if n in present:   # rounded to 1/1000: the sweep's float sums give 63.99999… for 64
            v = np.fromiter((p.counters.get(n, 0.0) for p in phases), np.float64, len(phases))
            base[n] = np.round(swept(v / safe) * width, 3)
    for n, among in C.MEASURED_ONLY.items():   # no value (no sample) while a phase without it runs
        if n in base:
            unknown = np.fromiter((among in p.counters and n not in p.counters for p in phases), np.float64,
                                  len(phases))
            if unknown.any():
                base[n] = np.where(swept(unknown / safe) * width > 0, np.nan, base[n])
    for n in C.BUSY & present:          # busy while any phase counting it runs: the union, in cycles
        cycles = np.fromiter((p.counters.get(n, 0.0) for p in phases), np.float64, len(phases))
        counts = live & np.fromiter((n in p.counters for p in phases), bool, len(phases))
        if counts.any():
            ratio = cycles[counts].sum() / durs[counts].sum()
            base[n] = np.round((swept(counts.astype(np.float64)) > 0.5) * width * ratio, 3)
    scope: dict[str, object] = {k: v for k, v in config.items() if v is not None}
    scope.update(base)
    with np.errstate(divide="ignore", invalid="ignore"):
        for c in gpu.counters.values():
            if c.derived and c.name not in scope:
                eq = gpu.equations[c.name]
                if all(n in scope for n in eq.names):
                    v = eval(eq._code, {"__builtins__": {}}, {n: scope[n] for n in eq.names})  # noqa: S307
                    v = np.where(np.isfinite(v), v, np.nan) * np.ones(len(width))
                    scope[c.name] = base[c.name] = v
    out = {n: np.concatenate([[0.0], v]) for n, v in base.items()}
    return bounds, out


# ---- tessera report ---------------------------------------------------------------------------
# The counters `tessera report` shows (those the GPU has), in this order.
HEADLINE = ("MaliGPUActiveCy", "MaliBinningQueueUtil", "MaliMainQueueUtil", "MaliCompQueueUtil",
            "MaliNonFragQueueUtil", "MaliFragQueueUtil", "MaliNonFragThread", "MaliFragThread",
            "MaliGeomTotalPrim", "MaliGeomVisiblePrim", "MaliExtBusRdBy", "MaliExtBusWrBy")


def headline(session_dir: Path) -> dict[str, Any] | None:
    """The session's headline counters: totals over its frames (utilizations over the whole session),
    and the frame count; None when its GPU traces carry no counters."""
    s = read_session(session_dir)
    if s.gpu is None or not s.workloads:
        return None
    total = aggregate(s.gpu, [p for w in s.workloads for p in w.phases], s.gpu.config(0))
    shown = [n for n in HEADLINE if n in total]
    measured = {n for w in s.workloads for n in w.measured}
    return {"gpu": s.gpu.gpu, "frames": len(s.frames), "workloads": len(s.workloads),
            "counters": {n: total[n] for n in shown},
            "units": {n: s.gpu.counters[n].units for n in shown},
            # measured by the backend in some workload (tessera run --counters measured); the rest modelled
            "measured": [n for n in shown if n in measured]}


def format_headline(h: dict[str, Any]) -> str:
    how = "measured where marked, modelled otherwise" if h["measured"] else "modelled"
    lines = [f"Mali counters ({h['gpu']}, {how}: docs/counters.md; `tessera counters` per workload or frame), "
             f"{h['workloads']} workloads in {h['frames']} frame(s):"]
    for name, v in h["counters"].items():
        unit = h["units"][name]
        text = f"{v:.1f} %" if unit == "percent" else f"{v:,.0f} {unit}"
        lines.append(f"  {name:<26} {text}" + ("   (measured)" if name in h["measured"] else ""))
    return "\n".join(lines)

"""The driver's Perfetto output: GPU render-stage events in `gpu.perfetto-trace`.

One packet sequence per process, laid out as docs/formats.md says: a first
packet with the clock snapshot and the interned queue/stage specifications
and graphics context, then one packet per workload phase. Packets are
buffered and appended at each flush (every queue submit), so the file is a
valid trace at all times; those the driver's C appends go through a stage
that outlives the process (tessera.schemas.staged: adopted by the next reader
if the process ends without writing it). Thread-safe: the timeline calls it
under its lock.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from tessera.schemas import staged
from tessera.schemas.files import private_folder
from tessera.schemas.labels import innermost_tag
from tessera.schemas.slice_args import LABEL, LABEL_STACK, TRANSFER

# tessera.schemas.perfetto and .event_packets, imported with the first GpuTrace: the protos take ~35 ms
# to load, which a program that never submits (vulkaninfo) should not pay at start-up.
pf = None
packets = None

QUEUES = {"non-fragment": 1, "fragment": 2, "transfer": 3}
# Categories by their InternedGpuRenderStageSpecification.RenderStageCategory names.
_GRAPHICS, _COMPUTE, _OTHER = "GRAPHICS", "COMPUTE", "OTHER"
# Render-stage names: Arm's driver vocabulary only, the names Arm's own trace reader accepts
# (lglpy raw_trace.py STAGE_REMAP, see docs/formats.md), so Arm's tools open every Tessera trace.
STAGES = {name: (10 + i, category) for i, (name, category) in enumerate([
    ("binning", _GRAPHICS), ("main", _GRAPHICS), ("compute", _COMPUTE), ("trace_rays", _COMPUTE),
    ("fill buffer", _OTHER), ("copy buffer", _OTHER), ("clear image", _OTHER),
    ("copy image", _OTHER), ("blit image", _OTHER), ("resolve image", _OTHER),
    # acceleration structures (vkapi/accel.py STAGES), Arm's driver names
    ("acceleration structure 'fast build' build", _COMPUTE), ("acceleration structure 'fast trace' build", _COMPUTE),
    ("acceleration structure update", _COMPUTE), ("acceleration structure copy to memory", _OTHER),
    ("acceleration structure copy from memory", _OTHER),
])}
# The timing model's finer transfer kinds, and the Arm stage each runs as; the finer kind stays
# in the event's extra_data under TRANSFER_KEY (arg names: schemas/slice_args.py).
ARM_STAGE = {"update buffer": "copy buffer", "copy buffer to image": "copy image",
             "copy image to buffer": "copy image", "tensor copy": "copy buffer"}
TRANSFER_KEY = TRANSFER.label
_LABELS_KEY, _LABEL_STACK_KEY = LABEL.label, LABEL_STACK.label
GRAPHICS_CONTEXT_IID = 1
SEQUENCE_BASE = 0x7E550000   # sequence id = base + pid (unique per process in one file)


def boottime_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)



class GpuTrace:
    def __init__(self, session_dir: Path, counters=None, gpu: str = "the emulated Mali") -> None:
        global pf, packets
        from tessera.schemas import perfetto as pf
        from . import event_packets as packets
        private_folder(session_dir)
        self.path = session_dir / "gpu.perfetto-trace"
        staged.adopt_target(self.path)   # what a process that ended left staged comes before this one's packets
        self.pid = os.getpid()
        self.sequence = (SEQUENCE_BASE + self.pid) & 0xFFFFFFFF
        self._writer = pf.PacketWriter(self.path)
        self._next_event = 1
        self._encoder = packets.EventEncoder(self.sequence, pf.SEQ_NEEDS_INCREMENTAL_STATE, GRAPHICS_CONTEXT_IID)
        self._transfer_entries = {stage: packets.extra_entry(TRANSFER_KEY, stage) for stage in ARM_STAGE}
        self._started = False
        self._write_failed = False
        self._counters = counters   # icd/counters.CounterModel: its descriptor follows the first packet
        self._gpu = gpu             # the GPU and the real device it reports (GpuProfile.description)

    def _start(self) -> None:
        p = pf.TracePacket()
        p.timestamp = boottime_ns()
        p.trusted_packet_sequence_id = self.sequence
        p.sequence_flags = pf.SEQ_INCREMENTAL_STATE_CLEARED
        p.first_packet_on_sequence = True
        snap = p.clock_snapshot
        snap.primary_trace_clock = pf.CLOCK_BOOTTIME
        for clock_id, clock in ((pf.CLOCK_BOOTTIME, time.CLOCK_BOOTTIME),
                                (pf.CLOCK_MONOTONIC_RAW, time.CLOCK_MONOTONIC_RAW),
                                (pf.CLOCK_MONOTONIC, time.CLOCK_MONOTONIC),
                                (pf.CLOCK_REALTIME, time.CLOCK_REALTIME)):
            snap.clocks.add(clock_id=clock_id, timestamp=time.clock_gettime_ns(clock))
        interned = p.interned_data
        for name, iid in QUEUES.items():
            interned.gpu_specifications.add(iid=iid, name=name, description=f"{name}{pf.QUEUE_OF}{self._gpu}")
        for name, (iid, category) in STAGES.items():
            interned.gpu_specifications.add(
                iid=iid, name=name, category=pf.pb.InternedGpuRenderStageSpecification.RenderStageCategory.Value(category))
        ctx = interned.graphics_contexts.add(iid=GRAPHICS_CONTEXT_IID, pid=self.pid)
        ctx.api = pf.pb.InternedGraphicsContext.VULKAN
        self._writer.write(p)
        if self._counters is not None:   # the GPU's counters, as a device's producer describes them
            d = pf.TracePacket()         # a packet of its own: clock_snapshot and gpu_counter_event are one oneof
            d.timestamp = p.timestamp
            d.trusted_packet_sequence_id = self.sequence
            self._counters.describe(d.gpu_counter_event)
            self._writer.write(d)
        self._started = True

    def args(self, stage: str, extra: dict[str, object], counters: dict[str, float] | None = None) -> bytes:
        """An event's args but its labels, encoded (`event`): the stage's transfer args, `extra`, then
        `counters` (its Mali counters, icd/counters.py), each cached apart (counters repeat from frame to
        frame even when `extra` holds lists, which are encoded each time)."""
        if not self._started:
            self._start()   # the encoder is made there
        entries = []
        transfer = self._transfer_entries.get(stage)
        if transfer is not None:
            entries.append(transfer)
        entries.append(self._encoder.extras(extra))
        if counters:
            encoded = getattr(counters, "encoded", None)   # icd/counters.Counts keeps its bytes
            if encoded is None:
                encoded = self._encoder.extras(counters)
                if hasattr(counters, "encoded"):
                    counters.encoded = encoded
            entries.append(encoded)
        return b"".join(entries)

    def event(self, *, start_ns: int, duration_ns: int, queue: str, stage: str, gpu_id: int, submission_id: int,
              command_buffer: int, labels: list[str], args: bytes, render_pass: tuple[int, int] | None = None) -> int:
        """Append one render-stage event; returns its event_id. `args`: `args(stage, …)`'s, written after
        its labels' (the innermost t<tag> label and the label stack)."""
        shape = self.shape(duration_ns=duration_ns, queue=queue, stage=stage, gpu_id=gpu_id,
                           command_buffer=command_buffer, args=args,
                           render_pass_handle=None if render_pass is None else render_pass[0])
        return self.emit(shape, start_ns, self.label_entries(labels, innermost_tag(labels)), submission_id,
                         None if render_pass is None else render_pass[1])

    def shape(self, *, duration_ns: int, queue: str, stage: str, gpu_id: int, command_buffer: int, args: bytes,
              render_pass_handle: int | None) -> "packets.EventShape":
        """What an event has that stays the same each time its workload is placed again (`emit`)."""
        if not self._started:
            self._start()
        return self._encoder.shape(duration=duration_ns, args=args, render_pass_handle=render_pass_handle,
                                   gpu=gpu_id, command_buffer=command_buffer, queue=QUEUES[queue],
                                   stage=STAGES[ARM_STAGE.get(stage, stage)][0])

    def label_entries(self, labels: list[str], tag: str | None) -> bytes:
        """An event's label args: its innermost t<tag> label (`tag`: innermost_tag(labels)) and its label stack."""
        if not labels:
            return b""
        stack = self._encoder.entry(_LABEL_STACK_KEY, " / ".join(labels))
        return stack if tag is None else self._encoder.entry(_LABELS_KEY, tag) + stack

    def constant_parts(self) -> tuple[bytes, ...]:
        """EventEncoder.constant_parts of this trace's label args (a native placement plan's header)."""
        if not self._started:
            self._start()
        return self._encoder.constant_parts(_LABELS_KEY, _LABEL_STACK_KEY)

    def emit_encoded(self, data: bytes, events: int) -> None:
        """Append `events` events encoded elsewhere (a native placement plan), their ids the next ones."""
        self._next_event += events
        if not self._write_failed:
            self._writer.write_framed(data)

    def emit(self, shape: "packets.EventShape", start_ns: int, labels: bytes, submission_id: int,
             render_pass_instance: int | None = None) -> int:
        """Append one render-stage event of `shape` (`shape`) starting at `start_ns`, with its label
        entries (`label_entries`); returns its event_id."""
        event_id = self._next_event
        self._next_event += 1
        if not self._write_failed:   # after a failed write nothing more is appended (flush)
            self._writer.write_framed(self._encoder.patch(shape, start_ns, event_id, labels, submission_id,
                                                          render_pass_instance))
        return event_id

    def flush(self) -> None:
        """Append the events so far. A write that fails (a full disk) costs the events not written, says
        so once in one line, and never the application: what is in the file stays a valid trace as far as
        it is whole (merge reads that far)."""
        try:
            self._writer.flush()
        except OSError as e:
            self.write_failed(e)

    def write_failed(self, e: OSError) -> None:
        """A write of the trace failed (here, or where events are appended in C: `appending_fd`): nothing more
        is appended; said once."""
        if not self._write_failed:
            self._write_failed = True
            sys.stderr.write(f"tessera: cannot write {self.path}: {e.strerror or e}; the GPU events from "
                             "here on are lost (what was written is kept)\n")

    def mark(self) -> int:
        """Where the next event goes until the next flush (`since`; icd/placed_submits.py's check)."""
        return self._writer.mark()

    def since(self, mark: int) -> bytes:
        """The packets appended after `mark` and not flushed yet."""
        return self._writer.since(mark)

    def appending_fd(self) -> int | None:
        """The file's descriptor, for appending whole packets elsewhere (icd/placed_submits.py) until this trace
        writes again: flushed first; None before the trace began or after a failed write."""
        if not self._started:
            return None
        self.flush()
        return None if self._write_failed else self._writer.fileno()

    def close(self) -> None:
        self._writer.close()

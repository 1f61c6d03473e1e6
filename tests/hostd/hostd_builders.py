"""Test inputs built by hand per docs/formats.md: the layer's frames and the driver's GPU trace.

Not production code: the layer and the emulated driver write these for real.
"""
from __future__ import annotations

from pathlib import Path

from tessera.schemas.frames import MessageType, encode
from tessera.schemas.perfetto import (CLOCK_BOOTTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_REALTIME,
                                      LABEL_STACK_KEY, LABELS_KEY, SEQ_INCREMENTAL_STATE_CLEARED,
                                      SEQ_NEEDS_INCREMENTAL_STATE, PacketWriter, TracePacket)
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

# Interned ids the builder's driver uses (queues and stages share one table).
QUEUES = {"non-fragment": 1, "fragment": 2, "transfer": 3}
STAGES = {"binning": 11, "main": 12, "compute": 13, "trace_rays": 14, "fill buffer": 15, "copy buffer": 16,
          "copy image": 17}

RAW0 = 1_000_000_000      # MONOTONIC_RAW at the clock_sync reading
BOOT0 = 5_000_000_000     # BOOTTIME at the same moment: offset +4 s


def hello(pid: int = 4242, process: str = "app", raw: int = RAW0, boot: int = BOOT0, protocol: int = 1) -> bytes:
    return encode(MessageType.HELLO, {"protocol": protocol, "pid": pid, "process": process, "layer": "0.1",
                                      "clock_sync": {"monotonic_raw_ns": raw, "boottime_ns": boot}})


def device(handle: str = "0xd1") -> bytes:
    return encode(MessageType.DEVICE, {"device": handle, "name": "Mali-G720 (emulated)", "vendor_id": 0x13B5,
                                       "api_version": "1.3.0"})


def workload(tag: int, kind: str, **fields) -> bytes:
    payload = {"kind": kind, "device": "0xd1", "command_buffer": "0xcb1", **fields}
    return encode(MessageType.WORKLOAD, payload, tag=tag)


def workloads(entries: list[dict], command_buffer: str = "0xcb1") -> bytes:
    """A WORKLOADS batch (protocol 3): entries are {"tag": N, "kind": ..., ...}."""
    return encode(MessageType.WORKLOADS, {"device": "0xd1", "command_buffer": command_buffer, "workloads": entries})


def recorded_again(pairs: list[tuple[int, int]]) -> bytes:
    """A RECORDED_AGAIN (protocol 5): each (tag, earlier) pair describes tag as earlier."""
    return encode(MessageType.RECORDED_AGAIN, {"tags": [list(p) for p in pairs]})


def submit(sid: int, time_ns: int, tags: list[int], queue: str = "0xq1", **fields) -> bytes:
    payload = {"device": "0xd1", "queue": queue, "time_ns": time_ns, "command_buffers": ["0xcb1"], "tags": tags,
               **fields}
    return encode(MessageType.SUBMIT, payload, sequence=sid)


def annex(sid: int, tag: int, **fields) -> bytes:
    return encode(MessageType.ANNEX, fields, tag=tag, sequence=sid)


def frame(n: int, time_ns: int) -> bytes:
    return encode(MessageType.FRAME, {"frame": n, "time_ns": time_ns, "source": "present"})


class GpuTrace:
    """Writes gpu.perfetto-trace as the emulated driver does (one sequence per process)."""

    def __init__(self, path: Path, pid: int = 4242, sequence: int | None = None) -> None:
        self.w = PacketWriter(path)
        self.pid = pid
        self.seq = sequence if sequence is not None else 1000 + pid
        self.next_id = 1
        p = TracePacket()
        p.trusted_packet_sequence_id = self.seq
        p.first_packet_on_sequence = True
        p.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED
        snap = p.clock_snapshot
        for cid, t in ((CLOCK_BOOTTIME, BOOT0), (CLOCK_MONOTONIC_RAW, RAW0), (CLOCK_MONOTONIC, RAW0),
                       (CLOCK_REALTIME, 1_700_000_000_000_000_000)):
            c = snap.clocks.add()
            c.clock_id, c.timestamp = cid, t
        snap.primary_trace_clock = CLOCK_BOOTTIME
        for name, iid in (*QUEUES.items(), *STAGES.items()):
            s = p.interned_data.gpu_specifications.add()
            s.iid, s.name = iid, name
        gc = p.interned_data.graphics_contexts.add()
        gc.iid, gc.pid, gc.api = 1, pid, pb.InternedGraphicsContext.VULKAN
        self.w.write(p)

    def event(self, ts: int, duration: int, queue: str, stage: str, labels: str | None = None,
              stack: list[str] | None = None, rp: int | None = None, extra: dict[str, str] | None = None,
              submission: int = 1) -> int:
        p = TracePacket()
        p.trusted_packet_sequence_id = self.seq
        p.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE
        p.timestamp = ts
        e = p.gpu_render_stage_event
        e.event_id = self.next_id
        self.next_id += 1
        e.duration = duration
        e.hw_queue_iid = QUEUES[queue]
        e.stage_iid = STAGES[stage]
        e.context = 1
        e.submission_id = submission
        e.command_buffer_handle = 0xCB1
        if rp is not None:
            e.render_pass_handle = 0x9A55
            e.render_pass_instance_id = rp
        entries = {}
        if labels is not None:
            entries[LABELS_KEY] = labels
        if stack is not None:
            entries[LABEL_STACK_KEY] = " / ".join(stack)
        entries.update(extra or {})
        for k, v in entries.items():
            d = e.extra_data.add()
            d.name, d.value = k, v
        self.w.write(p)
        return e.event_id

    def close(self) -> None:
        self.w.close()


PIPES = ("fma", "cvt", "sfu", "ls", "tex", "var")


def stage(name: str, blocks: list[list[int]]) -> dict:
    """One stage of an INSTRUMENTATION action: rows [index, executions, fma, cvt, sfu, ls, tex, var];
    totals summed from them as the layer does (threads: the executions of every block)."""
    totals = {p: sum(b[2 + i] for b in blocks) for i, p in enumerate(PIPES)}
    totals["threads"] = sum(b[1] for b in blocks)
    return {"stage": name, "totals": totals, "blocks": blocks}


def action(result_index: int, stages: list[dict], command: str = "vkCmdDraw", draw: int | None = None,
           pipeline: str | None = "0xp1") -> dict:
    a = {"result_index": result_index, "command": command, "stages": stages}
    if draw is not None:
        a["draw"] = draw
    if pipeline is not None:
        a["pipeline"] = pipeline
    return a


def instrumentation(sid: int, tag: int, actions: list[dict], device: str = "0xd1") -> bytes:
    return encode(MessageType.INSTRUMENTATION, {"device": device, "actions": actions}, tag=tag, sequence=sid)


def shader(pipeline: str, stage_name: str, blocks: list[dict], entry: str = "main", device: str = "0xd1") -> bytes:
    return encode(MessageType.SHADER, {"device": device, "pipeline": pipeline, "stage": stage_name, "entry": entry,
                                       "blocks": blocks})

"""Perfetto traces: streaming packet writer and reader, and the import rules
the trace processor applies to GPU render-stage events.

A Perfetto trace file is a `Trace` message: field 1 (`packet`) repeated, each
a length-delimited `TracePacket`. Appending one encoded field per packet
keeps the file a valid trace after every write, so a crash loses at most the
packet being written, and readers stream it without loading it whole.

`check_render_stages()` applies the rules of the trace processor's GPU
render-stage importer (FACTS.md): an event without `event_id` is dropped; a
`hw_queue_iid`/`stage_iid` must resolve to an interned spec on the same
`trusted_packet_sequence_id`; interned data needs SEQ_INCREMENTAL_STATE_CLEARED
first and later packets SEQ_NEEDS_INCREMENTAL_STATE; timestamps need a clock
snapshot (or BOOTTIME).
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TracePacket = pb.TracePacket
SEQ_INCREMENTAL_STATE_CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
SEQ_NEEDS_INCREMENTAL_STATE = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
CLOCK_BOOTTIME = pb.BUILTIN_CLOCK_BOOTTIME
CLOCK_MONOTONIC_RAW = pb.BUILTIN_CLOCK_MONOTONIC_RAW
CLOCK_MONOTONIC = pb.BUILTIN_CLOCK_MONOTONIC
CLOCK_REALTIME = pb.BUILTIN_CLOCK_REALTIME

# Names Arm's trace parser accepts (FACTS.md) — the GPU trace uses these exactly.
QUEUE_NAMES = ("non-fragment", "fragment", "transfer")
LABELS_KEY = "Labels"          # extra_data name Arm's driver uses for the debug label
LABEL_STACK_KEY = "Label stack"  # the whole label stack, outermost first, joined by " / "

_PACKET_TAG = b"\x0a"  # Trace.packet: field 1, wire type 2


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def varint(n: int) -> bytes:
    """The base-128 varint of 0 <= n < 2**64 (protobuf's encoding of lengths and unsigned
    fields; a negative int64 is `varint(n & (2**64 - 1))`)."""
    if n < 0x80:
        return _ONE_BYTE[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def frame_packet(packet: TracePacket) -> bytes:
    """The bytes that append `packet` to a trace file."""
    body = packet.SerializeToString()
    return _PACKET_TAG + varint(len(body)) + body


class PacketWriter:
    """Appends packets to a trace file; `flush()` makes them durable to the OS.

    Opened with O_APPEND so several processes can share one file: each write
    is whole packets, and each process writes its own packet sequence.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._pending: list[bytes] = []

    def write(self, packet: TracePacket) -> None:
        self._pending.append(frame_packet(packet))

    def flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]

    def close(self) -> None:
        self.flush()
        os.close(self._fd)


class TraceFormatError(Exception):
    """The file is not a well-formed Perfetto trace at `offset`."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"at byte {offset}: {message}")
        self.offset = offset


def iter_raw(path: str | os.PathLike, chunk: int = 1 << 20) -> Iterator[tuple[bytes, int, int, int, int]]:
    """The packets of a trace file, raw, read `chunk` bytes at a time: per packet
    (buf, start, body, end, offset) where `buf[start:end]` is its `Trace.packet`
    field as it is in the file (tag, length, body: copy it to copy the packet byte
    for byte), `buf[body:end]` the encoded TracePacket, `offset` the file offset
    after it. Nothing is copied until the caller slices `buf`.

    The one implementation of the framing: `read_packets` and the merge
    (tessera.hostd.merge) stream through it.

    Raises TraceFormatError where the file stops being a trace (e.g. a packet cut
    short by a crash); everything before it has been yielded.
    """
    with open(path, "rb") as f:
        buf = b""
        base = 0            # file offset of buf[0]
        while True:
            data = f.read(chunk)
            if data:
                buf = buf + data if buf else data
            pos = 0
            n = len(buf)
            while pos < n:
                if buf[pos] != 0x0A:
                    raise TraceFormatError(base + pos, f"expected a Trace.packet field (0x0a), found 0x{buf[pos]:02x}")
                length = shift = 0
                i = pos + 1
                while i < n:
                    b = buf[i]
                    length |= (b & 0x7F) << shift
                    i += 1
                    if not b & 0x80:
                        break
                    shift += 7
                    if shift > 63:
                        raise TraceFormatError(base + pos, "packet length varint too long")
                else:
                    break       # the length continues in the next chunk
                end = i + length
                if end > n:
                    break       # so does the body
                yield buf, pos, i, end, base + end
                pos = end
            buf = buf[pos:]
            base += pos
            if not data:
                if buf:
                    raise TraceFormatError(base, f"trace ends inside a packet ({len(buf)} bytes)")
                return


def read_packets(path: str | os.PathLike, chunk: int = 1 << 20) -> Iterator[TracePacket]:
    """Stream the packets of a trace file (bounded memory: one packet at a time)."""
    for buf, start, body, end, offset in iter_raw(path, chunk):
        packet = TracePacket()
        try:
            packet.ParseFromString(buf[body:end])
        except Exception as e:  # protobuf's DecodeError
            raise TraceFormatError(offset - (end - start), f"undecodable TracePacket ({e})") from e
        yield packet


@dataclass
class RenderStageCheck:
    """What `check_render_stages` found: counts and every rule broken."""
    events: int = 0
    sequences: set[int] = field(default_factory=set)
    specs: dict[tuple[int, int], str] = field(default_factory=dict)   # (sequence, iid) -> queue/stage name
    clock_snapshots: int = 0
    problems: list[str] = field(default_factory=list)


def check_render_stages(packets) -> RenderStageCheck:
    """Apply the trace processor's import rules to the render-stage events of `packets`."""
    r = RenderStageCheck()
    cleared: set[int] = set()
    for i, p in enumerate(packets):
        seq = p.trusted_packet_sequence_id
        if p.HasField("clock_snapshot"):
            r.clock_snapshots += 1
        if p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED or p.incremental_state_cleared:
            cleared.add(seq)
            for key in [k for k in r.specs if k[0] == seq]:
                del r.specs[key]
        if p.HasField("interned_data"):
            if seq not in cleared:
                r.problems.append(f"packet {i}: interned data on sequence {seq} before SEQ_INCREMENTAL_STATE_CLEARED")
            for spec in p.interned_data.gpu_specifications:  # queues and stages share one table
                r.specs[(seq, spec.iid)] = spec.name
        if not p.HasField("gpu_render_stage_event"):
            continue
        e = p.gpu_render_stage_event
        r.events += 1
        r.sequences.add(seq)
        if not e.HasField("event_id"):
            r.problems.append(f"packet {i}: render-stage event without event_id (dropped by the importer)")
        if not p.sequence_flags & (SEQ_NEEDS_INCREMENTAL_STATE | SEQ_INCREMENTAL_STATE_CLEARED):
            r.problems.append(f"packet {i}: render-stage event without SEQ_NEEDS_INCREMENTAL_STATE")
        if not e.HasField("hw_queue_iid") or (seq, e.hw_queue_iid) not in r.specs:
            r.problems.append(f"packet {i}: hw_queue_iid {e.hw_queue_iid} not interned on sequence {seq} (dropped)")
        if e.HasField("stage_iid") and (seq, e.stage_iid) not in r.specs:
            r.problems.append(f"packet {i}: stage_iid {e.stage_iid} not interned on sequence {seq}")
        if not p.HasField("timestamp"):
            r.problems.append(f"packet {i}: render-stage event without timestamp")
    if r.events and not r.clock_snapshots:
        r.problems.append("no clock snapshot: timestamps cannot be placed on the trace clock")
    return r


def extra(event, name: str) -> str | None:
    """The value of one extra_data entry of a render-stage event."""
    for d in event.extra_data:
        if d.name == name:
            return d.value
    return None

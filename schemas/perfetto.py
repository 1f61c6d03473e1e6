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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from .files import open_append
from .readahead import ReadAhead
from .slice_args import LABEL, LABEL_STACK

TracePacket = pb.TracePacket
SEQ_INCREMENTAL_STATE_CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
SEQ_NEEDS_INCREMENTAL_STATE = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
CLOCK_BOOTTIME = pb.BUILTIN_CLOCK_BOOTTIME
CLOCK_MONOTONIC_RAW = pb.BUILTIN_CLOCK_MONOTONIC_RAW
CLOCK_MONOTONIC = pb.BUILTIN_CLOCK_MONOTONIC
CLOCK_REALTIME = pb.BUILTIN_CLOCK_REALTIME

# Names Arm's trace parser accepts (FACTS.md) — the GPU trace uses these exactly.
QUEUE_NAMES = ("non-fragment", "fragment", "transfer")
# A hardware queue's interned description: "<queue> hardware queue of <GPU>", the GPU as the driver's
# GpuProfile.description names it (icd/trace.py writes it, hostd/summary.py reads the GPU back).
QUEUE_OF = " hardware queue of "
LABELS_KEY = LABEL.label             # extra_data name Arm's driver uses for the debug label (slice_args.py)
LABEL_STACK_KEY = LABEL_STACK.label  # the whole label stack, outermost first, joined by " / "

PACKET_TAG = b"\x0a"  # Trace.packet: field 1, wire type 2


ONE_BYTE_VARINTS = [bytes((i,)) for i in range(0x80)]   # varint(n) for n < 0x80, by n


def varint(n: int) -> bytes:
    """The base-128 varint of 0 <= n < 2**64 (protobuf's encoding of lengths and unsigned
    fields; a negative int64 is `varint(n & (2**64 - 1))`)."""
    if n < 0x80:
        return ONE_BYTE_VARINTS[n]
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
    return PACKET_TAG + varint(len(body)) + body


class PacketWriter:
    """Appends packets to a trace file; `flush()` makes them durable to the OS.

    Opened with O_APPEND so several processes can share one file (files.open_append): each write
    is whole packets, and each process writes its own packet sequence.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._fd = open_append(self.path)
        self._pending: list[bytes] = []

    def write(self, packet: TracePacket) -> None:
        self._pending.append(frame_packet(packet))

    def write_framed(self, data: bytes) -> None:
        """Append bytes already framed as `frame_packet` frames them."""
        self._pending.append(data)

    def flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]

    def mark(self) -> int:
        """Where the next packet goes among those not flushed yet (`since`)."""
        return len(self._pending)

    def since(self, mark: int) -> bytes:
        """The framed packets written after `mark`, not flushed yet."""
        return b"".join(self._pending[mark:])

    def fileno(self) -> int:
        """The descriptor (O_APPEND): whole packets may be appended through it while nothing is pending here."""
        return self._fd

    def close(self) -> None:
        self.flush()
        os.close(self._fd)


class TraceFormatError(Exception):
    """The file is not a well-formed Perfetto trace at `offset`."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"at byte {offset}: {message}")
        self.offset = offset


MAX_PACKET = 256 << 20      # a longer Trace.packet length is taken for damage
Problem = Callable[[int, str], None]    # (file offset, what is wrong)


def _header(r: ReadAhead, rel: int) -> tuple[int, int] | None:
    """(header bytes, body length) of a well-formed Trace.packet field at cursor + rel whose
    body is all in the file; None when there is none there."""
    if not r.need(rel + 11):
        if not r.need(rel + 2):
            return None
    buf, i = r.buf, r.pos + rel
    if buf[i] != 0x0A:
        return None
    length = shift = 0
    j = i + 1
    end = len(buf)
    while j < end:
        b = buf[j]
        length |= (b & 0x7F) << shift
        j += 1
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            return None
    else:
        return None                 # the file ends inside the length
    if length > MAX_PACKET:
        return None
    head = j - i
    return (head, length) if r.need(rel + head + length) else None


def _chained(r: ReadAhead, rel: int) -> bool:
    """Whether a packet can end at cursor + rel: the file ends there, or a well-formed packet
    starts there that is followed by the end of the file or by a 0x0a byte. Two packets in a row
    framing exactly is what tells a true packet boundary from a byte that only looks like one."""
    if not r.need(rel + 1):
        return True
    nxt = _header(r, rel)
    if nxt is None:
        return False
    after = rel + nxt[0] + nxt[1]
    return not r.need(after + 1) or r.buf[r.pos + after] == 0x0A


def _parses(body: bytes) -> bool:
    try:
        TracePacket().ParseFromString(body)
    except Exception:   # protobuf's DecodeError
        return False
    return True


RUN = 4      # packets in a row, each framing and parsing, that make a plausible restart


def _run(r: ReadAhead, rel: int) -> list[int] | None:
    """The ends (offsets from the cursor) of the packets that start at cursor + rel and follow
    one another, each well framed and parsing as a TracePacket; a list when there are RUN of
    them or they reach the end of the file exactly (what real packets do), else None."""
    ends = []
    while len(ends) < RUN:
        if not r.need(rel + 1):
            return ends or None       # the file ends exactly here
        h = _header(r, rel)
        if h is None:
            return None
        i = r.pos + rel
        if not _parses(r.buf[i + h[0]:i + h[0] + h[1]]):
            return None
        rel += h[0] + h[1]
        ends.append(rel)
    return ends


def _resync(r: ReadAhead, after: int = 1, before: int | None = None) -> int | None:
    """Offset from the cursor of the next plausible restart (a `_run`) at or after `after`
    (and before `before`), None if none. The cursor stays where it is (the bytes from it on
    stay in `r.buf`), so the packet at it can still be taken."""
    rel = after
    while before is None or rel < before:
        i = r.buf.find(PACKET_TAG, r.pos + rel, len(r.buf) if before is None else r.pos + before)
        if i < 0:
            if before is not None and r.left >= before:
                return None
            rel = max(rel, r.left)
            if not r.need(r.left + 1):
                return None
            continue
        rel = i - r.pos
        if _run(r, rel) is not None:
            return rel
        rel += 1
    return None


def _swallows(r: ReadAhead, span: int) -> bool:
    """Whether the packet at the cursor, `span` bytes long, hides real packets: a plausible run
    starts inside it and runs past its end without stopping there (its length is damaged).
    A run that stops exactly at its end agrees with it (nested bytes that look like packets)."""
    rel = 1
    while True:
        rel = _resync(r, rel, span)
        if rel is None:
            return False
        ends = _run(r, rel)
        if ends is not None and span not in ends and ends[-1] > span:
            return True
        rel += 1


def _what(r: ReadAhead) -> str:
    """What is wrong at the cursor, for a problem line."""
    if not r.left:
        return "trace ends early"
    b = r.buf[r.pos]
    if b != 0x0A:
        return f"expected a Trace.packet field (0x0a), found 0x{b:02x}"
    i, end = r.pos + 1, min(len(r.buf), r.pos + 11)
    while i < end and r.buf[i] & 0x80:
        i += 1
    if i == r.pos + 11:
        return "packet length varint too long"
    h = _header(r, 0)
    if h is None:
        return f"trace ends inside a packet ({r.left} bytes of it)"
    return "a packet whose length does not lead to the next packet (damaged length or bytes after it)"


def iter_raw(path: str | os.PathLike, chunk: int = 1 << 20,
             problem: Problem | None = None) -> Iterator[tuple[bytes, int, int, int, int]]:
    """The packets of a trace file, raw, read `chunk` bytes at a time: per packet
    (buf, start, body, end, offset) where `buf[start:end]` is its `Trace.packet`
    field as it is in the file (tag, length, body: copy it to copy the packet byte
    for byte), `buf[body:end]` the encoded TracePacket, `offset` the file offset
    after it. Nothing is copied until the caller slices `buf`.

    The one implementation of the framing: `read_packets` and the merge
    (tessera.hostd.merge) stream through it.

    Damage (a packet cut short by a crash, a wrong tag or length byte, inserted
    bytes) costs only the packets it touches: a packet is taken when it frames
    exactly and so does the next one (`_chained`). Where that fails, a packet that
    parses is kept unless a plausible run of packets starts inside it and runs past
    its end (its length is damaged, `_swallows`); otherwise reading resumes at the
    next plausible restart: RUN packets in a row, each framing and parsing as a
    TracePacket, or fewer that end exactly at the end of the file (`_run`). Each damaged stretch is reported to
    `problem(offset, message)`; without one, the first is raised as
    TraceFormatError once everything else has been yielded.
    """
    problems: list[tuple[int, str]] = []
    report = problem or (lambda offset, message: problems.append((offset, message)))
    with open(path, "rb") as f:
        r = ReadAhead(f, chunk)
        while r.need(1):
            h = _header(r, 0)
            if h is not None and _chained(r, h[0] + h[1]):
                head, length = h
                start = r.pos
                end = start + head + length
                yield r.buf, start, start + head, end, r.base + end
                r.pos = end
                continue
            if h is not None:
                start = r.pos
                body, end = start + h[0], start + h[0] + h[1]
                if _parses(r.buf[body:end]) and not _swallows(r, h[0] + h[1]):
                    # it frames and parses but what follows does not: the damage is after it (or
                    # its own length was cut short: then it is the damaged packet either way)
                    start = r.pos       # _swallows may have read ahead (buf moved)
                    body, end = start + h[0], start + h[0] + h[1]
                    yield r.buf, start, body, end, r.base + end
                    r.pos = end
                    continue
            at = r.at
            nxt = _resync(r)
            if nxt is None:
                report(at, f"{_what(r)}; no packet after it")
                r.pos = len(r.buf)
                break
            report(at, f"{_what(r)}; {nxt} bytes skipped, resumed at the next packet")
            r.pos += nxt
    if problems:
        raise TraceFormatError(*problems[0])


def read_packets(path: str | os.PathLike, chunk: int = 1 << 20, problem: Problem | None = None) -> Iterator[TracePacket]:
    """Stream the packets of a trace file (bounded memory: one packet at a time). Damage is
    skipped as `iter_raw` says; a packet that frames but does not parse is skipped too. Each
    problem goes to `problem(offset, message)`; without one, the first is raised as
    TraceFormatError once every readable packet has been yielded."""
    problems: list[tuple[int, str]] = []
    report = problem or (lambda offset, message: problems.append((offset, message)))
    for buf, start, body, end, offset in iter_raw(path, chunk, report):
        packet = TracePacket()
        try:
            packet.ParseFromString(buf[body:end])
        except Exception as e:  # protobuf's DecodeError
            report(offset - (end - start), f"undecodable TracePacket ({e}); skipped")
            continue
        yield packet
    if problems:
        raise TraceFormatError(*problems[0])


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

"""hostd's session log on disk: checksummed records that a reader can resynchronise on.

Role: the one definition of the `session.tessera-log` file format (writer
helpers for hostd/storage.py, the reader for the merge and for tests). The
wire between layer and hostd is unchanged (frames.py); only what hostd keeps
on disk is wrapped, so a damaged byte costs the record it is in, not the
rest of the log.

Version 2 (this module writes it):

    file header  8s magic b"\\x89TSRLOG\\n", u32 version (2), u32 flags (0)
    record...    4s magic b"\\xfbTRc"
                 u32 crc     CRC-32C (crc32c.py) of the 16 header bytes after it and of the payload
                 u32 length  payload bytes (at most MAX_RECORD)
                 u32 first   offset in the payload of the first frame that begins in it,
                             NO_FRAME when none does (the middle of a large frame)
                 u64 offset  client-stream offset of the payload's first byte
                 payload     client-stream bytes, exactly as received

A record is a piece of a chunk as hostd read it from the socket, written
before any frame in it is interpreted: chunks are cut at frame starts into
records of about RECORD_TARGET bytes (at most MAX_RECORD), and the stream's
first frame, the HELLO, is a record of its own. Like a Kafka record batch a
record may hold several frames and pieces of frames; damage costs the
frames that overlap its record. Concatenating the payloads gives the
client's stream byte for byte (`read_stream`). The crc covers the length, so
a damaged length is caught like damaged data.

Reading (`read_frames`): a record whose magic, length or crc is wrong is
skipped and the reader scans for the next record magic; frames are decoded
from the payloads while they are contiguous in the stream (the `offset`
fields); after a gap (a record lost) decoding restarts at the next record's
`first`, so only frames overlapping a damaged record are lost. Version 1 is
the format before this one: the raw frames with no file header (what the
layer's spool files still are); it is read as before, stopping at the first
undecodable header.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from .crc32c import crc32c
from .frames import DEFAULT_MAX_JSON, Frame, FrameDecoder, FrameError
from .readahead import ReadAhead

FILE_MAGIC = b"\x89TSRLOG\n"
LOG_VERSION = 2
_FILE = struct.Struct("<8sII")
FILE_HEADER = _FILE.pack(FILE_MAGIC, LOG_VERSION, 0)

RECORD_MAGIC = b"\xfbTRc"           # 0xfb never occurs in UTF-8, so not inside JSON text
_RECORD = struct.Struct("<4sIIIQ")  # magic, crc, length, first, offset
RECORD_HEADER = _RECORD.size
_CHECKED = struct.Struct("<IIQ")    # the header fields the crc covers: length, first, offset
NO_FRAME = 0xFFFFFFFF
MAX_RECORD = 1 << 20                # payload bytes per record: a reader buffers at most this to check one
RECORD_TARGET = 16 << 10            # records are cut at the first frame start past this (LevelDB: 32 KiB blocks)

Problem = Callable[[int, str], None]   # (byte offset in the file, what is wrong)


def encode_record(payload: bytes, offset: int, first: int | None) -> bytes:
    """One record (len(payload) <= MAX_RECORD)."""
    checked = _CHECKED.pack(len(payload), NO_FRAME if first is None else first, offset)
    crc = crc32c(payload, crc32c(checked))
    return RECORD_MAGIC + struct.pack("<I", crc) + checked + payload


def encode_records(data: bytes, offset: int, starts: Sequence[int]) -> bytes:
    """The records of a chunk of the client stream at `offset`; `starts`: the stream offsets,
    ascending, of the frames that begin in it (frames.FrameDecoder knows them).

    Cut at frame starts into records of about RECORD_TARGET bytes (what one damaged byte can
    cost), at most MAX_RECORD; the stream's first frame (the HELLO) is a record of its own, so
    damage elsewhere never costs the log its owner."""
    if len(data) <= RECORD_TARGET and not (offset == 0 and len(starts) > 1):
        return encode_record(data, offset, starts[0] - offset if starts else None)
    cuts = [0]
    for s in starts:
        rel = s - offset
        if rel > cuts[-1] and (rel - cuts[-1] >= RECORD_TARGET or offset + cuts[-1] == 0):
            cuts.append(rel)
    cuts.append(len(data))
    out = []
    i = 0
    for lo, hi in zip(cuts, cuts[1:]):
        for a in range(lo, hi, MAX_RECORD):
            b = min(a + MAX_RECORD, hi)
            while i < len(starts) and starts[i] < offset + a:
                i += 1
            first = starts[i] - offset - a if i < len(starts) and starts[i] < offset + b else None
            out.append(encode_record(data[a:b], offset + a, first))
    return b"".join(out)


@dataclass(frozen=True)
class Record:
    offset: int             # client-stream offset of payload[0]
    first: int | None       # where the first frame beginning in the payload starts
    payload: bytes
    at: int                 # file offset of the record


def iter_records(f: BinaryIO, problem: Problem, chunk: int = 1 << 20) -> Iterator[Record]:
    """The intact records of a version-2 log opened at its first record; damaged bytes are
    skipped (one `problem` per damaged stretch) and reading resumes at the next intact record."""
    b = ReadAhead(f, chunk)
    damaged: int | None = None      # file offset where the current damaged stretch began
    while b.need(RECORD_HEADER):
        magic, crc, length, first, offset = _RECORD.unpack_from(b.buf, b.pos)
        ok = magic == RECORD_MAGIC and length <= MAX_RECORD and b.need(RECORD_HEADER + length)
        if ok:
            start = b.pos + RECORD_HEADER
            payload = b.buf[start:start + length]
            ok = crc32c(payload, crc32c(b.buf[b.pos + 8:start])) == crc and (first == NO_FRAME or first < length)
        if not ok:
            if damaged is None:
                damaged = b.at
            b.pos += 1
            if not b.find(RECORD_MAGIC):
                break
            continue
        if damaged is not None:
            problem(damaged, f"{b.at - damaged} damaged bytes skipped (resumed at the next intact record)")
            damaged = None
        yield Record(offset, None if first == NO_FRAME else first, payload, b.at)
        b.pos += RECORD_HEADER + length
    end = b.base + len(b.buf)
    if damaged is None and b.pos < len(b.buf):
        damaged = b.at
    if damaged is not None:
        problem(damaged, f"the log ends in {end - damaged} damaged or cut bytes (no intact record after them)")


def _frames_of_records(records: Iterator[Record], max_json: int, problem: Problem) -> Iterator[Frame]:
    """Frames decoded from the records' payloads, restarting after every gap in the stream."""
    decoder: FrameDecoder | None = None
    expected = 0                  # stream offset the next contiguous record starts at
    for r in records:
        if decoder is None or r.offset != expected:
            if decoder is not None and decoder.pending:
                problem(r.at, f"stream bytes {decoder.offset}..{expected} (a frame cut by a damaged record) lost")
            decoder = None
            if r.first is None:
                expected = r.offset + len(r.payload)
                continue            # the middle of a frame whose start was lost
            decoder = FrameDecoder(max_json, offset=r.offset + r.first)
            data = r.payload[r.first:]
        else:
            data = r.payload
        expected = r.offset + len(r.payload)
        try:
            yield from decoder.feed(data)
        except FrameError as e:
            yield from e.frames
            problem(r.at, f"stream byte {e.offset}: {e.message}; frames resume at the next record boundary")
            decoder = None
    if decoder is not None and decoder.pending:
        problem(-1, f"the stream ends inside a frame (stream bytes {decoder.offset}..{expected})")


def _frames_of_raw(f: BinaryIO, max_json: int, chunk: int, problem: Problem) -> Iterator[Frame]:
    """Version 1 (and spool files): frames concatenated; decoding stops at an undecodable header."""
    decoder = FrameDecoder(max_json)
    try:
        while data := f.read(chunk):
            try:
                frames = decoder.feed(data)
            except FrameError as e:
                yield from e.frames
                raise
            yield from frames
        decoder.finish()
    except FrameError as e:
        problem(e.offset, e.message)


def log_version(f: BinaryIO) -> int:
    """The version of the log open in `f` (from its start): 2 and positioned after the file
    header, or 1 (no header: raw frames) and rewound."""
    head = f.read(_FILE.size)
    if len(head) == _FILE.size and head.startswith(FILE_MAGIC):
        return _FILE.unpack(head)[1]
    f.seek(0)
    return 1


def read_frames(path, max_json: int = DEFAULT_MAX_JSON, chunk: int = 1 << 20,
                problem: Problem | None = None) -> Iterator[Frame]:
    """The frames of a session log (either version) or spool file, streamed. `problem(offset,
    message)` hears of every damaged stretch (offsets are file offsets, -1 for the end of the
    stream); the frames around the damage are all yielded."""
    report = problem or (lambda offset, message: None)
    with open(path, "rb") as f:
        version = log_version(f)
        if version > LOG_VERSION:
            report(0, f"log version {version} is newer than this reader's {LOG_VERSION}; reading it as {LOG_VERSION}")
        if version >= 2:
            yield from _frames_of_records(iter_records(f, report, chunk), max_json, report)
        else:
            yield from _frames_of_raw(f, max_json, chunk, report)


def read_stream(path) -> bytes:
    """The client's stream a log holds (its intact records' payloads in order; a version-1 log
    or spool file is its own stream)."""
    with open(path, "rb") as f:
        if log_version(f) == 1:
            return f.read()
        return b"".join(r.payload for r in iter_records(f, lambda offset, message: None))

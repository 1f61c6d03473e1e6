"""The wire format between the layer and hostd (protocol constants: changing
one needs a PROTOCOL_VERSION bump).

A frame is a little-endian header followed by UTF-8 JSON:

    u8  type        bit 7 set: a u64 sequence (the submitID) follows
    u64 sequence    only when type & 0x80
    u64 tag         the workload's tagID (0 when the message is not about one)
    u32 json_length bytes of JSON that follow
    u8  json[json_length]

Putting "has a sequence" in the type byte lets any decoder skip message
types it does not know (forward compatibility). A stream (socket, the
daemon's session log, the layer's spool file) is frames concatenated.
The header is two precompiled `struct` shapes, one per value of the sequence
bit (the layer encodes on application threads: even compiled `construct`
costs ~50x more per frame, and importing it ~11 ms of the layer's start-up);
tests/schemas/test_frames.py checks them against a declarative `construct`
description of the layout above.

`FrameDecoder` is sans-IO: bytes in, frames out, with the stream offset of
each frame so errors can name where they are.
"""
from __future__ import annotations

import enum
import json
import re
import struct
from dataclasses import dataclass
from typing import Any

# 5: RECORDED_AGAIN; 4: FRAME images, WORKLOAD resources reads/storage, ANNEX draws' draw (#28); 3: WORKLOADS;
# 2: SHADER and INSTRUMENTATION (shader instrumentation); older streams stay valid
PROTOCOL_VERSION = 5
SEQUENCE_BIT = 0x80
DEFAULT_MAX_JSON = 16 << 20

# The daemon's only message to a client, sent when the client's HELLO says "acks": true:
# u64, how many bytes of the client's stream (HELLO included) its session log holds, after
# each chunk it logs. A client keeps frames until they are acknowledged, and spools the
# unacknowledged ones if the daemon dies.
ACK = struct.Struct("<Q")

_PLAIN = struct.Struct("<BQI")        # type, tag, json_length
_SEQUENCED = struct.Struct("<BQQI")   # type, sequence, tag, json_length


class MessageType(enum.IntEnum):
    HELLO = 0x01      # first message of a connection: protocol version, process
    DEVICE = 0x02     # a VkDevice and what it is
    WORKLOAD = 0x03   # metadata of one tagged workload (tag = tagID)
    FRAME = 0x04      # a frame boundary (vkQueuePresentKHR / VK_EXT_frame_boundary)
    SHADER = 0x05     # an instrumented pipeline stage's basic blocks (protocol 2)
    WORKLOADS = 0x06  # the WORKLOADs of one command buffer, batched (protocol 3; schemas/workloads.py)
    RECORDED_AGAIN = 0x07   # workloads recorded again, each described as an earlier one (protocol 5; ditto)
    SUBMIT = 0x81     # a queue submit (sequence = submitID)
    ANNEX = 0x82      # submit-time metadata of one workload (sequence = submitID, tag = tagID)
    INSTRUMENTATION = 0x83   # measured shader cost of one workload in one submit (protocol 2)
    REGIONS = 0x84   # per-region counters of one render pass instance in one submit (protocol 2)


class FrameError(Exception):
    """A stream that cannot be decoded at `offset`; `fatal` when the stream cannot resynchronize.

    `frames`: when raised by `FrameDecoder.feed`, the complete frames that
    call decoded before the error (so a receiver loses none of them).
    """

    def __init__(self, offset: int, message: str, fatal: bool) -> None:
        super().__init__(f"at byte {offset}: {message}")
        self.offset = offset
        self.message = message
        self.fatal = fatal
        self.frames: list[Frame] = []


@dataclass(frozen=True)
class Frame:
    type: int
    sequence: int | None
    tag: int
    body: bytes         # the JSON bytes, undecoded
    offset: int         # stream offset of the frame's first byte
    size: int           # bytes of the whole frame

    @property
    def known(self) -> bool:
        return self.type in MessageType._value2member_map_

    def payload(self) -> Any:
        """The decoded JSON; FrameError (not fatal) when it is not valid UTF-8 JSON, is nested
        too deeply to decode, or holds a lone surrogate (`lone_surrogate`)."""
        try:
            value = json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:   # RecursionError: nesting too deep
            raise FrameError(self.offset, f"{_name(self.type)} frame: invalid JSON ({e})", fatal=False) from e
        if lone_surrogate(self.body, value):
            raise FrameError(self.offset, f"{_name(self.type)} frame: {LONE_SURROGATE}", fatal=False)
        return value


LONE_SURROGATE = "a string holds a lone surrogate escape (\\udXXX), which no UTF-8 text can carry"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(body: bytes, value: Any) -> bool:
    """True when decoded JSON `value` (of text `body`) holds a string with an unpaired
    surrogate. JSON allows the escape ("\\ud800") but UTF-8 cannot encode the result, so
    nothing written from it (a trace, a record) would encode: such a payload is invalid here
    (as in I-JSON, RFC 7493 §2.1). Paired escapes decode to one character and pass. Cheap: the
    decoded value is walked only when the text holds a surrogate escape at all."""
    if _SURROGATE_ESCAPE.search(body) is None:
        return False
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


_JSON = json.JSONEncoder(separators=(",", ":"))   # made once: json.dumps with separators makes one per call


def _name(t: int) -> str:
    return MessageType(t).name if t in MessageType._value2member_map_ else f"type 0x{t:02x}"


def json_body(payload: Any) -> bytes:
    """A payload's JSON as the layer writes it (compact, ASCII)."""
    return _JSON.encode(payload).encode()


def encode(type_: int, payload: Any, tag: int = 0, sequence: int | None = None) -> bytes:
    """One frame; `payload` is JSON-serialisable (or already-encoded JSON bytes)."""
    body = payload if isinstance(payload, bytes) else json_body(payload)
    if type_ & SEQUENCE_BIT:
        if sequence is None:
            raise ValueError(f"{_name(type_)} carries a sequence")
        return _SEQUENCED.pack(type_, sequence, tag, len(body)) + body
    if sequence is not None:
        raise ValueError(f"{_name(type_)} carries no sequence")
    return _PLAIN.pack(type_, tag, len(body)) + body


class FrameDecoder:
    """Incremental decoder: `feed()` bytes, get the complete frames so far.

    A length above `max_json` is fatal (the header may be garbage; nothing
    after it can be trusted). `pending` says how many bytes wait for more
    input, so a stream that ends mid-frame is reported as truncated.
    """

    def __init__(self, max_json: int = DEFAULT_MAX_JSON, offset: int = 0) -> None:
        self.max_json = max_json
        self._buf = bytearray()
        self._offset = offset     # stream offset of _buf[0]
        self.failed: FrameError | None = None

    @property
    def pending(self) -> int:
        return len(self._buf)

    @property
    def offset(self) -> int:
        return self._offset

    def feed(self, data: bytes) -> list[Frame]:
        if self.failed:
            self.failed.frames = []  # delivered with the first raise
            raise self.failed
        self._buf += data
        frames = []
        pos = 0
        buf = self._buf
        while True:
            if len(buf) - pos < 1:
                break
            t = buf[pos]
            shape = _SEQUENCED if t & SEQUENCE_BIT else _PLAIN
            if len(buf) - pos < shape.size:
                break
            if shape is _SEQUENCED:
                t, seq, tag, length = shape.unpack_from(buf, pos)
            else:
                t, tag, length = shape.unpack_from(buf, pos)
                seq = None
            if length > self.max_json:
                self._consume(pos)
                self.failed = FrameError(self._offset, f"{_name(t)} frame declares {length} bytes of JSON, "
                                         f"above the limit of {self.max_json}", fatal=True)
                self.failed.frames = frames
                raise self.failed
            end = pos + shape.size + length
            if len(buf) < end:
                break
            frames.append(Frame(t, seq, tag, bytes(buf[pos + shape.size:end]), self._offset + pos, end - pos))
            pos = end
        self._consume(pos)
        return frames

    def _consume(self, n: int) -> None:
        del self._buf[:n]
        self._offset += n

    def finish(self) -> None:
        """End of stream: raise if a frame was cut short."""
        if self._buf:
            raise FrameError(self._offset, f"stream ends inside a frame ({len(self._buf)} bytes of it)", fatal=True)


def iter_file(path, max_json: int = DEFAULT_MAX_JSON, chunk: int = 1 << 20):
    """Frames of a spool file or session log (either version, logfile.py), streamed; frames after
    damage are yielded too, and the first problem (if any) is raised at the end."""
    from .logfile import read_frames     # logfile builds on this module

    problems: list[tuple[int, str]] = []
    yield from read_frames(path, max_json, chunk, lambda offset, message: problems.append((offset, message)))
    if problems:
        raise FrameError(problems[0][0], problems[0][1], fatal=True)

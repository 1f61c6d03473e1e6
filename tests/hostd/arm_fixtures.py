"""Byte-level fixtures of Arm's GPU Timeline protocol, written from the published format.

Not production code, and deliberately independent of tessera.schemas.arm_timeline:
every payload here is spelled out as protobuf wire bytes (key = field << 3 | wire
type; varints; length-delimited members) from the field numbers of Arm's
`timeline.proto`, and every message as the 14-byte `<BBQL` header Arm's comms
use, so a wrong field number or header in Tessera fails these tests.
"""
from __future__ import annotations

import json
import socket
import struct

TX_ASYNC, TX, TX_RX = 0, 1, 2


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1          # int64 negatives are 10-byte varints
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def vint(field: int, value: int) -> bytes:
    return varint(field << 3 | 0) + varint(value)


def ld(field: int, data: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(data)) + data


def text(field: int, s: str) -> bytes:
    return ld(field, s.encode("utf-8"))


# TimelineRecord members (field numbers of Arm's timeline.proto, the protocol with a Header)
def header(version: int = 0) -> bytes:
    return ld(1, vint(1, version) if version else b"")


def device(dev: int, pid: int, major: int, minor: int, patch: int, name: str) -> bytes:
    return ld(2, vint(1, dev) + vint(2, pid) + vint(3, major) + vint(4, minor) + vint(5, patch) + text(6, name))


def frame(fid: int, dev: int, ts: int) -> bytes:
    return ld(3, vint(1, fid) + vint(2, dev) + vint(3, ts))


def submit(ts: int, dev: int, queue: int) -> bytes:
    return ld(4, vint(1, ts) + vint(2, dev) + vint(3, queue))


def attachment(kind: int, index: int = 0, not_loaded: bool = False, not_stored: bool = False,
               resolved: bool = False) -> bytes:
    body = vint(1, kind) if kind else b""
    body += vint(2, index) if index else b""
    body += vint(3, 1) if not_loaded else b""
    body += vint(4, 1) if not_stored else b""
    body += vint(5, 1) if resolved else b""
    return ld(7, body)


def renderpass(tag: int, width: int, height: int, draws: int, subpasses: int, labels=(), attachments=()) -> bytes:
    body = vint(1, tag) + vint(2, width) + vint(3, height) + vint(4, draws) + vint(5, subpasses)
    body += b"".join(text(6, x) for x in labels) + b"".join(attachments)
    return ld(5, body)


def continue_renderpass(tag: int, draws: int, labels=()) -> bytes:
    return ld(6, vint(1, tag) + vint(2, draws) + b"".join(text(3, x) for x in labels))


def dispatch(tag: int, x: int, y: int, z: int, labels=()) -> bytes:
    return ld(7, vint(1, tag) + vint(2, x) + vint(3, y) + vint(4, z) + b"".join(text(5, s) for s in labels))


def trace_rays(tag: int, x: int, y: int, z: int, labels=()) -> bytes:
    return ld(8, vint(1, tag) + vint(2, x) + vint(3, y) + vint(4, z) + b"".join(text(5, s) for s in labels))


def image_transfer(tag: int, pixels: int, kind: int, labels=()) -> bytes:
    return ld(9, vint(1, tag) + vint(2, pixels) + vint(3, kind) + b"".join(text(4, s) for s in labels))


def buffer_transfer(tag: int, nbytes: int, kind: int, labels=()) -> bytes:
    return ld(10, vint(1, tag) + vint(2, nbytes) + vint(3, kind) + b"".join(text(4, s) for s in labels))


def as_build(tag: int, primitives: int, kind: int, labels=()) -> bytes:
    return ld(11, vint(1, tag) + vint(2, primitives) + vint(3, kind) + b"".join(text(4, s) for s in labels))


def as_transfer(tag: int, nbytes: int, kind: int, labels=()) -> bytes:
    return ld(12, vint(1, tag) + vint(2, nbytes) + vint(3, kind) + b"".join(text(4, s) for s in labels))


def data_graph(tag: int, labels=()) -> bytes:
    return ld(13, vint(1, tag) + b"".join(text(2, s) for s in labels))


# The comms wire
def message(type_: int, endpoint: int, message_id: int, payload: bytes = b"") -> bytes:
    return struct.pack("<BBQL", type_, endpoint, message_id, len(payload)) + payload


def parse_registry(payload: bytes) -> dict[str, int]:
    out, pos = {}, 0
    while pos < len(payload):
        endpoint, size = struct.unpack_from("<BL", payload, pos)
        pos += 5
        out[payload[pos:pos + size].decode()] = endpoint
        pos += size
    return out


class ArmClient:
    """What Arm's layer does on the wire: look up GPUTimeline in the registry, then send records."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.next_id = 1

    def recv_exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def lookup(self) -> dict[str, int]:
        mid = self.next_id
        self.next_id += 1
        self.sock.sendall(message(TX_RX, 0, mid))
        type_, endpoint, rid, size = struct.unpack("<BBQL", self.recv_exact(14))
        assert (type_, endpoint, rid) == (TX_RX, 0, mid)
        return parse_registry(self.recv_exact(size))

    def send(self, endpoint: int, payload: bytes, type_: int = TX_ASYNC) -> None:
        self.sock.sendall(message(type_, endpoint, self.next_id, payload))
        self.next_id += 1


# Arm's host file
def metadata_file(frames: list[dict]) -> bytes:
    out = b""
    for f in frames:
        data = json.dumps(f).encode()
        out += struct.pack("<I", len(data)) + data
    return out


def read_metadata_bytes(data: bytes) -> list[dict]:
    """Arm's host file read as its viewer does: u32 little-endian length, then that many bytes of
    UTF-8 JSON, until the data ends (a partial frame at the end is ignored)."""
    out, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from("<I", data, pos)
        if pos + 4 + size > len(data):
            break
        out.append(json.loads(data[pos + 4:pos + 4 + size].decode("utf-8")))
        pos += 4 + size
    return out

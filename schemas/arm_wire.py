"""Arm's libGPULayers comms wire (protocol constants: Arm's, never ours to change).

Every message, both ways, is a 14-byte little-endian header then a payload:

    u8  message type   0 TX_ASYNC, 1 TX (client -> host, no reply), 2 TX_RX (the host replies)
    u8  endpoint id    the service; 0 is the registry
    u64 message id     echoed in the reply to a TX_RX
    u32 payload size
    u8  payload[payload size]

The registry (endpoint 0), asked with a TX_RX, replies with one entry per
service: u8 endpoint id, u32 name length, name (UTF-8). The GPU Timeline
layer looks up the service `GPUTimeline` and sends it TimelineRecord
protobufs (arm_timeline.py) as TX/TX_ASYNC messages. The layer reaches the
host on the abstract Unix socket `lglcomms` (adb forwards it to a TCP port).

`ArmDecoder` is sans-IO like frames.FrameDecoder: bytes in, messages out,
each with its stream offset; a header that cannot be right (an unknown
message type, a payload above the limit) raises `ArmWireError`, after which
nothing in the stream can be trusted.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

HEADER = struct.Struct("<BBQI")       # Arm's "<BBQL": L is 4 bytes in standard size
HEADER_SIZE = HEADER.size             # 14
REGISTRY_ENDPOINT = 0
REGISTRY_NAME = "registry"
TIMELINE_SERVICE = "GPUTimeline"
PROFILE_SERVICE = "GPUProfile"        # layer_gpu_profile's service: JSON payloads (lglpy service_gpu_profile.py)
ABSTRACT_SOCKET = "lglcomms"           # the layer's default host address (Linux abstract namespace)
DEFAULT_MAX_PAYLOAD = 16 << 20
_ENTRY = struct.Struct("<BI")


class ArmMessageType(enum.IntEnum):
    TX_ASYNC = 0
    TX = 1
    TX_RX = 2


class ArmWireError(Exception):
    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"at byte {offset}: {message}")
        self.offset = offset
        self.message = message
        self.messages: list[ArmMessage] = []      # the complete messages before the bad header


@dataclass(frozen=True)
class ArmMessage:
    type: int
    endpoint: int
    message_id: int
    payload: bytes
    offset: int          # stream offset of its header


def encode(type_: int, endpoint: int, message_id: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(type_, endpoint, message_id, len(payload)) + payload


def registry_payload(services: dict[int, str]) -> bytes:
    out = []
    for endpoint, name in services.items():
        data = name.encode("utf-8")
        out.append(_ENTRY.pack(endpoint, len(data)) + data)
    return b"".join(out)


def parse_registry(payload: bytes) -> dict[str, int]:
    """name -> endpoint, from a registry reply (ValueError if it is cut short)."""
    out, pos = {}, 0
    while pos < len(payload):
        if pos + _ENTRY.size > len(payload):
            raise ValueError("registry reply cut inside an entry header")
        endpoint, size = _ENTRY.unpack_from(payload, pos)
        pos += _ENTRY.size
        if pos + size > len(payload):
            raise ValueError("registry reply cut inside a name")
        out[payload[pos:pos + size].decode("utf-8")] = endpoint
        pos += size
    return out


class ArmDecoder:
    def __init__(self, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
        self.max_payload = max_payload
        self._buf = bytearray()
        self.offset = 0          # stream offset of _buf[0]

    @property
    def pending(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[ArmMessage]:
        self._buf += data
        out = []
        view = self._buf
        i = 0
        while len(view) - i >= HEADER_SIZE:
            type_, endpoint, mid, size = HEADER.unpack_from(view, i)
            where = self.offset + i
            problem = (f"unknown message type {type_} (not an Arm comms header)"
                       if type_ not in ArmMessageType._value2member_map_ else
                       f"payload size {size} above the limit of {self.max_payload} bytes"
                       if size > self.max_payload else None)
            if problem is not None:
                self._drop(i)
                error = ArmWireError(where, problem)
                error.messages = out
                raise error
            end = i + HEADER_SIZE + size
            if end > len(view):
                break
            out.append(ArmMessage(type_, endpoint, mid, bytes(view[i + HEADER_SIZE:end]), where))
            i = end
        self._drop(i)
        return out

    def _drop(self, n: int) -> None:
        del self._buf[:n]
        self.offset += n

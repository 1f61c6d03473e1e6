"""Field keys (tag bytes) of the Perfetto protos, computed from their descriptors.

Role: where Tessera encodes protobuf bytes itself (hostd: tracks.py's slices and instants,
merge.py's extra_data entries and names; the driver: icd/event_packets.py's render-stage
events) it needs each field's key: the varint of
`field number << 3 | wire type`. `key()` computes it once, at import of the module
that uses it, from the generated protos' descriptors (perfetto.protos…perfetto_trace_pb2,
the same classes the rest of Tessera reads and writes), instead of literal bytes such as
b"\\xba\\x01". It also checks that the field's type is the encoding the caller writes
(a string written as length-delimited bytes, an int64 as a plain varint…), so a proto
change that would make the hand-encoded bytes wrong fails at import, with its name,
rather than writing a trace protobuf would read differently.

Every key made is listed in `KEYS` (message, field, encoding, bytes): filled at import
only, read by tests/hostd/test_protowire.py, which checks each against protobuf's own
serialisation. No other state.
"""
from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor as F

from tessera.schemas.perfetto import varint

# encoding the caller writes -> (wire type, descriptor types it is right for)
_ENCODINGS = {
    "varint": (0, frozenset({F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_BOOL, F.TYPE_ENUM})),
    "bytes": (2, frozenset({F.TYPE_STRING, F.TYPE_BYTES})),
    "message": (2, frozenset({F.TYPE_MESSAGE})),
}

KEYS: list[tuple[type, str, str, bytes]] = []


def key(message: type, field: str, encoding: str) -> bytes:
    """The key bytes of `message`'s `field` (a generated message class and a field name),
    for values written with `encoding` ("varint": int64/uint64/int32/uint32/bool/enum as a
    plain varint, "bytes": string or bytes, "message": an embedded message). Raises
    TypeError when the descriptor says the field is of another type or a packed repeated
    scalar (its values would not be written one key each)."""
    d = message.DESCRIPTOR.fields_by_name.get(field)
    if d is None:
        raise TypeError(f"{message.DESCRIPTOR.full_name} has no field {field!r}")
    wire, types = _ENCODINGS[encoding]
    if d.type not in types:
        raise TypeError(f"{message.DESCRIPTOR.full_name}.{field} is protobuf type {d.type}, not written as {encoding}")
    if wire == 0 and d.is_repeated:
        raise TypeError(f"{message.DESCRIPTOR.full_name}.{field} is a repeated scalar (maybe packed)")
    out = varint(d.number << 3 | wire)
    KEYS.append((message, field, encoding, out))
    return out

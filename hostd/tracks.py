"""TrackEvent packets of the merged trace's own sequence: the application's process track.

Role: thin over the generated protos (as Perfetto's trace_builder is): it
fills TracePackets for process/child track descriptors, slices and instants
and hands them to a sink. All timestamps are BOOTTIME ns. The first packet
clears the sequence's incremental state, later ones declare they need it, as
the Perfetto SDK does. UUIDs are deterministic (a fixed prefix and a
counter), so two merges of one session give identical files.

Encoding: descriptors (a few per process) and the sequence's first packet are
built as protobuf objects and serialised. With a `raw_sink`, slices and
instants (~10 per submit: millions in a long session) are encoded here from
pre-encoded pieces instead: the constant fields (sequence id, flags, clock, the
track's uuid and the event type) are bytes made once, only the timestamp, name,
correlation id and args are encoded per packet (a slice end is its timestamp
and a per-track tail; common names and (key, string) args are kept encoded,
a few thousand at most). The bytes are exactly what
SerializeToString gives for the same packet (upb writes fields in field-number
order: TracePacket timestamp, trusted_packet_sequence_id, track_event,
sequence_flags, timestamp_clock_id; TrackEvent debug_annotations, type,
track_uuid, name, correlation_id_str; DebugAnnotation name after its value),
which tests/hostd/test_tracks.py checks; values protobuf would refuse (a
timestamp outside uint64) take the protobuf path and its error. The field keys
come from the protos' descriptors at import (protowire.key, checked by
tests/hostd/test_protowire.py), never literal bytes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tessera.schemas.perfetto import (CLOCK_BOOTTIME, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE,
                                      TracePacket, varint)

from tessera.schemas.protowire import key as field_key

_UUID_BASE = 0x7E55E4A000000000
_U64 = (1 << 64) - 1
# Field keys, from the descriptors (protowire.py).
_TRACE_PACKET = field_key(pb.Trace, "packet", "message")
_P_TIMESTAMP = field_key(pb.TracePacket, "timestamp", "varint")
_P_SEQUENCE = field_key(pb.TracePacket, "trusted_packet_sequence_id", "varint")
_P_TRACK_EVENT = field_key(pb.TracePacket, "track_event", "message")
_P_FLAGS = field_key(pb.TracePacket, "sequence_flags", "varint")
_P_CLOCK = field_key(pb.TracePacket, "timestamp_clock_id", "varint")
_E_ANNOTATION = field_key(pb.TrackEvent, "debug_annotations", "message")
_E_TYPE = field_key(pb.TrackEvent, "type", "varint")
_E_TRACK = field_key(pb.TrackEvent, "track_uuid", "varint")
_E_NAME = field_key(pb.TrackEvent, "name", "bytes")
_E_CORRELATION = field_key(pb.TrackEvent, "correlation_id_str", "bytes")
_A_BOOL = field_key(pb.DebugAnnotation, "bool_value", "varint")
_A_INT = field_key(pb.DebugAnnotation, "int_value", "varint")
_A_STRING = field_key(pb.DebugAnnotation, "string_value", "bytes")
_A_NAME = field_key(pb.DebugAnnotation, "name", "bytes")
_TRUE, _FALSE = _A_BOOL + varint(1), _A_BOOL + varint(0)
_KEPT = 1 << 14                                     # encoded names/annotations kept per writer, at most
_SLICE_BEGIN = pb.TrackEvent.TYPE_SLICE_BEGIN
_SLICE_END = pb.TrackEvent.TYPE_SLICE_END
_INSTANT = pb.TrackEvent.TYPE_INSTANT


def _string_field(tag: bytes, text: str) -> bytes:
    data = text.encode("utf-8")
    return tag + varint(len(data)) + data


# RawSink(field bytes, TrackEvent type, track uuid, name or None): one encoded Trace.packet field.
RawSink = Callable[[bytes, int, int, "str | None"], None]


class TrackWriter:
    def __init__(self, sink: Callable[[TracePacket], None], sequence_id: int, raw_sink: RawSink | None = None) -> None:
        self.sink = sink
        self.raw_sink = raw_sink
        self.sequence_id = sequence_id
        self._first = True
        self._next_uuid = _UUID_BASE
        # The pre-encoded pieces (module docstring).
        self._seq_field = _P_SEQUENCE + varint(sequence_id)
        self._tail = _P_FLAGS + varint(SEQ_NEEDS_INCREMENTAL_STATE) + _P_CLOCK + varint(CLOCK_BOOTTIME)
        self._heads: dict[tuple[int, int], bytes] = {}      # (type, track) -> TrackEvent type + track_uuid
        self._keys: dict[str, bytes] = {}                   # annotation name -> its encoded name field
        self._texts: dict[tuple[str, str], bytes] = {}      # (name, string value) -> encoded annotation
        self._names: dict[str, bytes] = {}                  # event name -> its encoded field
        self._ends: dict[int, bytes] = {}                   # track -> a slice end's bytes after its timestamp

    def _packet(self, ts: int | None = None) -> TracePacket:
        p = TracePacket()
        p.trusted_packet_sequence_id = self.sequence_id
        if self._first:
            p.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED
            p.first_packet_on_sequence = True
            self._first = False
        else:
            p.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE
        if ts is not None:
            p.timestamp = ts
            p.timestamp_clock_id = CLOCK_BOOTTIME
        return p

    def _uuid(self) -> int:
        self._next_uuid += 1
        return self._next_uuid

    def process(self, pid: int, name: str) -> int:
        p = self._packet()
        d = p.track_descriptor
        d.uuid = self._uuid()
        d.process.pid = pid
        if name:
            d.process.process_name = name
        self.sink(p)
        return d.uuid

    def track(self, parent: int, name: str) -> int:
        p = self._packet()
        d = p.track_descriptor
        d.uuid = self._uuid()
        d.parent_uuid = parent
        d.name = name
        self.sink(p)
        return d.uuid

    def _event(self, track: int, ts: int, type_: int, name: str | None, args: dict[str, Any] | None,
               correlation: str | None = None) -> None:
        if self.raw_sink is not None and not self._first and 0 <= ts <= _U64 and 0 <= track <= _U64:
            self._raw_event(track, ts, type_, name, args, correlation)
            return
        p = self._packet(ts)
        e = p.track_event
        e.type = type_
        e.track_uuid = track
        if name is not None:
            e.name = name
        if correlation:
            e.correlation_id_str = correlation
        for key, value in (args or {}).items():
            a = e.debug_annotations.add()
            a.name = key
            if isinstance(value, bool):
                a.bool_value = value
            elif isinstance(value, int) and -(1 << 63) <= value < (1 << 63):
                a.int_value = value
            else:
                a.string_value = value if isinstance(value, str) else str(value)
        self.sink(p)

    def _raw_event(self, track: int, ts: int, type_: int, name: str | None, args: dict[str, Any] | None,
                   correlation: str | None) -> None:
        """`_event`'s packet, encoded from the pre-encoded pieces (same bytes)."""
        parts = []
        if args:
            keys, texts = self._keys, self._texts
            for key, value in args.items():
                if value.__class__ is str:          # common (key, text) annotations are kept encoded
                    a = texts.get((key, value))
                    if a is not None:
                        parts.append(a)
                        continue
                k = keys.get(key)
                if k is None:
                    k = keys[key] = _string_field(_A_NAME, key)
                if value.__class__ is bool:         # bool cannot be subclassed: isinstance(value, bool)
                    v = _TRUE if value else _FALSE
                elif isinstance(value, int) and -(1 << 63) <= value < (1 << 63):
                    v = _A_INT + varint(value & _U64)
                else:
                    v = _string_field(_A_STRING, value if isinstance(value, str) else str(value))
                a = _E_ANNOTATION + varint(len(v) + len(k)) + v + k
                if value.__class__ is str and len(texts) < _KEPT:
                    texts[(key, value)] = a
                parts.append(a)
        parts.append(self._head(type_, track))
        if name is not None:
            n = self._names.get(name)
            if n is None:
                n = _string_field(_E_NAME, name)
                if len(self._names) < _KEPT:
                    self._names[name] = n
            parts.append(n)
        if correlation:
            parts.append(_string_field(_E_CORRELATION, correlation))
        event = b"".join(parts)
        body = b"".join((_P_TIMESTAMP, varint(ts), self._seq_field, _P_TRACK_EVENT, varint(len(event)), event, self._tail))
        self.raw_sink(_TRACE_PACKET + varint(len(body)) + body, type_, track, name)

    def _head(self, type_: int, track: int) -> bytes:
        head = self._heads.get((type_, track))
        if head is None:
            head = self._heads[(type_, track)] = _E_TYPE + varint(type_) + _E_TRACK + varint(track)
        return head

    def begin(self, track: int, ts: int, name: str, args: dict[str, Any] | None = None,
              correlation: str | None = None) -> None:
        self._event(track, ts, _SLICE_BEGIN, name, args, correlation)

    def end(self, track: int, ts: int) -> None:
        if self.raw_sink is not None and not self._first and 0 <= ts <= _U64:
            # everything after the timestamp is the same for every end on this track
            tail = self._ends.get(track)
            if tail is None:
                head = self._head(_SLICE_END, track)
                tail = self._ends[track] = self._seq_field + _P_TRACK_EVENT + varint(len(head)) + head + self._tail
            body = _P_TIMESTAMP + varint(ts) + tail
            self.raw_sink(_TRACE_PACKET + varint(len(body)) + body, _SLICE_END, track, None)
            return
        self._event(track, ts, _SLICE_END, None, None)

    def instant(self, track: int, ts: int, name: str, args: dict[str, Any] | None = None) -> None:
        self._event(track, ts, _INSTANT, name, args)

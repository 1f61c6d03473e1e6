"""TrackEvent packets of the merged trace's own sequence: the application's process track.

Role: thin over the generated protos (as Perfetto's trace_builder is): it
fills TracePackets for process/child track descriptors, slices and instants
and hands them to a sink. All timestamps are BOOTTIME ns. The first packet
clears the sequence's incremental state, later ones declare they need it, as
the Perfetto SDK does. UUIDs are deterministic (a fixed prefix and a
counter), so two merges of one session give identical files.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tessera.schemas.perfetto import (CLOCK_BOOTTIME, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE,
                                      TracePacket)

_UUID_BASE = 0x7E55E4A000000000


class TrackWriter:
    def __init__(self, sink: Callable[[TracePacket], None], sequence_id: int) -> None:
        self.sink = sink
        self.sequence_id = sequence_id
        self._first = True
        self._next_uuid = _UUID_BASE

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

    def begin(self, track: int, ts: int, name: str, args: dict[str, Any] | None = None,
              correlation: str | None = None) -> None:
        self._event(track, ts, pb.TrackEvent.TYPE_SLICE_BEGIN, name, args, correlation)

    def end(self, track: int, ts: int) -> None:
        self._event(track, ts, pb.TrackEvent.TYPE_SLICE_END, None, None)

    def instant(self, track: int, ts: int, name: str, args: dict[str, Any] | None = None) -> None:
        self._event(track, ts, pb.TrackEvent.TYPE_INSTANT, name, args)

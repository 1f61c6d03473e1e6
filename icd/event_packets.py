"""Render-stage event packets, encoded as bytes without building protobuf messages.

Role: the timeline writes one TracePacket per GPU event (icd/trace.py). Building it as a
protobuf message and serialising it costs ~6 µs per event in Python; this module writes the
same bytes directly (~2 µs): each field's key comes from the protos' descriptors
(schemas/protowire.py, checked at import), values are varints or UTF-8 strings, fields in
field-number order as protobuf serialises them, so the bytes equal
`TracePacket.SerializeToString()` of the same event (tests/icd/test_event_packets.py compares
them over many events). The extra_data entries that come from the workload's facts (not its
labels, which carry a new tag each recording) repeat from frame to frame: their encoding is
kept, up to EXTRA_CACHE entries. An event is its `shape` (what stays the same each time its
workload is placed) `patch`ed with its time, id, labels, submission and render pass instance;
the timeline's placement plans in C patch the same parts (`constant_parts`,
vkapi/runtime/event_packets.c).

Imported with the first GpuTrace (the protos take ~35 ms to load). Not thread-safe: the
timeline calls it from one thread at a time.
"""
from __future__ import annotations

from typing import NamedTuple

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tessera.schemas.perfetto import ONE_BYTE_VARINTS, PACKET_TAG, varint
from tessera.schemas.protowire import key

_P, _E, _X = pb.TracePacket, pb.GpuRenderStageEvent, pb.GpuRenderStageEvent.ExtraData
K_TIMESTAMP = key(_P, "timestamp", "varint")
K_SEQUENCE = key(_P, "trusted_packet_sequence_id", "varint")
K_FLAGS = key(_P, "sequence_flags", "varint")
K_EVENT = key(_P, "gpu_render_stage_event", "message")
K_EVENT_ID = key(_E, "event_id", "varint")
K_DURATION = key(_E, "duration", "varint")
K_CONTEXT = key(_E, "context", "varint")
K_EXTRA = key(_E, "extra_data", "message")
K_RENDER_PASS = key(_E, "render_pass_handle", "varint")
K_SUBMISSION = key(_E, "submission_id", "varint")
K_GPU = key(_E, "gpu_id", "varint")
K_COMMAND_BUFFER = key(_E, "command_buffer_handle", "varint")
K_QUEUE = key(_E, "hw_queue_iid", "varint")
K_STAGE = key(_E, "stage_iid", "varint")
K_RENDER_PASS_INSTANCE = key(_E, "render_pass_instance_id", "varint")
K_NAME = key(_X, "name", "bytes")
K_VALUE = key(_X, "value", "bytes")

# The order `EventEncoder.packet` writes the event's fields in: protobuf writes them by field number.
_ORDER = ("event_id", "duration", "context", "extra_data", "render_pass_handle", "submission_id", "gpu_id",
          "command_buffer_handle", "hw_queue_iid", "stage_iid", "render_pass_instance_id")
if [_E.DESCRIPTOR.fields_by_name[n].number for n in _ORDER] != sorted(
        _E.DESCRIPTOR.fields_by_name[n].number for n in _ORDER):
    raise TypeError("GpuRenderStageEvent's field numbers changed: EventEncoder.packet's order is wrong")

EXTRA_CACHE = 4096


def _delimited(k: bytes, data: bytes) -> bytes:
    return k + varint(len(data)) + data


def extra_entry(name: str, value: str) -> bytes:
    """One GpuRenderStageEvent.extra_data entry (name, value), with its key."""
    return _delimited(K_EXTRA, _delimited(K_NAME, name.encode()) + _delimited(K_VALUE, value.encode()))


def arg_text(value: object) -> str:
    """An extra_data value as the trace writes it: a tuple as a list, anything else as str()."""
    return str(list(value)) if type(value) is tuple else str(value)


class EventEncoder:
    """Bytes of render-stage event packets for one packet sequence."""

    def __init__(self, sequence: int, flags: int, context: int) -> None:
        self._head = K_SEQUENCE + varint(sequence) + K_FLAGS + varint(flags)
        self._context = K_CONTEXT + varint(context)
        self._extras: dict[tuple, bytes] = {}
        self._names: dict[str, bytes] = {}     # an entry's name part, by name (a handful of names)
        self._tails: dict[tuple, bytes] = {}   # the fields after submission_id, by their values
        self._high = (-1, b"")   # (n >> 21, its varint) of the last timestamp: events of a frame share it

    def entry(self, name: str, value: str) -> bytes:
        """extra_entry(name, value), its name part kept: the labels' entries, new text every event."""
        head = self._names.get(name)
        if head is None:
            head = self._names[name] = _delimited(K_NAME, name.encode())
        v = value.encode()
        n = len(v)
        inner = head + K_VALUE + (ONE_BYTE_VARINTS[n] if n < 0x80 else varint(n)) + v
        n = len(inner)
        return K_EXTRA + (ONE_BYTE_VARINTS[n] if n < 0x80 else varint(n)) + inner

    def extras(self, items: dict[str, object]) -> bytes:
        """The extra_data entries of `items` (name -> value), in order, cached by content."""
        try:
            k = tuple(items.items())
            cached = self._extras.get(k)
        except TypeError:   # an unhashable value: encoded each time
            return b"".join(extra_entry(n, arg_text(v)) for n, v in items.items())
        if cached is None:
            if len(self._extras) >= EXTRA_CACHE:
                self._extras.clear()
            cached = self._extras[k] = b"".join(extra_entry(n, arg_text(v)) for n, v in items.items())
        return cached

    def constant_parts(self, label_name: str, stack_name: str) -> tuple[bytes, ...]:
        """What a native placement plan patches events with (icd/placement_plans.py, its header's order):
        the event_id, render pass instance, timestamp, event and packet keys, the packet's sequence head,
        the extra_data key, the label and label stack entries' name parts and the value key."""
        return (K_EVENT_ID, K_RENDER_PASS_INSTANCE, K_TIMESTAMP, K_EVENT, PACKET_TAG, self._head, K_EXTRA,
                _delimited(K_NAME, label_name.encode()), _delimited(K_NAME, stack_name.encode()), K_VALUE)

    def shape(self, *, duration: int, args: bytes, render_pass_handle: int | None, gpu: int,
              command_buffer: int, queue: int, stage: int) -> "EventShape":
        """The parts of an event's packet that stay the same each time the same workload is placed
        (`patch` adds what changes: its time, id, labels, submission and render pass instance)."""
        key = (gpu, command_buffer, queue, stage)
        tail = self._tails.get(key)   # a queue and stage per command buffer: a few per frame
        if tail is None:
            if len(self._tails) >= EXTRA_CACHE:
                self._tails.clear()
            tail = self._tails[key] = b"".join((K_GPU, varint(gpu), K_COMMAND_BUFFER, varint(command_buffer),
                                                K_QUEUE, varint(queue), K_STAGE, varint(stage)))
        before_labels = K_DURATION + varint(duration) + self._context
        after_labels = args if render_pass_handle is None else args + K_RENDER_PASS + varint(render_pass_handle)
        return EventShape(before_labels, after_labels + K_SUBMISSION, tail)

    def patch(self, shape: "EventShape", timestamp: int, event_id: int, labels: bytes, submission: int,
              render_pass_instance: int | None) -> bytes:
        """The bytes appending one event's TracePacket to a trace file: `shape`'s parts with the event's
        own fields, in field-number order. `labels`: its label extra_data entries (read first)."""
        event = b"".join((K_EVENT_ID, varint(event_id), shape.before_labels, labels, shape.after_labels,
                          varint(submission), shape.tail))
        if render_pass_instance is not None:
            event += K_RENDER_PASS_INSTANCE + varint(render_pass_instance)
        packet = b"".join((K_TIMESTAMP, self._timestamp(timestamp), self._head, K_EVENT, varint(len(event)), event))
        return PACKET_TAG + varint(len(packet)) + packet

    def _timestamp(self, n: int) -> bytes:
        """varint(n) for a time in ns: its low three 7-bit groups, then the varint of the rest, which
        changes every ~2 ms (kept from the last call)."""
        if n < 1 << 21:
            return varint(n)
        high = n >> 21
        if self._high[0] != high:
            self._high = (high, varint(high))
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, ((n >> 14) & 0x7F) | 0x80)) + self._high[1]


class EventShape(NamedTuple):
    """An event packet's constant parts (EventEncoder.shape): the fields between event_id and the labels,
    those after the labels up to submission_id's key, and those after submission_id's value."""
    before_labels: bytes
    after_labels: bytes
    tail: bytes

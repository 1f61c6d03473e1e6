"""schemas/workloads.py: a WORKLOADS batch stands for exactly the WORKLOADs of its entries."""
from __future__ import annotations

from tessera.schemas import messages
from tessera.schemas import workloads as batch
from tessera.schemas.frames import FrameDecoder, MessageType, encode

SHARED = {"device": "0xd1", "command_buffer": "0xcb1"}
DISPATCH = {"kind": "dispatch", "command": "vkCmdDispatch", "groups": [4, 1, 1]}
FILL = {"kind": "buffer_transfer", "subtype": "fill buffer", "bytes": 64}


def frames(*encoded: bytes):
    return FrameDecoder().feed(b"".join(encoded))


def test_a_batch_expands_to_the_workload_frames_it_replaces():
    payload = batch.envelope("0xd1", "0xcb1", [batch.entry(5, DISPATCH), batch.entry(6, FILL)])
    assert messages.problems(MessageType.WORKLOADS, payload) == []
    expanded = dict(batch.expand(payload))
    single = {5: {**SHARED, **DISPATCH}, 6: {**SHARED, **FILL}}
    assert expanded == single
    as_frames = [encode(MessageType.WORKLOAD, w, tag=t) for t, w in single.items()]
    assert batch.described(frames(encode(MessageType.WORKLOADS, payload))) == batch.described(frames(*as_frames))


def test_entries_are_checked_against_the_workload_schema_by_tag():
    payload = batch.envelope("0xd1", "0xcb1", [batch.entry(1, DISPATCH), batch.entry(2, {"kind": "teapot"})])
    assert messages.problems(MessageType.WORKLOADS, payload) == []          # the envelope is fine
    [problem] = batch.all_problems(MessageType.WORKLOADS, payload)
    assert problem.startswith("workloads t2: kind: 'teapot' is not one of")


def test_the_envelope_needs_tags_and_at_least_one_entry():
    assert messages.problems(MessageType.WORKLOADS, batch.envelope("0xd1", "0xcb1", []))
    assert messages.problems(MessageType.WORKLOADS, batch.envelope("0xd1", "0xcb1", [DISPATCH]))
    assert messages.problems(MessageType.WORKLOADS, batch.envelope("0xd1", "0xcb1", [batch.entry(0, DISPATCH)]))

"""schemas/workloads.py: a WORKLOADS batch stands for exactly the WORKLOADs of its entries, a RECORDED_AGAIN for
its earlier tags' WORKLOADs."""
from __future__ import annotations

from tessera.schemas import messages
from tessera.schemas import workloads as batch
from tessera.schemas.frames import FrameDecoder, MessageType, encode, json_body

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


def test_recorded_again_stands_for_the_workloads_of_its_earlier_tags_read_in_any_order():
    """RECORDED_AGAIN (protocol 5): each [tag, earlier] pair describes `tag` as `earlier`; a pair read before
    its earlier tag's description is resolved once the stream is read, as is a chain of pairs."""
    full = encode(MessageType.WORKLOADS, batch.envelope("0xd1", "0xcb1", [batch.entry(5, DISPATCH),
                                                                            batch.entry(6, FILL)]))
    again = batch.recorded_again([(7, 5), (8, 6)])
    assert messages.problems(MessageType.RECORDED_AGAIN, again) == []
    chained = encode(MessageType.RECORDED_AGAIN, batch.recorded_again([(9, 7)]))
    described = batch.described(frames(chained, encode(MessageType.RECORDED_AGAIN, again), full))
    workload = {5: {**SHARED, **DISPATCH}, 6: {**SHARED, **FILL}}
    assert described == {**workload, 7: workload[5], 8: workload[6], 9: workload[5]}


def test_repeats_leave_pairs_whose_earlier_tag_is_never_described():
    known: dict[int, str] = {1: "one"}
    repeats = batch.Repeats(known)
    repeats.add([(3, 2), (4, 1), (5, 99)])
    assert known == {1: "one", 4: "one"}
    repeats.add([(2, 4)])
    assert repeats.finish() == [(5, 99)] and known == {1: "one", 2: "one", 3: "one", 4: "one"}


def test_recorded_again_pairs_are_two_tags_each():
    for bad in ({"tags": []}, {"tags": [[1]]}, {"tags": [[1, 2, 3]]}, {"tags": [[0, 1]]}, {"tags": [[1, "2"]]},
                {"tags": [[1, 2]], "device": "0xd1"}):
        assert messages.problems(MessageType.RECORDED_AGAIN, bad), bad


def test_the_c_text_of_a_recorded_again_is_its_json():
    """vkapi/runtime/reported_submits.c writes RECORDED_AGAIN as again_c_text's head, `[tag,earlier]` pairs joined
    by commas, and its tail: json_body of the same payload."""
    head, tail = batch.again_c_text()
    pairs = [(12, 2), (13, 3), (18446744073709551615, 1)]
    assert (head + ",".join(f"[{t},{e}]" for t, e in pairs) + tail).encode() == \
        json_body(batch.recorded_again(pairs))


def test_repeats_follow_a_long_chain_read_in_reverse():
    """Pairs read before what they name, each naming the next one read: all resolved; a cycle of pairs that
    reaches no description stays unresolved, in its order (Repeats.finish follows each link once)."""
    n = 20_000
    known: dict[int, str] = {0: "zero"}
    repeats = batch.Repeats(known)
    cycle = [(-k, -(k % n) - 1) for k in range(1, n + 1)]   # -1 as -2, ..., -n as -1
    repeats.add([(k, k - 1) for k in range(n, 0, -1)] + cycle)
    assert repeats.finish() == cycle
    assert len(known) == n + 1 and known[n] == "zero"

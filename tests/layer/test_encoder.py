"""WORKLOADS frames joined from kept entry text (layer/encoder.py `workloads`, and `workloads_again` from a
product's rows) are byte for byte the frames json_body writes of the batch's envelope, entries and fields, on
hits and misses of the kept text; SUBMIT and FRAME frames written as one format (`submit`, `frame`) are those
json_body writes of the payload."""
from __future__ import annotations

from tessera.layer import encoder
from tessera.layer.trackers import Workload
from tessera.schemas import workloads as batch
from tessera.schemas.frames import FrameDecoder, MessageType, encode, json_body


def _reference(device: int, cb: int, described) -> bytes:
    entries = [batch.entry(w.tag, encoder.workload_fields(w, kind, meta, annex)) for w, kind, meta, annex in described]
    return encode(MessageType.WORKLOADS, json_body(batch.envelope(encoder.hex_handle(device), encoder.hex_handle(cb),
                                                                  entries)))


def test_batches_equal_the_reference_on_hits_and_misses():
    dispatch = {"command": "vkCmdDispatch", "groups": [4, 1, 1], "group_size": [64, 1, 1], "items": 256,
                "indirect": False}
    rendering = {"command": "vkCmdBeginRendering", "area": "64x64", "draw_call_count": 3,
                 "resources": {"color": ["0x55"]}, "name": "Ünïcode pass \"quoted\""}
    copy = {"command": "vkCmdCopyBuffer", "bytes": 16}
    frames = []
    for frame in range(3):    # the same fields dicts each frame, new tags: kept text after the first
        tag = 100 * frame
        frames.append([(Workload(tag + 1, (), 0), "dispatch", dispatch, False),
                       (Workload(tag + 2, ("frame", "shadows"), 0), "render_pass", rendering, True),
                       (Workload(tag + 3, ("popped",), 1), "buffer_transfer", copy, False)])
    frames.append([(Workload(7, ("frame",), 0), "buffer_transfer", dispatch, True)])   # same dict, other kind
    frames.append([])
    for i, described in enumerate(frames):
        assert encoder.workloads(0xD0, 0xCB00 + i, described) == _reference(0xD0, 0xCB00 + i, described), i


def test_a_batch_made_again_from_a_product_equals_the_reference():
    """`workloads_again` (recordings reported from a kept product, layer/replay.py): the product's rows with each
    recording's own tags make the frames the restored descriptions would, one after the other."""
    dispatch = {"command": "vkCmdDispatch", "groups": [1, 1, 1], "group_size": [1, 1, 1], "items": 1, "indirect": False}
    rendering = {"command": "vkCmdBeginRendering", "area": "8x8", "draw_call_count": 1, "name": "100% \"pass\""}
    kept = [Workload(11, ("frame",), 0), Workload(12, (), 0)]
    rows = ((1, kept[1], "render_pass", rendering, True), (0, kept[0], "dispatch", dispatch, False))

    def restored(tags):
        return [(Workload(tags[k], w.local_labels, w.pops_below_start), kind, meta, annex)
                for k, w, kind, meta, annex in rows]

    for tags in ([11, 12], [905, 906], [7, 123456789]):   # the kept recording's, then new ones
        assert encoder.workloads_again(0xD0, [(0xCB, rows, tags)]) == _reference(0xD0, 0xCB, restored(tags)), tags
    # a submit's buffers sent together (the same product in two buffers, another's): each one's frame, in order
    together = encoder.workloads_again(0xD0, [(0xCB, rows, [905, 906]), (0xCC, rows, [1, 2]), (0xCD, rows[1:], [7])])
    decoder = FrameDecoder()
    assert [(f.type, f.payload()["command_buffer"]) for f in decoder.feed(together)] == \
        [(MessageType.WORKLOADS, "0xcb"), (MessageType.WORKLOADS, "0xcc"), (MessageType.WORKLOADS, "0xcd")] \
        and decoder.pending == 0
    assert together == _reference(0xD0, 0xCB, restored([905, 906])) + _reference(0xD0, 0xCC, restored([1, 2])) + \
        _reference(0xD0, 0xCD, restored([7, 7])[1:])
    for i in range(encoder._EntryTexts.CACHE + 3):   # the kept formats are bounded
        encoder.workloads_again(1, [(2, ((0, kept[0], "dispatch", {"items": i}, False),), [i])])
    assert 0 < len(encoder._AGAIN) <= encoder._EntryTexts.CACHE


def test_the_kept_text_is_bounded():
    for i in range(encoder._EntryTexts.CACHE + 3):
        encoder.workloads(1, 2, [(Workload(i, (), 0), "dispatch", {"items": i}, False)])
    assert 0 < len(encoder._ENTRIES._texts) <= encoder._EntryTexts.CACHE


def test_frames_equal_the_reference():
    cases = [(0, 0xD0, "queue 0.0", "present", 100, None), (7, 1, 'Ünïcode "queue"\n', "frame_boundary", 0, ()),
             (2**40, 0xFFFFFFFFFFFFFFFF, "queue 1.2", "present", 123456789012345, (0x55, 0, 0xFFFFFFFFFFFFFFFF))]
    for number, device, queue, source, time_ns, images in cases:
        payload = {"frame": number, "time_ns": time_ns, "device": encoder.hex_handle(device), "queue": queue,
                   "source": source}
        if images is not None:
            payload["images"] = [encoder.hex_handle(i) for i in images]
        reference = encode(MessageType.FRAME, json_body(payload))
        assert encoder.frame(number, device, queue, source, time_ns, images) == reference


def test_submits_equal_the_reference():
    cases = [(5, 0xD0, "queue 0.0", [0x10], [1], 2, False, 100, 30),
             (6, 0xD0, "queue 0.0", [0x10, 0xFFFFFFFFFFFFFFFF], [1, 2, 2**63], 0, True, 0, 0),
             (7, 1, "queue 1.2", [], [], 9, False, -5, 123456789012345),
             (8, 1, 'Ünïcode "queue"\n', [0xAB], [3], 1, True, 1, 1)]
    for submit_id, device, queue, cbs, tags, frame, annexed, time_ns, duration_ns in cases:
        reference = encode(MessageType.SUBMIT, json_body({
            "device": encoder.hex_handle(device), "queue": queue, "time_ns": time_ns, "duration_ns": duration_ns,
            "command_buffers": [encoder.hex_handle(a) for a in cbs], "tags": tags, "frame": frame,
            "annexed": annexed}), sequence=submit_id)
        assert encoder.submit(submit_id, device, queue, cbs, tags, frame, annexed, time_ns, duration_ns) == reference


def test_a_submits_annexes_are_the_annex_frames_one_after_the_other():
    """encoder.annexes: the same bytes as encoder.annex of each, labels alone (their JSON kept) or not, the kept
    JSON never standing for other labels."""
    fields_of = {7: {"labels": ["frame", 'shadow "0"', "ü"]}, 8: {"labels": ["frame"]},
                 9: {"labels": ["frame"], "draw_call_count": 3, "parts": 2}, 10: {"labels": []}}
    expected = b"".join(encoder.annex(42, tag, fields) for tag, fields in fields_of.items())
    assert encoder.annexes(42, fields_of) == expected
    assert encoder.annexes(43, {8: {"labels": ["frame", "x"]}}) == encoder.annex(43, 8, {"labels": ["frame", "x"]})

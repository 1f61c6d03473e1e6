"""WORKLOADS frames joined from kept entry text (layer/encoder.py `workloads`) are byte for byte the frames
json_body writes of the batch's envelope, entries and fields, on hits and misses of the kept text."""
from __future__ import annotations

from tessera.layer import encoder
from tessera.layer.trackers import Workload
from tessera.schemas import workloads as batch
from tessera.schemas.frames import MessageType, encode, json_body


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


def test_the_kept_text_is_bounded():
    for i in range(encoder._EntryTexts.CACHE + 3):
        encoder.workloads(1, 2, [(Workload(i, (), 0), "dispatch", {"items": i}, False)])
    assert 0 < len(encoder._ENTRIES._texts) <= encoder._EntryTexts.CACHE

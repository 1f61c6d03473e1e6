"""The wire framing, without sockets: round trips, random splits, garbage, limits."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.schemas import messages
from tessera.schemas.frames import (SEQUENCE_BIT, Frame, FrameDecoder, FrameError, MessageType, encode, iter_file)

HELLO = {"protocol": 1, "pid": 7, "process": "app", "layer": "0.1",
         "clock_sync": {"monotonic_raw_ns": 10, "boottime_ns": 20}}

payloads = st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=20), st.booleans()),
                           max_size=4)
frame_specs = st.tuples(st.sampled_from([0x01, 0x02, 0x03, 0x04, 0x81, 0x82, 0x05, 0x85]),
                        st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), payloads)


def _encode(spec) -> bytes:
    t, seq, tag, payload = spec
    return encode(t, payload, tag=tag, sequence=seq if t & SEQUENCE_BIT else None)


def _decode_all(chunks, max_json=1 << 20) -> list[Frame]:
    d = FrameDecoder(max_json)
    out = []
    for c in chunks:
        out += d.feed(c)
    d.finish()
    return out


def test_header_layout_is_little_endian_per_formats_md():
    plain = encode(MessageType.WORKLOAD, {"a": 1}, tag=0x0102)
    assert plain[0] == 0x03 and plain[1:9] == (0x0102).to_bytes(8, "little")
    assert plain[9:13] == len(b'{"a":1}').to_bytes(4, "little") and plain[13:] == b'{"a":1}'
    seq = encode(MessageType.ANNEX, {}, tag=5, sequence=9)
    assert seq[0] == 0x82 and seq[1:9] == (9).to_bytes(8, "little") and seq[9:17] == (5).to_bytes(8, "little")
    with pytest.raises(ValueError):
        encode(MessageType.SUBMIT, {})
    with pytest.raises(ValueError):
        encode(MessageType.HELLO, {}, sequence=1)


@settings(max_examples=150)
@given(st.lists(frame_specs, min_size=1, max_size=12), st.data())
def test_random_splits_give_the_same_frames(specs, data):
    stream = b"".join(_encode(s) for s in specs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    frames = _decode_all(chunks)
    whole = _decode_all([stream])
    assert frames == whole
    assert [(f.type, f.sequence if f.type & SEQUENCE_BIT else None, f.tag, json.loads(f.body)) for f in frames] == \
           [(t, s if t & SEQUENCE_BIT else None, g, p) for t, s, g, p in specs]
    assert [f.offset for f in frames] == [sum(f2.size for f2 in frames[:i]) for i in range(len(frames))]


@settings(max_examples=300)
@given(st.binary(max_size=300), st.lists(st.integers(1, 64), max_size=10))
def test_random_garbage_raises_only_frame_error(garbage, sizes):
    d = FrameDecoder(max_json=256)
    pos = 0
    try:
        for n in [*sizes, len(garbage)]:
            for f in d.feed(garbage[pos:pos + n]):
                try:
                    f.payload()
                except FrameError as e:
                    assert not e.fatal
            pos += n
        d.finish()
    except FrameError as e:
        assert 0 <= e.offset <= len(garbage)


def test_oversized_length_is_fatal_and_keeps_earlier_frames():
    good = encode(MessageType.FRAME, {"frame": 1, "time_ns": 2})
    bad = bytes([0x04]) + (0).to_bytes(8, "little") + (1 << 30).to_bytes(4, "little")
    d = FrameDecoder(max_json=1024)
    with pytest.raises(FrameError) as info:
        d.feed(good + bad)
    e = info.value
    assert e.fatal and e.offset == len(good) and "above the limit of 1024" in e.message
    assert [f.offset for f in e.frames] == [0]
    with pytest.raises(FrameError) as again:
        d.feed(b"more")
    assert again.value.frames == []          # delivered once


def test_truncated_stream_is_reported_at_finish():
    data = encode(MessageType.HELLO, HELLO)
    d = FrameDecoder()
    assert d.feed(data[:-3]) == []
    assert d.pending == len(data) - 3
    with pytest.raises(FrameError, match="ends inside a frame") as info:
        d.finish()
    assert info.value.offset == 0


def test_invalid_utf8_and_json_are_not_fatal():
    for body in (b"\xff\xfe", b"{not json", b""):
        f = FrameDecoder().feed(encode(MessageType.DEVICE, body))[0]
        with pytest.raises(FrameError) as info:
            f.payload()
        assert not info.value.fatal and "invalid JSON" in str(info.value)


def test_unknown_types_are_skippable_by_the_sequence_bit():
    stream = encode(0x7E, {"future": True}) + encode(0xFE, {"x": 1}, sequence=3, tag=4) + encode(0x01, HELLO)
    frames = _decode_all([stream])
    assert [(f.type, f.known, f.sequence) for f in frames] == [(0x7E, False, None), (0xFE, False, 3), (0x01, True, None)]


def test_iter_file_reads_a_spool(tmp_path):
    path = tmp_path / "layer-7.spool"
    path.write_bytes(encode(MessageType.HELLO, HELLO) + encode(MessageType.FRAME, {"frame": 0, "time_ns": 1}))
    assert [f.type for f in iter_file(path, chunk=5)] == [MessageType.HELLO, MessageType.FRAME]


def test_schemas_accept_valid_and_name_violations():
    assert messages.problems(MessageType.HELLO, HELLO) == []
    assert messages.problems(MessageType.SUBMIT, {"device": "d", "queue": "q", "time_ns": 1,
                                                  "command_buffers": [], "duration_ns": 5}) == []
    errors = messages.problems(MessageType.WORKLOAD, {"kind": "teapot", "device": "d", "command_buffer": "c"})
    assert errors and errors[0].startswith("kind:")
    assert messages.problems(0x55, {"anything": 1}) == []      # unknown types have no schema


@given(st.sampled_from([t.value for t in MessageType] + [0x05, 0x7F, 0x83, 0xFF]),
       st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.binary(max_size=64))
def test_header_matches_its_construct_definition(type_, sequence, tag, body):
    """The struct shapes the encoder and decoder use agree with a declarative description of the layout
    (the module docstring's), written with `construct`."""
    import construct as cs

    HEADER = cs.Struct(
        "type" / cs.Int8ul,
        "sequence" / cs.If(cs.this.type & SEQUENCE_BIT, cs.Int64ul),
        "tag" / cs.Int64ul,
        "json_length" / cs.Int32ul,
    )
    seq = sequence if type_ & 0x80 else None
    data = encode(type_, body, tag=tag, sequence=seq)
    parsed = HEADER.parse(data)
    assert (parsed.type, parsed.sequence, parsed.tag, parsed.json_length) == (type_, seq, tag, len(body))
    assert HEADER.build(dict(type=type_, sequence=seq, tag=tag, json_length=len(body))) + body == data
    (frame,) = FrameDecoder().feed(data)
    assert (frame.type, frame.sequence, frame.tag, frame.body) == (type_, seq, tag, body)

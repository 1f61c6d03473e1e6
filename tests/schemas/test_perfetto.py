"""schemas.perfetto: the Trace.packet framing (iter_raw, read_packets) on whole,
chunked and damaged files."""
from __future__ import annotations

import pytest

from tessera.schemas import perfetto as pf


def packets(n: int) -> list[pf.TracePacket]:
    out = []
    for i in range(n):
        p = pf.TracePacket()
        p.timestamp = 1000 + i
        p.trusted_packet_sequence_id = 7
        p.gpu_render_stage_event.event_id = i
        p.gpu_render_stage_event.extra_data.add(name="Labels", value="x" * (i * 13 % 300))   # 1- and 2-byte lengths
        out.append(p)
    return out


def write(path, items) -> bytes:
    data = b"".join(pf.frame_packet(p) for p in items)
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_iter_raw_gives_each_field_and_offset_whatever_the_chunk(tmp_path, chunk):
    items = packets(40)
    data = write(tmp_path / "t", items)
    got = list(pf.iter_raw(tmp_path / "t", chunk))
    assert len(got) == len(items)
    offset = 0
    for (buf, start, body, end, after), p in zip(got, items):
        field = pf.frame_packet(p)
        assert buf[start:end] == field == data[offset:after]
        assert buf[body:end] == p.SerializeToString()
        offset = after
    assert offset == len(data)
    assert [q.SerializeToString() for q in pf.read_packets(tmp_path / "t", chunk)] == \
        [p.SerializeToString() for p in items]


def test_empty_trace_and_empty_packet(tmp_path):
    (tmp_path / "e").write_bytes(b"")
    assert list(pf.read_packets(tmp_path / "e")) == []
    (tmp_path / "z").write_bytes(b"\x0a\x00")
    assert [p.ByteSize() for p in pf.read_packets(tmp_path / "z")] == [0]


@pytest.mark.parametrize("chunk", [1, 5, 1 << 20])
def test_truncated_trace_yields_what_precedes_then_raises(tmp_path, chunk):
    data = write(tmp_path / "t", packets(3))
    (tmp_path / "cut").write_bytes(data[:-2])
    seen = []
    with pytest.raises(pf.TraceFormatError) as err:
        for p in pf.read_packets(tmp_path / "cut", chunk):
            seen.append(p)
    assert len(seen) == 2
    first_two = len(pf.frame_packet(packets(3)[0])) + len(pf.frame_packet(packets(3)[1]))
    assert err.value.offset == first_two
    assert "trace ends inside a packet" in str(err.value)


def test_wrong_field_and_long_varint_are_format_errors(tmp_path):
    data = write(tmp_path / "t", packets(1))
    (tmp_path / "bad").write_bytes(data + b"\x12\x00")
    with pytest.raises(pf.TraceFormatError, match="expected a Trace.packet field") as err:
        list(pf.iter_raw(tmp_path / "bad"))
    assert err.value.offset == len(data)
    (tmp_path / "long").write_bytes(b"\x0a" + b"\xff" * 11)
    with pytest.raises(pf.TraceFormatError, match="varint too long"):
        list(pf.read_packets(tmp_path / "long"))


def test_undecodable_packet_names_its_offset(tmp_path):
    data = write(tmp_path / "t", packets(2))
    (tmp_path / "bad").write_bytes(data + b"\x0a\x02\xff\xff")
    with pytest.raises(pf.TraceFormatError, match="undecodable TracePacket") as err:
        list(pf.read_packets(tmp_path / "bad"))
    assert err.value.offset == len(data)


def test_varint_is_protobufs():
    from google.protobuf.internal.encoder import _VarintBytes
    for n in [0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, 0x1FFFFF, 0x200000, 5_000_000_000, (1 << 63) - 1, 1 << 63,
              (1 << 64) - 1, *range(0, 70000, 97)]:
        assert pf.varint(n) == _VarintBytes(n), n

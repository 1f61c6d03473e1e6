"""The field keys Tessera encodes itself (hostd tracks.py, merge.py; icd/event_packets.py) are the ones
protobuf writes.

protowire.key() computes each key from the descriptor at import; these tests check every key it
made against protobuf's own serialisation of a message with only that field set, so a proto whose
field number or type drifts fails here (or at import), and that no literal key bytes came back."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf.descriptor import FieldDescriptor as F

import tessera.hostd.merge  # noqa: F401 - imported for the keys it makes
import tessera.hostd.tracks  # noqa: F401
import tessera.icd.event_packets  # noqa: F401
from tessera.schemas import protowire
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

ROOT = Path(protowire.__file__).parent.parent


def _serialised_key(message: type, field: str) -> bytes:
    """What protobuf writes before the value of `field` when it is the only field set."""
    m = message()
    d = message.DESCRIPTOR.fields_by_name[field]
    if d.type == F.TYPE_MESSAGE:
        if d.is_repeated:
            getattr(m, field).add()
        else:
            getattr(m, field).SetInParent()
        value = b"\x00"                  # an empty embedded message: length 0
    elif d.type in (F.TYPE_STRING, F.TYPE_BYTES):
        setattr(m, field, "x" if d.type == F.TYPE_STRING else b"x")
        value = b"\x01x"
    else:
        setattr(m, field, 1)
        value = b"\x01"
    data = m.SerializeToString()
    assert data.endswith(value)
    return data[:-len(value)]


def test_keys_were_made_for_both_writers():
    fields = {(m.DESCRIPTOR.full_name, f) for m, f, _, _ in protowire.KEYS}
    assert ("perfetto.protos.TrackEvent", "name") in fields                        # tracks.py
    assert ("perfetto.protos.GpuRenderStageEvent", "extra_data") in fields         # merge.py
    assert ("perfetto.protos.GpuRenderStageEvent", "stage_iid") in fields          # icd/event_packets.py
    assert len(fields) >= 19


@pytest.mark.parametrize("message, field, encoding, key", protowire.KEYS,
                         ids=[f"{m.__name__}.{f}" for m, f, _, _ in protowire.KEYS])
def test_each_key_is_what_protobuf_writes(message, field, encoding, key):
    assert key == _serialised_key(message, field)


def test_a_field_of_another_type_is_refused():
    with pytest.raises(TypeError, match="name"):
        protowire.key(pb.TrackEvent, "name", "varint")
    with pytest.raises(TypeError, match="no field"):
        protowire.key(pb.TrackEvent, "no_such_field", "bytes")
    with pytest.raises(TypeError, match="repeated scalar"):
        protowire.key(pb.TrackEvent, "extra_counter_track_uuids", "varint")


@pytest.mark.parametrize("module", ["hostd/tracks.py", "hostd/merge.py", "icd/event_packets.py"])
def test_no_literal_key_bytes(module):
    """Keys are built from the descriptors, not written as b"\\x.." literals."""
    text = (ROOT / module).read_text()
    assert not re.findall(r'b"\\x[0-9a-f]{2}', text)

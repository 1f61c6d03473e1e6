"""Arm's GPU Timeline protocol without sockets: the .proto's runtime-built classes against protoc and
against hand-made wire bytes (arm_fixtures), the comms framing, the record nesting, one connection's
ingest (log first, registry reply, malformed input), the log reader and the .metadata framing."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

import arm_fixtures as af
from tessera.hostd.arm_ingest import ARM_LOG_NAME, ArmIngest, read_arm_log
from tessera.hostd.arm_metadata import ArmNester, read_metadata, tessera_workload, write_metadata
from tessera.hostd.config import Address, DaemonConfig
from tessera.schemas import arm_timeline as at
from tessera.schemas import arm_wire as wire
from tessera.schemas.logfile import read_stream

DEV, PID = 0xD00D, 4242


def records() -> list[bytes]:
    """A stream of every record kind in Arm's nesting order."""
    return [
        af.header(), af.device(DEV, PID, 51, 0, 3, "Mali-G720"),
        af.submit(1_000, DEV, 0x51),
        af.renderpass(1, 1920, 1080, 12, 2, labels=["Shadow pass"],
                      attachments=[af.attachment(1, 0), af.attachment(1, 1, not_loaded=True, resolved=True),
                                   af.attachment(2, not_stored=True)]),
        af.continue_renderpass(1, 3),
        af.dispatch(2, 64, 1, 1, labels=["Cull"]), af.dispatch(3, -1, -1, -1),
        af.trace_rays(4, 64, 32, 1), af.image_transfer(5, 4096, 3), af.buffer_transfer(6, 65536, 2),
        af.as_build(7, 100, 1), af.as_transfer(8, 2048, 2), af.data_graph(9),
        af.frame(1, DEV, 2_000),
        af.submit(3_000, DEV, 0x51), af.dispatch(10, 8, 8, 1),
    ]


def test_runtime_descriptor_equals_protoc():
    protoc = pytest.importorskip("grpc_tools.protoc")
    import tempfile

    from google.protobuf import descriptor_pb2

    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "set.pb"
        assert protoc.main(["protoc", f"-I{at.PROTO_PATH.parent}", f"--descriptor_set_out={out}",
                            str(at.PROTO_PATH)]) == 0
        made = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    assert made == at.FILE


def test_hand_made_bytes_decode_to_the_published_fields():
    r = at.TimelineRecord.FromString(af.dispatch(7, 64, -1, 2, labels=["a", "b"]))
    assert [f.name for f, _ in r.ListFields()] == ["dispatch"]
    assert (r.dispatch.tag_id, r.dispatch.x_groups, r.dispatch.y_groups, r.dispatch.z_groups) == (7, 64, -1, 2)
    assert list(r.dispatch.debug_label) == ["a", "b"]
    d = at.TimelineRecord.FromString(af.device(DEV, PID, 51, 1, 2, "Mali")).metadata
    assert (d.id, d.process_id, d.major_version, d.minor_version, d.patch_version, d.name) == (DEV, PID, 51, 1, 2, "Mali")
    # and Tessera's encoding of the same message is the same bytes (field order as declared)
    mine = at.TimelineRecord()
    mine.dispatch.tag_id, mine.dispatch.x_groups, mine.dispatch.y_groups, mine.dispatch.z_groups = 7, 64, -1, 2
    mine.dispatch.debug_label.extend(["a", "b"])
    assert mine.SerializeToString() == af.dispatch(7, 64, -1, 2, labels=["a", "b"])
    assert at.RECORD_FIELDS[:4] == ("header", "metadata", "frame", "submit")


def test_comms_header_and_registry_bytes():
    assert wire.HEADER_SIZE == 14
    assert wire.encode(2, 0, 9, b"xy") == struct.pack("<BBQL", 2, 0, 9, 2) + b"xy"
    reply = wire.registry_payload({0: "registry", 1: "GPUTimeline"})
    assert reply == b"\x00\x08\x00\x00\x00registry\x01\x0b\x00\x00\x00GPUTimeline"
    assert af.parse_registry(reply) == wire.parse_registry(reply) == {"registry": 0, "GPUTimeline": 1}


def test_decoder_in_one_byte_pieces_and_bad_headers():
    stream = af.message(af.TX_RX, 0, 1) + af.message(af.TX, 1, 2, af.header()) + af.message(af.TX_ASYNC, 1, 3, b"z" * 300)
    d = wire.ArmDecoder()
    got = [m for i in range(len(stream)) for m in d.feed(stream[i:i + 1])]
    assert [(m.type, m.endpoint, m.message_id, m.offset) for m in got] == [(2, 0, 1, 0), (1, 1, 2, 14), (0, 1, 3, 30)]
    assert got[2].payload == b"z" * 300 and d.pending == 0
    with pytest.raises(wire.ArmWireError, match="unknown message type 7"):
        wire.ArmDecoder().feed(af.message(af.TX, 1, 1, b"ok") + b"\x07" + bytes(13))
    with pytest.raises(wire.ArmWireError, match="above the limit"):
        wire.ArmDecoder(max_payload=100).feed(struct.pack("<BBQL", 1, 1, 1, 101))


def test_nesting_follows_arms_service():
    n = ArmNester()
    frames = []
    for payload in records():
        frames += n.feed(at.TimelineRecord.FromString(payload))
    frames += n.finish()
    assert n.pid == PID and n.version == 0 and n.devices[DEV]["driver"] == "r51p0 (3)"
    first, second = frames
    assert (first["frame"], first["presentTimestamp"], second["frame"], second["presentTimestamp"]) == (0, 2_000, 1, 0)
    assert first["submits"][0]["queue"] == 0x51 and first["submits"][0]["timestamp"] == 1_000
    w = {x["tid"]: x for x in first["submits"][0]["workloads"]}
    assert w[1] == {"type": "renderpass", "tid": 1, "width": 1920, "height": 1080, "drawCallCount": 15,
                    "subpassCount": 2, "label": ["Shadow pass"],
                    "attachments": [{"binding": "C0", "load": True, "store": True, "resolve": False},
                                    {"binding": "C1", "load": False, "store": True, "resolve": True},
                                    {"binding": "D", "load": True, "store": False, "resolve": False}]}
    assert w[2] == {"type": "dispatch", "tid": 2, "xGroups": 64, "yGroups": 1, "zGroups": 1, "label": ["Cull"]}
    assert w[3]["xGroups"] == -1
    assert w[4] == {"type": "tracerays", "tid": 4, "xItems": 64, "yItems": 32, "zItems": 1, "label": []}
    assert (w[5]["type"], w[5]["subtype"], w[5]["pixelCount"]) == ("imagetransfer", "Copy buffer to image", 4096)
    assert (w[6]["type"], w[6]["subtype"], w[6]["byteCount"]) == ("buffertransfer", "Copy buffer", 65536)
    assert (w[7]["type"], w[7]["primitiveCount"], w[8]["type"], w[9]["type"]) == ("asbuild", 100, "astransfer", "datagraph")
    assert [x["tid"] for x in second["submits"][0]["workloads"]] == [10]
    assert tessera_workload(w[3])["indirect"] is True
    assert tessera_workload(w[1])["draw_call_count"] == 15


def _cfg(tmp_path: Path, **kw) -> DaemonConfig:
    return DaemonConfig(Address("tcp", host="127.0.0.1", port=0), tmp_path, **kw)


def _stream() -> bytes:
    out = af.message(af.TX_RX, 0, 1)
    for i, payload in enumerate(records()):
        out += af.message(af.TX_ASYNC if i % 2 else af.TX, 1, i + 2, payload)
    return out


def test_ingest_logs_every_byte_replies_to_the_registry_and_names_the_folder(tmp_path):
    ing = ArmIngest(_cfg(tmp_path), "test")
    stream = _stream()
    replies = b""
    for i in range(0, len(stream), 7):
        keep, reply = ing.feed(stream[i:i + 7])
        assert keep
        replies += reply
    assert replies == af.message(af.TX_RX, 0, 1, wire.registry_payload({0: "registry", 1: "GPUTimeline",
                                                                         2: "GPUProfile"}))
    ing.close("client closed")
    folder = ing.store.folder
    assert folder.name.startswith(f"arm-gpu-timeline-{PID}-")
    assert read_stream(folder / ARM_LOG_NAME) == stream
    record = json.loads((folder / "session.json").read_text())
    assert record["pid"] == PID and record["clean"] and record["records"]["dispatch"] == 3
    got = list(read_arm_log(folder / ARM_LOG_NAME, lambda o, m: pytest.fail(m)))
    assert got == [at.TimelineRecord.FromString(p) for p in records()]


@pytest.mark.parametrize("bad, why", [
    (af.message(af.TX, 1, 50, b"\x3a\xff\xff\xff\x0f"), "not a TimelineRecord"),      # length past the end
    (af.message(af.TX, 1, 50, af.dispatch(1, 1, 1, 1) + af.submit(1, 1, 1)), "one expected"),
    (b"\x09" + bytes(13), "unknown message type 9"),
    (struct.pack("<BBQL", 1, 1, 50, 1 << 30), "above the limit"),
])
def test_malformed_input_closes_the_connection_and_keeps_everything_before(tmp_path, bad, why, caplog):
    ing = ArmIngest(_cfg(tmp_path), "test")
    good = _stream()
    keep, _ = ing.feed(good + bad + af.message(af.TX, 1, 99, af.dispatch(77, 1, 1, 1)))
    assert not keep and why in ing.close_reason and why in caplog.text
    ing.close("closed")
    log = ing.store.folder / ARM_LOG_NAME
    assert read_stream(log).startswith(good + bad)
    problems = []
    got = list(read_arm_log(log, lambda o, m: problems.append(m)))
    assert got[:len(records())] == [at.TimelineRecord.FromString(p) for p in records()]
    assert problems


def test_metadata_file_framing(tmp_path):
    frames = [{"device": 1, "frame": 0, "presentTimestamp": 5, "submits": []},
              {"device": 1, "frame": 1, "presentTimestamp": 0, "submits": [{"device": 1, "queue": 2, "timestamp": 3,
                                                                            "workloads": []}]}]
    path = tmp_path / "x.metadata"
    write_metadata(path, frames)
    assert af.read_metadata_bytes(path.read_bytes()) == frames
    path.write_bytes(af.metadata_file(frames))
    assert list(read_metadata(path)) == frames
    cut = tmp_path / "cut.metadata"
    cut.write_bytes(path.read_bytes()[:-3])
    problems = []
    assert list(read_metadata(cut, lambda o, m: problems.append(m))) == frames[:1] and "past the end" in problems[0]

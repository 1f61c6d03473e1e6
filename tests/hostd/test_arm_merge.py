"""`tessera merge` reads Arm's `.metadata` (u32 length + JSON frames, hand-made from the published
format) as an input: joined by `Labels` = t<tagID>, named and given args like our own layer's data,
times moved from MONOTONIC_RAW to BOOTTIME; a file without a pid goes to the GPU process without
metadata; one whose pid our own logs describe is skipped; damage costs only the frame."""
from __future__ import annotations

import struct

import arm_fixtures as af
from hostd_builders import BOOT0, RAW0, GpuTrace, hello, submit, workload

from tessera.hostd.merge import merge_session
from tessera.schemas.perfetto import read_packets

PID = 4242


def _frames(t: int) -> list[dict]:
    return [{"device": 0xD1, "frame": 0, "presentTimestamp": t + 900, "submits": [
        {"device": 0xD1, "queue": 7, "timestamp": t, "workloads": [
            {"type": "renderpass", "tid": 1, "width": 640, "height": 480, "drawCallCount": 3, "subpassCount": 1,
             "label": [], "attachments": [{"binding": "C0", "load": False, "store": True, "resolve": False}]},
            {"type": "dispatch", "tid": 2, "xGroups": 4, "yGroups": 2, "zGroups": 1, "label": ["Blur"]},
            {"type": "buffertransfer", "tid": 3, "subtype": "Fill buffer", "byteCount": 256, "label": []}]}]}]


def _gpu(session, pid=PID):
    gpu = GpuTrace(session / "gpu.perfetto-trace", pid=pid)
    t = BOOT0 + 1000
    gpu.event(t, 100, "non-fragment", "binning", labels="t1", rp=1)
    gpu.event(t + 100, 100, "fragment", "main", labels="t1", rp=1)
    gpu.event(t + 300, 100, "non-fragment", "compute", labels="t2")
    gpu.event(t + 500, 100, "transfer", "fill buffer", labels="t3")
    gpu.close()


def _slices(path):
    out, events = {}, []
    for p in read_packets(path):
        if p.HasField("gpu_render_stage_event"):
            e = p.gpu_render_stage_event
            args = {d.name: d.value for d in e.extra_data}
            out[args["Labels"]] = (e.name, args)
        elif p.HasField("track_event"):
            events.append((p.timestamp, p.track_event.name))
    return out, events


def test_metadata_named_with_a_pid(tmp_path):
    session = tmp_path / "s"
    session.mkdir()
    (session / f"app-{PID}.metadata").write_bytes(af.metadata_file(_frames(RAW0 + 1000)))
    _gpu(session)
    r = merge_session(session)
    assert (r.events_with_metadata, r.events_without_metadata, r.metadata_without_events) == (4, 0, 0)
    slices, events = _slices(r.output)
    assert slices["t1"][0] == "Render pass 640×480, 3 draws" and slices["t2"][0] == "Blur"
    assert slices["t3"][0] == "Fill buffer, 256 bytes"
    assert (slices["t2"][1]["groups"], slices["t2"][1]["tag"], slices["t3"][1]["subtype"]) == ("[4,2,1]", "2",
                                                                                              "fill buffer")
    assert (BOOT0 + 1000, "vkQueueSubmit") in events and (BOOT0 + 1900, "Frame 0") in events


def test_metadata_without_a_pid_is_adopted_and_damage_costs_one_frame(tmp_path):
    session = tmp_path / "s"
    session.mkdir()
    bad = b"{not json"
    data = af.metadata_file(_frames(RAW0 + 1000)) + struct.pack("<I", len(bad)) + bad + b"\x10\x00"
    (session / "capture.metadata").write_bytes(data)
    _gpu(session)
    r = merge_session(session)
    assert r.events_with_metadata == 4 and r.processes == 1
    assert any("not a JSON object" in p for p in r.problems) and any("frame length" in p for p in r.problems)


def test_metadata_of_a_process_our_logs_describe_is_not_counted_twice(tmp_path):
    session = tmp_path / "s"
    (session / f"app-{PID}-1").mkdir(parents=True)
    (session / f"app-{PID}-1" / "session.tessera-log").write_bytes(
        hello(pid=PID) + workload(1, "render_pass", width=64, height=64, draw_call_count=1)
        + submit(1, RAW0 + 1000, [1]))
    (session / "arm").mkdir()
    (session / "arm" / f"app-{PID}.metadata").write_bytes(af.metadata_file(_frames(RAW0 + 1000)))
    _gpu(session)
    r = merge_session(session)
    slices, _ = _slices(r.output)
    assert slices["t1"][0] == "Render pass 64×64, 1 draw" and slices["t2"][1].get("metadata") == "missing"
    assert any("described by the session's own logs" in p for p in r.problems)

"""Merge against hand-built inputs, with hand-computed names, args, tracks and counts."""
from __future__ import annotations

import io
import json

import pytest
from hostd_builders import (BOOT0, RAW0, GpuTrace, annex, device, frame, hello, recorded_again, submit, workload,
                            workloads)

from tessera.hostd.merge import MergeError, merge_session
from tessera.hostd.naming import describe
from tessera.hostd.storage import LOG_NAME, REJECTED_NAME
from tessera.hostd.summary import summarize_trace
from tessera.schemas.frames import MessageType, encode
from tessera.schemas.perfetto import check_render_stages, extra, read_packets
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

OFFSET = BOOT0 - RAW0


def build_session(root, pid=4242, log_name=f"app-4242-1/{LOG_NAME}"):
    log = root / log_name
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"".join([
        hello(pid=pid), device(),
        workload(1, "render_pass", width=1920, height=1080, draw_call_count=12,
                 attachments=[{"aspect": "color", "format": "R8G8B8A8_UNORM"}]),
        workload(2, "dispatch", groups=[64, 1, 1], items=4096, labels=["Frame", "Physics"]),
        workload(3, "buffer_transfer", subtype="copy buffer", bytes=65536),
        workload(4, "dispatch", groups=[-1, -1, -1], items=-1, indirect=True, annex=True),
        workload(9, "dispatch", groups=[1, 1, 1]),                      # recorded, never run
        submit(1, RAW0 + 100_000, [1, 2, 3], duration_ns=3_000),
        submit(2, RAW0 + 200_000, [4], annexed=True),
        annex(2, 4, groups=[8, 8, 1], items=4096),
        frame(0, RAW0 + 300_000),
    ]))
    g = GpuTrace(root / "gpu.perfetto-trace", pid=pid)
    g.event(BOOT0 + 150_000, 1000, "non-fragment", "binning", "t1", ["t1"], rp=1)
    g.event(BOOT0 + 151_000, 3000, "fragment", "main", "t1", ["t1"], rp=1)
    g.event(BOOT0 + 155_000, 500, "non-fragment", "compute", "t2", ["t2"])
    g.event(BOOT0 + 156_000, 200, "transfer", "copy buffer", "t3", ["t3"])
    g.event(BOOT0 + 250_000, 700, "non-fragment", "compute", "t4", ["s2", "t4"])
    g.event(BOOT0 + 260_000, 600, "non-fragment", "compute", "t77", ["t77"])
    g.event(BOOT0 + 270_000, 400, "non-fragment", "compute", None, None, extra={"Workload": "Dispatch 1×1×1"})
    g.close()
    return root


def gpu_events(path):
    return [p for p in read_packets(path) if p.HasField("gpu_render_stage_event")]


def args(e) -> dict[str, str]:
    return {d.name: d.value for d in e.extra_data}


def test_names_args_and_counts(tmp_path):
    r = merge_session(build_session(tmp_path))
    assert r.output == tmp_path / "merged.perfetto-trace"
    assert (r.gpu_events, r.events_with_metadata, r.events_without_metadata, r.metadata_without_events) == (7, 5, 2, 1)
    events = gpu_events(r.output)
    names = [p.gpu_render_stage_event.name for p in events]
    assert names == ["Render pass 1920×1080, 12 draws", "Render pass 1920×1080, 12 draws", "Physics",
                     "Copy buffer, 65536 bytes", "Dispatch 8×8×1 groups (4096 items)", "Compute", "Dispatch 1×1×1"]
    rp = args(events[1].gpu_render_stage_event)
    assert list(rp.items()) == [("Labels", "t1"), ("Label stack", "t1"), ("kind", "render_pass"), ("width", "1920"),
                                ("height", "1080"), ("draw_call_count", "12"),
                                ("attachments", '[{"aspect":"color","format":"R8G8B8A8_UNORM"}]'), ("tag", "1"),
                                ("handles.device", "0xd1"), ("handles.command_buffer", "0xcb1")]   # raw handles last
    physics = args(events[2].gpu_render_stage_event)
    assert physics["labels"] == '["Frame","Physics"]' and physics["Labels"] == "t2"
    annexed = args(events[4].gpu_render_stage_event)      # ANNEX s2.t4 merged over WORKLOAD t4
    assert (annexed["groups"], annexed["items"], annexed["indirect"], annexed["submit"], annexed["Label stack"]) == \
        ("[8,8,1]", "4096", "true", "2", "s2 / t4")
    assert args(events[5].gpu_render_stage_event) == {"Labels": "t77", "Label stack": "t77", "metadata": "missing"}
    assert args(events[6].gpu_render_stage_event) == {"Workload": "Dispatch 1×1×1", "metadata": "missing"}
    # the original fields stay
    e = events[1].gpu_render_stage_event
    assert (e.event_id, e.duration, e.render_pass_instance_id, e.hw_queue_iid, e.stage_iid, e.context,
            events[1].timestamp) == (2, 3000, 1, 2, 12, 1, BOOT0 + 151_000)
    assert any("t9" in x and "no GPU event" in x for x in r.examples)
    assert any("t77" in x for x in r.examples)


def test_merged_trace_passes_the_importer_rules(tmp_path):
    r = merge_session(build_session(tmp_path))
    packets = list(read_packets(r.output))
    check = check_render_stages(packets)
    assert check.problems == [] and check.events == 7
    ours = {p.trusted_packet_sequence_id for p in packets if p.HasField("track_event") or p.HasField("track_descriptor")}
    assert len(ours) == 1 and not ours & check.sequences
    first = next(p for p in packets if p.trusted_packet_sequence_id in ours)
    assert first.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED


def test_process_track_submits_frames_and_correlation(tmp_path):
    r = merge_session(build_session(tmp_path))
    packets = list(read_packets(r.output))
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in packets if p.HasField("track_descriptor")}
    proc = [d for d in tracks.values() if d.HasField("process")]
    assert [(d.process.pid, d.process.process_name) for d in proc] == [(4242, "app")]
    names = {d.name for d in tracks.values() if d.parent_uuid == proc[0].uuid}
    assert names == {"vkQueueSubmit (0xq1)", "Frames"}
    te = [(p.timestamp, p.track_event) for p in packets if p.HasField("track_event")]
    begins = [(ts, e.name, e.correlation_id_str) for ts, e in te if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN]
    # submit 1 at RAW0+100 us measured 3 us, three workloads of 1 us; submit 2 nominal 10 us, one workload
    assert begins == [
        (BOOT0 + 100_000, "vkQueueSubmit", ""),
        (BOOT0 + 100_000, "Render pass 1920×1080, 12 draws", "rp:#1"),
        (BOOT0 + 101_000, "Physics", ""),
        (BOOT0 + 102_000, "Copy buffer, 65536 bytes", ""),
        (BOOT0 + 200_000, "vkQueueSubmit", ""),
        (BOOT0 + 200_000, "Dispatch 8×8×1 groups (4096 items)", ""),
    ]
    ends = [ts for ts, e in te if e.type == pb.TrackEvent.TYPE_SLICE_END]
    assert ends == [BOOT0 + 101_000, BOOT0 + 102_000, BOOT0 + 103_000, BOOT0 + 103_000,
                    BOOT0 + 210_000, BOOT0 + 210_000]
    submit1 = next(e for _, e in te if e.name == "vkQueueSubmit")
    assert {a.name: (a.int_value or a.string_value) for a in submit1.debug_annotations} == \
        {"submit": 1, "queue": "0xq1", "device": "0xd1", "command_buffers": '["0xcb1"]', "tags": "[1,2,3]"}
    instants = [(ts, e.name) for ts, e in te if e.type == pb.TrackEvent.TYPE_INSTANT]
    assert instants == [(BOOT0 + 300_000, "Frame 0")]
    assert all(p.timestamp_clock_id == pb.BUILTIN_CLOCK_BOOTTIME for p in packets if p.HasField("track_event"))
    # the GPU slices of render pass 1 carry render_pass_instance_id 1 -> "rp:#1" in the importer
    assert {p.gpu_render_stage_event.render_pass_instance_id for p in gpu_events(r.output)} >= {1}


def test_summary_from_merge_equals_report_of_the_trace(tmp_path):
    r = merge_session(build_session(tmp_path), top=3)
    s = r.summary
    assert (s.frames, s.submits, s.gpu_events, s.events_without_metadata, s.metadata_without_events) == (1, 2, 7, 2, 1)
    assert s.workloads == {"render pass": 1, "dispatch": 2, "buffer transfer": 1, "unknown (no metadata)": 2}
    assert s.gpu_time_ns == {"non-fragment": 1000 + 500 + 700 + 600 + 400, "fragment": 3000, "transfer": 200}
    assert [(w.duration_ns, w.name, w.queue, w.stage, w.labels) for w in s.longest] == [
        (3000, "Render pass 1920×1080, 12 draws", "fragment", "main", "t1"),
        (1000, "Render pass 1920×1080, 12 draws", "non-fragment", "binning", "t1"),
        (700, "Dispatch 8×8×1 groups (4096 items)", "non-fragment", "compute", "t4")]
    again = summarize_trace(r.output, top=3)
    again.metadata_without_events = s.metadata_without_events
    assert again == s


def test_spools_are_ingested_like_logs_and_processes_stay_apart(tmp_path):
    # process 7 has a daemon log up to submit 1 then a spool (daemon gone); process 8 only a spool without HELLO
    (tmp_path / "hostd" / "a-7-1").mkdir(parents=True)
    (tmp_path / "hostd" / "a-7-1" / LOG_NAME).write_bytes(hello(pid=7, process="a") + workload(1, "dispatch",
                                                          groups=[2, 2, 2], items=512) + submit(1, RAW0, [1]))
    (tmp_path / "layer-7.spool").write_bytes(hello(pid=7, process="a") + workload(2, "dispatch", groups=[3, 1, 1]))
    (tmp_path / "layer-8.spool").write_bytes(workload(1, "trace_rays", width=64, height=32, depth=1))
    g7 = GpuTrace(tmp_path / "gpu.perfetto-trace", pid=7)
    g7.event(BOOT0 + 10, 5, "non-fragment", "compute", "t1", ["t1"])
    g7.event(BOOT0 + 20, 5, "non-fragment", "compute", "t2", ["t2"])
    g7.close()
    g8 = GpuTrace(tmp_path / "gpu.perfetto-trace", pid=8)      # a second process appends its own sequence
    g8.event(BOOT0 + 30, 5, "non-fragment", "trace_rays", "t1", ["t1"])
    g8.close()
    r = merge_session(tmp_path)
    assert len(r.inputs.spools) == 2 and len(r.inputs.logs) == 1
    assert [p.gpu_render_stage_event.name for p in gpu_events(r.output)] == \
        ["Dispatch 2×2×2 groups (512 items)", "Dispatch 3×1×1 groups", "Trace rays 64×32"]
    assert r.events_without_metadata == 0 and r.metadata_without_events == 0
    assert check_render_stages(read_packets(r.output)).problems == []


def test_damaged_inputs_keep_everything_before_the_damage(tmp_path):
    build_session(tmp_path)
    log = tmp_path / "app-4242-1" / LOG_NAME
    log.write_bytes(log.read_bytes() + encode(MessageType.WORKLOAD, b"{bad json", tag=50) + workload(51, "dispatch")[:9])
    gpu = tmp_path / "gpu.perfetto-trace"
    gpu.write_bytes(gpu.read_bytes() + b"\x0a\x40" + b"\x00" * 10)        # a packet cut short by a crash
    r = merge_session(tmp_path)
    assert r.gpu_events == 7 and r.events_with_metadata == 5
    assert any("invalid JSON" in p for p in r.problems)
    assert any("ends inside a frame" in p for p in r.problems)
    assert any("trace ends inside a packet" in p for p in r.problems)


def test_frames_rejected_by_a_strict_daemon_are_skipped(tmp_path):
    build_session(tmp_path)
    log = tmp_path / "app-4242-1" / LOG_NAME
    offset = len(log.read_bytes())
    log.write_bytes(log.read_bytes() + workload(77, "dispatch", groups=[5, 5, 5]))
    (log.parent / REJECTED_NAME).write_text(json.dumps({"offset": offset, "size": 1, "reason": "test"}) + "\n")
    r = merge_session(tmp_path)
    assert r.events_without_metadata == 2          # t77 stays without metadata
    (log.parent / REJECTED_NAME).unlink()
    assert merge_session(tmp_path).events_without_metadata == 1


def test_two_gpu_files_with_the_same_sequence_id_are_kept_apart(tmp_path):
    for sub, pid in (("run1", 11), ("run2", 12)):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "l.spool").write_bytes(hello(pid=pid) + workload(1, "dispatch", groups=[pid, 1, 1]))
        g = GpuTrace(tmp_path / sub / "gpu.perfetto-trace", pid=pid, sequence=5)
        g.event(BOOT0 + pid, 5, "non-fragment", "compute", "t1", ["t1"])
        g.close()
    r = merge_session(tmp_path)
    events = gpu_events(r.output)
    assert [p.gpu_render_stage_event.name for p in events] == ["Dispatch 11×1×1 groups", "Dispatch 12×1×1 groups"]
    assert len({p.trusted_packet_sequence_id for p in events}) == 2
    assert check_render_stages(read_packets(r.output)).problems == []


def test_progress_line_and_errors(tmp_path):
    build_session(tmp_path)
    stream = io.StringIO()
    merge_session(tmp_path, tmp_path / "out.perfetto-trace", progress=True, progress_stream=stream)
    assert "tessera merge:" in stream.getvalue() and "100%" in stream.getvalue()
    (tmp_path / "empty").mkdir()
    with pytest.raises(MergeError, match="nothing to merge"):
        merge_session(tmp_path / "empty")
    with pytest.raises(MergeError, match="not a folder"):
        merge_session(tmp_path / "missing")


@pytest.mark.parametrize("meta,name", [
    ({"kind": "render_pass", "render_area": [0, 0, 800, 600], "draw_call_count": 1}, "Render pass 800×600, 1 draw"),
    ({"kind": "render_pass", "draw_call_count": -1}, "Render pass"),
    ({"kind": "dispatch", "groups": [1, 1, 1], "items": 1}, "Dispatch 1×1×1 groups (1 item)"),
    ({"kind": "dispatch", "groups": [-1, -1, -1], "indirect": True}, "Dispatch (indirect)"),
    ({"kind": "buffer_transfer", "subtype": "fill buffer", "bytes": -1}, "Fill buffer, whole size"),
    ({"kind": "image_transfer", "subtype": "blit image", "width": 256, "height": 128}, "Blit image 256×128"),
    ({"kind": "image_transfer", "subtype": "clear image", "pixels": 4}, "Clear image, 4 pixels"),
    ({"kind": "tensor_copy", "bytes": 1024}, "Tensor copy, 1024 bytes"),
    ({"kind": "trace_rays", "width": 4, "height": 4, "depth": 2}, "Trace rays 4×4×2"),
])
def test_describe(meta, name):
    assert describe(meta) == name


def test_child_slices_use_the_metadata_of_their_own_submit(tmp_path):
    """A workload the join saw with one submit's ANNEX (or none) is named on the submit
    tracks with the metadata of each submit it ran in (the join's is reused only when equal)."""
    log = tmp_path / f"app-4242-1/{LOG_NAME}"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"".join([
        hello(), device(),
        workload(5, "dispatch", groups=[-1, -1, -1], indirect=True),
        workload(6, "dispatch", groups=[-1, -1, -1], indirect=True),
        workload(7, "render_pass", width=64, height=64, draw_call_count=1, labels=["Shadow"]),
        submit(1, RAW0 + 100_000, [5, 6, 7], annexed=True),
        annex(1, 5, groups=[2, 2, 1], items=16),
        annex(1, 6, groups=[4, 1, 1], items=4),
        submit(2, RAW0 + 200_000, [5, 6, 7]),
    ]))
    g = GpuTrace(tmp_path / "gpu.perfetto-trace")
    g.event(BOOT0 + 150_000, 100, "non-fragment", "compute", "t5", ["s1", "t5"])    # joined with annex s1.t5
    g.event(BOOT0 + 160_000, 100, "non-fragment", "compute", "t6", ["t6"])          # joined without an annex
    g.event(BOOT0 + 170_000, 100, "fragment", "main", "t7", ["t7"], rp=3)
    g.close()
    r = merge_session(tmp_path)
    assert [p.gpu_render_stage_event.name for p in gpu_events(r.output)] == \
        ["Dispatch 2×2×1 groups (16 items)", "Dispatch (indirect)", "Shadow"]
    te = [p.track_event for p in read_packets(r.output) if p.HasField("track_event")]
    children = [(e.name, e.correlation_id_str, {a.name: a.int_value or a.string_value for a in e.debug_annotations})
                for e in te if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN and e.name != "vkQueueSubmit"]
    assert children == [
        ("Dispatch 2×2×1 groups (16 items)", "", {"tag": 5, "kind": "dispatch"}),
        ("Dispatch 4×1×1 groups (4 items)", "", {"tag": 6, "kind": "dispatch"}),
        ("Shadow", "rp:#3", {"tag": 7, "kind": "render_pass"}),
        ("Dispatch (indirect)", "", {"tag": 5, "kind": "dispatch"}),
        ("Dispatch (indirect)", "", {"tag": 6, "kind": "dispatch"}),
        ("Shadow", "", {"tag": 7, "kind": "render_pass"}),
    ]


def test_workloads_batches_merge_like_workload_frames_and_a_bad_entry_costs_itself(tmp_path):
    """A WORKLOADS batch (protocol 3) stands for the WORKLOADs of its entries; an entry against the
    WORKLOAD schema is skipped with one problem line, its neighbours kept."""
    (tmp_path / "layer-7.spool").write_bytes(hello(pid=7, process="a", protocol=3) + workloads([
        {"tag": 1, "kind": "dispatch", "groups": [2, 2, 2], "items": 512},
        {"tag": 2, "kind": "dispatch", "groups": "three"},
        {"tag": 3, "kind": "trace_rays", "width": 64, "height": 32, "depth": 1}]) + submit(1, RAW0, [1, 2, 3]))
    g = GpuTrace(tmp_path / "gpu.perfetto-trace", pid=7)
    g.event(BOOT0 + 10, 5, "non-fragment", "compute", "t1", ["t1"])
    g.event(BOOT0 + 20, 5, "non-fragment", "compute", "t2", ["t2"])
    g.event(BOOT0 + 30, 5, "non-fragment", "trace_rays", "t3", ["t3"])
    g.close()
    r = merge_session(tmp_path)
    assert [p.gpu_render_stage_event.name for p in gpu_events(r.output)][::2] == \
        ["Dispatch 2×2×2 groups (512 items)", "Trace rays 64×32"]
    assert r.events_with_metadata == 2 and r.events_without_metadata == 1
    assert [p for p in r.problems if "WORKLOADS" in p] == [
        f"{tmp_path / 'layer-7.spool'}: at byte {len(hello(pid=7, process='a', protocol=3))}: WORKLOADS: the entry of "
        "t2: unusable (groups: 'three' is not of type 'array'); entry skipped"]


def test_workloads_recorded_again_merge_as_their_earlier_ones_across_files(tmp_path):
    """RECORDED_AGAIN (protocol 5): a tag paired with an earlier one merges with that one's WORKLOAD, also when
    the earlier one is in a file read later (a daemon log before the spool); a pair whose earlier tag nothing
    describes leaves its workload undescribed, said once."""
    log = tmp_path / "a-7-1" / LOG_NAME     # read before the spool
    log.parent.mkdir()
    log.write_bytes(hello(pid=7, process="a", protocol=5) + recorded_again([(2, 1), (3, 9)])
                    + submit(2, RAW0 + 100, [2, 3]))
    (tmp_path / "layer-7.spool").write_bytes(hello(pid=7, process="a", protocol=5) + workloads(
        [{"tag": 1, "kind": "dispatch", "groups": [2, 2, 2], "items": 512}]) + submit(1, RAW0, [1]))
    g = GpuTrace(tmp_path / "gpu.perfetto-trace", pid=7)
    for i, tag in enumerate((1, 2, 3)):
        g.event(BOOT0 + 10 + 10 * i, 5, "non-fragment", "compute", f"t{tag}", [f"t{tag}"])
    g.close()
    r = merge_session(tmp_path)
    names = [p.gpu_render_stage_event.name for p in gpu_events(r.output)]
    assert names == ["Dispatch 2×2×2 groups (512 items)"] * 2 + ["Compute"]
    assert r.events_with_metadata == 2 and r.events_without_metadata == 1
    assert [p for p in r.problems if "recorded again" in p] == [
        "a[7]: 1 workload(s) recorded again as workloads never described (t3 as t9); left undescribed"]

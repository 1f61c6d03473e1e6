"""Clear args on merged GPU slices (issue #15 item 5): each fact once, superseded values dropped,
disagreements marked, raw handles last. Hand-built inputs (hostd_builders), hand-written expectations."""
from __future__ import annotations

from hostd_builders import BOOT0, QUEUES, RAW0, STAGES, GpuTrace, annex, device, hello, submit, workload

from tessera.hostd.merge import merge_session
from tessera.hostd.slice_args import reconcile
from tessera.schemas.perfetto import SEQ_NEEDS_INCREMENTAL_STATE, TracePacket, read_packets

INDIRECT_DRIVER = {"Workload": "dispatch", "Command": "vkCmdDispatchIndirect", "Groups": "[-1, -1, -1]",
                   "Group size": "[64, 1, 1]", "Items": "-1", "Estimated": "indirect sizes"}
INDIRECT_LAYER = dict(command="vkCmdDispatchIndirect", groups=[-1, -1, -1], group_size=[64, 1, 1], items=-1,
                      indirect=True, annex=True)


def merged_args(tmp_path, frames: list[bytes], events: list[tuple]) -> list[list[tuple[str, str]]]:
    """Merge one process's frames with GPU events (queue, stage, labels, stack, extra); each slice's
    extra_data as (name, value) pairs, in order."""
    log = tmp_path / "app-4242-1" / "session.tessera-log"
    log.parent.mkdir()
    log.write_bytes(b"".join([hello(), device(), *frames]))
    g = GpuTrace(tmp_path / "gpu.perfetto-trace")
    for i, (queue, stage, labels, stack, extra) in enumerate(events):
        if isinstance(extra, list):      # (name, value) pairs written as they are, a name twice included
            p = TracePacket()
            p.trusted_packet_sequence_id, p.sequence_flags = g.seq, SEQ_NEEDS_INCREMENTAL_STATE
            p.timestamp = BOOT0 + 150_000 + i * 1000
            e = p.gpu_render_stage_event
            e.event_id, e.duration, e.context = 100 + i, 500, 1
            e.hw_queue_iid, e.stage_iid = QUEUES[queue], STAGES[stage]
            for k, v in extra:
                e.extra_data.add(name=k, value=v)
            g.w.write(p)
        else:
            g.event(BOOT0 + 150_000 + i * 1000, 500, queue, stage, labels, stack, extra=extra)
    g.close()
    r = merge_session(tmp_path)
    assert r.events_with_metadata == len(events) and not r.problems, r.problems
    return [[(d.name, d.value) for d in p.gpu_render_stage_event.extra_data]
            for p in read_packets(r.output) if p.HasField("gpu_render_stage_event")]


def once(pairs: list[tuple[str, str]]) -> dict[str, str]:
    names = [k for k, _ in pairs]
    assert len(names) == len(set(names)), names
    return dict(pairs)


def test_indirect_dispatch_the_layer_resolved_shows_its_sizes_only(tmp_path):
    """The driver's placeholders (Groups -1, Items -1, Estimated) give way to the ANNEX's sizes;
    facts both state (command, group size, workload class) appear once, as the layer's fields;
    handles come last."""
    [pairs] = merged_args(tmp_path, [
        workload(1, "dispatch", **INDIRECT_LAYER),
        submit(1, RAW0 + 100_000, [1], annexed=True),
        annex(1, 1, groups=[2, 1, 1], items=128),
    ], [("non-fragment", "compute", "t1", ["s1", "t1"], INDIRECT_DRIVER)])
    assert pairs == [("Labels", "t1"), ("Label stack", "s1 / t1"), ("kind", "dispatch"),
                     ("command", "vkCmdDispatchIndirect"), ("groups", "[2,1,1]"), ("group_size", "[64,1,1]"),
                     ("items", "128"), ("indirect", "true"), ("annex", "true"), ("tag", "1"), ("submit", "1"),
                     ("handles.device", "0xd1"), ("handles.command_buffer", "0xcb1")]


def test_unresolved_indirect_dispatch_says_unknown_once_with_the_drivers_note(tmp_path):
    """No ANNEX: both sides say unknown; the layer's -1 say it once, the driver's Estimated stays."""
    [pairs] = merged_args(tmp_path, [
        workload(1, "dispatch", **INDIRECT_LAYER),
        submit(1, RAW0 + 100_000, [1]),
    ], [("non-fragment", "compute", "t1", ["t1"], INDIRECT_DRIVER)])
    args = once(pairs)
    assert (args["groups"], args["items"], args["Estimated"]) == ("[-1,-1,-1]", "-1", "indirect sizes")
    assert not {"Groups", "Items", "Command", "Group size", "Workload"} & set(args)


def test_a_driver_that_knows_the_sizes_supersedes_the_layers_unknown(tmp_path):
    """A driver reading indirect arguments itself writes the real sizes; the layer's -1 are left out."""
    [pairs] = merged_args(tmp_path, [
        workload(1, "dispatch", **INDIRECT_LAYER),
        submit(1, RAW0 + 100_000, [1]),
    ], [("non-fragment", "compute", "t1", ["t1"], {"Workload": "dispatch", "Command": "vkCmdDispatchIndirect",
                                                    "Groups": "[2, 1, 1]", "Group size": "[64, 1, 1]",
                                                    "Items": "128"})])
    args = once(pairs)
    assert (args["Groups"], args["Items"], args["command"], args["group_size"]) == \
        ("[2, 1, 1]", "128", "vkCmdDispatchIndirect", "[64,1,1]")
    assert not {"groups", "items", "Estimated", "Command", "Group size"} & set(args)


def test_render_pass_disagreement_is_marked_and_vertex_estimate_stays(tmp_path):
    """Two known values that differ are both shown, the driver's as `<Name> (driver)`; an Estimated
    note about values the layer does not give (vertices) stays; equal facts appear once."""
    [binning, main] = merged_args(tmp_path, [
        workload(1, "render_pass", command="vkCmdBeginRenderPass2", width=64, height=64, subpass_count=1,
                 draw_call_count=12),
        submit(1, RAW0 + 100_000, [1]),
    ], [(q, s, "t1", ["t1"], {"Workload": "render pass", "Area": "64x64", "Draws": "10", "Vertices": "30",
                              "Subpasses": "1", "Command": "vkCmdBeginRenderPass2",
                              "Estimated": "indirect draw sizes"})
        for q, s in (("non-fragment", "binning"), ("fragment", "main"))])
    assert binning == main
    assert binning == [("Labels", "t1"), ("Label stack", "t1"), ("Area", "64x64"), ("Draws (driver)", "10"),
                       ("Vertices", "30"), ("Estimated", "indirect draw sizes"), ("kind", "render_pass"),
                       ("command", "vkCmdBeginRenderPass2"), ("width", "64"), ("height", "64"),
                       ("subpass_count", "1"), ("draw_call_count", "12"), ("tag", "1"),
                       ("handles.device", "0xd1"), ("handles.command_buffer", "0xcb1")]


def test_transfer_kind_and_subtype_once(tmp_path):
    [pairs] = merged_args(tmp_path, [
        workload(1, "image_transfer", command="vkCmdCopyBufferToImage", subtype="copy buffer to image", bytes=4096,
                 pixels=1024, regions=1),
        submit(1, RAW0 + 100_000, [1]),
    ], [("transfer", "copy image", "t1", ["t1"], {"Transfer": "copy buffer to image", "Workload": "transfer",
                                                   "Command": "vkCmdCopyBufferToImage", "Bytes": "4096",
                                                   "Pixels": "1024", "Regions": "1"})])
    assert pairs == [("Labels", "t1"), ("Label stack", "t1"), ("kind", "image_transfer"),
                     ("command", "vkCmdCopyBufferToImage"), ("subtype", "copy buffer to image"), ("bytes", "4096"),
                     ("pixels", "1024"), ("regions", "1"), ("tag", "1"),
                     ("handles.device", "0xd1"), ("handles.command_buffer", "0xcb1")]


def test_indirect_build_keeps_the_estimate_note_for_equal_guesses():
    """Both sides give an indirect build's maximum primitive counts: once, and still marked estimated."""
    entries, fields = reconcile({"Primitives": "6", "Instances": "0", "Estimated": "maximum primitive counts"},
                                {"primitives": 6, "instances": 0, "indirect": True})
    assert entries == {"Primitives": None, "Instances": None} and fields == {}


def test_a_name_the_driver_wrote_twice_is_kept_twice_when_others_drop(tmp_path):
    """The driver's entries written again after a drop are the event's own list, duplicates included."""
    driver = [("Labels", "t1"), ("Label stack", "s1 / t1"), ("Note", "a"), ("Note", "b"), *INDIRECT_DRIVER.items()]
    pairs, again = merged_args(tmp_path, [
        workload(1, "dispatch", **INDIRECT_LAYER),
        submit(1, RAW0 + 100_000, [1], annexed=True),
        annex(1, 1, groups=[2, 1, 1], items=128),
    ], [("non-fragment", "compute", None, None, driver)] * 2)     # twice: such a join is not reused
    assert again == pairs
    assert pairs[:5] == [("Labels", "t1"), ("Label stack", "s1 / t1"), ("Note", "a"), ("Note", "b"),
                         ("kind", "dispatch")]
    assert ("items", "128") in pairs and not {"Items", "Groups", "Estimated"} & {k for k, _ in pairs}


def test_reconcile_rules():
    entries, fields = reconcile(INDIRECT_DRIVER, {"kind": "dispatch", **INDIRECT_LAYER, "groups": [2, 1, 1],
                                                  "items": 128, "device": "0xd1", "command_buffer": "0xcb1"})
    assert entries == {"Workload": None, "Command": None, "Groups": None, "Group size": None, "Items": None,
                       "Estimated": None}
    assert fields == {"device": "handles.device", "command_buffer": "handles.command_buffer"}
    # Estimated stays while one of the values it names is still the driver's guess
    entries, fields = reconcile({"Groups": "[-1, -1, -1]", "Items": "-1", "Estimated": "indirect sizes"},
                                {"groups": [2, 1, 1], "items": -1})
    assert entries == {"Groups": None, "Items": None} and fields == {}
    # an unknown Estimated wording is never dropped; a kind that disagrees keeps the driver's Workload
    entries, fields = reconcile({"Workload": "dispatch", "Items": "-1", "Estimated": "something new"},
                                {"kind": "render_pass", "items": 5})
    assert entries == {"Items": None} and fields == {}

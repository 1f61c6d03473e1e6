"""Issues 4 and 5 end to end: tests/integration/apps/timeline_app.py under the layer and the emulated Mali.

Every expectation below is written by hand from the numbers the app uses
(see its docstring): the layer's metadata stream (spooled, no daemon) and
the driver's gpu.perfetto-trace, and how they join through t<N>/s<N> labels.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from integration_support import PYTHON, REPO, run

from tessera.schemas import perfetto as pf
from tessera.schemas.frames import PROTOCOL_VERSION, MessageType, iter_file
from tessera.schemas.workloads import all_problems, expand

APP = REPO / "tests" / "integration" / "apps" / "timeline_app.py"
COLOR = [{"aspect": "color", "format": "R8G8B8A8_UNORM", "samples": 1, "load_op": "clear", "store_op": "store",
          "resolve": False}]
PASS = {"kind": "render_pass", "command": "vkCmdBeginRendering", "width": 64, "height": 64,
        "render_area": [0, 0, 64, 64], "subpass_count": 1, "dynamic": True, "attachments": COLOR}
READBACK = {"kind": "image_transfer", "command": "vkCmdCopyImageToBuffer", "subtype": "copy image to buffer",
            "pixels": 64 * 64, "bytes": 64 * 64 * 4, "regions": 1}
Q = ["frame 1", "frame 1 compute"]   # the queue labels open during submit 1

# The application's workloads in recording order (= tag order), by name, with the metadata
# (WORKLOAD merged with its ANNEX) and the label stack each must resolve to.
EXPECTED: list[tuple[str, dict, list[str]]] = [
    # submit 1: collatz.comp, local_size_x = 16 through spec constant 0
    ("dispatch", {"kind": "dispatch", "command": "vkCmdDispatch", "groups": [4, 1, 1], "group_size": [16, 1, 1],
                  "items": 4 * 16, "indirect": False}, Q + ["compute"]),
    ("indirect", {"kind": "dispatch", "command": "vkCmdDispatchIndirect", "groups": [3, 2, 1],
                  "group_size": [16, 1, 1], "items": 3 * 2 * 16, "indirect": True, "annex": True}, Q + ["compute"]),
    ("base", {"kind": "dispatch", "command": "vkCmdDispatchBase", "groups": [2, 1, 1], "base_group": [4, 0, 0],
              "group_size": [16, 1, 1], "items": 2 * 16, "indirect": False}, Q + ["compute", "base"]),
    # submit 2
    ("fill", {"kind": "buffer_transfer", "command": "vkCmdFillBuffer", "subtype": "fill buffer",
              "bytes": (1002 - 12) & ~3}, ["transfers"]),
    ("copy", {"kind": "buffer_transfer", "command": "vkCmdCopyBuffer", "subtype": "copy buffer", "bytes": 100 + 60,
              "regions": 2}, ["transfers"]),
    ("update", {"kind": "buffer_transfer", "command": "vkCmdUpdateBuffer", "subtype": "update buffer", "bytes": 64},
     ["transfers"]),
    ("clear", {"kind": "image_transfer", "command": "vkCmdClearColorImage", "subtype": "clear image",
               "pixels": 32 * 16 + 16 * 8, "bytes": (32 * 16 + 16 * 8) * 4, "regions": 1}, ["transfers"]),
    ("to_image", {"kind": "image_transfer", "command": "vkCmdCopyBufferToImage", "subtype": "copy buffer to image",
                  "pixels": 16 * 8, "bytes": 16 * 8 * 4, "regions": 1}, ["transfers"]),
    ("blit", {"kind": "image_transfer", "command": "vkCmdBlitImage", "subtype": "blit image", "pixels": 16 * 8,
              "bytes": 16 * 8 * 4, "regions": 1}, ["transfers"]),
    ("readback_d", {**READBACK, "pixels": 16 * 8, "bytes": 16 * 8 * 4}, ["transfers"]),
    # submit 3: no barrier between the passes
    ("pass1", {**PASS, "draw_call_count": 1}, ["passes"]),
    ("pass2", {**PASS, "draw_call_count": 2, "annex": True,
               "draws": [{"vertex_count": 6, "instance_count": 1, "first_vertex": 12, "first_instance": 0,
                          "draw": 0}]}, []),    # the pass's first draw (protocol 4 numbers indirect draws)
    ("readback_e1", READBACK, []), ("readback_e2", READBACK, []),
    # submit 4: a barrier between the passes
    ("pass3", {**PASS, "draw_call_count": 1}, []), ("pass4", {**PASS, "draw_call_count": 1}, []),
    ("readback_e3", READBACK, []), ("readback_e4", READBACK, []),
    # submit 5: suspended in X (1 draw), resumed in Y (2 draws)
    ("split", {**PASS, "draw_call_count": 3, "parts": 2, "annex": True}, []),
    ("readback_split", READBACK, []),
    # submit 6: classic render pass, draws in a secondary
    ("classic", {**PASS, "command": "vkCmdBeginRenderPass", "dynamic": False, "draw_call_count": 2}, []),
    ("readback_classic", READBACK, []),
    # submits 7 and 8: the same command buffer
    ("reused_indirect", {"kind": "dispatch", "command": "vkCmdDispatchIndirect", "groups": [3, 2, 1],
                         "group_size": [16, 1, 1], "items": 96, "indirect": True, "annex": True}, []),
    ("reused_fill", {"kind": "buffer_transfer", "command": "vkCmdFillBuffer", "subtype": "fill buffer",
                     "bytes": 128}, []),
]
NAMES = [name for name, _, _ in EXPECTED]
# submitID -> (workloads run, in order; wrapped in s<submitID>)
SUBMITS = {
    1: (["dispatch", "indirect", "base"], True),
    2: (["fill", "copy", "update", "clear", "to_image", "blit", "readback_d"], False),
    3: (["pass1", "pass2", "readback_e1", "readback_e2"], True),      # the indirect draw is captured
    4: (["pass3", "pass4", "readback_e3", "readback_e4"], False),
    5: (["split", "readback_split"], True),                           # a split pass has an annex
    6: (["classic", "readback_classic"], False),
    7: (["reused_indirect", "reused_fill"], True),
    8: (["reused_indirect", "reused_fill"], True),
}
STAGE_QUEUE = {"binning": "non-fragment", "main": "fragment", "compute": "non-fragment"}


@dataclass
class Event:
    start: int
    duration: int
    queue: str
    stage: str
    tag: int | None
    stack: list[str]
    rp_instance: int
    extra: dict[str, str]
    submit: int | None = None

    @property
    def end(self) -> int:
        return self.start + self.duration


@dataclass
class Session:
    messages: list[tuple[int, int | None, int, dict]]
    workloads: dict[int, dict] = field(default_factory=dict)
    submits: dict[int, dict] = field(default_factory=dict)
    annexes: dict[tuple[int, int], dict] = field(default_factory=dict)
    frames: list[dict] = field(default_factory=list)
    hello: dict = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    check: pf.RenderStageCheck | None = None
    tags: dict[str, int] = field(default_factory=dict)      # workload name -> tag

    def merged(self, submit: int, tag: int) -> dict:
        return {**self.workloads[tag], **self.annexes.get((submit, tag), {})}

    def by_name(self, name: str, submit: int) -> list[Event]:
        return [e for e in self.events if e.tag == self.tags[name] and e.submit == submit]


def load(session_dir: Path) -> Session:
    spools = list(session_dir.glob("layer-*.spool"))
    assert len(spools) == 1, spools
    s = Session([(f.type, f.sequence, f.tag, f.payload()) for f in iter_file(spools[0])])
    for type_, seq, tag, payload in s.messages:
        assert all_problems(type_, payload) == [], (MessageType(type_).name, payload)
        if type_ == MessageType.HELLO:
            s.hello = payload
        elif type_ in (MessageType.WORKLOAD, MessageType.WORKLOADS):
            for tag, workload in ([(tag, payload)] if type_ == MessageType.WORKLOAD else expand(payload)):
                assert tag not in s.workloads, f"tag {tag} described twice"
                s.workloads[tag] = workload
        elif type_ == MessageType.SUBMIT:
            s.submits[seq] = payload
        elif type_ == MessageType.ANNEX:
            s.annexes.setdefault((seq, tag), {}).update(payload)
        elif type_ == MessageType.FRAME:
            s.frames.append(payload)
    app_tags = sorted(t for t, w in s.workloads.items() if "internal" not in w)
    assert len(app_tags) == len(NAMES), [s.workloads[t].get("command") for t in app_tags]
    s.tags = dict(zip(NAMES, app_tags))

    packets = list(pf.read_packets(session_dir / "gpu.perfetto-trace"))
    s.check = pf.check_render_stages(packets)
    specs = {iid: name for (_, iid), name in s.check.specs.items()}
    for p in packets:
        if not p.HasField("gpu_render_stage_event"):
            continue
        e = p.gpu_render_stage_event
        label = pf.extra(e, "Labels")
        stack = (pf.extra(e, "Label stack") or "").split(" / ") if pf.extra(e, "Label stack") else []
        s.events.append(Event(p.timestamp, e.duration, specs[e.hw_queue_iid], specs[e.stage_iid],
                              int(label[1:]) if label else None, stack, e.render_pass_instance_id,
                              {d.name: d.value for d in e.extra_data}))
    # Each event's submit: its s<N> label, else the one submit that ran its tag.
    for ev in s.events:
        wrapped = [int(x[1:]) for x in ev.stack if re.fullmatch(r"s\d+", x)]
        if wrapped:
            ev.submit = wrapped[0]
        else:
            owners = [sid for sid, sub in s.submits.items() if ev.tag in sub["tags"]]
            assert len(owners) == 1, (ev, owners)
            ev.submit = owners[0]
    return s


@pytest.fixture(scope="module")
def sessions(shims, tmp_path_factory) -> list[Session]:
    """The app run twice, each in its own session folder (no daemon: the layer spools)."""
    from tessera.tools.launch import LaunchConfig, environment

    out = []
    for i in range(2):
        d = tmp_path_factory.mktemp(f"timeline{i}") / "session"
        env = environment(LaunchConfig(d))
        env.pop("TESSERA_HOSTD", None)
        proc = run([PYTHON, APP], env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.startswith("timeline_app: OK 8 submits checked (frame boundary 42)"), proc.stdout
        out.append(load(d))
    return out


@pytest.fixture(scope="module")
def s(sessions) -> Session:
    return sessions[0]


# ---- the layer's stream (issue 4) ------------------------------------------------------
def test_stream_starts_with_hello_and_device(s):
    assert [m[0] for m in s.messages[:2]] == [MessageType.HELLO, MessageType.DEVICE]
    assert s.hello["protocol"] == PROTOCOL_VERSION == 5 and s.hello["process"] == "timeline_app.py"
    device = s.messages[1][3]
    assert device["name"] == "Mali-G720 (emulated)" and "VK_EXT_frame_boundary" in device["extensions"]


@pytest.mark.parametrize("index", range(len(EXPECTED)), ids=NAMES)
def test_workload_metadata_by_hand(s, index):
    name, want, labels = EXPECTED[index]
    submit = next(sid for sid, (names, _) in SUBMITS.items() if name in names)
    got = s.merged(submit, s.tags[name])
    assert {k: got.get(k) for k in want} == want
    assert got.get("labels", []) == labels, f"{name}: resolved label stack"


def test_submits_by_hand(s):
    assert sorted(s.submits) == sorted(SUBMITS)
    for sid, (names, wrapped) in SUBMITS.items():
        sub = s.submits[sid]
        app_tags = [t for t in sub["tags"] if t in s.tags.values()]
        assert app_tags == [s.tags[n] for n in names], sid
        assert sub["annexed"] is wrapped, sid
        assert sub["queue"] == "queue 0.0"
    assert len(s.submits[5]["command_buffers"]) == 2
    assert s.submits[7]["command_buffers"] == s.submits[8]["command_buffers"]


def test_reused_command_buffer_has_an_annex_per_submit(s):
    tag = s.tags["reused_indirect"]
    for sid in (7, 8):
        assert s.annexes[(sid, tag)] == {"groups": [3, 2, 1], "items": 96}


def test_indirect_and_split_annexes_exactly(s):
    assert s.annexes[(1, s.tags["indirect"])] == {"labels": Q + ["compute"], "groups": [3, 2, 1], "items": 96}
    assert s.annexes[(5, s.tags["split"])] == {"draw_call_count": 3, "parts": 2}
    # recorded metadata before the annexes: what was known when recording
    assert s.workloads[s.tags["indirect"]]["items"] == -1
    assert s.workloads[s.tags["indirect"]]["groups"] == [-1, -1, -1]
    assert s.workloads[s.tags["split"]]["draw_call_count"] == 1


def test_frame_boundary_message(s):
    assert [(f["frame"], f["source"]) for f in s.frames] == [(42, "frame_boundary")]
    index = next(i for i, m in enumerate(s.messages) if m[0] == MessageType.FRAME)
    submit8 = next(i for i, m in enumerate(s.messages) if m[0] == MessageType.SUBMIT and m[1] == 8)
    assert index > submit8


# ---- the driver's trace (issue 5) and the join ---------------------------------------------------
def test_trace_imports(s):
    assert s.check.problems == []
    assert s.check.events == len(s.events) > 0


def test_application_labels_never_reach_the_driver(s):
    for ev in s.events:
        for label in ev.stack:
            assert re.fullmatch(r"[ts]\d+", label) or label == "tessera: indirect capture", ev.stack
        assert ev.tag is not None and ev.stack[-1] == f"t{ev.tag}", ev.stack


def test_every_event_tag_is_a_workload_and_every_workload_runs(s):
    assert {ev.tag for ev in s.events} == set(s.workloads)


def test_events_carry_their_submit_label(s):
    for ev in s.events:
        wrapped = SUBMITS[ev.submit][1] if ev.submit in SUBMITS else True
        assert (f"s{ev.submit}" in ev.stack) is wrapped, (ev.submit, ev.stack)
    assert {ev.submit for ev in s.events if ev.tag == s.tags["reused_indirect"]} == {7, 8}


def test_phases_per_workload(s):
    groups: dict[tuple[int, int], list[Event]] = defaultdict(list)
    for ev in s.events:
        groups[(ev.submit, ev.tag)].append(ev)
    for sid, (names, _) in SUBMITS.items():
        for name in names:
            assert (sid, s.tags[name]) in groups, (sid, name)
    for (sid, tag), evs in groups.items():
        w = s.workloads[tag]
        if w["kind"] == "render_pass":
            assert sorted((e.stage, e.queue) for e in evs) == [("binning", "non-fragment"), ("main", "fragment")]
            assert evs[0].rp_instance == evs[1].rp_instance != 0
        elif w["kind"] == "dispatch":
            assert [(e.stage, e.queue) for e in evs] == [("compute", "non-fragment")]
        else:   # Arm's stage name; the layer's finer subtype also in the event's Transfer arg
            from tessera.icd.trace import ARM_STAGE
            assert [(e.stage, e.queue) for e in evs] == [(ARM_STAGE.get(w["subtype"], w["subtype"]), "transfer")], w
    instances = [e.rp_instance for e in s.events if e.stage == "binning"]
    assert len(instances) == len(set(instances))


def test_hardware_queues_are_monotonic_and_never_overlap(s):
    last_end: dict[str, int] = {}
    for ev in s.events:   # in file order: placement order
        assert ev.duration > 0
        assert ev.start >= last_end.get(ev.queue, 0), ev
        last_end[ev.queue] = ev.end


def _boottime(s: Session, raw_ns: int) -> int:
    sync = s.hello["clock_sync"]
    return raw_ns - sync["monotonic_raw_ns"] + sync["boottime_ns"]


# The two clocks are converted with one reading of both; MONOTONIC_RAW and BOOTTIME may
# drift apart by the kernel's frequency correction (bounded by 500 ppm), plus the gap
# between the two clock reads.
def _slack(s: Session, raw_ns: int) -> int:
    return abs(raw_ns - s.hello["clock_sync"]["monotonic_raw_ns"]) * 500 // 1_000_000 + 2_000


def test_no_event_starts_before_its_submit(s):
    for ev in s.events:
        raw = s.submits[ev.submit]["time_ns"]
        assert ev.start >= _boottime(s, raw) - _slack(s, raw), (ev, _boottime(s, raw) - ev.start)


def test_main_never_starts_before_its_binning_ends(s):
    by_instance = defaultdict(dict)
    for ev in s.events:
        if ev.stage in ("binning", "main"):
            by_instance[ev.rp_instance][ev.stage] = ev
    for phases in by_instance.values():
        assert phases["main"].start >= phases["binning"].end


def _phase(s: Session, name: str, submit: int, stage: str) -> Event:
    [ev] = [e for e in s.by_name(name, submit) if e.stage == stage]
    return ev


def test_binning_overlaps_previous_main_without_barrier(s):
    main1, binning2 = _phase(s, "pass1", 3, "main"), _phase(s, "pass2", 3, "binning")
    assert binning2.start < main1.end and main1.start < binning2.end


def test_barrier_serializes_binning_after_previous_main(s):
    main3, binning4 = _phase(s, "pass3", 4, "main"), _phase(s, "pass4", 4, "binning")
    assert binning4.start >= main3.end


def test_split_pass_is_one_pass_in_the_trace(s):
    evs = s.by_name("split", 5)
    assert sorted(e.stage for e in evs) == ["binning", "main"]
    # all three draws (one before the suspend, two after the resume) are in the one pass
    assert [(e.extra["Draws"], e.extra["Parts"]) for e in evs] == [("3", "2")] * 2


def test_driver_sees_draws_of_secondaries(s):
    assert [e.extra["Draws"] for e in s.by_name("classic", 6)] == ["2", "2"]


def test_durations_are_identical_on_two_runs(sessions):
    def durations(sess: Session) -> dict:
        return {(e.submit, e.tag, e.stage): e.duration for e in sess.events}
    a, b = (durations(x) for x in sessions)
    assert a == b and len(a) == len(sessions[0].events)


def test_app_is_valid_with_validation_below_the_layer(shims, tmp_path):
    """Khronos validation between the layer and the driver: the layer's injected labels, capture
    copies and barriers, and what it forwards (no VkFrameBoundaryEXT to a driver that never
    enabled it), cause no message; the app fails on any."""
    import os

    from tessera.tools.launch import LaunchConfig, environment

    env = environment(LaunchConfig(tmp_path / "session"), {**os.environ, "VK_INSTANCE_LAYERS": "VK_LAYER_KHRONOS_validation"})
    assert env["VK_INSTANCE_LAYERS"] == "VK_LAYER_TESSERA_timeline:VK_LAYER_KHRONOS_validation"
    proc = run([PYTHON, APP], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "validation" not in proc.stderr


def test_layer_capture_copies_are_listed_in_their_submits(sessions):
    """The layer's own indirect-capture copies run on the GPU, so their tags are in SUBMIT.tags."""
    for s in sessions:
        internal = {t for t, w in s.workloads.items() if "internal" in w}
        in_submits = {t for sub in s.submits.values() for t in sub["tags"]}
        assert internal and internal <= in_submits

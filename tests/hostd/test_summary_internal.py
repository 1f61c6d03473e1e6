"""The layer's own GPU work (indirect-capture copies: WORKLOAD `internal`) is the tool's, not the
application's: the merged slice says so (name and `internal` arg), and the summary of the merge and the
report of the merged trace count it apart, never in the application's counts.

Inputs are hand-made per docs/formats.md (hostd_builders): two application dispatches, the
first indirect with its capture copy, as the layer writes them.
"""
from __future__ import annotations

from hostd_builders import BOOT0, RAW0, GpuTrace, annex, device, hello, submit, workload

from tessera.hostd.merge import merge_session
from tessera.hostd.storage import LOG_NAME
from tessera.hostd.summary import Summary, format_summary, summarize_trace
from tessera.schemas.perfetto import read_packets

CAPTURE = "tessera: indirect capture"     # layer/indirect.py CAPTURE_LABEL, as the layer sends it


def build_session(root):
    log = root / f"app-4242-1/{LOG_NAME}"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"".join([
        hello(), device(),
        workload(2, "buffer_transfer", command="vkCmdCopyBuffer", subtype="copy buffer", bytes=12, regions=1,
                 internal=CAPTURE, labels=[CAPTURE]),
        workload(1, "dispatch", groups=[-1, -1, -1], items=-1, indirect=True, annex=True),
        workload(3, "dispatch", groups=[20, 15, 1], items=300 * 64),
        submit(1, RAW0 + 100_000, [2, 1, 3], annexed=True),
        annex(1, 1, groups=[20, 15, 1], items=300 * 64),
    ]))
    g = GpuTrace(root / "gpu.perfetto-trace")
    g.event(BOOT0 + 150_000, 300, "transfer", "copy buffer", "t2", ["s1", "t2"])
    g.event(BOOT0 + 151_000, 18_900, "non-fragment", "compute", "t1", ["s1", "t1"])
    g.event(BOOT0 + 170_000, 18_900, "non-fragment", "compute", "t3", ["s1", "t3"])
    g.close()
    return root


def test_capture_copies_are_the_tools_own_in_trace_summary_and_report(tmp_path):
    r = merge_session(build_session(tmp_path), top=5)
    events = [p.gpu_render_stage_event for p in read_packets(r.output) if p.HasField("gpu_render_stage_event")]
    copy = next(e for e in events if {d.name: d.value for d in e.extra_data}.get("Labels") == "t2")
    args = {d.name: d.value for d in copy.extra_data}
    assert (copy.name, args["internal"], args["kind"]) == (CAPTURE, CAPTURE, "buffer_transfer")

    s = r.summary
    # 3 GPU events, 2 application dispatches: the application's counts hold the dispatches only
    assert (s.gpu_events, s.workloads, s.gpu_time_ns) == (2, {"dispatch": 2}, {"non-fragment": 2 * 18_900})
    assert [w.name for w in s.longest] == ["Dispatch 20×15×1 groups (19200 items)"] * 2
    assert (s.internal_events, s.internal_workloads, s.internal_time_ns) == (1, {CAPTURE: 1}, {"transfer": 300})
    assert s.events_without_metadata == 0

    again = summarize_trace(r.output, top=5)         # tessera report TRACE reads the same
    again.metadata_without_events = s.metadata_without_events
    assert again == s
    text = format_summary(s)
    assert "tool (internal) events      1, 0.000 ms, not counted above" in text
    assert "GPU render-stage events     2" in text
    assert "buffer transfer" not in text


def test_a_summary_without_internal_work_prints_no_internal_line():
    assert "internal" not in format_summary(Summary())


def test_labels_wider_than_their_column_never_run_into_the_counts():
    """Issue 22: "acceleration structure build2" — each count is one column, apart from its label."""
    import re

    s = Summary(frames=1, submits=2, gpu_events=7,
                workloads={"acceleration structure build": 2, "dispatch": 3, "a much longer workload kind label": 1},
                gpu_time_ns={"non-fragment": 1_000_000, "a queue name longer than its column": 2_000_000_000},
                internal_events=1, internal_workloads={CAPTURE + " of a very long name": 1},
                internal_time_ns={"transfer": 300})
    text = format_summary(s)
    rows = {"acceleration structure build": "2", "dispatch": "3", "a much longer workload kind label": "1",
            CAPTURE + " of a very long name": "1"}
    columns = set()
    for label, count in rows.items():
        line = next(x for x in text.splitlines() if x.strip().startswith(label))
        m = re.fullmatch(rf"  {re.escape(label)}( +)(\d+)", line)
        assert m and m.group(2) == count, line
        columns.add(line.index(count, len(label) + 2))
    for label in ("frames", "submits", "GPU render-stage events"):
        line = next(x for x in text.splitlines() if x.startswith(label))
        columns.add(len(line) - 1)
    assert len(columns) == 1, text               # every count starts in the same column
    queue = next(x for x in text.splitlines() if "a queue name longer" in x)
    assert re.fullmatch(r"  a queue name longer than its column {2,}2000\.000 ms", queue), queue

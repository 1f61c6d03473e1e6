"""`tessera diff` (#29) on hand-built sessions merged by the real merge: workloads matched by
identity (frame, label path, kind, order), never by tag numbers; Δ per queue and per workload;
new and removed workloads; the three formats; exit 0."""
from __future__ import annotations

import json

from ci_builders import make_session
from click.testing import CliRunner

from tessera.hostd.ci.diff import diff_runs
from tessera.hostd.ci.runs import read_run
from tessera.tools.cmd_diff import diff

SHADOW = (("frame", "shadow"), "render_pass", (100, 200), {"draw_call_count": 1})
MAIN = (("frame", "main"), "render_pass", (150, 300), {"draw_call_count": 2})
MAIN_MORE = (("frame", "main"), "render_pass", (160, 420), {"draw_call_count": 3})
COPY = ((), "buffer_transfer", (50,), {"bytes": 64})
BLUR = (("post", "blur"), "dispatch", (70,), {"groups": [4, 1, 1]})


def test_identity_not_tags_and_the_delta_of_the_changed_pass(tmp_path):
    base = make_session(tmp_path / "base", [[SHADOW, MAIN, COPY], [SHADOW, MAIN, COPY]])
    # the new run: another tag numbering and a dispatch added first in frame 1
    new = make_session(tmp_path / "new", [[SHADOW, MAIN_MORE, COPY], [BLUR, SHADOW, MAIN, COPY]], first_tag=100)
    d = diff_runs(read_run(base), read_run(new))
    assert [c.new.key for c in d.changed] == [("app", 0, "frame / main", "render_pass", 0)]
    c = d.changed[0]
    assert (c.base.gpu_ns, c.new.gpu_ns, c.delta_ns) == (450, 580, 130)
    assert c.args == {"draw_call_count": ("2", "3")}
    assert [w.key for w in d.added] == [("app", 1, "post / blur", "dispatch", 0)]
    assert d.removed == [] and d.unchanged == 5
    # per queue: the application's totals, both sides
    assert d.queues["fragment"] == (1000, 1120)
    assert d.queues["non-fragment"] == (500, 580)


def test_order_within_a_label_and_removed_workloads(tmp_path):
    base = make_session(tmp_path / "base", [[COPY, COPY, MAIN]])
    new = make_session(tmp_path / "new", [[COPY, MAIN]])
    d = diff_runs(read_run(base), read_run(new))
    assert [w.key for w in d.removed] == [("app", 0, "", "buffer_transfer", 1)]
    assert d.changed == [] and d.added == []


def test_the_command_in_every_format(tmp_path):
    base = make_session(tmp_path / "base", [[SHADOW, MAIN]])
    new = make_session(tmp_path / "new", [[SHADOW, MAIN_MORE]])
    runner = CliRunner()
    text = runner.invoke(diff, [str(base), str(new)])
    assert text.exit_code == 0, text.output
    assert "frame / main" in text.output and "+0.130 µs" in text.output and "draw_call_count: 2 → 3" in text.output
    md = runner.invoke(diff, [str(base), str(new), "--format", "markdown"])
    assert md.exit_code == 0 and "| frame / main [render pass, frame 0, app] | 0.450 µs | 0.580 µs |" in md.output
    js = runner.invoke(diff, [str(tmp_path / "base"), str(tmp_path / "new"), "--format", "json"])
    assert js.exit_code == 0, js.output
    data = json.loads(js.output)
    assert [(c["label_path"], c["delta_ns"]) for c in data["changed"]] == [("frame / main", 130)]
    assert data["gpu_time_ns"]["fragment"] == {"base": 500, "new": 620, "delta": 120, "delta_pct": 24.0}


def test_an_unreadable_input_is_one_line(tmp_path):
    empty = tmp_path / "empty.perfetto-trace"
    empty.write_bytes(b"")
    base = make_session(tmp_path / "base", [[SHADOW]])
    r = CliRunner().invoke(diff, [str(base), str(empty)])
    assert r.exit_code == 1 and "no Perfetto packet" in r.output and "Traceback" not in r.output


def test_advice_findings_matched_by_identity_not_tags(tmp_path):
    """The advisor's findings (hostd/advice analyse; these passes name no attachments, so each is
    `outputs-unread`) keep their identity under another tag numbering: nothing new or gone; a
    pass added in frame 1 brings new findings, all on that pass, named by its workload."""
    from tessera.hostd.ci.metrics import finding_keys, run_advice

    base = make_session(tmp_path / "base", [[SHADOW, MAIN], [SHADOW, MAIN]])
    same = make_session(tmp_path / "same", [[SHADOW, MAIN], [SHADOW, MAIN]], first_tag=50)
    more = make_session(tmp_path / "more", [[SHADOW, MAIN], [SHADOW, MAIN, MAIN]], first_tag=90)
    fb, fs, fm = (run_advice(t).findings for t in (base, same, more))
    assert {f.tag for f in fb}.isdisjoint({f.tag for f in fs}) and len(fb) == len(fs) > 0
    assert sorted(finding_keys(fb)) == sorted(finding_keys(fs))
    d = diff_runs(read_run(base), read_run(same), base_findings=fb, new_findings=fs)
    assert d.advice_added == [] and d.advice_removed == []
    d = diff_runs(read_run(base), read_run(more), base_findings=fb, new_findings=fm)
    new_keys = set(finding_keys(fm)) - set(finding_keys(fb))
    assert len(d.advice_added) == len(new_keys) > 0
    assert {(f.frame, f.label_path) for f in d.advice_added} == {(1, "frame / main")}
    assert "outputs-unread" in {f.rule for f in d.advice_added}
    assert d.advice_removed == [] and d.advice_totals["findings"] == (len(fb), len(fm))
    text = CliRunner().invoke(diff, [str(base), str(more)])
    assert text.exit_code == 0 and f"advice: {len(fb)} → {len(fm)} finding(s)" in text.output
    assert f"new: {d.advice_added[0].rule} ({d.advice_added[0].severity}) at {d.advice_added[0].workload}" in text.output

"""Acceptance of #29 through the real loader, layer, driver and hostd: a program and its variant
with one more full-screen draw in one labelled pass (tests/integration/apps/ci_frame.py).

- `tessera diff` names that pass and its Δ, which equals the Δ of the pass's GPU slices read
  from the two merged traces with the Perfetto protos;
- `tessera check` with a budget the variant breaks exits 1 and writes JUnit XML that parses,
  with a failure naming the pass; the unchanged program passes the same budget; a shader
  budget (`--instrument`) does the same on thread-operations;
- `tessera sql` across three sessions answers what the merged traces say, computed here from
  the Perfetto protos and the report's summary, not through the export.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from integration_support import PYTHON, REPO, run

from tessera.hostd.summary import summarize_trace
from tessera.schemas.perfetto import read_packets

TESSERA = REPO / ".venv" / "bin" / "tessera"
APP = REPO / "tests" / "integration" / "apps" / "ci_frame.py"
MAIN_PASS = "frame / main pass"


def _run(session, *args, options=()):
    out = run([TESSERA, "run", *options, "--out", session, "--", PYTHON, APP, *args], None)
    assert out.returncode == 0 and "ci_frame: OK" in out.stdout, out.stdout + out.stderr
    return session


def tessera(*args):
    return run([TESSERA, *args], None)


def pass_ns(session, labels: list[str]) -> int:
    """GPU time of the slices whose application labels are `labels`, from the merged trace's protos."""
    total = 0
    for p in read_packets(session / "merged.perfetto-trace"):
        if p.HasField("gpu_render_stage_event"):
            e = p.gpu_render_stage_event
            args = {d.name: d.value for d in e.extra_data}
            if json.loads(args.get("labels", "[]")) == labels:
                total += e.duration
    return total


@pytest.fixture(scope="module")
def sessions(shims, tmp_path_factory):
    root = tmp_path_factory.mktemp("ci")
    return {"base": _run(root / "base"), "variant": _run(root / "variant", "--extra-draw"),
            "base2": _run(root / "base2")}


def test_diff_names_the_pass_and_its_delta(sessions):
    base, variant = sessions["base"], sessions["variant"]
    delta = pass_ns(variant, ["frame", "main pass"]) - pass_ns(base, ["frame", "main pass"])
    assert delta > 0
    out = tessera("diff", base, variant, "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [(c["label_path"], c["kind"], c["delta_ns"]) for c in data["changed"]] == [(MAIN_PASS, "render_pass", delta)]
    assert data["changed"][0]["args"]["draw_call_count"] == {"base": "2", "new": "3"}
    assert data["added"] == [] and data["removed"] == []
    text = tessera("diff", base, variant)
    assert text.returncode == 0 and f"{delta / 1e3:+,.3f} µs" in text.stdout and MAIN_PASS in text.stdout
    md = tessera("diff", base, variant, "--format", "markdown")
    assert md.returncode == 0 and f"| {MAIN_PASS} [render pass, frame 0, ci_frame.py] |" in md.stdout
    same = json.loads(tessera("diff", base, sessions["base2"], "--format", "json").stdout)
    assert same["changed"] == [] and same["added"] == [] and same["removed"] == []


def test_check_fails_the_variant_and_passes_the_program(sessions, tmp_path):
    limit_us = pass_ns(sessions["base"], ["frame", "main pass"]) / 1e3     # the program's own: it passes, just
    budget = tmp_path / "budget.toml"
    budget.write_text(f'[[pass]]\nlabel = "{MAIN_PASS}"\nmax_gpu_us = {limit_us}\nmax_draw_calls = 2\n'
                      '[[pass]]\nlabel = "frame / shadow pass"\nmax_draw_calls = 1\n')
    ok = tessera("check", sessions["base"], "--budget", budget, "--junit", tmp_path / "ok.xml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ET.parse(tmp_path / "ok.xml").getroot().find("testsuite").get("failures") == "0"
    bad = tessera("check", sessions["variant"], "--budget", budget, "--junit", tmp_path / "bad.xml",
                  "--markdown", tmp_path / "bad.md")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    cases = ET.parse(tmp_path / "bad.xml").getroot().find("testsuite").findall("testcase")
    assert len(cases) == 3
    failures = [c.find("failure") for c in cases if c.find("failure") is not None]
    assert len(failures) == 2 and all(MAIN_PASS in f.get("message") for f in failures)
    assert MAIN_PASS in (tmp_path / "bad.md").read_text()
    regressed = tessera("check", sessions["variant"], "--baseline", sessions["base"], "--max-regression", "0.5%")
    assert regressed.returncode == 1 and f"FAIL  baseline: max_regression.workloads <= 0.5%: {MAIN_PASS}" \
        in regressed.stdout
    assert tessera("check", sessions["base2"], "--baseline", sessions["base"]).returncode == 0


def test_a_shader_budget_on_an_instrumented_pass(shims, tmp_path):
    """Thread-operations and bound-pipe cycles of the pass: the program's own values pass, the
    variant's extra draw breaks both; diff shows the shader cost change. The expected values come
    from the trace's `Shader …` args and the compiler model's pipe rates (not from check's code)."""
    from tessera.compiler.costs import GPUS

    base = _run(tmp_path / "base", options=["--instrument"])
    variant = _run(tmp_path / "variant", "--extra-draw", options=["--instrument"])

    def main_pass_args(session) -> dict[str, str]:
        """The pass's `Shader …` args (both its slices, binning and main, carry the same)."""
        (args,) = {tuple(sorted((k, v) for k, v in a.items() if k.startswith("Shader ")))
                   for p in read_packets(session / "merged.perfetto-trace")
                   if (a := {d.name: d.value for d in p.gpu_render_stage_event.extra_data})
                   and json.loads(a.get("labels", "[]")) == ["frame", "main pass"]}
        return dict(args)

    gpu = next(g for g in GPUS.values() if g.name == "Mali-G720")
    rates = {"fma": "FMA", "cvt": "CVT", "sfu": "SFU", "ls": "LS", "tex": "T", "var": "V"}

    def cycles(args) -> float:
        return max(int(args[f"Shader {p.upper()}"]) / gpu.rates[theirs].per_clock for p, theirs in rates.items())

    b, v = main_pass_args(base), main_pass_args(variant)
    assert int(v["Shader thread-ops"]) > int(b["Shader thread-ops"]) and cycles(v) > cycles(b)
    budget = tmp_path / "shader.toml"
    budget.write_text(f'[[shader]]\nlabel = "{MAIN_PASS}"\nmax_thread_ops = {b["Shader thread-ops"]}\n'
                      f'max_cycles = {cycles(b)}\n')
    ok = tessera("check", base, "--budget", budget)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tessera("check", variant, "--budget", budget, "--junit", tmp_path / "j.xml")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    failures = list(ET.parse(tmp_path / "j.xml").getroot().iter("failure"))
    assert len(failures) == 2 and all(MAIN_PASS in f.get("message") for f in failures)
    assert f"{cycles(v):,.1f} cycles > {cycles(b):,.1f} cycles" in bad.stdout
    on_trace = tessera("check", variant / "merged.perfetto-trace", "--budget", budget)
    assert on_trace.returncode == 2 and "max_cycles needs the session folder" in on_trace.stderr
    d = json.loads(tessera("diff", base, variant, "--format", "json").stdout)
    (change,) = [c for c in d["changed"] if c["label_path"] == MAIN_PASS]
    assert change["shader"]["thread_ops"] == {"base": int(b["Shader thread-ops"]), "new": int(v["Shader thread-ops"])}


def test_sql_across_three_sessions_equals_the_merged_traces(sessions):
    names = [sessions[k] for k in ("base", "variant", "base2")]
    out = tessera("sql", "SELECT session, queue, sum(duration_ns) AS ns FROM gpu_events WHERE NOT internal "
                  "GROUP BY ALL ORDER BY ALL", *names, "--format", "json")
    assert out.returncode == 0, out.stderr
    got = {(r["session"], r["queue"]): r["ns"] for r in json.loads(out.stdout)}
    want = {(str(s), q): ns for s in names for q, ns in summarize_trace(s / "merged.perfetto-trace").gpu_time_ns.items()}
    assert got == want
    out = tessera("sql", f"SELECT session, sum(gpu_ns) AS ns FROM workloads WHERE label_path = '{MAIN_PASS}' "
                  "GROUP BY ALL ORDER BY ALL", *names, "--format", "json")
    assert {r["session"]: r["ns"] for r in json.loads(out.stdout)} == \
        {str(s): pass_ns(s, ["frame", "main pass"]) for s in names}

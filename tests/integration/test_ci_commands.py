"""Acceptance of #29 through the real loader, layer, driver and hostd: a program and its variant
with one more full-screen draw in one labelled pass (tests/integration/apps/ci_frame.py).

- `tessera diff` names that pass and its Δ, which equals the Δ of the pass's GPU slices read
  from the two merged traces with the Perfetto protos;
- `tessera check` with a budget the variant breaks exits 1 and writes JUnit XML that parses,
  with a failure naming the pass; the unchanged program passes the same budget; a shader
  budget (`--instrument`) does the same on thread-operations;
- `tessera sql` across three sessions answers what the merged traces say, computed here from
  the Perfetto protos and the report's summary, not through the export;
- counters: a counter budget the extra draw breaks (the main pass's fragment threads), bandwidth
  budgets hand-computed from docs/counters.md's formulas that both pass, `--baseline` on a
  counter, `diff`'s Δ counters; the export's counters table equal to `tessera counters --json`
  (hostd/counters.py read_session over the GPU traces, not the merged trace CI reads);
- advice: a budget the planted advice app (apps/planted_advice.py) breaks, naming the rule and
  workload, that the unchanged ci_frame passes; `diff`'s new findings and the export's advice
  table equal to `tessera report --json`'s findings.
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
PLANTED = REPO / "tests" / "integration" / "apps" / "planted_advice.py"
MAIN_PASS = "frame / main pass"
# docs/counters.md: a 64x64 R8G8B8A8 attachment stored (STORE_OP_STORE) writes 64*64*4 bytes on the
# external bus, a cleared one (LOAD_OP_CLEAR) reads none; the readback copy reads and writes its bytes.
IMAGE_BYTES = 64 * 64 * 4


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


def reader_counters(session, per: str = "workload") -> dict:
    """`tessera counters --json`: per workload {label path: [counters…]} or per frame {frame: counters}."""
    out = tessera("counters", session, "--per", per, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    if per == "frame":
        return {f["frame"]: f["counters"] for f in data["frames"]}
    by_path: dict[str, list] = {}
    for w in data["workloads"]:
        by_path.setdefault(" / ".join(w["labels"]), []).append(w["counters"])
    return by_path


def test_a_counter_budget_the_extra_draw_breaks(sessions, tmp_path):
    base, variant = sessions["base"], sessions["variant"]
    (b_main,), (v_main,) = reader_counters(base)[MAIN_PASS], reader_counters(variant)[MAIN_PASS]
    assert v_main["MaliFragThread"] > b_main["MaliFragThread"]
    # the bandwidth of the frame by hand: two passes store their image, the copy reads and writes it
    for main in (b_main, v_main):
        assert (main.get("MaliExtBusRdBy", 0), main["MaliExtBusWrBy"]) == (0, IMAGE_BYTES)
    frame_bytes = 2 * IMAGE_BYTES + 2 * IMAGE_BYTES
    budget = tmp_path / "counters.toml"
    budget.write_text(f"[frame]\nmax_bandwidth = {frame_bytes}\n"
                      f"[session]\nmax_counters = {{ MaliExtBusWrBy = {3 * IMAGE_BYTES} }}\n"
                      f'[[pass]]\nlabel = "{MAIN_PASS}"\nmax_bandwidth = {IMAGE_BYTES}\n'
                      f'max_counters = {{ MaliFragThread = {b_main["MaliFragThread"]:.0f} }}\n')
    ok = tessera("check", base, "--budget", budget)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (f"PASS  frame: max_bandwidth <= {frame_bytes:,} bytes: 1 frame(s), largest {frame_bytes:,} bytes"
            in ok.stdout)
    bad = tessera("check", variant, "--budget", budget, "--junit", tmp_path / "c.xml", "--markdown", tmp_path / "c.md")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    cases = ET.parse(tmp_path / "c.xml").getroot().find("testsuite").findall("testcase")
    assert len(cases) == 4
    (failed,) = [c for c in cases if c.find("failure") is not None]
    assert failed.get("classname") == "tessera.budget.pass" and "max_counters.MaliFragThread" in failed.get("name")
    assert failed.find("failure").get("message") == (
        f"{MAIN_PASS} [render pass, frame 0, ci_frame.py]: {v_main['MaliFragThread']:,.0f} > "
        f"{b_main['MaliFragThread']:,.0f}")
    assert MAIN_PASS in (tmp_path / "c.md").read_text()
    # the counter held to the baseline: +50% fragment threads breaks 10%; bandwidth did not grow
    budget.write_text('[baseline]\nmax_regression = "10%"\ncounters = ["MaliFragThread"]\n')
    reg = tessera("check", variant, "--budget", budget, "--baseline", base)
    assert reg.returncode == 1, reg.stdout + reg.stderr
    pct = (v_main["MaliFragThread"] - b_main["MaliFragThread"]) * 100 / b_main["MaliFragThread"]
    assert (f"FAIL  baseline: max_regression.MaliFragThread <= 10%: {MAIN_PASS} [render pass, frame 0, ci_frame.py]: "
            f"MaliFragThread {b_main['MaliFragThread']:,.0f} → {v_main['MaliFragThread']:,.0f} ({pct:+.1f}%)") \
        in reg.stdout
    assert "PASS  baseline: max_regression.bandwidth <= 10%" in reg.stdout
    assert "PASS  baseline: max_regression.workloads <= 10%" in reg.stdout
    # diff: the pass's Δ counters, its bandwidth unchanged
    d = json.loads(tessera("diff", base, variant, "--format", "json").stdout)
    (change,) = d["changed"]
    assert change["counters"]["MaliFragThread"] == {"base": b_main["MaliFragThread"], "new": v_main["MaliFragThread"]}
    assert change["bandwidth"] == {"base": IMAGE_BYTES, "new": IMAGE_BYTES} and "bandwidth" not in change["counters"]
    frames_b, frames_v = reader_counters(base, "frame"), reader_counters(variant, "frame")
    assert d["counters"]["MaliFragThread"] == {"base": frames_b[0]["MaliFragThread"],
                                               "new": frames_v[0]["MaliFragThread"]}
    assert d["advice"]["added"] == [] and d["advice"]["removed"] == []


@pytest.fixture(scope="module")
def planted(shims, tmp_path_factory):
    session = tmp_path_factory.mktemp("planted") / "s"
    out = run([TESSERA, "run", "--out", session, "--", PYTHON, PLANTED], None)
    assert out.returncode == 0 and "planted_advice: OK" in out.stdout, out.stdout + out.stderr
    return session


def report_findings(session) -> list[dict]:
    out = tessera("report", session, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["advice"]["findings"]


def test_an_advice_budget_the_planted_app_breaks_and_ci_frame_passes(planted, sessions, tmp_path):
    found = report_findings(planted)
    ignored = "too-many-passes"
    warnings = [f for f in found if f["severity"] == "warning" and f["rule"] != ignored]
    assert warnings and any(f["rule"] == ignored for f in found)
    saving_us = sum(f["saves"]["ns"] for f in found if f["rule"] != ignored) / 1e3
    budget = tmp_path / "advice.toml"
    budget.write_text(f'[advice]\nfail_on = "warning"\nmax_saving_us = {saving_us}\nignore = ["{ignored}"]\n')
    assert tessera("check", sessions["base"], "--budget", budget).returncode == 0
    bad = tessera("check", planted, "--budget", budget, "--junit", tmp_path / "a.xml")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    cases = ET.parse(tmp_path / "a.xml").getroot().find("testsuite").findall("testcase")
    assert [c.get("classname") for c in cases] == ["tessera.budget.advice"] * 2
    assert cases[1].find("failure") is None        # the total saving is exactly the limit
    failure = cases[0].find("failure")
    first = max(warnings, key=lambda f: f["saves"]["ns"])
    assert failure.get("message").startswith(f"{first['rule']} (warning) at {first['where']['workload']}: ")
    assert sorted(line.split(" ")[0] for line in failure.text.splitlines()) == sorted(f["rule"] for f in warnings)
    budget.write_text(f"[advice]\nmax_saving_us = {saving_us - 0.001}\nignore = [\"{ignored}\"]\n")
    over = tessera("check", planted, "--budget", budget)
    assert over.returncode == 1 and f"save {saving_us:,.3f} µs > {saving_us - 0.001:,.3f} µs" in over.stdout
    # diff from the clean program to the planted one: the planted findings are new, but for those
    # the clean program has too (same rule, frame, place), which are matched, not new or gone
    from collections import Counter

    def where(f: dict) -> tuple:
        w = f["where"]
        return (f["rule"], w["frame"], w["label_path"], w["kind"], w["attachment"], w.get("draw"))

    clean = Counter(map(where, report_findings(sessions["base"])))
    d = json.loads(tessera("diff", sessions["base"], planted, "--format", "json").stdout)
    added = Counter((f["rule"], f["frame"], f["label_path"], f["kind"]) for f in d["advice"]["added"])
    assert added == Counter(k[:4] for k in (Counter(map(where, found)) - clean).elements())
    assert sum(added.values()) >= len(warnings)
    removed = Counter((f["rule"], f["frame"], f["label_path"], f["kind"]) for f in d["advice"]["removed"])
    assert removed == Counter(k[:4] for k in (clean - Counter(map(where, found))).elements())


def test_export_counters_and_advice_equal_the_readers(sessions, planted, tmp_path):
    names = [sessions["base"], sessions["variant"], planted]
    out = tessera("export", *names, "--format", "parquet", "-o", tmp_path / "t")
    assert out.returncode == 0, out.stderr
    for source in (names, [tmp_path / "t"]):          # in memory, and the Parquet files
        rows = json.loads(tessera("sql", "SELECT session, label_path, tag, counter, value FROM counters "
                                  "WHERE scope = 'workload'", *source, "--format", "json").stdout)
        for s in names:
            got: dict[tuple, dict] = {}
            for r in rows:
                if r["session"] == str(s):
                    got.setdefault((r["label_path"], r["tag"]), {})[r["counter"]] = r["value"]
            by_path: dict[str, list] = {}
            for (path, _), c in got.items():
                by_path.setdefault(path, []).append(c)
            want = reader_counters(s)
            assert {p: sorted(map(sorted, (c.items() for c in cs))) for p, cs in by_path.items()} == \
                {p: sorted(map(sorted, (c.items() for c in cs))) for p, cs in want.items()}
        frames = json.loads(tessera("sql", "SELECT session, frame, counter, value FROM counters WHERE scope = 'frame'",
                                    *source, "--format", "json").stdout)
        for s in names:
            assert {(r["frame"], r["counter"]): r["value"] for r in frames if r["session"] == str(s)} == \
                {(f, k): v for f, c in reader_counters(s, "frame").items() for k, v in c.items()}
        advice = json.loads(tessera("sql", "SELECT session, rule, severity, label_path, saves_ns FROM advice",
                                    *source, "--format", "json").stdout)
        for s in names:
            assert sorted((r["rule"], r["severity"], r["label_path"], r["saves_ns"]) for r in advice
                          if r["session"] == str(s)) == \
                sorted((f["rule"], f["severity"], f["where"]["label_path"], f["saves"]["ns"])
                       for f in report_findings(s))

"""`tessera check` (#29) on hand-built sessions merged by the real merge: budget files parsed and
refused with clear errors (unknown keys, counters and advice rules, the figures sessions do not
carry), each rule a verdict,
exit 1 when broken, JUnit XML that parses, Markdown, a baseline with a max regression."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from ci_builders import make_session
from click.testing import CliRunner

from tessera.hostd.ci.budget import BudgetError, check, load_budget
from tessera.hostd.ci.runs import read_run
from tessera.tools.cmd_check import check as check_command

SHADOW = (("frame", "shadow"), "render_pass", (100, 200), {"draw_call_count": 1})
MAIN = (("frame", "main"), "render_pass", (150, 300), {"draw_call_count": 2})
MAIN_MORE = (("frame", "main"), "render_pass", (160, 420), {"draw_call_count": 3})
COPY = ((), "buffer_transfer", (50,), {"bytes": 64})

BUDGET = """
version = 1
[frame]
max_gpu_us = 0.9
[frame.max_queue_us]
fragment = 0.55
[session]
max_gpu_us = 2.0
[[pass]]
label = "frame / main"
max_gpu_us = 0.5
max_draw_calls = 2
[[pass]]
name = "Buffer transfer*"
kind = "buffer_transfer"
max_queue_us = { transfer = 0.05 }
"""


@pytest.fixture
def sessions(tmp_path):
    base = make_session(tmp_path / "base", [[SHADOW, MAIN, COPY], [SHADOW, MAIN, COPY]])
    new = make_session(tmp_path / "new", [[SHADOW, MAIN, COPY], [SHADOW, MAIN_MORE, COPY]], first_tag=7)
    return base, new


def test_the_unchanged_session_passes_and_the_variant_breaks_the_pass(sessions):
    rules, _ = load_budget(BUDGET)
    assert [r.passed for r in check(read_run(sessions[0]), rules)] == [True] * 6
    results = {r.rule.title: r for r in check(read_run(sessions[1]), rules)}
    broken = {t: r.message for t, r in results.items() if not r.passed}
    assert set(broken) == {"frame: max_gpu_us <= 0.900 µs", "frame: max_queue_us.fragment <= 0.550 µs",
                           "pass[1] label='frame / main': max_gpu_us <= 0.500 µs",
                           "pass[1] label='frame / main': max_draw_calls <= 2"}
    assert broken["frame: max_queue_us.fragment <= 0.550 µs"] == "frame 1: 0.620 µs > 0.550 µs"
    assert broken["pass[1] label='frame / main': max_draw_calls <= 2"].startswith("frame / main [render pass, frame 1")


def test_the_command_exit_codes_junit_and_markdown(sessions, tmp_path):
    budget = tmp_path / "budget.toml"
    budget.write_text(BUDGET)
    runner = CliRunner()
    ok = runner.invoke(check_command, [str(sessions[0]), "--budget", str(budget)])
    assert ok.exit_code == 0, ok.output
    junit, md = tmp_path / "out" / "junit.xml", tmp_path / "summary.md"
    junit.parent.mkdir()
    bad = runner.invoke(check_command, [str(sessions[1]), "--budget", str(budget), "--junit", str(junit),
                                        "--markdown", str(md)])
    assert bad.exit_code == 1, bad.output
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 6 and suite.get("failures") == "4"
    failed = [c for c in cases if c.find("failure") is not None]
    assert any("frame / main" in c.find("failure").get("message") for c in failed)
    assert "❌ 4 of 6 rules broken" in md.read_text()


def test_a_baseline_with_a_max_regression(sessions, tmp_path):
    runner = CliRunner()
    base, new = (str(s) for s in sessions)
    same = runner.invoke(check_command, [base, "--baseline", base, "--max-regression", "0%"])
    assert same.exit_code == 0, same.output
    grew = runner.invoke(check_command, [new, "--baseline", base, "--max-regression", "5%"])
    assert grew.exit_code == 1
    assert "FAIL  baseline: max_regression.workloads <= 5%: frame / main [render pass, frame 1" in grew.output
    assert "(+28.9%)" in grew.output                  # 450 ns -> 580 ns
    loose = runner.invoke(check_command, [new, "--baseline", base, "--max-regression", "30%"])
    assert loose.exit_code == 0, loose.output


@pytest.mark.parametrize("text,error", [
    ("[frame]\nmax_gpu_ms = 1", "[frame]: unknown key 'max_gpu_ms'; allowed: max_gpu_us, max_queue_us"),
    ("[counters]\nmali_frag_cycles = 1", "budget.counters: counter limits are `max_counters = {"),
    ("[[pass]]\nlabel = 'x'\nmax_advice = 1", "max_advice: advice limits are an [advice] table"),
    ("[[shader]]\nlabel = 'x'\nmax_registers = 32", "max_registers: work registers: the work register count is "
                                                     "the compiler model's static figure"),
    ("[[shader]]\nlabel = 'x'\nmax_spills = 0", "neither the trace nor the session carries it"),
    ("[frame]\nmax_counters = { MaliFragThreads = 1 }", "[frame].max_counters: unknown counter 'MaliFragThreads'"),
    ("[[pass]]\nlabel = 'x'\nmax_counters = { fragthread = 1 }", "did you mean MaliFragThread?"),
    ("[frame]\nmax_bandwidth = { read = 1 }", "[frame].max_bandwidth: expected a number, got a table"),
    ("[session]\nmax_counters = 5", "max_counters: expected a table {name = limit}"),
    ("[baseline]\ncounters = ['Nope']", "[baseline].counters: unknown counter 'Nope'"),
    ("[baseline]\ncounters = 'MaliFragThread'", "expected a list of counter names"),
    ("[advice]\nfail_on = 'error'", "[advice].fail_on: expected one of 'info', 'warning', got 'error'"),
    ("[advice]\nmax_findings = 0\nignore = ['no-such-rule']", "[advice].ignore: unknown rule 'no-such-rule'; rules:"),
    ("[advice]\nignore = ['empty-pass']", "[advice]: no limit in it"),
    ("[advice]\nmax_severity = 'info'", "[advice]: unknown key 'max_severity'; allowed: fail_on"),
    ("[[pass]]\nmax_gpu_us = 1", "give `label` (a label path pattern) or `name`"),
    ("[[pass]]\nlabel = 'x'", "no limit (max_… key) in it"),
    ("[[shader]]\nlabel = 'x'\nmax_pipe_ops = { fpu = 1 }", "unknown pipe 'fpu'"),
    ("[frame]\nmax_gpu_us = -1", "expected a number >= 0"),
    ("version = 2", "this Tessera reads budget version 1"),
    ("[baseline]\nmax_regression = 'five'", "expected a percentage"),
    ("[frame\n", "not valid TOML"),
])
def test_bad_budgets_are_one_clear_line(text, error, tmp_path, sessions):
    with pytest.raises(BudgetError) as e:
        load_budget(text)
    assert error in str(e.value)
    budget = tmp_path / "bad.toml"
    budget.write_text(text)
    r = CliRunner().invoke(check_command, [str(sessions[0]), "--budget", str(budget)])
    assert r.exit_code == 2 and error in r.output and "Traceback" not in r.output


def test_a_rule_matching_nothing_fails_unless_optional(sessions):
    rules, _ = load_budget("[[pass]]\nlabel = 'frame / mian'\nmax_gpu_us = 1\n"
                           "[[pass]]\nlabel = 'gone'\noptional = true\nmax_gpu_us = 1\n"
                           "[[shader]]\nlabel = 'frame / *'\nmax_thread_ops = 10\n")
    results = check(read_run(sessions[0]), rules)
    assert [r.passed for r in results] == [False, True, False]
    assert "no workload matches: a typo" in results[0].message
    assert "none has shader cost (run with --instrument)" in results[2].message


def test_counter_and_advice_budgets_need_what_they_read(sessions, tmp_path):
    """A session without counters (these hand-built ones carry no `Mali…` args nor descriptor, like
    a TESSERA_COUNTERS=0 run) cannot answer a counter budget: exit 2, one line; [baseline]
    counters need --baseline; a baseline alone compares bandwidth only when both have counters."""
    budget = tmp_path / "counters.toml"
    budget.write_text("[frame]\nmax_bandwidth = 1000\n")
    r = CliRunner().invoke(check_command, [str(sessions[0]), "--budget", str(budget)])
    assert r.exit_code == 2 and "no GPU counters in the trace" in r.output and "Traceback" not in r.output
    budget.write_text("[baseline]\ncounters = ['MaliFragThread']\n")
    r = CliRunner().invoke(check_command, [str(sessions[0]), "--budget", str(budget)])
    assert r.exit_code == 2 and "[baseline] counters need --baseline BASE" in r.output
    r = CliRunner().invoke(check_command, [str(sessions[0]), "--baseline", str(sessions[0])])
    assert r.exit_code == 0 and "bandwidth" not in r.output

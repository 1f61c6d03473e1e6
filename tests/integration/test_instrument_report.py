"""`tessera report --top/--json` on a real instrumented session (issue #12 item 5), through the real CLI:
`tessera run --instrument` on examples/compute_collatz.py (three dispatches of one data-dependent
compute shader), then `tessera report SESSION --top 1 --json`. The expected winner and its numbers
are computed here from the session's own INSTRUMENTATION frames, independently of hostd."""
from __future__ import annotations

import json

import pytest
from integration_support import PYTHON, REPO, run

from tessera.schemas import frames as fr

TESSERA = REPO / ".venv" / "bin" / "tessera"
PIPES = ("fma", "cvt", "sfu", "ls", "tex", "var")


@pytest.fixture(scope="module")
def session(shims, tmp_path_factory):
    out = tmp_path_factory.mktemp("instrument-report") / "session"
    result = run([TESSERA, "run", "--instrument", "--out", out, "--", PYTHON, REPO / "examples" / "compute_collatz.py"],
                 None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "compute_collatz: OK" in result.stdout
    return out


def _actions(session):
    """(thread-ops, submitID, tagID, action) of every instrumented action, from the logs."""
    out = []
    for log in sorted(session.rglob("*.tessera-log")):
        for f in fr.iter_file(log):
            if f.type == fr.MessageType.INSTRUMENTATION:
                for a in f.payload()["actions"]:
                    ops = sum(s["totals"][p] for s in a["stages"] for p in PIPES)
                    out.append((ops, f.sequence, f.tag, a))
    return out


def test_report_top_1_names_the_dispatch_with_the_most_thread_ops(session):
    actions = _actions(session)
    assert len(actions) == 3          # direct, indirect, base
    ops, sid, tag, action = max(actions, key=lambda x: x[0])
    assert sum(1 for a in actions if a[0] == ops) == 1, "a tie would make the winner ambiguous"
    result = run([TESSERA, "report", session, "--top", "1", "--json"], None)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["shaders"]
    assert report["source"] == "session logs" and report["instrumented"] == 3
    [top] = report["ranked"]
    assert (top["thread_ops"], top["submit"], top["tag"], top["command"], top["pipeline"]) == \
        (ops, sid, tag, action["command"], action["pipeline"])
    assert top["kind"] == "dispatch" and top["name"].startswith("Dispatch")
    [stage] = top["stages"]
    [sent] = action["stages"]
    assert stage["stage"] == "compute" and stage["entry"] == "main" and stage["disassembly"] is True
    assert stage["totals"] == sent["totals"]
    # the hottest blocks, by thread-ops then executions, with their SPIR-V disassembly
    rows = sorted(sent["blocks"], key=lambda r: (-sum(r[2:]), -r[1], r[0]))[:5]
    assert [(b["index"], b["executions"], b["thread_ops"]) for b in stage["blocks"]] == \
        [(r[0], r[1], sum(r[2:])) for r in rows]
    assert all(b["lines"] and b["lines"][0].endswith("= OpLabel") for b in stage["blocks"])
    # invocations: the entry block's executions (block 0 of main: one per launched thread)
    assert stage["invocations"] == next(r[1] for r in sent["blocks"] if r[0] == 0)

    text = run([TESSERA, "report", session, "--top", "1"], None).stdout
    assert "by total thread-operations" in text and f"{ops:,} thread-ops" in text and "OpLabel" in text


def bound_pipe(totals: dict) -> str:
    """The pipe with the most cycles (thread-operations / the compiler model's Mali-G720 rate)."""
    from tessera.compiler.costs import GPUS

    rates = GPUS["mali-g720"].rates
    names = {"fma": "FMA", "cvt": "CVT", "sfu": "SFU", "ls": "LS", "tex": "T", "var": "V"}
    return max(PIPES, key=lambda p: (totals[p] / rates[names[p]].per_clock, -PIPES.index(p))).upper()


def test_the_device_message_carries_the_compiler_models_pipe_rates(session):
    from tessera.compiler.costs import GPUS

    devices = [f.payload() for log in sorted(session.rglob("*.tessera-log")) for f in fr.iter_file(log)
               if f.type == fr.MessageType.DEVICE]
    rates = GPUS["mali-g720"].rates
    assert devices and all(d["pipe_rates"] == {"fma": rates["FMA"].per_clock, "cvt": rates["CVT"].per_clock,
                                               "sfu": rates["SFU"].per_clock, "ls": rates["LS"].per_clock,
                                               "tex": rates["T"].per_clock, "var": rates["V"].per_clock}
                           for d in devices)


def test_every_dispatch_slice_carries_its_shader_cost_and_bound_pipe(session):
    from tessera.schemas.perfetto import read_packets

    expected = {tag: (ops, bound_pipe({p: sum(s["totals"][p] for s in a["stages"]) for p in PIPES}))
                for ops, _, tag, a in _actions(session)}
    got = {}
    for p in read_packets(session / "merged.perfetto-trace"):
        if p.HasField("gpu_render_stage_event"):
            ex = {d.name: d.value for d in p.gpu_render_stage_event.extra_data}
            if "Shader thread-ops" in ex:
                assert "Shader largest pipe" not in ex
                got[int(ex["tag"])] = (int(ex["Shader thread-ops"]), ex["Shader bound pipe"])
    assert got == expected

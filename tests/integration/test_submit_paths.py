"""Submits made in C (vkapi/submits.py) report and time exactly what the Python path does.

tests/integration/apps/submit_paths.py mixes submits both shims can make in C (a reusable
buffer without labels) with ones that need Python (labels in the buffer, a queue label open),
through vkQueueSubmit and vkQueueSubmit2, with two batches joined by a semaphore. It runs with
the C path (default) and with TESSERA_C_SUBMITS=0; the layer's SUBMIT and ANNEX messages and
the driver's GPU events must be what the app's docstring says, and the same in both runs.
"""
from __future__ import annotations

import re

import pytest
from integration_support import PYTHON, REPO, records_made_in_c, run, run_submit_path

from tessera.schemas import perfetto as pf
from tessera.schemas.frames import MessageType, iter_file
from tessera.schemas.workloads import described

APP = REPO / "tests" / "integration" / "apps" / "submit_paths.py"


def _session(tmp_path_factory, c_submits: bool) -> dict:
    d = tmp_path_factory.mktemp("c" if c_submits else "python") / "session"
    proc, paths = run_submit_path(d, APP, "submit_paths: OK", c_submits)
    records = records_made_in_c(proc.stderr)
    (spool,) = d.glob("layer-*.spool")
    submits, annexes = [], {}
    for f in iter_file(spool):
        if f.type == MessageType.SUBMIT:
            submits.append((f.sequence, f.payload()))
        elif f.type == MessageType.ANNEX:
            annexes.setdefault(f.sequence, {})[f.tag] = f.payload()
    workloads = described(iter_file(spool))
    packets = list(pf.read_packets(d / "gpu.perfetto-trace"))
    check = pf.check_render_stages(packets)
    assert check.problems == []
    events = []
    for p in packets:
        if p.HasField("gpu_render_stage_event"):
            e = p.gpu_render_stage_event
            events.append((p.timestamp, p.timestamp + e.duration, pf.extra(e, "Label stack")))
    return {"submits": submits, "annexes": annexes, "workloads": workloads, "events": sorted(events),
            "paths": paths, "records": records}


@pytest.fixture(scope="module")
def runs(shims, tmp_path_factory) -> dict[bool, dict]:
    return {c: _session(tmp_path_factory, c) for c in (True, False)}


def test_each_submit_takes_the_path_the_docs_give(runs):
    """Layer: A's and L's submits (1 to 7; the one under the queue label too, the label recorded in its ledger
    and the submit wrapped by C) in C; O+E's (a label open across buffers) through Python. Driver: no buffer
    holds work timed after execution, so all 8 in C. With TESSERA_C_SUBMITS=0, all through Python."""
    assert runs[True]["paths"] == {"layer": (7, 1), "icd": (8, 0)}
    assert runs[False]["paths"] == {"layer": (0, 8), "icd": (0, 8)}


def test_the_layer_records_application_labels_in_c(runs):
    """Every label command is recorded in C (intercepts.APP_LABEL, APP_LABEL_END); C counts them
    (Recorded.label_depth), so L's balanced label keeps its submits in C and O's and E's do not."""
    for run_ in runs.values():
        layer = run_["records"]["layer"]
        assert layer["vkCmdBeginDebugUtilsLabelEXT"] == 2 and layer["vkCmdEndDebugUtilsLabelEXT"] == 2
        # consumed by the layer: the driver's labels are the t<tag> of the three fills only
        assert run_["records"]["icd"]["vkCmdBeginDebugUtilsLabelEXT"] == layer["vkCmdFillBuffer"] == 3


def _tags(run_: dict) -> tuple[int, int, int]:
    """The tags of buffers A, L and O (A fills at offset 0, L inside its label, O inside the open one)."""
    fills = sorted(run_["workloads"])
    assert len(fills) == 3, run_["workloads"]
    return fills[0], fills[1], fills[2]


@pytest.mark.parametrize("c_submits", [True, False], ids=["C path", "Python path"])
def test_submits_are_numbered_wrapped_and_tagged_as_documented(runs, c_submits):
    got = runs[c_submits]
    a, l_, o = _tags(got)
    ids = [sid for sid, _ in got["submits"]]
    assert ids == list(range(1, 9))   # numbered in call order, whichever path made them
    by_id = dict(got["submits"])
    assert [by_id[i]["tags"] for i in ids] == [[a], [a], [l_], [a], [a], [a, l_], [a], [o]]
    # Wrapped in s<N>: a buffer submitted before, or an ANNEX (the queue label "q" around submit 4).
    assert [by_id[i]["annexed"] for i in ids] == [False, True, False, True, True, True, True, False]
    assert got["annexes"] == {4: {a: {"labels": ["q"]}}}
    # what the merge names each fill's labels with: its WORKLOAD's own (no ANNEX needed)
    assert [got["workloads"][t].get("labels") for t in (a, l_, o)] == [None, ["labelled"], ["open"]]


@pytest.mark.parametrize("c_submits", [True, False], ids=["C path", "Python path"])
def test_gpu_events_carry_each_submits_labels(runs, c_submits):
    got = runs[c_submits]
    a, l_, o = _tags(got)
    stacks = [stack for _, _, stack in got["events"]]   # the layer keeps the application's labels (ANNEX)
    assert stacks == [f"t{a}", f"s2 / t{a}", f"t{l_}", f"s4 / t{a}", f"s5 / t{a}",
                      f"s6 / t{a}", f"s6 / t{l_}", f"s7 / t{a}", f"t{o}"]
    starts = {stack: (start, end) for start, end, stack in got["events"]}
    assert starts[f"s6 / t{l_}"][0] >= starts[f"s6 / t{a}"][1]   # waits for batch 1's semaphore


def test_both_paths_report_the_same(runs):
    def shape(run_: dict) -> tuple:
        a, l_, o = _tags(run_)
        rename = {a: "A", l_: "L", o: "O"}
        submits = [(sid, [rename[t] for t in p["tags"]], p["annexed"], p["frame"], p["queue"])
                   for sid, p in run_["submits"]]
        stacks = [re.sub(r"t\d+", lambda m: rename[int(m.group()[1:])], stack) for _, _, stack in run_["events"]]
        return submits, stacks

    assert shape(runs[True]) == shape(runs[False])


@pytest.mark.parametrize("c_submits", [True, False], ids=["C path", "Python path"])
def test_queue_labels_reach_the_driver_in_order_with_the_submits(shims, tmp_path, c_submits):
    """Without the layer, the driver itself consumes examples/debug_labels.py's queue labels
    ("frame 0" around both submits, "frame 0 compute" / "frame 0 transfers" around one each): its C
    path records them in the submit ledger between the submits, its Python hooks hand them over."""
    from tessera.tools.launch import LaunchConfig, environment

    env = environment(LaunchConfig(tmp_path / "session", layer=False))
    if not c_submits:
        env["TESSERA_C_SUBMITS"] = "0"
    proc = run([PYTHON, REPO / "examples" / "debug_labels.py"], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stacks = [pf.extra(p.gpu_render_stage_event, "Label stack")
              for p in pf.read_packets(tmp_path / "session" / "gpu.perfetto-trace")
              if p.HasField("gpu_render_stage_event")]
    assert stacks == ["frame 0 / frame 0 compute / compute / collatz 0..255",
                      "frame 0 / frame 0 compute / compute / second half / collatz 256..511",
                      "frame 0 / frame 0 transfers / transfers", "frame 0 / frame 0 transfers / transfers"]

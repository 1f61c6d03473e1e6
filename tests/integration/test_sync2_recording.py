"""Synchronization2 barriers recorded in C by the driver (vkapi/recorder.py Recorded.dependencies):
reduced to the stage masks the timeline orders by, they order the GPU events exactly as the Python
hooks do (TESSERA_C_RECORDING=0), and as tests/integration/apps/sync2_barriers.py's docstring says
by hand: the fill waits for the dispatch in submits 1, 2, 5 and 6, not in 3 and 4 (6: the original
vkCmdWaitEvents, recorded in C as vkCmdPipelineBarrier is)."""
from __future__ import annotations

import pytest
from integration_support import PYTHON, REPO, records_made_in_c, run

from tessera.schemas import perfetto as pf

APP = REPO / "tests" / "integration" / "apps" / "sync2_barriers.py"
WAITS = {1: True, 2: True, 3: False, 4: False, 5: True, 6: True}


def _run(tmp_path_factory, c_recording: bool) -> dict:
    from tessera.tools.launch import LaunchConfig, environment

    d = tmp_path_factory.mktemp("c" if c_recording else "python") / "session"
    env = dict(environment(LaunchConfig(d)), TESSERA_LOG="info")
    env.pop("TESSERA_HOSTD", None)
    if not c_recording:
        env["TESSERA_C_RECORDING"] = "0"
    proc = run([PYTHON, APP], env)
    assert proc.returncode == 0 and "sync2_barriers: OK" in proc.stdout, proc.stdout + proc.stderr
    made = records_made_in_c(proc.stderr)["icd"]
    events = {}
    for p in pf.read_packets(d / "gpu.perfetto-trace"):
        if p.HasField("gpu_render_stage_event"):
            e = p.gpu_render_stage_event
            events.setdefault(e.submission_id, []).append((p.timestamp, e.duration, pf.extra(e, "Workload")))
    return {"made": made, "events": events}


@pytest.fixture(scope="module")
def runs(shims, tmp_path_factory) -> dict[bool, dict]:
    return {c: _run(tmp_path_factory, c) for c in (True, False)}


def test_barriers_take_the_c_path_unless_switched_off(runs):
    made = runs[True]["made"]
    assert (made["vkCmdPipelineBarrier2"], made["vkCmdWaitEvents2"], made["vkCmdWaitEvents"]) == (5, 1, 1)
    assert runs[False]["made"] == {}


def test_the_timeline_orders_each_submit_as_its_barriers_say_on_both_paths(runs):
    shapes = {}
    for c, run_ in runs.items():
        shapes[c] = {}
        for submission, events in run_["events"].items():
            (d_start, d_len, d_kind), (f_start, f_len, f_kind) = sorted(events, key=lambda e: e[2])
            assert (d_kind, f_kind) == ("dispatch", "transfer")
            shapes[c][submission] = (d_len, f_len, f_start - d_start)
    assert shapes[True] == shapes[False]
    assert {s: offset == d_len for s, (d_len, _, offset) in shapes[True].items()} == WAITS
    assert all(offset in (0, d_len) for d_len, _, offset in shapes[True].values())

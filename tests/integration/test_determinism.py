"""Determinism (#29): every example, run twice under `tessera run`, gives merged traces equal in
everything but wall-clock timestamps, pids and handles.

Each run goes through the real loader, layer, emulated driver and embedded hostd into its own
session folder; both merged traces are read with the report's reader into the canonical form
`tessera diff` compares (tessera.hostd.ci.runs.canonical: every GPU event in trace order with
its queue, stage, name, duration, render-pass instance, event id and args; the workloads by
identity; the submit and frame slices' args) and compared whole. Every example in examples/ is
run (test_every_example_is_run keeps the list complete), plus the instrumented and
per-region-counter runs whose shader costs and region counters must be deterministic too.
Runtime on the 2-core sandbox: ~0.5 s per run (docs/ci.md).
"""
from __future__ import annotations

import pytest
from integration_support import PYTHON, REPO, run

from tessera.hostd.ci.diff import diff_runs
from tessera.hostd.ci.runs import canonical, differences, read_run
from tessera.schemas.perfetto import read_packets

TESSERA = REPO / ".venv" / "bin" / "tessera"
EXAMPLES = REPO / "examples"
HELPERS = {"vkapp", "rt_scene", "vktensors", "vkgraphs"}   # shared modules of the examples, not examples
PY_EXAMPLES = ["compute_collatz", "conv_net_graph", "debug_labels", "mlp_tensors", "overdraw", "ray_query",
               "ray_tracing", "render_passes", "shader_costs", "transfers"]
# (id, tessera run options, program)
CASES = [(name, [], [PYTHON, EXAMPLES / f"{name}.py"]) for name in PY_EXAMPLES] + [
    ("compute_and_draw (C)", [], [REPO / "build" / "examples" / "compute_and_draw"]),
    ("shader_costs --instrument", ["--instrument"], [PYTHON, EXAMPLES / "shader_costs.py"]),
    ("compute_collatz --instrument", ["--instrument"], [PYTHON, EXAMPLES / "compute_collatz.py"]),
    ("overdraw --regions", ["--regions"], [PYTHON, EXAMPLES / "overdraw.py"]),
]


def test_every_example_is_run() -> None:
    assert {p.stem for p in EXAMPLES.glob("*.py")} - HELPERS == set(PY_EXAMPLES)
    assert {p.stem for p in (EXAMPLES / "c").glob("*.c")} == {"compute_and_draw"}


def _session(tmp_path, n: int, options: list, program: list):
    session = tmp_path / f"run{n}"
    out = run([TESSERA, "run", *options, "--out", session, "--", *program], None)
    assert out.returncode == 0, out.stdout + out.stderr
    return read_run(session)


@pytest.mark.parametrize("options,program", [pytest.param(o, p, id=i) for i, o, p in CASES])
def test_two_runs_are_equal(options, program, shims, tmp_path) -> None:
    first, second = (_session(tmp_path, n, options, program) for n in (1, 2))
    assert first.problems == [] and second.problems == []
    a, b = canonical(first), canonical(second)
    assert a["gpu_events"] and all(e["duration_ns"] > 0 for e in a["gpu_events"])
    assert a == b, "\n".join(differences(a, b))
    if "--instrument" in options:
        assert any(w.shader for w in first.workloads), "an instrumented run carries shader costs"
    if "--regions" in options:
        assert any(k.startswith("Regions ") for e in a["gpu_events"] for k in e["args"])


def test_the_canonical_form_keeps_what_differs(shims, tmp_path) -> None:
    """The comparison is not vacuous: two different programs differ in it, and what it leaves out
    (pids, handles) was really in the traces."""
    a = _session(tmp_path, 1, [], [PYTHON, EXAMPLES / "render_passes.py"])
    b = _session(tmp_path, 2, [], [PYTHON, EXAMPLES / "transfers.py"])
    assert canonical(a) != canonical(b)
    text = repr(canonical(a))
    assert "handles.device" not in text and "command_buffers" not in text
    raw = [p.gpu_render_stage_event for p in read_packets(a.source) if p.HasField("gpu_render_stage_event")]
    assert any(d.name.startswith("handles.") for e in raw for d in e.extra_data)
    assert {e.duration for e in raw} == {e["duration_ns"] for e in canonical(a)["gpu_events"]}


def test_racing_threads_change_numbers_not_workloads(shims, tmp_path) -> None:
    """Four threads record at once (tests/integration/apps/threads.py): which command buffer gets
    which tags races, so the canonical forms may differ in tag numbers; matched by identity (the
    order the GPU ran them, not the tags), no workload differs."""
    app = [PYTHON, REPO / "tests" / "integration" / "apps" / "threads.py"]
    first, second = (_session(tmp_path, n, [], app) for n in (1, 2))
    d = diff_runs(first, second)
    assert (d.changed, d.added, d.removed, d.unchanged) == ([], [], [], 200)
    numbers = {"tag", "Labels", "Label stack"}
    a, b = canonical(first), canonical(second)
    for e in (*a["gpu_events"], *b["gpu_events"]):
        e["args"] = {k: v for k, v in e["args"].items() if k not in numbers}
    a["slices"] = b["slices"] = []        # the submits' and children's tag lists
    assert a == b, "\n".join(differences(a, b))

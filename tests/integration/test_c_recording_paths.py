"""Commands recorded in C by both shims against their Python hooks (TESSERA_C_RECORDING=0), through the
real loader, the emulated driver, the layer and lavapipe: render passes (vkapi/recorder.py
Recorded.opens_pass / closes_pass), mesh-shading draws and trace rays.

examples/render_passes.py:
1. a classic render pass with an indirect draw and vkCmdNextSubpass: begun in C; the indirect draw's
   Python hook (the layer captures its parameters at the end of the pass) sends the end to Python;
2. a dynamic-rendering instance with an indirect draw: the same;
3. an instance suspended in one command buffer and resumed in another: Python, begin and end.
examples/overdraw.py: one dynamic-rendering instance of direct draws inside application labels: begun
and ended in C, its t<tag> label opened and closed by C.
tests/integration/apps/mesh_tasks.py: one instance of three vkCmdDrawMeshTasksEXT, folded into one record
of three draws by both shims.
examples/ray_tracing.py: a vkCmdTraceRaysKHR recorded in C (its size; the shader tables are not read),
and a vkCmdTraceRaysIndirectKHR, whose parameters the layer captures in Python.

Run both ways (TESSERA_C_RECORDING=0 sends everything through Python), the merged traces are the same
event for event: names, durations, label stacks, tags and metadata (the examples check their pixels too).
"""
from __future__ import annotations

import pytest
from integration_support import REPO, run_recorded

# no shipped Mali profile has VK_EXT_mesh_shader: mali-g78 has no profile and reports the backend's
GPUS = {"mesh_tasks": "mali-g78"}
APPS = {"render_passes": REPO / "examples" / "render_passes.py", "overdraw": REPO / "examples" / "overdraw.py",
        "mesh_tasks": REPO / "tests" / "integration" / "apps" / "mesh_tasks.py",
        "ray_tracing": REPO / "examples" / "ray_tracing.py"}
# Per program, the records each shim makes in C of those commands (by hand, from the docstring).
MADE_IN_C = {"render_passes": {"vkCmdBeginRenderPass": 1, "vkCmdEndRenderPass": None, "vkCmdBeginRendering": 1,
                               "vkCmdEndRendering": None, "vkCmdDrawMeshTasksEXT": None},
             "overdraw": {"vkCmdBeginRenderPass": None, "vkCmdEndRenderPass": None, "vkCmdBeginRendering": 1,
                          "vkCmdEndRendering": 1, "vkCmdDrawMeshTasksEXT": None},
             "mesh_tasks": {"vkCmdBeginRenderPass": None, "vkCmdEndRenderPass": None, "vkCmdBeginRendering": 1,
                            "vkCmdEndRendering": 1, "vkCmdDrawMeshTasksEXT": 1},
             "ray_tracing": {"vkCmdTraceRaysKHR": 1, "vkCmdTraceRaysIndirectKHR": None}}


def _session(tmp_path_factory, example: str, c_recording: bool) -> dict:
    d = tmp_path_factory.mktemp(example + ("-c" if c_recording else "-python")) / "session"
    made, events = run_recorded(d, [APPS[example]], f"{example}: OK", c_recording, gpu=GPUS.get(example))
    return {"made": made,
            "events": [(name, duration, tuple(sorted(extra.items()))) for name, duration, extra in events]}


@pytest.fixture(scope="module", params=sorted(MADE_IN_C))
def runs(request, shims, tmp_path_factory) -> tuple[str, dict[bool, dict]]:
    return request.param, {c: _session(tmp_path_factory, request.param, c) for c in (True, False)}


def test_both_shims_record_the_passes_that_need_no_python_in_c(runs):
    example, runs = runs
    for shim in ("layer", "icd"):
        made = runs[True]["made"][shim]
        assert {name: made.get(name) for name in MADE_IN_C[example]} == MADE_IN_C[example], (shim, made)
        assert runs[False]["made"][shim] == {}


def test_passes_recorded_in_c_give_the_trace_of_the_python_path(runs):
    example, runs = runs
    c, python = runs[True]["events"], runs[False]["events"]
    assert len(c) >= 2 and len(c) == len(python)
    for i, (a, b) in enumerate(zip(c, python)):   # the first difference in full (pytest truncates lists)
        assert a == b, (f"event {i}: C path {a[:2]} / Python path {b[:2]}; args only in C: "
                        f"{sorted(set(a[2]) - set(b[2]))}, only in Python: {sorted(set(b[2]) - set(a[2]))}")
    if example == "ray_tracing":
        rays = [dict(extra) for name, _, extra in c if dict(extra).get("kind") == "trace_rays"]
        assert [(r["command"], r["width"], r["height"]) for r in rays] == [
            ("vkCmdTraceRaysKHR", "64", "64"), ("vkCmdTraceRaysIndirectKHR", "64", "64")]
        return
    passes = [dict(extra) for name, _, extra in c if dict(extra).get("kind") == "render_pass"]
    assert passes and all(p["Label stack"].split(" / ")[-1] == f"t{p['tag']}" for p in passes)
    if example == "mesh_tasks":   # the three mesh draws, folded in C, still count three (layer and driver)
        names = {name for name, _, extra in c if dict(extra).get("kind") == "render_pass"}
        assert names == {"Render pass 32×32, 3 draws"}
        # the driver estimates each like an indirect draw (icd/timing.py INDIRECT_DRAW_VERTICES: 3072)
        assert {(p["draw_call_count"], p["Vertices"], p["Estimated"]) for p in passes} == {
            ("3", str(3 * 3072), "indirect draw sizes")}

"""Measured Mali counters (#27, `tessera run --counters measured`): real loader, layer, emulated driver
and lavapipe's pipeline-statistics queries; the counters checked against hand-computed geometry and
dispatch sizes, and against the model's estimate they replace.

ci_frame.py (tests/integration/apps): a 64x64 target, "shadow pass" 1 full-screen draw of 6 vertices,
"main pass" 2 of them. clipped_draws.py: one draw of 3 quads (6 triangles, 18 vertices) over a 64x64
target, covering columns 0..31 (inside), 48..63 (the quad's other half is beyond the right edge) and
nothing (wholly outside): 2048 + 1024 pixels. compute_collatz.py: dispatches of 10 and 10 groups and
an indirect one of 12, 32 invocations per group; with --own-query the application brackets the pass with
its own pipeline-statistics query; with --culling four more passes whose visible primitives the app's
docstring counts by hand (back-face culling with the pipeline's and with dynamic cull state, a triangle
strip, an indexed strip with primitive restart).
"""
from __future__ import annotations

import pytest
from integration_support import PYTHON, REPO, run

from tessera.hostd import counters
from tessera.hostd.counters import read_session
from tessera.icd import timing
from tessera.schemas.perfetto import read_packets

TESSERA = REPO / ".venv" / "bin" / "tessera"
APPS = REPO / "tests" / "integration" / "apps"
W = H = 64
PASS_MEASURED = {"MaliGeomTotalPrim", "MaliGeomTrianglePrim", "MaliNonFragThread", "MaliNonFragWarp", "MaliFragThread",
                 "MaliFragWarp"}
VISIBLE = PASS_MEASURED | {"MaliGeomVisiblePrim"}   # and the positions captured (icd/visible_prims.py)


APP_OPTIONS = ("--own-query", "--culling", "--app-xfb")


def _run(tmp_path, name: str, program, *options) -> object:
    """`options` for `tessera run`, then the app's options (APP_OPTIONS) if given."""
    session = tmp_path / name
    app_options = [o for o in options if o in APP_OPTIONS]
    options = [o for o in options if o not in APP_OPTIONS]
    out = run([TESSERA, "run", *options, "--out", session, "--", PYTHON, program, *app_options], None)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK" in out.stdout, out.stdout
    return session


def _slice_args(session) -> list[dict[str, str]]:
    """The driver's GPU events' args, in trace order."""
    return [{d.name: d.value for d in p.gpu_render_stage_event.extra_data}
            for p in read_packets(session / "gpu.perfetto-trace") if p.HasField("gpu_render_stage_event")]


@pytest.fixture(scope="module")
def frames(tmp_path_factory, shims):
    tmp = tmp_path_factory.mktemp("measured")
    return (_run(tmp, "measured", APPS / "ci_frame.py", "--counters", "measured"),
            _run(tmp, "modelled", APPS / "ci_frame.py"))


def test_full_screen_draws_count_every_pixel_and_primitive(frames):
    measured, modelled = (read_session(s) for s in frames)
    for session in (measured, modelled):
        assert [w.labels[-1] for w in session.workloads if w.arm_type == "renderpass"] == ["shadow pass", "main pass"]
    passes = [w for w in measured.workloads if w.arm_type == "renderpass"]
    model = [w for w in modelled.workloads if w.arm_type == "renderpass"]
    for w, m, draws in zip(passes, model, (1, 2)):
        c = w.counters
        assert c["MaliFragThread"] == W * H * draws                 # every pixel, once per full-screen draw
        assert c["MaliGeomTotalPrim"] == c["MaliGeomTrianglePrim"] == 2 * draws
        assert c["MaliGeomVisiblePrim"] == 2 * draws                # full-screen: nothing culled
        assert c["MaliNonFragThread"] == 6 * draws                  # vertex invocations
        assert c["MaliFragWarp"] == -(-W * H * draws // 16)           # the Mali-G720's 16-wide warps
        # the model's estimate, which the measurement replaces: a quarter of the area per draw
        assert m.counters["MaliFragThread"] == W * H * draws * timing.DRAW_COVERAGE != c["MaliFragThread"]
        # what the model and the measurement share stays the model's
        assert c["MaliExtBusWrBy"] == m.counters["MaliExtBusWrBy"] == W * H * 4
    # the slices say which counters were measured; the copy's none
    args = _slice_args(frames[0])
    rp = [a for a in args if a["Workload"] == "render pass"]
    assert len(rp) == 4 and all(set(a["Measured"].split(", ")) == VISIBLE for a in rp)
    assert all("Measured" not in a for a in args if a["Workload"] == "transfer")
    assert all("Measured" not in a for a in _slice_args(frames[1]))
    # the readers say it too: per workload (hostd/counters.py), and `tessera counters` marks the values
    assert all(set(w.measured) == VISIBLE for w in passes) and not any(w.measured for w in modelled.workloads)
    table = run([TESSERA, "counters", frames[0]], None).stdout
    assert f"{W * H:,}*" in table and "* measured by the backend's pipeline-statistics queries" in table
    assert "*" not in run([TESSERA, "counters", frames[1]], None).stdout
    # and `tessera report`'s headline marks the measured ones; a modelled session's says modelled
    report = run([TESSERA, "report", frames[0]], None).stdout
    marked = {line.split()[0] for line in report.splitlines() if line.startswith("  Mali") and "(measured)" in line}
    assert marked == VISIBLE & set(counters.HEADLINE) and "measured where marked" in report
    report = run([TESSERA, "report", frames[1]], None).stdout
    assert "(measured)" not in report and "Mali counters (Mali-G720, modelled:" in report


def test_clipped_draw_counts_only_what_is_on_screen(tmp_path, shims):
    s = read_session(_run(tmp_path, "clipped", APPS / "clipped_draws.py", "--counters", "measured"))
    [w] = [w for w in s.workloads if w.arm_type == "renderpass"]
    c = w.counters
    assert c["MaliGeomTotalPrim"] == 6                       # 3 quads: input primitives, before any culling
    assert c["MaliNonFragThread"] == 18
    assert c["MaliFragThread"] == 32 * 64 + 16 * 64           # the covered pixels (the app checks the image)
    assert c["MaliFragThread"] != W * H * timing.DRAW_COVERAGE
    # the quads over [-1, 0] and [0.5, 1.5] are visible, the one over [2, 3] lies wholly beyond x = w
    # (lavapipe's clipping statistics give 6 and 0 here: docs/counters.md "Measured")
    assert c["MaliGeomVisiblePrim"] == 4


# The hand-counted references of clipped_draws.py --culling (its docstring): input, visible primitives.
CULLING = {"clipped pass": (6, 4), "culled pass": (6, 4), "dynamic cull pass": (8, 4), "strip pass": (6, 4),
           "indexed pass": (4, 2)}


def test_visible_primitives_are_the_ones_culling_keeps(tmp_path, shims):
    """Positions captured by transform feedback and culled on the CPU: frustum, back faces (the
    pipeline's cull state and dynamic state), strips (winding kept), an indexed strip with restart."""
    session = _run(tmp_path, "culling", APPS / "clipped_draws.py", "--counters", "measured", "--culling")
    passes = {w.labels[-1]: w for w in read_session(session).workloads if w.arm_type == "renderpass"}
    assert {name: (w.counters["MaliGeomTotalPrim"], w.counters["MaliGeomVisiblePrim"])
            for name, w in passes.items()} == CULLING
    assert all("MaliGeomVisiblePrim" in w.measured for w in passes.values())
    rp = [a for a in _slice_args(session) if a["Workload"] == "render pass"]
    assert len(rp) == 2 * len(CULLING) and all(a["Measured"].endswith(", MaliGeomVisiblePrim") for a in rp)
    # Arm's CSV has its "Visible primitives" column (the Mali-G720 has the counter)
    out = tmp_path / "csv"
    assert run([TESSERA, "counters", session, "--csv", out], None).returncode == 0
    header = (out / "frame_00000.csv").read_text().splitlines()[0]
    assert "Visible primitives" in header.split(",")


def test_no_visible_primitives_without_capture(tmp_path, shims, frames):
    """Modelled counters never show them (no zero stands in); nor does a device whose application enabled
    transform feedback itself (the driver leaves it to the application), whose other counters stay measured."""
    modelled = read_session(frames[1])
    assert not any("MaliGeomVisiblePrim" in w.counters for w in modelled.workloads)
    own = read_session(_run(tmp_path, "app-xfb", APPS / "clipped_draws.py", "--counters", "measured", "--app-xfb"))
    [w] = [w for w in own.workloads if w.arm_type == "renderpass"]
    assert "MaliGeomVisiblePrim" not in w.counters and w.counters["MaliFragThread"] == 32 * 64 + 16 * 64
    assert set(w.measured) == PASS_MEASURED


def test_dispatch_threads_are_the_counted_invocations(tmp_path, shims):
    session = _run(tmp_path, "collatz", REPO / "examples" / "compute_collatz.py", "--counters", "measured")
    s = read_session(session)
    threads = {w.labels[-1] if w.labels else i: w.counters["MaliNonFragThread"]
               for i, w in enumerate(s.workloads) if w.arm_type == "compute"}
    assert sorted(threads.values()) == [10 * 32, 10 * 32, 12 * 32]
    dispatches = {a["Command"]: a for a in _slice_args(session) if a["Workload"] == "dispatch"}
    assert set(dispatches) == {"vkCmdDispatch", "vkCmdDispatchBase", "vkCmdDispatchIndirect"}
    # only the indirect dispatch is counted by a query: a direct one's size is its recorded groups x the
    # work-group size, which the statistic would repeat (docs/counters.md "Measured")
    assert dispatches["vkCmdDispatchIndirect"]["Measured"] == "MaliNonFragThread, MaliNonFragWarp"
    assert "Measured" not in dispatches["vkCmdDispatch"] and "Measured" not in dispatches["vkCmdDispatchBase"]
    assert int(dispatches["vkCmdDispatchIndirect"]["MaliNonFragThread"]) == 12 * 32


def test_passes_that_cannot_be_bracketed_keep_the_model(tmp_path, shims):
    """render_passes.py: a pass of 2 subpasses (a later one may execute secondaries: no query across
    it) keeps modelled counters; the program still runs correctly."""
    args = _slice_args(_run(tmp_path, "passes", REPO / "examples" / "render_passes.py", "--counters", "measured"))
    multi = [a for a in args if a.get("Subpasses") == "2"]
    assert multi and all("Measured" not in a for a in multi)
    assert any("Measured" in a for a in args if a.get("Subpasses") == "1")


def test_an_application_counting_itself_keeps_its_counts_and_the_model(tmp_path, shims):
    """clipped_draws.py --own-query on the Mali-G78 (timing only: it reports lavapipe's
    pipelineStatisticsQuery): the application's own query around the pass reads the references (the
    app checks 6 primitives and 3072 fragments itself); the driver brackets no pass of that device
    (the application could begin its query inside one), so the pass keeps the model's counters."""
    session = _run(tmp_path, "own", APPS / "clipped_draws.py", "--counters", "measured", "--gpu", "mali-g78",
                   "--own-query")
    args = [a for a in _slice_args(session) if a["Workload"] == "render pass"]
    assert len(args) == 2 and all("Measured" not in a for a in args)
    [w] = [w for w in read_session(session).workloads if w.arm_type == "renderpass"]
    assert w.counters["MaliFragThread"] == W * H * timing.DRAW_COVERAGE and not w.measured

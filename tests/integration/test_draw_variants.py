"""VK_EXT_multi_draw draws are counted, through the real loader.

tests/integration/apps/draw_variants.py records one dynamic-rendering pass
holding vkCmdDrawMultiEXT (drawCount 2) and vkCmdDrawMultiIndexedEXT
(drawCount 1), 6 vertices per draw. Under Tessera that pass must be one
render-pass workload with 3 draws (2 + 1) in the layer's metadata, and the
emulated driver's binning and main events for it must report 3 draws and 18
vertices (the driver reads the app's 16-byte-strided VkMultiDrawInfoEXT
array). Before these commands were in the taxonomy the pass said "0 draws".
On plain lavapipe the same app shows its own pixel checks are right.
"""
from __future__ import annotations

from integration_support import PYTHON, REPO, run

from tessera.schemas import perfetto as pf
from tessera.schemas.frames import MessageType, iter_file
from tessera.schemas.workloads import all_problems, described

APP = REPO / "tests" / "integration" / "apps" / "draw_variants.py"
TESSERA = REPO / ".venv" / "bin" / "tessera"
DRAWS, VERTICES = 2 + 1, 3 * 6
OK = "draw_variants: OK 32x32 pixels checked: 1 render pass, vkCmdDrawMultiEXT 2 draws + vkCmdDrawMultiIndexedEXT 1 draw"
PASS = {"kind": "render_pass", "command": "vkCmdBeginRendering", "width": 32, "height": 32,
        "render_area": [0, 0, 32, 32], "subpass_count": 1, "dynamic": True, "draw_call_count": DRAWS}


def render_stage_events(trace) -> list[tuple[str, object]]:
    """(stage name, event) of every render-stage event of a trace that imports cleanly."""
    packets = list(pf.read_packets(trace))
    check = pf.check_render_stages(packets)
    assert check.problems == []
    specs = {iid: name for (_, iid), name in check.specs.items()}
    return [(specs[p.gpu_render_stage_event.stage_iid], p.gpu_render_stage_event)
            for p in packets if p.HasField("gpu_render_stage_event")]


def assert_driver_pass_events(events, tag: int) -> list:
    """The driver ran the pass as a binning and a main phase, each counting every draw and vertex."""
    mine = [(stage, e) for stage, e in events if pf.extra(e, "Labels") == f"t{tag}"]
    assert sorted(stage for stage, _ in mine) == ["binning", "main"]
    for _, e in mine:
        assert pf.extra(e, "Workload") == "render pass"
        assert pf.extra(e, "Draws") == str(DRAWS)
        assert pf.extra(e, "Vertices") == str(VERTICES)
    return [e for _, e in mine]


def test_multi_draws_counted_in_session(tessera_env, tmp_path):
    """Layer stream (spooled) and driver trace of a run in the `tessera run` environment (on mali-g78:
    no shipped Mali profile has VK_EXT_multi_draw; mali-g78 has no profile and reports the backend's)."""
    out = run([PYTHON, APP], dict(tessera_env, TESSERA_GPU="mali-g78"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith(OK) and "Mali" in out.stdout, out.stdout
    session = tmp_path / "session"
    spools = list(session.glob("layer-*.spool"))
    assert len(spools) == 1, spools
    stream = [(f.type, f.sequence, f.tag, f.payload()) for f in iter_file(spools[0])]
    assert [(MessageType(t).name, msg) for t, _, _, p in stream for msg in all_problems(t, p)] == []
    passes = {tag: p for tag, p in described(iter_file(spools[0])).items() if p["kind"] == "render_pass"}
    assert len(passes) == 1, passes
    ((tag, workload),) = passes.items()
    for t, _, annex_tag, p in stream:       # a pass's annex (split or captured) overrides its recorded count
        if t == MessageType.ANNEX and annex_tag == tag:
            workload = {**workload, **p}
    assert {k: workload.get(k) for k in PASS} == PASS
    assert_driver_pass_events(render_stage_events(session / "gpu.perfetto-trace"), tag)


def test_multi_draws_counted_in_merged_trace(shims, tmp_path):
    """`tessera run`: the merged trace names the pass '3 draws' and carries the layer's count."""
    session = tmp_path / "draw_variants"
    out = run([TESSERA, "run", "--gpu", "mali-g78", "--out", session, "--", PYTHON, APP], None)
    assert out.returncode == 0, out.stdout + out.stderr
    assert OK in out.stdout, out.stdout
    events = render_stage_events(session / "merged.perfetto-trace")
    tags = {pf.extra(e, "tag") for _, e in events if pf.extra(e, "kind") == "render_pass"}
    assert len(tags) == 1, tags
    tag = tags.pop()
    pass_events = [(stage, e) for stage, e in events if pf.extra(e, "tag") == tag]
    assert sorted(stage for stage, _ in pass_events) == ["binning", "main"]
    for _, e in pass_events:
        assert e.name == f"Render pass 32×32, {DRAWS} draws"
        assert pf.extra(e, "draw_call_count") == str(DRAWS)
        assert pf.extra(e, "Vertices") == str(VERTICES)
        # each fact once (hostd/slice_args.py): the driver's equal Draws and Workload give way to the layer's
        assert pf.extra(e, "Draws") is None and pf.extra(e, "Draws (driver)") is None
        assert pf.extra(e, "Workload") is None and pf.extra(e, "kind") == "render_pass"
        assert pf.extra(e, "metadata") != "missing"
    assert "GPU events without metadata" not in out.stdout


def test_app_is_correct_on_lavapipe(lavapipe_env):
    out = run([PYTHON, APP], lavapipe_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith(OK) and "llvmpipe" in out.stdout, out.stdout

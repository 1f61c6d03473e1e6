"""Frame analysis and advice (#28) end to end: real runs under `tessera run` (loader, layer, emulated
Mali, embedded hostd), then hostd/advice/ on the merged session.

- tests/integration/apps/planted_advice.py plants one anti-pattern per rule: the advisor finds exactly
  those, each at its labelled workload, with the cost computed here by hand from the emulated
  Mali-G720's figures (32 bytes/ns of memory, 2000 ns per job's fixed cost, 16-wide warps, 10 cores,
  4 pixels per cycle per core) and the trace's own durations and per-vertex / per-fragment cycles for
  what is costed in time. It runs with `--content`: its indexed draw's index data is read back and
  its content metrics (128 distinct vertices, 1920 shaded) come from the real indices.
- The Khronos validation layer (1.3.239, Best Practices with the Arm vendor checks) on the same app,
  as an outside reference: where it overlaps it agrees (the two multisampled images made without
  TRANSIENT_ATTACHMENT: our msaa-stored and resolve-transfer; vkCmdResolveImage: resolve-transfer; the
  12-thread work group: workgroup-warp-waste; the thrashing index order: vertex-reuse, with the same
  cache hit rate from the same LRU model), without a cost; its render-pass load/store checks
  (redundant clear/store, attachment-needs-readback, inefficient-clear, *-loadopload) report nothing
  on this frame, whose passes are dynamic rendering but one; it also reports small allocations, which
  the layer's metadata does not carry (docs/advice.md).
- The examples get only the findings that apply to them.
- The layer's resources: every render pass's output is an edge to the copy that reads it back.
- `tessera report --json` carries the graph and advice; `--html` writes one offline page that headless
  Chromium renders without a console message.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from integration_support import PYTHON, REPO, lavapipe_manifest, records_made_in_c, run

from tessera.hostd.advice import analyse

TESSERA = REPO / ".venv" / "bin" / "tessera"
APP = REPO / "tests" / "integration" / "apps" / "planted_advice.py"
ATTACHMENT = 64 * 64 * 4        # bytes of one load or store of a 64x64 RGBA8 (or D32) attachment
NS_PER_ATTACHMENT = math.ceil(ATTACHMENT / 32)    # 512 ns at 32 bytes/ns
JOB_NS = 2000                   # JOB_SETUP_CYCLES at 1000 MHz
VALIDATION_MANIFEST = Path("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")


def _session(tmp_path, name: str, program: list, options: tuple = ()):
    session = tmp_path / name
    out = run([TESSERA, "run", *options, "--out", session, "--", *program], None)
    assert out.returncode == 0, out.stdout + out.stderr
    return session


@pytest.fixture(scope="module")
def planted(shims, tmp_path_factory):
    session = _session(tmp_path_factory.mktemp("advice"), "planted", [PYTHON, APP], ("--content",))
    return session, analyse(session)


def _work(analysis, label: str, kind: str):
    [node] = [n for n in analysis.graph.nodes if n.work.label_path == label and n.work.kind == kind]
    return node.work


def test_planted_findings_exactly(planted) -> None:
    _, a = planted
    assert a.gpu.name == "Mali-G720 (emulated)" and not a.gpu.assumed
    got = sorted((f.rule, f.label_path) for f in a.findings)
    planted_rules = ["load-undefined", "binning-serialised", "workgroup-warp-waste", "clear-then-load",
                     "redundant-clear", "store-overwritten", "msaa-stored", "resolve-transfer", "transfer-then-load",
                     "outputs-unread", "non-transient-attachment", "pass-round-trip", "depth-store-unread",
                     "empty-pass", "vertex-reuse", "high-overdraw", "small-transfers", "store-unpresented"]
    at = {"non-transient-attachment": "outputs-unread", "too-many-passes": "", "small-allocations": ""}
    # else the label names its rule; the frame's pass count and the device's allocations are no workload's
    assert got == sorted((r, at.get(r, r)) for r in planted_rules + ["too-many-passes", "small-allocations"])
    assert all(f.frame == 0 for f in a.findings if f.rule != "small-allocations")


def test_planted_costs(planted) -> None:
    _, a = planted
    by = {f.rule: f for f in a.findings}
    in_bytes = {"load-undefined": ATTACHMENT, "store-overwritten": ATTACHMENT, "transfer-then-load": ATTACHMENT,
                "depth-store-unread": ATTACHMENT, "msaa-stored": 4 * ATTACHMENT, "pass-round-trip": 2 * ATTACHMENT,
                "store-unpresented": ATTACHMENT}
    for rule, nbytes in in_bytes.items():
        assert (by[rule].saves_bytes, by[rule].saves_ns) == (nbytes, math.ceil(nbytes / 32)), rule
    assert by["too-many-passes"].saves_ns == (17 - 8) * 2 * JOB_NS
    # the frame boundary names O as the frame's output: U, stored and never read back, is the unpresented store
    [shown] = a.graph.presents
    assert (shown.frame, a.graph.nodes[shown.writer].work.label_path) == (0, "high-overdraw")
    assert by["store-unpresented"].attachment == 0
    assert (by["non-transient-attachment"].saves_bytes, by["non-transient-attachment"].saves_ns) == (ATTACHMENT, 0)
    assert by["small-transfers"].saves_ns == JOB_NS
    [(device, allocations)] = a.graph.allocations
    assert device == "Mali-G720 (emulated)" and by["small-allocations"].workload == f"device {device}"
    assert (by["small-allocations"].saves_bytes, by["small-allocations"].saves_ns) == (allocations["page_waste_bytes"], 0)
    clear_b = _work(a, "clear-then-load", "image_transfer").duration_ns
    assert by["clear-then-load"].saves_ns == clear_b + NS_PER_ATTACHMENT
    assert by["redundant-clear"].saves_ns == _work(a, "redundant-clear", "image_transfer").duration_ns
    resolve = [n.work for n in a.graph.nodes if n.work.meta.get("subtype") == "resolve image"]
    assert by["resolve-transfer"].saves_ns == resolve[0].duration_ns
    assert by["empty-pass"].saves_ns == _work(a, "empty-pass", "render_pass").duration_ns
    assert by["outputs-unread"].saves_ns == _work(a, "outputs-unread", "render_pass").duration_ns
    # the barrier: N2's binning waited from the end of the last binning before it (N1's) to N1's main end
    n1, n2 = _work(a, "binning-serialised N1", "render_pass"), _work(a, "binning-serialised", "render_pass")
    n1_binning, n1_main = (next(p for p in n1.phases if p.stage == s) for s in ("binning", "main"))
    n2_binning = next(p for p in n2.phases if p.stage == "binning")
    assert n2_binning.start_ns == n1_main.end_ns
    assert by["binning-serialised"].saves_ns == n2_binning.start_ns - n1_binning.end_ns > 0
    # 64 groups of 12 threads on 16-wide warps: 4 idle lanes per group, 256 of 768 invocations
    dispatch = _work(a, "workgroup-warp-waste", "dispatch")
    assert by["workgroup-warp-waste"].saves_ns == math.ceil((dispatch.duration_ns - JOB_NS) * 256 / 768)
    assert [f.saves_ns for f in a.findings] == sorted((f.saves_ns for f in a.findings), reverse=True)


def test_planted_content(planted) -> None:
    """The indexed draw's metrics from its real index data (0..127 fifteen times: every index misses the
    32-entry cache), the overdraw pass's from the driver's fragment threads, and their costs."""
    _, a = planted
    by = {f.rule: f for f in a.findings}
    [node] = [n for n in a.graph.nodes if n.work.label_path == "vertex-reuse"]
    c = node.to_json()["content"]
    [d] = c["draws"]
    assert (d["indexed"], d["count"], d["primitives"], d["unique_vertices"], d["shaded_vertices"], d["index_span"]) == (
        True, 1920, 640, 128, 1920, 128)
    assert (c["extra_vertex_invocations"], c["cache_hit_rate"]) == (1792, round(128 / 1920, 4))
    vertex_cycles = float(node.work.meta["Vertex cycles"])       # what the driver's timing used per vertex
    assert vertex_cycles > 0 and by["vertex-reuse"].draw == 0
    assert by["vertex-reuse"].saves_ns == max(1, math.ceil(1792 * vertex_cycles / 10))
    [node] = [n for n in a.graph.nodes if n.work.label_path == "high-overdraw"]
    c = node.to_json()["content"]
    assert (c["covered_pixels"], c["fragment_threads"], c["overdraw"]) == (4096, 4096 * 9 // 4, 2.25)
    per_fragment = max(float(node.work.meta["Fragment cycles"]), 1 / 4)
    assert by["high-overdraw"].saves_ns == max(1, math.ceil((9216 - 4096) * per_fragment / 10))
    # every other pass: one draw, overdraw 0.25; non-indexed draws shade each vertex once
    others = [n.to_json()["content"] for n in a.graph.nodes if n.work.kind == "render_pass"
              and n.work.label_path not in ("vertex-reuse", "high-overdraw", "empty-pass")]
    assert others and all(o["overdraw"] == 0.25 and o["extra_vertex_invocations"] == 0 for o in others)


@pytest.mark.skipif(not VALIDATION_MANIFEST.exists(), reason="the Khronos validation layer is not installed")
def test_validation_layer_reference(shims, planted) -> None:
    """What the Khronos validation layer's Arm best practices say about the same frame (on lavapipe)."""
    env = {**os.environ, "VK_DRIVER_FILES": lavapipe_manifest(), "VK_INSTANCE_LAYERS": "VK_LAYER_KHRONOS_validation",
           "VK_LAYER_ENABLES": "VK_VALIDATION_FEATURE_ENABLE_BEST_PRACTICES_EXT:"
                               "VALIDATION_CHECK_ENABLE_VENDOR_SPECIFIC_ARM"}
    out = run([PYTHON, APP], env)
    assert out.returncode == 0, out.stderr
    ids = re.findall(r"UNASSIGNED-BestPractices-[\w-]+", out.stderr)
    counts = {i.removeprefix("UNASSIGNED-BestPractices-"): ids.count(i) for i in set(ids)}
    # the Arm checks our findings stand for, each once per planted object
    assert counts["vkCreateImage-non-transient-ms-image"] == 2            # msaa-stored (and the resolved image)
    assert counts["vkCmdResolveImage-resolving-image"] == 1               # resolve-transfer
    assert counts["vkCreateComputePipelines-compute-thread-group-alignment"] == 1     # workgroup-warp-waste
    assert counts["vkCreateRenderPass-image-requires-memory"] == 1       # msaa-stored: the 4x STORE
    assert counts["vkCmdDrawIndexed-post-transform-cache-thrashing"] == 1   # vertex-reuse: the same hit rate
    [rate] = re.findall(r"post-transform vertex cache, with a hit-rate of ([\d.]+)%", out.stderr)
    [draw] = [d for n in planted[1].graph.nodes if n.work.label_path == "vertex-reuse"
              for d in n.to_json()["content"]["draws"]]
    assert rate == f"{100 * draw['unique_vertices'] / draw['shaded_vertices']:.2f}" == "6.67"
    # small-allocations: the layer counts the application's allocations and binds as it does
    [(_, allocations)] = planted[1].graph.allocations
    assert counts["vkAllocateMemory-small-allocation"] == allocations["small"] == 26
    assert counts["vkBindMemory-small-dedicated-allocation"] == allocations["small_dedicated"] == 27
    from tessera.hostd.advice.rules import RULES_BY_ID

    covered = {v.removeprefix("UNASSIGNED-BestPractices-") for r in RULES_BY_ID.values() for v in r.vvl}
    overlap = {"vkCreateImage-non-transient-ms-image", "vkCmdResolveImage-resolving-image",
               "vkCreateComputePipelines-compute-thread-group-alignment", "vkCreateRenderPass-image-requires-memory",
               "vkCmdDrawIndexed-post-transform-cache-thrashing", "vkAllocateMemory-small-allocation",
               "vkBindMemory-small-dedicated-allocation"}
    assert overlap <= covered
    # and what it reports that no rule covers (docs/advice.md says why): the compute shader's spatial
    # locality, ALL_COMMANDS barriers (not an Arm check), the WorkgroupSize built-in; its render-pass
    # load/store checks do not fire on this frame
    assert set(counts) - overlap == {
        "vkCreateComputePipelines-compute-spatial-locality", "pipeline-stage-flags", "SpirvDeprecated_WorkgroupSize"}


EXAMPLES_ALLOWED = {
    # what applies to each example (everything else must stay quiet); every example allocates each buffer
    # and image on its own (vkapp.py, the C example likewise): small-allocations, as the validation layer says
    "render_passes": set(), "shader_costs": set(), "compute_collatz": set(),
    "overdraw": {"overdraw-hotspot"},                           # its 5-deep stack, seen per region (--regions)
    "mlp_tensors": set(), "ray_query": set(), "ray_tracing": set(), "compute_and_draw": set(), "conv_net_graph": set(),
    "debug_labels": {"small-transfers"},                        # two small buffer transfers in its frame
    "transfers": {"small-transfers", "resolve-transfer"},       # four small transfers; a vkCmdResolveImage
}
EXAMPLES_ALLOWED = {name: rules | {"small-allocations"} for name, rules in EXAMPLES_ALLOWED.items()}
# overdraw's page then holds the region heatmaps, shader_costs' the costliest draws with their hot blocks
RUN_OPTIONS = {"overdraw": ["--regions"], "shader_costs": ["--instrument"]}


def test_every_example_is_covered() -> None:
    helpers = {"vkapp", "rt_scene", "vktensors", "vkgraphs"}   # shared modules of the examples, not examples
    examples = {p.stem for p in (REPO / "examples").glob("*.py")} - helpers
    assert set(EXAMPLES_ALLOWED) == examples | {p.stem for p in (REPO / "examples" / "c").glob("*.c")}


def _rendered(page: Path) -> "_Page":
    """The page as headless Chromium renders it (no console message allowed), parsed."""
    r = subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                        "--v=0", "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    assert "CONSOLE" not in r.stderr, r.stderr
    dom = _Page()
    dom.feed(r.stdout)
    return dom


@pytest.mark.parametrize("name", sorted(EXAMPLES_ALLOWED))
def test_examples_get_what_applies(name, shims, tmp_path) -> None:
    program = ([REPO / "build" / "examples" / name] if name == "compute_and_draw"
               else [PYTHON, REPO / "examples" / f"{name}.py"])
    session = tmp_path / name
    out = run([TESSERA, "run", *RUN_OPTIONS.get(name, []), "--out", session, "--", *program], None)
    assert out.returncode == 0, out.stdout + out.stderr
    a = analyse(session)
    assert {f.rule for f in a.findings} == EXAMPLES_ALLOWED[name]
    page = tmp_path / "report.html"
    assert run([TESSERA, "report", session, "--html", page], None).returncode == 0
    if shutil.which("chromium"):
        dom = _rendered(page)
        assert {"summary", "timeline", "render-graph", "advice"} <= dom.ids
        assert dom.tags.get("g", 0) == len(a.graph.nodes)
        assert ("heatmaps" in dom.ids) == (name == "overdraw")
        assert ("costliest-draws" in dom.ids) == (name == "shader_costs")
        if name == "shader_costs":       # 1 dispatch + 2 draws measured, each with its stages' blocks
            assert dom.tags["details"] == 5 and dom.tags["pre"] > 5
    if name == "render_passes":
        # the layer names each attachment's image: every pass's output goes to the copy reading it back
        passes = [n for n in a.graph.nodes if n.work.kind == "render_pass"]
        assert len(passes) == 3 and all(a.resource for n in passes for a in n.accesses)
        for n in passes:
            readers = {a.graph.nodes[r].work.meta.get("subtype") for acc in n.accesses for r in acc.readers}
            assert readers == {"copy image to buffer"}
            assert all(acc.write_bytes == ATTACHMENT for acc in n.accesses)      # every attachment stored
        assert all(e.src is not None for e in a.graph.edges)


def test_content_of_an_example(shims, tmp_path, monkeypatch) -> None:
    """render_passes.py under --content: its classic pass's vkCmdDraw (6 vertices), vkCmdDrawIndexed (the
    example's own 6 indices of one rectangle), vkCmdDrawIndirect (its VkDrawIndirectCommand, 6 vertices x 1
    instance, read back after the submit: layer/indirect.py) and subpass 1's full-screen triangle, numbered
    as the pass's draws; the metrics of the indexed one from its index data read back."""
    import importlib.util

    monkeypatch.syspath_prepend(str(REPO / "examples"))      # the example imports vkapp beside it
    spec = importlib.util.spec_from_file_location("render_passes_example", REPO / "examples" / "render_passes.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    indices = example.geometry()[2]
    session = _session(tmp_path, "render_passes", [PYTHON, REPO / "examples" / "render_passes.py"], ("--content",))
    a = analyse(session)
    classic = next(n for n in a.graph.nodes if n.work.kind == "render_pass")
    c = classic.to_json()["content"]
    assert classic.work.draws == 4 and [d["draw"] for d in c["draws"]] == [0, 1, 2, 3]
    plain, indexed, indirect, triangle = c["draws"]
    assert (indirect["indirect"], indirect["indexed"], indirect["vertices"], indirect["shaded_vertices"]) == (
        True, False, 6, 6)
    assert (plain["indexed"], plain["vertices"], plain["primitives"]) == (False, 6, 2)
    assert (indexed["indexed"], indexed["count"], indexed["primitives"]) == (True, len(indices), len(indices) // 3)
    distinct = len(set(indices.tolist()))
    assert indexed["unique_vertices"] == indexed["shaded_vertices"] == distinct == 4      # fits any cache
    assert indexed["index_span"] == int(indices.max()) - int(indices.min()) + 1
    assert (triangle["vertices"], c["described_draws"]) == (3, 4)
    assert {f.rule for f in a.findings} == EXAMPLES_ALLOWED["render_passes"]


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.tags: dict[str, int] = {}
        self.links: list[str] = []
        self.rules: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        d = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.ids.add(d.get("id", ""))
        self.links += [v for k, v in attrs if k in ("src", "href") and v]
        if "data-rule" in d:
            self.rules.append(d["data-rule"])


def test_report_json_and_html(planted, tmp_path) -> None:
    session, a = planted
    data = json.loads(run([TESSERA, "report", session, "--json"], None).stdout)
    advice = data["advice"]
    assert (advice["schema"], advice["version"]) == ("tessera.advice", 4)
    assert len(advice["findings"]) == len(a.findings) and len(advice["render_graph"]["nodes"]) == len(a.graph.nodes)
    assert advice["findings"][0]["rule"] == "too-many-passes"
    text = run([TESSERA, "report", session, "--top", "3"], None).stdout
    assert "advice: 20 finding(s)" in text and "… and 17 more" in text

    page = tmp_path / "report.html"
    out = run([TESSERA, "report", session, "--html", page], None)
    assert out.returncode == 0 and f"HTML report: {page}" in out.stdout
    html = page.read_text()
    p = _Page()
    p.feed(html)
    assert {"summary", "timeline", "render-graph", "costliest", "advice"} <= p.ids
    assert p.tags["svg"] == 2 and p.tags["g"] == len(a.graph.nodes)      # the timeline, one frame's graph
    assert sorted(p.rules) == sorted(f.rule for f in a.findings)
    assert all(link.startswith(("data:", "#", "url(#")) for link in p.links)     # nothing to fetch
    if shutil.which("chromium"):
        dom = _rendered(page)
        assert dom.ids == p.ids and sorted(dom.rules) == sorted(p.rules)


def test_vkcube_presents_what_each_frame_rendered(shims, tmp_path, xvfb_display) -> None:
    """vkcube (a real swapchain): each frame's FRAME names the image it presented, the one its render
    pass drew into, so every pass's colour write is read by its frame's present and nothing is unread."""
    session = tmp_path / "vkcube"
    env = dict(os.environ, DISPLAY=xvfb_display, XDG_RUNTIME_DIR=str(tmp_path))
    out = subprocess.run([TESSERA, "run", "--out", session, "--", "vkcube", "--c", "4"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    a = analyse(session)
    passes = [n for n in a.graph.nodes if n.work.kind == "render_pass"]
    assert len(passes) == 4 and a.graph.presents_known
    assert [(p.frame, p.writer) for p in a.graph.presents] == [(n.work.frame, n.id) for n in passes]
    for n in passes:
        [colour] = [acc for acc in n.accesses if acc.aspect == "color"]
        assert colour.presented == [n.work.frame] and colour.fate == "read"
        assert colour.resource == a.graph.presents[n.work.frame].image
    assert not {"outputs-unread", "store-unpresented", "store-overwritten"} & {f.rule for f in a.findings}


def test_content_names_what_trace_rays_read_through_descriptors(shims, tmp_path) -> None:
    """ray_tracing.py under --content: each vkCmdTraceRaysKHR writes its storage image (bound in its own
    descriptor set), which a copy then reads back: the layer names the image (resources `storage`), so the
    graph has the edge trace rays -> copy, and the trace rays are no longer opaque. Without --content they
    are opaque and the copies' source has no writer."""
    session = _session(tmp_path, "rt", [PYTHON, REPO / "examples" / "ray_tracing.py"], ("--content",))
    a = analyse(session)
    rays = [n for n in a.graph.nodes if n.work.kind == "trace_rays"]
    copies = [n for n in a.graph.nodes if n.work.meta.get("subtype") == "copy image to buffer"]
    assert len(rays) == len(copies) == 2 and not any(n.work.opaque for n in rays)
    for ray, copy in zip(rays, copies):
        [storage] = ray.accesses
        assert storage.role == "storage" and storage.readers == [copy.id]
        assert (copy.accesses[0].resource, copy.accesses[0].writer) == (storage.resource, ray.id)
    assert {f.rule for f in a.findings} == EXAMPLES_ALLOWED["ray_tracing"]
    plain = analyse(_session(tmp_path, "rt_plain", [PYTHON, REPO / "examples" / "ray_tracing.py"]))
    rays = [n for n in plain.graph.nodes if n.work.kind == "trace_rays"]
    assert all(n.work.opaque and n.accesses == [] for n in rays)


def test_content_mode_keeps_the_c_recorder(shims, tmp_path) -> None:
    """--content sends the layer's draws and binds through Python and records the rest in C: the planted
    app's 17 pass begins (one classic, 16 dynamic), its labels and transfers are C records, its draws and
    index binds are not; the pass ends follow their draws to Python, but for the pass with no draw."""
    out = run([TESSERA, "run", "--content", "--out", tmp_path / "s", "--", PYTHON, APP],
              dict(os.environ, TESSERA_LOG="info"))
    assert out.returncode == 0, out.stderr
    made = records_made_in_c(out.stderr)["layer"]
    assert (made["vkCmdBeginRendering"], made["vkCmdBeginRenderPass"], made["vkCmdDispatch"]) == (16, 1, 1)
    assert made["vkCmdEndRendering"] == 1 and made["vkCmdCopyImageToBuffer"] == 18
    assert not {"vkCmdDraw", "vkCmdDrawIndexed", "vkCmdBindIndexBuffer", "vkCmdEndRenderPass"} & set(made)


def test_overdraw_per_region_and_per_draw(shims, tmp_path, monkeypatch) -> None:
    """overdraw.py: with --regions, the regions its own numpy reference shades more than twice per pixel are
    the hot spot, costed by hand (threads beyond one per pixel x max(fragment cycles, 1/4) / 10 cores); with
    --instrument, each draw's fragment threads are the pixels of its rectangle (the full-screen background
    first: 160 x 100) and add up to the reference's total."""
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    import overdraw as example

    expected = example.fragment_threads()
    a = analyse(_session(tmp_path, "regions", [PYTHON, REPO / "examples" / "overdraw.py"], ("--regions",)))
    [node] = [n for n in a.graph.nodes if n.work.kind == "render_pass"]
    c = node.content()
    got = {(r.row, r.column): (r.threads, r.pixels) for r in c.regions.regions}
    R = example.REGION
    pixels = {(y, x): min(R, example.H - y * R) * min(R, example.W - x * R)
              for y in range(expected.shape[0]) for x in range(expected.shape[1])}
    assert got == {(y, x): (int(expected[y, x]), pixels[y, x]) for (y, x) in pixels}
    hot = [(y, x) for (y, x), p in pixels.items() if expected[y, x] > 2 * p]
    beyond = sum(int(expected[k]) - pixels[k] for k in hot)
    assert (len(hot), beyond) == (5, 14336)
    [f] = [f for f in a.findings if f.rule == "overdraw-hotspot"]
    assert f.saves_ns == math.ceil(beyond * max(c.fragment_cycles, 1 / 4) / 10) and f.node == node.id
    assert node.to_json()["content"]["regions"]["max_overdraw"] == 5.0
    a = analyse(_session(tmp_path, "instrument", [PYTHON, REPO / "examples" / "overdraw.py"], ("--instrument",)))
    [node] = [n for n in a.graph.nodes if n.work.kind == "render_pass"]
    draws = node.to_json()["content"]["draw_overdraw"]
    assert sum(d["fragment_threads"] for d in draws) == int(expected.sum())
    assert draws[0] == {"draw": 0, "fragment_threads": example.W * example.H, "overdraw_share": 1.0}


def test_a_shadow_map_sampled_later_is_an_edge_and_an_unsampled_store_is_unread(shims, tmp_path) -> None:
    """apps/shadow_reads.py under --content: the lit pass's descriptor read of the shadow map is an edge from
    the shadow pass (whose depth store is then read: no depth-store-unread), and the wasted pass's store of a
    sampleable image, overwritten before anything samples it, is unread: store-overwritten, 16384 bytes =
    512 ns, and outputs-unread, its duration. Without --content the passes with draws are opaque: no edge,
    no flag."""
    app = REPO / "tests" / "integration" / "apps" / "shadow_reads.py"
    a = analyse(_session(tmp_path, "content", [PYTHON, app], ("--content",)))
    shadow, wasted, lit = (_work(a, label, "render_pass") for label in ("shadow", "wasted", "lit"))
    [shadow_node] = [n for n in a.graph.nodes if n.work is shadow]
    [lit_node] = [n for n in a.graph.nodes if n.work is lit]
    [depth] = shadow_node.accesses
    assert (depth.aspect, depth.store_op, depth.fate) == ("depth", "store", "read") and lit_node.id in depth.readers
    [read] = [acc for acc in lit_node.accesses if acc.role == "descriptor"]
    assert (read.resource, read.writer) == (depth.resource, shadow_node.id)
    assert any((e.src, e.dst, e.resource) == (shadow_node.id, lit_node.id, depth.resource) for e in a.graph.edges)
    # the set stays bound, but the "again" pass's pipeline layout has no set: it reads nothing through it
    again = next(n for n in a.graph.nodes if n.work.label_path == "again")
    assert [acc.role for acc in again.accesses] == ["attachment"] and depth.readers == [lit_node.id]
    by = {f.rule: f for f in a.findings}
    assert set(by) == {"store-overwritten", "outputs-unread", "small-allocations"}
    assert (by["store-overwritten"].label_path, by["store-overwritten"].saves_bytes, by["store-overwritten"].saves_ns) == (
        "wasted", ATTACHMENT, NS_PER_ATTACHMENT)
    assert (by["outputs-unread"].label_path, by["outputs-unread"].saves_ns) == ("wasted", wasted.duration_ns)
    plain = analyse(_session(tmp_path, "plain", [PYTHON, app]))
    assert all(acc.role != "descriptor" for n in plain.graph.nodes for acc in n.accesses)
    assert {f.rule for f in plain.findings} == {"small-allocations"}

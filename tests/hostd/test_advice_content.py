"""Content metrics per pass (hostd/advice/content.py) and the rules that cost them (vertex-reuse,
high-overdraw, overdraw-hotspot) on hand-built render passes (region grids and instrumented draws too), with the emulated Mali-G720's figures (10 cores, 1000 MHz,
4 pixels per cycle per core): each fires with its cost computed by hand and stays quiet where it should.
"""
from __future__ import annotations

import json
import math

from test_advice_rules import GPU, att, findings, rp

from tessera.hostd.advice.content import DRAW_FRAGMENTS_KEY, REGIONS_KEY, of, region_overdraw
from tessera.hostd.advice.graph import build
from tessera.hostd.advice.rules import MAX_OVERDRAW, MIN_CACHE_HIT_RATE


def indexed(draw=0, count=1920, instances=1, unique=128, shaded=1920, span=128, delta=1.9) -> dict:
    return {"draw": draw, "indexed": True, "count": count, "instances": instances, "primitives": count // 3,
            "unique_vertices": unique, "shaded_vertices": shaded, "index_span": span, "mean_index_delta": delta}


def content_pass(draws: list[dict], vertex_cycles="2.5", threads="4096", fragment_cycles="0.1"):
    w = rp([att()], ["0xa"], draws=len(draws) or 1)
    # as the merge writes them: the layer's list as JSON, the driver's args as text
    w.meta.update({"content": json.dumps(draws), "Vertex cycles": vertex_cycles, "Fragment cycles": fragment_cycles,
                   "MaliFragThread": threads})
    return w


def test_thresholds() -> None:
    assert GPU.pixel_rate == 4 and GPU.shader_cores == 10 and (MIN_CACHE_HIT_RATE, MAX_OVERDRAW) == (0.5, 2.0)


def test_vertex_reuse_fires_with_its_cost() -> None:
    # 2 instances of 1920 indices over 128 vertices, all 1920 shaded: (1920 - 128) x 2 = 3584 extra
    # invocations x 2.5 cycles / 10 cores = 896 cycles = 896 ns at 1000 MHz
    [f] = findings(content_pass([{"draw": 0, "indexed": False, "count": 3, "instances": 1, "primitives": 1,
                                  "unique_vertices": 3, "shaded_vertices": 3, "index_span": 3},
                                 indexed(draw=1, instances=2)]), rule="vertex-reuse")
    assert (f.saves_ns, f.saves_cycles, f.saves_bytes, f.draw, f.node) == (896, 896, 0, 1, 0)
    assert f.to_json()["where"]["draw"] == 1 and "3584 extra vertex shader invocations" in f.what
    assert f.vvl == ("UNASSIGNED-BestPractices-vkCmdDrawIndexed-post-transform-cache-thrashing",)
    # a hit rate of exactly 0.5 is thrashing too (the validation layer's `<= 0.5`): 128 extra x 2.5 / 10
    [f] = findings(content_pass([indexed(unique=128, shaded=256)]), rule="vertex-reuse")
    assert f.saves_ns == math.ceil(128 * 2.5 / 10) == 32


def test_vertex_reuse_quiet() -> None:
    # a hit rate over 0.5, non-indexed draws, indexed draws without index data, passes without content
    assert findings(content_pass([indexed(unique=128, shaded=200)]), rule="vertex-reuse") == []
    assert findings(content_pass([{"draw": 0, "indexed": False, "count": 3000, "instances": 1, "primitives": 1000,
                                   "unique_vertices": 3000, "shaded_vertices": 3000, "index_span": 3000}]),
                    rule="vertex-reuse") == []
    assert findings(content_pass([{"draw": 0, "indexed": True, "count": 6, "instances": 1}]), rule="vertex-reuse") == []
    assert findings(rp([att()], ["0xa"]), rule="vertex-reuse") == []


def test_high_overdraw_fires_with_its_cost() -> None:
    # 64x64 = 4096 pixels, 12288 threads: overdraw 3; 8192 threads beyond one per pixel, each
    # max(0.1 fragment cycles, 1 / 4 pixels per cycle) = 0.25 cycles, over 10 cores: 204.8 -> 205 ns
    [f] = findings(content_pass([], threads="12288"), rule="high-overdraw")
    assert (f.saves_ns, f.saves_cycles, f.severity) == (205, 205, "info") and "overdraw 3.00" in f.what
    # a heavy fragment shader: 8192 x 3 cycles / 10 = 2457.6 -> 2458 ns
    [f] = findings(content_pass([], threads="12288", fragment_cycles="3"), rule="high-overdraw")
    assert f.saves_ns == 2458


def test_high_overdraw_quiet() -> None:
    assert findings(content_pass([], threads="8192"), rule="high-overdraw") == []      # exactly 2.0
    assert findings(rp([att()], ["0xa"]), rule="high-overdraw") == []                   # no counters: unknown


def test_pass_content_json() -> None:
    w = content_pass([indexed(draw=0, instances=2), {"draw": 2, "indexed": False, "count": 3, "instances": 1,
                                                     "primitives": 1, "unique_vertices": 3, "shaded_vertices": 3,
                                                     "index_span": 3}], threads="9216")
    w.index = 0
    node = build([w]).nodes[0]
    got = node.to_json()["content"]
    assert (got["covered_pixels"], got["fragment_threads"], got["overdraw"]) == (4096, 9216, 2.25)
    assert (got["vertex_cycles"], got["fragment_cycles"], got["described_draws"]) == (2.5, 0.1, 2)
    assert (got["primitives"], got["vertices"], got["unique_vertices"], got["shaded_vertices"]) == (
        640 * 2 + 1, 3840 + 3, 256 + 3, 3840 + 3)
    assert got["extra_vertex_invocations"] == 3584 and got["cache_hit_rate"] == round(259 / 3843, 4)
    d = got["draws"][0]
    assert (d["vertex_efficiency"], d["cache_hit_rate"], d["utilisation"]) == (round(128 / 1920, 4), round(128 / 1920, 4), 1.0)
    assert of({"width": 8, "height": 8}).to_json() == {"covered_pixels": 64, "fragment_threads": None, "overdraw": None,
                                                       "vertex_cycles": None, "fragment_cycles": None}


def test_page_lists_each_pass_and_draw() -> None:
    from html.parser import HTMLParser

    from test_advice_html import SUMMARY, _analysis

    from tessera.hostd.advice.html import render

    page = render(_analysis(content_pass([indexed(draw=0), indexed(draw=1, unique=6, shaded=6, count=6)],
                                         threads="12288")), SUMMARY, "t")
    rows: list[str] = []

    class Rows(HTMLParser):
        def handle_starttag(self, tag, attrs) -> None:
            if tag == "tr" and dict(attrs).get("class") in ("pass", "draw"):
                rows.append(dict(attrs)["class"])

    Rows().feed(page)
    assert 'id="content"' in page and rows == ["pass", "draw", "draw"]
    assert ">1792<" in page and ">3.0<" in page            # the first draw's extra invocations; the overdraw


# ---- per region (--regions) and per draw (--instrument) ------------------------------------------------

def regions_payload(grids, area=(0, 0, 64, 64), size=(32, 32), counters=("Fragment threads",)) -> dict:
    """A REGIONS payload: `grids` one per array (subpass 0, 1, ... of layer 0), each rows of columns."""
    return {"device": "0x1", "render_area": list(area), "region_size": list(size),
            "counters": [{"id": 0x1001 + i, "name": n} for i, n in enumerate(counters)],
            "arrays": [{"subpass": i, "layer": 0, "values": [g] * len(counters)} for i, g in enumerate(grids)]}


def region_pass(payload, threads="4096", fragment_cycles="0.1", draws: dict | None = None):
    w = content_pass([], threads=threads, fragment_cycles=fragment_cycles)
    w.meta[REGIONS_KEY] = region_overdraw(payload)
    if draws:
        w.meta[DRAW_FRAGMENTS_KEY] = draws
    return w


def test_region_overdraw_sums_subpasses_over_the_pixels_inside_the_area() -> None:
    """80x40 in 32x32 regions: 3 columns (32, 32, 16 pixels wide), 2 rows (32, 8 high); two subpasses add up."""
    r = region_overdraw(regions_payload([[[2048, 0, 100], [0, 0, 300]], [[1024, 0, 0], [0, 0, 0]]],
                                        area=(5, 7, 80, 40)))
    assert r.size == (32, 32) and [(x.column, x.row, x.threads, x.pixels) for x in r.regions] == [
        (0, 0, 3072, 1024), (1, 0, 0, 1024), (2, 0, 100, 512), (0, 1, 0, 256), (1, 1, 0, 256), (2, 1, 300, 128)]
    assert [(x.column, x.row) for x in r.over(2.0)] == [(0, 0), (2, 1)]            # 3.0 and 300/128 = 2.34
    assert r.to_json()["max_overdraw"] == 3.0 and r.to_json()["hottest"][1]["overdraw"] == round(300 / 128, 4)
    assert region_overdraw(regions_payload([[[1]]], counters=("Killed fragments",))) is None


def test_overdraw_hotspot_fires_with_its_cost() -> None:
    """64x64 (4096 pixels, model overdraw 1.0: high-overdraw is quiet) in four 32x32 regions, one of them
    shaded 5 times: 5120 - 1024 = 4096 threads beyond one per pixel x max(0.1, 1/4) cycles / 10 cores =
    102.4 -> 103 ns; with 3 cycles per fragment 1228.8 -> 1229 ns. Instrumented draws name the heaviest."""
    payload = regions_payload([[[5120, 1024], [2048, 0]]])
    [f] = findings(region_pass(payload), rule="overdraw-hotspot")
    assert (f.saves_ns, f.saves_cycles, f.severity, f.draw) == (103, 103, "info", None)
    assert "1 of 4 regions" in f.what and "5120 fragment threads over 1024 pixels, overdraw 5.00" in f.what
    [f] = findings(region_pass(payload, fragment_cycles="3", draws={0: 4096, 1: 4096, 2: 4096}), rule="overdraw-hotspot")
    assert (f.saves_ns, f.draw) == (1229, 0) and "draw 0 runs the most fragment threads (4096, 1.0 per" in f.what


def test_overdraw_hotspot_quiet() -> None:
    # every region at most 2.0; no region data; the pass-wide model overdraw over the limit (high-overdraw's)
    assert findings(region_pass(regions_payload([[[2048, 2048], [0, 1024]]])), rule="overdraw-hotspot") == []
    assert findings(content_pass([]), rule="overdraw-hotspot") == []
    assert findings(region_pass(regions_payload([[[5120, 0], [0, 0]]]), threads="12288"),
                    rule="overdraw-hotspot") == []


def test_per_draw_overdraw_shares() -> None:
    """--instrument: each draw's fragment threads over the pass's covered pixels, most first; high-overdraw
    names the heaviest draw."""
    w = region_pass(regions_payload([[[0, 0], [0, 0]]]), threads="12288", draws={0: 4096, 1: 8192})
    w.index = 0
    got = build([w]).nodes[0].to_json()["content"]
    assert got["draw_overdraw"] == [{"draw": 1, "fragment_threads": 8192, "overdraw_share": 2.0},
                                    {"draw": 0, "fragment_threads": 4096, "overdraw_share": 1.0}]
    assert got["regions"]["regions"] == 4 and got["regions"]["max_overdraw"] == 0.0
    [f] = findings(w, rule="high-overdraw")
    assert f.draw == 1 and f.saves_ns == 205


def test_page_shows_the_hottest_region_and_the_heaviest_draw() -> None:
    from test_advice_html import SUMMARY, _analysis

    from tessera.hostd.advice.html import render

    page = render(_analysis(region_pass(regions_payload([[[5120, 1024], [2048, 0]]]), draws={0: 1024, 3: 2048})),
                  SUMMARY, "t")
    assert "5.0 (column 0, row 0)" in page and "draw 3: 0.5" in page


def test_indirect_draws_join_the_content_by_their_numbers() -> None:
    """ANNEX `draws` (the indirect arguments read back) numbered among the pass's draws: a non-indexed one
    shades each vertex once (6 vertices x 2 instances), an indexed one has sizes but no index metrics;
    an entry without a number (an older layer) is left out."""
    w = content_pass([indexed(draw=0, count=6, unique=4, shaded=4, span=4)])
    w.meta["draws"] = json.dumps([{"vertex_count": 6, "instance_count": 2, "first_vertex": 0, "first_instance": 0,
                                   "draw": 1},
                                  {"index_count": 30, "instance_count": 1, "first_index": 0, "vertex_offset": 0,
                                   "first_instance": 0, "draw": 2},
                                  {"vertex_count": 3, "instance_count": 1, "first_vertex": 0, "first_instance": 0}])
    w.index = 0
    got = build([w]).nodes[0].to_json()["content"]
    assert [(d["draw"], d["indexed"], d.get("indirect", False)) for d in got["draws"]] == [
        (0, True, False), (1, False, True), (2, True, True)]
    plain, listed = got["draws"][1], got["draws"][2]
    assert (plain["vertices"], plain["primitives"], plain["unique_vertices"], plain["shaded_vertices"]) == (12, 4, 12, 12)
    assert (listed["vertices"], listed["primitives"]) == (30, 10) and "shaded_vertices" not in listed
    assert (got["described_draws"], got["vertices"], got["unique_vertices"], got["shaded_vertices"]) == (3, 18, 16, 16)

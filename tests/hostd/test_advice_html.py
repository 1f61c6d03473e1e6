"""The HTML page of `tessera report --html` (hostd/advice/html.py) from hand-built analyses: the
timeline's layout (idle stretches collapsed), the graph's boxes and curves, escaping, no external link."""
from __future__ import annotations

from html.parser import HTMLParser

from test_advice_rules import GPU, att, rp, xfer

from tessera.hostd.advice import Analysis
from tessera.hostd.advice.graph import Phase, build
from tessera.hostd.advice.html import GAP_PX, frame_svg, render, timeline
from tessera.hostd.advice.rules import advise


def _analysis(*works) -> Analysis:
    for i, w in enumerate(works):
        w.index = i
    graph = build(list(works))
    return Analysis(GPU, graph, advise(graph, GPU))


SUMMARY = {"processes": ["app [1]"], "frames": 1, "submits": 2, "gpu_events": 3, "workloads": {"render_pass": 1},
           "gpu_time_ns": {"fragment": 2000}}


def test_timeline_collapses_idle_stretches() -> None:
    copy = xfer("copy image to buffer", "0xa", "0xb", duration=1000)
    copy.phases = [Phase("copy image", "transfer", 1_000_000, 1000)]       # 997 us after the pass
    t = timeline(_analysis(rp([att()], ["0xa"]), copy))
    assert t["busy_ns"] == 3000 + 1000 and len(t["gaps"]) == 1
    binning, main, transfer = sorted(t["bars"], key=lambda b: b["x"])
    scale = (t["width"] - t["label_w"] - 10 - GAP_PX) / 4000
    assert binning["x"] == t["label_w"] and abs(main["x"] - (t["label_w"] + 1000 * scale)) < 1e-6
    assert abs(transfer["x"] - (t["label_w"] + 3000 * scale + GAP_PX)) < 1e-6     # not 997 us further


def test_graph_layout_and_page() -> None:
    a = _analysis(rp([att("load")], ["0xa"], labels=("<script>alert(1)</script>",)),
                  xfer("copy image to buffer", "0xa", "0xb"))
    f = frame_svg(a.graph, 0)
    assert [b.kind for b in f["boxes"]] == ["render_pass", "image_transfer"]
    assert f["boxes"][0].flagged and not f["boxes"][1].flagged          # loaded what nothing wrote
    assert [c.unwritten for c in f["curves"]] == [True, False]
    page = render(a, SUMMARY, "t & <b>")
    assert "<script>alert" not in page and "&lt;script&gt;" in page and "t &amp; &lt;b&gt;" in page

    class Links(HTMLParser):
        links: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.links += [v for k, v in attrs if k in ("src", "href")]
    p = Links()
    p.feed(page)
    assert p.links == []
    assert page.count('<div class="finding warning"') == len(a.findings) == 1


def test_a_present_is_a_blue_curve_from_the_write_it_showed() -> None:
    """Frame 0 draws 0xs and presents it: one present curve from that pass's box to the right edge, drawn
    with class `present`; a frame whose present shows nothing of its own gets none; every curve's arrow is
    its frame's marker."""
    works = [rp([att("clear", "store")], ["0xs"]), rp([att("clear", "store")], ["0xt"], frame=1)]
    for i, w in enumerate(works):
        w.index = i
    graph = build(works, [(0, ["0xs"]), (1, ["0xs"])])
    f = frame_svg(graph, 0)
    [c] = f["curves"]
    assert c.present and c.label == "present 0xs" and c.path.startswith(
        f"M{f['boxes'][0].x + f['node_w']},")
    assert frame_svg(graph, 1)["curves"] == []
    page = render(Analysis(GPU, graph, advise(graph, GPU)), SUMMARY, "t")
    assert page.count('class="edge present"') == 1 and 'marker-end="url(#arrow-1)"' in page
    assert 'url(#arrow-2)' not in page.split("<h3>Frame 1</h3>")[0]

"""`tessera report SESSION --html FILE`: one self-contained HTML page of a session, readable offline.

Role: lays out what the page draws (coordinates computed here, in Python) and renders it with a Jinja2
template (templates/report.html.j2, autoescaped): the summary, a timeline overview per hardware queue,
the render graph of each frame as inline SVG, the region heatmaps (PNG files of SESSION/regions/
embedded as data: URIs), the costliest workloads, each render pass's content metrics and its draws'
(content.py), for an instrumented session the costliest draws and
dispatches with their hottest basic blocks (the report's shader ranking), and the advice sorted by what
it saves. No script,
no network, no external file: the page works from a mail attachment or a CI artifact.

Why our own layered layout rather than graphviz `dot`: the graph of a frame is a sequence (nodes in the
order the GPU ran them), so a layer per node and a lane per kind of work (render passes, compute,
transfers) is the whole layout; edges are curves from writer to reader. It needs no apt package and
no subprocess, and draws the same picture on every machine (the determinism CI relies on).
"""
from __future__ import annotations

import base64
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import Analysis
from .graph import RENDER_PASS, RenderGraph

LANES = {RENDER_PASS: 0, "dispatch": 1, "trace_rays": 1, "acceleration_structure_build": 1}   # others: transfers
LANE_NAMES = ("render passes", "compute", "transfers")
NODE_W, NODE_H, COL, ROW, MARGIN = 150, 54, 190, 110, 40
TIMELINE_W, TIMELINE_ROW = 900, 26
GAP_PX = 12                 # an idle stretch of the GPU (the host between submits) drawn this wide
TOP_WORKLOADS = 10
TOP_SHADERS = 5             # instrumented sessions: the costliest draws and dispatches shown, with their hot blocks


@dataclass
class Box:
    id: int
    x: int
    y: int
    title: str
    subtitle: str
    kind: str
    flagged: bool
    tooltip: str


@dataclass
class Curve:
    path: str
    label: str
    unwritten: bool
    lx: int
    ly: int
    present: bool = False       # from the write a frame's present showed to the graph's right edge


def _short(handle: str | None) -> str:
    return "?" if not handle else handle[-5:]


def frame_svg(graph: RenderGraph, frame) -> dict[str, Any]:
    """The layout of one frame's render graph: boxes, curves and the canvas size."""
    nodes = [n for n in graph.nodes if n.work.frame == frame]
    column = {n.id: i for i, n in enumerate(nodes)}
    boxes: dict[int, Box] = {}
    for n in nodes:
        w = n.work
        lane = LANES.get(w.kind, 2)
        x, y = MARGIN + column[n.id] * COL, MARGIN + 20 + lane * ROW
        bw = sum(a.read_bytes + a.write_bytes + a.resolve_bytes for a in n.accesses)
        sub = f"{w.duration_ns} ns" + (f", {bw} B" if bw else "")
        tip = "; ".join([w.where(), *(f"{a.role} {a.index if a.role == 'attachment' else ''} {a.format} "
                                         f"{a.load_op}/{a.store_op} in {a.read_bytes} B out "
                                         f"{a.write_bytes + a.resolve_bytes} B" for a in n.accesses), *n.flags])
        title = (w.label_path or w.name)[:24]
        boxes[n.id] = Box(n.id, x, y, title, sub, w.kind, bool(n.flags), tip)
    curves: list[Curve] = []
    for e in graph.edges:
        if e.dst not in boxes:
            continue
        b = boxes[e.dst]
        if e.src in boxes:
            a = boxes[e.src]
            x1, y1, x2, y2 = a.x + NODE_W, a.y + NODE_H // 2, b.x, b.y + NODE_H // 2
            unwritten = False
        else:       # written in an earlier frame, or by nothing in the session
            x1, y1, x2, y2 = b.x - COL // 2 + 10, b.y - 14, b.x, b.y + NODE_H // 2
            unwritten = e.src is None
        mid = (x1 + x2) // 2
        curves.append(Curve(f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}", _short(e.resource), unwritten,
                            mid, (y1 + y2) // 2 - 4))
    width = MARGIN * 2 + max(1, len(nodes)) * COL
    for p in graph.presents:
        if p.frame == frame and p.writer in boxes:
            a = boxes[p.writer]
            x1, y1, x2, y2 = a.x + NODE_W, a.y + NODE_H // 2, width - MARGIN // 2, MARGIN + 6
            mid = (x1 + x2) // 2
            curves.append(Curve(f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}", f"present {_short(p.image)}", False,
                                mid, (y1 + y2) // 2 - 4, present=True))
    return {"frame": frame, "boxes": list(boxes.values()), "curves": curves, "width": width,
            "height": MARGIN * 2 + 20 + 3 * ROW, "lanes": [(MARGIN // 4, MARGIN + 20 + i * ROW - 6, name)
                                                          for i, name in enumerate(LANE_NAMES)],
            "node_w": NODE_W, "node_h": NODE_H}


def _busy(phases) -> list[list[int]]:
    """The stretches in which some queue is busy, in order, merged."""
    spans: list[list[int]] = []
    for p in sorted(phases, key=lambda p: p.start_ns):
        if spans and p.start_ns <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], p.end_ns)
        else:
            spans.append([p.start_ns, p.end_ns])
    return spans


def timeline(analysis: Analysis) -> dict[str, Any]:
    """Every GPU phase as a bar on its hardware queue's row. Busy stretches share the width in
    proportion to their length; the idle stretches between them (the host between submits) are
    drawn GAP_PX wide each, marked by a dashed line."""
    phases = [(p, n.work) for n in analysis.graph.nodes for p in n.work.phases]
    if not phases:
        return {"rows": [], "bars": [], "gaps": [], "width": TIMELINE_W, "height": TIMELINE_ROW, "busy_ns": 0,
                "label_w": 110}
    spans = _busy(p for p, _ in phases)
    busy = max(1, sum(b - a for a, b in spans))
    queues = sorted({p.queue for p, _ in phases})
    label_w = 110
    scale = (TIMELINE_W - label_w - 10 - GAP_PX * (len(spans) - 1)) / busy
    offsets, x = [], float(label_w)
    for a, b in spans:                       # each span's left edge on the page
        offsets.append(x)
        x += (b - a) * scale + GAP_PX

    def at(t: int) -> float:
        i = max(k for k, (a, _) in enumerate(spans) if a <= t)
        return offsets[i] + (t - spans[i][0]) * scale

    t0 = spans[0][0]
    bars = [{"x": at(p.start_ns), "y": queues.index(p.queue) * TIMELINE_ROW + 4,
             "w": max(1.0, p.duration_ns * scale), "h": TIMELINE_ROW - 8, "kind": w.kind,
             "tip": f"{w.where()}: {p.stage} {p.duration_ns} ns at +{p.start_ns - t0} ns"} for p, w in phases]
    gaps = [offsets[i] - GAP_PX / 2 for i in range(1, len(spans))]
    return {"rows": [(q, i * TIMELINE_ROW + TIMELINE_ROW // 2 + 4) for i, q in enumerate(queues)], "bars": bars,
            "gaps": gaps, "width": TIMELINE_W, "height": len(queues) * TIMELINE_ROW, "busy_ns": busy,
            "label_w": label_w}


def heatmaps(folder: Path) -> list[dict[str, str]]:
    """The region heatmaps of a session (SESSION/regions/*.png) as data: URIs."""
    if not folder.is_dir():
        return []
    return [{"name": p.name, "uri": "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode("ascii")}
            for p in sorted(folder.glob("*.png"))]


@functools.cache
def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("tessera.hostd.advice", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


def render(analysis: Analysis, summary: dict[str, Any], title: str, regions_folder: Path | None = None) -> str:
    """The page's HTML text."""
    nodes = sorted(analysis.graph.nodes, key=lambda n: -n.work.duration_ns)[:TOP_WORKLOADS]
    return _environment().get_template("report.html.j2").render(
        title=title, summary=summary, gpu=analysis.gpu, findings=analysis.findings,
        saves_ns=sum(f.saves_ns for f in analysis.findings), timeline=timeline(analysis),
        frames=[frame_svg(analysis.graph, f) for f in analysis.graph.frames()],
        costliest=nodes, heatmaps=heatmaps(regions_folder) if regions_folder else [], top_shaders=TOP_SHADERS,
        problems=analysis.problems, content=[(n, n.content().to_json()) for n in analysis.graph.nodes
                                             if n.work.kind == RENDER_PASS])

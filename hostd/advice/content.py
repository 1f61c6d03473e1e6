"""Content metrics per draw and per render pass (#28): vertex shading, index locality, overdraw.

Role: `of(work)` reads what a render pass workload carries (graph.Work.meta, the merged slice args)
into a `PassContent`: its draws' content as the layer described them (`content`, tessera run
--content: layer/content.py computes each indexed draw's unique and shaded vertices from its real
index data, with the post-transform cache model documented there) and what the driver wrote on its
GPU slices: the fragment threads of its main phase (`MaliFragThread`, docs/counters.md), the
shader-core cycles per vertex and per fragment the timing used (`Vertex cycles`, `Fragment
cycles`: the compiler model's, or measured ones). Pure data in, pure data out; the rules
(rules.py `vertex_reuse`, `high_overdraw`) cost it. Single-threaded.

Per draw (per instance as the layer sends them, totals × instances):
  vertices = index (or vertex) count, shaded = the cache model's vertex shader invocations,
  unique = distinct indices, vertex-shading efficiency = unique / vertices, cache hit rate =
  unique / shaded (the Khronos validation layer's measure), utilisation = unique / index span,
  extra invocations = shaded − unique.
Per pass: the sums over its described draws; covered pixels = the render area (width × height ×
layers: every pixel a draw can cover; the model's fragments are spread over the whole area),
overdraw = fragment threads / covered pixels.

Per region (`tessera run --regions`, `attach`): the REGIONS message's "Fragment threads" counter
(VK_ARM_performance_counters_by_region, counted by the backend's real execution, docs/regions.md)
per region of each layer, summed over the pass's subpasses, over the region's pixels inside the
render area (the right and bottom regions may be partial): overdraw per region.
Per draw (`tessera run --instrument`, `attach`): the fragment stage's invocations of each draw (its
entry block's executions, hostd/shaders.py) — its fragment threads — and its share of the pass's
overdraw, fragment threads / covered pixels (the draws' shares add up to the pass's overdraw as
measured).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

FRAGMENT_THREADS = "MaliFragThread"
REGION_COUNTER = "Fragment threads"      # docs/regions.md: counter 0x1001
TOP_REGIONS = 8                          # the hottest regions a pass's JSON lists
REGIONS_KEY = "_regions"                 # Work.meta keys `attach` fills (not slice args)
DRAW_FRAGMENTS_KEY = "_draw_fragment_threads"
VERTEX_CYCLES = "Vertex cycles"          # schemas/slice_args.py VERTEX_CYCLES.label
FRAGMENT_CYCLES = "Fragment cycles"      # schemas/slice_args.py FRAGMENT_CYCLES.label


@dataclass
class DrawContent:
    draw: int                     # its number among the pass's draws
    indexed: bool
    count: int                    # vertex or index count, per instance
    instances: int
    primitives: int = 0           # per instance
    unique: int | None = None     # per instance; None: not known (index data not read)
    shaded: int | None = None
    span: int | None = None
    mean_delta: float | None = None
    cache_entries: int | None = None   # the layer's post-transform cache model's size (layer/content.py)
    indirect: bool = False        # sizes from its indirect arguments, read after the submit (layer/indirect.py)

    @property
    def vertices(self) -> int:
        return self.count * self.instances

    @property
    def extra(self) -> int:
        """Vertex shader invocations beyond one per distinct vertex, all instances."""
        return (self.shaded - self.unique) * self.instances if self.shaded is not None and self.unique is not None else 0

    @property
    def hit_rate(self) -> float | None:
        return self.unique / self.shaded if self.shaded and self.unique is not None else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"draw": self.draw, "indexed": self.indexed, "count": self.count,
                               "instances": self.instances, "primitives": self.primitives * self.instances,
                               "vertices": self.vertices}
        if self.indirect:
            out["indirect"] = True
        if self.shaded is not None and self.unique is not None:
            out.update(unique_vertices=self.unique * self.instances, shaded_vertices=self.shaded * self.instances,
                       extra_vertex_invocations=self.extra,
                       vertex_efficiency=_ratio(self.unique, self.count), cache_hit_rate=_ratio(self.unique, self.shaded),
                       index_span=self.span, utilisation=_ratio(self.unique, self.span or 0),
                       mean_index_delta=self.mean_delta)
            if self.cache_entries is not None:
                out["cache_entries"] = self.cache_entries
        return out


@dataclass
class Region:
    layer: int
    column: int
    row: int
    threads: int                  # fragment threads, every subpass of the layer
    pixels: int                   # the region's pixels inside the render area

    @property
    def overdraw(self) -> float:
        return self.threads / self.pixels if self.pixels else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "column": self.column, "row": self.row, "fragment_threads": self.threads,
                "pixels": self.pixels, "overdraw": round(self.overdraw, 4)}


@dataclass
class RegionOverdraw:
    """Fragment threads per region of one pass instance (its REGIONS message)."""
    size: tuple[int, int]
    regions: list[Region]

    def hottest(self, n: int = TOP_REGIONS) -> list[Region]:
        """The `n` regions of most overdraw, the first in (layer, row, column) order first on ties."""
        ordered = sorted(self.regions, key=lambda r: (r.layer, r.row, r.column))
        return sorted(ordered, key=lambda r: -r.overdraw)[:n]

    def over(self, limit: float) -> list[Region]:
        return [r for r in self.regions if r.pixels and r.threads > limit * r.pixels]

    def to_json(self) -> dict[str, Any]:
        top = self.hottest()
        return {"region_size": list(self.size), "regions": len(self.regions),
                "max_overdraw": round(top[0].overdraw, 4) if top else None,
                "hottest": [r.to_json() for r in top]}


def region_overdraw(payload: dict[str, Any]) -> RegionOverdraw | None:
    """The per-region overdraw of a REGIONS payload (schemas/json/regions.schema.json), None when it
    has no "Fragment threads" counter."""
    names = [c.get("name") for c in payload.get("counters", [])]
    if REGION_COUNTER not in names:
        return None
    k = names.index(REGION_COUNTER)
    _, _, width, height = (int(v) for v in payload["render_area"])
    rw, rh = (int(v) for v in payload["region_size"])
    cells: dict[tuple[int, int, int], int] = {}
    for array in payload.get("arrays", []):
        values = array["values"]
        if k >= len(values):
            continue
        for row, line in enumerate(values[k]):
            for column, v in enumerate(line):
                key = (int(array["layer"]), row, column)
                cells[key] = cells.get(key, 0) + int(v)
    regions = []
    for (layer, row, column), threads in sorted(cells.items()):
        w = max(0, min(rw, width - column * rw))
        h = max(0, min(rh, height - row * rh))
        regions.append(Region(layer, column, row, threads, w * h))
    return RegionOverdraw((rw, rh), regions)


@dataclass
class PassContent:
    covered_pixels: int
    fragment_threads: int | None
    vertex_cycles: float | None
    fragment_cycles: float | None
    draws: list[DrawContent] = field(default_factory=list)
    regions: RegionOverdraw | None = None               # --regions
    draw_fragments: dict[int, int] = field(default_factory=dict)   # --instrument: draw -> fragment threads

    def draw_overdraw(self) -> list[dict[str, Any]]:
        """Each instrumented draw's fragment threads and its share of the pass's overdraw, most first."""
        return [{"draw": d, "fragment_threads": n,
                 "overdraw_share": round(n / self.covered_pixels, 4) if self.covered_pixels else None}
                for d, n in sorted(self.draw_fragments.items(), key=lambda kv: (-kv[1], kv[0]))]

    @property
    def overdraw(self) -> float | None:
        if self.fragment_threads is None or self.covered_pixels <= 0:
            return None
        return self.fragment_threads / self.covered_pixels

    def to_json(self) -> dict[str, Any]:
        described = [d for d in self.draws if d.shaded is not None and d.unique is not None]
        out: dict[str, Any] = {"covered_pixels": self.covered_pixels, "fragment_threads": self.fragment_threads,
                               "overdraw": None if self.overdraw is None else round(self.overdraw, 4),
                               "vertex_cycles": self.vertex_cycles, "fragment_cycles": self.fragment_cycles}
        if self.draws:
            vertices = sum(d.vertices for d in described)
            unique = sum(d.unique * d.instances for d in described)
            shaded = sum(d.shaded * d.instances for d in described)
            out.update(described_draws=len(self.draws), primitives=sum(d.primitives * d.instances for d in self.draws),
                       vertices=vertices, unique_vertices=unique, shaded_vertices=shaded,
                       extra_vertex_invocations=shaded - unique, vertex_efficiency=_ratio(unique, vertices),
                       cache_hit_rate=_ratio(unique, shaded), draws=[d.to_json() for d in self.draws])
        if self.regions is not None:
            out["regions"] = self.regions.to_json()
        if self.draw_fragments:
            out["draw_overdraw"] = self.draw_overdraw()
        return out


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def of(meta: dict[str, Any]) -> PassContent:
    """The content of a render pass from its workload's metadata (graph.Work.meta)."""
    area = int(meta.get("width") or 0) * int(meta.get("height") or 0) * max(1, int(meta.get("layers") or 1))
    threads = _number(meta.get(FRAGMENT_THREADS))
    out = PassContent(area, None if threads is None else int(threads), _number(meta.get(VERTEX_CYCLES)),
                      _number(meta.get(FRAGMENT_CYCLES)), regions=meta.get(REGIONS_KEY),
                      draw_fragments=dict(meta.get(DRAW_FRAGMENTS_KEY) or {}))
    listed = meta.get("content")
    if isinstance(listed, str):
        try:
            listed = json.loads(listed)
        except ValueError:
            listed = None
    for d in listed if isinstance(listed, list) else ():
        if not isinstance(d, dict):
            continue
        out.draws.append(DrawContent(int(d.get("draw", 0)), bool(d.get("indexed")), int(d.get("count", 0)),
                                     int(d.get("instances", 1)), int(d.get("primitives", 0)),
                                     d.get("unique_vertices"), d.get("shaded_vertices"), d.get("index_span"),
                                     d.get("mean_index_delta"), d.get("cache_entries")))
    out.draws += _indirect_draws(meta.get("draws"))
    out.draws.sort(key=lambda d: d.draw)
    return out


def _indirect_draws(listed: Any) -> list[DrawContent]:
    """The indirect draws whose arguments the layer read back (ANNEX `draws`, numbered among the pass's
    draws since protocol 4): a non-indexed one shades each vertex once, an indexed one's index data was
    not read (its range was in GPU memory when the pass ended): no vertex-reuse metrics."""
    if isinstance(listed, str):
        try:
            listed = json.loads(listed)
        except ValueError:
            return []
    out = []
    for d in listed if isinstance(listed, list) else ():
        if not isinstance(d, dict) or not isinstance(d.get("draw"), int):
            continue
        indexed = "index_count" in d
        count = int(d.get("index_count" if indexed else "vertex_count") or 0)
        entry = DrawContent(d["draw"], indexed, count, int(d.get("instance_count") or 0), count // 3, indirect=True)
        if not indexed:
            entry.unique = entry.shaded = entry.span = count
        out.append(entry)
    return out


def attach(graph, index) -> None:
    """Give each render-pass node what the session's logs hold beyond the merged trace: its REGIONS
    (--regions) as a RegionOverdraw, its draws' fragment threads (--instrument). `index`: the session's
    metadata (hostd/metadata.py; None for a merged trace read alone: nothing to attach). A workload's
    process is found by name; a name two processes share is left out (their tags and submits collide)."""
    if index is None:
        return
    from ..metadata import loads
    from ..shaders import ShaderIndex

    by_name: dict[str, list] = {}
    for proc in index.processes.values():
        by_name.setdefault(proc.process, []).append(proc)
    shader_index: dict[int, ShaderIndex] = {}
    for node in graph.nodes:
        w = node.work
        if w.kind != "render_pass" or w.tag is None:
            continue
        procs = by_name.get(w.process) or (list(index.processes.values()) if len(index.processes) == 1 else [])
        if len(procs) != 1:
            continue
        proc = procs[0]
        submits = [w.submit] if w.submit is not None else sorted(s for s, t in proc.regions if t == w.tag)
        body = next((proc.regions[(s, w.tag)] for s in submits if (s, w.tag) in proc.regions), None)
        if body is not None:
            try:
                w.meta[REGIONS_KEY] = region_overdraw(loads(body.decode("utf-8")))
            except (KeyError, TypeError, ValueError):
                pass
        si = shader_index.setdefault(proc.pid, ShaderIndex(proc))
        submit = si.submit_for(w.tag, w.submit)
        if submit is None:
            continue
        fragments: dict[int, int] = {}
        for action in si.actions(submit, w.tag):
            if action.draw is None:
                continue
            n = sum(s.invocations for s in action.stages if s.stage == "fragment")
            fragments[action.draw] = fragments.get(action.draw, 0) + n
        if fragments:
            w.meta[DRAW_FRAGMENTS_KEY] = fragments

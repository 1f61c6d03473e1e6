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
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

FRAGMENT_THREADS = "MaliFragThread"
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
class PassContent:
    covered_pixels: int
    fragment_threads: int | None
    vertex_cycles: float | None
    fragment_cycles: float | None
    draws: list[DrawContent] = field(default_factory=list)

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
                      _number(meta.get(FRAGMENT_CYCLES)))
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
    return out

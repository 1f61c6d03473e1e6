"""Frame analysis and advice (#28): the render graph of a session and what to change in it.

Role: `analyse(target)` reads a session folder or merged trace (hostd/ci/runs.py, the report's
reader), builds its render graph (graph.py), costs it on the emulated GPU it ran on (gpu.py) and
runs the advice rules (rules.py). `Analysis.to_json()` is what `tessera report --json` carries under
`advice` (versioned: ADVICE_SCHEMA, docs/advice.md); html.py draws it for `tessera report --html`.
Single-threaded, no state outside one call.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .gpu import Gpu
from .graph import RenderGraph
from .rules import SCHEMA_VERSION, Finding

ADVICE_SCHEMA = "tessera.advice"


@dataclass
class Analysis:
    gpu: Gpu
    graph: RenderGraph
    findings: list[Finding]
    run: Any = None                 # the hostd.ci.runs.Run read
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"schema": ADVICE_SCHEMA, "version": SCHEMA_VERSION, "gpu": self.gpu.to_json(),
                "render_graph": self.graph.to_json(), "findings": [f.to_json() for f in self.findings],
                "saves_ns": sum(f.saves_ns for f in self.findings)}


def analyse(target: Path, gpu: Gpu | None = None) -> Analysis:
    """The render graph and advice of a session folder or merged trace (hostd.ci.runs.RunError when
    it cannot be read)."""
    from ..ci.runs import read_run
    from .gpu import device_name, emulated, session_devices, session_metadata, session_presents
    from .content import attach
    from .graph import build, works_from_run
    from .rules import advise

    run = read_run(Path(target))
    index = session_metadata(Path(target))
    devices = session_devices(Path(target), index)
    if gpu is None:
        gpu = emulated(device_name(devices))
    graph = build(works_from_run(run), session_presents(index))
    attach(graph, index)
    graph.allocations = [(str(d.get("name", "?")), d["allocations"]) for d in devices
                         if isinstance(d.get("allocations"), dict)]
    return Analysis(gpu, graph, advise(graph, gpu), run, list(run.problems))

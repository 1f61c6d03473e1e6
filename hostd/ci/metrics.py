"""The Mali counters and the advice of a runs.Run, as `tessera check`, `diff` and `export` read them.

Role: `run_counters(run)` gives every workload's, frame's and the session's counters from what
runs.read_run already read (no second parse): each GPU event's `Mali…` args (the driver's
per-phase counters, docs/counters.md) become hostd/counters.py `Phase`s and are summed by
`counters.aggregate` (busy cycles the union of the phases, derived counters by Arm's equations),
the same function `tessera counters` sums with, on the GPU the trace's counter descriptor names
(`Run.counter_gpu`). A workload is runs.Workload (matched by identity); frames and the session count
the application's work only (the tool's own copies apart, as for GPU time), frames by the
submit's FRAME number (runs.py). Bandwidth is external bytes read + written
(MaliExtBusRdBy + MaliExtBusWrBy).

`run_advice(target)` is the advisor's analysis of the session (hostd/advice `analyse`, what
`tessera report --json` carries), and `finding_keys` gives each finding an identity that holds
between runs (rule, frame, label path, kind, attachment, order), for diff. Pure functions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .runs import Run, Workload

BANDWIDTH = ("MaliExtBusRdBy", "MaliExtBusWrBy")
PREFIX = "Mali"                      # every counter arg (schemas/slice_args.py COUNTER)


class NoCounters(Exception):
    """The session carries no GPU counters (one line, for the command)."""


@dataclass
class RunCounters:
    gpu: str                                                # Arm's GPU name (Mali-G720)
    units: dict[str, str]
    workloads: dict[int, dict[str, float]] = field(default_factory=dict)     # id(runs.Workload) -> counters
    frames: dict[int | None, dict[str, float]] = field(default_factory=dict)
    session: dict[str, float] = field(default_factory=dict)

    def of(self, w: Workload) -> dict[str, float]:
        return self.workloads.get(id(w), {})

    def has(self, name: str) -> bool:
        return name in self.units


def bandwidth(counters: dict[str, float]) -> float | None:
    """External bytes read + written; None when neither counter has a value."""
    values = [counters[n] for n in BANDWIDTH if n in counters]
    return sum(values) if values else None


def counter_names() -> dict[str, str]:
    """Every counter an emulated GPU shows (name -> units): what a budget may name."""
    from tessera.schemas import counters as C

    out: dict[str, str] = {}
    for gpu in C.ARM_GPUS.values():
        for c in C.for_gpu(gpu).shown():
            out.setdefault(c.name, c.units)
    return out


def run_counters(run: Run) -> RunCounters:
    """Counters per workload, frame and session of `run` (NoCounters when its trace has none)."""
    from tessera.schemas import counters as C

    from ..counters import Phase, aggregate

    if run.counter_gpu is None:
        raise NoCounters(f"{run.source}: no GPU counters in the trace (a session run with TESSERA_COUNTERS=0, "
                         "or not by Tessera's driver)")
    gpu = C.for_gpu(run.counter_gpu)
    config = gpu.config(0)
    phases: dict[int, list[Phase]] = {}
    owner: dict[int, Workload] = {}
    for (_, ts, w), e in zip(run.placed, run.events):
        values = {}
        for k, v in e["args"].items():
            if k.startswith(PREFIX):
                try:
                    values[k] = float(v)
                except ValueError:
                    continue
        if values:
            phases.setdefault(id(w), []).append(Phase(ts, e["duration_ns"], e["stage"], values))
            owner[id(w)] = w
    out = RunCounters(run.counter_gpu, {c.name: c.units for c in gpu.shown()})
    per_frame: dict[int | None, list[Phase]] = {}
    for key, ps in phases.items():
        out.workloads[key] = aggregate(gpu, ps, config)
        w = owner[key]
        if not w.internal:
            per_frame.setdefault(w.frame, []).extend(ps)
    for frame in sorted(per_frame, key=lambda f: (f is None, f or 0)):
        out.frames[frame] = aggregate(gpu, per_frame[frame], config)
    everything = [p for ps in per_frame.values() for p in ps]
    out.session = aggregate(gpu, everything, config) if everything else {}
    return out


# ---- advice ------------------------------------------------------------------------------------
def run_advice(target: Path):
    """The advisor's Analysis of a session folder or merged trace (hostd/advice analyse: the
    findings `tessera report` gives)."""
    from ..advice import analyse

    return analyse(Path(target))


def finding_keys(findings: list) -> list[tuple]:
    """Each finding's identity between runs: (rule, frame, label path, kind, attachment, draw,
    order among findings of those six, in GPU order). Tags, nodes and handles are not part of it."""
    order = sorted(range(len(findings)),
                   key=lambda i: (findings[i].node if findings[i].node is not None else -1, i))
    counts: dict[tuple, int] = {}
    keys: list[tuple] = [()] * len(findings)
    for i in order:
        f = findings[i]
        k = (f.rule, f.frame, f.label_path, f.kind, f.attachment, getattr(f, "draw", None))
        keys[i] = (*k, counts.get(k, 0))
        counts[k] = counts.get(k, 0) + 1
    return keys


def finding_json(f) -> dict[str, Any]:
    return {"rule": f.rule, "severity": f.severity, "frame": f.frame, "workload": f.workload,
            "label_path": f.label_path, "kind": f.kind, "draw": getattr(f, "draw", None), "what": f.what,
            "saves_ns": f.saves_ns, "saves_bytes": f.saves_bytes}

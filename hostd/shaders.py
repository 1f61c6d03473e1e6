"""Shader cost from `tessera run --instrument`: the GPU slices' args and the report's ranking.

Role: pure functions over the metadata index (metadata.py keeps INSTRUMENTATION and SHADER
payloads as JSON bytes; they are decoded here, on use). No state outside one call but the
small caches a `ShaderIndex` keeps for one merge or report.

Units (docs/hostd.md "Shader cost"): every pipe value is thread-operations, the emulated
driver's compiler-model cost of a basic block on that pipe times the block's measured thread
executions (VK_ARM_shader_instrumentation in icd/instrumentation/). A workload's total is
FMA + CVT + SFU + LS + TEX + VAR over its actions and stages. Thread-operations are not cycles:
the pipes differ in width (a Mali-G720 core does 128 FMA but 8 texture thread-operations per
clock in the compiler model), so the pipe with the largest total is named "largest pipe", not
"bound pipe". When the DEVICE message carries `pipe_rates` (thread-operations per core per clock
of each pipe; the layer sends them under --instrument from the compiler model's table of the GPU,
tessera.compiler.costs, the one source of the rates and of the per-block costs), cycles =
thread-operations / rate and the pipe with the most cycles is the "bound pipe".

Invocations of a stage: the executions of its entry block, the first block of the function the
SHADER message names like the entry point (block 0 when the SHADER is missing or names none):
every invocation runs it exactly once.

Which INSTRUMENTATION a GPU slice gets: the one of its submitID.tagID (the `s<M>` label of its
label stack). A slice without an `s<M>` label ran in a submit the layer did not wrap, which for
a tag is its command buffer's first submit (later ones are wrapped because the tags repeat): the
INSTRUMENTATION of that tag from a submit whose SUBMIT says `"annexed": false` (or has no
SUBMIT), the lowest submitID first.

Payloads reach here only when they satisfy their schema (fields it does not declare allowed:
metadata.py skips and lists the others), so shapes and bounds are known; values that are odd
but valid (a block listed twice, totals that disagree with the blocks) are used as they are.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from tessera.schemas.labels import tag_label

from .metadata import MetadataIndex, ProcessMeta, loads
from .naming import app_labels, slice_name

PIPES = ("fma", "cvt", "sfu", "ls", "tex", "var")          # the order of a block row's metrics
PIPE_NAMES = {p: p.upper() for p in PIPES}
TOP_DRAWS = 5                                               # most expensive draws listed on a render pass
MAX_TEXT_LINES = 12                                         # disassembly lines per block in the text report
RANKED_BY = ("total thread-operations (FMA+CVT+SFU+LS+TEX+VAR over all stages of the draw or dispatch; "
             "thread-operations are not cycles: the pipes differ in width)")
RANKED_BY_SLICE = ("total thread-operations (FMA+CVT+SFU+LS+TEX+VAR over all draws, dispatches and stages of "
                   "the GPU slice; thread-operations are not cycles: the pipes differ in width)")
UNIT = "thread-operations per Mali pipe (compiler-model cost per block execution x measured executions)"

# extra_data names of an instrumented GPU slice
OPS_KEY = "Shader thread-ops"
PIPE_KEYS = {p: f"Shader {PIPE_NAMES[p]}" for p in PIPES}
INVOCATIONS_KEY = "Shader invocations ({stage})"
LARGEST_KEY = "Shader largest pipe"
BOUND_KEY = "Shader bound pipe"
TOP_DRAW_KEY = "Shader top draw {n}"
ACTIONS_KEY = "Shader actions"


def _ops(values: dict[str, int]) -> int:
    return sum(values[p] for p in PIPES)


def pipe_rates(device: dict[str, Any] | None) -> dict[str, float] | None:
    """The DEVICE's `pipe_rates` when it names a positive number for every pipe, else None."""
    rates = device.get("pipe_rates") if isinstance(device, dict) else None
    if not isinstance(rates, dict):
        return None
    out = {}
    for p in PIPES:
        v = rates.get(p)
        if type(v) not in (int, float) or not 0 < v < float("inf"):
            return None
        out[p] = float(v)
    return out


def largest(totals: dict[str, int], rates: dict[str, float] | None = None) -> str | None:
    """The pipe with the most thread-operations (or cycles, with `rates`), first in PIPES on a
    tie; None when every value is 0."""
    best, value = None, 0.0
    for p in PIPES:
        v = totals[p] / rates[p] if rates else totals[p]
        if v > value:
            best, value = p, v
    return best


@dataclass
class StageCost:
    stage: str
    totals: dict[str, int]       # the PIPES and threads (block executions)
    invocations: int
    rows: list[list[int]]        # executed blocks, [index, executions, fma, cvt, sfu, ls, tex, var]
    entry: str | None = None     # the entry point, from SHADER


@dataclass
class ActionCost:
    submit: int
    tag: int
    result_index: int
    command: str | None
    draw: int | None
    pipeline: str | None
    device: str
    stages: list[StageCost]
    order: int                   # load order of its INSTRUMENTATION (which SHADER applies)

    @property
    def totals(self) -> dict[str, int]:
        out = dict.fromkeys((*PIPES, "threads"), 0)
        for s in self.stages:
            for k in out:
                out[k] += s.totals[k]
        return out

    @property
    def ops(self) -> int:
        return sum(_ops(s.totals) for s in self.stages)


class ShaderIndex:
    """One process's INSTRUMENTATION and SHADER payloads, decoded on demand (caches per call site)."""

    def __init__(self, proc: ProcessMeta) -> None:
        self.proc = proc
        self._shaders: dict[tuple[str, str, str, int], dict[str, Any] | None] = {}

    def submit_for(self, tag: int, submit: int | None) -> int | None:
        """The submitID whose INSTRUMENTATION a slice of `tag` gets (module docstring)."""
        if submit is not None:
            return submit if (submit, tag) in self.proc.instrumentation else None
        for sid in sorted(self.proc.instrumented.get(tag, ())):
            if self.proc.submits.get(sid, {}).get("annexed") is not True:
                return sid
        return None

    def actions(self, submit: int, tag: int) -> list[ActionCost]:
        out = []
        for order, body in self.proc.instrumentation.get((submit, tag), ()):
            payload = loads(body.decode("utf-8"))
            device = payload["device"]
            for a in payload["actions"]:
                pipeline = a.get("pipeline")
                stages = []
                for s in a["stages"]:
                    shader = self.shader(device, pipeline, s["stage"], order) if pipeline else None
                    entry = _entry_block(shader)
                    rows = s["blocks"]
                    invocations = sum(r[1] for r in rows if r[0] == entry)
                    stages.append(StageCost(s["stage"], {k: s["totals"][k] for k in (*PIPES, "threads")},
                                            invocations, rows, shader.get("entry") if shader else None))
                out.append(ActionCost(submit, tag, a["result_index"], a.get("command"), a.get("draw"), pipeline,
                                      device, stages, order))
        return out

    def shader(self, device: str, pipeline: str, stage: str, order: int) -> dict[str, Any] | None:
        """The SHADER of (device, pipeline, stage) current when the INSTRUMENTATION loaded at
        `order` was sent: the last one before it (a pipeline address can be reused), else the
        first one (a spool read after the log)."""
        key = (device, pipeline, stage, order)
        if key in self._shaders:
            return self._shaders[key]
        versions = self.proc.shaders.get((device, pipeline, stage))
        shader = None
        if versions:
            before = [body for o, body in versions if o < order]
            shader = loads((before[-1] if before else versions[0][1]).decode("utf-8"))
        if len(self._shaders) < 4096:
            self._shaders[key] = shader
        return shader


def _entry_block(shader: dict[str, Any] | None) -> int:
    if shader:
        entry = shader.get("entry")
        indices = [b["index"] for b in shader["blocks"] if b.get("function") == entry]
        if indices:
            return min(indices)
    return 0


# ---- the merge: args of one instrumented GPU slice ---------------------------------------
def slice_args(index: ShaderIndex, tag: int, submit: int | None) -> list[tuple[str, str]]:
    """The extra_data entries of the GPU slice of `tag` (empty when it has no INSTRUMENTATION):
    workload totals, invocations per stage, the largest (or bound) pipe, and for a render pass
    its most expensive draws."""
    sid = index.submit_for(tag, submit)
    if sid is None:
        return []
    actions = index.actions(sid, tag)
    if not actions:
        return []
    totals = dict.fromkeys(PIPES, 0)
    invocations: dict[str, int] = {}
    for a in actions:
        for s in a.stages:
            for p in PIPES:
                totals[p] += s.totals[p]
            invocations[s.stage] = invocations.get(s.stage, 0) + s.invocations
    out = [(ACTIONS_KEY, str(len(actions))), (OPS_KEY, str(_ops(totals)))]
    out += [(PIPE_KEYS[p], str(totals[p])) for p in PIPES]
    out += [(INVOCATIONS_KEY.format(stage=stage), str(n)) for stage, n in invocations.items()]
    rates = pipe_rates(index.proc.devices.get(actions[0].device))
    pipe = largest(totals, rates)
    out.append((BOUND_KEY if rates else LARGEST_KEY, PIPE_NAMES[pipe] if pipe else "none"))
    draws = [a for a in actions if a.draw is not None]
    for n, a in enumerate(heapq.nsmallest(TOP_DRAWS, draws, key=lambda a: (-a.ops, a.draw, a.result_index)), 1):
        out.append((TOP_DRAW_KEY.format(n=n), f"draw #{a.draw}: {a.ops} thread-ops"))
    return out


# ---- the report: the session's most expensive draws and dispatches -----------------------
@dataclass
class ShaderReport:
    source: str                      # "session logs" or "merged trace args"
    ranked_by: str = RANKED_BY
    unit: str = UNIT
    instrumented: int = 0            # draws and dispatches (session) or instrumented slices (trace) seen
    ranked: list[dict[str, Any]] = field(default_factory=list)


def _block(row: list[int], shader: dict[str, Any] | None) -> dict[str, Any]:
    out = {"index": row[0], "executions": row[1], **{p: v for p, v in zip(PIPES, row[2:8])},
           "thread_ops": sum(row[2:8])}
    if shader:
        info = next((b for b in shader["blocks"] if b["index"] == row[0]), None)
        if info is not None:
            if "function" in info:
                out["function"] = info["function"]
            out["lines"] = info["lines"]
            if "source" in info:
                out["source"] = info["source"]
    return out


def rank(meta: MetadataIndex, top: int, blocks: int = 5) -> ShaderReport | None:
    """The `top` most expensive draws and dispatches of the session (by RANKED_BY, each run in
    each submit on its own), each stage with its `blocks` hottest basic blocks (by thread-ops,
    then executions; 0: every executed block) and their SPIR-V; None without instrumentation."""
    if not any(p.instrumentation for p in meta.processes.values()):
        return None
    report = ShaderReport("session logs")
    heap: list[tuple[int, tuple, ActionCost, int]] = []
    indexes = {}
    for pid in sorted(meta.processes):
        proc = meta.processes[pid]
        if not proc.instrumentation:
            continue
        index = indexes[pid] = ShaderIndex(proc)
        for sid, tag in sorted(proc.instrumentation):
            for a in index.actions(sid, tag):
                report.instrumented += 1
                if top <= 0:
                    continue
                # highest ops first; then the earliest (pid, submit, tag, resultIndex)
                key = (a.ops, tuple(-x for x in (pid, sid, tag, a.result_index, a.order)))
                item = (key, report.instrumented, a, pid)
                if len(heap) < top:
                    heapq.heappush(heap, item)
                elif key > heap[0][0]:
                    heapq.heapreplace(heap, item)
    for rank_, (_, _, a, pid) in enumerate(sorted(heap, key=lambda x: x[0], reverse=True), 1):
        proc = meta.processes[pid]
        index = indexes[pid]
        wl = proc.workload(a.tag, a.submit)
        entry: dict[str, Any] = {"rank": rank_, "pid": pid, "process": proc.process, "submit": a.submit,
                                 "tag": a.tag, "labels": app_labels(wl, []),
                                 "name": slice_name(wl, [], tag_label(a.tag)), "kind": (wl or {}).get("kind"),
                                 "result_index": a.result_index, "command": a.command}
        if a.draw is not None:
            entry["draw"] = a.draw
        entry.update({"pipeline": a.pipeline, "thread_ops": a.ops, "totals": a.totals, "stages": []})
        for s in a.stages:
            shader = index.shader(a.device, a.pipeline, s.stage, a.order) if a.pipeline else None
            hot = sorted(s.rows, key=lambda r: (-sum(r[2:8]), -r[1], r[0]))
            entry["stages"].append({
                "stage": s.stage, "entry": s.entry, "invocations": s.invocations, "totals": s.totals,
                "thread_ops": _ops(s.totals), "blocks_executed": len(s.rows), "disassembly": shader is not None,
                "blocks": [_block(r, shader) for r in (hot[:blocks] if blocks > 0 else hot)]})
        report.ranked.append(entry)
    return report


def from_args(ex: dict[str, str]) -> dict[str, Any] | None:
    """What a merged trace's args say of one instrumented slice (the trace path of `report`):
    totals, invocations, the largest/bound pipe and a render pass's top draws; None when the
    slice carries no shader cost (or a value that is not a count)."""
    ops = ex.get(OPS_KEY)
    if ops is None or not ops.isdigit():
        return None
    out: dict[str, Any] = {"thread_ops": int(ops), "totals": {}, "invocations": {}, "top_draws": []}
    for p in PIPES:
        v = ex.get(PIPE_KEYS[p], "")
        out["totals"][p] = int(v) if v.isdigit() else None
    prefix, suffix = INVOCATIONS_KEY.split("{stage}")
    for k, v in ex.items():
        if k.startswith(prefix) and k.endswith(suffix) and v.isdigit():
            out["invocations"][k[len(prefix):len(k) - len(suffix)]] = int(v)
    for key in (BOUND_KEY, LARGEST_KEY):
        if key in ex:
            out["bound_pipe" if key == BOUND_KEY else "largest_pipe"] = ex[key]
    for n in range(1, TOP_DRAWS + 1):
        v = ex.get(TOP_DRAW_KEY.format(n=n))
        if v is not None:
            out["top_draws"].append(v)
    return out


def format_report(r: ShaderReport, detail: bool) -> list[str]:
    """Text lines of the ranking; `detail`: each stage's totals and hottest blocks with their SPIR-V."""
    what = "draws and dispatches" if r.source == "session logs" else "instrumented GPU slices"
    lines = [f"{len(r.ranked)} most expensive {what} of {r.instrumented}, by {r.ranked_by}"]
    if r.source != "session logs":
        lines.append("  (from a merged trace's args: per-slice totals and the top draws a render pass lists; "
                     "basic blocks and their SPIR-V are in the session logs: report the session folder)")
    for e in r.ranked:
        labels = [*e.get("labels", []), tag_label(e['tag'])] if e.get("tag") is not None else e.get("labels", [])
        what = e.get("command") or e.get("kind") or ""
        if e.get("draw") is not None:
            what += f" draw #{e['draw']}"
        where = f"submit {e['submit']}" if e.get("submit") is not None else ""
        pipe = f"pipeline {e['pipeline']}" if e.get("pipeline") else ""
        lines.append(f"  {e['rank']:>2}. {e['thread_ops']:>14,} thread-ops  {e.get('name', '')}  "
                     f"[{' / '.join(map(str, labels))}]  " + "  ".join(x for x in (what, where, pipe) if x))
        if e.get("top_draws"):
            lines += [f"        {d}" for d in e["top_draws"]]
        for s in e.get("stages", []):
            totals = "  ".join(f"{PIPE_NAMES[p]} {s['totals'][p]:,}" for p in PIPES)
            lines.append(f"      {s['stage']}{' ' + s['entry'] if s.get('entry') else ''}: "
                         f"{s['invocations']:,} invocations, {s['thread_ops']:,} thread-ops  {totals}")
            if not detail:
                continue
            for b in s["blocks"]:
                busiest = largest(b)
                lines.append(f"        block {b['index']}"
                             + (f" ({b['function']})" if b.get("function") else "")
                             + f": {b['executions']:,} executions, {b['thread_ops']:,} thread-ops"
                             + (f" (most on {PIPE_NAMES[busiest]}: {b[busiest]:,})" if busiest else ""))
                for src in b.get("source", [])[:MAX_TEXT_LINES]:
                    lines.append(f"          source {src}")
                text = b.get("lines", [])
                lines += [f"          {t}" for t in text[:MAX_TEXT_LINES]]
                if len(text) > MAX_TEXT_LINES:
                    lines.append(f"          … {len(text) - MAX_TEXT_LINES} more lines (--json has them all)")
                if "lines" not in b:
                    lines.append("          (no SHADER message for this pipeline stage: no disassembly)")
        if "totals" in e and not e.get("stages"):
            known = [f"{PIPE_NAMES[p]} {v:,}" for p, v in e["totals"].items() if v is not None]
            inv = ", ".join(f"{k} {v:,}" for k, v in e.get("invocations", {}).items())
            lines.append("      " + "  ".join(known) + (f"  invocations: {inv}" if inv else "")
                         + (f"  largest pipe {e['largest_pipe']}" if e.get("largest_pipe") else "")
                         + (f"  bound pipe {e['bound_pipe']}" if e.get("bound_pipe") else ""))
    return lines

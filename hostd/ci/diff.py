"""`tessera diff BASE NEW`: what changed between two runs, workload by workload.

Role: pure functions over two runs.Run. Workloads are matched by identity (runs.Workload.key:
process name, frame, label path, kind, order within them), never by tag or submit numbers,
so a draw added early in a frame does not shift what every later workload is compared with.
The diff holds: GPU time per queue (the application's; the tool's own work apart), every
matched workload whose GPU time, args or shader cost changed, the workloads only one side
has, and the counts (frames, submits, GPU events, workloads by kind). Given both runs' counters
(metrics.run_counters), also Δ bandwidth and counters of the session and of every matched
workload (the per-phase `Mali…` args are then compared summed, not arg by arg); given both
sessions' advice findings (metrics.run_advice), the findings added and removed, matched by
metrics.finding_keys. Rendered as text, Markdown (a PR comment) or JSON (`format_diff`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .metrics import PREFIX, RunCounters, bandwidth, finding_json, finding_keys
from .runs import Run, Workload

FORMATS = ("text", "markdown", "json")
SHADER_FIELDS = ("thread_ops",)         # from shaders.from_args; the per-pipe totals are compared too
TOP_TEXT = 20                           # changed workloads shown in text and Markdown (JSON: all)
BANDWIDTH = "bandwidth"                 # the counters' key of external bytes read + written


def _headline() -> tuple[str, ...]:
    """The counters text and Markdown show (hostd/counters.py HEADLINE, what `tessera report` shows)."""
    from ..counters import HEADLINE

    return HEADLINE


def _pct(base: int | float, new: int | float) -> float | None:
    return None if not base else (new - base) * 100.0 / base


def _shader_values(w: Workload) -> dict[str, int]:
    s = w.shader
    if not s:
        return {}
    out = {"thread_ops": s["thread_ops"]}
    out.update({f"{p}_ops": v for p, v in s["totals"].items()})
    return out


@dataclass
class WorkloadChange:
    base: Workload
    new: Workload
    args: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    shader: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    # counters that changed (`bandwidth`: external bytes read + written), summed over the workload
    counters: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    bandwidth: tuple[float | None, float | None] | None = None    # (base, new) when counters were compared

    @property
    def delta_ns(self) -> int:
        return self.new.gpu_ns - self.base.gpu_ns

    def to_json(self) -> dict[str, Any]:
        w = self.new
        return {"process": w.process, "frame": w.frame, "labels": list(w.labels), "label_path": w.label_path,
                "kind": w.kind, "ordinal": w.ordinal, "name": w.name, "base_ns": self.base.gpu_ns,
                "new_ns": w.gpu_ns, "delta_ns": self.delta_ns, "delta_pct": _pct(self.base.gpu_ns, w.gpu_ns),
                "queue_ns": {q: {"base": self.base.queue_ns.get(q, 0), "new": w.queue_ns.get(q, 0)}
                             for q in sorted(set(self.base.queue_ns) | set(w.queue_ns))},
                "args": {k: {"base": b, "new": n} for k, (b, n) in self.args.items()},
                "shader": {k: {"base": b, "new": n} for k, (b, n) in self.shader.items()},
                "counters": {k: {"base": b, "new": n} for k, (b, n) in self.counters.items()},
                "bandwidth": (None if self.bandwidth is None else
                              {"base": self.bandwidth[0], "new": self.bandwidth[1]})}


@dataclass
class Diff:
    base: str
    new: str
    queues: dict[str, tuple[int, int]]          # queue -> (base ns, new ns), the application's
    internal: tuple[int, int]                   # the tool's own GPU time, both sides
    counts: dict[str, tuple[Any, Any]]
    changed: list[WorkloadChange]
    added: list[Workload]
    removed: list[Workload]
    unchanged: int
    # the session's counters (application work) that changed, `bandwidth` first; None: a side has none
    counters: dict[str, tuple[float | None, float | None]] | None = None
    counter_values: dict[int, dict[str, float]] = field(default_factory=dict)   # id(workload) -> its counters
    # advice: None when not compared; else findings only the new / only the base has, and the totals
    advice_added: list | None = None
    advice_removed: list | None = None
    advice_totals: dict[str, tuple[int, int]] = field(default_factory=dict)    # findings, saves_ns

    def to_json(self) -> dict[str, Any]:
        def one(w: Workload) -> dict[str, Any]:
            out = {"process": w.process, "frame": w.frame, "labels": list(w.labels), "label_path": w.label_path,
                   "kind": w.kind, "ordinal": w.ordinal, "name": w.name, "gpu_ns": w.gpu_ns,
                   "queue_ns": w.queue_ns}
            if self.counters is not None:
                c = self.counter_values.get(id(w), {})
                out["bandwidth"] = bandwidth(c)
                out["counters"] = c
            return out

        return {"base": self.base, "new": self.new,
                "gpu_time_ns": {q: {"base": b, "new": n, "delta": n - b, "delta_pct": _pct(b, n)}
                                for q, (b, n) in self.queues.items()},
                "internal_time_ns": {"base": self.internal[0], "new": self.internal[1]},
                "counts": {k: {"base": b, "new": n} for k, (b, n) in self.counts.items()},
                "changed": [c.to_json() for c in self.changed],
                "added": [one(w) for w in self.added], "removed": [one(w) for w in self.removed],
                "unchanged": self.unchanged,
                "counters": (None if self.counters is None else
                             {k: {"base": b, "new": n} for k, (b, n) in self.counters.items()}),
                "advice": (None if self.advice_added is None else
                           {"added": [finding_json(f) for f in self.advice_added],
                            "removed": [finding_json(f) for f in self.advice_removed],
                            **{k: {"base": b, "new": n} for k, (b, n) in self.advice_totals.items()}})}


def _counter_changes(b: dict[str, float], n: dict[str, float]) -> dict[str, tuple[float | None, float | None]]:
    """The counters that differ (`bandwidth` first), by name."""
    out: dict[str, tuple[float | None, float | None]] = {}
    bb, bn = bandwidth(b), bandwidth(n)
    if bb != bn:
        out[BANDWIDTH] = (bb, bn)
    for k in sorted(set(b) | set(n)):
        if b.get(k) != n.get(k):
            out[k] = (b.get(k), n.get(k))
    return out


def _arg_changes(b: Workload, n: Workload, counted: bool = False) -> dict[str, tuple[str | None, str | None]]:
    """The args that changed: `name` when it changed alike on every stage of the workload,
    `name (stage)` per stage otherwise (a render pass's binning and main slices may differ).
    `counted`: the counters are compared summed, so their per-phase args are left out here."""
    per: dict[str, dict[str, tuple]] = {}
    stages = sorted(set(b.stage_args) | set(n.stage_args))
    for stage in stages:
        ba, na = b.stage_args.get(stage, {}), n.stage_args.get(stage, {})
        for k in set(ba) | set(na):
            if counted and k.startswith(PREFIX):
                continue                # compared summed over the workload (`counters`)
            if ba.get(k) != na.get(k):
                per.setdefault(k, {})[stage] = (ba.get(k), na.get(k))
    out: dict[str, tuple[str | None, str | None]] = {}
    for k in sorted(per):
        changes = per[k]
        present = [st for st in stages if k in b.stage_args.get(st, {}) or k in n.stage_args.get(st, {})]
        if len(set(changes.values())) == 1 and len(changes) == len(present):
            out[k] = next(iter(changes.values()))
        else:
            out.update((f"{k} ({st})", v) for st, v in sorted(changes.items()))
    return out


def diff_runs(base: Run, new: Run, base_counters: RunCounters | None = None,
              new_counters: RunCounters | None = None, base_findings: list | None = None,
              new_findings: list | None = None) -> Diff:
    """The diff of two runs; counters compared when both are given, advice when both findings are."""
    counted = base_counters is not None and new_counters is not None
    queues = {q: (base.summary.gpu_time_ns.get(q, 0), new.summary.gpu_time_ns.get(q, 0))
              for q in sorted(set(base.summary.gpu_time_ns) | set(new.summary.gpu_time_ns))}
    internal = (sum(base.summary.internal_time_ns.values()), sum(new.summary.internal_time_ns.values()))
    sb, sn = base.summary, new.summary
    counts = {"frames": (sb.frames, sn.frames), "submits": (sb.submits, sn.submits),
              "gpu_events": (sb.gpu_events, sn.gpu_events)}
    for kind in sorted(set(sb.workloads) | set(sn.workloads)):
        counts[f"workloads: {kind}"] = (sb.workloads.get(kind, 0), sn.workloads.get(kind, 0))
    counts = {k: v for k, v in counts.items() if v[0] != v[1] or not k.startswith("workloads: ")}
    old = {w.key: w for w in base.workloads}
    changed, added, unchanged = [], [], 0
    for w in new.workloads:
        b = old.pop(w.key, None)
        if b is None:
            added.append(w)
            continue
        c = WorkloadChange(b, w, _arg_changes(b, w, counted))
        if counted:
            cb, cn = base_counters.of(b), new_counters.of(w)
            c.counters, c.bandwidth = _counter_changes(cb, cn), (bandwidth(cb), bandwidth(cn))
        sb_, sn_ = _shader_values(b), _shader_values(w)
        for k in sorted(set(sb_) | set(sn_)):
            if sb_.get(k) != sn_.get(k):
                c.shader[k] = (sb_.get(k), sn_.get(k))
        if c.delta_ns or c.args or c.shader or c.counters or b.queue_ns != w.queue_ns:
            changed.append(c)
        else:
            unchanged += 1
    changed.sort(key=lambda c: (-abs(c.delta_ns), c.new.order))
    removed = sorted(old.values(), key=lambda w: w.order)
    d = Diff(str(base.source), str(new.source), queues, internal, counts, changed, added, removed, unchanged)
    if counted:
        d.counters = _counter_changes(base_counters.session, new_counters.session)
        d.counter_values = {**{id(w): base_counters.of(w) for w in removed},
                            **{id(w): new_counters.of(w) for w in added}}
    if base_findings is not None and new_findings is not None:
        bk = dict(zip(finding_keys(base_findings), base_findings))
        nk = dict(zip(finding_keys(new_findings), new_findings))
        d.advice_added = [f for k, f in nk.items() if k not in bk]
        d.advice_removed = [f for k, f in bk.items() if k not in nk]
        d.advice_totals = {"findings": (len(base_findings), len(new_findings)),
                           "saves_ns": (sum(f.saves_ns for f in base_findings), sum(f.saves_ns for f in new_findings))}
    return d


def _count(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


def _count_change(name: str, b: float | None, n: float | None) -> str:
    pct = _pct(b, n) if b is not None and n is not None else None
    return f"{name} {_count(b)} → {_count(n)}" + (f" ({pct:+.1f}%)" if pct is not None else "")


def _shown_counters(changes: dict[str, tuple]) -> list[str]:
    """Text and Markdown: bandwidth and the headline counters that changed (JSON: every one)."""
    keep = (BANDWIDTH, *_headline())
    return [_count_change(k, *changes[k]) for k in keep if k in changes]


def _ms(ns: int) -> str:
    """GPU time as the report's readers want it: µs (emulated workloads are µs long), to the ns."""
    return f"{ns / 1e3:,.3f} µs"


def _signed_ms(ns: int) -> str:
    return f"{ns / 1e3:+,.3f} µs"


def _pct_text(p: float | None) -> str:
    return "new" if p is None else f"{p:+.1f}%"


def format_diff(d: Diff, fmt: str) -> str:
    if fmt == "json":
        import json

        return json.dumps(d.to_json(), indent=2)
    md = fmt == "markdown"
    lines: list[str] = []
    if md:
        lines += ["### Tessera GPU diff", "", f"base `{d.base}` → new `{d.new}`", "",
                  "| queue | base | new | Δ | Δ% |", "|---|---:|---:|---:|---:|"]
        for q, (b, n) in d.queues.items():
            lines.append(f"| {q} | {_ms(b)} | {_ms(n)} | {_signed_ms(n - b)} | {_pct_text(_pct(b, n))} |")
    else:
        lines += [f"base {d.base}", f"new  {d.new}", "GPU time per queue (base → new, Δ)"]
        for q, (b, n) in d.queues.items():
            lines.append(f"  {q:<16} {_ms(b):>14} → {_ms(n):>14}  {_signed_ms(n - b):>14} {_pct_text(_pct(b, n)):>8}")
    if d.internal[0] or d.internal[1]:
        lines.append(("" if md else "  ") + f"tool (internal) work: {_ms(d.internal[0])} → {_ms(d.internal[1])}, "
                     "not counted above")
    if d.counters:
        shown = _shown_counters(d.counters)
        lines += ["", "**Counters** (the session's; `--format json` lists every one)" if md
                  else "counters (the session's, base → new; --format json lists every one)"]
        lines += [f"{'- ' if md else '  '}{t}" for t in shown] or [f"{'- ' if md else '  '}"
                                                                    "only counters outside the headline changed"]
    changed_counts = {k: v for k, v in d.counts.items() if v[0] != v[1]}
    if changed_counts:
        lines += ["", "**Counts**" if md else "counts (base → new)"]
        lines += [f"{'- ' if md else '  '}{k}: {b} → {n}" for k, (b, n) in changed_counts.items()]
    lines += ["", (f"**{len(d.changed)} workload(s) changed**, {len(d.added)} new, {len(d.removed)} removed, "
                   f"{d.unchanged} unchanged") if md else
              f"workloads: {len(d.changed)} changed, {len(d.added)} new, {len(d.removed)} removed, "
              f"{d.unchanged} unchanged"]
    if d.changed:
        if md:
            lines += ["", "| workload | base | new | Δ | Δ% | what changed |", "|---|---:|---:|---:|---:|---|"]
        for c in d.changed[:TOP_TEXT]:
            what = [f"{k}: {b} → {n}" for k, (b, n) in c.args.items()]
            what += [f"shader {k}: {b} → {n}" for k, (b, n) in c.shader.items()]
            counted = _shown_counters(c.counters)
            text = "; ".join(what + counted)
            if md:
                lines.append(f"| {c.new.describe()} | {_ms(c.base.gpu_ns)} | {_ms(c.new.gpu_ns)} | "
                             f"{_signed_ms(c.delta_ns)} | {_pct_text(_pct(c.base.gpu_ns, c.new.gpu_ns))} | "
                             f"{text.replace('|', '∣')} |")
            else:
                lines.append(f"  {_signed_ms(c.delta_ns):>14} {_pct_text(_pct(c.base.gpu_ns, c.new.gpu_ns)):>8}  "
                             f"{c.new.describe()}")
                if what:
                    lines.append(f"      {'; '.join(what)}")
                if counted:
                    lines.append(f"      counters: {'; '.join(counted)}")
        if len(d.changed) > TOP_TEXT:
            lines.append(f"{'' if md else '  '}… {len(d.changed) - TOP_TEXT} more (--format json lists all)")
    for title, items in (("new", d.added), ("removed", d.removed)):
        if items:
            lines += ["", f"**{title}**" if md else f"{title} workloads"]
            for w in items[:TOP_TEXT]:
                lines.append(f"{'- ' if md else '  '}{_ms(w.gpu_ns)}  {w.describe()}")
            if len(items) > TOP_TEXT:
                lines.append(f"{'' if md else '  '}… {len(items) - TOP_TEXT} more (--format json lists all)")
    if d.advice_added is not None:
        (fb, fn), (sb, sn) = d.advice_totals["findings"], d.advice_totals["saves_ns"]
        lines += ["", f"{'**Advice**' if md else 'advice'}: {fb} → {fn} finding(s), saving {_ms(sb)} → {_ms(sn)}"]
        for title, found in (("new", d.advice_added), ("gone", d.advice_removed)):
            for f in found[:TOP_TEXT]:
                lines.append(f"{'- ' if md else '  '}{title}: {f.rule} ({f.severity}) at {f.workload}, "
                             f"saves {_ms(f.saves_ns)}")
            if len(found) > TOP_TEXT:
                lines.append(f"{'' if md else '  '}… {len(found) - TOP_TEXT} more {title} (--format json lists all)")
    return "\n".join(lines)

"""`tessera check`: a session held to a budget (TOML), a verdict per rule, JUnit XML and Markdown.

Role: `load_budget(text)` parses and validates a budget file (tomllib) into a Budget; every key is
one of `KEYS` (an unknown key is an error naming the allowed ones; the compiler-model figures
sessions do not carry are errors saying so: `RESERVED`). `check(run, budget, …)` evaluates each
rule against a runs.Run into RuleResults (one per limit: one JUnit testcase each): GPU time,
draw calls and shader cost from the Run, Mali counters and bandwidth from metrics.run_counters
(the Run's counter args summed by hostd/counters.py), advice from the advisor's findings
(metrics.run_advice); `junit_xml` and `markdown` render them. Pure functions; the click edge is
tools/cmd_check.py. Format and semantics: docs/ci.md "Budgets".
"""
from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from typing import Any

from .diff import diff_runs
from .metrics import RunCounters, bandwidth
from .runs import Run, Workload

BUDGET_VERSION = 1
COUNTER_KEYS = {
    "max_counters": "Mali counters (docs/counters.md names), a table {counter = limit}; a workload's, frame's "
                    "or session's value as `tessera counters` sums it",
    "max_bandwidth": "external bus bytes read + written (MaliExtBusRdBy + MaliExtBusWrBy)",
}
# table -> {key: what it limits}. The one list of budget keys: validation, errors and docs use it.
SCOPE_KEYS = {
    "max_gpu_us": "GPU time of all queues together, µs (the application's work; the tool's own apart)",
    "max_queue_us": "GPU time per queue, µs: a table {queue name = limit}",
    **COUNTER_KEYS,
}
PASS_KEYS = {
    "label": "fnmatch pattern on the label path (labels outermost first, joined by ' / ')",
    "name": "fnmatch pattern on the workload's slice name (for unlabelled work)",
    "kind": "workload kind (render_pass, dispatch, buffer_transfer, image_transfer, trace_rays, …)",
    "optional": "true: a rule matching no workload passes (default: it fails, to catch typos)",
    "max_gpu_us": "GPU time of each matching workload, µs",
    "max_queue_us": "GPU time of each matching workload per queue, µs: {queue = limit}",
    "max_draw_calls": "draw calls of each matching render pass (its draw_call_count)",
    **COUNTER_KEYS,
}
SHADER_KEYS = {
    "label": PASS_KEYS["label"], "name": PASS_KEYS["name"], "kind": PASS_KEYS["kind"],
    "optional": PASS_KEYS["optional"],
    "max_thread_ops": "shader thread-operations of each matching workload (tessera run --instrument)",
    "max_pipe_ops": "thread-operations per Mali pipe: {fma, cvt, sfu, ls, tex, var = limit}",
    "max_cycles": "cycles of one shader core on the bound pipe: max over pipes of thread-ops / the pipe's "
                  "rate (the DEVICE's pipe_rates; a session folder run with --instrument)",
}
BASELINE_KEYS = {
    "max_regression": "allowed growth over the --baseline session, e.g. \"5%\"",
    "counters": "Mali counters also held to max_regression (session total and each matched workload); "
                "bandwidth always is when both sessions have counters",
}
ADVICE_KEYS = {
    "fail_on": "a severity (info, warning): any finding of it or a higher one breaks the budget",
    "max_findings": "findings allowed (those not ignored)",
    "max_saving_us": "total time the findings (not ignored) would save, µs",
    "ignore": "advice rule ids never counted, e.g. [\"too-many-passes\"]",
}
KEYS: dict[str, dict[str, str]] = {"frame": SCOPE_KEYS, "session": SCOPE_KEYS, "pass": PASS_KEYS,
                                   "shader": SHADER_KEYS, "baseline": BASELINE_KEYS, "advice": ADVICE_KEYS}
TOP_KEYS = {"version": f"the budget format's version ({BUDGET_VERSION})", **{k: "table" for k in KEYS}}
# Keys that a session cannot answer, or that moved: a clear error each.
_STATIC = ("is the compiler model's static figure of a shader, which the driver computes with each pipeline's "
           "cycles (icd/shader_costs.py of_stages) but does not keep: neither the trace nor the session carries "
           "it per pipeline or workload (check shaders with `tessera compile --format json`; docs/ci.md)")
RESERVED = {
    "counters": "counter limits are `max_counters = { MaliExtBusWrBy = … }` in [frame], [session] or [[pass]]",
    "max_advice": "advice limits are an [advice] table: fail_on, max_findings, max_saving_us, ignore",
    "max_registers": f"work registers: the work register count {_STATIC}",
    "max_spills": f"spills: the spill count {_STATIC}",
}
PIPES = ("fma", "cvt", "sfu", "ls", "tex", "var")


class BudgetError(ValueError):
    """The budget file is not valid (the message names the key and what is allowed)."""


@dataclass(frozen=True)
class Rule:
    scope: str                      # frame, session, pass, shader, baseline, advice
    key: str                        # the limit's key (max_queue_us.fragment for one queue)
    limit: float
    label: str | None = None
    name: str | None = None
    kind: str | None = None
    optional: bool = False
    index: int = 0                  # the [[pass]] / [[shader]] entry's position
    value: str | None = None        # advice fail_on: the severity; baseline counters: the counter
    ignore: tuple[str, ...] = ()    # advice: rule ids not counted

    @property
    def title(self) -> str:
        what = " ".join(f"{k}={v!r}" for k, v in (("label", self.label), ("name", self.name), ("kind", self.kind))
                        if v is not None)
        scope = f"{self.scope}[{self.index}] {what}" if self.scope in ("pass", "shader") else self.scope
        if self.key == "fail_on":
            limit = f"fail_on = {self.value!r}: no finding of severity >= {self.value}"
        else:
            limit = f"{self.key} <= {_fmt(self.key, self.limit)}"
        ignoring = f" (ignoring {', '.join(self.ignore)})" if self.ignore else ""
        return f"{scope}: {limit}{ignoring}"


@dataclass
class RuleResult:
    rule: Rule
    passed: bool
    message: str                    # one line: what broke (or what was checked)
    details: list[str] = field(default_factory=list)


def _fmt(key: str, value: float) -> str:
    if key.startswith("max_regression"):
        return f"{value:g}%"
    if key.startswith(("max_counters", "max_bandwidth", "max_findings")):
        text = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
        return text + (" bytes" if key == "max_bandwidth" else "")
    unit = " µs" if "_us" in key else ""
    if key == "max_cycles":
        return f"{value:,.1f} cycles"
    return f"{value:,.3f}{unit}" if unit else f"{value:g}"


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        raise BudgetError(f"{where}: expected a number >= 0, got {value!r}")
    return float(value)


def parse_regression(where: str, value: Any) -> float:
    """`"5%"` or `5` (percent) -> 5.0."""
    if isinstance(value, str):
        text = value.strip()
        if not text.endswith("%"):
            raise BudgetError(f"{where}: expected a percentage like \"5%\", got {value!r}")
        try:
            value = float(text[:-1])
        except ValueError:
            raise BudgetError(f"{where}: expected a percentage like \"5%\", got {value!r}") from None
    return _number(where, value)


def _check_keys(where: str, table: dict, allowed: dict[str, str]) -> None:
    for k in table:
        if k in allowed:
            continue
        if k in RESERVED:
            raise BudgetError(f"{where}.{k}: {RESERVED[k]}")
        if k not in allowed:
            raise BudgetError(f"{where}: unknown key {k!r}; allowed: {', '.join(allowed)} (docs/ci.md \"Budgets\")")


def _limits(scope: str, where: str, table: dict, index: int = 0, **match) -> list[Rule]:
    rules = []
    for k, v in table.items():
        if not k.startswith("max_"):
            continue
        if isinstance(v, dict):
            if k not in TABLE_LIMITS:
                raise BudgetError(f"{where}.{k}: expected a number, got a table")
            for sub, limit in v.items():
                if k == "max_pipe_ops" and sub not in PIPES:
                    raise BudgetError(f"{where}.{k}: unknown pipe {sub!r}; pipes: {', '.join(PIPES)}")
                if k == "max_counters":
                    _counter_name(f"{where}.{k}", sub)
                rules.append(Rule(scope, f"{k}.{sub}", _number(f"{where}.{k}.{sub}", limit), index=index, **match))
        elif k in TABLE_LIMITS:
            raise BudgetError(f"{where}.{k}: expected a table {{name = limit}}, got {v!r}")
        else:
            rules.append(Rule(scope, k, _number(f"{where}.{k}", v), index=index, **match))
    return rules


TABLE_LIMITS = ("max_queue_us", "max_pipe_ops", "max_counters")


def _counter_name(where: str, name: str) -> None:
    from .metrics import counter_names

    names = counter_names()
    if name not in names:
        near = [n for n in names if n.lower() == name.lower() or n.lower() == f"mali{name.lower()}"]
        hint = (f"; did you mean {near[0]}?" if near else
                " (docs/counters.md lists them; `tessera counters` shows a session's)")
        raise BudgetError(f"{where}: unknown counter {name!r}{hint}")


def _advice(table: dict) -> list[Rule]:
    from ..advice.rules import RULES_BY_ID, SEVERITIES

    ignore = table.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(r, str) for r in ignore):
        raise BudgetError("[advice].ignore: expected a list of rule ids, e.g. [\"too-many-passes\"]")
    for r in ignore:
        if r not in RULES_BY_ID:
            raise BudgetError(f"[advice].ignore: unknown rule {r!r}; rules: {', '.join(RULES_BY_ID)}")
    ignore_t = tuple(ignore)
    rules = []
    if "fail_on" in table:
        sev = table["fail_on"]
        if sev not in SEVERITIES:
            raise BudgetError(f"[advice].fail_on: expected one of {', '.join(map(repr, SEVERITIES))}, got {sev!r}")
        rules.append(Rule("advice", "fail_on", float(SEVERITIES.index(sev)), value=sev, ignore=ignore_t))
    for k in ("max_findings", "max_saving_us"):
        if k in table:
            rules.append(Rule("advice", k, _number(f"[advice].{k}", table[k]), ignore=ignore_t))
    if not rules:
        raise BudgetError("[advice]: no limit in it (fail_on, max_findings or max_saving_us)")
    return rules


def load_budget(text: str) -> tuple[list[Rule], float | None]:
    """(rules, the baseline's max regression in % or None) of a budget file's text. `[baseline]
    counters` are rules of scope `baseline` (key `counters`, value the counter): check() holds
    them to the regression when it has a baseline."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BudgetError(f"not valid TOML: {e}") from None
    _check_keys("budget", data, TOP_KEYS)
    version = data.get("version", BUDGET_VERSION)
    if version != BUDGET_VERSION:
        raise BudgetError(f"version {version!r}: this Tessera reads budget version {BUDGET_VERSION}")
    rules: list[Rule] = []
    for scope in ("frame", "session"):
        table = data.get(scope)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise BudgetError(f"[{scope}]: expected a table")
        _check_keys(f"[{scope}]", table, SCOPE_KEYS)
        rules += _limits(scope, f"[{scope}]", table)
    for scope, allowed in (("pass", PASS_KEYS), ("shader", SHADER_KEYS)):
        entries = data.get(scope, [])
        if isinstance(entries, dict):
            entries = [entries]
        if not isinstance(entries, list):
            raise BudgetError(f"[[{scope}]]: expected an array of tables")
        for i, entry in enumerate(entries):
            where = f"[[{scope}]] #{i + 1}"
            if not isinstance(entry, dict):
                raise BudgetError(f"{where}: expected a table")
            _check_keys(where, entry, allowed)
            match = {k: entry[k] for k in ("label", "name", "kind") if k in entry}
            for k, v in match.items():
                if not isinstance(v, str):
                    raise BudgetError(f"{where}.{k}: expected a string, got {v!r}")
            if "label" not in match and "name" not in match:
                raise BudgetError(f"{where}: give `label` (a label path pattern) or `name` (a slice name pattern)")
            optional = entry.get("optional", False)
            if not isinstance(optional, bool):
                raise BudgetError(f"{where}.optional: expected true or false")
            found = _limits(scope, where, entry, index=i + 1, optional=optional, **match)
            if not found:
                raise BudgetError(f"{where}: no limit (max_… key) in it")
            rules += found
    regression = None
    if "baseline" in data:
        table = data["baseline"]
        if not isinstance(table, dict):
            raise BudgetError("[baseline]: expected a table")
        _check_keys("[baseline]", table, BASELINE_KEYS)
        if "max_regression" in table:
            regression = parse_regression("[baseline].max_regression", table["max_regression"])
        names = table.get("counters", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BudgetError("[baseline].counters: expected a list of counter names, e.g. [\"MaliFragThread\"]")
        for n in names:
            _counter_name("[baseline].counters", n)
            rules.append(Rule("baseline", "counters", 0.0, value=n))
    if "advice" in data:
        if not isinstance(data["advice"], dict):
            raise BudgetError("[advice]: expected a table")
        _check_keys("[advice]", data["advice"], ADVICE_KEYS)
        rules += _advice(data["advice"])
    return rules, regression


def _matches(rule: Rule, w: Workload) -> bool:
    if rule.kind is not None and w.kind != rule.kind:
        return False
    if rule.label is not None and not fnmatch.fnmatchcase(w.label_path, rule.label):
        return False
    return rule.name is None or fnmatch.fnmatchcase(w.name, rule.name)


def needs_pipe_rates(rules: list[Rule]) -> bool:
    return any(r.key == "max_cycles" for r in rules)


def pipe_rates_of(session) -> dict[str, float]:
    """The pipe rates (thread-operations per core per clock) of a session folder's instrumented
    device, from its DEVICE messages (the layer sends the compiler model's table under
    --instrument); BudgetError when there are none, or devices disagree."""
    from ..merge import find_inputs
    from ..metadata import load
    from ..shaders import pipe_rates

    inputs = find_inputs(session)
    meta = load(inputs.logs + inputs.spools)
    found = {tuple(sorted(r.items())) for p in meta.processes.values() for d in p.devices.values()
             if (r := pipe_rates(d)) is not None}
    if not found:
        raise BudgetError(f"{session}: no device with pipe rates (max_cycles needs a session run with --instrument)")
    if len(found) > 1:
        raise BudgetError(f"{session}: devices with different pipe rates; max_cycles cannot pick one")
    return dict(next(iter(found)))


def needs_counters(rules: list[Rule]) -> bool:
    """Rules that read counters (a baseline compares bandwidth whenever both sessions have them)."""
    return any(r.key.startswith(("max_counters", "max_bandwidth")) or (r.scope, r.key) == ("baseline", "counters")
               for r in rules)


def needs_advice(rules: list[Rule]) -> bool:
    return any(r.scope == "advice" for r in rules)


def _counter_value(key: str, sub: str, counters: dict[str, float]) -> float | None:
    return bandwidth(counters) if key == "max_bandwidth" else counters.get(sub)


def _value(rule: Rule, w: Workload, rates: dict[str, float] | None = None,
           counters: RunCounters | None = None) -> float | None:
    """The rule's figure of one workload in µs or count; None when the workload has none."""
    key, _, sub = rule.key.partition(".")
    if key in ("max_counters", "max_bandwidth"):
        return _counter_value(key, sub, counters.of(w)) if counters is not None else None
    if key == "max_gpu_us":
        return w.gpu_ns / 1e3
    if key == "max_queue_us":
        return w.queue_ns.get(sub, 0) / 1e3
    if key == "max_draw_calls":
        text = w.args.get("draw_call_count")
        return float(text) if text is not None and text.lstrip("-").isdigit() else None
    shader = w.shader
    if shader is None:
        return None
    if key == "max_thread_ops":
        return float(shader["thread_ops"])
    if key == "max_pipe_ops":
        return float(shader["totals"].get(sub, 0))
    if key == "max_cycles" and rates:
        return max(shader["totals"].get(p, 0) / rates[p] for p in PIPES)
    raise AssertionError(rule.key)


def _scope_value(rule: Rule, per_queue: dict[str, int]) -> float:
    key, _, sub = rule.key.partition(".")
    return (sum(per_queue.values()) if key == "max_gpu_us" else per_queue.get(sub, 0)) / 1e3


def _lacks(rule: Rule, counters: RunCounters | None) -> str:
    key, _, sub = rule.key.partition(".")
    what = "external bus bytes (MaliExtBusRdBy, MaliExtBusWrBy)" if key == "max_bandwidth" else sub
    return f"the session's GPU ({counters.gpu if counters else 'none'}) has no value of {what}"


def _scope_counters(rule: Rule, counters: RunCounters) -> RuleResult:
    key, _, sub = rule.key.partition(".")
    items = list(counters.frames.items()) if rule.scope == "frame" else [(None, counters.session)]
    values = [(v, "the session" if rule.scope == "session" else f"frame {f if f is not None else '(none)'}")
              for f, c in items if (v := _counter_value(key, sub, c)) is not None]
    if not values:
        return RuleResult(rule, False, _lacks(rule, counters))
    over = sorted([x for x in values if x[0] > rule.limit], key=lambda x: -x[0])
    if not over:
        top = max(v for v, _ in values)
        return RuleResult(rule, True, f"{len(values)} {rule.scope}(s), largest {_fmt(rule.key, top)}")
    v, where = over[0]
    return RuleResult(rule, False, f"{where}: {_fmt(rule.key, v)} > {_fmt(rule.key, rule.limit)}"
                      f"{f' ({len(over)} frames over)' if len(over) > 1 else ''}",
                      [f"{w}: {_fmt(rule.key, x)}" for x, w in over])


def _advice_result(rule: Rule, findings: list) -> RuleResult:
    from ..advice.rules import SEVERITIES

    counted = [f for f in findings if f.rule not in rule.ignore]
    ignored = len(findings) - len(counted)
    note = f" ({ignored} ignored)" if ignored else ""

    def line(f) -> str:
        return (f"{f.rule} ({f.severity}) at {f.workload}: {f.what}; saves {f.saves_ns / 1e3:,.3f} µs")

    if rule.key == "fail_on":
        bad = [f for f in counted if SEVERITIES.index(f.severity) >= rule.limit]
        if not bad:
            return RuleResult(rule, True, f"{len(counted)} finding(s){note}, none of severity >= {rule.value}")
        return RuleResult(rule, False, line(bad[0]) + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""),
                          [line(f) for f in bad])
    if rule.key == "max_findings":
        if len(counted) <= rule.limit:
            return RuleResult(rule, True, f"{len(counted)} finding(s){note}")
        return RuleResult(rule, False, f"{len(counted)} findings > {_fmt(rule.key, rule.limit)}{note}: "
                          f"{', '.join(sorted({f.rule for f in counted}))}", [line(f) for f in counted])
    total = sum(f.saves_ns for f in counted) / 1e3
    if total <= rule.limit:
        return RuleResult(rule, True, f"{len(counted)} finding(s){note} save {_fmt(rule.key, total)}")
    return RuleResult(rule, False, f"{len(counted)} finding(s){note} save {_fmt(rule.key, total)} > "
                      f"{_fmt(rule.key, rule.limit)}; the most: {line(counted[0])}", [line(f) for f in counted])


def _evaluate(rule: Rule, run: Run, rates: dict[str, float] | None, counters: RunCounters | None = None,
              findings: list | None = None) -> RuleResult:
    if rule.scope == "advice":
        return _advice_result(rule, findings or [])
    if rule.scope in ("frame", "session") and rule.key.startswith(("max_counters", "max_bandwidth")):
        return _scope_counters(rule, counters)
    if rule.scope in ("frame", "session"):
        items = (sorted(run.frame_ns().items(), key=lambda kv: (kv[0] is None, kv[0] or 0)) if rule.scope == "frame"
                 else [(None, run.summary.gpu_time_ns)])
        over = []
        for frame, per_queue in items:
            v = _scope_value(rule, per_queue)
            if v > rule.limit:
                over.append((v, "the session" if rule.scope == "session" else f"frame {frame}"))
        if not over:
            return RuleResult(rule, True, f"{len(items)} {rule.scope}(s) within {_fmt(rule.key, rule.limit)}")
        over.sort(key=lambda x: -x[0])          # stable: the first frame of the largest value leads
        worst = over[0]
        return RuleResult(rule, False, f"{worst[1]}: {_fmt(rule.key, worst[0])} > {_fmt(rule.key, rule.limit)}"
                          f"{f' ({len(over)} frames over)' if len(over) > 1 else ''}",
                          [f"{where}: {_fmt(rule.key, v)}" for v, where in over])
    matched = [w for w in run.workloads if _matches(rule, w)]
    if not matched:
        ok = rule.optional
        return RuleResult(rule, ok, "no workload matches" + (" (optional)" if ok else
                                                            ": a typo, or the pass is gone? (optional = true allows it)"))
    values = [(v, w) for w in matched if (v := _value(rule, w, rates, counters)) is not None]
    if not values:
        what = ("shader cost (run with --instrument)" if rule.scope == "shader" else
                f"a value: {_lacks(rule, counters)}" if rule.key.startswith(("max_counters", "max_bandwidth"))
                else "this figure")
        return RuleResult(rule, False, f"{len(matched)} workload(s) match but none has {what}")
    over = [(v, w) for v, w in values if v > rule.limit]
    if not over:
        top = max(v for v, _ in values)
        return RuleResult(rule, True, f"{len(values)} workload(s), largest {_fmt(rule.key, top)}")
    over.sort(key=lambda x: -x[0])
    v, w = over[0]
    return RuleResult(rule, False, f"{w.describe()}: {_fmt(rule.key, v)} > {_fmt(rule.key, rule.limit)}"
                      f"{f' (and {len(over) - 1} more)' if len(over) > 1 else ''}",
                      [f"{w.describe()}: {_fmt(rule.key, v)}" for v, w in over])


def _counter_regression(name: str, run: Run, base: Run, counters: RunCounters, base_counters: RunCounters,
                        percent: float) -> RuleResult:
    """`name` (a counter, or `bandwidth`) of the session and of every workload matched by identity
    may grow at most `percent`."""
    factor = 1 + percent / 100
    rule = Rule("baseline", f"max_regression.{name}", percent)

    def value(c: dict[str, float]) -> float | None:
        return bandwidth(c) if name == "bandwidth" else c.get(name)

    def change(b: float, n: float) -> str:
        pct = f" ({(n - b) * 100 / b:+.1f}%)" if b else (" (new)" if n else "")
        return f"{b:,.0f} → {n:,.0f}{pct}"

    old = {w.key: w for w in base.workloads if not w.internal}
    grew = []
    for w in run.workloads:
        b = old.get(w.key)
        if b is None or w.internal:
            continue
        vb, vn = value(base_counters.of(b)), value(counters.of(w))
        if vn is not None and vn > (vb or 0) * factor:
            grew.append(f"{w.describe()}: {name} {change(vb or 0, vn)}")
    sb, sn = value(base_counters.session), value(counters.session)
    if sn is None and sb is None:
        return RuleResult(rule, False, f"neither session has a value of {name} "
                          f"(GPUs {base_counters.gpu}, {counters.gpu})")
    session = f"session {name}: {change(sb or 0, sn or 0)}"
    if (sn or 0) > (sb or 0) * factor:
        grew.append(session)
    if not grew:
        return RuleResult(rule, True, f"{session}; every matched workload within {percent:g}%")
    return RuleResult(rule, False, grew[0] + (f" (and {len(grew) - 1} more)" if len(grew) > 1 else ""), grew)


def _baseline(run: Run, base: Run, percent: float, counters: list[str] = (),
              run_counters: RunCounters | None = None, base_counters: RunCounters | None = None) -> list[RuleResult]:
    d = diff_runs(base, run)
    factor = 1 + percent / 100
    out = []
    for queue, (b, n) in d.queues.items():
        rule = Rule("baseline", f"max_regression.{queue}", percent)
        grew = n > b * factor
        pct = (n - b) * 100 / b if b else None
        change = f"{b / 1e3:,.3f} µs → {n / 1e3:,.3f} µs" + (f" ({pct:+.1f}%)" if pct is not None else " (new)")
        out.append(RuleResult(rule, not grew, f"GPU time on {queue}: {change}"))
    rule = Rule("baseline", "max_regression.workloads", percent)
    regressed = [c for c in d.changed if c.new.gpu_ns > c.base.gpu_ns * factor]
    if regressed:
        lines = [f"{c.new.describe()}: {c.base.gpu_ns / 1e3:,.3f} µs → {c.new.gpu_ns / 1e3:,.3f} µs "
                 f"({c.delta_ns * 100 / c.base.gpu_ns if c.base.gpu_ns else 0:+.1f}%)" for c in regressed]
        out.append(RuleResult(rule, False, lines[0] + (f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""),
                              lines))
    else:
        out.append(RuleResult(rule, True, f"{len(d.changed) + d.unchanged} matched workload(s) within {percent:g}%"
                              f"; {len(d.added)} new, {len(d.removed)} removed"))
    if run_counters is not None and base_counters is not None:
        for name in ("bandwidth", *dict.fromkeys(counters)):
            out.append(_counter_regression(name, run, base, run_counters, base_counters, percent))
    return out


def check(run: Run, rules: list[Rule], baseline: Run | None = None, regression: float | None = None,
          rates: dict[str, float] | None = None, counters: RunCounters | None = None,
          base_counters: RunCounters | None = None, findings: list | None = None) -> list[RuleResult]:
    """A verdict per rule; `rates` (pipe_rates_of) is needed when needs_pipe_rates(rules), `counters`
    (metrics.run_counters of `run`) when needs_counters(rules), `findings` (the advisor's, of
    `run`'s session) when needs_advice(rules). With a baseline whose `base_counters` are given
    too, bandwidth and the budget's [baseline] counters are held to the regression as well."""
    if needs_pipe_rates(rules) and not rates:
        raise BudgetError("max_cycles needs the pipe rates of the session (pipe_rates_of)")
    limits = [r for r in rules if r.scope != "baseline"]
    if any(r.key.startswith(("max_counters", "max_bandwidth")) for r in limits) and counters is None:
        raise BudgetError("counter limits need the session's counters (metrics.run_counters)")
    if needs_advice(rules) and findings is None:
        raise BudgetError("advice limits need the session's findings (metrics.run_advice)")
    results = [_evaluate(r, run, rates, counters, findings) for r in limits]
    if baseline is not None:
        names = [r.value for r in rules if r.scope == "baseline" and r.value]
        if names and (counters is None or base_counters is None):
            raise BudgetError("[baseline] counters need both sessions' counters (metrics.run_counters)")
        results += _baseline(run, baseline, regression if regression is not None else 0.0, names,
                             counters, base_counters)
    return results


def junit_xml(results: list[RuleResult], suite: str) -> bytes:
    """JUnit XML: one testsuite, one testcase per rule (classname tessera.budget.<scope>), a
    <failure> naming the workload or frame that broke it."""
    import xml.etree.ElementTree as ET

    failures = sum(not r.passed for r in results)
    root = ET.Element("testsuites", name="tessera check", tests=str(len(results)), failures=str(failures))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(results)), failures=str(failures), errors="0",
                       skipped="0", time="0")
    for r in results:
        tc = ET.SubElement(ts, "testcase", classname=f"tessera.budget.{r.rule.scope}", name=r.rule.title, time="0")
        if r.passed:
            ET.SubElement(tc, "system-out").text = r.message
        else:
            f = ET.SubElement(tc, "failure", message=r.message, type="BudgetExceeded")
            f.text = "\n".join(r.details or [r.message])
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def markdown(results: list[RuleResult], session: str) -> str:
    failed = [r for r in results if not r.passed]
    head = (f"### Tessera budget: ❌ {len(failed)} of {len(results)} rules broken" if failed
            else f"### Tessera budget: ✅ all {len(results)} rules pass")
    lines = [head, "", f"session `{session}`", "", "| | rule | result |", "|---|---|---|"]
    for r in sorted(results, key=lambda r: r.passed):
        lines.append(f"| {'✅' if r.passed else '❌'} | `{r.rule.title}` | {r.message.replace('|', '∣')} |")
    return "\n".join(lines) + "\n"


def text(results: list[RuleResult]) -> str:
    lines = []
    for r in results:
        lines.append(f"{'PASS' if r.passed else 'FAIL'}  {r.rule.title}: {r.message}")
        if not r.passed:
            lines += [f"        {d}" for d in r.details[1:10]]
    failed = sum(not r.passed for r in results)
    lines.append(f"{failed} of {len(results)} rule(s) broken" if failed else f"all {len(results)} rule(s) pass")
    return "\n".join(lines)

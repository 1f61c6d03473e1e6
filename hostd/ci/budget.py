"""`tessera check`: a session held to a budget (TOML), a verdict per rule, JUnit XML and Markdown.

Role: `load_budget(text)` parses and validates a budget file (tomllib) into Rules; every key is
one of `KEYS` (an unknown key is an error naming the allowed ones; the keys reserved for
counters (#27) and advice (#28), and the compiler-model figures sessions do not carry, are
errors saying so: `RESERVED`). `check(run, rules, baseline)` evaluates each rule against a
runs.Run into RuleResults (one per limit: one JUnit testcase each); `junit_xml` and
`markdown` render them. Pure functions; the click edge is tools/cmd_check.py. Format and
semantics: docs/ci.md "Budgets".
"""
from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from typing import Any

from .diff import diff_runs
from .runs import Run, Workload

BUDGET_VERSION = 1
# table -> {key: what it limits}. The one list of budget keys: validation, errors and docs use it.
SCOPE_KEYS = {
    "max_gpu_us": "GPU time of all queues together, µs (the application's work; the tool's own apart)",
    "max_queue_us": "GPU time per queue, µs: a table {queue name = limit}",
}
PASS_KEYS = {
    "label": "fnmatch pattern on the label path (labels outermost first, joined by ' / ')",
    "name": "fnmatch pattern on the workload's slice name (for unlabelled work)",
    "kind": "workload kind (render_pass, dispatch, buffer_transfer, image_transfer, trace_rays, …)",
    "optional": "true: a rule matching no workload passes (default: it fails, to catch typos)",
    "max_gpu_us": "GPU time of each matching workload, µs",
    "max_queue_us": "GPU time of each matching workload per queue, µs: {queue = limit}",
    "max_draw_calls": "draw calls of each matching render pass (its draw_call_count)",
}
SHADER_KEYS = {
    "label": PASS_KEYS["label"], "name": PASS_KEYS["name"], "kind": PASS_KEYS["kind"],
    "optional": PASS_KEYS["optional"],
    "max_thread_ops": "shader thread-operations of each matching workload (tessera run --instrument)",
    "max_pipe_ops": "thread-operations per Mali pipe: {fma, cvt, sfu, ls, tex, var = limit}",
    "max_cycles": "cycles of one shader core on the bound pipe: max over pipes of thread-ops / the pipe's "
                  "rate (the DEVICE's pipe_rates; a session folder run with --instrument)",
}
BASELINE_KEYS = {"max_regression": "allowed growth over the --baseline session, e.g. \"5%\""}
KEYS: dict[str, dict[str, str]] = {"frame": SCOPE_KEYS, "session": SCOPE_KEYS, "pass": PASS_KEYS,
                                   "shader": SHADER_KEYS, "baseline": BASELINE_KEYS}
TOP_KEYS = {"version": f"the budget format's version ({BUDGET_VERSION})", **{k: "table" for k in KEYS}}
# Keys that will mean something but do not yet, or that a session cannot answer: a clear error each.
RESERVED = {
    "counters": "counter budgets need GPU counters in the session (#27: not implemented yet)",
    "max_counters": "counter budgets need GPU counters in the session (#27: not implemented yet)",
    "max_bandwidth": "bandwidth budgets need GPU counters in the session (#27: not implemented yet)",
    "advice": "advice budgets need the advisor's findings in the session (#28: not implemented yet)",
    "max_advice": "advice budgets need the advisor's findings in the session (#28: not implemented yet)",
    "max_registers": "work registers are the compiler model's static figure: sessions do not carry them "
                     "(check shaders with `tessera compile --format json`)",
    "max_spills": "spills are the compiler model's static figure: sessions do not carry them "
                  "(check shaders with `tessera compile --format json`)",
}
PIPES = ("fma", "cvt", "sfu", "ls", "tex", "var")


class BudgetError(ValueError):
    """The budget file is not valid (the message names the key and what is allowed)."""


@dataclass(frozen=True)
class Rule:
    scope: str                      # frame, session, pass, shader, baseline
    key: str                        # the limit's key (max_queue_us.fragment for one queue)
    limit: float
    label: str | None = None
    name: str | None = None
    kind: str | None = None
    optional: bool = False
    index: int = 0                  # the [[pass]] / [[shader]] entry's position

    @property
    def title(self) -> str:
        what = " ".join(f"{k}={v!r}" for k, v in (("label", self.label), ("name", self.name), ("kind", self.kind))
                        if v is not None)
        scope = f"{self.scope}[{self.index}] {what}" if self.scope in ("pass", "shader") else self.scope
        return f"{scope}: {self.key} <= {_fmt(self.key, self.limit)}"


@dataclass
class RuleResult:
    rule: Rule
    passed: bool
    message: str                    # one line: what broke (or what was checked)
    details: list[str] = field(default_factory=list)


def _fmt(key: str, value: float) -> str:
    if key.startswith("max_regression"):
        return f"{value:g}%"
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
            if k not in ("max_queue_us", "max_pipe_ops"):
                raise BudgetError(f"{where}.{k}: expected a number, got a table")
            for sub, limit in v.items():
                if k == "max_pipe_ops" and sub not in PIPES:
                    raise BudgetError(f"{where}.{k}: unknown pipe {sub!r}; pipes: {', '.join(PIPES)}")
                rules.append(Rule(scope, f"{k}.{sub}", _number(f"{where}.{k}.{sub}", limit), index=index, **match))
        elif k in ("max_queue_us", "max_pipe_ops"):
            raise BudgetError(f"{where}.{k}: expected a table {{name = limit}}, got {v!r}")
        else:
            rules.append(Rule(scope, k, _number(f"{where}.{k}", v), index=index, **match))
    return rules


def load_budget(text: str) -> tuple[list[Rule], float | None]:
    """(rules, the baseline's max regression in % or None) of a budget file's text."""
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


def _value(rule: Rule, w: Workload, rates: dict[str, float] | None = None) -> float | None:
    """The rule's figure of one workload in µs or count; None when the workload has none."""
    key, _, sub = rule.key.partition(".")
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


def _evaluate(rule: Rule, run: Run, rates: dict[str, float] | None) -> RuleResult:
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
    values = [(v, w) for w in matched if (v := _value(rule, w, rates)) is not None]
    if not values:
        what = "shader cost (run with --instrument)" if rule.scope == "shader" else "this figure"
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


def _baseline(run: Run, base: Run, percent: float) -> list[RuleResult]:
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
    return out


def check(run: Run, rules: list[Rule], baseline: Run | None = None, regression: float | None = None,
          rates: dict[str, float] | None = None) -> list[RuleResult]:
    """A verdict per rule; `rates` (pipe_rates_of) is needed when needs_pipe_rates(rules)."""
    if needs_pipe_rates(rules) and not rates:
        raise BudgetError("max_cycles needs the pipe rates of the session (pipe_rates_of)")
    results = [_evaluate(r, run, rates) for r in rules]
    if baseline is not None:
        results += _baseline(run, baseline, regression if regression is not None else 0.0)
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

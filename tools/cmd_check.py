"""`tessera check SESSION --budget FILE.toml`: exit 1 when the session breaks its budget.

The logic is hostd/ci/budget.py; this is the click edge. Exit codes: 0 every rule passes, 1 a
rule is broken, 2 the budget file, an option or an input is unusable (one line, no traceback).
docs/ci.md "Budgets".
"""
from __future__ import annotations

from pathlib import Path

import click


class InputProblem(click.ClickException):
    """A budget file, option or input that cannot be used: exit 2, apart from a broken budget's 1."""
    exit_code = 2


class Percentage(click.ParamType):
    name = "PERCENT"

    def convert(self, value, param, ctx):
        from tessera.hostd.ci.budget import BudgetError, parse_regression

        if isinstance(value, float):
            return value
        try:
            return parse_regression("--max-regression", value)
        except BudgetError as e:
            self.fail(str(e), param, ctx)


@click.command("check")
@click.argument("session", type=click.Path(exists=True, path_type=Path))
@click.option("--budget", "budget_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Budget file (TOML, docs/ci.md).")
@click.option("--baseline", type=click.Path(exists=True, path_type=Path), default=None,
              help="Also fail when the session's GPU time (per queue, per workload) or its bandwidth and the "
                   "budget's [baseline] counters (session, per workload) grew over this session's.")
@click.option("--max-regression", type=Percentage(), default=None,
              help="Allowed growth over --baseline, e.g. 5% (default: the budget's [baseline], else 0%).")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a JUnit XML report here (one testcase per rule).")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a Markdown summary here (e.g. for $GITHUB_STEP_SUMMARY).")
def check(session: Path, budget_file: Path | None, baseline: Path | None, max_regression: float | None,
          junit: Path | None, markdown_path: Path | None) -> None:
    """Check a session (or merged trace) against a GPU budget; exit 1 when a rule is broken."""
    from tessera.hostd.ci import budget as b
    from tessera.hostd.ci.runs import RunError, read_run
    from tessera.schemas.files import InputError, OutputError, read_input, write_atomic

    if budget_file is None and baseline is None:
        raise InputProblem("nothing to check: give --budget FILE.toml and/or --baseline BASE")
    rules, regression = [], None
    if budget_file is not None:
        try:
            rules, regression = b.load_budget(read_input(budget_file, 1 << 20, "budget file").decode("utf-8"))
        except (b.BudgetError, UnicodeDecodeError) as e:
            raise InputProblem(f"{budget_file}: {e}") from None
        except (InputError, OSError) as e:
            raise InputProblem(str(e)) from None
    if max_regression is not None:
        regression = max_regression
    if regression is not None and baseline is None:
        raise InputProblem("a max regression needs --baseline BASE")
    if any(r.scope == "baseline" for r in rules) and baseline is None:
        raise InputProblem("[baseline] counters need --baseline BASE")
    try:
        run = read_run(session)
        base = read_run(baseline) if baseline is not None else None
    except RunError as e:
        raise InputProblem(str(e)) from None
    for r in (run, base):
        for p in (r.problems if r else [])[:5]:
            click.echo(f"tessera check: {p}", err=True)
    rates = None
    if b.needs_pipe_rates(rules):
        if not session.is_dir():
            raise InputProblem(f"{session}: max_cycles needs the session folder (its devices' pipe rates), "
                               "not a merged trace")
        try:
            rates = b.pipe_rates_of(session)
        except b.BudgetError as e:
            raise InputProblem(str(e)) from None
    from tessera.hostd.ci.metrics import NoCounters, run_advice, run_counters

    counters = base_counters = findings = None
    try:
        if b.needs_counters(rules):
            counters = run_counters(run)
            if base is not None:
                base_counters = run_counters(base)
        elif base is not None:          # bandwidth is compared whenever both sessions have counters
            try:
                counters, base_counters = run_counters(run), run_counters(base)
            except NoCounters:
                counters = base_counters = None
    except NoCounters as e:
        raise InputProblem(str(e)) from None
    if b.needs_advice(rules):
        try:
            findings = run_advice(session).findings
        except RunError as e:
            raise InputProblem(str(e)) from None
    results = b.check(run, rules, base, regression, rates, counters, base_counters, findings)
    try:
        if junit is not None:
            write_atomic(junit, b.junit_xml(results, f"tessera check {session}"))
        if markdown_path is not None:
            write_atomic(markdown_path, b.markdown(results, str(session)).encode())
    except OutputError as e:
        raise InputProblem(str(e)) from None
    click.echo(b.text(results))
    if not all(r.passed for r in results):
        raise SystemExit(1)

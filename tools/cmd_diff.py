"""`tessera diff BASE NEW`: two sessions (or merged traces) compared workload by workload.

The logic is hostd/ci/diff.py (workloads matched by identity, not tag numbers); this is the
click edge (it reads the counters and the advice it passes: hostd/ci/metrics.py). Exit 0
whatever changed (a gate is `tessera check --baseline`); exit 1 only when an input cannot be
read. docs/ci.md.
"""
from __future__ import annotations

from pathlib import Path

import click


@click.command("diff")
@click.argument("base", type=click.Path(exists=True, path_type=Path))
@click.argument("new", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True,
              help="markdown: for a pull-request comment; json: every changed workload.")
@click.option("--advice/--no-advice", default=True, show_default=True,
              help="Also compare the advisor's findings (new and gone ones).")
def diff(base: Path, new: Path, fmt: str, advice: bool) -> None:
    """Compare two sessions or merged traces: GPU time per queue, per pass/dispatch, counters and
    bandwidth, new and removed workloads, shader cost, advice."""
    from tessera.hostd.ci.diff import diff_runs, format_diff
    from tessera.hostd.ci.metrics import NoCounters, run_advice, run_counters
    from tessera.hostd.ci.runs import RunError, read_run

    try:
        runs = [read_run(base), read_run(new)]
        findings = [run_advice(base).findings, run_advice(new).findings] if advice else [None, None]
    except RunError as e:
        raise click.ClickException(str(e)) from None
    for r in runs:
        for p in r.problems[:5]:
            click.echo(f"tessera diff: {p}", err=True)
    counters, missing = [], []
    for r in runs:
        try:
            counters.append(run_counters(r))
        except NoCounters as e:
            counters.append(None)
            missing.append(str(e))
    if None in counters:
        if len(missing) == 1:           # neither having counters is no news; one of two is
            click.echo(f"tessera diff: counters not compared: {missing[0]}", err=True)
        counters = [None, None]
    click.echo(format_diff(diff_runs(*runs, *counters, *findings), fmt))

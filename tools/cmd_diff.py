"""`tessera diff BASE NEW`: two sessions (or merged traces) compared workload by workload.

The logic is hostd/ci/diff.py (workloads matched by identity, not tag numbers); this is the
click edge. Exit 0 whatever changed (a gate is `tessera check --baseline`); exit 1 only when
an input cannot be read. docs/ci.md.
"""
from __future__ import annotations

from pathlib import Path

import click


@click.command("diff")
@click.argument("base", type=click.Path(exists=True, path_type=Path))
@click.argument("new", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True,
              help="markdown: for a pull-request comment; json: every changed workload.")
def diff(base: Path, new: Path, fmt: str) -> None:
    """Compare two sessions or merged traces: GPU time per queue, per pass/dispatch, new and removed
    workloads, shader cost."""
    from tessera.hostd.ci.diff import diff_runs, format_diff
    from tessera.hostd.ci.runs import RunError, read_run

    try:
        runs = [read_run(base), read_run(new)]
    except RunError as e:
        raise click.ClickException(str(e)) from None
    for r in runs:
        for p in r.problems[:5]:
            click.echo(f"tessera diff: {p}", err=True)
    click.echo(format_diff(diff_runs(*runs), fmt))

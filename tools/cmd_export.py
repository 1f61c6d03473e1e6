"""`tessera export SESSION… --format arm|parquet` and `tessera sql "SELECT …" SESSION…`.

The click edge of two exporters: `arm` (hostd/arm_export.py: one session as the files Arm's GPU
Timeline viewer opens, docs/arm.md) and `parquet` (hostd/ci/tables.py: many sessions as stable
tables, docs/ci.md "Tables"), and of the SQL command over those tables (DuckDB, embedded).
pyarrow and duckdb are imported only when a parquet export or a query runs.
"""
from __future__ import annotations

from pathlib import Path

import click

DEFAULT_PARQUET_FOLDER = "tables"


@click.command("export")
@click.argument("sessions", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["arm", "parquet"]), required=True,
              help="arm: Arm GPU Timeline viewer files (.metadata + Perfetto trace per process), one session "
                   "folder; parquet: the sessions, workloads, gpu_events, shader_blocks, counters and advice "
                   "tables of every SESSION (folder or merged trace).")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Output folder (arm: default SESSION/arm; parquet: default ./{DEFAULT_PARQUET_FOLDER}).")
@click.option("--no-advice", is_flag=True,
              help="parquet: leave the advice table empty (sessions.advice_gpu NULL): the advisor is most of "
                   "the export's time.")
def export(sessions: tuple[Path, ...], fmt: str, out: Path | None, no_advice: bool) -> None:
    """Export sessions for other tools: Arm's timeline viewer, or Parquet tables (Spark, Trino, DuckDB)."""
    if fmt == "arm":
        _arm(sessions, out)
    else:
        _parquet(sessions, out or Path(DEFAULT_PARQUET_FOLDER), not no_advice)


def _arm(sessions: tuple[Path, ...], out: Path | None) -> None:
    from tessera.hostd.arm_export import ExportError, export_arm

    if len(sessions) != 1 or not sessions[0].is_dir():
        raise click.BadParameter("--format arm exports one session folder", param_hint="SESSIONS")
    try:
        result = export_arm(sessions[0], out)
    except ExportError as e:
        raise click.ClickException(str(e)) from e
    for pid in sorted(result.frames):
        click.echo(f"pid {pid}: {result.frames[pid]} frame(s), {result.packets.get(pid, 0)} GPU packet(s)")
    for p in result.problems[:20]:
        click.echo(f"  problem: {p}", err=True)
    for f in result.files:
        click.echo(str(f))


def _parquet(sessions: tuple[Path, ...], out: Path, advice: bool) -> None:
    from tessera.hostd.ci.tables import TablesError, export_parquet

    try:
        result = export_parquet(list(sessions), out, advice)
    except TablesError as e:
        raise click.ClickException(str(e)) from None
    for p in result.problems[:20]:
        click.echo(f"tessera export: {p}", err=True)
    click.echo(f"{result.sessions} session(s): " + ", ".join(f"{t} {n}" for t, n in result.rows.items()) + " rows")
    for f in result.files:
        click.echo(str(f))


@click.command("sql")
@click.argument("query")
@click.argument("sessions", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "csv", "json"]), default="text", show_default=True)
def sql(query: str, sessions: tuple[Path, ...], fmt: str) -> None:
    """Run QUERY (DuckDB SQL) over the tables of SESSIONS: session folders and merged traces, or
    folders `tessera export --format parquet` wrote. Tables: sessions, workloads, gpu_events,
    shader_blocks, counters, advice (docs/ci.md)."""
    from tessera.hostd.ci.tables import TablesError, format_rows
    from tessera.hostd.ci.tables import query as run_query

    try:
        result = run_query(query, list(sessions))
    except TablesError as e:
        raise click.ClickException(str(e)) from None
    for p in result.problems[:20]:
        click.echo(f"tessera sql: {p}", err=True)
    click.echo(format_rows(result, fmt))

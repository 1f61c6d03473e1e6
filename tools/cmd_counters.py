"""`tessera counters SESSION [--per workload|frame] [--csv DIR | --json]`: Mali counters by Arm's names.

The click edge of hostd/counters.py: a table on stdout, the JSON document, or the CSV files Arm's
`lglpy/comms/service_gpu_profile.py` writes (per workload: frame_NNNNN.csv per frame; per frame:
capture.csv), so scripts written for Arm's layer_gpu_profile read Tessera's. docs/counters.md.
"""
from __future__ import annotations

import json
from pathlib import Path

import click

# The columns the text table shows (all are in --csv and --json): Arm's names, short.
HEADLINE = ("MaliGPUActiveCy", "MaliNonFragThread", "MaliFragThread", "MaliGeomTotalPrim", "MaliGeomVisiblePrim",
            "MaliExtBusRdBy", "MaliExtBusWrBy")


@click.command("counters")
@click.argument("session", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--per", type=click.Choice(["workload", "frame"]), default="workload", show_default=True,
              help="One row per workload (render pass, dispatch, transfer…) or per frame.")
@click.option("--csv", "csv_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write Arm's layer_gpu_profile CSV files into this folder (frame_NNNNN.csv or capture.csv).")
@click.option("--json", "as_json", is_flag=True, help="Print the counters as JSON.")
def counters(session: Path, per: str, csv_dir: Path | None, as_json: bool) -> None:
    """Mali counters of SESSION, measured or modelled, by Arm's counter names."""
    from tessera.hostd import counters as hc
    from tessera.schemas.files import OutputError

    if csv_dir is not None and as_json:
        raise click.UsageError("--csv and --json are alternatives: give one")
    s = hc.read_session(session)
    if s.empty:
        raise click.ClickException(f"{session}: no GPU trace with Mali counters (run it with this Tessera; "
                                   "TESSERA_COUNTERS=0 turns them off) and no Arm layer_gpu_profile stream")
    if as_json:
        click.echo(json.dumps(hc.as_json(s, per), indent=1, sort_keys=False))
        return
    if csv_dir is not None:
        try:
            for path in hc.write_csv(s, csv_dir, per):
                click.echo(str(path))
        except (OSError, OutputError) as e:
            raise click.ClickException(str(e)) from None
        return
    click.echo(format_table(s, per))


def format_table(s, per: str) -> str:
    from tessera.schemas.counters import MEASURED_ONLY   # measured, never modelled: a column only when some value is

    cols = [c for c in HEADLINE if s.has(c) and (c not in MEASURED_ONLY or any(c in w.counters for w in s.workloads))]
    head = ["frame", "index", "type"] if per == "workload" else ["frame", "workloads"]
    rows = []
    if per == "workload":
        for w in s.workloads:
            rows.append([str(w.frame if w.frame is not None else "-"), str(w.index), w.arm_type,
                         *(_num(w.counters.get(c)) + ("*" if c in w.measured else "") for c in cols),
                         " / ".join(w.labels)])
    else:
        for f in s.frames:
            rows.append([str(f.frame), str(len(f.workloads)), *(_num(f.counters.get(c)) for c in cols), ""])
    header = head + cols + ["labels" if per == "workload" else ""]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    lines = [f"{s.device}: {len(s.workloads)} workloads, {len(s.frames)} frames"]
    for r in [header] + rows:
        lines.append("  ".join(x.rjust(w) if i < len(r) - 1 else x for i, (x, w) in enumerate(zip(r, widths))).rstrip())
    if per == "workload" and any(w.measured for w in s.workloads):
        lines.append("* measured by the backend's pipeline-statistics queries (--counters measured; visible "
                     "primitives: positions captured by transform feedback, culled as a Mali culls); the rest modelled")
    return "\n".join(lines)


def _num(v) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"

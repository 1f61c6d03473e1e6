"""`tessera demo`: the example applications end to end on the emulated Mali GPU.

Runs vulkaninfo and every example app (Python and C) like `tessera run`
does (emulated Mali driver over lavapipe, Tessera layer, an embedded host
daemon), merges each session into one Perfetto trace, and prints one line
per app: its own result check, its GPU workloads, and the merged trace to
open in ui.perfetto.dev (`tessera view TRACE`). Each app's session folder
under `--out` (replaced at every demo run) keeps its merged trace,
`summary.txt` (the `tessera run` table), `app-output.txt` and `report.html` (`tessera report
--html`: the render graph and the advice, docs/advice.md); the examples run with
per-region counters (REGIONS) also keep their heatmaps in `regions/`.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click

from tessera.schemas.files import FILE_MODE, private_folder, write_atomic
from tessera.vkapi import paths

from .launch import LaunchConfig, environment, ensure_shims, run_with_embedded_daemon

EXAMPLES = ["compute_collatz", "render_passes", "transfers", "debug_labels", "ray_tracing", "ray_query",
            "shader_costs", "mlp_tensors", "conv_net_graph", "overdraw"]
# Run with per-basic-block shader instrumentation (tessera run --instrument); their summary.txt
# then carries the report of the most expensive draws and dispatches.
INSTRUMENTED = frozenset({"shader_costs"})
# Run with per-region counters (tessera run --regions COUNTERS); the merge then writes their heatmaps
# into the session folder's regions/ (docs/regions.md).
REGIONS = {"overdraw": "all"}


def _apps(root: Path) -> list[tuple[str, list[str]]]:
    apps = [(name, [sys.executable, str(root / "examples" / f"{name}.py")]) for name in EXAMPLES]
    apps.append(("compute_and_draw", [str(paths.BUILD_DIR / "examples" / "compute_and_draw")]))
    return apps


@click.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("tessera-out/demo"),
              show_default=True, help="Folder for the demo's session folders.")
def demo(out: Path) -> None:
    """Run every example under Tessera and merge its trace; exit 1 if any fails."""
    from tessera.hostd.advice import analyse
    from tessera.hostd.advice.report import write_html
    from tessera.hostd.embedded import merge_session, summary

    ensure_shims()
    root = paths.SOURCE_ROOT
    subprocess.run(["make", "-s", "-C", str(root / "examples")], check=True)
    info = subprocess.run(["vulkaninfo", "--summary"], env=environment(LaunchConfig(out / "vulkaninfo")),
                          capture_output=True, text=True)
    device = next((line.split("=", 1)[1].strip() for line in info.stdout.splitlines()
                   if line.strip().startswith("deviceName")), "no device")
    click.echo(f"device seen through the loader: {device}")
    failures = 0
    for name, argv in _apps(root):
        session = out / name
        shutil.rmtree(session, ignore_errors=True)   # the demo's own folder: each run starts clean
        start = time.perf_counter()
        proc_out = session / "app-output.txt"
        private_folder(session)
        with open(os.open(proc_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE), "w") as f:
            code = run_with_embedded_daemon(LaunchConfig(session, instrument=name in INSTRUMENTED,
                                                         regions=REGIONS.get(name)), argv, stdout=f,
                                            stderr=subprocess.STDOUT)
        took = time.perf_counter() - start
        lines = proc_out.read_text().splitlines()
        check = next((ln for ln in reversed(lines) if ln.startswith(f"{name}:")), lines[-1] if lines else "")
        result = merge_session(session)
        write_atomic(session / "summary.txt", (summary(result) + "\n").encode())
        analysis = analyse(session)
        write_html(analysis, result.summary, session, session / "regions", session / "report.html")
        ok = code == 0 and not result.events_without_metadata
        failures += not ok
        click.echo(f"  {'ok  ' if ok else 'FAIL'} {name:18s} {took:5.2f} s  {check[:110]}")
        click.echo(f"       {result.gpu_events} GPU events, {result.events_without_metadata} without metadata -> "
                   f"{result.output}")
        click.echo(f"       {len(analysis.findings)} advice finding(s) -> {session / 'report.html'}")
    if failures:
        raise SystemExit(1)
    click.echo(f"all {len(EXAMPLES) + 1} applications passed their own checks on the emulated Mali; "
               f"open a trace with `tessera view <merged trace>`")

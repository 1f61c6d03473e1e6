"""`tessera demo`: the example applications end to end on the emulated Mali GPU.

Runs vulkaninfo and every example app (Python and C) under `tessera run`
(emulated Mali driver over lavapipe, Tessera layer enabled) and prints one
line per app with its own result check and its session folder.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import click

from tessera.vkapi import paths

from .launch import LaunchConfig, environment, ensure_shims

EXAMPLES = ["compute_collatz", "render_passes", "transfers", "debug_labels"]


def _apps(root: Path) -> list[tuple[str, list[str]]]:
    apps = [(name, [sys.executable, str(root / "examples" / f"{name}.py")]) for name in EXAMPLES]
    apps.append(("compute_and_draw (C)", [str(paths.BUILD_DIR / "examples" / "compute_and_draw")]))
    return apps


@click.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("tessera-out/demo"),
              show_default=True, help="Folder for the demo's session folders.")
def demo(out: Path) -> None:
    """Run every example under Tessera; exit 1 if any fails."""
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
        session = out / name.split()[0]
        session.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        proc = subprocess.run(argv, env=environment(LaunchConfig(session)), capture_output=True, text=True)
        took = time.perf_counter() - start
        ok = proc.returncode == 0
        failures += not ok
        summary = (proc.stdout.strip().splitlines() or [""])[-1] if ok else proc.stderr.strip()[-400:]
        click.echo(f"  {'ok  ' if ok else 'FAIL'} {name:22s} {took:5.2f} s  {summary}")
    if failures:
        raise SystemExit(1)
    click.echo(f"all {len(EXAMPLES) + 1} applications passed their own checks on the emulated Mali; "
               f"session folders under {out}")

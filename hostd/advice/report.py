"""What `tessera report` adds from the advisor: the advice as text, the `advice` JSON, the HTML page.

Role: the glue between hostd/cli.py's `report` and the advisor, so the command stays a thin edge:
`advise_target` analyses a session folder or merged trace (None, with one stderr line, when it
cannot: the summary still prints), `format_advice` lists the findings by what each saves,
`write_html` writes the page atomically (schemas/files.py).
"""
from __future__ import annotations

from pathlib import Path

import click

from . import Analysis


def advise_target(target: Path) -> Analysis | None:
    from ..ci.runs import RunError
    from . import analyse

    try:
        return analyse(target)
    except RunError as e:
        click.echo(f"tessera report: no advice: {e}", err=True)
        return None


def _ns(ns: int) -> str:
    return f"{ns / 1000:10.3f} us"


def format_advice(analysis: Analysis, top: int) -> str:
    """The findings, the largest saving first, `top` of them in full (0: all)."""
    found = analysis.findings
    gpu = analysis.gpu.name + (" (assumed)" if analysis.gpu.assumed else "")
    lines = [f"advice: {len(found)} finding(s) on {gpu}, by what each saves"
             f" ({sum(f.saves_ns for f in found)} ns in all; `--json` or `--html` for the render graph)"]
    shown = found if top == 0 else found[:top]
    for f in shown:
        saving = f"{f.saves_cycles} cycles" + (f", {f.saves_bytes} bytes" if f.saves_bytes else "")
        lines += [f"{_ns(f.saves_ns)}  {f.rule:<24} {f.severity:<7}  {f.workload}",
                  f"{'':15}{f.what} ({saving})",
                  f"{'':15}fix: {f.fix}"]
    if len(shown) < len(found):
        lines.append(f"  … and {len(found) - len(shown)} more (--top 0 lists every one)")
    return "\n".join(lines)


def write_html(analysis: Analysis, summary, target: Path, regions: Path, path: Path) -> None:
    """The self-contained page of `target` at `path` (click.ClickException when it cannot be written)."""
    from tessera.schemas.files import OutputError, write_atomic

    from .html import render

    text = render(analysis, summary.to_json(), f"Tessera report: {Path(target).name}", regions)
    try:
        write_atomic(path, text.encode("utf-8"))
    except OutputError as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{path}: cannot write it ({e.strerror or e})") from None

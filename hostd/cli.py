"""Click commands of the host side: `tessera hostd`, `merge`, `report`, `view`.

Settings are parsed here, at the edge (parameter types turn bad addresses
and modes into usage errors), and handed down as frozen dataclasses.
tools/cli.py imports this module only when one of these commands runs.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import threading
from pathlib import Path

import click

from .config import (DEFAULT_HELLO_TIMEOUT, DEFAULT_MAX_BUFFERED, DEFAULT_MAX_CONNECTIONS, AddressError,
                     DaemonConfig, Validation, parse_address)


class AddressType(click.ParamType):
    name = "unix:PATH|tcp:127.0.0.1:PORT|tcp:[::1]:PORT"

    def convert(self, value, param, ctx):
        try:
            return parse_address(value)
        except AddressError as e:
            self.fail(str(e), param, ctx)


class ArmAddressType(AddressType):
    name = "abstract:NAME|unix:PATH|tcp:127.0.0.1:PORT"

    def convert(self, value, param, ctx):
        from .arm_listener import parse_arm_address

        try:
            return parse_arm_address(value)
        except AddressError as e:
            self.fail(str(e), param, ctx)


def default_socket_dirs() -> tuple[Path, ...]:
    """The default socket's folders, outermost first; each must be this user's and private
    (daemon.private_dir): in a shared /tmp another user could have made them first."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return (Path(runtime) / "tessera",)
    base = Path(tempfile.gettempdir()) / f"tessera-{os.getuid()}"
    return (base, base / "tessera")


def default_listen() -> str:
    return f"unix:{default_socket_dirs()[-1] / 'hostd.sock'}"


@click.command("hostd")
@click.option("--listen", type=AddressType(), default=None,
              help="unix:PATH (default $XDG_RUNTIME_DIR/tessera/hostd.sock), tcp:127.0.0.1:PORT or "
                   "tcp:[::1]:PORT (loopback only).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("tessera-out/hostd"),
              show_default=True, help="Folder for the per-connection session folders.")
@click.option("--validate", type=click.Choice([v.value for v in Validation]), default="warn", show_default=True,
              help="Check payloads against the JSON Schemas: strict rejects bad frames, warn logs them.")
@click.option("--max-frame", type=click.IntRange(min=64), default=None, metavar="BYTES",
              help="Largest JSON payload accepted (default 16 MiB); a larger length closes the connection.")
@click.option("--drain-timeout", type=click.FloatRange(min=0), default=10.0, show_default=True,
              help="Seconds connections get to finish after SIGINT/SIGTERM.")
@click.option("--hello-timeout", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_HELLO_TIMEOUT,
              show_default=True, help="Seconds a new connection gets to send its HELLO (after it, idle is fine).")
@click.option("--max-connections", type=click.IntRange(min=1), default=DEFAULT_MAX_CONNECTIONS, show_default=True,
              help="Open connections; more are closed at once (the layer spools and retries).")
@click.option("--max-buffered", type=click.IntRange(min=1), default=DEFAULT_MAX_BUFFERED, show_default=True,
              metavar="BYTES", help="Partial frames held across all connections; the one going above is closed.")
@click.option("--arm-listen", "arm_listen", type=ArmAddressType(), multiple=True, metavar="ADDRESS",
              help="Also accept Arm's GPU Timeline layer (libGPULayers) on abstract:lglcomms (its default), "
                   "unix:PATH or tcp:127.0.0.1:PORT; repeatable. docs/arm.md.")
@click.option("--verbose", "-v", is_flag=True, help="Log connections as well as problems.")
def hostd(listen, out, validate, max_frame, drain_timeout, hello_timeout, max_connections, max_buffered,
          verbose, arm_listen=()) -> None:
    """Receive the Tessera layer's stream; one session log per connection. Stop with Ctrl-C."""
    from .daemon import DaemonError, serve

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")
    address = listen or parse_address(default_listen())
    options = {} if max_frame is None else {"max_frame": max_frame}
    cfg = DaemonConfig(address, out, Validation(validate), drain_timeout=drain_timeout, hello_timeout=hello_timeout,
                       max_connections=max_connections, max_buffered=max_buffered,
                       private_dirs=() if listen else default_socket_dirs(), **options)

    extra = []
    if arm_listen:
        from .arm_listener import ArmListener, describe
        extra.append(ArmListener(cfg, list(arm_listen)))

    def ready(bound) -> None:
        click.echo(f"tessera hostd: listening on {bound}; sessions in {out}", err=True)
        click.echo(f"  export TESSERA_HOSTD={bound}", err=True)
        for x in extra:
            for a in x.bound:
                click.echo(f"tessera hostd: Arm GPU Timeline layer on {describe(a)}", err=True)

    try:
        asyncio.run(serve(cfg, ready, extra))
    except DaemonError as e:
        raise click.ClickException(str(e)) from e


@click.command("merge")
@click.argument("session_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Merged trace (default SESSION_DIR/merged.perfetto-trace).")
@click.option("--progress/--no-progress", default=None, help="Progress line on stderr (default: for large traces).")
def merge(session_dir, output, progress) -> None:
    """Merge a session's layer logs, spools and GPU trace into one Perfetto trace."""
    from .merge import MergeError, format_result, merge_session

    if output is not None and not output.name:
        given = "empty" if str(output) in ("", ".") else f"{str(output)!r} names no file"
        raise click.BadParameter(f"{given}: give the merged trace's file name", param_hint="'-o' / '--output'")
    try:
        result = merge_session(session_dir, output, progress=progress)
    except MergeError as e:
        raise click.ClickException(str(e)) from e
    click.echo(format_result(result))
    click.echo(str(result.output))


def _newer(trace: Path, session_dir: Path) -> bool:
    """Whether `trace` is newer than every input the merge would read (Arm's included)."""
    from .merge import find_inputs

    inputs = find_inputs(session_dir)
    mtime = trace.stat().st_mtime_ns
    return all(p.stat().st_mtime_ns <= mtime for p in inputs.logs + inputs.spools + inputs.gpu_traces + inputs.arm)


@click.command("report")
@click.argument("target", type=click.Path(exists=True, path_type=Path))
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="Longest workloads, and most expensive draws/dispatches of an instrumented session, to list.")
@click.option("--blocks", type=click.IntRange(min=0), default=5, show_default=True,
              help="Hottest basic blocks shown per shader stage (0: every executed block).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (with the render graph and advice).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write one self-contained HTML page here: summary, timeline, render graph, heatmaps, advice.")
def report(target, top, blocks, as_json, html_path) -> None:
    """Summarise a session folder (merging it if needed) or a merged trace.

    For a session run with --instrument, also rank its most expensive draws and dispatches by
    total shader thread-operations, with the hottest basic blocks of each and their SPIR-V.
    A merged trace holds only what its slices' args carry (per-slice totals, a render pass's
    top draws): report the session folder for the blocks. A session run with --regions also
    lists its per-region heatmaps (SESSION/regions/*.png). Every report ends with the advice: what
    to change in the frame and what each change saves on the emulated Mali (docs/advice.md)."""
    from tessera.schemas.files import InputError, check_input
    from tessera.schemas.perfetto import TraceFormatError

    from .merge import MERGED_NAME, MergeError, find_inputs, merge_session
    from .metadata import load
    from .shaders import rank
    from .summary import format_summary, summarize_trace

    problems: list[str] = []        # lines for stderr: the merge's problems
    damaged: list[str] = []         # the merged trace's damaged stretches

    def read(trace: Path):
        """A merged trace read as far as it is whole (the merge's reader); damage is listed."""
        check_input(trace, "merged trace")         # a FIFO or a device is refused, never opened
        return summarize_trace(trace, top, lambda offset, message: damaged.append(
            f"{trace}: at byte {offset}: {message}"))

    try:
        if target.is_dir():
            merged = target / MERGED_NAME
            if merged.exists() and _newer(merged, target):
                summary = read(merged)
                inputs = find_inputs(target)
                summary.shaders = rank(load(inputs.logs + inputs.spools), top, blocks)
            else:
                result = merge_session(target, top=top, blocks=blocks)
                summary = result.summary
                click.echo(f"tessera report: merged {target} into {merged}", err=True)
                if result.problems:
                    problems.append(f"tessera report: {len(result.problems)} problem(s) in the inputs "
                                    f"(`tessera merge {target}` lists them all):")
                    problems += [f"  {p}" for p in result.problems[:5]]
        else:
            summary = read(target)
    except (MergeError, TraceFormatError) as e:
        raise click.ClickException(f"{target}: {e}") from None
    except (InputError, OSError) as e:
        raise click.ClickException(str(e) if isinstance(e, InputError) else f"{target}: cannot read it "
                                   f"({e.strerror or e})") from None
    if damaged:
        problems = [f"tessera report: {len(damaged)} damaged stretch(es) skipped; the summary covers the rest:",
                    *(f"  {line}" for line in damaged[:20])]
    for line in problems:
        click.echo(line, err=True)
    from .counters import format_headline, headline   # Mali counters (docs/counters.md)

    counters = headline(target) if target.is_dir() else None
    # Per-region counters' heatmaps (tessera run --regions; written by the merge or `tessera regions`)
    folder = (target if target.is_dir() else target.parent) / "regions"
    heatmaps = sorted(str(p) for p in folder.glob("*.png")) if folder.is_dir() else []
    from .advice.report import advise_target, format_advice, write_html

    analysis = advise_target(target)
    if html_path is not None and analysis is not None:
        write_html(analysis, summary, target, folder, html_path)
    if as_json:
        data = summary.to_json()
        if counters is not None:
            data["counters"] = counters
        if heatmaps:
            data["heatmaps"] = heatmaps
        if analysis is not None:
            data["advice"] = analysis.to_json()
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(format_summary(summary, detail=True))
    if counters is not None:
        click.echo(format_headline(counters))
    if heatmaps:
        click.echo(f"per-region heatmaps ({len(heatmaps)}, `tessera regions` lists or redraws them)")
        for path in heatmaps:
            click.echo(f"  {path}")
    if analysis is not None:
        click.echo(format_advice(analysis, top))
    if html_path is not None and analysis is not None:
        click.echo(f"HTML report: {html_path}")


@click.command("view")
@click.argument("trace", type=click.Path(exists=True, path_type=Path))
@click.option("--port", type=click.IntRange(0, 65535), default=9001, show_default=True)
@click.option("--once", is_flag=True, help="Exit after the UI fetched the trace once.")
def view(trace, port, once) -> None:
    """Serve TRACE on 127.0.0.1 for ui.perfetto.dev and print the link to open."""
    from tessera.schemas.files import InputError

    from .merge import MERGED_NAME
    from .view import NotATrace, check_trace, serve

    if trace.is_dir():
        trace = trace / MERGED_NAME
        if not trace.exists():
            raise click.ClickException(f"no {MERGED_NAME} in {trace.parent}: run `tessera merge {trace.parent}`")
    try:
        check_trace(trace)
    except NotATrace as e:
        raise click.ClickException(f"{trace}: not a Perfetto trace: {e}") from None
    except InputError as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{trace}: cannot read it: {e.strerror or e}") from None
    try:
        server = serve(trace, port)
    except OSError as e:
        raise click.ClickException(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e} (try --port)") from e
    click.echo(f"Open {server.link}")
    click.echo("(serving on 127.0.0.1 only; Ctrl-C to stop)", err=True)
    try:
        (server.served_event if once else threading.Event()).wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()

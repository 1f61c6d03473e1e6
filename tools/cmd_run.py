"""`tessera run`: an application on the emulated Mali GPU, through the layer, to one merged trace.

With no `--hostd`, an embedded host daemon (tessera.hostd.embedded) listens
on a private Unix socket for the run; when the app has exited and every
connection has ended (the logs are then complete and fsynced; the driver
appends the GPU trace synchronously at each submit, so it is complete once
the app is gone), the session is merged and the summary table and merged
trace path are printed. With `--hostd ADDRESS` the app talks to an external
daemon and nothing is merged unless `--merge` asks.

Ctrl-C or SIGTERM (interrupt.py) stops the application (the signal is passed
on; SIGKILL if it is still running KILL_AFTER seconds later or at a second
signal) and the run ends as above: the daemon lets the connections finish,
what arrived is merged, one line says so, and the exit status is 128 + the
signal's number, as a shell reports it. The session folder is locked for the
run (session_lock.py): a second run on it is refused.
"""
from __future__ import annotations

import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tessera.hostd.cli import AddressType, ArmAddressType

from .interrupt import Interrupted, Interruption
from .launch import LaunchConfig, LaunchError, default_session_dir, prepare_session_dir, run_with_embedded_daemon
from .launch import run as launch

if TYPE_CHECKING:
    from tessera.hostd.merge import MergeResult


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--backend", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Manifest (JSON) of the driver that executes the work; default: lavapipe's.")
@click.option("--gpu", default=None, metavar="NAME",
              help="The Mali to emulate: a real device's profile (icd/devices/; `tessera doctor --gpu` lists "
                   "them and what each reports) or mali-g78 (timing only); default mali-g720, the Immortalis-G720.")
@click.option("--gpu-profile", "gpu_profile", default=None, metavar="FILE.json",
              help="A Vulkan Profiles JSON of one device (e.g. your own device's gpuinfo.org export) for the "
                   "emulated device to report instead of --gpu's; its Arm core counts and rates drive the timing "
                   "where it has them.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Session folder for the outputs; default: tessera-out/<app>-<time>.")
@click.option("--instrument", is_flag=True,
              help="Measure every draw's and dispatch's shader cost per basic block (VK_ARM_shader_instrumentation).")
@click.option("--regions", "regions", is_flag=False, flag_value="all", default=None, metavar="[COUNTERS]",
              help="Per-region counters of every render pass (VK_ARM_performance_counters_by_region): "
                   "comma-separated counter names, or all (the default when no value is given).")
@click.option("--content", is_flag=True,
              help="Describe every draw's content (primitives, vertex reuse, index locality: the index data is "
                   "read back) and the images draws and dispatches read through descriptors, for the report's "
                   "advice; draws and binds then take the layer's Python path.")
@click.option("--force", is_flag=True, help="Replace what an earlier run left in the --out folder.")
@click.option("--no-layer", is_flag=True, help="Emulated driver only, without the Tessera layer.")
@click.option("--hostd", "hostd_address", type=AddressType(), default=None,
              help="Send the layer's stream to this running daemon instead of an embedded one.")
@click.option("--arm-listen", "arm_listen", type=ArmAddressType(), multiple=True, metavar="ADDRESS",
              help="The run's daemon also accepts Arm's GPU Timeline layer (libGPULayers) on abstract:lglcomms "
                   "(its default; `abstract` for short), unix:PATH or tcp:127.0.0.1:PORT; repeatable. Not with "
                   "--hostd (give that daemon --arm-listen). docs/arm.md.")
@click.option("--merge/--no-merge", "do_merge", default=None,
              help="Merge the session at the end (default: yes with the embedded daemon, no with --hostd).")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="Longest workloads listed in the summary.")
@click.option("--counters", type=click.Choice(["modelled", "measured", "off"]), default=None,
              help="Mali counters on GPU events: modelled (the default), measured (threads and primitives counted by "
                   "the backend's pipeline-statistics queries; every command then takes the driver's Python path: "
                   "docs/counters.md) or off.")
@click.argument("app", nargs=-1, required=True, type=click.UNPROCESSED)
def run(backend, gpu, gpu_profile, out, instrument, regions, content, force, no_layer, hostd_address, do_merge, top, app,
        arm_listen=(), counters=None) -> None:
    """Run APP (with its arguments, after --) and return its exit code (128 + N when signal N killed it,
    as a shell reports it). Ctrl-C or SIGTERM stops APP (SIGKILL if it is still running 5 s later),
    merges what arrived and exits with 128 + N. One run at a time per --out folder."""
    gpu = check_gpu(gpu)
    gpu_profile = check_gpu_profile(gpu_profile)
    if arm_listen and hostd_address is not None:
        raise click.UsageError("--arm-listen is for the run's own daemon; with --hostd, start that daemon with "
                               "--arm-listen instead")
    if any(a.kind == "tcp" and a.port == 0 for a in arm_listen):
        raise click.BadParameter("give a port: Arm's layer (or adb reverse) must know it before the run",
                                 param_hint="--arm-listen")
    session = out or default_session_dir(app[0])
    merge_later = do_merge if do_merge is not None else hostd_address is None
    if merge_later:   # the merge's imports (~50 ms of protos) load while the application runs
        threading.Thread(target=_import_merge, name="tessera-prefetch", daemon=True).start()
    interruption = Interruption()
    with interruption.catching():
        try:
            lock = prepare_session_dir(session, force)
        except LaunchError as e:
            raise click.ClickException(str(e)) from e
        with lock:
            cfg = LaunchConfig(session, backend, gpu, layer=not no_layer, instrument=instrument, regions=regions,
                               gpu_profile=gpu_profile, content=content)
            cfg = replace(cfg, counters=counters)
            try:
                if hostd_address is None:
                    if arm_listen:
                        from tessera.hostd.arm_listener import describe

                        for a in arm_listen:
                            click.echo(f"tessera: Arm GPU Timeline layer accepted on {describe(a)}", err=True)
                    code = run_with_embedded_daemon(cfg, list(app), arm_listen=tuple(arm_listen),
                                                    interruption=interruption)
                    merge = True if do_merge is None else do_merge
                else:
                    code = launch(replace(cfg, hostd=str(hostd_address)), list(app), interruption=interruption)
                    merge = bool(do_merge)
            except LaunchError as e:
                raise click.ClickException(str(e)) from e
            except Interrupted:
                click.echo(f"tessera: interrupted by {interruption.signal_name} before {app[0]} started; "
                           "nothing to merge", err=True)
                sys.exit(128 + interruption.signum)
            if interruption.signum is None:
                click.echo(f"tessera: {app[0]} {_how_it_ended(code)}; session outputs in {session}", err=True)
            merged = _merge(session, top, interruption) if merge else None
            if interruption.signum is not None:
                click.echo(f"tessera: interrupted by {interruption.signal_name}: {app[0]} "
                           f"{_how_it_stopped(code, interruption)}; {_what_was_merged(merged, session)}", err=True)
                sys.exit(128 + interruption.signum)
    sys.exit(128 - code if code < 0 else code)


def check_gpu(gpu: str | None) -> str | None:
    """--gpu NAME as a key of icd/profiles.py's table (any case), or a click error listing them."""
    from tessera.icd.profiles import PROFILES

    if gpu is not None and gpu.lower() not in PROFILES:
        raise click.BadParameter(f"unknown GPU {gpu!r}; known: {', '.join(sorted(PROFILES))}", param_hint="--gpu")
    return gpu.lower() if gpu is not None else None


def check_gpu_profile(path: str | None) -> Path | None:
    """--gpu-profile FILE checked before the application starts, with the readers the driver uses
    (icd/profiles.py for the core counts and rates, icd/vulkan_profile.py for the rest): one line
    saying what is wrong (not a file, not JSON, no "capabilities", several profiles and their names,
    a value the format does not allow)."""
    if path is None:
        return None
    from tessera.icd.profiles import profile_facts
    from tessera.icd.vulkan_profile import load

    resolved = Path(path).expanduser().resolve()
    try:
        profile_facts(str(resolved))
        load(resolved)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--gpu-profile") from None
    return resolved


def _how_it_stopped(code: int, interruption: Interruption) -> str:
    if interruption.killed:
        return f"was killed with SIGKILL ({interruption.killed})"
    return _how_it_ended(code)


def _what_was_merged(merged: "MergeResult | str | None", session: Path) -> str:
    if merged is None:
        return f"not merged (`tessera merge {session}` merges it)"
    if isinstance(merged, str):
        return merged
    return (f"merged what arrived: {merged.gpu_events} GPU event(s) of {merged.submits} submit(s) "
            f"into {merged.output}")


def _how_it_ended(code: int) -> str:
    """subprocess reports death by signal N as -N."""
    if code >= 0:
        return f"exited with {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name} (signal {-code}; exit status {128 - code})"


def _import_merge() -> None:
    import tessera.hostd.merge  # noqa: F401
    import tessera.hostd.summary  # noqa: F401


def _merge(session: Path, top: int, interruption: Interruption) -> "MergeResult | str":
    """Merge and print the summary; the MergeResult, or a line saying why nothing was merged."""
    from tessera.hostd.embedded import merge_session, summary
    from tessera.hostd.merge import MergeError

    try:
        with interruption.raising():
            result = merge_session(session, top=top)
    except MergeError as e:
        click.echo(f"tessera: nothing merged: {e}", err=True)
        return f"nothing merged: {e}"
    except Interrupted as e:
        return (f"merge interrupted by {signal.Signals(e.signum).name}; `tessera merge {session}` merges "
                "what arrived")
    click.echo(summary(result))
    if result.problems:
        click.echo(f"tessera: {len(result.problems)} problem(s) in the inputs; `tessera merge {session}` lists them",
                   err=True)
    click.echo(f"merged trace: {result.output}")
    return result

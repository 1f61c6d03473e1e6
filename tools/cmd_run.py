"""`tessera run`: an application on the emulated Mali GPU, through the layer."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .launch import LaunchConfig, LaunchError, default_session_dir
from .launch import run as launch


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--backend", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Manifest (JSON) of the driver that executes the work; default: lavapipe's.")
@click.option("--gpu", default=None, help="GPU profile: mali-g720 (default) or mali-g78.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Session folder for the outputs; default: tessera-out/<app>-<time>.")
@click.option("--no-layer", is_flag=True, help="Emulated driver only, without the Tessera layer.")
@click.argument("app", nargs=-1, required=True, type=click.UNPROCESSED)
def run(backend, gpu, out, no_layer, app) -> None:
    """Run APP (with its arguments, after --) and return its exit code."""
    from tessera.icd.profiles import PROFILES

    if gpu is not None and gpu.lower() not in PROFILES:
        raise click.BadParameter(f"unknown profile {gpu!r}; known: {', '.join(sorted(PROFILES))}", param_hint="--gpu")
    session = out or default_session_dir(app[0])
    cfg = LaunchConfig(session, backend, gpu, layer=not no_layer)
    try:
        code = launch(cfg, list(app))
    except LaunchError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"tessera: {app[0]} exited with {code}; session outputs in {session}", err=True)
    sys.exit(code)

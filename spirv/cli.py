"""`tessera spirv` commands: disassemble and reflect a SPIR-V binary.

The lead's tools/cli.py mounts the `spirv` click group lazily, so importing
this module must stay cheap: tessera.spirv modules load inside the commands.
"""

from __future__ import annotations

import json

import click


def _spec_pair(value: str) -> tuple[int, int]:
    sid, sep, number = value.partition("=")
    if not sep:
        raise click.BadParameter(f"{value!r} is not ID=VALUE")
    try:
        return int(sid, 0), int(number, 0)
    except ValueError:
        raise click.BadParameter(f"{value!r}: ID and VALUE must be integers") from None


class _SpecParam(click.ParamType):
    name = "ID=VALUE"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, int]:
        if isinstance(value, tuple):
            return value  # type: ignore[return-value]
        try:
            return _spec_pair(str(value))
        except click.BadParameter as exc:
            self.fail(exc.message, param, ctx)


def _load(path: str):
    from .decoder import parse
    from .errors import SpirvError
    try:
        with open(path, "rb") as f:
            return parse(f.read())
    except OSError as exc:
        raise click.FileError(path, hint=str(exc)) from None
    except SpirvError as exc:
        raise click.ClickException(f"{path}: {exc}") from None


@click.group(name="spirv")
def spirv() -> None:
    """Inspect SPIR-V modules."""


@spirv.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--header/--no-header", default=False, help="Print spirv-dis's header comment lines.")
def dis(file: str, header: bool) -> None:
    """Disassemble FILE in spirv-dis text form (raw ids)."""
    from .disasm import disassemble
    click.echo(disassemble(_load(file), header=header), nl=False)


@spirv.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--spec", "specs", multiple=True, type=_SpecParam(),
              help="Specialization constant value, SpecId=VALUE (repeatable).")
@click.option("--entry", default=None, help="Only this entry point and what it uses.")
def reflect(file: str, specs: tuple[tuple[int, int], ...], entry: str | None) -> None:
    """Reflect FILE as JSON: entry points, work-group size, bindings, CFGs."""
    from .errors import SpirvError
    from .reflect import reflect as do_reflect
    from .reflect import reflection_json
    module = _load(file)
    try:
        data = reflection_json(do_reflect(module, dict(specs)), entry)
    except SpirvError as exc:
        raise click.ClickException(f"{file}: {exc}") from None
    click.echo(json.dumps(data, indent=2))

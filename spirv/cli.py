"""`tessera spirv` commands: disassemble and reflect a SPIR-V binary.

The lead's tools/cli.py mounts the `spirv` click group lazily, so importing
this module must stay cheap: tessera.spirv modules load inside the commands.

Inputs: FILE must be a regular file of at most MAX_MODULE bytes (a FIFO or
/dev/zero would never end: schemas/files.read_input); `reflect` refuses a module
cut short at an instruction boundary (decoder.check_complete) and checks each
--spec against the module's constant of that SpecId: unknown ids and values
outside the constant's type are usage errors, never wrapped to its width.
"""

from __future__ import annotations

import json

import click


MAX_MODULE = 64 << 20    # bytes of a SPIR-V file read at most (the largest real modules are a few MiB)


def _spec_pair(value: str) -> tuple[int, str]:
    """SpecId=VALUE: the id checked as an integer here; the value once the module says its type
    (spec.spec_values_from_text)."""
    sid, sep, number = value.partition("=")
    if not sep:
        raise click.BadParameter(f"{value!r} is not ID=VALUE")
    try:
        spec_id = int(sid, 0)
    except ValueError:
        raise click.BadParameter(f"{value!r}: ID must be an integer") from None
    if not 0 <= spec_id <= 0xFFFFFFFF:
        raise click.BadParameter(f"{value!r}: ID must be a SpecId, 0 to 4294967295")
    if not number.strip():
        raise click.BadParameter(f"{value!r}: no VALUE")
    return spec_id, number.strip()


class SpecParam(click.ParamType):
    """`--spec ID=VALUE` (spirv reflect, tessera compile): (SpecId, VALUE text) pairs."""

    name = "ID=VALUE"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, str]:
        if isinstance(value, tuple):
            return value  # type: ignore[return-value]
        try:
            return _spec_pair(str(value))
        except click.BadParameter as exc:
            self.fail(exc.message, param, ctx)


def spec_values(module, specs: tuple[tuple[int, str], ...]) -> dict[int, int]:
    """--spec values checked against the module's specialization constants (click.BadParameter)."""
    from .errors import SpirvError
    from .spec import spec_values_from_text

    try:
        return spec_values_from_text(module, specs)
    except SpirvError as exc:
        raise click.BadParameter(str(exc), param_hint="'--spec'") from None


def _load(path: str, complete: bool = False):
    """The module in `path` (a regular file of at most MAX_MODULE bytes); `complete`: also
    refused when cut short at an instruction boundary (decoder.check_complete)."""
    from tessera.schemas.files import InputError, read_input

    from .decoder import check_complete, parse
    from .errors import SpirvError
    try:
        data = read_input(path, MAX_MODULE, "SPIR-V module")
    except InputError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        module = parse(data)
        if complete:
            check_complete(module)
        return module
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
@click.option("--spec", "specs", multiple=True, type=SpecParam(),
              help="Specialization constant value, SpecId=VALUE (repeatable): an integer in the range of the "
                   "constant's type, true/false for a bool, a number or bit pattern for a float.")
@click.option("--entry", default=None, help="Only this entry point and what it uses.")
def reflect(file: str, specs: tuple[tuple[int, str], ...], entry: str | None) -> None:
    """Reflect FILE as JSON: entry points, work-group size, bindings, CFGs."""
    from .errors import SpirvError
    from .reflect import reflect as do_reflect
    from .reflect import reflection_json
    module = _load(file, complete=True)
    values = spec_values(module, specs)
    try:
        data = reflection_json(do_reflect(module, values), entry)
    except SpirvError as exc:
        raise click.ClickException(f"{file}: {exc}") from None
    click.echo(json.dumps(data, indent=2))

"""`tessera compile`: a Mali-Offline-Compiler-style report for a shader.

Role: the click command (mounted lazily by tessera.tools as `compile`). Input
is SPIR-V (.spv, or any file starting with the SPIR-V magic) or GLSL
(.comp/.vert/.frag/.geom/.tesc/.tese, compiled with `glslangValidator -V`; the ray-tracing stages
.rgen/.rint/.rahit/.rchit/.rmiss/.rcall with `--target-env spirv1.4`, which GL_EXT_ray_tracing needs).
Every entry point is reported unless `--entry` picks one. Options are read
here into plain values; failures are click errors, never tracebacks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import click

from tessera.compiler.costs import DEFAULT_GPU, GPUS
from tessera.spirv.cli import SpecParam

RAY_TRACING_SUFFIXES = (".rgen", ".rint", ".rahit", ".rchit", ".rmiss", ".rcall")
GLSL_SUFFIXES = (".comp", ".vert", ".frag", ".geom", ".tesc", ".tese", ".glsl") + RAY_TRACING_SUFFIXES
SPIRV_MAGIC = (b"\x03\x02\x23\x07", b"\x07\x23\x02\x03")


def load_spirv(path: Path) -> bytes:
    """The SPIR-V of a .spv file, or of a GLSL file compiled with glslangValidator."""
    from tessera.schemas.files import InputError, read_input
    from tessera.spirv.cli import MAX_MODULE

    try:     # a regular file, bounded: a FIFO or /dev/zero would never end
        data = read_input(path, MAX_MODULE, "shader")
    except InputError as exc:
        raise click.ClickException(str(exc)) from None
    if data[:4] in SPIRV_MAGIC:
        return data
    if path.suffix not in GLSL_SUFFIXES:
        raise click.ClickException(f"{path}: neither SPIR-V (no magic number) nor GLSL "
                                   f"(suffixes: {', '.join(GLSL_SUFFIXES)})")
    glslang = shutil.which("glslangValidator")
    if glslang is None:
        raise click.ClickException("glslangValidator not found on PATH: needed to compile GLSL")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "shader.spv"
        argv = [glslang, "-V", str(path), "-o", str(out)]
        if path.suffix in RAY_TRACING_SUFFIXES:
            argv[2:2] = ["--target-env", "spirv1.4"]
        if path.suffix == ".glsl":
            raise click.ClickException(f"{path}: .glsl does not name a stage; use .vert/.frag/.comp")
        # errors=replace: glslang quotes the source, which need not be UTF-8.
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace")
        if proc.returncode != 0:
            msg = (proc.stdout + proc.stderr).strip()
            raise click.ClickException(f"glslangValidator failed on {path}:\n{msg}")
        return out.read_bytes()


@click.command("compile")
@click.argument("shader", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--gpu", type=click.Choice(sorted(GPUS)), default=DEFAULT_GPU, show_default=True)
@click.option("--ra", "ra", type=click.Choice(["sparse", "dense"]), default="sparse", show_default=True,
              help="register allocator: sparse (fast LCRA) or dense (the 2021 baseline)")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "shader-db"]), default="text",
              show_default=True)
@click.option("--entry", default=None, help="entry point name (default: every entry point)")
@click.option("--spec", multiple=True, type=SpecParam(),
              help="specialization constant value, ID=VALUE (repeatable): in the range of the constant's type")
def compile_command(shader: Path, gpu: str, ra: str, fmt: str, entry: str | None,
                    spec: tuple[tuple[int, str], ...]) -> None:
    """Report registers, spilling and cycles per pipe of SHADER (SPIR-V or GLSL)."""
    from tessera.spirv.cli import spec_values as checked_spec_values
    from tessera.spirv.decoder import parse
    from tessera.spirv.errors import SpirvError

    from .api import compile_module, entry_point_names
    from .errors import CompileError
    from .report import as_json, shader_db, text

    data = load_spirv(shader)
    spec_values: dict[int, int] = {}
    if spec:
        try:
            module = parse(data)
        except SpirvError as exc:
            raise click.ClickException(f"{shader}: {exc}") from None
        spec_values = checked_spec_values(module, spec)     # unknown ids, values outside the type: usage errors
    try:
        names = [entry] if entry else entry_point_names(data)
        if not names:
            raise CompileError("the module has no entry point")
        costs = [compile_module(data, name, gpu, ra, spec_values).cost for name in names]
    except CompileError as exc:
        raise click.ClickException(f"{shader}: {exc}") from None
    if fmt == "json":
        click.echo(json.dumps({"shader": str(shader), "stages": [as_json(c) for c in costs]}, indent=2))
    elif fmt == "shader-db":
        for c in costs:
            click.echo(shader_db(c, str(shader)))
    else:
        click.echo("\n".join(text(c, shader.name) for c in costs), nl=False)


compile = compile_command  # the name tessera.tools mounts

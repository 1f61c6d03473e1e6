"""Build both shims (layer and driver) and their manifests: `python -m tessera.tools.build_shims`.

Also writes the generated constants module, and compiles the bytecode of
every package the shims import: the embedded interpreter starts inside each
profiled process, and with PYTHONDONTWRITEBYTECODE set (or a read-only
tree) it would compile every module from source at every start (about half
of `tessera run`'s fixed cost). Quick when nothing changed: each output
carries a fingerprint of its inputs, and compileall skips what is current.
"""
from __future__ import annotations

import compileall
import sys
import time

from tessera.vkapi import constants_gen, paths, shim, vkconst


def specs():
    from tessera.icd.shim_spec import spec as icd_spec
    from tessera.layer.shim_spec import spec as layer_spec

    return [layer_spec(), icd_spec()]


def build_constants() -> None:
    target = paths.GEN_DIR / f"{vkconst.MODULE_NAME}.py"
    stamp = target.with_suffix(".fingerprint")
    fingerprint = shim.generator_fingerprint()
    if target.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        return
    vkconst.write_generated(target, constants_gen.generate())
    stamp.write_text(fingerprint)
    vkconst.refresh()   # vkconst loaded the old one when this module was imported


PACKAGES = ("vkapi", "spirv", "schemas", "compiler", "layer", "icd", "hostd", "tools")


def compile_bytecode() -> None:
    """Write the .pyc files Python would otherwise not write (see the module docstring)."""
    for folder in (*(paths.SOURCE_ROOT / p for p in PACKAGES), paths.GEN_DIR):
        compileall.compile_dir(folder, quiet=1, workers=1)


def main(argv: list[str]) -> int:
    force = "--force" in argv
    start = time.monotonic()
    build_constants()
    for spec in specs():
        path = shim.build(spec, force=force)
        print(f"shim: {path}")
    compile_bytecode()
    print(f"shims ready in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Build both shims (layer and driver) and their manifests: `python -m tessera.tools.build_shims`.

Also writes the generated constants module. Quick when nothing changed:
each output carries a fingerprint of its inputs.
"""
from __future__ import annotations

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


def main(argv: list[str]) -> int:
    force = "--force" in argv
    start = time.monotonic()
    build_constants()
    for spec in specs():
        path = shim.build(spec, force=force)
        print(f"shim: {path}")
    print(f"shims ready in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""hostd never imports the driver or the layer (ARCHITECTURE.md: `hostd` uses `schemas` and the Perfetto
protos; it never imports `layer` or `icd`), checked on every module's imports, function-level ones included.
The one exception is named here with its reason."""
from __future__ import annotations

import ast
from pathlib import Path

import tessera.hostd

HOSTD = Path(tessera.hostd.__file__).parent
FORBIDDEN = ("tessera.icd", "tessera.layer")
# module (relative to hostd/) -> why it may import from the driver
EXCEPTIONS = {
    "advice/gpu.py": "the advisor costs its findings with the driver's GPU table and timing model "
                     "(icd/profiles.py, icd/timing.py: pure Python, imported lazily); they belong in a package "
                     "both may import",
}


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_hostd_imports_neither_the_driver_nor_the_layer():
    found = {str(p.relative_to(HOSTD)): [n for n in _imports(p) if n.startswith(FORBIDDEN)]
             for p in sorted(HOSTD.rglob("*.py"))}
    found = {k: v for k, v in found.items() if v}
    assert set(found) == set(EXCEPTIONS), found

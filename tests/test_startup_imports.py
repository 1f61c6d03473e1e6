"""What the shims import at start-up (#25: `tessera run` adds at most 0.3 s): the driver's and the layer's
entry modules leave out the heavy libraries only some features use, each imported where it is used
(numpy ~35 ms: --content's index metrics, measured visible primitives, readbacks; construct ~11 ms: only
the frame-header test). A module that imports one at its top would put it back on every program's start."""
from __future__ import annotations

import subprocess
import sys

HEAVY = ("numpy", "construct", "duckdb", "pyarrow", "jinja2", "PIL")


def test_the_shims_entry_modules_import_no_heavy_library():
    code = ("import sys, tessera.icd.entry, tessera.layer.entry; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr

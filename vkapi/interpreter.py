"""The garbage collector of the interpreter the shims run in, when that interpreter is theirs.

In a C application (vulkaninfo, vkcube, a game) cffi starts an interpreter for the shims; in a
Python application they run in the application's own. Whatever a shim builds at install (its
modules, the Vulkan constants, the hook closures) lives until the process exits, yet every full
collection of the cyclic garbage collector walks it again, on whichever thread triggers it, with
the GIL held: for a recording of 20,000 dispatches under the driver and the layer, full
collections took ~0.3 s (bench: docs/benchmarks.md). `freeze_installed` moves everything alive at
the end of an install to the permanent generation (`gc.freeze`), so later collections walk only
what the shims make while the application runs.

Only in the shims' own interpreter: in an application's, freezing would also exempt the
application's objects (and any garbage cycle among them) from collection. An interpreter started
by an embedder (cffi's start-up, through Py_InitializeEx) has no command line: `sys.orig_argv` is
empty and `sys.argv` is [''].
"""
from __future__ import annotations

import gc
import sys


def ours() -> bool:
    """Whether this interpreter was started by an embedder (the shims') rather than run as a program."""
    return not getattr(sys, "orig_argv", ()) and list(getattr(sys, "argv", [""])) == [""]


def freeze_installed() -> bool:
    """After a shim's install: exempt everything alive now from collection, in the shims' own
    interpreter only. Returns whether it froze."""
    if not ours():
        return False
    gc.freeze()
    return True

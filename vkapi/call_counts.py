"""TESSERA_CALL_COUNTS=PREFIX: count the Python function calls made in the application's process (both shims,
and any Python the application runs itself), by function, written at exit to PREFIX.<pid>.

What a frame costs in Python, counted, is the same from run to run where its CPU time on a small shared
machine is not (bench/python_calls.py divides the counts of two runs of different lengths). A profiler
hook on every call: a benchmark's switch, never on by default. Counted: the thread that starts the shims'
interpreter and every thread started through `threading` after it (Python 3.11 cannot reach threads already
running). The file is created exclusively and owner-only, one line per function: count, file, name.
"""
from __future__ import annotations

import atexit
import collections
import os
import sys
import threading

SWITCH = "TESSERA_CALL_COUNTS"
_counting = False


def install_from_environ(environ=os.environ) -> None:
    """Start counting if SWITCH names a file prefix (once per process: both shims call this)."""
    global _counting
    prefix = environ.get(SWITCH)
    if not prefix or _counting:
        return
    _counting = True
    counts: collections.Counter = collections.Counter()

    def profile(frame, event, arg) -> None:
        if event == "call":
            code = frame.f_code
            counts[(code.co_filename, code.co_name)] += 1

    sys.setprofile(profile)
    threading.setprofile(profile)
    atexit.register(_write, f"{prefix}.{os.getpid()}", counts)


def _write(path: str, counts: collections.Counter) -> None:
    sys.setprofile(None)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        print(f"tessera: {SWITCH}: cannot create {path}: {e}", file=sys.stderr)
        return
    with os.fdopen(fd, "w") as f:
        for (filename, name), n in counts.most_common():
            f.write(f"{n}\t{filename}\t{name}\n")


def read(path) -> dict[tuple[str, str], int]:
    """A file _write wrote: (file, function) -> calls."""
    out = {}
    with open(path) as f:
        for line in f:
            n, filename, name = line.rstrip("\n").split("\t")
            out[(filename, name)] = int(n)
    return out

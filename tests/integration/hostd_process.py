"""A real `tessera hostd` process for integration tests, and line-by-line reading of a child's output.

Imported by name (the tests' folder is on sys.path). Readiness and progress come
from what the processes print or write, never from sleeping.
"""
from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from integration_support import PYTHON

from tessera.schemas import frames as fr


class Lines:
    """Drains a text pipe on a thread (so the child never blocks on it); `wait_for` a line."""

    def __init__(self, pipe) -> None:
        self.lines: list[str | None] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe) -> None:
        for line in pipe:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self.lines.append(None)       # end of stream
            self._cond.notify_all()

    def wait_for(self, text: str, timeout: float = 120.0) -> str:
        with self._cond:
            found = self._cond.wait_for(lambda: any(line is None or text in line for line in self.lines), timeout)
            match = next((line for line in self.lines if line is not None and text in line), None)
        assert found and match is not None, f"{text!r} never appeared in {self.lines!r}"
        return match

    def text(self) -> str:
        self._thread.join(timeout=30)
        return "\n".join(line for line in self.lines if line is not None)


def start_hostd(sock: Path, out: Path) -> tuple[subprocess.Popen, Lines]:
    """`tessera hostd` on a Unix socket, returned once it says it is listening."""
    proc = subprocess.Popen([PYTHON, "-m", "tessera.tools.cli", "hostd", "--listen", f"unix:{sock}",
                             "--out", str(out)], stderr=subprocess.PIPE, text=True)
    err = Lines(proc.stderr)
    err.wait_for("listening on")
    return proc, err


def logged_frames(out: Path) -> list[fr.Frame]:
    """The frames hostd has logged so far under `out` (a log being written may end inside a frame,
    and its folder is renamed from conn-<n> once the HELLO names the client: a log listed here
    may be gone by the time it is opened, and is then found again under its new name)."""
    while True:
        frames: list[fr.Frame] = []
        try:
            for log in sorted(out.rglob("*.tessera-log")):
                try:
                    frames.extend(fr.iter_file(log))
                except fr.FrameError:
                    pass
        except FileNotFoundError:
            continue   # renamed between listing and opening: list again
        return frames


def wait_until(predicate, timeout: float = 60.0) -> None:
    """Wait for a condition another process makes true in the file system (not a timing guess)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)

"""Durable storage of one connection: its folder, its session log, its record.

Role: everything hostd writes to disk for a connection. Owned by the
connection's `Ingest`; only the daemon's event-loop thread touches it.

Layout (docs/hostd.md):

    OUT/conn-<n>/                        created at accept, before anything is decoded
    OUT/<process>-<pid>-<n>/             the same folder, renamed once HELLO names the client
        session.tessera-log              the client's stream, byte for byte as received, in checksummed
                                         records (schemas/logfile.py: a damaged record costs only itself)
        session.rejected.jsonl           frames rejected in strict mode (offset, size, reason), one per line
        session.json                     written at close: client, HELLO, counts, problems, clean or not

Fsync policy: every received chunk is written to the log with os.write
before it is decoded, so once hostd has read bytes from the socket a crash
of hostd itself loses none of them (they are in the kernel). For power loss,
the log is fsynced when at least `fsync_interval` seconds passed since the
last fsync and new data arrived (checked on each write, so an idle
connection costs nothing), and always when the connection closes and at
shutdown.

Privacy: hostd has no authentication and the logs hold what the application
did, so every file here is created 0600 and every folder 0700 (umask aside).
"""
from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from tessera.schemas.files import private_folder, write_atomic
from tessera.schemas.logfile import FILE_HEADER, encode_records

LOG_NAME = "session.tessera-log"
REJECTED_NAME = "session.rejected.jsonl"
RECORD_NAME = "session.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_NUMBERED = re.compile(r"-(\d+)(?:\.\d+)?$")
_counters: dict[Path, itertools.count] = {}
_counters_lock = threading.Lock()   # several embedded daemons may share a process


def _next_number(out: Path) -> int:
    """Connection numbers unique within an output folder, continuing after the ones already there."""
    key = out.resolve()
    with _counters_lock:
        counter = _counters.get(key)
        if counter is None:
            used = [int(m.group(1)) for d in out.iterdir() if (m := _NUMBERED.search(d.name))]
            counter = _counters[key] = itertools.count(max(used, default=0) + 1)
        return next(counter)


def safe_name(text: str, limit: int = 64) -> str:
    """A process name usable as part of a folder name."""
    return _UNSAFE.sub("_", text).strip("._")[:limit] or "app"


class ConnectionStore:
    def __init__(self, out: Path, fsync_interval: float, log_name: str = LOG_NAME) -> None:
        """`log_name`: the log's file name (Arm's protocol is logged as session.arm-log)."""
        private_folder(out)
        while True:
            n = _next_number(out)
            folder = out / f"conn-{n}"
            try:
                folder.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        self.number = n
        self.folder = folder
        self.fsync_interval = fsync_interval
        self.bytes = 0      # bytes of the client's stream logged (the log file holds more: record headers)
        self.log_name = log_name
        self._fd = os.open(folder / log_name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._write(FILE_HEADER)
        self._rejected = None
        self._last_sync = time.monotonic()
        self._dirty = False

    @property
    def log_path(self) -> Path:
        return self.folder / self.log_name

    def append(self, data: bytes, starts: Sequence[int] = ()) -> None:
        """Log a chunk of the client's stream; `starts`: stream offsets, ascending, of the frames
        that begin in it (they let a reader resume after a damaged record)."""
        self._write(encode_records(data, self.bytes, starts))
        self.bytes += len(data)
        self._dirty = True
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_interval:
            self.sync(now)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def sync(self, now: float | None = None) -> None:
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False
        self._last_sync = time.monotonic() if now is None else now

    def name(self, process: str, pid: int) -> None:
        """Rename the folder after the client (open files stay valid across a rename)."""
        base = f"{safe_name(process)}-{pid}-{self.number}"
        target = self.folder.parent / base
        k = 1
        while target.exists():
            k += 1
            target = self.folder.parent / f"{base}.{k}"
        self.folder.rename(target)
        self.folder = target

    def reject(self, offset: int, size: int, reason: str) -> None:
        if self._rejected is None:
            fd = os.open(self.folder / REJECTED_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._rejected = open(fd, "a", encoding="utf-8")
        self._rejected.write(json.dumps({"offset": offset, "size": size, "reason": reason}) + "\n")
        self._rejected.flush()

    def close(self, record: dict[str, Any]) -> None:
        self.sync()
        os.close(self._fd)
        if self._rejected is not None:
            os.fsync(self._rejected.fileno())
            self._rejected.close()
        write_atomic(self.folder / RECORD_NAME, (json.dumps(record, indent=2) + "\n").encode("utf-8"))


def rejected_offsets(log: Path) -> set[int]:
    """Offsets of frames hostd rejected in strict mode, for a log (empty for spools)."""
    path = log.with_name(REJECTED_NAME) if log.name == LOG_NAME else None
    if path is None or not path.exists():
        return set()
    out = set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.add(int(json.loads(line)["offset"]))
        except (ValueError, KeyError, TypeError):
            continue
    return out

"""Sends the layer's frames to hostd, or spools them to a file.

Application threads only append encoded frames to a queue; one sender thread
writes them out. Destination: the daemon at TESSERA_HOSTD (`unix:PATH` or
`tcp:HOST:PORT`); when it is unset, unreachable, or goes away, the frames go
to `layer-<pid>.spool` in the session folder instead (same bytes: the
daemon's log and the spool are both frames concatenated). A frame that was
not fully sent is written to the spool whole, so nothing recorded is lost.
While spooling with a daemon configured, the sender retries the daemon at
most every RETRY_S seconds and goes back to it when it answers; merge reads
both. Every connection and every spool file starts with the HELLO frame.
"""
from __future__ import annotations

import collections
import os
import socket
import tempfile
import threading
import time
from pathlib import Path

CONNECT_TIMEOUT_S = 2.0
RETRY_S = 0.5
# A C application runs our embedded Python without its SIGPIPE handling: writing to a
# socket the daemon closed must fail with EPIPE, not kill the application.
NO_SIGPIPE = socket.MSG_NOSIGNAL


def _connect(address: str) -> socket.socket:
    kind, _, rest = address.partition(":")
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target: object = rest
    elif kind == "tcp":
        host, _, port = rest.rpartition(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        target = (host, int(port))
    else:
        raise OSError(f"TESSERA_HOSTD={address!r}: expected unix:PATH or tcp:HOST:PORT")
    s.settimeout(CONNECT_TIMEOUT_S)
    try:
        s.connect(target)
    except OSError:
        s.close()
        raise
    s.settimeout(None)
    return s


class Transport:
    def __init__(self, address: str | None, session_dir: Path | None, hello: bytes, log) -> None:
        self.address = address
        self.session_dir = session_dir
        self.hello = hello
        self.log = log
        self._queue: collections.deque[bytes] = collections.deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._spool = None
        self._busy = False
        self._last_attempt = float("-inf")
        self.spool_path: Path | None = None

    def send(self, frame: bytes) -> None:
        with self._cond:
            self._queue.append(frame)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tessera-sender", daemon=True)
                self._thread.start()
            self._cond.notify()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued frame is written (and a spool file synced)."""
        with self._cond:
            done = self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)
        if self._spool is not None:
            self._spool.flush()
            os.fsync(self._spool.fileno())
        return done

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue)
                batch = list(self._queue)
                self._queue.clear()
                self._busy = True
            try:
                self._write(batch)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _write(self, frames: list[bytes]) -> None:
        now = time.monotonic()
        if self._sock is None and self.address and now - self._last_attempt >= RETRY_S:
            self._last_attempt = now
            try:
                self._sock = _connect(self.address)
                self._sock.sendall(self.hello, NO_SIGPIPE)
                if self._spool is not None:
                    self.log.info("hostd at %s reachable again: sending there", self.address)
            except OSError as e:
                if self._spool is None:
                    self.log.warning("hostd at %s unreachable (%s): spooling to a file", self.address, e)
                self._sock = None
        if self._sock is not None:
            data = memoryview(b"".join(frames))
            sent = 0
            try:
                while sent < len(data):
                    sent += self._sock.send(data[sent:], NO_SIGPIPE)
                return
            except OSError as e:
                self.log.warning("hostd connection lost (%s): spooling the rest to a file", e)
                self._sock.close()
                self._sock = None
            # Frames the daemon got whole stay there; the first one it did not get whole, and
            # all after it, go to the spool (the daemon reports its cut frame as truncated).
            end = 0
            for i, frame in enumerate(frames):
                end += len(frame)
                if end > sent:
                    frames = frames[i:]
                    break
        self._spool_write(b"".join(frames))

    def _spool_write(self, data: bytes) -> None:
        if self._spool is None:
            folder = self.session_dir or Path(tempfile.mkdtemp(prefix="tessera-session-"))
            folder.mkdir(parents=True, exist_ok=True)
            self.spool_path = folder / f"layer-{os.getpid()}.spool"
            self._spool = open(self.spool_path, "ab", buffering=0)
            self._spool.write(self.hello)
            self.log.info("spooling layer frames to %s", self.spool_path)
        self._spool.write(data)

"""Sends the layer's frames to hostd, or spools them to a file.

Application threads only append encoded frames to a queue; one sender thread
writes them out. Destination: the daemon at TESSERA_HOSTD (`unix:PATH` or
`tcp:HOST:PORT`); when it is unset, unreachable, or goes away, the frames go
to `layer-<pid>.spool` in the session folder instead (same bytes: the
daemon's log and the spool are both frames concatenated). The daemon
acknowledges how many bytes its session log holds; frames not acknowledged
when the connection fails (or by the end of a flush) are written to the
spool whole, so nothing recorded is lost even if the daemon is killed with
data in its socket buffer. A frame may then be in both places; merge
treats the copies as one.
While spooling with a daemon configured, the sender retries the daemon at
most every RETRY_S seconds and goes back to it when it answers; merge reads
both. Every connection and every spool file starts with the HELLO frame.
"""
from __future__ import annotations

import atexit
import collections
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tessera.schemas.frames import ACK

CONNECT_TIMEOUT_S = 2.0
RETRY_S = 0.5
SETTLE_S = 2.0      # flush: how long to wait for the daemon's acknowledgements
# Bound of the queue between application threads and the sender: beyond it (a daemon too
# slow to keep up), application threads append their frames to the spool file themselves.
MAX_QUEUED_FRAMES = 50_000
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


class _Connection:
    """One connection to hostd and the frames it has not acknowledged yet."""

    def __init__(self, sock: socket.socket, hello: bytes) -> None:
        self.sock = sock
        self.sent = 0                    # bytes of this connection's stream sent (HELLO included)
        self.acked = 0                   # bytes the daemon says its session log holds
        self.unacked: collections.deque[tuple[int, bytes]] = collections.deque()   # (end offset, frame)
        self._pending = b""
        self.send([hello], keep=False)

    def send(self, frames: list[bytes], keep: bool = True) -> None:
        """Send whole frames; remember them until acknowledged. OSError if the daemon is gone."""
        end = self.sent
        for frame in frames:
            end += len(frame)
            if keep:
                self.unacked.append((end, frame))
        data = memoryview(b"".join(frames))
        done = 0
        while done < len(data):
            done += self.sock.send(data[done:], NO_SIGPIPE)
        self.sent = end
        self.read_acks(block_s=0.0)

    def read_acks(self, block_s: float) -> None:
        """Take the acknowledgements that arrived (waiting up to `block_s` for the first)."""
        self.sock.settimeout(block_s if block_s > 0 else None)
        flags = 0 if block_s > 0 else socket.MSG_DONTWAIT
        try:
            while True:
                data = self.sock.recv(4096, flags)
                if not data:
                    raise ConnectionResetError("hostd closed the connection")
                self._pending += data
                whole = len(self._pending) // ACK.size * ACK.size
                for (value,) in ACK.iter_unpack(self._pending[:whole]):
                    self.acked = max(self.acked, value)
                self._pending = self._pending[whole:]
                flags = socket.MSG_DONTWAIT
        except (BlockingIOError, socket.timeout):
            pass
        finally:
            self.sock.settimeout(None)
        while self.unacked and self.unacked[0][0] <= self.acked:
            self.unacked.popleft()

    def settle(self, timeout_s: float) -> None:
        """Wait (bounded) until everything sent is acknowledged."""
        deadline = time.monotonic() + timeout_s
        while self.acked < self.sent and (left := deadline - time.monotonic()) > 0:
            self.read_acks(block_s=min(left, 0.05))


class Transport:
    """Application threads call `send` (a deque append, atomic under the GIL, and a wake-up
    only when the sender sleeps); one sender thread does all network and spool I/O."""

    def __init__(self, address: str | None, session_dir: Path | None, hello: bytes, log) -> None:
        self.address = address
        self.session_dir = session_dir
        self.hello = hello
        self.log = log
        self._queue: collections.deque = collections.deque()   # frames, and flush markers (Events)
        self._wake = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._conn: _Connection | None = None
        self._spool = None
        self._spool_lock = threading.Lock()
        self._last_attempt = float("-inf")
        self.spool_path: Path | None = None
        atexit.register(self.flush, 2.0)   # Python apps; C apps flush at device/instance destruction

    def send(self, frame: bytes | Callable[..., bytes], *args) -> None:
        """Queue a frame, or `frame(*args)` to encode it on the sender thread (off the
        application's hot path: the arguments must not change afterwards). Never waits for
        the network."""
        if len(self._queue) >= MAX_QUEUED_FRAMES:
            # The sender is behind (a slow daemon): the disk takes it now.
            self._spool_write(frame if isinstance(frame, bytes) else frame(*args))
            return
        self._queue.append(frame if isinstance(frame, bytes) else (frame, args))
        self._kick()

    def _kick(self) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="tessera-sender", daemon=True)
                    self._thread.start()
        if not self._wake.is_set():
            self._wake.set()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every frame queued so far is acknowledged by hostd or written to the spool (synced)."""
        marker = threading.Event()
        self._queue.append(marker)
        self._kick()
        done = marker.wait(timeout)
        with self._spool_lock:
            if self._spool is not None:
                self._spool.flush()
                os.fsync(self._spool.fileno())
        return done

    def close(self, timeout: float = 10.0) -> None:
        """Flush, then end the connection (a later frame reconnects)."""
        self.flush(timeout)
        conn, self._conn = self._conn, None   # the sender is idle after a flush
        if conn is not None:
            conn.sock.close()

    def _run(self) -> None:
        queue = self._queue
        while True:
            self._wake.wait()
            self._wake.clear()
            while queue:
                frames, marker = [], None
                while queue and marker is None:
                    item = queue.popleft()
                    if isinstance(item, threading.Event):
                        marker = item
                    elif isinstance(item, bytes):
                        frames.append(item)
                    else:
                        frames.append(self._encode(*item))
                try:
                    if frames:
                        self._write(frames)
                    if marker is not None:
                        self._settle()
                except Exception:   # never let the sender die: the frames are in the spool or reported
                    self.log.exception("tessera sender: unexpected error")
                if marker is not None:
                    marker.set()

    def _encode(self, encode: Callable[..., bytes], args: tuple) -> bytes:
        try:
            return encode(*args)
        except Exception:   # a bug in an encoder loses that message only, and says so
            self.log.exception("tessera sender: cannot encode a %s message", getattr(encode, "__name__", "?"))
            return b""

    def _connect(self) -> None:
        now = time.monotonic()
        if self._conn is not None or not self.address or now - self._last_attempt < RETRY_S:
            return
        self._last_attempt = now
        try:
            self._conn = _Connection(_connect(self.address), self.hello)
            if self._spool is not None:
                self.log.info("hostd at %s reachable again: sending there", self.address)
        except OSError as e:
            if self._spool is None:
                self.log.warning("hostd at %s unreachable (%s): spooling to a file", self.address, e)

    def _write(self, frames: list[bytes]) -> None:
        self._connect()
        if self._conn is not None:
            try:
                self._conn.send(frames)
                return
            except OSError as e:
                self._lost(e)
                return
        self._spool_write(b"".join(frames))

    def _settle(self) -> None:
        if self._conn is None:
            return
        try:
            self._conn.settle(SETTLE_S)
        except OSError as e:
            self._lost(e)
            return
        if self._conn.unacked:   # not confirmed in time: keep a copy (merge ignores duplicates)
            self._spool_write(b"".join(frame for _, frame in self._conn.unacked))
            self._conn.unacked.clear()

    def _lost(self, error: OSError) -> None:
        """The daemon went away: every frame it did not acknowledge goes to the spool."""
        conn, self._conn = self._conn, None
        self.log.warning("hostd connection lost (%s): spooling unacknowledged frames", error)
        conn.sock.close()
        self._spool_write(b"".join(frame for _, frame in conn.unacked))

    def _spool_write(self, data: bytes) -> None:
        with self._spool_lock:   # the sender thread, and application threads when the queue is full
            self._spool_write_locked(data)

    def _spool_write_locked(self, data: bytes) -> None:
        if self._spool is None:
            folder = self.session_dir or Path(tempfile.mkdtemp(prefix="tessera-session-"))
            folder.mkdir(parents=True, exist_ok=True)
            self.spool_path = folder / f"layer-{os.getpid()}.spool"
            self._spool = open(self.spool_path, "ab", buffering=0)
            self._spool.write(self.hello)
            self.log.info("spooling layer frames to %s", self.spool_path)
        self._spool.write(data)

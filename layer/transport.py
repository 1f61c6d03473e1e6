"""Sends the layer's frames to hostd, or spools them to a file.

Application threads only append frames (or what encodes them) to a queue; the
sender thread writes them out, or a thread that waits for them to be written
(`hand_to_kernel`) does, when the sender is idle. Destination: the daemon at TESSERA_HOSTD (`unix:PATH` or
`tcp:HOST:PORT`); when it is unset, unreachable, or goes away, the frames go
to `layer-<pid>.spool` in the session folder instead (same bytes: the
daemon's log and the spool are both frames concatenated). The daemon
acknowledges how many bytes its session log holds; frames not acknowledged
when the connection fails (or by the end of a flush) are written to the
spool whole, so nothing recorded is lost even if the daemon is killed with
data in its socket buffer. A frame may then be in both places; merge
treats the copies as one.
A daemon that stops reading (SIGSTOP, a hang) must not hold the app: the socket
is non-blocking and every wait on the daemon is bounded by STALL_S without
progress; a stalled connection is dropped like a dead one (its unacknowledged
frames spooled), and a new connection counts only once the daemon acknowledges
its HELLO (a stopped daemon's kernel still accepts connections).
While spooling with a daemon configured, the sender retries the daemon (every
RETRY_S after a refusal, backing off from STALL_RETRY_S after a stall) and goes
back to it when it answers; merge reads both. One warning line, shown whatever
TESSERA_LOG says, tells when frames start going to the spool instead of the
daemon. Every connection and every spool file (0600) starts with the HELLO frame.

Threads: application threads call `send`/`flush`/`close`/`hand_to_kernel`; the
connection and the queue's reading end belong to whoever holds `_writing` (the
sender, or a thread in `hand_to_kernel`); the spool file is shared under
`_spool_lock`.
"""
from __future__ import annotations

import atexit
import collections
import logging
import os
import select
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tessera.schemas.files import open_append, private_folder
from tessera.schemas.frames import ACK

# How long the daemon may make no progress (read nothing we send, acknowledge nothing we wait
# for) before it counts as stalled: the connection is dropped, what it did not acknowledge is
# spooled, and the app's exit never waits on it for more than about this long (issue #10).
STALL_S = 0.4
CONNECT_TIMEOUT_S = 0.5      # a local daemon accepts at once; only a full backlog makes connect() wait
RETRY_S = 0.5                # a daemon that refused or dropped us is retried at most this often
# A stalled daemon still accepts connections (the kernel queues them), so retries back off:
# each unanswered HELLO doubles the wait, and costs the daemon one queued connection.
STALL_RETRY_S = (2.0, 16.0)  # (first, largest)
SETTLE_S = 1.0               # flush: the longest wait for acknowledgements of a daemon still progressing
# Bound of the queue between application threads and the sender: beyond it (a daemon too
# slow to keep up), application threads append their frames to the spool file themselves.
MAX_QUEUED_FRAMES = 50_000
# A C application runs our embedded Python without its SIGPIPE handling: writing to a
# socket the daemon closed must fail with EPIPE, not kill the application.
NO_SIGPIPE = socket.MSG_NOSIGNAL


class DaemonStalled(OSError):
    """hostd is connected but made no progress for STALL_S (stopped, hung, or swamped)."""


def _connect(address: str) -> socket.socket:
    kind, _, rest = address.partition(":")
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target: object = rest
    elif kind == "tcp":
        host, _, port = rest.rpartition(":")
        host = host.strip("[]")          # tcp:[::1]:PORT, as hostd prints an IPv6 address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        target = (host, int(port))
    else:
        raise OSError(f"TESSERA_HOSTD={address!r}: expected unix:PATH or tcp:HOST:PORT")
    s.settimeout(CONNECT_TIMEOUT_S)
    try:
        s.connect(target)
    except OSError:
        s.close()
        raise
    s.setblocking(False)                 # every wait below is a poll with a deadline
    return s


class _Connection:
    """One connection to hostd and the frames it has not acknowledged yet.

    The socket is non-blocking; a send waits for room only while the daemon makes progress
    (reads what we sent, or acknowledges), and raises DaemonStalled after STALL_S without.
    A new connection counts once the daemon acknowledges its HELLO: a stopped daemon's kernel
    accepts connections it will not read."""

    def __init__(self, sock: socket.socket, hello: bytes) -> None:
        self.sock = sock
        self.sent = 0                    # bytes of this connection's stream sent (HELLO included)
        self.acked = 0                   # bytes the daemon says its session log holds
        self.unacked: collections.deque[tuple[int, bytes]] = collections.deque()   # (end offset, frame)
        self._pending = b""
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        try:
            self.send([hello], keep=False)
            self.settle(STALL_S)
            if self.acked < self.sent:
                raise DaemonStalled(f"no answer to HELLO within {STALL_S} s")
        except OSError:
            sock.close()
            raise

    def send(self, frames: list[bytes], keep: bool = True) -> None:
        """Send whole frames; remember them until acknowledged. OSError if the daemon is gone,
        DaemonStalled if it stopped reading."""
        end = self.sent
        for frame in frames:
            end += len(frame)
            if keep:
                self.unacked.append((end, frame))
        data = memoryview(b"".join(frames))
        done = 0
        while done < len(data):
            try:
                done += self.sock.send(data[done:], NO_SIGPIPE)
            except BlockingIOError:
                if not self._wait(select.POLLIN | select.POLLOUT):
                    raise DaemonStalled(f"read nothing for {STALL_S} s") from None
        self.sent = end
        self.read_acks()

    def _wait(self, events: int, timeout_s: float = STALL_S) -> bool:
        """Wait up to `timeout_s` for `events`, taking acknowledgements as they come; False if none."""
        self._poll.modify(self.sock, events)
        ready = self._poll.poll(max(timeout_s, 0.0) * 1000)
        if ready and ready[0][1] & (select.POLLIN | select.POLLERR | select.POLLHUP):
            self.read_acks()
        return bool(ready)

    def read_acks(self) -> None:
        """Take the acknowledgements that arrived; ConnectionResetError at end of stream."""
        try:
            while True:
                data = self.sock.recv(4096)
                if not data:
                    raise ConnectionResetError("hostd closed the connection")
                self._pending += data
                whole = len(self._pending) // ACK.size * ACK.size
                for (value,) in ACK.iter_unpack(self._pending[:whole]):
                    self.acked = max(self.acked, value)
                self._pending = self._pending[whole:]
        except BlockingIOError:
            pass
        while self.unacked and self.unacked[0][0] <= self.acked:
            self.unacked.popleft()

    def settle(self, timeout_s: float) -> None:
        """Wait until everything sent is acknowledged: at most `timeout_s`, and DaemonStalled
        after STALL_S without any answer."""
        deadline = time.monotonic() + timeout_s
        self.read_acks()
        while self.acked < self.sent and (left := deadline - time.monotonic()) > 0:
            if not self._wait(select.POLLIN, min(left, STALL_S)) and left > STALL_S:
                raise DaemonStalled(f"acknowledged nothing for {STALL_S} s")


# How often the sender looks for messages the layer has not queued yet (submits made in C).
PULL_S = 0.05
# hand_to_kernel: the longest wait for the frames to be written.
HAND_OVER_S = 2.0


class _Written(threading.Event):
    """A queue marker set once the frames before it are written (hand_to_kernel), where a plain
    Event marker waits for their acknowledgement too (flush)."""


# What hand_to_kernel returns when the calling thread wrote every frame itself: set for good (an Event
# made per call costs more than the write of a frame's metadata).
_ALL_WRITTEN = _Written()
_ALL_WRITTEN.set()


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
        self._writing = threading.Lock()   # held by whoever writes: the sender, or a waiting thread
        self._conn: _Connection | None = None
        self._spool = None
        self._spool_lock = threading.Lock()
        self._retry_at = float("-inf")                     # monotonic time of the next connection attempt
        self._stall_wait = STALL_RETRY_S[0]                 # retry delay after the next stall
        self._diverting = False                             # the daemon is configured, the spool gets frames
        self.spool_path: Path | None = None
        # Called before each flush and by the sender at least every PULL_S: the layer reports the
        # submits its C path made (queues.py), whose messages are not queued yet.
        self.before_flush: list[Callable[[], None]] = []
        # layer/reported_submits.py: while it holds a licence, C writes frames to the destination itself; it is
        # revoked before anything is queued or written here (`adopt` then takes what C wrote)
        self.reported = None
        atexit.register(self.flush, 2.0)   # Python apps; C apps flush at device/instance destruction

    def send(self, frame: bytes | Callable[..., bytes], *args) -> None:
        """Queue a frame, or `frame(*args)` to encode it on the sender thread (off the
        application's hot path: the arguments must not change afterwards). Never waits for
        the network."""
        if self._queued(frame, args):
            self._kick()

    def send_soon(self, frame: bytes | Callable[..., bytes], *args) -> None:
        """`send`, without waking the sender: it takes the frame within PULL_S, or with the next
        frame sent or flush. For frames nothing waits for (a command buffer's WORKLOADS), so a
        recording costs no thread switch."""
        if self._thread is None:
            self.send(frame, *args)   # the sender is started by the first frame
        else:
            self._queued(frame, args)

    def _queued(self, frame, args) -> bool:
        """Append to the queue; False when the disk took the frame instead."""
        if self.reported is not None:
            self.reported.revoke()
        if len(self._queue) >= MAX_QUEUED_FRAMES:
            # The sender is behind (a slow daemon): the disk takes it now.
            self._spool_write(frame if isinstance(frame, bytes) else frame(*args))
            return False
        self._queue.append(frame if isinstance(frame, bytes) else (frame, args))
        return True

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
        self._pull_sources()
        marker = threading.Event()
        self._queue.append(marker)
        self._kick()
        done = marker.wait(timeout)
        with self._spool_lock:
            if self._spool is not None:
                self._spool.flush()
                os.fsync(self._spool.fileno())
        return done

    def hand_to_kernel(self) -> threading.Event:
        """Write every frame queued so far to the daemon's socket or to the spool; the Event
        returned is set once they are written (acknowledgements are not waited for). From there
        the frames outlive the process: the daemon reads what its socket holds, a spool write is in
        the page cache. Used where the application observes completion, so that what it knows has
        run keeps its metadata whatever the process does next (_exit, abort, SIGKILL). The calling
        thread writes them itself when the sender is idle and connected (or spooling): it is about
        to wait anyway, and a thread switch costs more than the write; otherwise the sender does,
        and the caller waits for the Event at most HAND_OVER_S (a stalled daemon costs the sender up
        to STALL_S, then it spools)."""
        self._pull_sources()
        if self._thread is not None and self._ready() and self._writing.acquire(blocking=False):
            try:
                if self._drain(helping=True):
                    return _ALL_WRITTEN
            finally:
                self._writing.release()
        marker = _Written()
        self._queue.append(marker)
        self._kick()
        return marker

    def _ready(self) -> bool:
        """Writing needs no connection attempt (which may wait): connected, or spooling until the
        next retry, or no daemon configured."""
        return self._conn is not None or not self.address or time.monotonic() < self._retry_at

    def close(self, timeout: float = 10.0) -> None:
        """Flush, then end the connection (a later frame reconnects)."""
        self.flush(timeout)
        with self._writing:   # the sender's look may be reading acknowledgements on it
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.sock.close()

    def write_elsewhere(self, grant: Callable[[int, bool], bool]) -> bool:
        """Let frames be written outside this class while nothing is queued: `grant(descriptor, socket)` is handed
        the destination (the daemon's socket, or the spool file) unless frames wait, a write is under way or the
        next must try the daemon first; what it returns. Whoever was granted is revoked before anything is queued
        (`reported`), and hands over what it wrote (`adopt`)."""
        if not self._writing.acquire(blocking=False):
            return False
        try:
            destination = self._destination()
            return destination is not None and grant(*destination)
        finally:
            self._writing.release()

    def _destination(self) -> tuple[int, bool] | None:
        """(`_writing` held) The daemon's socket (True) or the spool file (False), as a descriptor; None while
        frames wait or the next write must try the daemon first."""
        if self._queue or not self._ready():
            return None
        if self._conn is not None:
            return self._conn.sock.fileno(), True
        try:
            with self._spool_lock:
                self._spool_write_locked(b"")   # opened (with its HELLO) if it was not
                return self._spool.fileno(), False
        except OSError:   # the next frame's write says why
            return None

    def adopt(self, written: bytes, unsent: bytes) -> None:
        """Whole frames written outside this class to the destination it gave (`write_elsewhere`): `written`, on the
        daemon's socket, are kept until acknowledged like the frames sent here; `unsent`, not written, go first."""
        conn = self._conn
        if written and conn is not None:
            conn.sent += len(written)
            conn.unacked.append((conn.sent, written))
        if unsent:
            self._queue.appendleft(unsent)
            self._kick()

    def _pull_sources(self) -> None:
        if self.reported is not None:
            self.reported.revoke()
        for pull in self.before_flush:
            try:
                pull()
            except Exception:   # a source reports its own failures; this is the last net
                self.log.exception("tessera sender: cannot take the submits made in C")

    def _run(self) -> None:
        pulled = time.monotonic()
        while True:
            self._wake.wait(PULL_S)
            self._wake.clear()
            looked = time.monotonic() - pulled >= PULL_S
            if looked:   # idle or not: busy senders pull too
                self._pull_sources()
                pulled = time.monotonic()
            with self._writing:
                self._drain(helping=False)
            if looked:
                self._after_look()

    def _after_look(self) -> None:
        """After the look every PULL_S took back what C wrote: the daemon's acknowledgements read (and a
        connection that is due tried) with nothing to send, and C's licence given back when C was reporting
        under it (ReportedSubmits.renew: else the next wait's frame would take Python)."""
        try:
            with self._writing:
                if self._conn is not None or self.address:
                    self._write([])
            if self.reported is not None:
                self.reported.renew()
        except Exception:   # never let the sender die
            self.log.exception("tessera sender: unexpected error")

    def _drain(self, helping: bool) -> bool:
        """(`_writing` held) Write the queued frames in order, setting each marker once the frames
        before it are written (and, for a flush marker, acknowledged). A thread helping stops at a
        flush marker (its acknowledgements may take SETTLE_S) and leaves the rest to the sender:
        False then."""
        queue = self._queue
        while queue:
            frames, marker = [], None
            while queue and marker is None:
                item = queue[0]
                if isinstance(item, threading.Event):
                    if helping and not isinstance(item, _Written):
                        break
                    marker = item
                elif isinstance(item, bytes):
                    frames.append(item)
                else:
                    frames.append(self._encode(*item))
                queue.popleft()
            try:
                if frames:
                    self._write(frames)
                if marker is not None and not isinstance(marker, _Written):
                    self._settle()
            except Exception:   # never let the sender die: the frames are in the spool or reported
                self.log.exception("tessera sender: unexpected error")
            if marker is not None:
                marker.set()
            elif helping and queue:   # stopped at a flush marker
                return False
        return True

    def _encode(self, encode: Callable[..., bytes], args: tuple) -> bytes:
        try:
            return encode(*args)
        except Exception:   # a bug in an encoder loses that message only, and says so
            self.log.exception("tessera sender: cannot encode a %s message", getattr(encode, "__name__", "?"))
            return b""

    def _connect(self) -> None:
        now = time.monotonic()
        if self._conn is not None or not self.address or now < self._retry_at:
            return
        self._retry_at = now + RETRY_S
        try:
            self._conn = _Connection(_connect(self.address), self.hello)
        except DaemonStalled as e:
            self._stalled(e)
        except OSError as e:
            self._divert(f"hostd at {self.address} unreachable ({e})")
        else:
            if self._diverting:
                self._diverting = False
                self._stall_wait = STALL_RETRY_S[0]
                self.log.info("hostd at %s answers again: sending there", self.address)

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
        """The daemon went away or stalled: every frame it did not acknowledge goes to the spool
        (it may log some of them later too, if it wakes up: merge keeps one copy)."""
        conn, self._conn = self._conn, None
        conn.sock.close()
        self._spool_write(b"".join(frame for _, frame in conn.unacked))
        if isinstance(error, DaemonStalled):
            self._stalled(error)
        else:
            self._divert(f"hostd connection lost ({error})")

    def _stalled(self, error: DaemonStalled) -> None:
        wait, self._stall_wait = self._stall_wait, min(self._stall_wait * 2, STALL_RETRY_S[1])
        self._retry_at = time.monotonic() + wait
        self._divert(f"hostd at {self.address} stalled ({error})")

    def _divert(self, why: str) -> None:
        """Frames go to the spool from now on: say so once, until the daemon answers again."""
        if self._diverting:
            return
        self._diverting = True
        with self._spool_lock:
            self._spool_write_locked(b"")
        _always(self.log, "%s: spooling to %s; retrying later", why, self.spool_path)

    def _spool_write(self, data: bytes) -> None:
        with self._spool_lock:   # the sender thread, and application threads when the queue is full
            self._spool_write_locked(data)

    def _spool_write_locked(self, data: bytes) -> None:
        if self._spool is None:
            folder = self.session_dir or Path(tempfile.mkdtemp(prefix="tessera-session-"))
            private_folder(folder)
            self.spool_path = folder / f"layer-{os.getpid()}.spool"
            # Private, as hostd's logs are: frames name the app's resources and labels.
            fd = open_append(self.spool_path)
            self._spool = open(fd, "ab", buffering=0)
            self._spool.write(self.hello)
            self.log.info("spooling layer frames to %s", self.spool_path)
        if data:
            self._spool.write(data)


def _always(log: logging.Logger, msg: str, *args) -> None:
    """A warning shown whatever TESSERA_LOG says: frames no longer reach the daemon the user
    is watching, and only this line says where they are."""
    if log.isEnabledFor(logging.WARNING) or not log.handlers:
        log.warning(msg, *args)
        return
    record = log.makeRecord(log.name, logging.WARNING, __file__, 0, msg, args, None)
    for handler in log.handlers:
        handler.handle(record)

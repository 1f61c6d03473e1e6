"""The layer's transport over real Unix sockets: daemon, no daemon, daemon gone and back.

Every frame must arrive exactly once, at the daemon or in the spool file.
"""
from __future__ import annotations

import logging
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from tessera.hostd.config import parse_address
from tessera.hostd.embedded import EmbeddedDaemon
from tessera.layer import transport as tr
from tessera.schemas.frames import ACK, FrameDecoder, MessageType, encode, iter_file

LOG = logging.getLogger("test-transport")


class Receiver:
    """A minimal listener that keeps every byte each connection sends."""

    def __init__(self, path: Path, reading: bool = True) -> None:
        self.path = path
        self.reading = reading
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.connections: list[bytearray] = []
        self._conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self._conns.append(conn)
            buf = bytearray()
            self.connections.append(buf)
            if self.reading:
                threading.Thread(target=self._read, args=(conn, buf), daemon=True).start()

    @staticmethod
    def _read(conn: socket.socket, buf: bytearray) -> None:
        while data := conn.recv(65536):
            buf += data

    def close(self) -> None:
        self.server.close()
        for c in self._conns:
            c.shutdown(socket.SHUT_RDWR)
            c.close()
        self.path.unlink()


def frames_of(data: bytes):
    return FrameDecoder().feed(bytes(data))


def workload(tag: int) -> bytes:
    return encode(MessageType.WORKLOAD, {"kind": "dispatch", "device": "0x1", "command_buffer": "0x2"}, tag=tag)


HELLO = encode(MessageType.HELLO, {"protocol": 1, "pid": 1, "process": "t", "layer": "x", "acks": True,
                                   "clock_sync": {"monotonic_raw_ns": 1, "boottime_ns": 2}})


def wait_for(predicate, timeout=10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def hostd(sock: Path, out: Path) -> subprocess.Popen:
    """The real daemon, as a separate process that can be killed."""
    proc = subprocess.Popen([sys.executable, "-m", "tessera.tools.cli", "hostd", "--listen", f"unix:{sock}",
                             "--out", str(out)], stderr=subprocess.DEVNULL)
    wait_for(lambda: listening(sock))
    return proc


def listening(sock: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(sock))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def logged_frames(folder: Path) -> list:
    """Frames of every session log hostd wrote (whatever its on-disk format)."""
    return [f for log in sorted(folder.rglob("*.tessera-log")) for f in iter_file(log)]


def test_frames_reach_the_daemon_after_hello(tmp_path):
    with EmbeddedDaemon(tmp_path / "session") as daemon:
        t = tr.Transport(daemon.address, tmp_path, HELLO, LOG)
        for tag in range(1, 51):
            t.send(workload(tag))
        assert t.flush()
        t.close()
    got = logged_frames(tmp_path / "session")
    assert got[0].type == MessageType.HELLO
    assert [f.tag for f in got[1:]] == list(range(1, 51))
    assert t.spool_path is None          # every frame acknowledged: nothing spooled


def test_no_daemon_spools_everything(tmp_path):
    t = tr.Transport(None, tmp_path, HELLO, LOG)
    for tag in range(1, 21):
        t.send(workload(tag))
    assert t.flush()
    got = frames_of(t.spool_path.read_bytes())
    assert got[0].type == MessageType.HELLO and [f.tag for f in got[1:]] == list(range(1, 21))


def test_unacknowledged_frames_are_spooled(tmp_path, monkeypatch):
    """A peer that reads but never logs (acknowledges) anything: flush keeps a copy of every frame."""
    monkeypatch.setattr(tr, "SETTLE_S", 0.2)
    rx = Receiver(tmp_path / "s.sock")
    t = tr.Transport(f"unix:{tmp_path / 's.sock'}", tmp_path, HELLO, LOG)
    for tag in range(1, 11):
        t.send(workload(tag))
    assert t.flush()
    assert [f.tag for f in frames_of(t.spool_path.read_bytes())[1:]] == list(range(1, 11))
    t.close()
    rx.close()


def test_daemon_killed_and_restarted_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(tr, "RETRY_S", 0.0)
    sock, out = tmp_path / "hostd.sock", tmp_path / "out"
    daemon = hostd(sock, out)
    t = tr.Transport(f"unix:{sock}", tmp_path, HELLO, LOG)
    for tag in range(1, 11):
        t.send(workload(tag))
    assert t.flush()
    daemon.send_signal(signal.SIGKILL)   # dies without a chance to finish anything
    daemon.wait()
    for tag in range(11, 31):
        t.send(workload(tag))
        t.flush(timeout=5)
    daemon = hostd(sock, out)           # a new daemon on the same address
    for tag in range(31, 41):
        t.send(workload(tag))
    assert t.flush()
    t.close()
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=30)
    received = {f.tag for f in logged_frames(out) if f.type == MessageType.WORKLOAD}
    spooled = {f.tag for f in frames_of(t.spool_path.read_bytes()) if f.type == MessageType.WORKLOAD}
    assert received | spooled == set(range(1, 41))          # nothing lost (copies may exist in both)
    assert set(range(11, 31)) <= spooled, (sorted(received), sorted(spooled))
    assert set(range(31, 41)) <= received, (sorted(received), sorted(spooled))   # reconnected


def test_full_queue_spools_on_the_calling_thread(tmp_path, monkeypatch):
    """A daemon that stops reading: the sender blocks on the socket, the bounded queue fills,
    and application threads put their frames in the spool instead of waiting."""
    monkeypatch.setattr(tr, "MAX_QUEUED_FRAMES", 8)
    monkeypatch.setattr(tr, "SETTLE_S", 0.2)
    rx = Receiver(tmp_path / "s.sock", reading=False)
    t = tr.Transport(f"unix:{tmp_path / 's.sock'}", tmp_path, HELLO, LOG)
    frames = [encode(MessageType.WORKLOAD, {"kind": "dispatch", "device": "0x1", "command_buffer": "0x2",
                                            "pad": "x" * 10_000}, tag=tag) for tag in range(1, 2001)]
    for frame in frames:          # 20 MB: more than the socket and the queue hold
        t.send(frame)
    assert t.spool_path is not None and t.spool_path.stat().st_size > 0   # spooled by this thread
    rx.close()                    # the daemon goes away: the blocked sender spools the rest
    assert t.flush()
    t.close()
    received = {f.tag for c in rx.connections for f in frames_of(c) if f.type == MessageType.WORKLOAD}
    spooled = {f.tag for f in frames_of(t.spool_path.read_bytes()) if f.type == MessageType.WORKLOAD}
    assert received | spooled == set(range(1, 2001))


class StallingReceiver:
    """A daemon that stops: it acknowledges the HELLO (when `answer`), then never reads again,
    like hostd under SIGSTOP once the socket buffers are full."""

    def __init__(self, path: Path, answer: bool) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.answer = answer
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.answer:
                hello = frames_of(conn.recv(len(HELLO), socket.MSG_WAITALL))
                assert hello[0].type == MessageType.HELLO
                conn.sendall(ACK.pack(len(HELLO)))

    def close(self) -> None:
        self.server.close()
        for c in self.conns:
            c.close()


def big_workload(tag: int) -> bytes:
    return encode(MessageType.WORKLOAD, {"kind": "dispatch", "device": "0x1", "command_buffer": "0x2",
                                         "pad": "x" * 10_000}, tag=tag)


def test_daemon_that_stops_reading_is_dropped_and_spooled(tmp_path, caplog):
    """The sender never blocks on a stopped daemon: after STALL_S without progress its frames go to
    the spool (all of them: the daemon acknowledged none), with one warning, and flush returns."""
    rx = StallingReceiver(tmp_path / "s.sock", answer=True)
    t = tr.Transport(f"unix:{tmp_path / 's.sock'}", tmp_path, HELLO, LOG)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        for tag in range(1, 501):                # 5 MB: far more than the socket buffers hold
            t.send(big_workload(tag))
        start = time.monotonic()
        assert t.flush(timeout=30)
        took = time.monotonic() - start
    spooled = [f.tag for f in frames_of(t.spool_path.read_bytes()) if f.type == MessageType.WORKLOAD]
    assert sorted(spooled) == list(range(1, 501))
    stalls = [r for r in caplog.records if "stalled" in r.getMessage()]
    assert len(stalls) == 1 and str(t.spool_path) in stalls[0].getMessage()
    assert took < 10 * tr.STALL_S               # bounded by the stall timeout, not by the daemon
    t.close()
    rx.close()


def test_daemon_that_never_answers_hello_gets_nothing_and_is_retried_later(tmp_path, caplog):
    """A stopped daemon's kernel still accepts connections: a connection counts only once the
    daemon acknowledges its HELLO; until then the frames are spooled and retries back off."""
    rx = StallingReceiver(tmp_path / "s.sock", answer=False)
    t = tr.Transport(f"unix:{tmp_path / 's.sock'}", tmp_path, HELLO, LOG)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        for tag in range(1, 11):
            t.send(workload(tag))
            assert t.flush(timeout=30)
    assert [f.tag for f in frames_of(t.spool_path.read_bytes())[1:]] == list(range(1, 11))
    assert len(rx.conns) == 1                   # backed off: not one connection per flush
    assert len([r for r in caplog.records if "stalled" in r.getMessage()]) == 1
    t.close()
    rx.close()


def test_spool_file_is_private(tmp_path):
    t = tr.Transport(None, tmp_path, HELLO, LOG)
    t.send(workload(1))
    assert t.flush()
    assert stat.S_IMODE(t.spool_path.stat().st_mode) == 0o600


def test_ipv6_loopback_daemon(tmp_path):
    """tcp:[::1]:PORT, as hostd prints it, is where the layer connects (not an AF_INET socket)."""
    with EmbeddedDaemon(tmp_path / "session", listen=parse_address("tcp:[::1]:0")) as daemon:
        assert daemon.address.startswith("tcp:[::1]:")
        t = tr.Transport(daemon.address, tmp_path, HELLO, LOG)
        for tag in range(1, 11):
            t.send(workload(tag))
        assert t.flush()
        t.close()
    assert [f.tag for f in logged_frames(tmp_path / "session")[1:]] == list(range(1, 11))
    assert t.spool_path is None

"""The layer's transport over real Unix sockets: daemon, no daemon, daemon gone and back.

Every frame must arrive exactly once, at the daemon or in the spool file.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path

from tessera.layer import transport as tr
from tessera.schemas.frames import FrameDecoder, MessageType, encode

LOG = logging.getLogger("test-transport")


class Receiver:
    """A minimal listener that keeps every byte each connection sends."""

    def __init__(self, path: Path) -> None:
        self.path = path
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


HELLO = encode(MessageType.HELLO, {"protocol": 1, "pid": 1, "process": "t", "layer": "x",
                                   "clock_sync": {"monotonic_raw_ns": 1, "boottime_ns": 2}})


def wait_for(predicate, timeout=10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_frames_reach_the_daemon_after_hello(tmp_path):
    rx = Receiver(tmp_path / "s.sock")
    t = tr.Transport(f"unix:{tmp_path / 's.sock'}", tmp_path, HELLO, LOG)
    for tag in range(1, 51):
        t.send(workload(tag))
    assert t.flush()
    wait_for(lambda: rx.connections and len(frames_of(rx.connections[0])) == 51)
    got = frames_of(rx.connections[0])
    assert got[0].type == MessageType.HELLO
    assert [f.tag for f in got[1:]] == list(range(1, 51))
    assert t.spool_path is None
    rx.close()


def test_no_daemon_spools_everything(tmp_path):
    t = tr.Transport(None, tmp_path, HELLO, LOG)
    for tag in range(1, 21):
        t.send(workload(tag))
    assert t.flush()
    got = frames_of(t.spool_path.read_bytes())
    assert got[0].type == MessageType.HELLO and [f.tag for f in got[1:]] == list(range(1, 21))


def test_daemon_gone_and_back_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(tr, "RETRY_S", 0.0)
    sock = tmp_path / "s.sock"
    rx = Receiver(sock)
    t = tr.Transport(f"unix:{sock}", tmp_path, HELLO, LOG)
    for tag in range(1, 11):
        t.send(workload(tag))
    assert t.flush()
    wait_for(lambda: rx.connections and len(frames_of(rx.connections[0])) == 11)
    rx.close()                                    # the daemon dies
    for tag in range(11, 31):
        t.send(workload(tag))
        t.flush()
    rx2 = Receiver(sock)                          # and comes back
    for tag in range(31, 41):
        t.send(workload(tag))
        t.flush()
    wait_for(lambda: sum(len(frames_of(c)) for c in rx2.connections) >= 1)
    time.sleep(0.2)
    received = [f.tag for c in rx.connections + rx2.connections for f in frames_of(c) if f.type != MessageType.HELLO]
    spooled = [f.tag for f in frames_of(t.spool_path.read_bytes()) if f.type != MessageType.HELLO]
    assert sorted(received + spooled) == list(range(1, 41))   # each exactly once
    assert spooled and any(tag > 30 for tag in received)      # it did spool, and it did reconnect
    rx2.close()

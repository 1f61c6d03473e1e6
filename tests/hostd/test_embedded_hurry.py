"""EmbeddedDaemon.hurry(): `tessera run`, at a signal, stops waiting for connections still open."""
from __future__ import annotations

import socket
import time

from hostd_builders import hello

from tessera.hostd.embedded import EmbeddedDaemon


def test_hurry_closes_the_connections_still_open_and_keeps_what_they_sent(tmp_path):
    d = EmbeddedDaemon(tmp_path / "out", drain_timeout=120, socket_dir=tmp_path)
    d.start()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(d.address.partition(":")[2])
    client.sendall(hello())                  # and then stays open, as a stopped program's would
    d.hurry()                                # what a signal during stop() does (set first here: no race)
    began = time.monotonic()
    d.stop()
    assert time.monotonic() - began < 60     # not the 120 s drain
    client.settimeout(30)
    assert client.recv(1) == b""             # closed by the daemon
    client.close()
    assert [p.name for p in (tmp_path / "out").rglob("*.tessera-log")]   # its log kept
    assert list(tmp_path.glob("tessera-hostd-*")) == []                  # the socket folder removed
    d.hurry()                                # after stop(): nothing (the loop is gone)

"""hostd's listener under hostile-but-fair clients (issue #10, item 5), over real sockets.

A connection that never says HELLO is closed after `hello_timeout`, one that did may stay
idle; connections beyond `max_connections` are closed at accept; partial frames are held
within one budget for all connections; the default socket folder must be the user's and
private; IPv6 loopback works end to end. Ordering comes from the daemon's answers
(acknowledgements, end of stream), never from sleeping.
"""
from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys

import pytest
from hostd_builders import device

from tessera.hostd.config import Address, parse_address
from tessera.hostd.daemon import DaemonError, private_dir
from tessera.hostd.embedded import EmbeddedDaemon
from tessera.schemas.frames import ACK, MessageType, encode

WAIT_S = 30.0      # upper bound for answers that come at once from a working daemon


def hello(pid: int = 4242) -> bytes:
    return encode(MessageType.HELLO, {"protocol": 1, "pid": pid, "process": "app", "layer": "0.1", "acks": True,
                                      "clock_sync": {"monotonic_raw_ns": 1, "boottime_ns": 2}})


def connect(daemon: EmbeddedDaemon) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(daemon.bound.path))
    s.settimeout(WAIT_S)
    return s


def acked(s: socket.socket, total: int) -> None:
    """Block until the daemon acknowledges `total` bytes of this connection's stream."""
    got = 0
    while got < total:
        data = s.recv(ACK.size, socket.MSG_WAITALL)
        assert len(data) == ACK.size, f"connection closed at {got} of {total} acknowledged bytes"
        (got,) = ACK.unpack(data)


def closed_by_daemon(s: socket.socket) -> bool:
    """Block until the daemon closes the connection (True) or sends something (False)."""
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
            if len(data) % ACK.size:
                return False
    except ConnectionResetError:
        return True


def test_silent_connection_times_out_and_idle_client_stays(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tessera.hostd")
    with EmbeddedDaemon(tmp_path / "out", hello_timeout=0.5) as daemon:
        app = connect(daemon)
        app.sendall(hello() + device())
        acked(app, len(hello() + device()))
        silent = connect(daemon)                 # opened after the app: its deadline is later
        assert closed_by_daemon(silent)          # ... so the app's would have passed too
        more = encode(MessageType.DEVICE, {"device": "0xd2", "name": "x", "vendor_id": 1, "api_version": "1.3.0"})
        app.sendall(more)                        # idle past the HELLO timeout, still served
        acked(app, len(hello() + device() + more))
        app.close()
        silent.close()
    assert any("no HELLO within 0.5 s" in m for m in caplog.messages)


def test_connections_beyond_the_cap_are_closed_at_accept(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tessera.hostd")
    with EmbeddedDaemon(tmp_path / "out", max_connections=2) as daemon:
        first, second = connect(daemon), connect(daemon)
        for s in (first, second):
            s.sendall(hello())
            acked(s, len(hello()))               # both registered
        third = connect(daemon)
        try:
            third.sendall(hello())
        except (BrokenPipeError, ConnectionResetError):
            pass                                 # the daemon closed it before the HELLO went out
        assert closed_by_daemon(third)
        for s in (first, second, third):
            s.close()
    assert any("connections open, the limit" in m for m in caplog.messages)
    folders = [d for d in (tmp_path / "out").iterdir() if d.is_dir()]
    assert len(folders) == 2                     # the refused client left no session folder


def partial_workload(size: int) -> tuple[bytes, bytes]:
    """A WORKLOAD frame with `size` bytes of JSON, split after its header and half its JSON."""
    frame = encode(MessageType.WORKLOAD, {"kind": "dispatch", "device": "0xd1", "command_buffer": "0xcb1",
                                          "pad": "x" * (size - 80)}, tag=1)
    cut = len(frame) // 2
    return frame[:cut], frame[cut:]


def test_partial_frames_share_one_budget(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tessera.hostd")
    with EmbeddedDaemon(tmp_path / "out", max_buffered=64 * 1024) as daemon:
        a, b = connect(daemon), connect(daemon)
        head_a, tail_a = partial_workload(80_000)
        head_b, _ = partial_workload(80_000)
        a.sendall(hello(1) + head_a)
        acked(a, len(hello(1) + head_a))         # a holds ~40 KB of a frame
        b.sendall(hello(2))
        acked(b, len(hello(2)))
        b.sendall(head_b)                        # another ~40 KB: above 64 KB in all
        assert closed_by_daemon(b)
        a.sendall(tail_a)                        # a is unaffected and completes its frame
        acked(a, len(hello(1) + head_a + tail_a))
        a.close()
        b.close()
    assert any("above the budget of 65536" in m for m in caplog.messages)


def test_ipv6_loopback_listener(tmp_path):
    """`--listen tcp:[::1]:0` listens on IPv6 and reports an address the layer can use."""
    with EmbeddedDaemon(tmp_path / "out", listen=parse_address("tcp:[::1]:0")) as daemon:
        assert daemon.address.startswith("tcp:[::1]:")
        assert parse_address(daemon.address) == daemon.bound
        s = socket.create_connection(("::1", daemon.bound.port), timeout=WAIT_S)
        s.sendall(hello())
        acked(s, len(hello()))
        s.close()


def test_default_socket_folder_made_by_someone_else_is_refused(tmp_path):
    """The real `tessera hostd` with its default address: a world-writable folder is refused."""
    shared = tmp_path / "tessera"
    shared.mkdir()
    os.chmod(shared, 0o777)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "tessera.tools.cli", "hostd", "--out", str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"{shared} belongs to uid {os.getuid()} with mode 0777" in proc.stderr
    assert "private (0700)" in proc.stderr
    assert not (shared / "hostd.sock").exists()


def test_private_dir_checks_owner_mode_and_kind(tmp_path):
    private_dir(tmp_path / "new")                              # created 0700
    assert os.stat(tmp_path / "new").st_mode & 0o777 == 0o700
    with pytest.raises(DaemonError, match="belongs to uid"):
        private_dir(tmp_path / "new", uid=os.getuid() + 1)     # someone else's
    os.symlink(tmp_path / "new", tmp_path / "link")
    with pytest.raises(DaemonError, match="not a folder"):
        private_dir(tmp_path / "link")


def test_tcp_address_round_trip():
    for text in ("tcp:127.0.0.1:9", "tcp:[::1]:9"):
        assert str(parse_address(text)) == text
    assert Address("tcp", host="::1", port=9) == parse_address("tcp:::1:9")

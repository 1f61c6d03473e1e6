"""A client that dies with frames still unread by hostd loses none of them.

What a killed program looks like to the daemon: it wrote its last frames and died before hostd
read them, with hostd's ACKs of earlier frames unread. hostd then reads a first part, and its ACK
of that part finds the client gone (EPIPE). Written with asyncio's transport.write, that write
error aborted the connection and dropped the rest of the stream (tests/integration/test_endings.py
saw it as an occasional `wait-kill` run missing its last submits' metadata, session.json ending
"connection lost ([Errno 32] Broken pipe)"). Here the order is made certain: hostd is stopped
(SIGSTOP) while the client queues more than one read's worth (asyncio reads 256 KiB at a time) and
closes; after SIGCONT hostd must log every frame and end on the client's EOF.
"""
from __future__ import annotations

import json
import signal
import socket

import pytest

from hostd_process import logged_frames, start_hostd, wait_until
from tessera.layer import encoder
from tessera.schemas import frames as fr

ASYNCIO_READ = 256 * 1024   # asyncio's selector transports read at most this much per recv


def _client(sock_path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)   # clamped to the kernel's wmem_max x 2
    s.connect(str(sock_path))
    return s


def test_frames_a_dead_client_left_unread_are_all_logged(tmp_path):
    sock_path, out = tmp_path / "hostd.sock", tmp_path / "out"
    daemon, err = start_hostd(sock_path, out)
    client = _client(sock_path)
    try:
        client.sendall(encoder.hello())
        ack = client.recv(fr.ACK.size)                  # hostd has the HELLO and answers: it is reading
        assert len(ack) == fr.ACK.size
        if client.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < ASYNCIO_READ + 64 * 1024:
            pytest.skip("this kernel's socket buffers hold less than two of asyncio's reads")
        daemon.send_signal(signal.SIGSTOP)
        try:
            sent = 0
            client.setblocking(False)
            frame = encoder.frame(7, 0x1000, "queue 0.0", "present", 123)
            while sent < ASYNCIO_READ + 32 * 1024:      # more than one read, less than the buffer holds
                sent += client.send(frame)
                assert sent % len(frame) == 0, "a frame was cut: the buffer filled up"
            client.close()                              # dies with hostd's HELLO ACK... read, and frames unread
        finally:
            daemon.send_signal(signal.SIGCONT)

        def ended() -> bool:
            return any(json.loads(p.read_text()).get("end") for p in out.rglob("session.json"))
        wait_until(ended)
        (session,) = list(out.rglob("session.json"))
        end = json.loads(session.read_text())["end"]
        frames = [f for f in logged_frames(out) if f.type == fr.MessageType.FRAME]
        assert len(frames) == sent // len(frame), end
        assert "Broken pipe" not in end and "lost" not in end, end
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        err.text()

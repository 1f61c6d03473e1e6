"""Malformed input at a running daemon: it never dies and a well-behaved client gets every byte through."""
from __future__ import annotations

import json
import random
import socket
import struct

from hostd_builders import hello, workload
from test_daemon import connect, good_stream, sessions, wait_closed_by_server

from tessera.hostd.config import Validation
from tessera.hostd.embedded import EmbeddedDaemon
from tessera.schemas.logfile import read_stream
from tessera.hostd.storage import LOG_NAME
from tessera.schemas.frames import MessageType, encode


def malformed(rng: random.Random) -> bytes:
    """One frame that parses as a frame but is wrong inside (non-fatal)."""
    choice = rng.randrange(5)
    if choice == 0:
        return encode(MessageType.WORKLOAD, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))), tag=1)
    if choice == 1:
        return encode(MessageType.SUBMIT, {"queue": rng.random()}, sequence=rng.randrange(1 << 64))
    if choice == 2:
        t = rng.choice([0x05, 0x7F, 0x90, 0xFF])                  # unknown types
        return encode(t, {"?": 1}, sequence=1 if t & 0x80 else None)
    if choice == 3:
        return encode(MessageType.FRAME, b'{"frame": -1, "time_ns": "x"}')
    return encode(MessageType.ANNEX, b"null", sequence=2, tag=3)


def test_ten_thousand_malformed_frames_and_garbage_clients(tmp_path):
    rng = random.Random(10_000)
    out = tmp_path / "out"
    with EmbeddedDaemon(out, validate=Validation.STRICT, max_frame=1 << 16) as d:
        good = connect(d.address)
        good_bytes = good_stream(9, 150)
        good.sendall(good_bytes[:1000])
        noisy = connect(d.address)
        noisy_bytes = hello(pid=66) + b"".join(malformed(rng) for _ in range(10_000))
        view = memoryview(noisy_bytes)
        while view:
            n = rng.randint(1, 4096)
            noisy.sendall(view[:n])
            view = view[n:]
        for i in range(40):                         # garbage clients, and fatal frames after a HELLO
            c = connect(d.address)
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
            c.sendall(junk if i % 2 else hello(pid=1000 + i) + struct.pack("<BQI", 3, 1, 1 << 31) + junk)
            wait_closed_by_server(c)
        good.sendall(good_bytes[1000:])
        good.close()
        noisy.close()
        late = connect(d.address)                   # still accepting
        late.sendall(hello(pid=77) + workload(1, "dispatch"))
        late.close()
    records = sessions(out)
    by_pid = {r["hello"]["pid"]: (n, r) for n, r in records.items() if r["hello"]}
    name, r = by_pid[9]
    assert read_stream(out / name / LOG_NAME) == good_bytes and r["problems"] == 0
    name, r = by_pid[66]
    assert read_stream(out / name / LOG_NAME) == noisy_bytes
    assert r["skipped"] + r["rejected"] + r["frames"].get("FRAME", 0) == 10_000 and r["end"] == "client closed"
    assert by_pid[77][1]["frames"] == {"HELLO": 1, "WORKLOAD": 1}
    assert len(records) == 43
    json.dumps(records)

"""The daemon over real sockets: durable logs, concurrent clients, bad clients, security, shutdown."""
from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import stat
import subprocess
import sys

import pytest
from hostd_builders import annex, device, frame, hello, submit, workload, workloads

from tessera.hostd.config import Address, AddressError, Validation, parse_address
from tessera.hostd.daemon import DaemonError
from tessera.hostd.embedded import EmbeddedDaemon
from tessera.schemas.logfile import read_stream
from tessera.hostd.storage import LOG_NAME, RECORD_NAME, REJECTED_NAME
from tessera.schemas.frames import MessageType, encode


def connect(address: str) -> socket.socket:
    kind, _, rest = address.partition(":")
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(rest)
    else:
        host, _, port = rest.rpartition(":")
        s = socket.create_connection((host, int(port)))
    return s


def wait_closed_by_server(s: socket.socket) -> None:
    """Say we are done sending, then block until the daemon closes the connection (no sleeping)."""
    s.settimeout(20)
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass                      # the daemon closed first
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass
    s.close()


def sessions(out) -> dict[str, dict]:
    """Folder name -> session.json record, for every connection folder."""
    return {d.name: json.loads((d / RECORD_NAME).read_text()) for d in sorted(out.iterdir()) if d.is_dir()}


def good_stream(pid: int, n: int) -> bytes:
    parts = [hello(pid=pid, process=f"app{pid}"), device()]
    for i in range(1, n + 1):
        parts.append(workload(i, "dispatch", groups=[i, 1, 1], items=64 * i))
        parts.append(submit(i, 1_000_000_000 + i, [i]))
    parts.append(annex(1, 1, items=64))
    parts.append(frame(0, 1_000_000_999))
    return b"".join(parts)


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out"


def test_unix_socket_is_owner_only(tmp_path, out):
    sock_dir = tmp_path / "private" / "run"
    with EmbeddedDaemon(out, listen=Address("unix", path=sock_dir / "hostd.sock")) as d:
        assert d.address == f"unix:{sock_dir / 'hostd.sock'}"
        mode = os.stat(sock_dir / "hostd.sock").st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        assert stat.S_IMODE(os.stat(sock_dir).st_mode) == 0o700
        with pytest.raises(DaemonError, match="another daemon is listening"):
            with EmbeddedDaemon(out, listen=Address("unix", path=sock_dir / "hostd.sock")):
                pass
    assert not (sock_dir / "hostd.sock").exists()


def test_stale_socket_is_replaced_and_files_are_not(tmp_path, out):
    path = tmp_path / "hostd.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()                                   # a socket file nobody listens on
    with EmbeddedDaemon(out, listen=Address("unix", path=path)) as d:
        c = connect(d.address)
        c.sendall(hello())
        c.close()
    (tmp_path / "file").write_text("x")
    with pytest.raises(DaemonError, match="not a socket"):
        with EmbeddedDaemon(out, listen=Address("unix", path=tmp_path / "file")):
            pass


@pytest.mark.parametrize("text", ["tcp:0.0.0.0:9000", "tcp:192.168.1.2:9000", "tcp:example.com:1", "tcp:[::]:1",
                                  "udp:127.0.0.1:1", "tcp:127.0.0.1", "nonsense"])
def test_non_loopback_and_malformed_addresses_are_refused(text):
    with pytest.raises(AddressError):
        parse_address(text)


def test_loopback_addresses_parse():
    assert parse_address("tcp:127.0.0.1:9001") == Address("tcp", host="127.0.0.1", port=9001)
    assert parse_address("tcp:localhost:0").host == "127.0.0.1"
    assert parse_address("tcp:[::1]:5").host == "::1"
    assert parse_address("unix:/tmp/x.sock").path.name == "x.sock"


def test_cli_refuses_non_loopback():
    from click.testing import CliRunner

    from tessera.hostd.cli import hostd

    r = CliRunner().invoke(hostd, ["--listen", "tcp:0.0.0.0:9000"])
    assert r.exit_code == 2 and "non-loopback" in r.output


def test_concurrent_clients_one_misbehaving_each_way(out, caplog):
    caplog.set_level(logging.INFO, logger="tessera.hostd")
    rng = random.Random(6)
    big = 4096
    with EmbeddedDaemon(out, listen=Address("tcp", host="127.0.0.1", port=0), max_frame=big) as d:
        good = {pid: (connect(d.address), good_stream(pid, 60)) for pid in (101, 102, 103, 104)}
        sent = {pid: 0 for pid in good}
        # the misbehaving ones, alongside
        garbage = connect(d.address)
        garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(rng.randrange(256) for _ in range(500)))
        oversized = connect(d.address)
        oversized_bytes = hello(pid=201) + frame(1, 5) + bytes([0x03]) + (9).to_bytes(8, "little") + \
            (big + 1).to_bytes(4, "little") + b"{}"
        oversized.sendall(oversized_bytes)
        badjson = connect(d.address)
        badjson_bytes = hello(pid=202) + encode(MessageType.WORKLOAD, b'{"kind": "dispa', tag=3) + \
            encode(MessageType.DEVICE, b"\xff\xfe") + frame(2, 7)
        badjson.sendall(badjson_bytes)
        cut = connect(d.address)
        cut_bytes = hello(pid=203) + frame(1, 5) + workload(4, "dispatch")[:-6]
        cut.sendall(cut_bytes)
        cut.close()                                   # disconnects mid-frame
        # interleave the good clients' streams in random pieces
        while any(sent[p] < len(good[p][1]) for p in good):
            pid = rng.choice([p for p in good if sent[p] < len(good[p][1])])
            sock, data = good[pid]
            n = rng.randint(1, 300)
            sock.sendall(data[sent[pid]:sent[pid] + n])
            sent[pid] += n
        wait_closed_by_server(garbage)
        wait_closed_by_server(oversized)
        for sock, _ in good.values():
            sock.close()
        badjson.close()
    records = sessions(out)
    by_pid = {r["hello"]["pid"]: (name, r) for name, r in records.items() if r["hello"]}
    for pid, (_, data) in good.items():
        name, r = by_pid[pid]
        assert name.startswith(f"app{pid}-{pid}-")
        assert read_stream(out / name / LOG_NAME) == data          # byte for byte
        assert r["frames"] == {"HELLO": 1, "DEVICE": 1, "WORKLOAD": 60, "SUBMIT": 60, "ANNEX": 1, "FRAME": 1}
        assert r["problems"] == 0 and r["end"] == "client closed"
    # every byte received from the bad clients is kept too
    name, r = by_pid[201]
    assert read_stream(out / name / LOG_NAME) == oversized_bytes
    assert f"at byte {len(hello(pid=201)) + len(frame(1, 5))}" in r["end"] and "above the limit" in r["end"]
    name, r = by_pid[202]
    assert read_stream(out / name / LOG_NAME) == badjson_bytes
    assert r["skipped"] == 2 and r["frames"] == {"HELLO": 1, "FRAME": 1}
    name, r = by_pid[203]
    assert read_stream(out / name / LOG_NAME) == cut_bytes
    nameless = [n for n, r in records.items() if r["hello"] is None]
    assert len(nameless) == 1 and "not a Tessera layer" in records[nameless[0]]["end"]
    assert read_stream(out / nameless[0] / LOG_NAME).startswith(b"GET / HTTP/1.1")
    # one clear line per problem, naming client, offset, problem
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    first_bad = len(hello(pid=202))
    assert any(f"client app[202]#" in m and f"at byte {first_bad}:" in m and "invalid JSON" in m for m in lines)
    assert any("app[203]#" in m and "disconnected inside a frame" in m for m in lines)
    assert any("app[201]#" in m and "above the limit of 4096" in m and "closing" in m for m in lines)
    assert any("at byte 0:" in m and "not a Tessera layer" in m and "closing" in m for m in lines)
    numbers = [name.rsplit("-", 1)[1] for name in records]
    assert len(set(numbers)) == len(numbers) == 8            # one folder per connection, numbered uniquely


def test_strict_rejects_schema_violations_warn_keeps_them(tmp_path, caplog):
    bad = workload(2, "teapot")
    stream = hello() + workload(1, "dispatch") + bad + frame(0, 1)
    for mode in (Validation.STRICT, Validation.WARN, Validation.OFF):
        out = tmp_path / mode.value
        with EmbeddedDaemon(out, validate=mode) as d:
            c = connect(d.address)
            c.sendall(stream)
            c.close()
        (name, r), = sessions(out).items()
        assert read_stream(out / name / LOG_NAME) == stream
        rejected = out / name / REJECTED_NAME
        if mode is Validation.STRICT:
            entry = json.loads(rejected.read_text())
            assert entry["offset"] == len(hello() + workload(1, "dispatch")) and "kind" in entry["reason"]
            assert r["rejected"] == 1 and r["frames"]["WORKLOAD"] == 1
        else:
            assert not rejected.exists() and r["frames"]["WORKLOAD"] == 2
            assert r["problems"] == (1 if mode is Validation.WARN else 0)


def test_unknown_types_are_kept_and_warned_once(out, caplog):
    stream = hello() + encode(0x7A, {"x": 1}) + encode(0x7A, {"x": 2}) + encode(0xF0, {}, sequence=1) + frame(0, 1)
    with EmbeddedDaemon(out) as d:
        c = connect(d.address)
        c.sendall(stream)
        c.close()
    (name, r), = sessions(out).items()
    assert read_stream(out / name / LOG_NAME) == stream
    assert r["skipped"] == 3 and r["frames"]["FRAME"] == 1
    warned = [m for m in caplog.messages if "unknown message type" in m]
    assert len(warned) == 2 and "0x7a" in warned[0] and "0xf0" in warned[1]


def test_shutdown_closes_lingering_clients_after_drain_and_finishes_writing(out):
    stream = good_stream(300, 5)
    with EmbeddedDaemon(out, drain_timeout=0.2) as d:
        c = connect(d.address)
        c.sendall(stream)
        c.sendall(frame(1, 2)[:5])          # and stays connected, mid-frame
        # a second client proves the first one's bytes were processed before shutdown starts
        probe = connect(d.address)
        probe.sendall(b"\x00garbage-garbage-garbage")
        wait_closed_by_server(probe)
    wait_closed_by_server(c)
    records = sessions(out)
    name = next(n for n, r in records.items() if r["hello"])
    assert records[name]["end"] == "shutdown"
    assert read_stream(out / name / LOG_NAME) == stream + frame(1, 2)[:5]


def test_sigterm_stops_tessera_hostd_in_order(tmp_path):
    out = tmp_path / "out"
    sock = tmp_path / "s" / "hostd.sock"
    proc = subprocess.Popen([sys.executable, "-m", "tessera.tools.cli", "hostd", "--listen", f"unix:{sock}",
                             "--out", str(out), "-v"], stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        while "listening on" not in line:
            assert line, "hostd exited before listening"
            line = proc.stderr.readline()
        c = connect(f"unix:{sock}")
        stream = good_stream(400, 3)
        c.sendall(stream)
        c.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    (name, r), = sessions(out).items()
    assert read_stream(out / name / LOG_NAME) == stream
    assert not sock.exists()


def test_a_bad_entry_of_a_workloads_batch_is_reported_never_rejected_with_the_others(tmp_path, caplog):
    """WORKLOADS (schemas/workloads.py): the envelope is a frame's schema, each entry is checked as the
    WORKLOAD it stands for; strict mode rejects a bad envelope only, a bad entry is one problem line."""
    good = [{"tag": 1, "kind": "dispatch", "groups": [1, 1, 1]}, {"tag": 3, "kind": "buffer_transfer", "bytes": 4}]
    bad_entry = workloads(good[:1] + [{"tag": 2, "kind": "teapot"}] + good[1:])
    bad_envelope = workloads([{"kind": "dispatch"}])        # an entry without a tag
    stream = hello(protocol=3) + bad_entry + bad_envelope
    with EmbeddedDaemon(tmp_path, validate=Validation.STRICT) as d:
        c = connect(d.address)
        c.sendall(stream)
        c.close()
    (name, r), = sessions(tmp_path).items()
    assert read_stream(tmp_path / name / LOG_NAME) == stream
    [entry] = [json.loads(line) for line in (tmp_path / name / REJECTED_NAME).read_text().splitlines()]
    assert entry["offset"] == len(hello(protocol=3) + bad_entry) and "tag" in entry["reason"]
    assert r["rejected"] == 1 and r["frames"]["WORKLOADS"] == 1 and r["problems"] == 2
    assert any("the entry of t2 violates the WORKLOAD schema" in m and "teapot" in m for m in caplog.messages)

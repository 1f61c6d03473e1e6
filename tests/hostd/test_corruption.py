"""Issue #10 item 3: a damaged byte costs the record it is in, never the rest of the file.

A session log written by hostd and a GPU trace are damaged at many offsets (a flipped
byte, an overwritten header-sized stretch, inserted garbage, a deleted byte): every
record the damage did not touch is still read. A log whose HELLO is damaged still
merges, under the pid of session.json or of its folder's name. Files hostd writes are
private.
"""
from __future__ import annotations

import logging
import os
import random
import socket
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostd_builders import RAW0, GpuTrace, hello, submit, workload

from tessera.hostd.cli import merge
from tessera.hostd.config import Address, DaemonConfig, Validation
from tessera.hostd.embedded import EmbeddedDaemon
from tessera.hostd.ingest import Ingest
from tessera.hostd.merge import merge_session
from tessera.hostd.storage import LOG_NAME, RECORD_NAME, REJECTED_NAME
from tessera.schemas import perfetto as pf
from tessera.schemas.frames import FrameDecoder, MessageType, encode
from tessera.schemas.logfile import FILE_HEADER, iter_records, read_frames, read_stream

PID = 4242


def _stream(n: int = 60) -> bytes:
    frames = [hello(pid=PID)]
    for i in range(1, n + 1):
        frames.append(workload(i, "dispatch", groups=[i, 1, 1], labels=["x" * (i % 7 * 30)]))
        if i % 3 == 0:
            frames.append(submit(i, RAW0 + i * 1000, [i - 2, i - 1, i]))
    return b"".join(frames)


def _log(folder: Path, stream: bytes, chunks: list[int]) -> Path:
    """A session log as hostd writes it, the stream fed in chunks of the given sizes."""
    ingest = Ingest(DaemonConfig(Address("unix", Path("x")), folder), "test", logging.getLogger("test.quiet"))
    pos = 0
    for size in chunks:
        ingest.feed(stream[pos:pos + size])
        pos += size
    ingest.feed(stream[pos:])
    ingest.close("client closed")
    (path,) = folder.rglob(LOG_NAME)
    return path


def _damage(data: bytes, at: int, how: str, rng: random.Random) -> tuple[bytes, int, int]:
    """The damaged bytes and the range [lo, hi) of the original file it touched."""
    if how == "flip":
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:], at, at + 1
    if how == "overwrite":
        junk = bytes(rng.randrange(256) for _ in range(24))
        return data[:at] + junk + data[at + 24:], at, at + 24
    if how == "insert":
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) + data[at:], at, at
    return data[:at] + data[at + 1:], at, at + 1     # delete


def _frames_outside(records, lo: int, hi: int, stream: bytes) -> set[tuple[int, bytes]]:
    """Frames (stream offset, bytes) lying wholly in records that [lo, hi) does not touch."""
    lost: list[tuple[int, int]] = []      # stream ranges of touched records
    for r in records:
        end = r.at + 24 + len(r.payload)
        if r.at < hi and lo < end or (lo == hi and r.at < lo < end):
            lost.append((r.offset, r.offset + len(r.payload)))
    out = set()
    for f in FrameDecoder().feed(stream):
        if not any(a < f.offset + f.size and f.offset < b for a, b in lost):
            out.add((f.offset, stream[f.offset:f.offset + f.size]))
    return out


def test_a_damaged_session_log_loses_only_the_damaged_records(tmp_path):
    rng = random.Random(10)
    stream = _stream()
    path = _log(tmp_path / "s", stream, [rng.randrange(1, 400) for _ in range(40)])
    data = path.read_bytes()
    assert data.startswith(FILE_HEADER) and read_stream(path) == stream
    with open(path, "rb") as f:
        f.seek(len(FILE_HEADER))
        records = list(iter_records(f, lambda *a: pytest.fail(f"clean log reported {a}")))
    assert len(records) > 20
    bad = tmp_path / "bad.tessera-log"
    checked = 0
    for at in range(len(FILE_HEADER), len(data), 7):
        for how in ("flip", "overwrite", "insert", "delete"):
            damaged, lo, hi = _damage(data, at, how, rng)
            bad.write_bytes(damaged)
            problems = []
            got = {(f.offset, stream[f.offset:f.offset + f.size]) for f in
                   read_frames(bad, problem=lambda o, m: problems.append(m))}
            want = _frames_outside(records, lo, hi, stream)
            assert want <= got, (at, how, problems)
            # nothing made up: every frame read is the stream's own frame at that offset
            assert all(stream[o:o + len(b)] == b for o, b in got)
            checked += 1
    assert checked > 1000


def test_old_format_logs_and_spools_are_still_read(tmp_path):
    stream = _stream(10)
    (tmp_path / "old.tessera-log").write_bytes(stream)
    assert [f.offset for f in read_frames(tmp_path / "old.tessera-log")] == \
        [f.offset for f in FrameDecoder().feed(stream)]
    assert read_stream(tmp_path / "old.tessera-log") == stream


def _packets(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        p = pf.TracePacket()
        p.trusted_packet_sequence_id = 7
        p.timestamp = 1_000_000 + i
        e = p.gpu_render_stage_event
        e.event_id = i + 1
        e.duration = 100 + i
        for k in range(i % 4):
            d = e.extra_data.add()
            d.name, d.value = "Labels", f"t{i}" * (k + 1)
        out.append(pf.frame_packet(p))
    return out


def test_a_damaged_gpu_trace_loses_only_the_damaged_packets(tmp_path):
    rng = random.Random(11)
    fields = _packets(50)
    data = b"".join(fields)
    starts = [sum(map(len, fields[:i])) for i in range(len(fields))]
    bad = tmp_path / "gpu.perfetto-trace"
    checked = 0
    for at in range(0, len(data), 3):
        for how in ("flip", "overwrite", "insert", "delete"):
            damaged, lo, hi = _damage(data, at, how, rng)
            bad.write_bytes(damaged)
            problems = []
            got = {bytes(buf[start:end]) for buf, start, body, end, offset in
                   pf.iter_raw(bad, chunk=rng.choice([64, 1 << 20]), problem=lambda o, m: problems.append(m))}
            touched = {i for i, s in enumerate(starts) if s < hi + (lo == hi) and lo < s + len(fields[i])}
            want = {f for i, f in enumerate(fields) if i not in touched}
            assert want <= got, (at, how, problems, sorted(touched))
            checked += 1
    assert checked > 1000


def test_read_packets_resumes_after_damage(tmp_path):
    fields = _packets(10)
    path = tmp_path / "t"
    path.write_bytes(b"".join(fields[:4]) + b"\x12garbage\x0a\xff" + b"".join(fields[4:]))
    problems = []
    assert len(list(pf.read_packets(path, problem=lambda o, m: problems.append((o, m))))) == 10
    assert len(problems) == 1 and problems[0][0] == sum(map(len, fields[:4]))
    with pytest.raises(pf.TraceFormatError):       # without a listener the damage is raised at the end
        list(pf.read_packets(path))


def _daemon_session(session: Path) -> Path:
    stream = hello(pid=PID, process="game") + b"".join(
        workload(i, "render_pass", width=8, height=8, draw_call_count=1) for i in range(1, 6)) + \
        submit(1, RAW0 + 1000, [1, 2, 3, 4, 5])
    with EmbeddedDaemon(session, validate=Validation.STRICT) as d:
        c = socket.socket(socket.AF_UNIX)
        c.connect(d.address.removeprefix("unix:"))
        c.sendall(stream)
        c.close()
    g = GpuTrace(session / "gpu.perfetto-trace", pid=PID)
    for i in range(1, 6):
        g.event(5_000_002_000 + i * 100, 50, "fragment", "main", labels=f"t{i}", rp=i)
    g.close()
    (log,) = session.rglob(LOG_NAME)
    return log


@pytest.mark.parametrize("keep_record", [True, False])
def test_a_damaged_hello_loses_nothing_else(tmp_path, keep_record):
    session = tmp_path / "s"
    log = _daemon_session(session)
    data = bytearray(log.read_bytes())
    hello_json = data.index(b'"pid"')
    data[hello_json + 2] ^= 0xFF                  # inside the HELLO: its record fails its checksum
    log.write_bytes(bytes(data))
    if not keep_record:
        (log.parent / RECORD_NAME).unlink()        # then the folder's name (game-4242-<n>) says who it was
    out = CliRunner().invoke(merge, [str(session)])
    assert out.exit_code == 0, out.output
    r = merge_session(session)
    assert r.events_with_metadata == 5 and r.submits == 1, r.problems
    text = "\n".join(r.problems)
    assert "damaged bytes skipped" in text and "attributed to game[4242]" in text, text


def test_hostd_files_are_private(tmp_path):
    session = tmp_path / "s"
    with EmbeddedDaemon(session, validate=Validation.STRICT) as d:
        c = socket.socket(socket.AF_UNIX)
        c.connect(d.address.removeprefix("unix:"))
        c.sendall(hello(pid=PID) + encode(MessageType.FRAME, {"frame": -1, "time_ns": 0}))
        c.close()
    (folder,) = [p for p in session.iterdir() if p.is_dir()]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in (LOG_NAME, RECORD_NAME, REJECTED_NAME):
        assert stat.S_IMODE(os.stat(folder / name).st_mode) == 0o600, name


def test_records_are_cut_at_frame_starts_and_the_hello_is_alone(tmp_path):
    from tessera.schemas.logfile import MAX_RECORD, RECORD_TARGET
    stream = hello(pid=PID) + b"".join(workload(i, "dispatch", labels=["y" * 3000]) for i in range(1, 1200))
    path = _log(tmp_path / "s", stream, [len(stream)])           # one chunk of ~3.6 MB
    with open(path, "rb") as f:
        f.seek(len(FILE_HEADER))
        records = list(iter_records(f, lambda *a: pytest.fail(f"clean log reported {a}")))
    assert records[0].payload == hello(pid=PID) and records[0].first == 0
    assert all(len(r.payload) <= MAX_RECORD for r in records) and len(records) > len(stream) // (2 * RECORD_TARGET)
    starts = {f.offset for f in FrameDecoder().feed(stream)}
    assert all(r.first is None or r.offset + r.first in starts for r in records)
    assert read_stream(path) == stream

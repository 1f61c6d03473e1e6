"""Issue #10 item 2: a frame that is valid JSON but hostile never costs more than itself.

Through the real daemon and `tessera merge`: deep nesting, times outside 64 bits, a
`tags` that is not a list, a lone surrogate. Then a hypothesis fuzz through ingest
(sans-IO) and the merge: zero crashes, every other frame merged.
"""
from __future__ import annotations

import json
import logging
import socket
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostd_builders import RAW0, GpuTrace, hello, submit, workload, frame
from hypothesis import HealthCheck, given, settings, strategies as st

from tessera.hostd.cli import merge
from tessera.hostd.config import Address, DaemonConfig, Validation
from tessera.hostd.embedded import EmbeddedDaemon
from tessera.hostd.ingest import Ingest
from tessera.hostd.merge import merge_session
from tessera.schemas.frames import MessageType, encode

PID = 4242
GOOD = 6      # good submits, each running one render pass with a GPU event


def _good_frames() -> list[bytes]:
    out = []
    for i in range(1, GOOD + 1):
        out.append(workload(i, "render_pass", width=64, height=32, draw_call_count=i))
        out.append(submit(i, RAW0 + i * 1_000_000, [i]))
        out.append(frame(i, RAW0 + i * 1_000_000 + 500_000))
    return out


def _gpu_trace(folder: Path) -> None:
    g = GpuTrace(folder / "gpu.perfetto-trace", pid=PID)
    for i in range(1, GOOD + 1):
        g.event(5_000_000_000 + i * 1_000_000, 1000, "fragment", "main", labels=f"t{i}", rp=i)
    g.close()


# The four frames of the issue, each as the bytes a client could send (IDs the good frames do not use).
POISON = {
    "deep nesting": encode(MessageType.ANNEX, b'{"draws":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                           tag=900, sequence=900),
    "time_ns >= 2**64": encode(MessageType.SUBMIT, {"device": "0xd1", "queue": "0xq1", "time_ns": 1 << 64,
                                                    "command_buffers": [], "tags": [1]}, sequence=901),
    "negative time_ns": encode(MessageType.FRAME, {"frame": 902, "time_ns": -5}),
    "tags: 5": encode(MessageType.SUBMIT, {"device": "0xd1", "queue": "0xq1", "time_ns": RAW0, "command_buffers": [],
                                           "tags": 5}, sequence=903),
    "lone surrogate": encode(MessageType.WORKLOAD, b'{"kind":"dispatch","device":"0xd1","command_buffer":"0xcb1",'
                                                   b'"labels":["\\ud800"]}', tag=904),
}


def _check_merged(r, session: Path) -> None:
    assert r.events_with_metadata == GOOD and r.events_without_metadata == 0
    assert r.submits == GOOD and r.frames == GOOD
    assert r.output.exists()


def test_hostile_frames_through_the_daemon_and_tessera_merge(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "tessera.hostd")
    for mode in (Validation.OFF, Validation.WARN, Validation.STRICT):
        session = tmp_path / mode.value
        stream = hello(pid=PID) + b"".join(POISON.values()) + b"".join(_good_frames())
        with EmbeddedDaemon(session, validate=mode) as d:
            c = socket.socket(socket.AF_UNIX)
            c.connect(d.address.removeprefix("unix:"))
            c.sendall(stream)
            c.close()
        _gpu_trace(session)
        out = CliRunner().invoke(merge, [str(session)])
        assert out.exit_code == 0, (mode, out.output, out.exception)
        r = merge_session(session)
        _check_merged(r, session)
        # each poisoned frame is a listed problem (the merge re-checks: OFF and WARN keep them in the log)
        text = "\n".join(r.problems)
        assert "invalid JSON" in text and "lone surrogate" in text, text
        # the two times and `tags: 5` break their schemas: strict rejects them at ingest, the others keep
        # them in the log and the merge skips them
        rejected = list(session.rglob("session.rejected.jsonl"))
        if mode is Validation.STRICT:
            assert len(rejected[0].read_text().splitlines()) == 3 and "unusable" not in text
        else:
            assert not rejected and text.count("unusable") == 3, text


def _hostile_value():
    big = st.sampled_from([1 << 63, 1 << 64, -(1 << 64), 10 ** 30, -1, -(1 << 63) - 1])
    nested = st.integers(1100, 5000).map(lambda n: "[" * n + "]" * n)
    weird = st.sampled_from(['"\\ud800"', '"\\udfff x"', '5', '"x"', 'null', 'true', '{}', '[1,"a",null]',
                             '1e400', 'NaN', '-Infinity', '3.5', '"' + "a" * 70_000 + '"'])
    return st.one_of(big.map(str), nested, weird)


FIELDS = {
    MessageType.SUBMIT: ["time_ns", "duration_ns", "tags", "command_buffers", "frame", "queue", "device"],
    MessageType.FRAME: ["time_ns", "frame", "queue", "source"],
    MessageType.WORKLOAD: ["kind", "labels", "width", "groups", "render_area", "attachments", "bytes", "extra"],
    MessageType.ANNEX: ["labels", "draws", "groups", "draw_call_count", "extra"],
    MessageType.DEVICE: ["device", "name", "vendor_id", "extensions", "pipe_rates"],
    MessageType.INSTRUMENTATION: ["device", "actions", "extra"],
    MessageType.SHADER: ["device", "pipeline", "stage", "entry", "blocks", "extra"],
}
_STAGE = {"stage": "compute", "totals": {"fma": 1, "cvt": 0, "sfu": 0, "ls": 0, "tex": 0, "var": 0, "threads": 2},
          "blocks": [[0, 2, 1, 0, 0, 0, 0, 0]]}
BASE = {
    MessageType.SUBMIT: {"device": "0xd1", "queue": "0xq1", "time_ns": RAW0 + 100, "command_buffers": ["0xcb"]},
    MessageType.FRAME: {"frame": 777, "time_ns": RAW0 + 100},
    MessageType.WORKLOAD: {"kind": "dispatch", "device": "0xd1", "command_buffer": "0xcb1"},
    MessageType.ANNEX: {},
    MessageType.DEVICE: {"device": "0xd2", "name": "x", "vendor_id": 1, "api_version": "1.3"},
    # attached to the good t1 of submit 1 (when valid, its GPU slice gets Shader args)
    MessageType.INSTRUMENTATION: {"device": "0xd1", "actions": [{"result_index": 0, "pipeline": "0xp1",
                                                                 "stages": [_STAGE]}]},
    MessageType.SHADER: {"device": "0xd1", "pipeline": "0xp1", "stage": "compute", "entry": "main",
                         "blocks": [{"index": 0, "lines": ["%5 = OpLabel"]}]},
}


@st.composite
def hostile_frame(draw) -> bytes:
    """One frame of a known type, with one field (known or not) replaced by hostile JSON text."""
    t = draw(st.sampled_from(sorted(FIELDS)))
    name = draw(st.sampled_from(FIELDS[t]))
    body = json.dumps({k: v for k, v in BASE[t].items() if k != name})
    text = draw(_hostile_value())
    body = body[:-1] + ("," if body != "{}" else "") + json.dumps(name) + ":" + text + "}"
    ids = {"tag": 500} if t in (MessageType.WORKLOAD, MessageType.ANNEX) else {}
    ids.update({"tag": 1} if t == MessageType.INSTRUMENTATION else {})
    if t & 0x80:
        ids["sequence"] = 600 if t == MessageType.SUBMIT else 1      # ANNEX 1.500: no good workload is 500
    return encode(t, body.encode(), **ids)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_frame(), min_size=1, max_size=4), st.sampled_from(list(Validation)),
       st.integers(1, 4096), st.randoms(use_true_random=False))
def test_fuzz_hostile_payloads_through_ingest_and_merge(poison, mode, chunk, rng):
    good = _good_frames()
    frames = list(good)
    for p in poison:
        frames.insert(rng.randrange(len(frames) + 1), p)
    stream = hello(pid=PID) + b"".join(frames)
    with tempfile.TemporaryDirectory() as tmp:
        session = Path(tmp)
        ingest = Ingest(DaemonConfig(Address("unix", Path("x")), session, validate=mode), "fuzz",
                        logging.getLogger("fuzz.quiet"))
        for i in range(0, len(stream), chunk):
            assert ingest.feed(stream[i:i + chunk])
        ingest.eof()
        ingest.close("client closed")
        _gpu_trace(session)
        r = merge_session(session)
        assert r.events_with_metadata == GOOD and r.events_without_metadata == 0
        assert r.submits >= GOOD and r.frames >= GOOD


# -- issue 22: the HELLO and the process name ------------------------------------------------------
def _ingest(session: Path, mode: Validation, logger: logging.Logger) -> Ingest:
    return Ingest(DaemonConfig(Address("unix", Path("x")), session, validate=mode), "peer", logger)


@pytest.mark.parametrize("mode", list(Validation))
@pytest.mark.parametrize("pid", [-1, 1 << 31])
def test_an_invalid_hello_closes_the_connection_in_every_mode(tmp_path, mode, pid, caplog):
    """docs/formats.md and docs/hostd.md: a first frame that is not a valid HELLO closes the connection."""
    ingest = _ingest(tmp_path, mode, logging.getLogger("hello.check"))
    with caplog.at_level(logging.WARNING, logger="hello.check"):
        assert ingest.feed(hello(pid=pid) + _good_frames()[0]) is False
    ingest.close("client closed")
    assert ingest.hello is None and "HELLO violates its schema" in (ingest.close_reason or "")
    assert [d.name for d in tmp_path.iterdir()] == [f"conn-{ingest.store.number}"]      # never named after it
    assert "closing the connection" in caplog.text


@pytest.mark.parametrize("name", ["evil\nhostd: client forged[1]#1 closed", "gpu\u202etxt.exe", "bell\x07\x1b[2J"])
def test_a_process_name_is_escaped_in_hostd_log_lines(tmp_path, name, caplog):
    ingest = _ingest(tmp_path, Validation.WARN, logging.getLogger("hello.names"))
    with caplog.at_level(logging.INFO, logger="hello.names"):
        assert ingest.feed(hello(pid=PID, process=name) + frame(1, RAW0) + encode(MessageType.FRAME, b"{not json"))
        ingest.close("client closed")
    assert any("not json" in r.getMessage() or "JSON" in r.getMessage() for r in caplog.records)   # a problem line
    for record in caplog.records:
        line = record.getMessage()
        assert line.isprintable(), repr(line)
    assert any(repr(name)[1:-1] in r.getMessage() for r in caplog.records)

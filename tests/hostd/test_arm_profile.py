"""Arm's layer_gpu_profile streamed into hostd (#27 item 6): a message stream written from the published
format (libGPULayers layer_gpu_profile: the 14-byte comms header, JSON payloads to the `GPUProfile`
endpoint; lglpy comms/service_gpu_profile.py for what the host makes of them) fed through hostd's Arm
ingest, kept byte for byte, read back as counters, and written as the CSV files Arm's service writes."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import arm_fixtures as af
from click.testing import CliRunner

from tessera.hostd.arm_ingest import ARM_LOG_NAME, ArmIngest, read_profile_log
from tessera.hostd.config import Address, DaemonConfig
from tessera.hostd.counters import read_session, write_csv
from tessera.schemas.logfile import read_stream
from tessera.tools.cmd_counters import counters

PROFILE = 2          # the endpoint the registry reply gives GPUProfile
COLUMNS = ["Compute queue active cycles", "Main phase queue active cycles", "External write bytes",
           "Fragment threads"]


def _workload(kind: str, labels: list[str], values: list[float]) -> dict:
    return {"type": kind, "labels": labels, "counters": [{n: v} for n, v in zip(COLUMNS, values)]}


MESSAGES = [
    {"type": "start_frame", "frame": 3},
    _workload("renderpass", ["frame", "shadow pass"], [0, 12345, 16384, 4096.5]),
    _workload("compute", ["frame"], [2001, 0, 0, 0]),
    {"type": "end_frame"},
    {"type": "frame", "frame": 3, "counters": [{n: v} for n, v in zip(COLUMNS, [2001, 12345, 16384, 4096.5])]},
]


def _stream() -> bytes:
    out = af.message(af.TX_RX, 0, 1, b"")                                  # registry lookup
    for i, m in enumerate(MESSAGES[:3]):
        out += af.message(af.TX, PROFILE, 10 + i, json.dumps(m).encode())
    out += af.message(af.TX, PROFILE, 50, b"{not json")                   # reported, skipped, kept
    for i, m in enumerate(MESSAGES[3:]):
        out += af.message(af.TX_ASYNC, PROFILE, 20 + i, json.dumps(m).encode())
    return out


def _ingest(tmp_path: Path) -> tuple[Path, bytes]:
    ing = ArmIngest(DaemonConfig(Address("tcp", host="127.0.0.1", port=0), tmp_path), "test")
    stream, replies = _stream(), b""
    for i in range(0, len(stream), 5):
        keep, reply = ing.feed(stream[i:i + 5])
        assert keep
        replies += reply
    ing.close("client closed")
    return ing.store.folder, replies


def test_hostd_hosts_gpu_profile_and_keeps_the_stream(tmp_path):
    folder, replies = _ingest(tmp_path)
    assert replies[:14] == struct.pack("<BBQL", af.TX_RX, 0, 1, len(replies) - 14)      # the reply to message 1
    assert af.parse_registry(replies[14:]) == {"registry": 0, "GPUTimeline": 1, "GPUProfile": 2}
    assert read_stream(folder / ARM_LOG_NAME) == _stream()                 # byte for byte
    record = json.loads((folder / "session.json").read_text())
    assert record["records"]["profile: start_frame"] == 1 and record["records"]["profile: unreadable"] == 1
    problems = []
    assert list(read_profile_log(folder / ARM_LOG_NAME, lambda o, m: problems.append(m))) == MESSAGES
    assert len(problems) == 1 and "not JSON" in problems[0]


def test_counters_and_csv_as_arms_service_writes_them(tmp_path):
    _ingest(tmp_path / "session")
    s = read_session(tmp_path / "session")
    assert s.source == "arm" and [w.arm_type for w in s.workloads] == ["renderpass", "compute"]
    assert s.workloads[0].counters["MaliMainQueueActiveCy"] == 12345     # Arm's names for Tessera's views
    [frame] = s.frames
    assert frame.frame == 3 and frame.counters["MaliExtBusWrBy"] == 16384
    written = write_csv(s, tmp_path / "w", "workload")
    assert [p.name for p in written] == ["frame_00003.csv"]
    # what service_gpu_profile.py writes: header from the first sample, values 0.2f, labels joined by |
    assert written[0].read_bytes().decode() == (
        "Index,Workload type," + ",".join(COLUMNS) + ",Label\r\n"
        "0,renderpass,0.00,12345.00,16384.00,4096.50,frame|shadow pass\r\n"
        "1,compute,2001.00,0.00,0.00,0.00,frame\r\n")
    [capture] = write_csv(s, tmp_path / "f", "frame")
    assert capture.read_bytes().decode() == "Frame ID," + ",".join(COLUMNS) + "\r\n3,2001.00,12345.00,16384.00,4096.50\r\n"
    out = CliRunner().invoke(counters, [str(tmp_path / "session")])
    assert out.exit_code == 0 and "Arm layer_gpu_profile (device): 2 workloads, 1 frames" in out.output

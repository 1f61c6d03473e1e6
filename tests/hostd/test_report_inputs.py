"""`tessera report SESSION` re-merges when any input the merge reads is newer than the merged
trace, Arm's GPU Timeline inputs (`.metadata`, `session.arm-log`) included."""
from __future__ import annotations

import os

import arm_fixtures as af
from click.testing import CliRunner
from hostd_builders import BOOT0, RAW0, GpuTrace

from tessera.hostd.cli import report
from tessera.hostd.merge import MERGED_NAME, find_inputs

PID = 4242


def _metadata(label: str) -> bytes:
    return af.metadata_file([{"device": 0xD1, "frame": 0, "presentTimestamp": RAW0 + 2000, "submits": [
        {"device": 0xD1, "queue": 7, "timestamp": RAW0 + 1000, "workloads": [
            {"type": "dispatch", "tid": 1, "xGroups": 4, "yGroups": 2, "zGroups": 1, "label": [label]}]}]}])


def test_report_remerges_when_arm_metadata_is_newer(tmp_path):
    gpu = GpuTrace(tmp_path / "gpu.perfetto-trace", pid=PID)
    gpu.event(BOOT0 + 1300, 100, "non-fragment", "compute", labels="t1")
    gpu.close()
    meta = tmp_path / f"app-{PID}.metadata"
    meta.write_bytes(_metadata("Blur"))
    r = CliRunner().invoke(report, [str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "merged" in r.stderr and "Blur" in r.stdout
    merged = tmp_path / MERGED_NAME
    t = merged.stat().st_mtime_ns

    r = CliRunner().invoke(report, [str(tmp_path)])          # nothing changed: the merged trace is read
    assert r.exit_code == 0 and "merged" not in r.stderr and "Blur" in r.stdout

    meta.write_bytes(_metadata("Sharpen"))                    # Arm's metadata changed after the merge
    os.utime(meta, ns=(t + 1_000_000_000, t + 1_000_000_000))
    r = CliRunner().invoke(report, [str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "merged" in r.stderr and "Sharpen" in r.stdout and "Blur" not in r.stdout


def test_arm_log_is_an_input_the_check_sees(tmp_path):
    (tmp_path / "arm-gpu-timeline-1-1").mkdir()
    log = tmp_path / "arm-gpu-timeline-1-1" / "session.arm-log"
    log.write_bytes(b"")
    assert find_inputs(tmp_path).arm == [log]

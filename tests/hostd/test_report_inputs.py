"""`tessera report SESSION` re-merges when any input the merge reads is newer than the merged
trace, Arm's GPU Timeline inputs (`.metadata`, `session.arm-log`) included."""
from __future__ import annotations

import os

import pytest

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


# -- issue 22: inputs that are not what report and merge expect ------------------------------------
def _session(root, events: int = 3):
    from hostd_builders import hello, submit, workload

    from tessera.hostd.storage import LOG_NAME

    log = root / f"app-{PID}-1" / LOG_NAME
    log.parent.mkdir(parents=True)
    log.write_bytes(hello(pid=PID) + workload(1, "dispatch", groups=[1, 1, 1]) + submit(1, RAW0 + 1000, [1]))
    g = GpuTrace(root / "gpu.perfetto-trace", pid=PID)
    for i in range(events):
        g.event(BOOT0 + 2000 + 10 * i, 5, "non-fragment", "compute", "t1", ["t1"])
    g.close()
    return root


def test_report_refuses_a_fifo_without_opening_it(tmp_path):
    """A FIFO nobody writes would block the open forever: refused at once (a subprocess, so a
    regression fails on the timeout instead of hanging the suite)."""
    import subprocess
    import sys

    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "tessera.tools.cli", "report", str(fifo)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and "not a regular file (a FIFO)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_report_on_an_empty_file_is_an_error(tmp_path):
    empty = tmp_path / "empty.perfetto-trace"
    empty.write_bytes(b"")
    r = CliRunner().invoke(report, [str(empty)])
    assert r.exit_code == 1 and "no Perfetto packet" in r.output and "Traceback" not in r.output


def test_report_reads_a_cut_merged_trace_as_far_as_it_is_whole(tmp_path):
    from tessera.hostd.cli import merge

    root = _session(tmp_path / "s", events=4)
    assert CliRunner().invoke(merge, [str(root)]).exit_code == 0
    merged = root / MERGED_NAME
    cut = tmp_path / "cut.perfetto-trace"
    cut.write_bytes(merged.read_bytes()[:-1])           # the last packet (a track event) loses a byte
    r = CliRunner().invoke(report, [str(cut), "--json"])
    assert r.exit_code == 0, r.output
    import json
    assert json.loads(r.stdout)["gpu_events"] == 4
    assert "damaged stretch" in r.stderr and "at byte" in r.stderr


def test_merge_to_an_empty_output_name_is_a_usage_error(tmp_path):
    from tessera.hostd.cli import merge

    root = _session(tmp_path / "s")
    r = CliRunner().invoke(merge, [str(root), "-o", ""])
    assert r.exit_code == 2 and "empty: give the merged trace's file name" in r.output, r.output
    assert "Traceback" not in r.output and not list(root.rglob("*.tmp"))


@pytest.mark.parametrize("shape", ["empty", "folder"])
def test_an_empty_or_folder_session_log_is_a_problem_line(tmp_path, shape):
    from tessera.hostd.cli import merge

    root = _session(tmp_path / "s")
    odd = root / "other-1-2" / "session.tessera-log"
    if shape == "empty":
        odd.parent.mkdir()
        odd.write_bytes(b"")
    else:
        odd.mkdir(parents=True)
    r = CliRunner().invoke(merge, [str(root)])
    assert r.exit_code == 0, r.output
    want = "empty (0 bytes)" if shape == "empty" else "a folder, not a session file"
    assert any(str(odd) in line and want in line for line in r.output.splitlines()), r.output
    (root / MERGED_NAME).unlink()
    r = CliRunner().invoke(report, [str(root)])
    assert r.exit_code == 0 and want in r.stderr, r.output

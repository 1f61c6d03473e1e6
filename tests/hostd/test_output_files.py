"""Every file Tessera writes (issue 22, Files): an exclusive 0600 temporary beside the target, renamed;
a planted link is never followed; a full disk is one line, no traceback, no temporary left, nothing
written before it lost; folders hostd creates are 0700."""
from __future__ import annotations

import os
import stat
import subprocess

import pytest
from click.testing import CliRunner
from hostd_builders import BOOT0, RAW0, GpuTrace, hello, submit, workload

from tessera.tools.cmd_export import export
from tessera.hostd.cli import merge
from tessera.hostd.merge import MERGED_NAME
from tessera.hostd.storage import LOG_NAME, ConnectionStore
from tessera.schemas.files import AtomicOutput, OutputError
from tessera.schemas.perfetto import PacketWriter

PID = 4242


def session(root, events: int = 3):
    log = root / f"app-{PID}-1" / LOG_NAME
    log.parent.mkdir(parents=True)
    log.write_bytes(hello(pid=PID) + workload(1, "dispatch", groups=[1, 1, 1])
                    + submit(1, RAW0 + 1000, [1]))
    g = GpuTrace(root / "gpu.perfetto-trace", pid=PID)
    for i in range(events):
        g.event(BOOT0 + 2000 + 10 * i, 5, "non-fragment", "compute", "t1", ["t1"])
    g.close()
    return root


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def leftovers(folder):
    return sorted(p.name for p in folder.rglob("*.tmp"))


def test_a_planted_link_at_the_old_temporary_name_is_never_followed(tmp_path):
    root = session(tmp_path / "s")
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (root / f"{MERGED_NAME}.tmp").symlink_to(victim)
    r = CliRunner().invoke(merge, [str(root)])
    assert r.exit_code == 0, r.output
    assert victim.read_bytes() == b"precious"
    assert (root / MERGED_NAME).stat().st_size > 0 and not (root / MERGED_NAME).is_symlink()
    assert mode(root / MERGED_NAME) == 0o600
    assert leftovers(root) == [f"{MERGED_NAME}.tmp"]         # the planted link alone, untouched
    assert os.readlink(root / f"{MERGED_NAME}.tmp") == str(victim)


def test_export_never_follows_a_planted_link_and_writes_0600(tmp_path):
    root = session(tmp_path / "s")
    out = tmp_path / "arm"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    for name in (f"app-{PID}.perfetto-trace.tmp", f"app-{PID}.metadata.tmp"):
        (out / name).symlink_to(victim)
    r = CliRunner().invoke(export, [str(root), "--format", "arm", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert victim.read_bytes() == b"precious"
    for name in (f"app-{PID}.perfetto-trace", f"app-{PID}.metadata"):
        assert (out / name).stat().st_size > 0 and mode(out / name) == 0o600, name


def test_export_creates_its_folder_0700(tmp_path):
    root = session(tmp_path / "s")
    r = CliRunner().invoke(export, [str(root), "--format", "arm"])
    assert r.exit_code == 0, r.output
    assert mode(root / "arm") == 0o700


def test_the_gpu_trace_and_hostd_folders_are_private(tmp_path):
    w = PacketWriter(tmp_path / "gpu.perfetto-trace")
    w.close()
    assert mode(tmp_path / "gpu.perfetto-trace") == 0o600
    store = ConnectionStore(tmp_path / "hostd" / "out", fsync_interval=1.0)
    store.close({"end": "test"})
    assert mode(tmp_path / "hostd" / "out") == 0o700
    assert mode(store.folder / "session.json") == 0o600
    assert leftovers(tmp_path) == []


def test_a_failed_write_leaves_the_target_and_no_temporary(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with AtomicOutput(target) as out:
            out.write(b"new, half")
            raise RuntimeError("interrupted")
    assert target.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_a_full_device_is_an_output_error_and_no_temporary(tmp_path, monkeypatch):
    """Without a small filesystem: /dev/full refuses every write with ENOSPC."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    import tessera.schemas.files as files

    def on_dev_full(path):
        fd, tmp = real(path)
        os.dup2(os.open("/dev/full", os.O_WRONLY), fd)
        return fd, tmp

    real = files.temporary_for
    monkeypatch.setattr(files, "temporary_for", on_dev_full)
    target = tmp_path / "out.bin"
    with pytest.raises(OutputError, match="No space left on device") as e:
        with AtomicOutput(target, buffer=0) as out:
            out.write(b"x" * 100)
    assert "\n" not in str(e.value) and str(target) in str(e.value)
    assert not target.exists() and leftovers(tmp_path) == []



def test_merge_onto_a_full_filesystem_is_one_line_and_keeps_what_was_there(tmp_path, small_fs):
    root = session(tmp_path / "s", events=20_000)          # a merged trace of a few MiB
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    kept = small_fs / "kept.bin"
    kept.write_bytes(b"k" * 4096)
    old = small_fs / "merged.perfetto-trace"
    old.write_bytes(b"the previous merge")
    r = CliRunner().invoke(merge, [str(root), "-o", str(old)])
    assert r.exit_code == 1, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "No space left on device" in lines[0] and str(old) in lines[0], r.output
    assert "Traceback" not in r.output
    assert old.read_bytes() == b"the previous merge" and kept.read_bytes() == b"k" * 4096
    assert leftovers(small_fs) == [] and leftovers(root) == []
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_hostd_on_a_full_disk_logs_one_line_and_keeps_what_it_logged(small_fs, caplog):
    """The issue's "raw double traceback": hostd's log write hitting ENOSPC is one error line, the
    connection closed, the bytes logged before kept, the daemon still serving."""
    import logging
    import socket

    from hostd_builders import frame

    from tessera.hostd.embedded import EmbeddedDaemon

    caplog.set_level(logging.INFO, "tessera.hostd")
    stream = hello(pid=PID) + b"".join(frame(i, RAW0 + i) for i in range(40_000))      # ~2 MiB of frames
    with EmbeddedDaemon(small_fs, drain_timeout=30) as d:
        c = socket.socket(socket.AF_UNIX)
        c.connect(d.address.removeprefix("unix:"))
        try:
            c.sendall(stream)
        except OSError:
            pass            # the daemon closed the connection: what it could not log is refused
        c.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.exc_info for r in caplog.records if r.exc_info] == []
    assert len(errors) >= 1 and "cannot write its session log (No space left on device)" in errors[0].getMessage()
    log = next(small_fs.rglob(LOG_NAME))
    assert log.stat().st_size > 100_000                     # what was logged before the disk filled stays
    assert leftovers(small_fs) == []

"""Adopting stages (tessera.schemas.staged): what a process that ended left staged joins its file once.

Stages are made here by hand from the layout's numbers; the shims' C writes the same layout
(tests/integration/test_crash.py kills a program whose stages it filled).
"""
from __future__ import annotations

import fcntl
import os

import pytest

from tessera.schemas import staged


def make_stage(target, data: bytes, flushing: int = staged.NOT_FLUSHING, pid: int = 4242,
               magic: bytes = staged.MAGIC, capacity: int = staged.CAPACITY):
    path = staged.stage_path(target, pid)
    head = staged.HEAD.pack(magic, staged.VERSION, staged.DATA_OFFSET, capacity, len(data), flushing)
    body = head.ljust(staged.DATA_OFFSET, b"\0") + data
    path.write_bytes(body.ljust(staged.DATA_OFFSET + capacity, b"\xee"))   # stale bytes past the length
    return path


def test_staged_bytes_are_appended_and_the_stage_removed(tmp_path):
    target = tmp_path / "gpu.perfetto-trace"
    target.write_bytes(b"before|")
    stage = make_stage(target, b"staged bytes")
    result = staged.adopt(tmp_path)
    assert target.read_bytes() == b"before|staged bytes"
    assert not stage.exists()
    assert (result.stages, result.bytes, result.problems) == (1, 12, [])


def test_a_missing_target_is_created_private(tmp_path):
    target = tmp_path / "layer-7.spool"
    make_stage(target, b"frames")
    staged.adopt(tmp_path)
    assert target.read_bytes() == b"frames"
    assert target.stat().st_mode & 0o777 == 0o600


def test_an_empty_stage_is_removed_and_nothing_written(tmp_path):
    target = tmp_path / "gpu.perfetto-trace"
    stage = make_stage(target, b"")
    assert staged.adopt(tmp_path).stages == 1
    assert not stage.exists() and not target.exists()


@pytest.mark.parametrize("landed", [0, 10, 100, 300])
def test_a_write_cut_by_the_kill_is_completed_not_repeated(tmp_path, landed):
    """Killed inside the write of its 300 staged bytes: what landed is not written again, the rest is."""
    data = bytes(range(256)) + b"x" * 44
    target = tmp_path / "gpu.perfetto-trace"
    target.write_bytes(b"A" * 1000)
    flushing = target.stat().st_size
    with open(target, "ab") as f:
        f.write(b"another process" + data[:landed])
    make_stage(target, data, flushing=flushing)
    staged.adopt(tmp_path)
    assert target.read_bytes() == b"A" * 1000 + b"another process" + data
    assert staged.adopt(tmp_path).stages == 0


def test_bytes_equal_to_others_before_the_write_are_not_taken_for_it(tmp_path):
    """Only what follows the size the write began at counts."""
    data = b"the same bytes " * 10
    target = tmp_path / "gpu.perfetto-trace"
    target.write_bytes(data)
    make_stage(target, data, flushing=len(data))
    staged.adopt(tmp_path)
    assert target.read_bytes() == data + data


def test_a_stage_whose_process_runs_is_left_alone(tmp_path):
    target = tmp_path / "gpu.perfetto-trace"
    stage = make_stage(target, b"live")
    fd = os.open(stage, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)   # as the running process holds it
        assert staged.adopt(tmp_path).stages == 0
        assert stage.exists() and not target.exists()
        assert staged.read_through(target) == b"live"   # a reader of the live session sees it
    finally:
        os.close(fd)
    assert staged.adopt(tmp_path).stages == 1


def test_a_stage_another_reader_adopted_meanwhile_is_not_appended_twice(tmp_path):
    """Two readers open the same stage; the first adopts it before the second takes the lock."""
    target = tmp_path / "gpu.perfetto-trace"
    stage = make_stage(target, b"once")
    second = os.open(stage, os.O_RDWR)
    try:
        assert staged.adopt(tmp_path).stages == 1
        result = staged.Adopted()
        staged._adopt_open(stage, second, target, result)
        assert result == staged.Adopted() and target.read_bytes() == b"once"
        stage.write_bytes(b"")   # the name given to another file meanwhile: still not this one
        staged._adopt_open(stage, second, target, result)
        assert result == staged.Adopted() and target.read_bytes() == b"once" and stage.exists()
    finally:
        os.close(second)


@pytest.mark.parametrize("damage", ["magic", "length", "short"])
def test_a_damaged_stage_is_named_and_kept(tmp_path, damage):
    target = tmp_path / "gpu.perfetto-trace"
    if damage == "magic":
        stage = make_stage(target, b"x", magic=b"NOTSTAGE")
    elif damage == "length":
        stage = make_stage(target, b"x", capacity=staged.MAX_CAPACITY + 1)
    else:
        stage = staged.stage_path(target, 1)
        stage.write_bytes(b"TSRSTAGE")
    result = staged.adopt(tmp_path)
    assert result.stages == 0 and len(result.problems) == 1
    assert str(stage) in result.problems[0] and "left as it is" in result.problems[0]
    assert stage.exists() and not target.exists()


def test_a_planted_link_is_not_followed(tmp_path):
    target = tmp_path / "gpu.perfetto-trace"
    elsewhere = tmp_path / "elsewhere"
    make_stage(elsewhere, b"secret")
    link = staged.stage_path(target, 9)
    link.symlink_to(staged.stage_path(elsewhere, 4242))
    result = staged.adopt(tmp_path)
    assert any(str(link) in p for p in result.problems)
    assert link.is_symlink() and not target.exists()


def test_names_not_of_a_stage_are_ignored(tmp_path):
    (tmp_path / "notes.staged-x").write_bytes(b"TSRSTAGE")
    (tmp_path / "gpu.perfetto-trace.staged-").write_bytes(b"TSRSTAGE")
    assert staged.adopt(tmp_path) == staged.Adopted()


@pytest.mark.parametrize("size", [0, staged.DATA_OFFSET + staged.CAPACITY])
def test_a_stage_its_process_never_finished_making_is_removed(tmp_path, size):
    """A process that ended between creating its stage and writing its header (an _exit while another thread made
    it) leaves a file of zeros, empty or allocated: nothing was ever staged in it, so it is removed, no problem
    said, the target untouched."""
    target = tmp_path / "gpu.perfetto-trace"
    target.write_bytes(b"trace")
    stage = staged.stage_path(target, 7)
    stage.write_bytes(bytes(size))
    result = staged.adopt(tmp_path)
    assert result.problems == [] and result.stages == 1 and result.bytes == 0
    assert not stage.exists() and target.read_bytes() == b"trace"


def _reserve(fd: int, length: int) -> None:
    """What staged_appends.c's tessera_stage_reserve does: blocks past the end, the size left alone."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long)
    if libc.fallocate(fd, 1, os.fstat(fd).st_size, length):   # 1: FALLOC_FL_KEEP_SIZE
        pytest.skip(f"this file system does not reserve blocks: {os.strerror(ctypes.get_errno())}")


def test_blocks_reserved_past_the_end_are_given_back_once_no_writer_has_the_file(tmp_path):
    from tessera.schemas.files import open_append
    target = tmp_path / "gpu.perfetto-trace"
    writer = open_append(target)
    os.write(writer, b"packets")
    _reserve(writer, staged.RESERVE)
    assert target.stat().st_blocks * 512 >= staged.RESERVE
    assert not staged.release_reserved(target)   # its writer has it open: the reservation is in use
    assert target.stat().st_blocks * 512 >= staged.RESERVE
    os.close(writer)
    assert staged.release_reserved(target)
    assert target.read_bytes() == b"packets"
    assert target.stat().st_blocks * 512 <= staged.CAPACITY
    assert not staged.release_reserved(target)   # nothing left to give back


def test_a_file_without_reserved_blocks_is_left_as_it_is(tmp_path):
    target = tmp_path / "layer-7.spool"
    target.write_bytes(b"x" * 100_000)
    before = target.stat()
    assert not staged.release_reserved(target)
    assert target.stat().st_mtime_ns == before.st_mtime_ns
    assert not staged.release_reserved(tmp_path / "missing.spool")


def test_appending_takes_the_writers_shared_lock(tmp_path):
    """A reader cannot take the file exclusively while a writer has it open (so it never cuts an append)."""
    from tessera.schemas.files import open_append
    target = tmp_path / "gpu.perfetto-trace"
    writer = open_append(target)
    probe = os.open(target, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(writer)
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(probe)


def test_appending_never_follows_a_planted_link(tmp_path):
    from tessera.schemas.files import open_append
    victim = tmp_path / "victim"
    victim.write_bytes(b"mine")
    (tmp_path / "layer-1.spool").symlink_to(victim)
    with pytest.raises(OSError):
        open_append(tmp_path / "layer-1.spool")
    assert victim.read_bytes() == b"mine"

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

"""Staged appends: bytes a crash must not lose, appended to their file in large writes.

Why: appending a frame's ten or so KB to a file costs the kernel most where the page cache grows, page by
page for small writes; large writes get large folios and cost about half as much per byte (0.2–0.4 against
0.5 µs per KB on the sandbox's ext4 for 64 KiB: docs/benchmarks.md, "Session 15"), and into blocks reserved
ahead, 256 KiB writes cost 0.16 µs per KB against 64 KiB's 0.27 ("Session 17"). So the shims' C
(vkapi/runtime/staged_appends.c) puts what it appends to the GPU trace (the driver) and to the spool (the layer)
in a *stage* first: a small file beside the target,
`<target>.staged-<pid>`, mapped shared. Its pages hold the bytes as a write's would: they outlive the process
(SIGKILL, _exit, a crash) in the page cache. The stage is written to the target in one write when the next
append would not fit in it, before any write of the shim's Python (which revokes the licence first), and at
exit, when the stage file is removed.

A process that ended before that last write leaves its stage behind: `adopt()` appends what it holds to the
target and removes it. The commands that read a session call it first (hostd.merge.find_inputs), as does the
driver for its folder when it starts. A process holds flock() on its stage while it runs, so a live stage is
left alone; `read_through()` gives a live target's bytes with its stages' (a reader watching a running app).

Layout (little endian; the C takes these values from `c_defines()`):
    magic 8s "TSRSTAGE" | u32 version | u32 data offset | u64 capacity | u64 length (the bytes staged, from
    the data offset) | u64 flushing (the target's size just before a write of the staged bytes began; all ones:
    none under way)
A process killed inside that write may have written all, part or none of the bytes: adoption looks for them
in the target from `flushing` on and appends only what is not there. A write that fails (a full disk) leaves
the stage so too: the process lets go of it and writes at once from then on. (Should another process have appended
between a partial write and the adoption, the unit cut in two is damage that readers skip, as for any cut
write.)
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

from .files import open_append, same_file

HEAD = struct.Struct("<8sIIQQQ")
_LENGTH_AT = struct.calcsize("<8sIIQ")   # where HEAD's length is
MAGIC = b"TSRSTAGE"
VERSION = 1
DATA_OFFSET = 4096            # the staged bytes start on their own page
CAPACITY = 256 << 10          # bytes a stage holds (the size of the writes); a longer append is written at once
MAX_CAPACITY = 16 << 20       # a stage claiming more is not one of ours
RESERVE = 1 << 20             # the target's blocks a writing process allocates ahead of its writes, at a time
NOT_FLUSHING = (1 << 64) - 1
SUFFIX = ".staged-"
_NAME = re.compile(r"^(?P<target>.+)\.staged-(?P<pid>[0-9]{1,10})$")
_PROBE = 64                   # bytes of a stage looked for in its target after a write that may have happened


def stage_path(target: str | os.PathLike, pid: int | None = None) -> Path:
    """The stage of `target` for process `pid` (this one by default)."""
    target = Path(target)
    return target.with_name(f"{target.name}{SUFFIX}{os.getpid() if pid is None else pid}")


def c_defines() -> str:
    """The layout's numbers, for vkapi/runtime/staged_appends.c."""
    return (f'#define TESSERA_STAGE_MAGIC "{MAGIC.decode()}"\n'
            f"#define TESSERA_STAGE_VERSION {VERSION}\n"
            f"#define TESSERA_STAGE_DATA_OFFSET {DATA_OFFSET}\n"
            f"#define TESSERA_STAGE_CAPACITY {CAPACITY}\n"
            f"#define TESSERA_STAGE_RESERVE {RESERVE}\n")


@dataclass
class Adopted:
    """What `adopt` did: stages appended to their targets and removed, their bytes, and what it left and why."""
    stages: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)


def adopt(folder: str | os.PathLike) -> Adopted:
    """Append what every stage under `folder` whose process has ended holds to its target, and remove it."""
    return _adopt_all(Path(folder).rglob(f"*{SUFFIX}*"))


def adopt_target(target: str | os.PathLike) -> Adopted:
    """`adopt`, for the stages of one target."""
    target = Path(target)
    return _adopt_all(target.parent.glob(f"{target.name}{SUFFIX}*"))


def _adopt_all(paths) -> Adopted:
    result = Adopted()
    for path in sorted(paths):
        m = _NAME.match(path.name)
        if m:
            _adopt(path, path.with_name(m["target"]), result)
    return result


def _adopt(stage: Path, target: Path, result: Adopted) -> None:
    try:
        fd = os.open(stage, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return   # adopted meanwhile
    except OSError as e:
        result.problems.append(f"{stage}: cannot open it ({e.strerror}); left as it is")
        return
    try:
        _adopt_open(stage, fd, target, result)
    finally:
        os.close(fd)


def _adopt_open(stage: Path, fd: int, target: Path, result: Adopted) -> None:
    """`_adopt`, of the stage open at `fd`."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            result.problems.append(f"{stage}: not a regular file; left as it is")
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return   # its process is running (it writes its stage itself), or another reader adopts it
        if not same_file(fd, stage):
            return   # adopted by another reader between our open and our lock
        if not any(os.pread(fd, HEAD.size, 0)):
            # its process ended while making it (its header not written yet): nothing was ever staged in it; a
            # process still making it (not yet locked) finds it gone and appends at once (staged_appends.c)
            os.unlink(stage)
            result.stages += 1
            return
        data, flushing, why = _staged(fd)
        if why:
            result.problems.append(f"{stage}: {why}; left as it is")
            return
        if data:
            rest = data[_written(target, data, flushing):]
            if rest:
                _append(target, rest)
            result.bytes += len(rest)
            os.pwrite(fd, bytes(8), _LENGTH_AT)   # emptied before it goes: a reader that opened it finds nothing
        os.unlink(stage)
        result.stages += 1
    except OSError as e:
        result.problems.append(f"{stage}: cannot adopt it into {target.name} ({e.strerror}); left as it is")


def _staged(fd: int) -> tuple[bytes, int, str | None]:
    """(the staged bytes, `flushing`, None) of the stage open at `fd`, or (b"", 0, what is wrong)."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, HEAD.size, 0)
    if len(head) < HEAD.size:
        return b"", 0, f"{size} bytes, shorter than a stage's header"
    magic, version, offset, capacity, length, flushing = HEAD.unpack(head)
    if magic != MAGIC:
        return b"", 0, "not a stage Tessera wrote (no TSRSTAGE magic)"
    if version != VERSION:
        return b"", 0, f"stage version {version}, this Tessera reads {VERSION}"
    if not HEAD.size <= offset <= DATA_OFFSET or capacity > MAX_CAPACITY or length > capacity \
            or offset + length > size:
        return b"", 0, (f"damaged header (data at {offset}, capacity {capacity}, length {length}, "
                        f"file {size} bytes)")
    data = os.pread(fd, length, offset)
    if len(data) != length:
        return b"", 0, f"{length} bytes staged, {len(data)} readable"
    return data, flushing, None


def _written(target: Path, data: bytes, flushing: int) -> int:
    """How much of `data` a write that began when the target held `flushing` bytes put there already."""
    if flushing == NOT_FLUSHING:
        return 0
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        if size <= flushing:
            return 0
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as m:
            probe = data[:_PROBE]
            at = m.find(probe, flushing)
            while at >= 0:
                n = len(os.path.commonprefix([m[at:at + len(data)], data]))
                if n >= len(probe):
                    return n
                at = m.find(probe, at + 1)
            # cut shorter than the probe (a write stops at a page's end): then only at the end of the file
            for n in range(min(len(probe), size - flushing), 0, -1):
                if m[size - n:] == data[:n]:
                    return n
        return 0
    finally:
        os.close(fd)


def _append(target: Path, data: bytes) -> None:
    """`data` at the end of `target` (files.open_append)."""
    fd = open_append(target)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def release_reserved(target: str | os.PathLike) -> bool:
    """Give back the blocks that writing processes reserved past the end of `target` (staged_appends.c
    `tessera_stage_reserve`) when none of its writers has it open (each holds a shared lock: files.open_append),
    so that no append can land between reading its size and cutting the file there. Whether it did."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False   # gone, a link, or not ours to write: nothing reserved by us to give back
    try:
        st = os.fstat(fd)
        block = st.st_blksize or 4096
        if not stat.S_ISREG(st.st_mode) or st.st_blocks * 512 <= -(-st.st_size // block) * block + block:
            return False   # no more blocks than its bytes need (and an extent block's)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False   # a writer has it open (its reservation is still in use), or no flock here
        os.ftruncate(fd, os.fstat(fd).st_size)   # the same size: only the blocks past the end go
        return True
    except OSError:
        return False   # kept: the blocks cost room, never a byte
    finally:
        os.close(fd)


def read_through(target: str | os.PathLike) -> bytes:
    """The bytes of `target`, then those its running processes' stages hold: what a reader of a live session
    sees once the stages are written. Read again until no stage changed meanwhile."""
    target = Path(target)
    for _ in range(1000):
        stages = sorted(target.parent.glob(f"{target.name}{SUFFIX}*"))
        before = [_peek(p) for p in stages]
        try:
            body = target.read_bytes()
        except FileNotFoundError:
            body = b""
        if [_peek(p) for p in stages] == before:
            return body + b"".join(data for data in before if data)
    raise OSError(errno.EAGAIN, f"{target}: its stages kept changing while read")


def _peek(stage: Path) -> bytes | None:
    """The bytes a stage holds now (None: gone or not a stage)."""
    try:
        fd = os.open(stage, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data, _, why = _staged(fd)
        return None if why else data
    finally:
        os.close(fd)

"""Files Tessera writes and the input files its commands read: the one place for both rules.

Role: shared by hostd (merged trace, session records, Arm export, heatmaps) and the
commands (report, spirv); no state, any thread.

Writing (`AtomicOutput`, `write_atomic`): every output goes to a temporary created
exclusively in the target's own folder (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600, a
random name ending `.tmp`), fsynced, then renamed over the target. So a planted file or
symbolic link under any name is never opened or followed, two writers never share a
temporary, a reader never sees half a file under the final name, and a failure (a full
disk, an exception, Ctrl-C) removes the temporary and leaves the target as it was. A
write that fails raises `OutputError`: one line naming the file and the reason.

Reading (`check_input`, `read_input`): a command's input must be a regular file (a FIFO
would block the open, a character device such as /dev/zero never ends); it is opened
O_NONBLOCK and checked with fstat on the open descriptor, so what is checked is what is
read, and a whole-file read is bounded.

Appending (`open_append`): the session files several processes append to (the GPU trace, the
spools) are opened O_APPEND | O_NOFOLLOW, 0600, and must be regular files. Their writers hold a
shared flock on them while they have them open: a reader releases the blocks their writers
reserved past the end only when none does (tessera.schemas.staged.release_reserved).

Privacy: every file is 0600 and every folder hostd or a run creates 0700, as the logs
have always been (hostd has no authentication; a trace shows what the application did).
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO

FILE_MODE = 0o600
FOLDER_MODE = 0o700
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class OutputError(OSError):
    """An output file could not be written; str() is the one line to show the user."""

    def __init__(self, path: Path, error: OSError) -> None:
        reason = error.strerror or str(error)
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            reason += " (nothing was written under that name; free some space and run the command again)"
        super().__init__(error.errno, f"cannot write {path}: {reason}")
        self.path = path

    def __str__(self) -> str:
        return self.strerror


class InputError(Exception):
    """An input file a command refuses; str() is the one line to show the user."""


def temporary_for(path: Path) -> tuple[int, Path]:
    """A new file beside `path`, created exclusively 0600 (never a name that exists, never
    through a link); returns (descriptor, its path)."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, _CREATE, FILE_MODE), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {path}")


class AtomicOutput:
    """A binary file written to a private temporary and renamed over `path` by `commit()`.

    Use as a context manager (commit on success, abort on any exception) or call
    `commit()` / `abort()`. Write errors raise OutputError; the temporary is then removed
    by `abort()` (the context manager does it)."""

    def __init__(self, path: str | os.PathLike, buffer: int = 1 << 20) -> None:
        self.path = Path(path)
        if not self.path.name:
            raise OutputError(self.path, OSError(errno.EINVAL, "no file name"))
        try:
            fd, self.tmp = temporary_for(self.path)
        except OSError as e:
            raise OutputError(self.path, e) from e
        self.file: BinaryIO = open(fd, "wb", buffering=buffer)
        self.done = False

    def write(self, data: bytes) -> None:
        try:
            self.file.write(data)
        except OSError as e:
            raise OutputError(self.path, e) from e

    def commit(self) -> None:
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.tmp, self.path)
        except OSError as e:
            self.abort()
            raise OutputError(self.path, e) from e
        self.done = True

    def abort(self) -> None:
        """Remove the temporary (idempotent; never raises for a full disk)."""
        if self.done:
            return
        self.done = True
        try:
            self.file.close()
        except OSError:
            pass            # the buffer could not be flushed (a full disk): the file goes anyway
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass

    def __enter__(self) -> "AtomicOutput":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """`data` as the whole new content of `path` (AtomicOutput)."""
    with AtomicOutput(path) as out:
        out.write(data)


def private_folder(path: str | os.PathLike) -> Path:
    """Create `path` (and missing parents) with the last folder 0700; a folder that exists
    is left as its owner made it. Returns it as a Path."""
    path = Path(path)
    path.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    return path


def open_append(path: str | os.PathLike) -> int:
    """A descriptor appending to `path` (created 0600 if missing, never through a link), with the shared lock its
    writers hold (see above); OSError if it is not a regular file."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError as e:   # a file system without flock: no reader can take it exclusively either
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_input(path: str | os.PathLike, what: str = "input") -> BinaryIO:
    """Open `path` for reading if it is a regular file (following links); else InputError.
    Never blocks on a FIFO and never reads a device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"{path}: cannot read it ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: not a regular file ({_kind(st.st_mode)}); the {what} must be a file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return open(fd, "rb")


def check_input(path: str | os.PathLike, what: str = "input") -> int:
    """InputError unless `path` is a regular file; returns its size."""
    with open_input(path, what) as f:
        return os.fstat(f.fileno()).st_size


def read_input(path: str | os.PathLike, limit: int, what: str = "input") -> bytes:
    """The whole of a regular file of at most `limit` bytes; InputError otherwise."""
    with open_input(path, what) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise InputError(f"{path}: cannot read it ({e.strerror or e})") from None
    if len(data) > limit:
        raise InputError(f"{path}: larger than {limit >> 20} MiB; not a {what}")
    return data


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def same_file(fd: int, path: str | os.PathLike) -> bool:
    """Whether `path` (not followed if a link) still names the file open at `fd`: a lock taken on an open file
    holds for its name only while the name is not given to another file meanwhile."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)

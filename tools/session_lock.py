"""One `tessera run` per session folder at a time: a lock file inside it, held with flock for the run.

`SessionLock.acquire(folder)` opens `folder/LOCK_NAME` (created exclusively, O_NOFOLLOW, 0600; an existing
one is reused only if it is a regular file of this user's, never through a link) and takes
`fcntl.flock(LOCK_EX | LOCK_NB)` on it. Another run holding it: SessionBusy, whose message names that run
(its pid, start time and command, which the holder writes into the file). The kernel drops a flock when
its holder dies, so a crashed run's lock file blocks nobody: the next run takes it over.

`release()` removes the file while still holding the lock, then closes it. A run that opened the file just
before the removal then holds a lock on a file no longer in the folder, so `acquire` checks, once it holds
the lock, that the folder's entry is still the file it locked, and starts again if not.

The descriptor is close-on-exec: the application never inherits the lock. Single-threaded (the main thread
of `tessera run`).
"""
from __future__ import annotations

import errno
import fcntl
import os
import shlex
import stat
import sys
import time
from pathlib import Path

from tessera.schemas.files import same_file

LOCK_NAME = ".tessera-run.lock"


class SessionBusy(Exception):
    """Another run holds the session folder's lock (the message names it)."""


class LockError(Exception):
    """The lock file cannot be made or used (a link or someone else's file in its place, an OS error)."""


class SessionLock:
    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, folder: Path) -> "SessionLock":
        path = Path(folder) / LOCK_NAME
        while True:
            fd = _open(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read(fd)
                os.close(fd)
                raise SessionBusy(f"in use by another tessera run ({holder or 'it has not said which yet'}); "
                                  "wait for it to end, or choose another folder") from None
            except OSError as e:
                os.close(fd)
                raise LockError(f"cannot lock {path}: {e.strerror}") from e
            if same_file(fd, path):
                break
            os.close(fd)                        # its holder removed it meanwhile: take the new one
        lock = cls(path, fd)
        lock._describe()
        return lock

    def _describe(self) -> None:
        text = (f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                f"{shlex.join(['tessera', *sys.argv[1:]])[:300]}")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, text.encode(errors="replace"), 0)

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if same_file(self._fd, self.path):
                os.unlink(self.path)
        except OSError:
            pass                                # a lock file left behind blocks nobody
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "SessionLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _open(path: Path) -> int:
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        try:
            return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass                                # OSError (an unwritable folder) goes to the caller
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            continue                            # removed meanwhile: create it
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise LockError(f"{path} is a symbolic link; Tessera does not follow it (remove it)") from e
            raise LockError(f"cannot open {path}: {e.strerror}") from e
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            os.close(fd)
            raise LockError(f"{path} is not a lock file of this user's; remove it")
        os.fchmod(fd, 0o600)
        return fd


def _read(fd: int) -> str:
    try:
        text = os.pread(fd, 400, 0).decode(errors="replace").strip()
    except OSError:
        return ""
    return "".join(c if c.isprintable() else "?" for c in text)   # shown in a terminal



"""The session folder's lock (tools/session_lock.py): one run at a time, never through a link, never stale."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from tessera.tools.session_lock import LOCK_NAME, LockError, SessionBusy, SessionLock


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    with SessionLock.acquire(tmp_path):
        with pytest.raises(SessionBusy, match=rf"in use by another tessera run \(pid {os.getpid()}, started "):
            SessionLock.acquire(tmp_path)
        assert stat.S_IMODE((tmp_path / LOCK_NAME).stat().st_mode) == 0o600
    assert not (tmp_path / LOCK_NAME).exists()          # released: removed
    SessionLock.acquire(tmp_path).release()              # and free again


def test_the_lock_of_a_dead_holder_blocks_nobody(tmp_path):
    code = ("import os, sys; from tessera.tools.session_lock import SessionLock; "
            "SessionLock.acquire(sys.argv[1]); os._exit(0)")    # dies holding it, its file left
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    assert (tmp_path / LOCK_NAME).exists()
    (tmp_path / LOCK_NAME).chmod(0o644)
    lock = SessionLock.acquire(tmp_path)
    assert stat.S_IMODE((tmp_path / LOCK_NAME).stat().st_mode) == 0o600
    lock.release()


def test_a_planted_link_is_never_followed(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / LOCK_NAME).symlink_to(target)
    with pytest.raises(LockError, match="symbolic link"):
        SessionLock.acquire(tmp_path / "s")
    assert target.read_text() == "keep"


def test_the_holders_description_is_printable(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["tessera", "run", "--out", "a\nb\u202e", "--", "app"])
    with SessionLock.acquire(tmp_path):
        with pytest.raises(SessionBusy) as busy:
            SessionLock.acquire(tmp_path)
    assert "\n" not in str(busy.value) and "\u202e" not in str(busy.value)

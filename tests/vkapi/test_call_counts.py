"""TESSERA_CALL_COUNTS (vkapi/call_counts.py): every call counted, by function, in a file created exclusively and
owner-only; nothing without the switch."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

from tessera.vkapi import call_counts

_PROGRAM = """
import threading
from tessera.vkapi import call_counts
call_counts.install_from_environ()
call_counts.install_from_environ()   # the second shim: still counted once
def counted():
    pass
for _ in range(7):
    counted()
t = threading.Thread(target=lambda: [counted() for _ in range(5)])
t.start(); t.join()
"""


def _run(env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != call_counts.SWITCH}
    return subprocess.run([sys.executable, "-c", _PROGRAM], env={**env, **env_extra}, capture_output=True, text=True)


def test_calls_are_counted_by_function_on_every_thread_started_after(tmp_path):
    prefix = tmp_path / "calls"
    out = _run({call_counts.SWITCH: str(prefix)})
    assert out.returncode == 0, out.stderr
    (path,) = tmp_path.glob("calls.*")
    assert path.name.split(".")[1].isdigit()   # the process id
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    counted = {name: n for (filename, name), n in call_counts.read(path).items() if filename == "<string>"}
    assert counted["counted"] == 12   # 7 on the main thread, 5 on the thread started after


def test_a_link_planted_at_the_file_is_not_followed(tmp_path, capsys):
    planted = tmp_path / "elsewhere"
    planted.write_text("keep")
    path = tmp_path / "calls.123"
    os.symlink(planted, path)
    call_counts._write(str(path), call_counts.collections.Counter({("f.py", "f"): 3}))
    assert planted.read_text() == "keep" and os.path.islink(path)
    assert "cannot create" in capsys.readouterr().err


def test_nothing_is_counted_without_the_switch(tmp_path):
    out = _run({})
    assert out.returncode == 0 and not list(tmp_path.iterdir())

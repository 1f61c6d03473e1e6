"""Issue 22 (CLI): commands given inputs that are not what they expect answer at once, with one clear
line and a nonzero exit, never a hang or a traceback. Per command, the other cases live with their
area's tests (tests/hostd/test_report_inputs.py, test_commands.py, tests/spirv/test_cli.py,
tests/compiler/test_inputs.py); this file holds the commands without a test file of their own."""
from __future__ import annotations

import os
import subprocess
import sys


def test_regions_skips_a_fifo_or_folder_named_like_a_log(tmp_path):
    """A FIFO named session.tessera-log blocked `tessera regions` (a subprocess: a regression fails on
    the timeout instead of hanging the suite); a folder so named was a traceback."""
    (tmp_path / "a-1-1").mkdir()
    os.mkfifo(tmp_path / "a-1-1" / "session.tessera-log")
    (tmp_path / "b-2-2" / "session.tessera-log").mkdir(parents=True)
    (tmp_path / "layer-3.spool").mkdir()
    r = subprocess.run([sys.executable, "-m", "tessera.tools.cli", "regions", str(tmp_path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and "no per-region counters" in r.stderr and "Traceback" not in r.stderr, r.stderr

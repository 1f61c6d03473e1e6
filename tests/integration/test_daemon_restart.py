"""hostd killed mid-run and restarted: the layer spools, reconnects, and after the
merge no message of a real application is missing."""
from __future__ import annotations

import signal
import socket
import subprocess
import time
from dataclasses import replace

from integration_support import PYTHON, REPO

from tessera.hostd.embedded import merge_session
from tessera.schemas import frames as fr

APP = REPO / "tests" / "integration" / "apps" / "submit_loop.py"
ITERATIONS = 150   # enough left after the restart for the layer to retry (RETRY_S)


def start_hostd(sock, out) -> subprocess.Popen:
    proc = subprocess.Popen([PYTHON, "-m", "tessera.tools.cli", "hostd", "--listen", f"unix:{sock}",
                             "--out", str(out)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(sock))
            return proc
        except OSError:
            assert time.monotonic() < deadline, "hostd did not start"
            time.sleep(0.02)
        finally:
            probe.close()


def test_daemon_killed_and_restarted_mid_run(shims, tmp_path):
    from tessera.tools.launch import LaunchConfig, environment

    session, sock = tmp_path / "session", tmp_path / "hostd.sock"
    daemon = start_hostd(sock, session / "hostd")
    env = environment(replace(LaunchConfig(session), hostd=f"unix:{sock}"))
    app = subprocess.Popen([PYTHON, str(APP), str(ITERATIONS)], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    for line in app.stdout:
        n = int(line.split()[1])
        if n == 15:
            daemon.send_signal(signal.SIGKILL)   # gone without finishing anything
            daemon.wait()
        if n == 30:
            daemon = start_hostd(sock, session / "hostd")
    assert app.wait() == 0
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=60)

    stream = [f for p in sorted(session.rglob("*.tessera-log")) + sorted(session.rglob("*.spool"))
              for f in fr.iter_file(p)]
    submits = {f.sequence for f in stream if f.type == fr.MessageType.SUBMIT}
    assert submits == set(range(1, ITERATIONS + 1))          # every submit, from log or spool
    assert list(session.rglob("*.spool"))                    # it did spool
    late = [p for p in session.rglob("*.tessera-log")
            if any(f.type == fr.MessageType.SUBMIT and f.sequence > 100 for f in fr.iter_file(p))]
    assert late                                               # and it did reconnect

    result = merge_session(session)
    assert result.submits == ITERATIONS
    assert result.gpu_events == ITERATIONS and result.events_without_metadata == 0

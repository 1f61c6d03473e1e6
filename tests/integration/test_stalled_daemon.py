"""hostd stopped (SIGSTOP) while a real application records on four threads (issue #10, item 1).

The daemon accepts the app's connection and logs its first frames, then
stops reading: the socket buffer fills and a blocking send would hang the
layer's sender for as long as the daemon is stopped. Required: every GPU
event keeps its metadata after the merge (the layer spools what the daemon
did not acknowledge), one warning line says so, and the daemon delays the
app's exit by well under the old 23 s.

Synchronisation is by the app's stdout/stdin (threads_gated.py) and by the
daemon's log file, never by sleeping.
"""
from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import replace

from hostd_process import Lines, logged_frames, start_hostd, wait_until
from integration_support import PYTHON, REPO

from tessera.hostd.embedded import merge_session
from tessera.schemas import frames as fr

APP = REPO / "tests" / "integration" / "apps" / "threads_gated.py"
THREADS, ROUNDS = 4, 1050            # 8,400 workloads, ~1.5 MB of frames: far more than a socket buffer
# The app's close (device and instance destruction, interpreter exit) with a stopped daemon. The
# daemon may cost it at most about a second; the old sender waited 10 + 10 + 2 s for it. Generous,
# so a slow machine passes, and still far below the old behaviour.
EXIT_BOUND_S = 3.0


def test_stopped_daemon_loses_nothing_warns_and_does_not_hold_the_exit(shims, tmp_path):
    from tessera.tools.launch import LaunchConfig, environment

    session, sock = tmp_path / "session", tmp_path / "hostd.sock"
    out = session / "hostd"
    daemon, daemon_err = start_hostd(sock, out)
    env = environment(replace(LaunchConfig(session), hostd=f"unix:{sock}"))
    app = subprocess.Popen([PYTHON, str(APP), str(ROUNDS)], env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = False
    try:
        stdout, stderr = Lines(app.stdout), Lines(app.stderr)
        stdout.wait_for("ready")                                   # device created: HELLO, DEVICE sent
        wait_until(lambda: any(f.type == fr.MessageType.DEVICE for f in logged_frames(out)))   # ... logged
        daemon.send_signal(signal.SIGSTOP)
        stopped = True
        app.stdin.write("go\n")
        app.stdin.flush()
        stdout.wait_for("closing")
        closing = time.monotonic()
        assert app.wait(timeout=120) == 0, stdout.text() + stderr.text()
        exit_s = time.monotonic() - closing
    finally:
        if stopped:
            daemon.send_signal(signal.SIGCONT)
        app.kill()
        app.wait()
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0, daemon_err.text()

    assert f"OK {THREADS * ROUNDS} command buffers" in stdout.text()
    warnings = [line for line in stderr.text().splitlines() if "hostd" in line and "spool" in line]
    assert len(warnings) == 1, stderr.text()                      # one line, not one per retry
    assert exit_s < EXIT_BOUND_S, f"exit took {exit_s:.1f} s with a stopped daemon"

    assert list(session.glob("layer-*.spool"))
    result = merge_session(session)
    assert result.gpu_events == THREADS * ROUNDS * 2               # a fill and a copy per command buffer
    assert result.events_without_metadata == 0, result.problems
    assert result.submits == 1

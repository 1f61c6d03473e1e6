"""hostd killed mid-run and restarted: the layer spools, reconnects, and after the
merge no message of a real application is missing.

The app runs in lockstep with the test (submit_stepped.py: one iteration per
line on stdin), so the kill and the restart happen at known iterations, and
the app keeps submitting until the restarted daemon has logged one of its
later submits: the layer's reconnect interval is waited out by events, not
raced against the app's speed.
"""
from __future__ import annotations

import re
import signal
import subprocess
import time
from dataclasses import replace

import pytest

from hostd_process import logged_frames, start_hostd, wait_until
from integration_support import PYTHON, REPO

from tessera.hostd.embedded import merge_session
from tessera.schemas import frames as fr

APP = REPO / "tests" / "integration" / "apps" / "submit_stepped.py"
KILL_AT, RESTART_AT = 15, 30
# The layer retries the daemon every RETRY_S (0.5 s) while it spools. Iterations are counted, not timed, but a loop
# whose submits the shims' C handles runs thousands of them in that time: the test gives up on the reconnect only
# after this long (a bound on a failure, never a race: a working layer reconnects within about a second).
GIVE_UP_S = 60.0


def reconnected(out, after: int) -> bool:
    """The restarted daemon logged a submit made after the restart."""
    return any(f.type == fr.MessageType.SUBMIT and f.sequence > after for f in logged_frames(out))


def spooled_submits(session) -> set[int]:
    out = set()
    for spool in session.glob("*.spool"):
        out |= {f.sequence for f in fr.FrameDecoder().feed(spool.read_bytes()) if f.type == fr.MessageType.SUBMIT}
    return out


@pytest.mark.parametrize("mode", ["fence", "rerecord"])
def test_daemon_killed_and_restarted_mid_run(mode, shims, tmp_path):
    """`rerecord`: a buffer recorded again the same way every iteration, whose submits the layer's C reports
    itself, writing to the daemon's socket (layer/reported_submits.py): what the killed daemon had not
    acknowledged is spooled all the same, and each recording described as an earlier one's workloads finds
    them, in whichever log or spool they are."""
    from tessera.tools.launch import LaunchConfig, environment

    session, sock = tmp_path / "session", tmp_path / "hostd.sock"
    daemon, _ = start_hostd(sock, session / "hostd")
    second_out = session / "hostd-restarted"
    env = {**environment(replace(LaunchConfig(session), hostd=f"unix:{sock}")), "TESSERA_LOG": "info"}
    said = tmp_path / "stderr"
    app = subprocess.Popen([PYTHON, str(APP), mode], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=said.open("w"), text=True)
    last, back, give_up = 0, False, time.monotonic() + GIVE_UP_S
    try:
        for line in app.stdout:
            last = int(line.split()[1])
            if last == KILL_AT:
                daemon.send_signal(signal.SIGKILL)   # gone without finishing anything
                daemon.wait()
            if last == RESTART_AT:                   # once the layer has spooled this far without a daemon
                wait_until(lambda: RESTART_AT in spooled_submits(session))
                daemon, _ = start_hostd(sock, second_out)
            back = last > RESTART_AT and reconnected(second_out, RESTART_AT)
            app.stdin.write("stop\n" if back or time.monotonic() > give_up else "next\n")
            app.stdin.flush()
        assert app.wait() == 0
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    finally:   # a failure must not leave the app or a daemon running
        for proc in (app, daemon):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert back, f"the layer never reconnected in {last} iterations"

    stream = [f for p in sorted(session.rglob("*.tessera-log")) + sorted(session.rglob("*.spool"))
              for f in fr.iter_file(p)]
    submits = {f.sequence for f in stream if f.type == fr.MessageType.SUBMIT}
    assert submits == set(range(1, last + 1))                 # every submit, from a log or the spool
    assert set(range(KILL_AT + 1, RESTART_AT + 1)) <= spooled_submits(session)   # no daemon then

    result = merge_session(session)
    assert result.submits == last
    assert result.gpu_events == last and result.events_without_metadata == 0
    if mode == "rerecord":   # most of them reported by the layer's C (the count the layer logs at vkDestroyDevice)
        reported = re.search(r"layer INFO: submits reported in C: (\d+)", said.read_text())
        assert reported and int(reported.group(1)) >= last // 2, said.read_text()
        # described as an earlier recording's workloads (RECORDED_AGAIN), in the logs of both daemons and the
        # spool: every one found its earlier tag
        assert any(f.type == fr.MessageType.RECORDED_AGAIN for f in stream)
        assert not [p for p in result.problems if "recorded again" in p], result.problems

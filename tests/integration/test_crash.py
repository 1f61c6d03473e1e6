"""An application killed mid-run: the driver's trace stays readable and holds every
completed submit; the layer's spool keeps everything written before the kill.

The app runs in lockstep with the test (submit_stepped.py): it has made exactly
COMPLETED submits and is waiting for its next instruction when it is killed,
once its layer has spooled the last one (read from the spool file, not
guessed), so every count below is exact. With a timeline semaphore's host wait
(vkWaitSemaphores) the test does not wait for the spool at all: that wait hands
everything over before it returns, as a fence wait does (docs/programs.md), so
the app is killed as soon as it says its last submit completed.
"""
from __future__ import annotations

import signal
import subprocess

import pytest

from hostd_process import wait_until
from integration_support import PYTHON, REPO

from tessera.schemas import frames as fr
from tessera.schemas import perfetto as pf

APP = REPO / "tests" / "integration" / "apps" / "submit_stepped.py"
COMPLETED = 25


def spooled(session) -> list[fr.Frame]:
    """Whole frames of the spool so far (a frame being written may be cut)."""
    return [f for p in session.glob("layer-*.spool") for f in fr.FrameDecoder().feed(p.read_bytes())]


@pytest.mark.parametrize("wait", ["fence", "timeline"])
def test_killed_app_leaves_a_valid_trace_with_every_completed_submit(tessera_env, tmp_path, wait):
    session = tmp_path / "session"
    proc = subprocess.Popen([PYTHON, str(APP), wait], env=tessera_env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        completed = int(line.split()[1])
        if completed == COMPLETED:
            break
        proc.stdin.write("next\n")
        proc.stdin.flush()
    if wait == "fence":
        wait_until(lambda: any(f.type == fr.MessageType.SUBMIT and f.sequence == COMPLETED
                                for f in spooled(session)))
    proc.send_signal(signal.SIGKILL)             # waiting for its next line: killed mid-run
    proc.wait()

    packets = list(pf.read_packets(session / "gpu.perfetto-trace"))   # raises if a packet were cut
    assert pf.check_render_stages(packets).problems == []
    fills = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")]
    assert len(fills) == COMPLETED                     # each completed submit's transfer, once
    assert len({e.submission_id for e in fills}) == COMPLETED

    spool = next(session.glob("layer-*.spool"))
    frames = list(fr.iter_file(spool))                 # whole frames only: raises on a cut one
    submits = [f.sequence for f in frames if f.type == fr.MessageType.SUBMIT]
    assert submits == list(range(1, COMPLETED + 1))    # each once, in order, none missing

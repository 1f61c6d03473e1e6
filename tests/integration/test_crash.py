"""An application killed mid-run: the driver's trace stays readable and holds every
completed submit; the layer's spool keeps everything written before the kill.

The app runs in lockstep with the test (submit_stepped.py): it has made exactly
COMPLETED submits and is waiting for its next instruction when it is killed,
once its layer has spooled the last one (read from the spool file, not
guessed), so every count below is exact. With a timeline semaphore's host wait
(vkWaitSemaphores) the test does not wait for the spool at all: that wait hands
everything over before it returns, as a fence wait does (docs/programs.md), so
the app is killed as soon as it says its last submit completed.

A C frame loop whose submits both shims handle in C (their bytes staged, tessera.schemas.staged) is
killed at a moment the test does not choose: the merge adopts what the stages held, and every submit
is there whole, once.
"""
from __future__ import annotations

import collections
import signal
import subprocess

import pytest

from hostd_process import wait_until
from integration_support import PYTHON, REPO

from tessera.schemas import staged

from tessera.schemas import frames as fr
from tessera.schemas import perfetto as pf

APP = REPO / "tests" / "integration" / "apps" / "submit_stepped.py"
COMPLETED = 25


def spooled(session) -> list[fr.Frame]:
    """Whole frames of the spool so far, with those its stage holds (a frame being written may be cut)."""
    return [f for p in session.glob("layer-*.spool") for f in fr.FrameDecoder().feed(staged.read_through(p))]


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


RECORD_COST = REPO / "build" / "bench" / "record_cost"
PASS_EVENTS = 18   # record_cost passframe: 8 passes (binning and main each) and 2 dispatches per submit


def test_killed_frame_loop_handled_in_c_loses_nothing_staged(tessera_env, tmp_path):
    """Killed while its submits are placed and reported in C, their packets and frames waiting in the shims'
    stages: after the merge's adoption every submit the driver placed has all its events, once, in order."""
    from tessera.hostd.merge import merge_session

    session = tmp_path / "session"
    proc = subprocess.Popen([RECORD_COST, "passframe", "1000000", "1"], env=tessera_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trace = session / "gpu.perfetto-trace"
    # killed once the stages were written many times over (C handles the frames)
    wait_until(lambda: trace.exists() and trace.stat().st_size > 32 * staged.CAPACITY
               and any(session.glob("layer-*.spool.staged-*")), timeout=120)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    spool = next(session.glob("layer-*.spool"))
    files = {path: (path.read_bytes(), staged.read_through(path)) for path in (trace, spool)}
    for path, (written, whole) in files.items():   # the stages hold what the kill kept from the files
        assert whole.startswith(written), path
    # the trace's always (C writes it when the next append would not fit); the spool's may have been written
    # just before the kill (the layer's sender takes its licence back every 50 ms)
    assert len(files[trace][1]) > len(files[trace][0])

    result = merge_session(session)
    assert result.problems == [] and not list(session.glob(f"*{staged.SUFFIX}*"))
    for path, (_, whole) in files.items():
        assert path.read_bytes() == whole, path   # adopted: appended once, byte for byte
    packets = list(pf.read_packets(trace))
    assert pf.check_render_stages(packets).problems == []
    per_submit = collections.Counter(p.gpu_render_stage_event.submission_id for p in packets
                                     if p.HasField("gpu_render_stage_event"))
    assert sorted(per_submit) == list(range(1, len(per_submit) + 1))   # none missing, in order
    assert set(per_submit.values()) == {PASS_EVENTS}                    # each whole, none twice
    # the layer reports a submit once the driver's call returned: the last one may lack its metadata
    assert result.metadata_without_events == 0 and result.events_without_metadata <= PASS_EVENTS

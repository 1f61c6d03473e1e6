"""What a signal to `tessera run` does to the application (tools/interrupt.py), on plain processes.

The handler is called directly (as Python calls it on the main thread), so no signal reaches pytest.
"""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tessera.tools.interrupt import Interrupted, Interruption


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def start(interruption: Interruption, script: str) -> tuple[subprocess.Popen, int]:
    """`sh -c script` as tools/launch.py starts an application; the pid the script prints first."""
    proc = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True,
                            process_group=0 if interruption.own_group else None)
    return proc, int(proc.stdout.readline())


def test_the_signal_reaches_the_applications_whole_group():
    interruption = Interruption(own_group=True, kill_after=60)
    proc, child = start(interruption, "sleep 60 & echo $!; wait")    # a wrapper and what it started
    with interruption.running(proc):
        interruption._handle(signal.SIGTERM, None)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    assert interruption.signum == interruption.forwarded == signal.SIGTERM and interruption.killed is None
    deadline = time.monotonic() + 30
    while alive(child):
        assert time.monotonic() < deadline, "the wrapper's child outlived it"
        time.sleep(0.01)


def test_an_application_ignoring_it_is_killed_after_kill_after():
    interruption = Interruption(own_group=False, kill_after=0.5)
    proc, _ = start(interruption, "trap '' INT TERM; echo $$; while :; do sleep 0.05; done")
    began = time.monotonic()
    with interruption.running(proc):
        interruption._handle(signal.SIGINT, None)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - began < 20
    assert interruption.killed == "still running 0.5 s after SIGINT"


def test_a_second_signal_kills_at_once():
    interruption = Interruption(own_group=True, kill_after=60)
    proc, _ = start(interruption, "trap '' INT TERM; echo $$; while :; do sleep 0.05; done")
    with interruption.running(proc):
        interruption._handle(signal.SIGTERM, None)
        interruption._handle(signal.SIGINT, None)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    assert interruption.signum == signal.SIGTERM and interruption.killed == "a second SIGINT"


def test_a_signal_before_the_application_starts_keeps_it_from_starting():
    interruption = Interruption(own_group=True)
    interruption._handle(signal.SIGINT, None)
    with pytest.raises(Interrupted):
        interruption.check()


def test_a_signal_while_draining_hurries_and_while_merging_raises():
    interruption = Interruption(own_group=True)
    hurried = []
    with interruption.draining(lambda: hurried.append(True)):
        interruption._handle(signal.SIGTERM, None)
    assert hurried == [True]
    with interruption.raising():            # the signal that came before does not stop the merge
        pass
    with pytest.raises(Interrupted), interruption.raising():
        interruption._handle(signal.SIGINT, None)
    assert interruption.signum == signal.SIGTERM


def test_handlers_are_restored_and_an_ignored_signal_stays_ignored():
    # SIGINT as Python sets it in a foreground process (pytest started in the background inherits it ignored)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    before = signal.getsignal(signal.SIGINT)
    previous_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        interruption = Interruption(own_group=True)
        with interruption.catching():
            assert signal.getsignal(signal.SIGINT) == interruption._handle
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, outer)

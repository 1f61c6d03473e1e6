"""Interrupting `tessera run`, and two runs on one --out (issue #22 item 2).

Ctrl-C (typed at a terminal, or SIGINT sent to Tessera) and SIGTERM stop the application, the embedded
daemon lets its connection finish, what arrived is merged, one line says so, the exit status is 128 + the
signal's number, and neither the daemon's socket folder nor the session lock stays behind. The application
(apps/wait_for_signal.py) has completed exactly SUBMITS submits and says so before it is interrupted, so
every count is exact. Each run gets a TMPDIR of its own: the embedded daemon's socket folder is made there,
and must be gone after.
"""
from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import threading

import pytest
from hostd_process import Lines
from integration_support import PYTHON, REPO

from tessera.schemas import frames as fr
from tessera.schemas import perfetto as pf
from tessera.tools.interrupt import KILL_AFTER
from tessera.tools.session_lock import LOCK_NAME

TESSERA = REPO / ".venv" / "bin" / "tessera"
APP = REPO / "tests" / "integration" / "apps" / "wait_for_signal.py"
SUBMITS = 5



def _as_from_a_terminal() -> None:
    """In the child, before exec: SIGINT and SIGTERM as a shell started from a terminal leaves them. A test
    run started in the background (`cmd &` in a script) inherits SIGINT ignored, and `tessera run` rightly
    keeps an ignored signal ignored (tools/interrupt.py): these tests are about a user who can interrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

class Run:
    """`tessera run --out SESSION -- python wait_for_signal.py SUBMITS [app_args]`, in a session of its own
    (no controlling terminal), its output read line by line."""

    def __init__(self, tmp_path, session, *app_args: str, options=()) -> None:
        self.tmpdir = tmp_path / f"tmp-{session.name}"
        self.tmpdir.mkdir(exist_ok=True)
        self.app_pid: int | None = None
        argv = [TESSERA, "run", "--out", session, *options, "--", PYTHON, APP, str(SUBMITS), *app_args]
        self.proc = subprocess.Popen([str(a) for a in argv], env=dict(os.environ, TMPDIR=str(self.tmpdir)),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, preexec_fn=_as_from_a_terminal)
        self.out, self.err = Lines(self.proc.stdout), Lines(self.proc.stderr)

    def ready(self) -> int:
        """The application's pid, once it has completed its submits."""
        self.app_pid = int(self.out.wait_for(f"ready {SUBMITS} pid").split()[-1])
        return self.app_pid

    def wait(self) -> int:
        return self.proc.wait(timeout=120)


@pytest.fixture
def start(tmp_path):
    """Run(...) for the test; whatever of it still runs at the end (the test failed) is killed."""
    runs: list[Run] = []

    def make(session, *app_args: str, options=()) -> Run:
        runs.append(Run(tmp_path, session, *app_args, options=options))
        return runs[-1]

    yield make
    for run in runs:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
        if run.app_pid is not None and not gone(run.app_pid):
            os.kill(run.app_pid, signal.SIGKILL)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def check_session(session, app_pid: int) -> None:
    """The merged trace holds the SUBMITS events of `app_pid`, as many as the session log has submits, and
    nothing of the run (its lock) is left but its outputs."""
    packets = list(pf.read_packets(session / "merged.perfetto-trace"))
    events = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")]
    pids = {p.track_descriptor.process.pid for p in packets
            if p.HasField("track_descriptor") and p.track_descriptor.HasField("process")}
    logs = list(session.rglob("*.tessera-log"))
    submits = [f.sequence for log in logs for f in fr.iter_file(log) if f.type == fr.MessageType.SUBMIT]
    assert len(events) == SUBMITS and sorted(e.submission_id for e in events) == submits == [1, 2, 3, 4, 5]
    assert pids == {app_pid}
    assert [log.parent.name for log in logs] == [f"wait_for_signal.py-{app_pid}-1"]
    assert not (session / LOCK_NAME).exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_stops_the_app_and_merges_what_arrived(shims, tmp_path, start, signum):
    session = tmp_path / "s"
    run = start(session)
    app_pid = run.ready()
    run.proc.send_signal(signum)
    assert run.wait() == 128 + signum, run.err.text()
    assert gone(app_pid)
    err = run.err.text()
    name = signal.Signals(signum).name
    line = [x for x in err.splitlines() if x.startswith("tessera: interrupted")]
    assert line == [f"tessera: interrupted by {name}: {PYTHON} was killed by {name} (signal {signum}; exit status "
                    f"{128 + signum}); merged what arrived: {SUBMITS} GPU event(s) of {SUBMITS} submit(s) into "
                    f"{session / 'merged.perfetto-trace'}"], err
    assert str(REPO / "tools") not in err and "Aborted!" not in err    # no traceback of Tessera's own
    check_session(session, app_pid)
    assert list(run.tmpdir.iterdir()) == []            # the daemon's socket and its folder are gone


def test_an_app_that_ignores_the_signal_is_killed_after_a_few_seconds(shims, tmp_path, start):
    session = tmp_path / "s"
    run = start(session, "--ignore-signals")
    app_pid = run.ready()
    run.proc.send_signal(signal.SIGTERM)
    assert run.wait() == 143, run.err.text()
    assert gone(app_pid)
    assert (f"{PYTHON} was killed with SIGKILL (still running {KILL_AFTER:g} s after SIGTERM); merged what arrived: "
            f"{SUBMITS} GPU event(s)") in run.err.text()
    check_session(session, app_pid)
    assert list(run.tmpdir.iterdir()) == []


def test_ctrl_c_typed_at_the_terminal(shims, tmp_path):
    """The terminal sends SIGINT to its whole foreground group, Tessera and the application alike: Tessera
    waits for the application to end on that one signal (a second one would interrupt its cleanup: the
    application counts them)."""
    session = tmp_path / "s"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    argv = [str(a) for a in (TESSERA, "run", "--out", session, "--", PYTHON, APP, SUBMITS, "--count-sigint")]
    env = dict(os.environ, TMPDIR=str(tmpdir))
    pid, master = pty.fork()          # the child leads a new session whose terminal is the pty
    if pid == 0:
        _as_from_a_terminal()
        os.execve(argv[0], argv, env)
    output = bytearray()
    ready = threading.Event()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:           # EIO: every process holding the terminal has ended
                break
            if not chunk:
                break
            output.extend(chunk)
            if re.search(rb"ready \d+ pid \d+", output):
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    status = app_pid = None
    try:
        assert ready.wait(120) and b"ready" in output, output.decode(errors="replace")
        app_pid = int(re.search(rb"ready \d+ pid (\d+)", output).group(1))
        os.write(master, b"\x03")     # Ctrl-C, as typed
        _, status = os.waitpid(pid, 0)
        reader.join(30)
    finally:
        if status is None:            # failed before: nothing of it may outlive the test
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(master)
    text = output.decode(errors="replace").replace("\r\n", "\n")
    assert os.waitstatus_to_exitcode(status) == 130, text
    assert gone(app_pid)
    assert text.count("got SIGINT") == 1, text
    assert (f"tessera: interrupted by SIGINT: {PYTHON} exited with 130; merged what arrived: {SUBMITS} "
            "GPU event(s)") in text
    check_session(session, app_pid)
    assert list(tmpdir.iterdir()) == []


def test_a_second_run_on_the_same_out_is_refused_naming_the_first(shims, tmp_path, start):
    session = tmp_path / "s"
    first = start(session)
    app_pid = first.ready()
    second = subprocess.run([str(TESSERA), "run", "--out", str(session), "--force", "--", PYTHON, "-c",
                             "print('app ran')"], capture_output=True, text=True, timeout=120)
    assert second.returncode == 1
    assert f"in use by another tessera run (pid {first.proc.pid}, started " in second.stderr, second.stderr
    assert "Traceback" not in second.stderr and "app ran" not in second.stdout
    first.proc.send_signal(signal.SIGTERM)
    assert first.wait() == 143, first.err.text()
    check_session(session, app_pid)                    # --force deleted nothing of the first run's


def test_runs_at_once_on_one_out_never_mix(shims, tmp_path):
    """Four at once: one runs, each other one is refused, whether the first is still running or has ended."""
    session = tmp_path / "s"
    runs = [subprocess.Popen([str(TESSERA), "run", "--out", str(session), "--", PYTHON,
                              str(REPO / "examples" / "compute_collatz.py")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in runs]
    ok = [r for r in results if r[0] == 0]
    refused = [r for r in results if r[0] != 0]
    assert len(ok) == 1 and len(refused) == 3, results
    for code, _, err in refused:
        assert code == 1 and "Traceback" not in err, err
        assert "in use by another tessera run" in err or "holds an earlier session" in err, err
    packets = list(pf.read_packets(session / "merged.perfetto-trace"))
    pids = {p.track_descriptor.process.pid for p in packets
            if p.HasField("track_descriptor") and p.track_descriptor.HasField("process")}
    assert len(pids) == 1 and len([d for d in session.iterdir() if d.is_dir()]) == 1


def test_a_crashed_runs_lock_blocks_nobody(shims, tmp_path, start):
    session = tmp_path / "s"
    crashed = start(session)
    app_pid = crashed.ready()
    crashed.proc.send_signal(signal.SIGKILL)           # Tessera dies holding the lock, its lock file stays
    crashed.wait()
    os.kill(app_pid, signal.SIGKILL)                   # (its application, alone in its group, too)
    assert (session / LOCK_NAME).exists()
    again = subprocess.run([str(TESSERA), "run", "--out", str(session), "--force", "--", PYTHON,
                            str(REPO / "examples" / "compute_collatz.py")], capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr
    assert "merged trace:" in again.stdout and not (session / LOCK_NAME).exists()

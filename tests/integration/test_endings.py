"""Nothing lost at any ending (issue #22, item 1): whatever a program does last, every submit it
made before its last wait is in the merged trace with its metadata, and a program that never
waits still gets every submit's events.

A C program (apps/c/endings.c) and a Python program (apps/endings.py) make SUBMITS submits, then
end one way or another; each runs under `tessera run` (the real loader, the layer, the emulated
driver over lavapipe, the embedded daemon), and the session is merged. Exact counts: each submit
gives a known number of GPU workloads (below), every one with its metadata, no metadata left over.
Indirect dispatches are timed only after execution (the driver waits for its completion fence), and
so is instrumented work (--instrument).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from integration_support import PYTHON, REPO, run

SUBMITS = 5
C_APP = REPO / "tests" / "integration" / "apps" / "c" / "endings.c"
PY_APP = REPO / "tests" / "integration" / "apps" / "endings.py"
TESSERA = Path(PYTHON).parent / "tessera"
# GPU workloads per submit. C: fill + copy, and with `indirect` a dispatch plus the layer's copy of its
# indirect arguments. Python: fill, and with `indirect` a dispatch plus the layer's copy.
C_EVENTS = {"plain": 2, "indirect": 4}
PY_EVENTS = {"plain": 1, "indirect": 3}
# How each ending shows in `tessera run`'s exit status (the application's, as a shell reports it).
STATUS = {"wait-abort": 128 + 6, "wait-kill": 128 + 9, "raise": 1}


@pytest.fixture(scope="module")
def c_app(tmp_path_factory) -> Path:
    subprocess.run(["make", "-s", "-C", REPO / "examples"], check=True)   # the compute shader's header
    out = tmp_path_factory.mktemp("endings") / "endings"
    subprocess.run(["gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(REPO / "build" / "bench" / "gen"),
                    "-o", str(out), str(C_APP), "-lvulkan"], check=True)
    return out


def _run_and_merge(argv: list, session: Path, *options: str) -> tuple[subprocess.CompletedProcess, object]:
    from tessera.hostd.merge import merge_session
    from tessera.schemas.staged import SUFFIX

    out = run([TESSERA, "run", "--no-merge", "--out", session, *options, "--", *argv], None, timeout=180)
    result = merge_session(session)
    assert not list(session.rglob(f"*{SUFFIX}*"))   # written at exit, or adopted by the merge
    return out, result


def _assert_every_submit_kept(out, result, ending: str, per_submit: int) -> None:
    assert out.returncode == STATUS.get(ending, 0), out.stdout + out.stderr
    assert f"endings: submitted {SUBMITS}" in out.stdout, out.stdout + out.stderr
    assert (result.gpu_events, result.events_without_metadata, result.metadata_without_events) == \
        (SUBMITS * per_submit, 0, 0), (result.examples, out.stderr)


@pytest.mark.parametrize("work", ["plain", "indirect"])
@pytest.mark.parametrize("ending", ["return", "exit", "wait-return", "fence-_exit", "poll-_exit", "counter-_exit",
                                    "wait-_exit", "wait-abort", "wait-kill", "destroy", "fork-exit"])
def test_c_program(c_app, tmp_path, ending, work):
    out, result = _run_and_merge([c_app, ending, SUBMITS, work], tmp_path / "session")
    _assert_every_submit_kept(out, result, ending, C_EVENTS[work])


@pytest.mark.parametrize("work", ["plain", "indirect"])
@pytest.mark.parametrize("ending", ["return", "raise", "wait-return", "fence-_exit", "wait-kill"])
def test_python_program(tmp_path, ending, work):
    out, result = _run_and_merge([PYTHON, PY_APP, ending, SUBMITS, work], tmp_path / "session")
    _assert_every_submit_kept(out, result, ending, PY_EVENTS[work])


@pytest.mark.parametrize("ending", ["return", "fence-_exit", "wait-kill"])
def test_c_program_instrumented(c_app, tmp_path, ending):
    out, result = _run_and_merge([c_app, ending, SUBMITS, "indirect"], tmp_path / "session", "--instrument")
    _assert_every_submit_kept(out, result, ending, C_EVENTS["indirect"])


@pytest.mark.parametrize("ending", ["return", "wait-return"])
def test_python_program_instrumented(tmp_path, ending):
    out, result = _run_and_merge([PYTHON, PY_APP, ending, SUBMITS, "indirect"], tmp_path / "session", "--instrument")
    _assert_every_submit_kept(out, result, ending, PY_EVENTS["indirect"])



def test_a_full_disk_costs_the_events_not_written_and_nothing_else(c_app, small_fs):
    """The session on a 1 MiB filesystem: the program is not disturbed, the driver says once that it
    cannot write its trace, and what it wrote before reads as a valid trace."""
    from tessera.schemas import perfetto as pf

    session = small_fs / "session"
    out = run([TESSERA, "run", "--no-merge", "--out", session, "--", c_app, "return", 20_000, "plain"], None,
              timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "endings: submitted 20000" in out.stdout
    said = [line for line in out.stderr.splitlines() if "cannot write" in line and "gpu.perfetto-trace" in line]
    assert len(said) == 1 and said[0].startswith("tessera: "), out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    problems = []
    packets = list(pf.read_packets(session / "gpu.perfetto-trace", problem=lambda *a: problems.append(a)))
    events = sum(p.HasField("gpu_render_stage_event") for p in packets)
    # How many events were written before the disk filled depends on who filled it: the daemon's session
    # log and the driver's trace share the folder, and which writes first is a matter of timing. What was
    # written reads whole, but for at most one packet cut short by the full disk.
    assert events < 2 * 20_000 and len(problems) <= 1, problems


def test_a_disk_too_full_for_a_stage_costs_no_signal(small_fs):
    """A frame loop whose submits the driver places in C, on a filesystem with room for its first frames'
    packets but not for the trace's stage (schemas/staged.py): the stage is refused when made (a write to a
    mapping the disk cannot back would raise SIGBUS in the application), said once, and the program runs to its
    end, the driver writing each submit's packets at once until the disk is full."""
    session = small_fs / "session"
    session.mkdir()
    (small_fs / "filler").write_bytes(bytes((1 << 20) - (48 << 10)))   # less room than a stage takes
    out = run([TESSERA, "run", "--no-layer", "--no-merge", "--out", session, "--",
               REPO / "build" / "bench" / "record_cost", "frame", 400, 1, 8, "fill"],
              {**os.environ, "TESSERA_LOG": "info"}, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    refused = [line for line in out.stderr.splitlines() if "appends are not staged" in line]
    assert len(refused) == 1 and "No space left on device" in refused[0], out.stderr
    assert "submits placed in C: 0 " not in out.stderr, out.stderr   # C placed them, unstaged
    assert not list(session.glob("*.staged-*"))


def test_blocks_the_writers_reserved_ahead_are_given_back_by_the_merge(tmp_path):
    """The driver's and the layer's C reserve their files' blocks a MiB ahead of their staged writes
    (staged_appends.c tessera_stage_reserve); the files' sizes count only what was written, and the merge gives
    the blocks past the end back once no writer has the file open (staged.release_reserved), not a byte lost."""
    from tessera.hostd.merge import merge_session
    from tessera.schemas.staged import CAPACITY

    session = tmp_path / "session"
    out = run([TESSERA, "run", "--no-merge", "--out", session, "--",
               REPO / "build" / "bench" / "record_cost", "passframe", 200, 1], None, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    trace = session / "gpu.perfetto-trace"
    written = trace.read_bytes()
    before = trace.stat()
    assert before.st_size > 2 * CAPACITY   # staged writes happened
    # What is left reserved is anywhere up to a MiB past the end (2.3 MB written and 3.1 MB of blocks when this was
    # written); without a reservation there is at most the last block's rest (and the extents' own blocks).
    assert before.st_blocks * 512 > before.st_size + 3 * 4096, (before.st_size, before.st_blocks)
    result = merge_session(session)
    assert result.gpu_events == 200 * 18, result.problems
    after = trace.stat()
    assert after.st_size == before.st_size and trace.read_bytes() == written
    assert after.st_blocks * 512 <= after.st_size + 3 * 4096, (after.st_size, after.st_blocks)

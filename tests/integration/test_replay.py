"""Re-recordings (vkapi/replay.py): a command buffer recorded again with the same commands reuses
what its previous recording made, in the layer and in the driver, and the merged trace is the same
as when every recording is applied (TESSERA_REPLAY=0).

Programs: the frame loops of bench/record_cost.c (a compute frame: bind and 8 dispatches; a
render-pass frame: labels around 8 dynamic-rendering passes of 4 draws and 2 dispatches), each
re-recording one command buffer per frame, and tests/integration/apps/rerecord.py, whose filled buffer
is replaced halfway (the recording after that must be applied again). Each runs under `tessera run`
three ways: reuse off, on, and `check` (every recording applied and compared with what reuse would
have made); the canonical merged traces (tessera.hostd.ci.runs, as the determinism test compares)
must be equal, and the shims' counts (TESSERA_LOG=info) say how many recordings were reused.
"""
from __future__ import annotations

import collections
import json
import os
import re

import pytest
from integration_support import PYTHON, REPO, run

from tessera.hostd.ci.runs import canonical, differences, read_run
from tessera.schemas.frames import Frame, MessageType
from tessera.schemas.logfile import read_frames
from tessera.schemas.workloads import TAG, again

TESSERA = REPO / ".venv" / "bin" / "tessera"
RECORD_COST = REPO / "build" / "bench" / "record_cost"
FRAMES = 12
# (id, program, recordings that must be reused: all but the first, and for rerecord.py the first after
# the buffer was replaced)
CASES = [("compute frame", [RECORD_COST, "frame", FRAMES, 1], FRAMES - 1),
         ("compute frame with push descriptors", [RECORD_COST, "frame", FRAMES, 1, 8, "pushed"], FRAMES - 1),
         ("render-pass frame", [RECORD_COST, "passframe", FRAMES, 1], FRAMES - 1),
         ("frame of two-subpass render passes", [RECORD_COST, "passframe", FRAMES, 1, "subpasses"], FRAMES - 1),
         ("replaced buffer", [PYTHON, REPO / "tests" / "integration" / "apps" / "rerecord.py", FRAMES], FRAMES - 2)]
_COUNTS = re.compile(r"\] (layer|icd) INFO: records made in C so far: .*?; recordings reused: (\d+)"
                     r"(?:; checked instead: (\d+), differing: (\d+))?")
_PLANNED = re.compile(r"\] icd INFO: recordings placed from a plan: (\d+)")
# icd/placed_submits.py, layer/reported_submits.py: the command buffers of submits the driver's C placed and the
# layer's C reported at the submit (never read in Python)
_PLACED = re.compile(r"\] icd INFO: submits placed in C: \d+ \(command buffers: (\d+)\)")
_REPORTED = re.compile(r"\] layer INFO: submits reported in C: \d+ \(command buffers: (\d+)\)")
# vkapi/lifecycle.py: buffers begun and ended in C (their hooks run when something looks at them)
_IN_C = re.compile(r"\] (layer|icd) INFO: records made in C so far: .*; command buffers begun in C: (\d+), "
                   r"ended in C: (\d+); command pools reset in C: (\d+)")
# vkapi/lifecycle.py: submits of recordings ended in C reported from the kept product, their hooks not run
_READ = re.compile(r"\] (layer|icd) INFO: records made in C so far: .*; of them submitted and read without their "
                   r"hooks: (\d+) \(their hooks run later: (\d+)\)")


def _descriptions(session) -> collections.Counter:
    """How many times the layer described each tag (its WORKLOADS entries and RECORDED_AGAIN pairs, in the
    session's logs)."""
    described = collections.Counter()
    for log in session.rglob("*.tessera-log"):
        for frame in read_frames(log):
            if frame.type == MessageType.WORKLOADS:
                described.update(e[TAG] for e in json.loads(frame.body)["workloads"])
            elif frame.type == MessageType.RECORDED_AGAIN:
                described.update(tag for tag, _ in again(json.loads(frame.body)))
    return described


def _run(tmp_path, name: str, program: list, replay: str, in_c: str = "1") -> tuple[dict, dict, str]:
    """`in_c` "0": no submit is placed or reported whole in C (TESSERA_C_PLACEMENT, TESSERA_C_REPORTS)."""
    session = tmp_path / name
    env = {**os.environ, "TESSERA_REPLAY": replay, "TESSERA_LOG": "info", "TESSERA_C_PLACEMENT": in_c,
           "TESSERA_C_REPORTS": in_c}
    out = run([TESSERA, "run", "--out", session, "--", *program], env)
    assert out.returncode == 0, out.stdout + out.stderr
    result = read_run(session)
    assert result.problems == []
    counts = {m.group(1): tuple(int(g) for g in m.groups()[1:] if g is not None) for m in _COUNTS.finditer(out.stderr)}
    counts.update({"planned": int(m.group(1)) for m in _PLANNED.finditer(out.stderr)})
    counts.update({"placed in C": int(m.group(1)) for m in _PLACED.finditer(out.stderr)})
    reported = _REPORTED.search(out.stderr)
    counts["reported in C"] = int(reported.group(1)) if reported else None
    counts.update({f"{m.group(1)} in C": tuple(int(g) for g in m.groups()[1:]) for m in _IN_C.finditer(out.stderr)})
    counts.update({f"{m.group(1)} read": tuple(int(g) for g in m.groups()[1:]) for m in _READ.finditer(out.stderr)})
    assert "exception" not in out.stderr.lower(), out.stderr
    described = _descriptions(session)
    assert described and max(described.values()) == 1, "a tag described more than once"
    return canonical(result), counts, out.stdout


@pytest.mark.parametrize("program,reused", [pytest.param(p, n, id=i) for i, p, n in CASES])
def test_reused_recordings_merge_into_the_same_trace(program, reused, shims, tmp_path) -> None:
    off, off_counts, _ = _run(tmp_path, "off", program, "0")
    on, on_counts, said = _run(tmp_path, "on", program, "1")
    in_python, python_counts, _ = _run(tmp_path, "placed in Python", program, "1", in_c="0")
    checked, check_counts, _ = _run(tmp_path, "check", program, "check")
    if "rerecord.py" in str(program[-2]):   # the case the generation guards: the same handle, another buffer
        assert "the new buffer has the old one's handle" in said
    nothing_in_c = {"layer in C": (0, 0, 0), "icd in C": (0, 0, 0), "placed in C": 0, "reported in C": 0}
    # (and the layer reports nothing in C without kept products: no count)
    assert off_counts == {"planned": 0, **nothing_in_c, "reported in C": None}, "TESSERA_REPLAY=0 keeps no recordings"
    # every reused recording is placed from its plan (icd/placement_plans.py), not walked; every begin is
    # made in C, and every end of a recording equal to a kept one (vkapi/lifecycle.py)
    # and every one of them is submitted and reported from its kept product, its hooks never run
    in_c = (FRAMES, reused, 0)
    assert python_counts == {"layer": (reused,), "icd": (reused,), "planned": reused, "layer in C": in_c,
                             "icd in C": in_c, "layer read": (reused, 0), "icd read": (reused, 0), "placed in C": 0,
                             "reported in C": 0}
    # ... and the driver's C places, and the layer's C reports, the submits of most of them itself
    # (icd/placed_submits.py, layer/reported_submits.py: once one was handled in Python and the licence granted;
    # how many depends on when the layer's sender looks for work, which ends a licence, on a loaded machine):
    # only the others reach Python
    placed, reported = on_counts["placed in C"], on_counts["reported in C"]
    assert placed >= reused // 2 and reported >= reused // 2, on_counts
    read, layer_read = reused - placed, reused - reported
    assert on_counts == {"layer": (layer_read,), "icd": (read,), "planned": read, "layer in C": in_c,
                         "icd in C": in_c, "layer read": (layer_read, 0), "icd read": (read, 0), "placed in C": placed,
                         "reported in C": reported}
    assert check_counts == {"layer": (0, reused, 0), "icd": (0, reused, 0), "planned": 0, **nothing_in_c,
                            "layer read": (0, 0), "icd read": (0, 0)}
    assert off["gpu_events"]
    assert on == off, "\n".join(differences(off, on))
    assert in_python == off, "\n".join(differences(off, in_python))
    assert checked == off, "\n".join(differences(off, checked))


def test_a_recording_reported_in_c_whose_kept_product_went_is_described_once(shims, tmp_path) -> None:
    """tests/integration/apps/reported_then_read.py: the layer's C reported a re-recorded buffer's submits; then a
    resource no recording names goes (no kept recording holds any more) and a submit Python reads runs the last
    recording's hooks without its product: its records are applied and left as reported, so its tag is described
    once (`_run`), and the trace is the one made with nothing handled in C."""
    program = [PYTHON, REPO / "tests" / "integration" / "apps" / "reported_then_read.py", FRAMES]
    on, counts, said = _run(tmp_path, "on", program, "1")
    in_python, _, _ = _run(tmp_path, "placed in Python", program, "1", in_c="0")
    assert f"reported_then_read: OK {FRAMES} frames" in said
    assert counts["reported in C"] >= FRAMES - 4, counts
    assert on == in_python, "\n".join(differences(in_python, on))


def test_what_comes_between_a_begin_and_end_made_in_c_and_their_hooks(shims, tmp_path) -> None:
    """tests/integration/apps/lifecycle_paths.py: recordings begun (and ended) in C, with what may happen before
    Python runs their hooks: a recording begun again before anything submitted it, a reset, a secondary executed
    (a Python hook in the middle of a recording), a submit the layer makes in Python (inside a queue label), two
    buffers in one submit, a buffer freed, one submit naming a buffer twice (read once: the same Read for both), a
    pool reset, a buffer submitted again. The merged trace is the one every
    hook run at once makes, and no tag is described twice."""
    program = [PYTHON, REPO / "tests" / "integration" / "apps" / "lifecycle_paths.py", 16]
    off, off_counts, _ = _run(tmp_path, "off", program, "0")
    on, on_counts, said = _run(tmp_path, "on", program, "1")
    in_python, python_counts, _ = _run(tmp_path, "in Python", program, "1", in_c="0")
    checked, _, _ = _run(tmp_path, "check", program, "check")
    assert "lifecycle_paths: OK 16 frames" in said
    assert off_counts["layer in C"] == off_counts["icd in C"] == (0, 0, 0)
    # begun in C: P and Q each frame, the P never submitted and the Q freed, and the secondary's two recordings;
    # ended in C: those but the first P and Q and the first secondary (nothing kept yet) and the P that executes
    # the secondary (its vkCmdExecuteCommands recorded in C: nothing kept equals it); reused: those ended in C but
    # the two nothing submitted, whose hooks never ran. Pools reset in C: the one reset (its buffers' records
    # were all applied or ended in C)
    assert on_counts["layer in C"] == on_counts["icd in C"] == (36, 32, 1), on_counts
    # the driver's C placed, and the layer's C reported, submits of some of them (icd/placed_submits.py,
    # layer/reported_submits.py; a buffer named twice counts twice): those neither reads in Python
    assert on_counts["placed in C"] > 0 and on_counts["reported in C"] > 0, on_counts
    assert on_counts["layer"][0] < 29 and on_counts["icd"][0] < 29, on_counts
    # with neither (TESSERA_C_PLACEMENT=0, TESSERA_C_REPORTS=0): read without their hooks: every reused recording the
    # driver reads, and all but one the layer reads (the submits inside the application's queue label too: the
    # label is in the layer's ledger, the submit wrapped by C, its ANNEX made from the product); their hooks ran
    # later for P reset with vkResetCommandBuffer (both shims)
    assert python_counts["layer"] == python_counts["icd"] == (29,), python_counts
    assert python_counts["layer read"] == (28, 1) and python_counts["icd read"] == (29, 1), python_counts
    assert off["gpu_events"]
    assert on == off, "\n".join(differences(off, on))
    assert in_python == off, "\n".join(differences(off, in_python))
    assert checked == off, "\n".join(differences(off, checked))


@pytest.mark.parametrize("options", [pytest.param([], id="plain"), pytest.param(["labelled"], id="inside a label"),
                                     pytest.param(["prerecorded"], id="one recorded once"),
                                     pytest.param(["threads"], id="recorded on threads at once")])
def test_secondaries_re_recorded_every_frame_merge_into_the_same_trace(options, shims, tmp_path) -> None:
    """tests/integration/apps/secondaries.py: three secondaries re-recorded every frame (transfers with their own
    label; a render pass's draws) and executed by a primary, whose vkCmdExecuteCommands C records
    (runtime/lifecycle.c tessera_execute_in_c): the merged trace is the one every hook run at once makes, with
    recordings reused, read without their hooks, handled in C and checked; `labelled`: one secondary runs inside a
    label the primary opened (its submits take Python: the walk gives that workload its ANNEX); `prerecorded`: one
    is recorded once, before the frames (its records kept after Python applied them: tessera_cb_applied); `threads`:
    the secondaries are recorded on a thread each at once, each from a pool of its own."""
    frames = 8
    labelled, prerecorded = "labelled" in options, "prerecorded" in options
    program = [PYTHON, REPO / "tests" / "integration" / "apps" / "secondaries.py", frames, *options]
    off, off_counts, _ = _run(tmp_path, "off", program, "0")
    on, on_counts, said = _run(tmp_path, "on", program, "1")
    in_python, python_counts, _ = _run(tmp_path, "in Python", program, "1", in_c="0")
    checked, check_counts, _ = _run(tmp_path, "check", program, "check")
    assert f"secondaries: OK {frames} frames" in said
    assert off_counts["layer in C"] == off_counts["icd in C"] == (0, 0, 0)
    # every begin is made in C (4 buffers a frame, 3 with one recorded once, and the one that lays the image out
    # first), and every pool reset; every end from the fifth frame on (the fill values alternate: the first two
    # frames' are new, and the next two frames' primaries were the first to execute secondaries ended in C)
    begun, ended, pool_resets = on_counts["layer in C"]
    per_frame = 3 if prerecorded else 4
    assert on_counts["icd in C"] == on_counts["layer in C"], on_counts
    pools = 4 if "threads" in options else 1
    assert begun == per_frame * frames + 1 + prerecorded and pool_resets == pools * frames, on_counts
    assert ended >= per_frame * (frames - 4), on_counts
    assert check_counts["layer"][2] == check_counts["icd"][2] == 0, check_counts   # none differing
    if not labelled:   # read without their hooks: the primaries and the secondaries they execute
        assert python_counts["layer read"][0] >= per_frame * (frames - 4), python_counts
    assert off["gpu_events"]
    if "threads" in options:   # which thread took which block of tags differs between runs: compared renumbered
        off, on, in_python, checked = (_renumbered(run["gpu_events"]) for run in (off, on, in_python, checked))
    assert on == off, "\n".join(differences(off, on))
    assert in_python == off, "\n".join(differences(off, in_python))
    assert checked == off, "\n".join(differences(off, checked))
    # and each GPU event names the command buffer it was recorded in: A, B (secondaries, placed from a plan too)
    # and the primary (its render pass, D's draws in it)
    buffers = _event_buffers(tmp_path / "off")
    assert len(set(buffers)) == 3 and buffers == _event_buffers(tmp_path / "on") == _event_buffers(tmp_path / "in Python")


def _renumbered(events: list[dict]) -> dict:
    """Canonical GPU events with each tag (in `tag`, and as a t<tag> label in `Labels` and `Label stack`) replaced
    by the order it first appears in."""
    order: dict[str, str] = {}

    def number(tag: str) -> str:
        return order.setdefault(tag, str(len(order)))
    out = []
    for event in events:
        args = dict(event["args"])
        for name in ("Labels", "Label stack"):
            if name in args:
                args[name] = re.sub(r"\bt(\d+)\b", lambda m: "t" + number(m.group(1)), args[name])
        if "tag" in args:
            args["tag"] = number(args["tag"])
        out.append({**event, "args": args})
    return {"gpu_events": out}


def _event_buffers(session) -> list[int]:
    """The command buffer each GPU event of the session's merged trace names, as the order it first appears in."""
    from tessera.schemas.perfetto import read_packets
    seen: dict[int, int] = {}
    return [seen.setdefault(p.gpu_render_stage_event.command_buffer_handle, len(seen))
            for p in read_packets(session / "merged.perfetto-trace") if p.HasField("gpu_render_stage_event")]


def test_a_loop_that_resets_and_re_records_without_submitting_runs_no_python(shims, tmp_path) -> None:
    """bench/record_cost.c's threads mode, one thread (which of two threads' equal first recordings is kept
    first is a matter of timing), 3 times: its buffer re-recorded 50 times (reset pool, begin, bind, 8
    dispatches, end), never submitted. Every pool reset and begin is made in C, and every end but the first
    (nothing kept yet); the hooks of the recordings nothing submitted never run."""
    _, counts, _ = _run(tmp_path, "threads", [RECORD_COST, "threads", 50, 3, 1], "1")
    assert counts["layer in C"] == counts["icd in C"] == (150, 149, 150), counts
    assert counts["layer"] == counts["icd"] == (0,), counts   # nothing restored: nothing looked at them


_TIMES = re.compile(rb'"(time_ns|duration_ns)":\d+')
_HEX = re.compile(rb'"0x[0-9a-f]+"')


def _as_workloads(body: bytes, full: dict[tuple, bytes]) -> bytes:
    """A RECORDED_AGAIN frame's JSON as the WORKLOADS frame it stands for: the earlier frame whose tags it pairs
    with its own, in order (`full`: each WORKLOADS frame's JSON by its tags), with its own tags."""
    pairs = again(json.loads(body))
    text = full[tuple(earlier for _, earlier in pairs)]
    for tag, earlier in pairs:
        text = text.replace(b'{"%s":%d,' % (TAG.encode(), earlier), b'{"%s":%d,' % (TAG.encode(), tag), 1)
    return text


def _handle_came_back(said: str) -> bool | None:
    """tests/integration/apps/rerecord.py: whether its new buffer got the old one's handle (the frames name the
    buffers by the order their handles first appear in, so runs compare only when alike); None for other programs."""
    if "rerecord: the new buffer has" not in said:
        return None
    return "the new buffer has the old one's handle" in said


def _frames(session) -> list[tuple[int, int | None, int, bytes]]:
    """The layer's frames after its HELLO and DEVICE, as (type, sequence, tag, JSON) with host times and handles
    (which differ between runs) replaced: each handle by the order it first appears in; a RECORDED_AGAIN as the
    WORKLOADS frame it stands for (`_as_workloads`)."""
    handles: dict[bytes, bytes] = {}
    full: dict[tuple, bytes] = {}
    out = []
    for log in session.rglob("*.tessera-log"):
        for frame in read_frames(log):
            if frame.type in (MessageType.HELLO, MessageType.DEVICE):
                continue
            if frame.type == MessageType.WORKLOADS:
                full[tuple(e[TAG] for e in json.loads(frame.body)["workloads"])] = frame.body
            elif frame.type == MessageType.RECORDED_AGAIN:
                frame = Frame(MessageType.WORKLOADS, None, frame.tag, _as_workloads(frame.body, full), frame.offset,
                              frame.size)
            body = _TIMES.sub(rb'"\1":0', frame.body)
            body = _HEX.sub(lambda m: handles.setdefault(m.group(0), b'"h%d"' % len(handles)), body)
            out.append((frame.type, getattr(frame, "sequence", None), frame.tag, body))
    return out


@pytest.mark.parametrize("program", [pytest.param(p, id=i) for i, p, _ in CASES]
                         + [pytest.param([RECORD_COST, "buffers", FRAMES, 1, 40], id="40 buffers"),
                            pytest.param([RECORD_COST, "buffers", FRAMES, 1, 4, "linked"], id="4 batches"),
                            pytest.param([RECORD_COST, "buffers", FRAMES, 1, 4, "secondaries"], id="4 secondaries"),
                            pytest.param([RECORD_COST, "buffers", FRAMES, 1, 4, "prerecorded"],
                                         id="4 secondaries recorded once"),
                            # (more frames: C reports from the fifth frame's recordings on, once a licence holds)
                            pytest.param([PYTHON, REPO / "tests" / "integration" / "apps" / "secondaries.py",
                                          3 * FRAMES], id="secondaries with labels and draws")])
def test_frames_reported_in_c_are_the_frames_python_sends(program, shims, tmp_path) -> None:
    """layer/reported_submits.py: the WORKLOADS and SUBMIT frames the layer's C writes at the submit are, byte for
    byte but for host times and handles, the frames its Python sends with it off (TESSERA_C_REPORTS=0), in the
    same order, and C wrote most of them; C's RECORDED_AGAIN frames are, as the WORKLOADS they stand for."""
    _, counts, said = _run(tmp_path, "in C", program, "1")
    for attempt in range(3):   # rerecord.py: lavapipe handed the freed handle out again in both runs, or in neither
        _, python_counts, python_said = _run(tmp_path, f"in Python {attempt}" if attempt else "in Python", program,
                                             "1", in_c="0")
        if _handle_came_back(python_said) == _handle_came_back(said):
            break
    assert _handle_came_back(python_said) == _handle_came_back(said), (said, python_said)
    assert counts["reported in C"] >= FRAMES // 2 and python_counts["reported in C"] == 0, counts
    # C describes a recording equal to one it described in full as those workloads again (schemas/workloads.py)
    again_frames = [f for log in (tmp_path / "in C").rglob("*.tessera-log") for f in read_frames(log)
                    if f.type == MessageType.RECORDED_AGAIN]
    # (but where what is re-recorded holds no workload of its own: a primary executing secondaries recorded once)
    assert again_frames or "prerecorded" in program, counts
    in_c, in_python = _frames(tmp_path / "in C"), _frames(tmp_path / (f"in Python {attempt}" if attempt else "in Python"))
    frames = next(a for a in program[1:] if type(a) is int)   # and secondaries.py lays its image out first
    assert [f[0] for f in in_c].count(MessageType.SUBMIT) == frames + ("secondaries.py" in str(program[1]))
    first = next((i for i, (a, b) in enumerate(zip(in_c, in_python)) if a != b), None)
    assert in_c == in_python, (len(in_c), len(in_python), first, first is not None and (in_c[first], in_python[first]))


def test_vkcube_frames_reported_in_c_are_the_frames_python_sends(shims, tmp_path, xvfb_display) -> None:
    """vkcube: pre-recorded buffers submitted again, each submit wrapped in s<submitID>; the layer's C reports
    them from the tags attached to each recording (layer/reported_submits.py `attach_recordings`), and the
    frames are, but host times and handles, those Python sends with it off."""
    runs = {}
    for name, in_c in (("in C", "1"), ("in Python", "0")):
        env = {**os.environ, "TESSERA_LOG": "info", "TESSERA_C_PLACEMENT": in_c, "TESSERA_C_REPORTS": in_c,
               "DISPLAY": xvfb_display}
        out = run([TESSERA, "run", "--out", tmp_path / name, "--", "vkcube", "--c", FRAMES], env)
        assert out.returncode == 0, out.stdout + out.stderr
        reported = _REPORTED.search(out.stderr)
        runs[name] = (_frames(tmp_path / name), int(reported.group(1)) if reported else None)
    (in_c, reported), (in_python, none) = runs["in C"], runs["in Python"]
    assert reported >= FRAMES // 2 and none == 0, (reported, none)
    first = next((i for i, (a, b) in enumerate(zip(in_c, in_python)) if a != b), None)
    assert in_c == in_python, (len(in_c), len(in_python), first, first is not None and (in_c[first], in_python[first]))


def test_submits_inside_the_applications_queue_labels_are_reported_as_python_reports_them(shims, tmp_path) -> None:
    """record_cost's render-pass frame loop with each submit inside two queue labels of the application's: the
    layer's C keeps the labels under its licence and reports each submit inside them itself, wrapped in
    s<submitID>, with an ANNEX frame per workload (its label stack at the submit: the queue's labels, then its
    own, from the product's report template); outside the licence the C path records the labels in the ledger
    in order with the submits, and the layer reads such a submit from the kept product, the same ANNEX made in
    Python. Its frames are, but host times and handles, those of the Python path (TESSERA_C_SUBMITS=0: the labels'
    and the submit's hooks), and so is the merged trace."""
    program = [RECORD_COST, "passframe", FRAMES, 1, "labelled"]
    runs = {}
    for name, c_submits in (("in C", "1"), ("in Python", "0")):
        env = {**os.environ, "TESSERA_LOG": "info", "TESSERA_C_SUBMITS": c_submits}
        out = run([TESSERA, "run", "--out", tmp_path / name, "--", *program], env)
        assert out.returncode == 0, out.stdout + out.stderr
        result = read_run(tmp_path / name)
        assert result.problems == []
        runs[name] = (_frames(tmp_path / name), canonical(result), out.stderr)
    (in_c, merged_c, said), (in_python, merged_python, _) = runs["in C"], runs["in Python"]
    reported = _REPORTED.search(said)
    assert reported and int(reported.group(1)) >= FRAMES // 2, said
    annexes = [f for f in in_c if f[0] == MessageType.ANNEX]   # 10 workloads a frame: 8 passes, 2 dispatches
    assert len(annexes) == 10 * FRAMES and annexes[-3][3] == b'{"labels":["frame","submit","frame","ui"]}'
    first = next((i for i, (a, b) in enumerate(zip(in_c, in_python)) if a != b), None)
    assert in_c == in_python, (len(in_c), len(in_python), first, first is not None and (in_c[first], in_python[first]))
    assert merged_c == merged_python, "\n".join(differences(merged_python, merged_c))

"""Placement on the emulated hardware queues (icd/scheduler.py, icd/timeline.py), by hand.

The Timeline tests feed shadow recordings straight to `Timeline.submit` with
the host clock pinned to T, and read the written gpu.perfetto-trace back.
Durations (a Mali-G720-class profile with 8 cores, 1 cycle = 1 ns, see test_timing.py for the model):
  pass P (16x16, one 8-vertex draw, nothing loaded or stored):
    binning 2000 + 8*20/8 + 8*64/32 = 2036; main 2000 + 64*10/8 + 1*64/8 = 2088
  dispatch of 800 invocations: 2000 + 800*50/8 = 7000
  transfer of 3200 bytes: 2000 + 6400/32 = 2200
"""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from tessera.icd import timeline as tl
from tessera.icd.profiles import PROFILES
from tessera.icd.recording import Draw, Work
from tessera.icd.scheduler import EmulatedGpu, QueueOrder
from tessera.icd.timeline import Timeline, batch
from tessera.icd.timing import Phase
from tessera.schemas import perfetto as pf
from tessera.vkapi.ops import FULL_BARRIER, LABEL_END, PASS_END, PASS_SUSPEND, LabelBegin, PassBegin
from tessera.vkapi.render_passes import PassInfo

T = 5_000_000_000
G720 = replace(PROFILES["mali-g720"], shader_cores=8)   # the hand computations above use 8 cores
BIN, MAIN, DISPATCH, COPY = 2036, 2088, 7000, 2200


# ---- EmulatedGpu and QueueOrder ------------------------------------------------------------
def test_a_queue_runs_one_phase_at_a_time():
    gpu = EmulatedGpu()
    assert gpu.place(Phase("compute", "non-fragment", 100), 1000) == 1000
    assert gpu.place(Phase("compute", "non-fragment", 50), 0) == 1100        # waits for the queue
    assert gpu.place(Phase("binning", "non-fragment", 10), 5000) == 5000     # idle gap allowed
    assert gpu.free_at == {"non-fragment": 5010, "fragment": 0, "transfer": 0}


def test_queues_are_independent():
    gpu = EmulatedGpu()
    gpu.place(Phase("compute", "non-fragment", 100), 0)
    assert gpu.place(Phase("copy buffer", "transfer", 30), 0) == 0
    assert gpu.place(Phase("main", "fragment", 30), 0) == 0


def test_full_barrier_floor_is_the_end_of_everything_before_it():
    order = QueueOrder()
    order.placed("compute", 500)
    order.placed("transfer", 300)
    assert order.floor("compute") == 0
    order.barrier()
    assert all(order.floor(c) == 500 for c in ("vertex", "fragment", "compute", "transfer"))
    order.placed("fragment", 900)
    assert order.floor("vertex") == 500        # until the next barrier
    order.barrier()
    assert order.floor("vertex") == 900


def test_barrier_is_scoped_by_its_stages():
    """src: the classes waited for; dst: the classes that wait (spec 7.6)."""
    order = QueueOrder()
    order.placed("fragment", 700)
    order.placed("transfer", 400)
    order.barrier(frozenset({"transfer"}), frozenset({"compute"}))
    assert (order.floor("compute"), order.floor("vertex"), order.floor("fragment")) == (400, 0, 0)
    order.barrier(frozenset({"fragment"}), frozenset({"fragment"}))   # e.g. color output -> fragment shader
    assert (order.floor("fragment"), order.floor("vertex")) == (700, 0)  # binning of the next pass runs on
    order.barrier(frozenset(), frozenset({"vertex"}))                  # source covers no work: no wait
    assert order.floor("vertex") == 0


def test_stage_masks_map_to_work_classes():
    from tessera.icd.recording import stage_classes
    from tessera.vkapi.vkconst import vk

    assert stage_classes(vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, "src") == {"fragment"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_VERTEX_SHADER_BIT | vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         "dst") == {"vertex", "compute"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, "src") == set()
    assert stage_classes(vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, "src") == {"vertex", "fragment", "compute",
                                                                              "transfer"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, "dst") == set()
    assert stage_classes(vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, "dst") == {"vertex", "fragment", "compute",
                                                                            "transfer"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_2_COPY_BIT, "src") == {"transfer"}


# ---- Timeline: recordings in, trace out ------------------------------------------------------------
def pass_info(**kw) -> PassInfo:
    return PassInfo(command="vkCmdBeginRendering", handle=0, width=16, height=16, layers=1, subpasses=1,
                    attachments=[], load_bytes=0, store_bytes=0, dynamic=True, **kw)


DRAW = Draw(8, 2, False, None, None)


def render_pass(tag: str, **kw) -> list:
    info = pass_info(**kw)
    return [LabelBegin(tag), PassBegin(info, info.resuming), DRAW, PASS_END, LABEL_END]


def dispatch(tag: str, invocations: int = 800) -> list:
    return [LabelBegin(tag), Work("dispatch", "compute", "vkCmdDispatch", {}, invocations=invocations),
            LABEL_END]


def copy(tag: str, nbytes: int = 3200) -> list:
    return [LabelBegin(tag), Work("transfer", "copy buffer", "vkCmdCopyBuffer", {}, nbytes=nbytes),
            LABEL_END]


def cb(ops: list, address: int = 0x1000) -> SimpleNamespace:
    return SimpleNamespace(ops=ops, address=address)


@pytest.fixture
def emu(tmp_path, monkeypatch):
    monkeypatch.setattr(tl, "boottime_ns", lambda: T)
    timeline = Timeline(G720, tmp_path)
    device = SimpleNamespace(physical=object())
    queues = [SimpleNamespace(device=device, labels=[]) for _ in range(2)]

    def events():
        timeline.settle(block=True)   # everything handed to the worker is in the trace
        packets = list(pf.read_packets(tmp_path / "gpu.perfetto-trace"))
        check = pf.check_render_stages(packets)
        assert check.problems == []
        specs = {iid: name for (_, iid), name in check.specs.items()}
        out = {}
        for p in packets:
            if p.HasField("gpu_render_stage_event"):
                e = p.gpu_render_stage_event
                key = (pf.extra(e, "Labels"), specs[e.stage_iid])
                assert key not in out
                out[key] = (p.timestamp - T, p.timestamp - T + e.duration, specs[e.hw_queue_iid],
                            pf.extra(e, "Label stack"), {d.name: d.value for d in e.extra_data})
        return out

    return SimpleNamespace(timeline=timeline, queues=queues, events=events)


def spans(events) -> dict:
    return {k: v[:2] for k, v in events.items()}


def test_binning_of_the_next_pass_overlaps_main_without_barrier(emu):
    emu.timeline.submit(emu.queues[0], [batch([cb(render_pass("t1") + render_pass("t2"))], [], [])])
    assert spans(emu.events()) == {
        ("t1", "binning"): (0, BIN),
        ("t1", "main"): (BIN, BIN + MAIN),                      # after its own binning
        ("t2", "binning"): (BIN, 2 * BIN),                      # overlaps main of t1
        ("t2", "main"): (BIN + MAIN, BIN + 2 * MAIN),           # fragment queue busy until t1's main ends
    }


def test_barrier_serializes_the_next_pass(emu):
    ops = render_pass("t1") + [FULL_BARRIER] + render_pass("t2")
    emu.timeline.submit(emu.queues[0], [batch([cb(ops)], [], [])])
    got = spans(emu.events())
    assert got[("t2", "binning")] == (BIN + MAIN, 2 * BIN + MAIN)
    assert got[("t2", "main")] == (2 * BIN + MAIN, 2 * BIN + 2 * MAIN)


def test_compute_shares_the_non_fragment_queue_and_transfers_run_alongside(emu):
    ops = render_pass("t1") + dispatch("t2") + copy("t3")
    emu.timeline.submit(emu.queues[0], [batch([cb(ops)], [], [])])
    got = emu.events()
    assert got[("t2", "compute")][:3] == (BIN, BIN + DISPATCH, "non-fragment")
    assert got[("t3", "copy buffer")][:3] == (0, COPY, "transfer")


def test_semaphore_wait_starts_after_the_signal(emu):
    emu.timeline.submit(emu.queues[0], [batch([cb(dispatch("t1"))], [], [(77, 0)])])
    emu.timeline.submit(emu.queues[1], [batch([cb(copy("t2"))], [(77, 0)], [])])
    emu.timeline.submit(emu.queues[1], [batch([cb(copy("t3"))], [], [])])
    got = spans(emu.events())
    assert got[("t1", "compute")] == (0, DISPATCH)
    assert got[("t2", "copy buffer")] == (DISPATCH, DISPATCH + COPY)
    assert got[("t3", "copy buffer")] == (DISPATCH + COPY, DISPATCH + 2 * COPY)   # transfer queue busy


def test_a_timeline_semaphore_wait_waits_for_the_signal_that_reaches_its_value(emu):
    """A binary semaphore's wait follows its last signal; a timeline semaphore's, the first signal placed that
    reaches the value waited for (not a later one with a higher value; its initial value reached before anything
    ran), and nothing when none has yet (a host signal, or one submitted later)."""
    tl_, (q0, q1) = emu.timeline, emu.queues
    tl_.timeline_semaphore(88, initial_value=1)
    tl_.submit(q0, [batch([cb(dispatch("t1"))], [], [(88, 2)])])                   # 0 .. DISPATCH
    tl_.submit(q0, [batch([cb(dispatch("t2", invocations=1600))], [], [(88, 3)])])  # after it, on the same pipe
    tl_.submit(q1, [batch([cb(copy("t0"))], [(88, 1)], [])])                       # value 1: the initial value
    tl_.submit(q1, [batch([cb(copy("t3"))], [(88, 2)], [])])                       # value 2: t1's end
    tl_.submit(q1, [batch([cb(copy("t4"))], [(88, 3)], [])])                       # value 3: t2's end
    tl_.submit(q1, [batch([cb(copy("t5"))], [(88, 4)], [])])                       # value 4: not signalled yet
    got = spans(emu.events())
    t2_end = got[("t2", "compute")][1]
    assert got[("t1", "compute")] == (0, DISPATCH) and t2_end > DISPATCH + COPY
    assert got[("t0", "copy buffer")] == (0, COPY)
    assert got[("t3", "copy buffer")] == (DISPATCH, DISPATCH + COPY)
    assert got[("t4", "copy buffer")] == (t2_end, t2_end + COPY)
    assert got[("t5", "copy buffer")] == (t2_end + COPY, t2_end + 2 * COPY)   # only the transfer queue delays it


def test_a_timeline_semaphore_keeps_its_last_signals_only(emu):
    """Bounded: a semaphore signalled every frame of a long run keeps SIGNALS_KEPT signals; a wait for a value
    older than those follows the oldest kept (later than the real one: never earlier)."""
    tl_, q = emu.timeline, emu.queues[0]
    tl_.timeline_semaphore(66)
    for value in range(1, 3 * tl.SIGNALS_KEPT + 1):
        tl_.submit(q, [batch([cb(copy(f"t{value}"))], [], [(66, value)])])
    got = spans(emu.events())
    kept = tl_._timelines[66]
    assert len(kept) == tl.SIGNALS_KEPT and kept[0][0] == 2 * tl.SIGNALS_KEPT + 1
    assert tl_._signalled_at(66, 1) - T == got[(f"t{2 * tl.SIGNALS_KEPT + 1}", "copy buffer")][1]


def test_a_destroyed_timeline_semaphores_handle_may_name_a_binary_one(emu):
    tl_, (q0, q1) = emu.timeline, emu.queues
    tl_.timeline_semaphore(99)
    tl_.forget_semaphore(99)
    tl_.submit(q0, [batch([cb(dispatch("t1"))], [], [(99, 5)])])   # binary now: values are ignored
    tl_.submit(q0, [batch([cb(dispatch("t2", invocations=1600))], [], [(99, 6)])])
    tl_.submit(q1, [batch([cb(copy("t3"))], [(99, 0)], [])])        # its last signal, not the first reaching 0
    got = spans(emu.events())
    t2_end = got[("t2", "compute")][1]
    assert got[("t3", "copy buffer")] == (t2_end, t2_end + COPY)


def test_nothing_starts_before_the_host_time_of_its_submit(emu, monkeypatch):
    emu.timeline.submit(emu.queues[0], [batch([cb(copy("t1"))], [], [])])
    monkeypatch.setattr(tl, "boottime_ns", lambda: T + 1_000_000)
    emu.timeline.submit(emu.queues[0], [batch([cb(copy("t2"))], [], [])])
    got = spans(emu.events())
    assert got[("t1", "copy buffer")] == (0, COPY)
    assert got[("t2", "copy buffer")] == (1_000_000, 1_000_000 + COPY)


def test_label_stack_belongs_to_the_queue(emu):
    q = emu.queues[0]
    q.labels.append("s4")
    first = cb([LabelBegin("outer")] + dispatch("t1"), 0x10)
    second = cb(copy("t2") + [LABEL_END, LABEL_END, LABEL_END] + copy("t3"), 0x20)   # extra pops tolerated
    emu.timeline.submit(q, [batch([first, second], [], [])])
    got = emu.events()
    assert got[("t1", "compute")][3] == "s4 / outer / t1"
    assert got[("t2", "copy buffer")][3] == "s4 / outer / t2"
    assert got[("t3", "copy buffer")][3] == "t3"
    assert q.labels == []


def test_pass_suspended_and_resumed_across_command_buffers_is_one_pass(emu):
    x = cb([LabelBegin("t9"), PassBegin(pass_info(suspending=True)), DRAW, PASS_SUSPEND], 0x10)
    y = cb([PassBegin(pass_info(resuming=True), True), DRAW, DRAW, PASS_END, LABEL_END], 0x20)
    emu.timeline.submit(emu.queues[0], [batch([x, y], [], [])])
    got = emu.events()
    assert sorted(got) == [("t9", "binning"), ("t9", "main")]
    # 3 draws of 8 vertices: binning 2000 + 24*20/8 + 24*64/32 = 2108; main 2000 + 192*10/8 + 8 = 2248
    assert got[("t9", "binning")][:2] == (0, 2108)
    assert got[("t9", "main")][:2] == (2108, 2108 + 2248)
    assert got[("t9", "main")][4]["Draws"] == "3" and got[("t9", "main")][4]["Parts"] == "2"


def test_same_submits_same_trace_durations(tmp_path, monkeypatch):
    monkeypatch.setattr(tl, "boottime_ns", lambda: T)
    runs = []
    for i in range(2):
        timeline = Timeline(G720, tmp_path / str(i))
        q = SimpleNamespace(device=SimpleNamespace(physical=object()), labels=[])
        timeline.submit(q, [batch([cb(render_pass("t1") + dispatch("t2") + copy("t3"))], [], [])])
        timeline.settle(block=True)
        runs.append([(p.timestamp, p.gpu_render_stage_event.duration)
                     for p in pf.read_packets(tmp_path / str(i) / "gpu.perfetto-trace")
                     if p.HasField("gpu_render_stage_event")])
    assert runs[0] == runs[1] and len(runs[0]) == 4


def test_queue_labels_apply_in_call_order_with_submits(emu):
    q = emu.queues[0]
    emu.timeline.queue_label(q, "frame 1")
    emu.timeline.submit(q, [batch([cb(dispatch("t1"))], [], [])])
    emu.timeline.queue_label(q, None)
    emu.timeline.submit(q, [batch([cb(copy("t2"))], [], [])])
    got = emu.events()
    assert got[("t1", "compute")][3] == "frame 1 / t1"
    assert got[("t2", "copy buffer")][3] == "t2"


def test_a_submit_made_in_c_inside_its_own_queue_label_is_placed_as_the_three_calls(emu):
    """icd/submit.py reads a queue label's begin, a submit and the label's end from the ledger as one SubmitMade
    with `label` (the layer's s<submitID> around a buffer submitted again): the same events as the three jobs,
    and the label closed after it."""
    q = emu.queues[0]
    made = [[tl.LabelMade(q, "s1"), tl.SubmitMade(q, [batch([cb(dispatch("t1"))], [], [])], T), tl.LabelMade(q, None)],
            [tl.SubmitMade(q, [batch([cb(dispatch("t2"))], [], [])], T, "s2")],
            [tl.SubmitMade(q, [batch([cb(copy("t3"))], [], [])], T)]]
    emu.timeline.take_submits_from(lambda: made.pop(0) if made else [])
    for _ in range(3):
        emu.timeline.pull()
    got = emu.events()
    assert got[("t1", "compute")][3] == "s1 / t1" and got[("t2", "compute")][3] == "s2 / t2"
    assert got[("t1", "compute")][1] == got[("t2", "compute")][0]   # one after the other on the queue
    assert got[("t3", "copy buffer")][3] == "t3" and q.labels == []


def test_the_ledger_reader_folds_a_label_only_around_one_submit_on_its_queue():
    from tessera.icd.submit import _wrapped_submit
    from tessera.vkapi.submits import QueueLabel, Submission

    def submit(queue: int) -> Submission:
        return Submission(queue, 0, 0, T, 1, 0, True, [([0x10], [], [])])

    begin, end = QueueLabel(0xA, "s1"), QueueLabel(0xA, None)
    assert _wrapped_submit([begin, submit(0xA), end], 1, 0xA)
    assert not _wrapped_submit([begin, submit(0xB), QueueLabel(0xB, None)], 1, 0xA)   # another queue's submit
    assert not _wrapped_submit([begin, submit(0xA), QueueLabel(0xB, None)], 1, 0xA)   # another queue's end
    assert not _wrapped_submit([begin, submit(0xA), QueueLabel(0xA, "inner")], 1, 0xA)   # a begin, not an end
    assert not _wrapped_submit([begin, QueueLabel(0xA, "x"), end], 1, 0xA)   # no submit between
    assert not _wrapped_submit([begin, submit(0xA)], 1, 0xA)                  # the end not read yet


def test_placing_before_a_wait_stops_at_gpu_work_still_running_and_never_waits(emu, tmp_path, monkeypatch):
    """icd/submit.py places what it can before the backend's fence, semaphore and idle waits (`place_ready`):
    the submits handed over before one that waits for its completion fence, not that one nor those after it,
    and returns without waiting for the GPU (no worker here: the calling thread does it all or nothing)."""
    class Running:   # a completion fence the GPU has not signalled yet
        def signaled(self, fence) -> bool:
            return False

    timeline, q = emu.timeline, emu.queues[0]
    monkeypatch.setattr(timeline, "start", lambda: None)   # no worker: only the calling thread places
    timeline.submit(q, [batch([cb(dispatch("t1"))], [], [])])
    timeline.submit(q, [batch([cb(copy("t2"))], [], [])], completion=(Running(), 1))
    timeline.submit(q, [batch([cb(dispatch("t3"))], [], [])])
    timeline.place_ready()
    placed = [pf.extra(p.gpu_render_stage_event, "Labels") for p in pf.read_packets(tmp_path / "gpu.perfetto-trace")
              if p.HasField("gpu_render_stage_event")]
    assert placed == ["t1"]


def test_work_known_only_after_execution_is_timed_with_what_completion_gives(emu):
    work = Work("dispatch", "compute", "vkCmdDispatchIndirect", {}, invocations=64 * 64, estimated=True)

    def read_sizes():   # what the driver reads once the GPU ran the dispatch: 800 invocations
        work.invocations, work.estimated = 800, False

    work.at_completion = read_sizes
    emu.timeline.submit(emu.queues[0], [batch([cb([LabelBegin("t1"), work, LABEL_END])], [], [])])
    got = emu.events()
    assert got[("t1", "compute")][:2] == (0, DISPATCH)   # as the direct dispatch of 800 invocations
    assert "Estimated" not in got[("t1", "compute")][4]


def test_a_reset_after_submit_leaves_the_submitted_recording_intact(emu):
    from tessera.icd.objects import CommandBuffer
    buffer = CommandBuffer(handle=None, device=None, pool=0, level=0, address=0x30)
    buffer.ops.extend(dispatch("t1"))
    submitted = batch([buffer], [], [])
    buffer.reset()   # the application may re-record once the GPU is done; the worker may not be
    buffer.ops.extend(copy("t9"))
    emu.timeline.submit(emu.queues[0], [submitted])
    assert set(emu.events()) == {("t1", "compute")}

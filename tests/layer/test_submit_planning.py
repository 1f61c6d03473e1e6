"""The layer's submit planning (layer/queues.py) on hand-built trackers: no Vulkan, no shim.

Each case states what the layer must report for a submit (tags in GPU order, ANNEX fields,
captures, reuse) and, for the buffers the C submit path may report (`reported_from_c`), that
planning them needs nothing of the queue's state and changes none of it.
"""
from __future__ import annotations

from tessera.layer.queues import plan_submit, reported_from_c
from tessera.layer.trackers import Capture, CommandBufferTracker, PassPart, QueueTracker, Workload
from tessera.vkapi.ops import LABEL_END, PASS_END, PASS_SUSPEND, Execute, LabelBegin, PassBegin


def buffer(address: int, *ops, level: int = 0) -> CommandBufferTracker:
    return CommandBufferTracker(handle=None, address=address, level=level, pool=1, ops=list(ops))


def work(tag: int, labels: tuple[str, ...] = (), pops: int = 0, capture: Capture | None = None):
    return Workload(tag, labels, pops, capture)


def part(p: PassPart) -> list:
    """A render pass part as the layer records it when the part ends (render_passes.py)."""
    return [PassBegin(p, p.resumes), PASS_SUSPEND if p.suspends else PASS_END]


def queue() -> QueueTracker:
    return QueueTracker(handle=None, name="queue 0.0")


def test_a_plain_buffer_plans_to_its_tags_and_is_reused_the_second_time():
    q, cb = queue(), buffer(0x10, work(1), work(2))
    assert reported_from_c(cb)
    first = plan_submit(1, q, [[cb]])
    second = plan_submit(2, q, [[cb]])
    assert (first.tags, first.annexes, first.captures, first.wrap) == ([1, 2], {}, [], False)
    assert (second.tags, second.reused, second.wrap) == ([1, 2], True, True)
    assert q.labels == [] and q.open_pass is None


def test_queue_labels_give_plain_workloads_an_annex():
    q, cb = queue(), buffer(0x10, work(1))
    q.labels.append("frame 1")
    plan = plan_submit(1, q, [[cb]])
    assert plan.annexes == {1: {"labels": ["frame 1"]}} and plan.wrap


def test_a_label_opened_in_one_buffer_and_closed_in_the_next():
    q = queue()
    first = buffer(0x10, LabelBegin("outer"), work(1, labels=("outer",)))
    second = buffer(0x20, work(2), LABEL_END, work(3))
    assert not reported_from_c(first) and not reported_from_c(second)
    plan = plan_submit(1, q, [[first, second]])
    assert plan.tags == [1, 2, 3]
    assert plan.annexes == {2: {"labels": ["outer"]}}   # t1's own labels were right; t3 runs outside any
    assert q.labels == []


def test_a_render_pass_split_across_submits_is_one_pass_with_every_draw():
    q = queue()
    begin = buffer(0x10, *part(PassPart(Workload(5, (), 0), draws=2, suspends=True)))
    end = buffer(0x20, *part(PassPart(None, draws=3, resumes=True)))
    assert not reported_from_c(begin) and not reported_from_c(end)
    first = plan_submit(1, q, [[begin]])
    assert first.tags == [5] and first.annexes == {} and q.open_pass is not None
    second = plan_submit(2, q, [[end]])
    assert second.annexes == {5: {"draw_call_count": 5, "parts": 2}} and q.open_pass is None


def test_an_indirect_capture_runs_before_its_workload_and_is_read_after():
    q = queue()
    capture = Capture(offset=0, size=12, kind="dispatch", count=1, tag=7)
    cb = buffer(0x10, work(8, capture=capture))
    assert not reported_from_c(cb)
    plan = plan_submit(1, q, [[cb]])
    assert plan.tags == [7, 8] and plan.captures == [(8, capture)] and plan.wrap


def test_secondaries_run_in_place_and_plan_to_their_tags_alone_outside_the_primarys_labels():
    secondary = buffer(0x30, work(2), level=1)
    primary = buffer(0x10, work(1), Execute([secondary]), work(3))
    assert reported_from_c(primary)
    walked = plan_submit(1, queue(), [[primary]])
    assert walked.tags == [1, 2, 3] and [t.address for t in walked.trackers] == [0x10, 0x30]
    primary.plain_tags = None
    plain = plan_submit(2, queue(), [[primary]])   # _plain_plan: the same tags and trackers, not walked
    assert (plain.tags, plain.trackers, plain.annexes) == ([1, 2, 3], walked.trackers, {})
    # inside a label the primary opened, the secondary's workload gets an ANNEX (its stack there): the walk's
    labelled = buffer(0x20, LabelBegin("frame"), Execute([secondary]), LABEL_END)
    assert not reported_from_c(labelled)
    assert plan_submit(3, queue(), [[labelled]]).annexes == {2: {"labels": ["frame"]}}
    # a secondary whose labels do not balance keeps the primary off the C path too
    unbalanced = buffer(0x40, LabelBegin("left open"), work(4, labels=("left open",)), level=1)
    assert not reported_from_c(buffer(0x50, Execute([unbalanced])))


def test_what_the_c_path_reports_never_needs_the_queues_state():
    """For every buffer reported_from_c accepts, with no queue label and no open pass, planning
    gives no ANNEX and no capture and leaves the queue as it was: what the C path assumes."""
    plain = [buffer(0x10, work(1)),
             buffer(0x20, work(2), work(3)),
             buffer(0x30, *part(PassPart(Workload(4, (), 0), draws=6)), work(5)),
             buffer(0x40),
             buffer(0x50, work(6), Execute([buffer(0x60, work(7), level=1), buffer(0x70, level=1)]), work(8))]
    for cb in plain:
        assert reported_from_c(cb)
        q = queue()
        plan = plan_submit(1, q, [[cb]])
        assert (plan.annexes, plan.captures, q.labels, q.open_pass) == ({}, [], [], None)


def _planned(plan) -> tuple:
    return (plan.tags, plan.annexes, plan.captures, plan.reused, [t.address for t in plan.trackers],
            [t.address for t in plan.primaries])


def test_plain_buffers_plan_without_the_walk_exactly_as_the_walk_does():
    """A submit of buffers that plan to their tags alone (balanced labels, whole passes, no captures) on a
    queue with no labels takes queues._plain_plan; the same submit walked plans the same, twice over (the
    second time reused). A buffer leaving a label open is walked."""
    def buffers() -> list[CommandBufferTracker]:
        return [buffer(0x10, work(1), LabelBegin("x"), work(2, labels=("x",)),
                       *part(PassPart(Workload(3, ("x",), 0), draws=2)), LABEL_END),
                buffer(0x20, *part(PassPart(Workload(4, (), 0), draws=1)), work(5))]

    plain, walked = buffers(), buffers()
    for t in walked:
        t.plain_tags = False   # what plan_submit keeps for a buffer that is not plain: it walks
    q_plain, q_walked = queue(), queue()
    for submit_id in (1, 2):
        got = plan_submit(submit_id, q_plain, [plain[:1], plain[1:]])
        expected = plan_submit(submit_id, q_walked, [walked[:1], walked[1:]])
        assert _planned(got) == _planned(expected)
    assert [t.plain_tags for t in plain] == [[1, 2, 3], [4, 5]]
    assert _planned(got)[0] == [1, 2, 3, 4, 5] and got.reused
    assert (q_plain.labels, q_plain.open_pass) == ([], None)
    still_open = buffer(0x30, LabelBegin("y"), work(6, labels=("y",)))
    plan_submit(3, q_plain, [[still_open]])
    assert still_open.plain_tags is False and q_plain.labels == ["y"]

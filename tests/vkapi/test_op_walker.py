"""vkapi/ops.py's OpWalker on hand-built recordings: the label stack and the render passes suspended
and resumed, as the layer's submit planning and the driver's timeline both resolve them; no Vulkan.
Each case lists the events a recording must give, in order."""
from __future__ import annotations

from types import SimpleNamespace as NS

from tessera.vkapi.ops import (FULL_BARRIER, LABEL_END, PASS_END, PASS_SUSPEND, Execute, LabelBegin, LabelInsert,
                               OpWalker, PassBegin, Recording)


class Events(OpWalker):
    """Writes down each resolved event: a pass is a list of the names of what it was opened and resumed by."""

    def __init__(self, labels=None, suspended=None) -> None:
        super().__init__(labels if labels is not None else [], suspended)
        self.events: list = []

    def entered(self, recording) -> None:
        self.events.append(("enter", recording.address))

    def opened(self, op, recording):
        if op.info == "nothing":          # a side with nothing to track for this begin (the layer's resume)
            return None
        self.events.append(("open", op.info, tuple(self.labels)))
        return [op.info]

    def resumed(self, run, op) -> None:
        run.append(op.info)

    def closed(self, run) -> None:
        self.events.append(("close", tuple(run)))

    def other(self, op, kind, recording) -> None:
        self.events.append(("other", op, kind.__name__, tuple(self.labels), recording.address))


def rec(address: int, *ops) -> Recording:
    return Recording(address, list(ops))


def test_labels_open_and_close_across_recordings_and_a_pop_without_a_push_is_tolerated():
    w = Events(labels=["queue"])
    w.walk(rec(1, LabelBegin("a"), "x", LabelInsert("point")))
    w.walk(rec(2, "y", LABEL_END, LABEL_END, LABEL_END, "z"))
    assert w.events == [("enter", 1), ("other", "x", "str", ("queue", "a"), 1),
                        ("enter", 2), ("other", "y", "str", ("queue", "a"), 2), ("other", "z", "str", (), 2)]
    assert w.labels == []


def test_a_suspended_pass_is_joined_by_the_resume_in_a_later_recording_and_closes_once():
    w = Events()
    w.walk(rec(1, LabelBegin("frame"), PassBegin("p", False), "draw 1", PASS_SUSPEND))
    assert w.suspended == ["p"] and w.current is None
    w.walk(rec(2, PassBegin("p again", True), "draw 2", PASS_SUSPEND))
    w.walk(rec(3, PassBegin("p last", True), PASS_END, LABEL_END))
    assert [e for e in w.events if e[0] in ("open", "close")] == [
        ("open", "p", ("frame",)), ("close", ("p", "p again", "p last"))]
    assert w.suspended is None


def test_a_resume_with_nothing_suspended_opens_a_pass_of_its_own_or_nothing():
    w = Events()
    w.walk(rec(1, PassBegin("alone", True), PASS_END, PassBegin("nothing", True), PASS_END))
    assert [e for e in w.events if e[0] in ("open", "close")] == [("open", "alone", ()), ("close", ("alone",))]


def test_a_pass_begun_while_another_is_suspended_leaves_it_suspended_unless_it_suspends_too():
    w = Events(suspended=["old"])
    w.walk(rec(1, PassBegin("new", False), PASS_END))
    assert w.suspended == ["old"]
    w.walk(rec(2, PassBegin("newer", False), PASS_SUSPEND))
    assert w.suspended == ["newer"]


def test_secondaries_are_walked_where_they_are_executed_with_the_stack_in_effect():
    inner = rec(3, "s1", LabelBegin("in secondary"), "s2")
    w = Events()
    w.walk(rec(1, LabelBegin("a"), Execute([inner, rec(4, LABEL_END)]), "after"))
    assert w.events == [("enter", 1), ("enter", 3), ("other", "s1", "str", ("a",), 3),
                        ("other", "s2", "str", ("a", "in secondary"), 3), ("enter", 4),
                        ("other", "after", "str", ("a",), 1)]


def test_barriers_and_each_sides_records_go_to_other_with_their_type():
    w = Events()
    record = NS(kind="dispatch")
    w.walk(rec(1, FULL_BARRIER, record))
    assert [(e[1], e[2]) for e in w.events[1:]] == [(FULL_BARRIER, "Barrier"), (record, "SimpleNamespace")]


def test_ops_compare_by_type_and_fields():
    assert LabelBegin("x") == LabelBegin("x") != LabelInsert("x")
    assert PassBegin("i", True) != PassBegin("i", False) and PASS_END != PASS_SUSPEND

"""Per-object feature state (vkapi/slots.py): a typed slot per feature class, no Vulkan.

Also keeps the rule it serves honest: no `__dict__` stash in the driver or the layer (a feature's
state is its slot or a declared field, never an entry read by string).
"""
from __future__ import annotations

import pathlib
import threading
from dataclasses import dataclass, field

import pytest

from tessera.vkapi.slots import HasSlots

ROOT = pathlib.Path(__file__).resolve().parents[2]


@dataclass(eq=False)
class Thing(HasSlots):
    handle: int                 # a field without a default after the base's: slots is not an argument
    name: str = "thing"


@dataclass
class Pending:
    copies: list = field(default_factory=list)


@dataclass
class Marks:
    mark: int | None = None


class Memory:
    def __init__(self, owner: Thing) -> None:
        self.owner = owner


def test_a_slot_is_made_on_first_use_and_the_same_state_after():
    t = Thing(1)
    assert t.peek(Pending) is None
    p = t.slot(Pending)
    assert isinstance(p, Pending) and p.copies == []
    p.copies.append("copy")
    assert t.slot(Pending) is p and t.peek(Pending) is p
    assert t.slot(Pending).copies == ["copy"]


def test_each_feature_class_has_its_own_slot_on_each_object():
    a, b = Thing(1), Thing(2)
    a.slot(Marks).mark = 3
    assert a.peek(Pending) is None                       # another feature: not made by Marks
    assert b.peek(Marks) is None                         # another object: its own slots
    assert a.slot(Pending) is not b.slot(Pending)
    assert a.slot(Marks).mark == 3 and b.slot(Marks).mark is None


def test_make_builds_a_state_that_needs_arguments_and_runs_only_for_the_first_use():
    t = Thing(1)
    calls = []

    def make() -> Memory:
        calls.append(1)
        return Memory(t)

    mem = t.slot(Memory, make)
    assert mem.owner is t
    assert t.slot(Memory, make) is mem and calls == [1]


def test_a_slot_holds_only_its_own_class():
    t = Thing(1)
    with pytest.raises(TypeError, match="Pending"):
        t.slot(Pending, Marks)
    assert t.peek(Pending) is None


def test_drop_takes_the_state_off_and_returns_it():
    t = Thing(1)
    p = t.slot(Pending)
    assert t.drop(Pending) is p
    assert t.peek(Pending) is None and t.drop(Pending) is None
    assert t.slot(Pending) is not p                      # made anew after a drop


def test_slots_are_no_argument_and_are_neither_shown_nor_compared():
    @dataclass
    class Compared(HasSlots):
        handle: int

    a, b = Compared(1), Compared(1)
    a.slot(Marks).mark = 5
    assert a == b                                        # state of features is not the object's identity
    assert repr(a).endswith("Compared(handle=1)")
    with pytest.raises(TypeError):
        Compared(1, slots={})                            # type: ignore[call-arg]


def test_two_threads_making_a_slot_get_the_same_state():
    t = Thing(1)
    barrier = threading.Barrier(8)
    got = []

    def run() -> None:
        barrier.wait()
        got.append(t.slot(Pending))

    threads = [threading.Thread(target=run) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(p is got[0] for p in got) and t.peek(Pending) is got[0]


@pytest.mark.parametrize("folder", ["icd", "layer"])
def test_no_dict_stash_in_the_driver_or_the_layer(folder):
    stashes = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
               for path in sorted((ROOT / folder).rglob("*.py"))
               for n, line in enumerate(path.read_text().splitlines(), 1) if "__dict__" in line]
    assert stashes == []

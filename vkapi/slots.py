"""Per-object feature state: each feature's own typed slot on the object it belongs to.

A feature (indirect sizes, measured timing, instrumentation…) that keeps state on an object of the
driver or the layer (a device, a command buffer) declares one small class for it, usually a
dataclass with typed fields, and finds its state by that class:

    pending = cb.slot(IndirectPending)           # made with IndirectPending() on first use
    mem = dev.slot(SnapshotMemory, make)         # made with make() on first use
    m = cb.peek(MeasuredRecording)               # None until made
    mem = dev.drop(SnapshotMemory)               # taken off the object (to free what it holds)

The key is the class, never a string: a feature's state is found by grepping its class, and only
the module that defines the class reads or writes it. State that several modules share (one sets
it, another reads it) is not a slot but a declared field of the object's class, with its type and
its owner in a comment (objects.CommandBuffer.shader_objects).

Lifetime: a slot lives as long as its object, unless the object ends part of its life: a command
buffer drops all its slots when it is reset (icd/objects.CommandBuffer.reset), so a command
buffer's slots hold the state of one recording.

Cost: `peek` is one dict look-up, `slot` one more call when the state is made.
Threads: a slot is made atomically (dict.setdefault: one of two racing threads wins), but `make`
may run in both; a feature whose state must be made only once takes a lock of its own around
`slot` (indirect_sizes.memory_of).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

S = TypeVar("S")


@dataclass(eq=False)
class HasSlots:
    """Base of objects that features keep state on (a dataclass field: not an argument of __init__,
    not compared, not shown)."""
    slots: dict[type, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def slot(self, kind: type[S], make: Callable[[], S] | None = None) -> S:
        """The state of `kind` on this object, made with `make()` (default `kind()`) on first use."""
        state = self.slots.get(kind)
        if state is None:
            made = kind() if make is None else make()
            if not isinstance(made, kind):
                raise TypeError(f"the slot of {kind.__name__} cannot hold a {type(made).__name__}")
            state = self.slots.setdefault(kind, made)
        return state

    def peek(self, kind: type[S]) -> S | None:
        """The state of `kind` on this object, None if none was made (or it was dropped)."""
        return self.slots.get(kind)

    def drop(self, kind: type[S]) -> S | None:
        """Take the state of `kind` off this object; it is returned (None if there was none)."""
        return self.slots.pop(kind, None)

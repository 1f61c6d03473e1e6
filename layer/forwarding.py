"""Replacement hooks that call down themselves, and still forward when they fail.

The layer's promise (README): a Python exception inside an intercepted call never reaches the
application, and the call is still forwarded. Observer hooks get it from the trampoline
(vkapi/dispatch.py: the call is forwarded around a failing before/after hook). A replacement hook
calls down itself (vkQueueSubmit wraps the submit in its s<submitID> label, then forwards), so the
trampoline cannot know whether the call went down; on an exception it would return the command's
failure value. `Forwarding` keeps the promise for such a hook: it hands the hook the next element's
function as `call_down` and remembers whether it was called. If the hook raises before calling
down, the exception is reported and the call forwarded with the application's own arguments; if
after, reported, and the result of the call that was made returned. Exactly one call goes down.

Not for vkCreateInstance and vkCreateDevice: an instance or device created below a failed hook
would be one the layer does not know, and every later call on it would fail; those keep the
trampoline's failure value (VK_ERROR_INITIALIZATION_FAILED).

State: none across calls; each call has its own CallDown. Any thread.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CallDown:
    """The next element's function for one call (resolved when first needed), and whether it was called."""

    __slots__ = ("_resolve", "done", "result")

    def __init__(self, resolve: Callable[[], Any]) -> None:
        self._resolve = resolve
        self.done = False
        self.result: Any = None

    def __call__(self, *args):
        self.result = self._resolve()(*args)
        self.done = True
        return self.result


class Forwarding:
    """A replacement hook `hook(call_down, *args)` that always forwards once (module docstring).
    `next_of(handle)`: the next element's function for the call's dispatchable handle (its first
    argument); it raises for a handle the layer does not know, and the trampoline reports that the
    call could not be forwarded. `errors`: HookErrors."""

    def __init__(self, errors, name: str, next_of: Callable[[Any], Any], hook: Callable) -> None:
        self.errors = errors
        self.name = name
        self.next_of = next_of
        self.hook = hook
        self.__module__ = hook.__module__   # the intercept table names the hook's module as its owner

    def __call__(self, *args):
        call_down = CallDown(lambda: self.next_of(args[0]))
        try:
            return self.hook(call_down, *args)
        except Exception:
            if call_down.done:
                self.errors.report(self.name, "after the call was forwarded; its result was returned")
                return call_down.result
            self.errors.report(self.name, "the call was still forwarded, as the application made it")
            return call_down(*args)


def forwarding(hooks, name: str, next_of: Callable[[Any], Any]):
    """Register the decorated `hook(call_down, *args)` as the replacement of `name` (Forwarding)."""
    def register(hook: Callable) -> Forwarding:
        replacement = Forwarding(hooks.errors, name, next_of, hook)
        hooks.replace(name)(replacement)
        return replacement
    return register

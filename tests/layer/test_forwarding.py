"""Replacement hooks that call down themselves still forward when they fail (layer/forwarding.py, issue #23):
no Vulkan, no shim. "The next element" is a function that records its calls."""
from __future__ import annotations

import pytest

from tessera.layer.forwarding import Forwarding


class Errors:
    def __init__(self) -> None:
        self.reported: list[tuple[str, str]] = []

    def report(self, command: str, message: str) -> None:
        self.reported.append((command, message))


class Next:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, *args):
        self.calls.append(args)
        return f"result {len(self.calls)}"


def _forwarding(hook):
    errors, below = Errors(), Next()
    known = {"queue": below}
    return Forwarding(errors, "vkQueueSubmit", lambda handle: known[handle], hook), errors, below


def test_a_hook_that_succeeds_forwards_what_it_chose_and_returns_its_answer():
    replacement, errors, below = _forwarding(lambda call_down, queue, n: call_down(queue, n * 10) + " seen")
    assert replacement("queue", 2) == "result 1 seen"
    assert below.calls == [("queue", 20)] and errors.reported == []


def test_a_hook_that_fails_before_calling_down_still_forwards_the_applications_call():
    def hook(call_down, queue, n):
        raise RuntimeError("planning failed")
    replacement, errors, below = _forwarding(hook)
    assert replacement("queue", 2) == "result 1"
    assert below.calls == [("queue", 2)]
    assert errors.reported == [("vkQueueSubmit", "the call was still forwarded, as the application made it")]


def test_a_hook_that_fails_after_calling_down_returns_that_result_and_never_calls_twice():
    def hook(call_down, queue, n):
        call_down(queue, n)
        raise RuntimeError("reporting failed")
    replacement, errors, below = _forwarding(hook)
    assert replacement("queue", 2) == "result 1"
    assert below.calls == [("queue", 2)]
    assert errors.reported == [("vkQueueSubmit", "after the call was forwarded; its result was returned")]


def test_a_hook_that_answers_alone_calls_nothing_down():
    replacement, errors, below = _forwarding(lambda call_down, queue, n: None)   # vkDestroyDevice(NULL)
    assert replacement("queue", 2) is None and below.calls == []


def test_an_unknown_handle_cannot_be_forwarded_and_raises_to_the_trampoline():
    def hook(call_down, queue, n):
        raise RuntimeError("unknown queue")
    replacement, errors, below = _forwarding(hook)
    with pytest.raises(KeyError):
        replacement("stranger", 2)
    assert below.calls == []


def test_the_replacement_belongs_to_its_hooks_module():
    """The intercept table checks which module registered each hook (vkapi/intercepts.py owners)."""
    replacement, _, _ = _forwarding(lambda call_down, *args: None)
    assert replacement.__module__ == __name__

"""HookSet.bind (issue #24): a feature object's hooks are its methods named after their commands
(`before_vkCreateBuffer`, `after_…`, `at_record_…`, `replace_…`, `apply_…`); a method named after no
command is refused. Installed with test_hook_order's stand-ins: no Vulkan, no compiled shim."""
from __future__ import annotations

import pytest
from test_hook_order import NAME, _hooks, _installed



class Sizes:
    """A feature with state on itself and two hooks of NAME (vkCreateBuffer)."""

    def __init__(self) -> None:
        self.seen: list = []

    def before_vkCreateBuffer(self, owner, *args):
        self.seen.append(("before", args))

    def after_vkCreateBuffer(self, owner, result, *args):
        self.seen.append(("after", result))

    def helper_not_a_hook(self) -> None:   # no verb prefix: ignored
        raise AssertionError("never bound")


def test_a_features_methods_are_bound_by_their_names_and_run_around_the_call():
    hooks, calls = _hooks(), []
    feature = hooks.bind(Sizes())
    _installed(hooks, None, calls)(1, 2, 3, 4)
    assert feature.seen == [("before", (1, 2, 3, 4)), ("after", 0)]
    assert calls == [("call", (1, 2, 3, 4))]
    assert hooks.modules()[NAME] == {__name__}   # the intercept table names the feature's module


def test_a_replacement_and_an_applier_are_bound_too():
    class Both:
        def replace_vkQueueSubmit(self, *args):
            return 0

        def apply_vkCmdDraw(self, owner, commandBuffer, *args):
            pass

    hooks = _hooks()
    both = hooks.bind(Both())
    assert hooks.replacements["vkQueueSubmit"] == both.replace_vkQueueSubmit
    assert hooks.appliers["vkCmdDraw"] == both.apply_vkCmdDraw


@pytest.mark.parametrize("method", ["before_vkCreateBufer", "after_vkGetPhysicalDeviceProperties2KHR"])
def test_a_method_named_after_no_canonical_command_is_refused(method):
    feature = type("Typo", (), {method: lambda self, *args: None})()
    with pytest.raises(RuntimeError, match=method.partition("_")[2]):
        _hooks().bind(feature)

"""HookSet is append-only and ordered by the intercept table (issue #24): a command's at_record, before
and after hooks run in the order its row names their modules, whatever order they were registered in
(one module's hooks in registration order); a second replacement of a command is refused. Installed
with a stand-in for the shim's cffi module and library: no Vulkan, no compiled shim."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from tessera.vkapi import intercepts
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors

NAME = "vkCreateBuffer"   # neither a command-buffer command nor one that waits for the recorder
A, B, C = "tessera.feature_a", "tessera.feature_b", "tessera.feature_c"


class _Ffi:
    """What HookSet.install uses of a shim's ffi: the trampolines it binds are kept by name."""
    NULL = None

    def __init__(self) -> None:
        self.externs: dict = {}

    def string(self, s):
        return s

    def def_extern(self, name: str):
        def bind(fn):
            self.externs[name] = fn
            return fn
        return bind


class _Lib:
    """A shim library with one C guard per declared command, none recorded in C."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def tessera_guard_count(self) -> int:
        return len(self.names)

    def tessera_guard_name(self, i: int) -> bytes:
        return self.names[i].encode()

    def tessera_record_format(self, i: int) -> bytes:
        return b""

    def tessera_guard_address(self, i: int) -> int:
        return i


def _hooks() -> HookSet:
    return HookSet(HookErrors(logging.getLogger("test_hook_order")))


def _from(module: str, fn):
    """`fn` as if defined in `module` (the intercept table names hooks by their module)."""
    fn.__module__ = module
    return fn


def _installed(hooks: HookSet, row: tuple[str, ...] | None, calls: list):
    """Install `hooks` for NAME alone and return its trampoline; the next element records its call."""
    owner = SimpleNamespace(next=SimpleNamespace(**{NAME: lambda *args: calls.append(("call", args)) or 0}))
    ffi = _Ffi()
    hooks.install(ffi, _Lib([NAME]), lambda handle: owner, [NAME], None if row is None else {NAME: row})
    return ffi.externs[f"hook_{NAME}"]


def _observer(hooks: HookSet, verb: str, module: str, log: list, tag: str) -> None:
    getattr(hooks, verb)(NAME)(_from(module, lambda owner, *args: log.append(tag)))


def test_each_kind_of_hook_runs_in_the_order_the_row_names_its_modules():
    hooks, log = _hooks(), []
    for module, tag in ((C, "c"), (A, "a"), (B, "b")):   # registered in another order than the row's
        for verb in ("after", "before", "at_record"):
            _observer(hooks, verb, module, log, f"{verb} {tag}")
    trampoline = _installed(hooks, (A, B, C), log)
    trampoline(1, 2, 3, 4)
    assert log == ["at_record a", "at_record b", "at_record c", "before a", "before b", "before c",
                   ("call", (1, 2, 3, 4)), "after a", "after b", "after c"]


def test_two_befores_both_run_in_row_order_each_seeing_the_arguments_the_other_replaced():
    hooks, log = _hooks(), []
    hooks.before(NAME)(_from(B, lambda owner, *args: log.append(("b", args)) or (*args[:3], "from b")))
    hooks.before(NAME)(_from(A, lambda owner, *args: log.append(("a", args)) or (*args[:3], "from a")))
    _installed(hooks, (A, B), log)(1, 2, 3, 4)
    assert log == [("a", (1, 2, 3, 4)), ("b", (1, 2, 3, "from a")), ("call", (1, 2, 3, "from b"))]


def test_one_modules_hooks_run_in_registration_order_between_the_other_modules():
    hooks, log = _hooks(), []
    _observer(hooks, "before", B, log, "b1")
    _observer(hooks, "before", A, log, "a")
    _observer(hooks, "before", B, log, "b2")
    _observer(hooks, "before", C, log, "c")
    _installed(hooks, (C, B, A), log)(1, 2, 3, 4)
    assert log[:4] == ["c", "b1", "b2", "a"]


def test_without_a_table_hooks_run_in_registration_order():
    hooks, log = _hooks(), []
    for module, tag in ((C, "c"), (A, "a")):
        _observer(hooks, "before", module, log, tag)
    _installed(hooks, None, log)(1, 2, 3, 4)
    assert log[:2] == ["c", "a"]


def test_a_failing_before_skips_the_later_ones_and_the_call_goes_down_with_its_arguments():
    hooks, log = _hooks(), []

    def fail(owner, *args):
        raise ValueError("a bug in a hook")
    hooks.before(NAME)(_from(B, lambda owner, *args: log.append("b")))
    hooks.before(NAME)(_from(A, fail))
    _observer(hooks, "after", A, log, "after a")
    _installed(hooks, (A, B), log)(1, 2, 3, 4)
    assert log == [("call", (1, 2, 3, 4)), "after a"]


def test_a_second_replacement_of_a_command_raises_naming_the_command_and_both_modules():
    hooks = _hooks()
    hooks.replace(NAME)(_from(A, lambda *args: 0))
    with pytest.raises(RuntimeError, match=rf"{NAME} replaced twice: by {A} and by {B}"):
        hooks.replace(NAME)(_from(B, lambda *args: 0))


def test_the_old_verbs_are_gone():
    assert not hasattr(HookSet, "also_before") and not hasattr(HookSet, "also_after")


def test_owners_give_each_row_its_modules_in_order():
    for shim in (intercepts.ICD, intercepts.LAYER):
        owners = intercepts.owners(shim)
        assert owners == {name: tuple(f"tessera.{m}" for m in row[shim].modules)
                          for name, row in intercepts.INTERCEPTS.items() if shim in row}
    # e.g. a draw in the driver: recorded, then its instrumentation, regions and measured timing
    assert intercepts.owners(intercepts.ICD)["vkCmdDrawIndirect"] == (
        "tessera.icd.recording", "tessera.icd.instrumentation.hooks", "tessera.icd.regions.hooks",
        "tessera.icd.indirect_sizes", "tessera.icd.measured_timing")


def test_the_appliers_of_a_command_reach_the_recorder_composed_in_row_order():
    """Several modules may apply one record made in C (the layer's instrumenter numbers the draws
    render_passes.py counted): none replaces another; the recorder gets them as one, in the row's order."""
    given: dict = {}
    recorder = SimpleNamespace(guards={NAME: 0}, bind_appliers=given.update, deferred_hooks=lambda run: None)
    hooks, log = HookSet(HookErrors(logging.getLogger("test_hook_order")), recorder), []
    hooks.before(NAME)(_from(A, lambda owner, *args: None))
    for module, tag in ((B, "b"), (A, "a")):     # registered in another order than the row's
        hooks.applies(NAME)(_from(module, lambda owner, cb, *args, _t=tag, **kw: log.append((_t, args, kw))))
    _installed(hooks, (A, B), [])
    given[NAME]("owner", "cb", 7, tag=3)
    assert log == [("a", (7,), {"tag": 3}), ("b", (7,), {"tag": 3})]
    assert hooks.recorder is recorder


def test_an_end_whose_recorder_fails_is_still_forwarded_and_raises_nothing_into_c():
    """vkEndCommandBuffer's trampoline: the recorder failing to run what came before (the hooks of a begin
    made in C: vkapi/lifecycle.py), the hooks of the secondaries the recording executes, or to queue the recording
    is reported, and the call still returns the next element's result; no exception reaches the C caller."""
    end = "vkEndCommandBuffer"

    def fail(*args):
        raise RuntimeError("recorder broken")
    recorder = SimpleNamespace(guards={end: 0}, bind_appliers=lambda appliers: None, deferred_hooks=lambda run: None,
                               wait=fail, run_executed=fail, defer=fail)
    errors = HookErrors(logging.getLogger("test_hook_order"))
    hooks = HookSet(errors, recorder)
    hooks.after(end)(lambda owner, result, cb: None)
    calls: list = []
    owner = SimpleNamespace(next=SimpleNamespace(**{end: lambda *args: calls.append(args) or -3}))
    ffi = _Ffi()
    hooks.install(ffi, _Lib([end]), lambda handle: owner, [end])
    assert ffi.externs[f"hook_{end}"]("cb") == -3
    assert calls == [("cb",)]
    assert errors.counts == {end: 3}   # every failure reported (HookErrors logs a command's first)

"""Dispatch tables and hook trampolines shared by the layer and the driver.

A `DispatchTable` holds the next element's function pointers for one instance
or device, resolved eagerly when the object is created (asking the next
GetProcAddr later can hand back a loader trampoline that re-enters us).

`HookSet` collects, per command, either observers (`at_record`, `before`,
`after`: any number, run in the order the command's intercept-table row names
their modules) or one `replace`ment, and turns them into the `extern "Python"`
callbacks of a shim:

- observer trampoline: resolve the dispatchable handle to its owner; run the
  `at_record` hooks, then the `before` hooks (each may return replacement
  arguments); call the next element (when the next element lacks the command,
  the hooks alone implement it and the call succeeds: the driver emulates label
  commands this way); run the `after` hooks with the result. An exception in a
  `before` or `after` hook is reported (the command's later hooks of that kind
  are skipped) and the call is still forwarded with the original arguments: a
  bug in Tessera never breaks the application's call.
- replacement trampoline: the hook does everything (create/destroy, queries
  that answer for the next element); an exception is reported and the call
  returns the command's failure value (VK_ERROR_INITIALIZATION_FAILED,
  NULL or nothing).
For a command the shim answers in C once Python has (vkapi/answers.py), either
trampoline calls `tessera_answer_final()` last when every hook of the call ran
without an exception: the C guard then keeps the answer.
No Python exception ever propagates into C.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import lifecycle, submits
from .log import HookErrors
from .recorder import Recorder, guard_indices
from .vkconst import vk

VK_ERROR_INITIALIZATION_FAILED = vk.VK_ERROR_INITIALIZATION_FAILED


def canonical(name: str) -> str:
    entry = vk.COMMANDS.get(name)
    return entry[0] if entry else name


def is_device_command(name: str) -> bool:
    entry = vk.COMMANDS.get(name)
    return bool(entry and entry[1])


def aliases_of(canonical_name: str) -> list[str]:
    """Every name of the command (its canonical name's aliases in the registry, itself included)."""
    return _aliases().get(canonical_name, [])


@functools.cache
def _aliases() -> dict[str, list[str]]:
    """Canonical name -> its names, built once (a device's dispatch table asks for every command)."""
    out: dict[str, list[str]] = {}
    for n, (c, _) in vk.COMMANDS.items():
        out.setdefault(c, []).append(n)
    return out


class DispatchTable:
    """Typed function pointers of the next element; None where it lacks a command."""

    def __init__(self, ffi, get_proc_addr, handle, names: Iterable[str]) -> None:
        for name in names:
            setattr(self, name, resolve(ffi, get_proc_addr, handle, name))


def resolve(ffi, get_proc_addr, handle, name: str):
    """`name` (canonical) from `get_proc_addr`, trying its aliases; None if absent."""
    for candidate in (name, *[a for a in aliases_of(name) if a != name]):
        ptr = get_proc_addr(handle, candidate.encode())
        if ptr != ffi.NULL:
            return ffi.cast(f"PFN_{name}", ptr)
    return None


Resolver = Callable[[Any], Any]  # dispatchable handle -> owner with `.next` DispatchTable


class HookSet:
    """The hooks of one shim, by canonical command name.

    Append-only: each verb adds a hook; nothing a module registers is ever dropped. `before`,
    `after` and `at_record` hooks of a command run in the order its intercept-table row
    (vkapi/intercepts.py) names their modules, hooks of one module in registration order; so the
    order modules register in does not matter; so do the appliers of a command's records made in C
    (`applies`: several modules may apply one record, e.g. the instrumenter numbers the draws
    render_passes.py counted, composed at install in the row's order). A command has at most one
    `replace`ment: a second one raises, naming the command and both modules.

    `recorder`: the shim's Recorder (vkapi/recorder.py), made by the shim's entry before any module
    registers (the modules are handed it); None for a HookSet without C recording (unit tests).
    """

    def __init__(self, errors: HookErrors, recorder: Recorder | None = None) -> None:
        self.errors = errors
        self.befores: dict[str, list[Callable]] = {}
        self.afters: dict[str, list[Callable]] = {}
        # Observers that must act on the calling thread before the call is forwarded, even where the
        # command's other hooks run later (vkEndCommandBuffer's run on the recorder's worker).
        self.record_time: dict[str, list[Callable]] = {}
        self.replacements: dict[str, Callable] = {}
        self._note_next: Callable[[str, Any], None] = lambda name, fn: None
        self.applier_lists: dict[str, list[Callable]] = {}
        self.recorder = recorder

    def _observe(self, table: dict[str, list[Callable]], name: str):
        def register(fn):
            table.setdefault(name, []).append(fn)
            for observers in (self.befores, self.afters, self.record_time):
                observers.setdefault(name, [])
            return fn
        return register

    def before(self, name: str):
        """Run (owner, *args) before the call is forwarded; a non-None return replaces the arguments
        (the command's next before-hooks and the call see them)."""
        return self._observe(self.befores, name)

    def after(self, name: str):
        """Run (owner, result, *args) after the call was forwarded."""
        return self._observe(self.afters, name)

    def at_record(self, name: str):
        """Run (owner, *args) on the calling thread just before the call is forwarded (for a
        command-buffer command, after the buffer's earlier records were applied; except for
        vkEndCommandBuffer, whose records are applied later, on the worker)."""
        return self._observe(self.record_time, name)

    def replace(self, name: str):
        """The hook does everything instead of the call (create/destroy, queries the shim answers);
        one per command."""
        def register(fn):
            first = self.replacements.get(name)
            if first is not None:
                raise RuntimeError(f"{name} replaced twice: by {first.__module__} and by {fn.__module__}")
            self.replacements[name] = fn
            return fn
        return register

    @property
    def observers(self) -> dict[str, tuple[Callable | None, Callable | None]]:
        """Observed command -> its first registered before and after hook (None where it has none):
        for unit tests that call one module's hooks directly."""
        return {name: (self.befores[name][0] if self.befores[name] else None,
                       self.afters[name][0] if self.afters[name] else None) for name in self.befores}

    def _chained(self, name: str, row: tuple[str, ...] | None) -> tuple[Callable | None, Callable | None]:
        """The command's before and after observers in the row's order, each one function (several
        chained: an exception in one skips the rest, as the trampoline reports it)."""
        befores = _in_row_order(self.befores[name], row)
        afters = _in_row_order(self.afters[name], row)
        if len(befores) > 1:
            def before(owner, *args):
                replaced = None
                for fn in befores:
                    r = fn(owner, *(replaced or args))
                    if r is not None:
                        replaced = r
                return replaced
        if len(afters) > 1:
            def after(owner, result, *args):
                for fn in afters:
                    fn(owner, result, *args)
        return (befores[0] if len(befores) == 1 else before if befores else None,
                afters[0] if len(afters) == 1 else after if afters else None)

    def applies(self, name: str):
        """Register what applies a record of `name` made in C (recorder.py): called later, in order,
        with (owner, command buffer handle, *parameters after it), tagged workloads with tag=."""
        def register(fn):
            self.applier_lists.setdefault(name, []).append(fn)
            return fn
        return register

    @property
    def appliers(self) -> dict[str, Callable]:
        """Command -> its appliers as one function, in registration order (install uses the row's):
        for unit tests that apply one module's records directly."""
        return {name: _composed(fns) for name, fns in self.applier_lists.items()}

    def bind(self, feature: object) -> object:
        """Register a feature object's hooks, found by their names: a method `before_vkCmdDraw` is a
        before-hook of vkCmdDraw; likewise `after_`, `at_record_`, `replace_` and `apply_` (the applier of
        a record made in C). So a command's handler is found by grepping its name, and the feature's
        state lives on the object, not in closures. A method with one of these prefixes named after no
        canonical command raises (a typo never hooks nothing in silence); other names are not hooks
        (layer/queues.py's `forwarding_vkQueueSubmit` registers itself through layer/forwarding.py).
        Returns `feature`."""
        verbs = {"before": self.before, "after": self.after, "at_record": self.at_record,
                 "replace": self.replace, "apply": self.applies}
        for attr in dir(type(feature)):
            verb, sep, rest = attr.partition("_vk")
            if not sep or verb not in verbs:
                continue
            command = "vk" + rest
            if command not in vk.COMMANDS or canonical(command) != command:
                raise RuntimeError(f"{type(feature).__name__}.{attr}: {command} is not a canonical Vulkan command")
            verbs[verb](command)(getattr(feature, attr))
        return feature

    def names(self) -> set[str]:
        return set(self.befores) | set(self.replacements)

    def modules(self) -> dict[str, set[str]]:
        """Command -> the modules that registered a function for it (any kind of hook)."""
        out: dict[str, set[str]] = {}
        registered = [(name, fn) for table in (self.befores, self.afters, self.record_time)
                      for name, fns in table.items() for fn in fns]
        registered += [*self.replacements.items(),
                       *((name, fn) for name, fns in self.applier_lists.items() for fn in fns)]
        for name, fn in registered:
            out.setdefault(name, set()).add(fn.__module__)
        return out

    def dispatch_table(self, ffi, get_proc_addr, handle, names: Iterable[str]) -> DispatchTable:
        """The next element's table for `handle`; the shim's C guards learn its functions too, so
        they can forward calls once Python is gone (see vkapi/guards.py)."""
        table = DispatchTable(ffi, get_proc_addr, handle, names)
        for name, fn in vars(table).items():
            if fn is not None:
                self._note_next(name, fn)
        return table

    def install(self, ffi, lib, resolver: Resolver, declared: Iterable[str],
                owners: Mapping[str, tuple[str, ...]] | None = None, answered: Iterable[str] = ()) -> dict[str, Any]:
        """Bind every declared hook; returns name -> PFN_vkVoidFunction for GetProcAddr
        (the generated C guard of each hook, which calls it while Python is usable).

        Every command the shim declares must have a hook, and every hook a declaration (it would
        never be called); with `owners` (command -> its row's modules in order, vkapi/intercepts.py),
        every hook must come from a module its command's row names, and a command's before, after
        and at_record hooks run in that order (without `owners`: in registration order). Any of
        these is a build/registration mismatch, reported loudly. `answered`: the commands whose final
        answers the C guards keep (vkapi/answers.py).
        """
        pointers: dict[str, Any] = {}
        self._resolver = resolver
        self._answered = frozenset(answered)
        self._chains: dict[str, tuple] = {}   # command -> (record-time hooks, before, after): _run_deferred
        self._begin_infos: dict[int, Any] = {}   # flags -> the VkCommandBufferBeginInfo _run_deferred hands on
        self._ffi = ffi
        declared = list(declared)
        missing = set(declared) - self.names()
        if missing:
            raise RuntimeError(f"commands declared in the shim without a hook: {sorted(missing)}")
        undeclared = self.names() - set(declared)
        if undeclared:
            raise RuntimeError(f"hooks of commands the shim does not declare (never called): {sorted(undeclared)}")
        if owners is not None:
            strays = sorted(f"{name} (hooked in {module})" for name, modules in self.modules().items()
                            for module in modules - set(owners.get(name, ())))
            if strays:
                raise RuntimeError(f"hooks in modules the intercept table does not name: {strays}")
        if self.recorder is not None:
            guards = self.recorder.guards
            self.recorder.bind_appliers({name: _composed(_in_row_order(fns, owners.get(name) if owners else None))
                                         for name, fns in self.applier_lists.items()})
        else:
            guards = guard_indices(ffi, lib)
        for name in declared:
            if name in self.replacements:
                fn = self._replacement(name, self.replacements[name], lib)
            else:
                row = owners.get(name) if owners is not None else None
                b, a = self._chained(name, row)
                record_time = _in_row_order(self.record_time[name], row)
                self._chains[name] = (record_time, b, a)
                fn = self._observer(name, resolver, b, a, record_time, lib)
            ffi.def_extern(name=f"hook_{name}")(fn)
            pointers[name] = lib.tessera_guard_address(guards[name])

        if self.recorder is not None:
            self.recorder.deferred_hooks(self._run_deferred)

        def note_next(name: str, fn) -> None:
            index = guards.get(name)
            if index is not None:
                lib.tessera_note_next(index, ffi.cast("PFN_vkVoidFunction", fn))
        self._note_next = note_next
        return pointers

    def _apply_records(self, name: str, command_buffer, owner=None, args: tuple = ()) -> None:
        """Apply what C recorded into `command_buffer` before a Python hook looks at it (after the
        worker has finished any job queued for it), or, for the commands that need every buffer
        finished, wait for all of the worker's jobs. `args`: the command's after the buffer
        (vkCmdExecuteCommands: the secondaries, whose begins and ends C made have their hooks run)."""
        try:
            if name in SETTLE_ALL:
                self.recorder.settle()
            if name == "vkCmdExecuteCommands":   # the hooks of the secondaries' begins and ends C made
                for i in range(args[0]):
                    self.recorder.wait(args[1][i])
            self.recorder.wait(command_buffer)
            self.recorder.apply(owner if owner is not None else self._resolver(command_buffer), command_buffer)
        except Exception:
            self.errors.report(name, "applying the command buffer's recorded commands")

    def _begun(self, command_buffer) -> None:
        """Before vkEndCommandBuffer's hooks: the job queued for the buffer and the hooks of a begin C made of it."""
        try:
            self.recorder.wait(command_buffer)
        except Exception:
            self.errors.report("vkEndCommandBuffer", "applying the command buffer's earlier records")

    def _settle(self, name: str, args: tuple) -> None:
        """Before a hook that needs every recording finished (SETTLE_ALL): the recorder's queued jobs, and
        for a submit, the hooks of a begin and end C made of each buffer it submits (vkapi/lifecycle.py)."""
        recorder = self.recorder
        try:
            recorder.settle()
            if name in submits.COMMANDS:
                for handle in submits.command_buffers(name, args[1], args[2]):
                    recorder.wait(handle)
        except Exception:
            self.errors.report(name, "finishing the recordings it needs")

    def _run_deferred(self, handle, bits: int, flags: int, end_result: int, read=None) -> None:
        """Run the hooks of the begin (and end) C made of `handle` (vkapi/lifecycle.py), as the calls
        would have: the begin's with its flags, then the end's record-time hooks, its records applied
        (the kept product restored: replay.py; `read`: a ledger reader reported its submits from that
        product already, Recorder.restore_read) and its end hooks."""
        errors, recorder = self.errors, self.recorder
        try:
            owner = self._resolver(handle)
        except Exception:
            errors.report("vkBeginCommandBuffer", "unknown handle: its hooks did not run")
            return
        if bits & lifecycle.BEGUN:
            info = self._begin_info(flags)
            record_time, before, after = self._chains["vkBeginCommandBuffer"]
            with recorder.keeping_records(handle):
                self._late_hooks("vkBeginCommandBuffer", record_time, before, after, owner, (handle, info),
                                 vk.VK_SUCCESS)
        if bits & lifecycle.ENDED:
            record_time, before, after = self._chains["vkEndCommandBuffer"]
            self._late_hooks("vkEndCommandBuffer", record_time, None, None, owner, (handle,), end_result)
            try:
                if read is not None:
                    recorder.restore_read(owner, handle, read)
                elif bits & lifecycle.REPORTED:   # its submits reported in C
                    recorder.apply_reported(owner, handle)
                else:
                    recorder.apply(owner, handle, ended=True)
            except Exception:
                errors.report("vkEndCommandBuffer", "applying the command buffer's recorded commands")
            self._late_hooks("vkEndCommandBuffer", (), before, after, owner, (handle,), end_result)

    def _begin_info(self, flags: int):
        """The begin info of a begin C made: its flags alone (C begins buffers without pNext, on devices whose
        begin hooks may run later: none of those reads the inheritance info). One per flags value (at most the
        few VkCommandBufferUsageFlags combinations), kept: no hook changes the info it is handed."""
        info = self._begin_infos.get(flags)
        if info is None:
            info = self._begin_infos[flags] = self._ffi.new(
                "VkCommandBufferBeginInfo *", {"sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, "flags": flags})
        return info

    def _late_hooks(self, name: str, record_time, before, after, owner, args: tuple, result) -> None:
        for fn in record_time:
            try:
                fn(owner, *args)
            except Exception:
                self.errors.report(name, "in a record-time hook of a call made in C")
        if before is not None:
            try:
                before(owner, *args)
            except Exception:
                self.errors.report(name, "in a before-hook of a call made in C")
        if after is not None:
            try:
                after(owner, result, *args)
            except Exception:
                self.errors.report(name, "in an after-hook of a call made in C")

    def _end_later(self, owner, args, call, before, after):
        """vkEndCommandBuffer: forward now; apply the recording and run the end hooks on the worker."""
        recorder, errors = self.recorder, self.errors
        result = call(*args)
        try:
            recorder.run_executed(args[0])
        except Exception:
            errors.report("vkEndCommandBuffer", "running the hooks of the secondaries it executes")

        def job() -> None:
            try:
                recorder.apply(owner, args[0], ended=True)
            except Exception:
                errors.report("vkEndCommandBuffer", "applying the command buffer's recorded commands")
            for hook, hook_args in ((before, (owner, *args)), (after, (owner, result, *args))):
                if hook is not None:
                    try:
                        hook(*hook_args)
                    except Exception:
                        errors.report("vkEndCommandBuffer", "in an end hook, on the recorder's worker")
        try:
            recorder.defer(args[0], job)
        except Exception:
            errors.report("vkEndCommandBuffer", "queueing the recording's records to apply")
        return result

    def _replacement(self, name: str, hook: Callable, lib) -> Callable:
        errors = self.errors
        failure = _failure_for(name)
        on_command_buffer = _takes_command_buffer(name)
        settles = name in SETTLE_ALL
        final = lib.tessera_answer_final if name in self._answered else None

        def trampoline(*args):
            try:
                if on_command_buffer:
                    self._apply_records(name, args[0], None, args[1:])
                elif settles:
                    self._settle(name, args)
                result = hook(*args)
                if final is not None:
                    final()
                return result
            except Exception:
                errors.report(name, "the call failed with its error value")
                return failure
        trampoline.__name__ = f"hook_{name}"
        return trampoline

    def _observer(self, name: str, resolver: Resolver, before, after, record_time: list[Callable],
                  lib) -> Callable:
        errors = self.errors
        failure = _failure_for(name)
        success = vk.VK_SUCCESS if vk.COMMAND_RETURNS.get(name) == "VkResult" else None

        on_command_buffer = _takes_command_buffer(name)
        ends_recording = name == "vkEndCommandBuffer"
        settles = name in SETTLE_ALL
        final = lib.tessera_answer_final if name in self._answered else None

        def trampoline(*args):
            try:
                owner = resolver(args[0])
                call = getattr(owner.next, name)
            except Exception:
                errors.report(name, "unknown handle: the call could not be forwarded")
                return failure
            if on_command_buffer and not ends_recording:
                self._apply_records(name, args[0], owner, args[1:])
            elif ends_recording:   # a begin C made: its hooks first, so the end's record-time hooks see this recording
                self._begun(args[0])
            elif settles:
                self._settle(name, args)
            clean = True   # every hook ran without an exception
            for fn in record_time:   # after the records before this command are applied
                try:
                    fn(owner, *args)
                except Exception:
                    errors.report(name, "in a record-time hook; the call was still forwarded")
                    clean = False
            if ends_recording:
                return self._end_later(owner, args, call, before, after)
            if before is not None:
                try:
                    replaced = before(owner, *args)
                except Exception:
                    errors.report(name, "in a before-hook; the call was still forwarded")
                    replaced = None
                    clean = False
                if replaced is not None:
                    args = replaced
            result = call(*args) if call is not None else success
            if after is not None:
                try:
                    after(owner, result, *args)
                except Exception:
                    errors.report(name, "in an after-hook; the call was forwarded")
                    clean = False
            if final is not None and clean:
                final()
            return result
        trampoline.__name__ = f"hook_{name}"
        return trampoline


# Hooks that need every recording finished: they read or drop command buffers other than a
# first-parameter one (submits, frees, pool resets, secondaries, the device going away).
SETTLE_ALL = frozenset({"vkQueueSubmit", "vkQueueSubmit2", "vkFreeCommandBuffers", "vkDestroyCommandPool",
                        "vkResetCommandPool", "vkCmdExecuteCommands", "vkDestroyDevice", "vkQueueWaitIdle",
                        "vkDeviceWaitIdle", "vkWaitForFences", "vkWaitSemaphores"})


def _composed(fns: list[Callable]) -> Callable:
    """A command's appliers as one: each in turn, with the same arguments (one that raises stops
    the rest, as the recorder reports it)."""
    if len(fns) == 1:
        return fns[0]

    def apply(*args, **kwargs):
        for fn in fns:
            fn(*args, **kwargs)
    return apply


def _in_row_order(fns: list[Callable], row: tuple[str, ...] | None) -> list[Callable]:
    """`fns` in the order `row` names their modules (a stable sort: one module's hooks stay in
    registration order); without a row, in registration order."""
    if row is None:
        return list(fns)
    return sorted(fns, key=lambda fn: row.index(fn.__module__))


def _takes_command_buffer(name: str) -> bool:
    """Commands whose first parameter is a VkCommandBuffer (their Python hooks see the buffer's
    records applied first, so C-recorded and Python-hooked commands stay in order)."""
    return name.startswith("vkCmd") or name in ("vkBeginCommandBuffer", "vkEndCommandBuffer",
                                                  "vkResetCommandBuffer")


def guarded(errors: HookErrors, name: str, fn: Callable, failure) -> Callable:
    """`fn` that reports an exception and returns `failure` instead of raising into C."""
    def call(*args):
        try:
            return fn(*args)
        except Exception:
            errors.report(name, "returned its failure value")
            return failure
    return call


def _failure_for(name: str):
    """Return value used when a hook cannot complete: by the command's return type."""
    return RETURN_FAILURE.get(vk.COMMAND_RETURNS.get(name, "void"))


# What a command returns when its hook cannot complete, by return type (the C guards of guards.py
# return the same when Python is gone).
RETURN_FAILURE = {"VkResult": VK_ERROR_INITIALIZATION_FAILED, "void": None, "PFN_vkVoidFunction": None,
                   "VkBool32": 0, "uint32_t": 0, "uint64_t": 0, "VkDeviceAddress": 0, "VkDeviceSize": 0}

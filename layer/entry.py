"""Entry of the layer: runs once, inside the application, when the shim loads.

Reads the settings, creates the session (transport, counters), registers
every hook module, binds the shim's callbacks and its GetProcAddr functions.
Called by the shim's init code as `install(ffi, lib)`.
"""
from __future__ import annotations

from tessera.vkapi import call_counts, intercepts, interpreter, pipelines, resource_hooks
from tessera.vkapi.dispatch import HookSet, guarded
from tessera.vkapi.guards import thread_counts
from tessera.vkapi.log import HookErrors, configure
from tessera.vkapi.recorder import Recorder
from tessera.vkapi.submits import SubmitLedger

from . import (allocations, chain, commands, content, descriptions, descriptors, encoder, queues, render_passes,
               workloads)
from .indirect import Capturer
from .forwarding import Forwarding
from .instrument import Instrumenter
from .regions import Extensions, Regions
from .replay import TrackerProducts
from .reported_submits import ReportedSubmits
from .settings import LayerSettings
from .shim_spec import HOOKS
from .state import LayerState, Session
from .tagging import Labeller
from .transport import Transport


class InjectedFault(RuntimeError):
    """Raised on purpose by hooks listed in TESSERA_LAYER_FAULT."""


def install(ffi, lib) -> None:
    call_counts.install_from_environ()
    settings = LayerSettings.from_environ()
    log = configure("layer", settings.log)
    errors = HookErrors(log)
    # What the hook modules share is made before any of them registers, and handed to them.

    def warn(message: str) -> None:
        log.warning("%s", message)

    recorder = Recorder(ffi, lib, warn, errors.report)
    # Content metrics need each draw's parameters and what it binds at record time (content.py): those commands
    # take Python while this switch is on (intercepts.py CONTENT_DRAWS, CONTENT_FORWARDED); the rest stays in C.
    lib.tessera_layer_content = 1 if settings.content else 0
    hooks = HookSet(errors, recorder)
    transport = Transport(settings.hostd, settings.session_dir, encoder.hello(), log)
    state = LayerState(ffi, Session(transport, lib.tessera_next_submit, lib.tessera_set_frame))
    state.track_descriptors = settings.content
    labeller = Labeller(ffi, lib.tessera_next_tag)
    capturer = Capturer(ffi, state, labeller, log, settings.content)

    instrumenter = Instrumenter(ffi, state, transport.send, errors) if settings.instrument else None
    by_region = Regions(ffi, state, transport.send, errors, settings.regions) if settings.regions else None
    if by_region is not None:   # one slot for chain.py and queues.py: both extensions behind it
        instrumenter = Extensions(instrumenter, by_region)
    # Reuse of re-recordings (layer/replay.py): not with the instrumentation or region counters, which keep
    # per-recording state of their own, nor under --content, whose descriptions read the descriptor sets
    # bound before the recording (layer/descriptors.py), nor with injected faults.
    if instrumenter is None and not settings.content and not settings.fault_commands:
        # a primary restored runs the hooks of the secondaries it executes as a ledger's reader would (it may be a
        # job a reader waits for: Recorder._execute)
        recorder.reuse_recordings(TrackerProducts(state, lambda address: recorder.wait(address, reading=True)))

    ledger = SubmitLedger(ffi, lib, warn)
    lib.tessera_set_c_submits(1 if settings.c_submits else 0)
    # The queues' reporter, before any registration: the commands' and the queues' hooks share it. It sends
    # with send_soon: a submit's frames wake no thread; the sender takes them within PULL_S, and a wait
    # writes them itself (Transport.hand_to_kernel) before the application learns the work ran.
    reporter = queues.QueueReporter(state.session, transport.send_soon, queues.queue_owner(state, ffi), labeller, capturer,
                                    errors, instrumenter, ledger, recorder, c_submits=settings.c_submits)
    transport.before_flush.append(reporter.pull)   # submits made in C are reported before a flush
    # Submits reported whole in C (reported_submits.py): of recordings made again from kept products, whose
    # submits the C path makes
    reported = None
    if settings.c_submits and recorder.replays is not None:
        reported = transport.reported = reporter.reported = ReportedSubmits(ffi, lib, transport, state, capturer, log)
    recorder.submits_reader(reporter.pull)   # where the hooks of a submitted buffer's C-made begin and end run

    def on_destroy_device(dev) -> None:
        reporter.pull()
        log.info("%s", ledger.counts(reported.licence.handled() if reported is not None else 0))
        if reported is not None:
            log.info("%s", reported.licence.counts())
            log.info("%s", reported.presents())
        log.info("%s", recorder.counts())
        log.info("%s", thread_counts(ffi, lib))
        for q in dev.queues.values():   # its queues no longer keep submits on the Python path
            if q.python_submits:
                q.python_submits = False
                ledger.python_reason(False)
        capturer.destroy(dev)
        if by_region is not None:
            by_region.destroy(dev)
        if dev.allocations is not None and dev.announced is not None:   # the device again, with its allocations
            transport.send(encoder.device(*dev.announced, allocations=dev.allocations.to_json()))
        transport.flush()

    # Each command's hooks run in the order its row of the intercept table names their modules
    # (vkapi/intercepts.py), whatever order the modules register in; appliers too (the instrumenter's
    # number the actions render_passes.py and workloads.py applied first).
    chain.register(hooks, state, ffi, on_destroy_device, instrumenter)
    resource_hooks.register(hooks, ffi)
    pipelines.register(hooks, ffi)
    pipelines.register_shader_objects(hooks, ffi)
    commands.register(hooks, state, ffi, capturer.release, reporter)
    render_passes.register(hooks, state, labeller, capturer, settings.content)
    content.register(hooks, state, labeller, capturer, settings.content)
    allocations.register(hooks, ffi)
    descriptors.register(hooks, state, settings.content)
    workloads.register(hooks, state, labeller, capturer)
    descriptions.register(hooks, state)
    queues.register(hooks, state, ffi, reporter, errors)
    capturer.register(hooks)
    for extension in (instrumenter.items if isinstance(instrumenter, Extensions) else [instrumenter]):
        if extension is not None:
            extension.register(hooks)
    owners = intercepts.owners(intercepts.LAYER)
    for name in settings.fault_commands:
        _inject_fault(hooks, name)
        owners[name] = (__name__, *owners.get(name, ()))   # the injected fault's hooks come first
    pointers = hooks.install(ffi, lib, state.owner_of, HOOKS, owners)
    if not settings.content:   # what only content mode reads is not handed out: the application calls the driver
        for name in descriptors.CONTENT_ONLY:
            pointers.pop(name, None)
    gipa, gdpa = chain.make_proc_addr(ffi, state, pointers)
    ffi.def_extern(name="tessera_layer_gipa")(guarded(errors, "vkGetInstanceProcAddr", gipa, ffi.NULL))
    ffi.def_extern(name="tessera_layer_gdpa")(guarded(errors, "vkGetDeviceProcAddr", gdpa, ffi.NULL))
    log.info("layer installed: %d hooks%s", len(pointers),
             "; start-up objects frozen" if interpreter.freeze_installed() else "")


def _raise_injected(*args, **kwargs):
    raise InjectedFault("fault injected by TESSERA_LAYER_FAULT")


def _inject_fault(hooks: HookSet, name: str) -> None:
    """Make the layer's hooks of `name` raise InjectedFault where the layer's own work is: an
    observed command's before-hooks (a first one that raises: the others are skipped); a replacement
    hook that calls down itself (forwarding.py), at its start, before it calls down; a replacement that
    answers alone (vkCreateInstance, vkCreateDevice, the application's labels), at its start; a command
    recorded in C, when its record is applied. The caller names this module first in the command's row."""
    replacement = hooks.replacements.get(name)
    if isinstance(replacement, Forwarding):
        replacement.hook = _faulty(replacement.hook)
    elif replacement is not None:
        hooks.replacements[name] = _faulty(replacement)   # swapped on purpose: a second replace() raises
    else:
        hooks.before(name)(_raise_injected)
    if name in hooks.appliers:   # recorded in C: its record is applied later, and fails then
        hooks.applies(name)(_raise_injected)


def _faulty(hook):
    def raising(*args):
        _raise_injected()
        return hook(*args)
    return raising

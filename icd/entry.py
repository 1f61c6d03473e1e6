"""Entry of the emulated Mali driver: runs once, inside the application, when the shim loads.

Reads settings, opens the backend driver, registers every hook module and
binds the loader-ICD entry points (negotiate, GetInstanceProcAddr,
GetPhysicalDeviceProcAddr). Called by the shim's init code as `install(ffi, lib)`.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tessera.vkapi import call_counts
from tessera.vkapi.dispatch import HookSet, canonical, guarded, is_device_command
from tessera.vkapi.log import HookErrors, configure
from tessera.vkapi.recorder import Recorder
from tessera.vkapi.submits import SubmitLedger
from tessera.schemas.counters import for_profile as counter_table
from tessera.vkapi.vkconst import vk

from tessera.vkapi import intercepts, interpreter, pipelines, resource_hooks

from . import (command_buffer, core_builtins, counter_memory, device, indirect_sizes, instance, labels,
               measured_counters, measured_timing, object_names, recording, shader_costs, submit, visible_prims)
from .backend import BackendError, default_manifest, negotiate, open_backend
from .device import EMULATED_COMMANDS
from .driver import Driver
from .instrumentation import hooks as instrumentation
from .objects import Objects
from .placed_submits import PlacedSubmits
from .placement_plans import NativePlacer
from .regions import hooks as regions
from .replay import ShadowProducts
from .settings import IcdSettings
from .shim_spec import ANSWERED, HOOKS
from .data_graph import pipelines as data_graph
from .tensors import descriptors as tensor_descriptors, resources as tensors
from .timeline import Timeline


def install(ffi, lib) -> None:
    call_counts.install_from_environ()
    try:
        settings = IcdSettings.from_environ()
        backend = open_backend(ffi, lib, settings.backend_manifest or default_manifest())
    except (BackendError, ValueError) as e:
        _refuse(ffi, str(e))
        return
    log = configure("icd", settings.log)
    errors = HookErrors(log)
    # What the hook modules share is made before any of them registers, and handed to them in `drv`.

    def warn(message: str) -> None:
        log.warning("%s", message)

    recorder = Recorder(ffi, lib, warn, errors.report)
    recorder.reuse_recordings(ShadowProducts())
    timeline = Timeline(settings.profile, settings.session_dir or _temporary_session(), errors.report,
                        counters=settings.counters)
    timeline.native = NativePlacer(ffi, lib)
    if settings.c_submits:   # submits placed whole in C: only where the C submit path makes them
        timeline.placed = PlacedSubmits(ffi, lib, warn)
    recorder.submits_reader(timeline.pull)   # where the hooks of a submitted buffer's C-made begin and end run
    drv = Driver(ffi, lib, HookSet(errors, recorder), Objects(ffi), backend, settings.profile, timeline=timeline,
                 c_submits=settings.c_submits, submit_ledger=SubmitLedger(ffi, lib, warn),
                 # measured counters only where counters are shown: a GPU with Arm's counter table
                 measured_counters=settings.measured_counters and counter_table(settings.profile.key) is not None)
    lib.tessera_set_c_submits(1 if settings.c_submits else 0)   # the C path of submits and queue labels
    counter_memory.track_pipeline_layouts(drv.hooks)   # for instrumentation and regions
    # Each command's hooks run in the order its row of the intercept table names their modules, whatever the
    # order modules register in (vkapi/intercepts.py; e.g. icd.recording makes a draw's Work/Draw before
    # icd.regions.hooks, icd.indirect_sizes and icd.measured_timing complete it). The order below is the devices'
    # lifecycle: from tensors on, each module's register appends its feature to drv.features, which
    # vkCreateDevice runs in this order and vkDestroyDevice in reverse (icd/feature.py): the submits are
    # last, so at destroy they settle (and their fences go) before any feature destroys what the work used.
    for module in (instance, device, command_buffer, labels, object_names, recording, core_builtins, shader_costs,
                   measured_timing, tensors, tensor_descriptors, data_graph, regions, instrumentation, indirect_sizes,
                   measured_counters, visible_prims, submit):
        module.register(drv)
    resource_hooks.register(drv.hooks, ffi)
    pipelines.register(drv.hooks, ffi, lambda stages: shader_costs.of_stages(settings.profile.key, stages, log))
    # Without TESSERA_C_ANSWERS=0 the C guards keep the fixed answers (vkapi/answers.py) once Python gave them.
    drv.pointers = drv.hooks.install(ffi, lib, drv.objects.owner, HOOKS, intercepts.owners(intercepts.ICD),
                                     ANSWERED if settings.c_answers else ())
    if not drv.measured_counters:   # what only the measured visible primitives read: the application calls the backend
        for name in visible_prims.CAPTURE_ONLY:
            drv.pointers.pop(name, None)

    def negotiate_version(pVersion):
        pVersion[0] = negotiate(ffi, backend, pVersion[0])
        return vk.VK_SUCCESS

    def gipa(inst, pName):
        name = canonical(ffi.string(pName).decode())
        if name in drv.pointers:
            if name in instance.GLOBAL_COMMANDS or name in EMULATED_COMMANDS:
                return drv.pointers[name]
            return drv.pointers[name] if backend.gipa(inst, pName) != ffi.NULL else ffi.NULL
        return backend.gipa(inst, pName)

    def gpdpa(inst, pName):
        name = canonical(ffi.string(pName).decode())
        if name in drv.pointers and not is_device_command(name):
            return drv.pointers[name]
        return backend.gpdpa(inst, pName) if backend.gpdpa is not None else ffi.NULL

    ffi.def_extern(name="tessera_icd_negotiate")(
        guarded(errors, "vk_icdNegotiateLoaderICDInterfaceVersion", negotiate_version,
                vk.VK_ERROR_INCOMPATIBLE_DRIVER))
    ffi.def_extern(name="tessera_icd_gipa")(guarded(errors, "vk_icdGetInstanceProcAddr", gipa, ffi.NULL))
    ffi.def_extern(name="tessera_icd_gpdpa")(guarded(errors, "vk_icdGetPhysicalDeviceProcAddr", gpdpa, ffi.NULL))
    log.info("emulated %s on %s%s", settings.profile.device_name, backend.library,
             "; start-up objects frozen" if interpreter.freeze_installed() else "")


def _temporary_session() -> Path:
    path = Path(tempfile.mkdtemp(prefix="tessera-session-"))
    print(f"tessera: TESSERA_SESSION_DIR not set; GPU trace goes to {path}", file=sys.stderr)
    return path


def _refuse(ffi, reason: str) -> None:
    """Without a backend the driver cannot work: say why once; the loader skips it."""
    print(f"tessera: emulated Mali driver unavailable: {reason}", file=sys.stderr)
    ffi.def_extern(name="tessera_icd_negotiate")(lambda pVersion: vk.VK_ERROR_INCOMPATIBLE_DRIVER)
    ffi.def_extern(name="tessera_icd_gipa")(lambda inst, pName: ffi.NULL)
    ffi.def_extern(name="tessera_icd_gpdpa")(lambda inst, pName: ffi.NULL)

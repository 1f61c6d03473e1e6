"""Entry of the layer: runs once, inside the application, when the shim loads.

Reads the settings, registers every hook module, binds the shim's callbacks
and its GetProcAddr functions. Called by the shim's init code as
`install(ffi, lib)`; nothing here runs at import time.
"""
from __future__ import annotations

from tessera.vkapi.dispatch import HookSet, guarded
from tessera.vkapi.log import HookErrors, configure

from . import chain, dispatches
from .settings import LayerSettings
from .shim_spec import HOOKS
from .state import LayerState
from .tagging import Labeller


class InjectedFault(RuntimeError):
    """Raised on purpose by hooks listed in TESSERA_LAYER_FAULT."""


def install(ffi, lib) -> None:
    settings = LayerSettings.from_environ()
    log = configure("layer", settings.log)
    errors = HookErrors(log)
    hooks = HookSet(errors)
    state = LayerState(ffi)
    chain.register(hooks, state, ffi)
    dispatches.register(hooks, Labeller(ffi))
    for name in settings.fault_commands:
        hooks.before(name)(_raise_injected)
    pointers = hooks.install(ffi, lib, state.owner_of, HOOKS)
    gipa, gdpa = chain.make_proc_addr(ffi, state, pointers)
    ffi.def_extern(name="tessera_layer_gipa")(guarded(errors, "vkGetInstanceProcAddr", gipa, ffi.NULL))
    ffi.def_extern(name="tessera_layer_gdpa")(guarded(errors, "vkGetDeviceProcAddr", gdpa, ffi.NULL))
    log.info("layer installed: %d hooks", len(pointers))


def _raise_injected(*args):
    raise InjectedFault("fault injected by TESSERA_LAYER_FAULT")

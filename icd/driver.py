"""The driver's shared context: handed to every hook module at install time."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi.dispatch import HookSet

from .backend import Backend
from .objects import Objects
from .profiles import GpuProfile


@dataclass
class Driver:
    ffi: Any
    lib: Any
    hooks: HookSet
    objects: Objects
    backend: Backend
    profile: GpuProfile
    timeline: Any = None                          # the emulated timeline (timeline.Timeline)
    c_submits: bool = True                        # submits that need no Python skip it (submit.py)
    submit_ledger: Any = None                     # vkapi.submits.SubmitLedger (submit.py)
    pointers: dict = field(default_factory=dict)   # command -> our hook (PFN_vkVoidFunction)
    instrumentation_setup: Any = None             # instrumentation.py: Device -> its state, when the feature is on
    instrumentation_teardown: Any = None          # instrumentation.py: Device -> None, before it is destroyed
    regions_setup: Any = None                     # regions.py: Device -> None, when the feature is on
    regions_teardown: Any = None                  # regions.py: Device -> None, before it is destroyed
    tensors_teardown: Any = None                  # tensor_descriptors.py: Device -> None, before it is destroyed

"""The driver's shared context: handed to every hook module at install time."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi.dispatch import HookSet

from .backend import Backend
from .feature import Feature
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
    submit_ledger: Any = None                     # vkapi.submits.SubmitLedger of the C submit path (submit.py)
    measured_counters: bool = False               # TESSERA_COUNTERS=measured (measured_counters.py)
    pointers: dict = field(default_factory=dict)   # command -> our hook (PFN_vkVoidFunction)
    # the features with a device lifecycle, in the order they are created (destroyed in reverse): icd/feature.py
    features: list[Feature] = field(default_factory=list)

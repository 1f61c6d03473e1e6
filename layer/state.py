"""The layer's dispatch state: instances and devices keyed by dispatch key.

The dispatch key of a dispatchable handle is the loader's dispatch-table
pointer stored in its first word; a physical device shares its instance's
key, and queues and command buffers share their device's key. The maps are
written only by create/destroy hooks (under a lock) and read lock-free on
every intercepted call (dict reads are atomic under the GIL).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi.dispatch import DispatchTable


@dataclass
class InstanceState:
    handle: Any
    next: DispatchTable
    next_gipa: Any                 # PFN_vkGetInstanceProcAddr of the next element
    enabled_extensions: frozenset[str]


@dataclass
class DeviceState:
    handle: Any
    next: DispatchTable
    next_gdpa: Any                 # PFN_vkGetDeviceProcAddr of the next element
    instance: InstanceState
    enabled_extensions: frozenset[str]
    extra: dict = field(default_factory=dict)


class LayerState:
    def __init__(self, ffi) -> None:
        self.ffi = ffi
        self.instances: dict[Any, InstanceState] = {}
        self.devices: dict[Any, DeviceState] = {}
        self.lock = threading.Lock()

    def key(self, handle) -> int:
        return int(self.ffi.cast("uintptr_t *", handle)[0])

    def owner_of(self, handle) -> InstanceState | DeviceState:
        k = int(self.ffi.cast("uintptr_t *", handle)[0])
        owner = self.devices.get(k) or self.instances.get(k)
        if owner is None:
            raise KeyError(f"handle {handle} has no known dispatch key")
        return owner

    def instance_of(self, handle) -> InstanceState:
        return self.instances[self.key(handle)]

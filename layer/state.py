"""The layer's state: instances and devices keyed by dispatch key, and the
process-wide session (transport, counters).

The dispatch key of a dispatchable handle is the loader's dispatch-table
pointer stored in its first word; a physical device shares its instance's
key, and queues and command buffers share their device's key. The maps are
written by create/destroy hooks (under a lock) and read lock-free on every
intercepted call (dict reads are atomic under the GIL).
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from tessera.vkapi.dispatch import DispatchTable
from tessera.vkapi.resources import Resources

from .trackers import CommandBufferTracker, QueueTracker


@dataclass
class InstanceState:
    handle: Any
    next: DispatchTable
    next_gipa: Any                 # PFN_vkGetInstanceProcAddr of the next element
    enabled_extensions: frozenset[str]


@dataclass
class DeviceState:
    handle: Any
    address: int
    next: DispatchTable
    next_gdpa: Any                 # PFN_vkGetDeviceProcAddr of the next element
    instance: InstanceState
    physical: Any
    enabled_extensions: frozenset[str]
    emulated_extensions: frozenset[str] = frozenset()   # enabled by the app, provided by the layer
    res: Resources = field(default_factory=Resources)
    command_buffers: dict[int, CommandBufferTracker] = field(default_factory=dict)
    queues: dict[int, QueueTracker] = field(default_factory=dict)
    pools: dict[int, set[int]] = field(default_factory=dict)     # command pool -> buffer addresses
    capture: Any = None            # indirect.CaptureBuffer, created on first use
    fences: Any = None             # vkapi.fences.Fences of the indirect captures, created on first use
    recording_table: Any = None    # tessera_device of the C recorder, made with the first command buffer
    allocations: Any = None        # allocations.DeviceAllocations, made with the first vkAllocateMemory
    announced: tuple | None = None  # the DEVICE message's arguments (chain.py), sent again with `allocations`
    swapchains: dict[int, tuple[int, ...]] = field(default_factory=dict)   # swapchain -> its images (queues.py)
    descriptors: Any = None        # descriptors.DescriptorState: sets and templates (--content)


class Session:
    """Process-wide counters and the transport (tagIDs, submitIDs and frames are per process).

    `next_submit` and `set_frame` are the shim's C counter and frame (vkapi/submits.py), which
    submits made in C use too; without them (tests), Python's own."""

    def __init__(self, transport, next_submit: Callable[[], int] | None = None,
                 set_frame: Callable[[int], None] | None = None) -> None:
        self.transport = transport
        self.next_submit = next_submit or itertools.count(1).__next__    # atomic under the GIL
        self._set_frame = set_frame or (lambda frame: None)
        self._frame = 0

    @property
    def frame(self) -> int:
        return self._frame

    @frame.setter
    def frame(self, number: int) -> None:
        self._frame = number
        self._set_frame(number)


class LayerState:
    def __init__(self, ffi, session: Session) -> None:
        self.ffi = ffi
        self.session = session
        self.instances: dict[Any, InstanceState] = {}
        self.devices: dict[Any, DeviceState] = {}
        self.lock = threading.Lock()
        self.track_descriptors = False     # --content: workloads name the images they read (descriptors.py)

    def key(self, handle) -> int:
        return int(self.ffi.cast("uintptr_t *", handle)[0])

    def address(self, handle) -> int:
        return int(self.ffi.cast("uintptr_t", handle))

    def owner_of(self, handle) -> InstanceState | DeviceState:
        k = int(self.ffi.cast("uintptr_t *", handle)[0])
        owner = self.devices.get(k) or self.instances.get(k)
        if owner is None:
            raise KeyError(f"handle {handle} has no known dispatch key")
        return owner

    def instance_of(self, handle) -> InstanceState:
        return self.instances[self.key(handle)]

    def command_buffer(self, dev: DeviceState, handle) -> CommandBufferTracker:
        return dev.command_buffers[int(self.ffi.cast("uintptr_t", handle))]

"""Emulated objects of the driver and the handle map that finds them.

Dispatchable handles are the backend's own (the loader writes its dispatch
pointer into them, as it does for the backend). Every object the driver
tracks is an `IcdObject` keyed by handle address; look-ups check the type.
Written by create/destroy hooks under `Objects.lock`; read lock-free.

Objects the driver emulates itself (tensors, tensor views, shader
instrumentation objects, tensor descriptor update templates) are
`EmulatedObject`s: non-dispatchable handles of the driver's own, listed in
their device's `emulated` map from create to destroy, so that commands naming
an object by (type, handle) find them and never pass them to the backend
(object_names.py).

Feature state: a feature keeps its own state on an object in a typed slot
(vkapi/slots.py: `cb.slot(IndirectPending)`, `dev.peek(SnapshotMemory)`); a
command buffer drops its slots when it is reset. State that several modules
share is a declared field below, commented with its owner.
"""
from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from tessera.vkapi.dispatch import DispatchTable
from tessera.vkapi.resources import Resources
from tessera.vkapi.slots import HasSlots


class IcdError(Exception):
    """A failure with the VkResult the command returns."""

    def __init__(self, result: int, message: str) -> None:
        super().__init__(message)
        self.result = result


@dataclass(eq=False)
class IcdObject(HasSlots):
    """A tracked object; features keep their state on it in slots (HasSlots)."""
    handle: Any


class EmulatedObject:
    """Base of the objects this driver emulates: their VkObjectType, and what commands that name an
    object store on it (object_names.py): its debug name, its tag, its private data per slot.
    Subclasses set OBJECT_TYPE; `handle` is theirs (an int)."""
    OBJECT_TYPE: ClassVar[int] = 0
    handle: int
    # class-level defaults: set on the instance by the naming commands
    debug_name: str | None = None
    tag: tuple[int, bytes] | None = None            # (tagName, tag bytes)
    private_data: dict[int, int] | None = None      # VkPrivateDataSlot -> value


def adopt(device: "Device", obj: EmulatedObject) -> None:
    """An emulated object was created on `device`: the naming commands may name it."""
    device.emulated[int(obj.handle)] = obj


def release(device: "Device", handle) -> None:
    """An emulated object is destroyed: its handle is no longer the device's."""
    device.emulated.pop(int(handle), None)


@dataclass(eq=False)
class Instance(IcdObject):
    next: DispatchTable
    api_version: int
    physical_devices: list = field(default_factory=list)


@dataclass(eq=False)
class PhysicalDevice(IcdObject):
    instance: Instance
    extensions: dict[str, int] | None = None   # backend's device extensions -> spec version
    api_version: int = 0                       # backend's apiVersion
    extension_list: Any = None                 # vkapi.enumerate.ExtensionList: what the device lists
    device_profile: Any = None                 # device_profile.DeviceProfile: the real device it reports, if any

    @property
    def next(self) -> DispatchTable:
        return self.instance.next


@dataclass(eq=False)
class Device(IcdObject):
    next: DispatchTable
    physical: PhysicalDevice
    enabled_extensions: frozenset[str]
    emulated_extensions: frozenset[str]        # enabled by the app, provided by this driver
    object_names: dict[int, str] = field(default_factory=dict)   # backend objects' debug names, by handle
    emulated: dict[int, EmulatedObject] = field(default_factory=dict)   # this driver's own objects, by handle
    res: "Resources" = field(default_factory=lambda: Resources())
    recording_table: Any = None                # tessera_device of the C recorder, made with the first buffer
    defers_begin: bool = True                  # every feature on for it lets C begin and end buffers (feature.py)
    instrumentation: Any = None                # instrumentation.objects.DeviceInstrumentation when the feature is on
    # application pipeline layout -> (set layouts, push-constant ranges), counter_memory.track_pipeline_layouts
    pipeline_layouts: dict = field(default_factory=dict)
    tensors: Any = None                        # tensors.resources.DeviceTensors when VK_ARM_tensors is enabled
    fences: Any = None                         # vkapi.fences.Fences, made with the first submit that needs one


@dataclass(eq=False)
class Queue(IcdObject):
    device: Device
    family: int
    index: int
    # Debug-label stack of the queue (queue and command labels); the timeline's worker owns it.
    labels: list[str] = field(default_factory=list)

    @property
    def next(self) -> DispatchTable:
        return self.device.next


class CommandBufferState(enum.Enum):
    """Vulkan spec 6.1 "Command Buffer Lifecycle"."""
    INITIAL = "initial"
    RECORDING = "recording"
    EXECUTABLE = "executable"
    INVALID = "invalid"


@dataclass(eq=False)
class CommandBuffer(IcdObject):
    device: Device
    pool: int
    level: int
    state: CommandBufferState = CommandBufferState.INITIAL
    # The shadow recording, in command order: typed ops (vkapi/ops.py; recording.py lists them).
    ops: list = field(default_factory=list)
    compute_pipeline: Any = None    # bound at record time
    graphics_pipeline: Any = None
    ray_tracing_pipeline: Any = None
    address: int = 0                # the handle as an integer (trace command_buffer_handle)
    instrumentation: Any = None     # the active shader instrumentation object (icd/instrumentation/)
    needs_completion: bool = False  # holds work timed only after execution (recording.Draw.at_completion)
    # Shader objects bound (vkCmdBindShadersEXT): stage bit -> vkapi.pipelines.Pipeline. Written by
    # recording.py (bind_shaders), read by instrumentation/recording.py (shaders_bound). Kept across
    # a reset, as it always was (an application rebinds every stage it draws with).
    shader_objects: dict[int, Any] = field(default_factory=dict)

    @property
    def next(self) -> DispatchTable:
        return self.device.next

    def reset(self) -> None:
        self.state = CommandBufferState.INITIAL
        self.ops = []   # a new list: the timeline's worker may still walk the old one (timeline.batch)
        self.needs_completion = False
        self.compute_pipeline = self.graphics_pipeline = None
        self.instrumentation = None
        self.slots.clear()   # the features' state of the recording that ended (vkapi/slots.py)


T = TypeVar("T", bound=IcdObject)


class Objects:
    def __init__(self, ffi) -> None:
        self.ffi = ffi
        self.by_address: dict[int, IcdObject] = {}
        self.pools: dict[int, set[int]] = {}   # command pool -> command buffer addresses
        self.lock = threading.Lock()

    def address(self, handle) -> int:
        return int(self.ffi.cast("uintptr_t", handle))

    def add(self, obj: IcdObject) -> IcdObject:
        with self.lock:
            self.by_address[self.address(obj.handle)] = obj
        return obj

    def remove(self, handle) -> IcdObject | None:
        with self.lock:
            return self.by_address.pop(self.address(handle), None)

    def get(self, handle, kind: type[T]) -> T:
        obj = self.by_address.get(int(self.ffi.cast("uintptr_t", handle)))
        if not isinstance(obj, kind):
            raise IcdError(-3, f"{handle} is not a known {kind.__name__} (found {type(obj).__name__})")
        return obj

    def owner(self, handle) -> IcdObject:
        """Any tracked dispatchable object: the resolver of observer hooks."""
        return self.by_address[int(self.ffi.cast("uintptr_t", handle))]

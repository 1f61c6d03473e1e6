"""A driver feature's part in a device's life, run by icd/device.py from one list (`Driver.features`).

A feature (regions, instrumentation, tensors, …) is an object whose `before_`/`after_`/`replace_`
methods HookSet.bind registers; when it also keeps something per device, it subclasses `Feature`
and its module's `register` appends it to `drv.features`. icd/entry.py registers the features in
the order below; device.py runs the steps, for one device:

    vkCreateDevice   for each feature, in list order: `wants(request)`; if it does, `enable(request)`
                     the backend's vkCreateDevice
                     for each feature that wanted the device, in list order: `created(dev, request)`;
                     one that raises means the feature cannot be given: the error is reported
                     ("setting up <label>; device not created"), the features created before it
                     torn down (`destroyed(dev)`, in reverse order), the device destroyed, and
                     vkCreateDevice returns VK_ERROR_INITIALIZATION_FAILED
    vkDestroyDevice  for every feature, in reverse list order: `destroyed(dev)` (also the features
                     that were off for the device: they find nothing of theirs and return),
                     then the backend's vkDestroyDevice

So a feature is created after, and destroyed before, the ones listed before it: the submits come
last (at destroy they settle first: every submit placed and its fences gone before any feature's
objects go), tensors' descriptors after tensors (their sets go before the tensors' buffers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

if TYPE_CHECKING:
    from .objects import Device, PhysicalDevice


@dataclass
class DeviceRequest:
    """One vkCreateDevice call, as the features see it."""
    ffi: Any
    phys: PhysicalDevice
    create_info: Any               # the application's VkDeviceCreateInfo (its pNext chain as given)
    info: Any                      # the driver's copy going to the backend: `enable` may change it
    names: frozenset[str]          # the extensions the application enabled (the emulated ones too)
    keep: list                     # what `enable` makes stays alive until the backend's call returns


def enable_core_features(ffi, info, keep: list, *members: str) -> None:
    """Turn on the VkPhysicalDeviceFeatures `members` in `info`, the driver's copy of a
    VkDeviceCreateInfo going to the backend, for what a feature makes the backend do. The application's
    structures are never written: a VkPhysicalDeviceFeatures2 in the chain (the application's own unless
    another feature rebuilt the chain) is set in a copy of the chain, pEnabledFeatures in a copy of it;
    `keep` holds the copies until the backend's call returns."""
    nodes = list(structs.chain(ffi, info.pNext))
    if any(node.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 for node in nodes):
        info.pNext = structs.rebuild_chain(ffi, nodes, keep)
        f2 = structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                          "VkPhysicalDeviceFeatures2 *")
        features = f2.features
    else:
        features = ffi.new("VkPhysicalDeviceFeatures *")
        keep.append(features)
        if info.pEnabledFeatures != ffi.NULL:
            ffi.memmove(features, info.pEnabledFeatures, ffi.sizeof("VkPhysicalDeviceFeatures"))
        info.pEnabledFeatures = features
    for member in members:
        setattr(features, member, vk.VK_TRUE)


class Feature:
    """The lifecycle steps a feature may define (each does nothing unless overridden)."""

    label = "a driver feature"     # names the feature in the error when `created` fails
    # Whether, on a device it is on for, its begin and end hooks of a primary buffer may run after the calls
    # (vkapi/lifecycle.py: C makes them for re-recordings). False for a feature that inserts commands there or
    # sends the buffer's commands to Python from its begin.
    defers_begin = True

    def wants(self, request: DeviceRequest) -> bool:
        """Whether the feature is on for the device being created."""
        return True

    def enable(self, request: DeviceRequest) -> None:
        """Before the backend's vkCreateDevice: adjust `request.info` for what the feature needs."""

    def created(self, dev: Device, request: DeviceRequest) -> None:
        """After the backend made the device: the feature's state for it; raise when it cannot be."""

    def destroyed(self, dev: Device) -> None:
        """Before the backend's vkDestroyDevice: destroy what the feature made for the device."""

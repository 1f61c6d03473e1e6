"""Instance and physical-device hooks: creation, enumeration, identity, extensions.

The enumerations, vkGetPhysicalDeviceProperties and the device extension list are answered here
the first time; their answers are fixed for the instance or physical device, so the shim's C keeps
them and answers later calls itself (`answered` in vkapi/intercepts.py, vkapi/answers.py) until
vkDestroyInstance forgets them.

Where the GPU has a real device's Vulkan profile (icd/device_profile.py), every physical-device query
reports it clamped to the backend: extensions, features, properties, formats, image formats and queue
families; identity.py then writes the Mali identity over the answer."""
from __future__ import annotations

import sys

from tessera.vkapi import structs
from tessera.vkapi.commands import UNTRACKED_WORKLOAD_EXTENSIONS
from tessera.vkapi.dispatch import is_device_command
from tessera.vkapi.vkconst import vk

from . import device_profile, identity
from .driver import Driver
from tessera.vkapi.enumerate import ExtensionList, fill_extensions, query_extensions
from .objects import Instance, PhysicalDevice
from .shim_spec import CALLS, HOOKS

GLOBAL_COMMANDS = frozenset({"vkCreateInstance", "vkEnumerateInstanceExtensionProperties",
                             "vkEnumerateInstanceLayerProperties", "vkEnumerateInstanceVersion"})
INSTANCE_COMMANDS = sorted({n for n in (*HOOKS, *CALLS) if not is_device_command(n) and n not in GLOBAL_COMMANDS}
                           | {"vkGetDeviceProcAddr"})


def backend_global(drv: Driver, name: str):
    p = drv.backend.gipa(drv.ffi.NULL, name.encode())
    return drv.ffi.cast(f"PFN_{name}", p) if p != drv.ffi.NULL else None


def physical_device_info(drv: Driver, phys: PhysicalDevice) -> PhysicalDevice:
    """Backend extensions and apiVersion of a physical device, and the device profile it reports,
    queried once."""
    if phys.extensions is None:
        ffi = drv.ffi
        backend = query_extensions(ffi, phys.next.vkEnumerateDeviceExtensionProperties, phys.handle, ffi.NULL)
        phys.extensions = {n: v for n, v in backend.items() if n not in UNTRACKED_WORKLOAD_EXTENSIONS}
        props = ffi.new("VkPhysicalDeviceProperties *")
        phys.next.vkGetPhysicalDeviceProperties(phys.handle, props)
        phys.api_version = props.apiVersion
        phys.device_profile = device_profile.of(drv)
    return phys


def device_extensions(drv: Driver, phys: PhysicalDevice) -> dict[str, int]:
    """The device extensions the emulated device reports: its profile's the backend has, or without a
    profile all the backend's; plus those Tessera provides itself."""
    phys = physical_device_info(drv, phys)
    if phys.device_profile is not None:
        return phys.device_profile.extensions(phys.extensions, phys.api_version)
    return {**identity.EMULATED_DEVICE_EXTENSIONS, **phys.extensions}


class Instances:
    """Instance and physical-device hooks: one method per command (HookSet.bind); the objects they make
    live in the driver's `Objects`."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi, self.hooks, self.objects = drv, drv.ffi, drv.hooks, drv.objects

    def replace_vkEnumerateInstanceExtensionProperties(self, pLayerName, pPropertyCount, pProperties):
        ffi = self.ffi
        backend = backend_global(self.drv, "vkEnumerateInstanceExtensionProperties")
        if pLayerName != ffi.NULL:
            return backend(pLayerName, pPropertyCount, pProperties)
        exts = {**identity.EMULATED_INSTANCE_EXTENSIONS, **query_extensions(ffi, backend, ffi.NULL)}
        return fill_extensions(ffi, exts, pPropertyCount, pProperties)

    def replace_vkCreateInstance(self, pCreateInfo, pAllocator, pInstance):
        ffi, drv = self.ffi, self.drv
        try:   # the profile's answers, built on the first instance (its file was read with the settings)
            device_profile.of(drv)
        except ValueError as e:   # a profile it cannot apply: no device at all rather than a wrong one
            print(f"tessera: the emulated GPU's Vulkan profile is unusable: {e}", file=sys.stderr)
            return vk.VK_ERROR_INITIALIZATION_FAILED
        keep: structs.Keepalive = []
        backend_exts = query_extensions(ffi, backend_global(drv, "vkEnumerateInstanceExtensionProperties"), ffi.NULL)
        names = structs.extension_names(ffi, pCreateInfo)
        info = pCreateInfo
        if any(n not in backend_exts for n in names):
            info = structs.with_extensions(ffi, "VkInstanceCreateInfo *", pCreateInfo,
                                           [n for n in names if n in backend_exts], keep)
        result = backend_global(drv, "vkCreateInstance")(info, pAllocator, pInstance)
        if result != vk.VK_SUCCESS:
            return result
        handle = pInstance[0]
        # Vulkan spec 4.2 "Instances": pApplicationInfo may be NULL, and an apiVersion of 0 means 1.0.0.
        app = pCreateInfo.pApplicationInfo
        api = (app.apiVersion if app != ffi.NULL else 0) or vk.VK_API_VERSION_1_0
        self.objects.add(Instance(handle, self.hooks.dispatch_table(ffi, drv.backend.gipa, handle, INSTANCE_COMMANDS),
                                  api))
        return result

    def replace_vkDestroyInstance(self, instance, pAllocator):
        if instance == self.ffi.NULL:
            return
        lib, objects = self.drv.lib, self.objects
        # The answers the shim's C keeps (vkapi/answers.py) die with the handles: the backend may
        # hand out the same addresses again once it has freed them.
        lib.tessera_answers_forget(instance)
        inst = objects.get(instance, Instance)
        for phys in inst.physical_devices:
            lib.tessera_answers_forget(phys.handle)
        inst.next.vkDestroyInstance(instance, pAllocator)
        for phys in inst.physical_devices:
            objects.remove(phys.handle)
        objects.remove(instance)

    def track(self, inst: Instance, handle) -> None:
        if all(p.handle != handle for p in inst.physical_devices):
            phys = PhysicalDevice(handle, inst)
            inst.physical_devices.append(phys)
            self.objects.add(phys)

    def after_vkEnumeratePhysicalDevices(self, inst, result, instance, pCount, pPhysicalDevices):
        if result in (vk.VK_SUCCESS, vk.VK_INCOMPLETE) and pPhysicalDevices != self.ffi.NULL:
            for i in range(pCount[0]):
                self.track(inst, pPhysicalDevices[i])

    def after_vkEnumeratePhysicalDeviceGroups(self, inst, result, instance, pCount, pGroups):
        if result in (vk.VK_SUCCESS, vk.VK_INCOMPLETE) and pGroups != self.ffi.NULL:
            for i in range(pCount[0]):
                for j in range(pGroups[i].physicalDeviceCount):
                    self.track(inst, pGroups[i].physicalDevices[j])

    def after_vkGetPhysicalDeviceProperties(self, phys, result, physicalDevice, pProperties):
        if (dp := device_profile.of(self.drv)) is not None:
            dp.apply_properties(self.ffi, pProperties)
        identity.apply_properties(self.ffi, pProperties, self.drv.profile)

    def after_vkGetPhysicalDeviceProperties2(self, phys, result, physicalDevice, pProperties):
        if (dp := device_profile.of(self.drv)) is not None:
            dp.apply_properties2(self.ffi, pProperties)
        identity.apply_properties2(self.ffi, pProperties, self.drv.profile)

    def after_vkGetPhysicalDeviceFeatures(self, phys, result, physicalDevice, pFeatures):
        if (dp := device_profile.of(self.drv)) is not None:
            dp.apply_features(self.ffi, pFeatures)

    def after_vkGetPhysicalDeviceFeatures2(self, phys, result, physicalDevice, pFeatures):
        if (dp := device_profile.of(self.drv)) is not None:
            dp.apply_features2(self.ffi, pFeatures)
        identity.apply_features2(self.ffi, pFeatures)

    def after_vkGetPhysicalDeviceFormatProperties(self, phys, result, physicalDevice, format, pFormatProperties):
        if (dp := device_profile.of(self.drv)) is not None:
            dp.apply_format(self.ffi, format, pFormatProperties)

    def after_vkGetPhysicalDeviceFormatProperties2(self, phys, result, physicalDevice, format, pFormatProperties):
        if (dp := device_profile.of(self.drv)) is not None:
            dp.apply_format2(self.ffi, format, pFormatProperties)

    def replace_vkGetPhysicalDeviceImageFormatProperties(self, physicalDevice, format, type, tiling, usage, flags,
                                                         pImageFormatProperties):
        phys = self.objects.get(physicalDevice, PhysicalDevice)
        dp = device_profile.of(self.drv)
        if dp is not None and not dp.image_format_supported(format, tiling, usage):
            return vk.VK_ERROR_FORMAT_NOT_SUPPORTED
        return phys.next.vkGetPhysicalDeviceImageFormatProperties(physicalDevice, format, type, tiling, usage,
                                                                   flags, pImageFormatProperties)

    def replace_vkGetPhysicalDeviceImageFormatProperties2(self, physicalDevice, pImageFormatInfo,
                                                          pImageFormatProperties):
        phys = self.objects.get(physicalDevice, PhysicalDevice)
        dp = device_profile.of(self.drv)
        info = pImageFormatInfo
        if dp is not None and not dp.image_format_supported(info.format, info.tiling, info.usage):
            return vk.VK_ERROR_FORMAT_NOT_SUPPORTED
        return phys.next.vkGetPhysicalDeviceImageFormatProperties2(physicalDevice, pImageFormatInfo,
                                                                    pImageFormatProperties)

    def after_vkGetPhysicalDeviceQueueFamilyProperties(self, phys, result, physicalDevice, pCount, pProperties):
        if (dp := device_profile.of(self.drv)) is not None:
            pCount[0] = dp.family_count(pCount[0])
            if pProperties != self.ffi.NULL:
                for i in range(pCount[0]):
                    dp.apply_queue_family(i, pProperties[i])

    def after_vkGetPhysicalDeviceQueueFamilyProperties2(self, phys, result, physicalDevice, pCount, pProperties):
        if (dp := device_profile.of(self.drv)) is not None:
            pCount[0] = dp.family_count(pCount[0])
            if pProperties != self.ffi.NULL:
                for i in range(pCount[0]):
                    dp.apply_queue_family(i, pProperties[i].queueFamilyProperties)

    def replace_vkEnumerateDeviceExtensionProperties(self, physicalDevice, pLayerName, pPropertyCount, pProperties):
        ffi = self.ffi
        phys = self.objects.get(physicalDevice, PhysicalDevice)
        if pLayerName != ffi.NULL:
            return phys.next.vkEnumerateDeviceExtensionProperties(physicalDevice, pLayerName,
                                                                   pPropertyCount, pProperties)
        if phys.extension_list is None:   # fixed for the physical device's lifetime
            phys.extension_list = ExtensionList(ffi, device_extensions(self.drv, phys))
        return phys.extension_list.fill(pPropertyCount, pProperties)


def register(drv: Driver) -> None:
    drv.hooks.bind(Instances(drv))

"""Device hooks: creation (stripping what the backend does not know), queues, GetDeviceProcAddr.

With a device profile (icd/device_profile.py), vkCreateDevice fails as the device would: an extension
the emulated device does not list gives VK_ERROR_EXTENSION_NOT_PRESENT, a feature it does not report
VK_ERROR_FEATURE_NOT_PRESENT (Vulkan spec, vkCreateDevice), queues beyond its queue families
VK_ERROR_INITIALIZATION_FAILED."""
from __future__ import annotations

import functools

from tessera.vkapi import intercepts, structs
from tessera.vkapi.commands import track_device_queues
from tessera.vkapi.dispatch import canonical, is_device_command
from tessera.vkapi.vkconst import vk

from . import device_profile, identity
from .driver import Driver
from .feature import DeviceRequest, Feature
from .instance import physical_device_info
from .objects import Device, PhysicalDevice, Queue
from .shim_spec import CALLS, HOOKS

DEVICE_COMMANDS = sorted(n for n in (*HOOKS, *CALLS) if is_device_command(n))
# Commands this driver implements itself when the backend lacks them (the intercept table's `emulated`).
EMULATED_COMMANDS = intercepts.emulated(intercepts.ICD)


def _api(version: int) -> tuple[int, int]:
    return ((version >> 22) & 0x7F, (version >> 12) & 0x3FF)


def backend_knows(entry, phys: PhysicalDevice) -> bool:
    """Whether a registry struct (name, core version, extensions) is known to the backend."""
    _, version, extensions = entry
    if version is not None and tuple(version) <= _api(phys.api_version):
        return True
    return any(e in phys.extensions for e in extensions)


def strip_chain(ffi, pnext, phys: PhysicalDevice, keep: structs.Keepalive, log=None):
    """The pNext chain without structs the backend does not know; the original if nothing goes.

    Structs newer than our registry cannot be sized, so they cannot be copied:
    they are dropped with a warning (the backend predates them too).
    """
    nodes = list(structs.chain(ffi, pnext))
    known = [n for n in nodes if n.sType in structs.LOADER_STRUCTS
             or ((e := vk.STRUCTS.get(n.sType)) is not None and backend_knows(e, phys))]
    if len(known) == len(nodes):
        return pnext
    if log is not None:
        dropped = [structs.struct_name(n.sType) or f"sType {n.sType}" for n in nodes if n not in known]
        log.info("vkCreateDevice: backend does not know %s: not passed down", ", ".join(dropped))
    return structs.rebuild_chain(ffi, known, keep)


@functools.cache
def command_names(canonical_name: str) -> tuple[str, ...]:
    """Every registry name of a command (its aliases), from the generated constants."""
    return tuple(n for n, (c, _) in vk.COMMANDS.items() if c == canonical_name)


class Devices:
    """Device hooks: one method per command (HookSet.bind); the devices and queues they make live in
    the driver's `Objects`."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi, self.hooks, self.objects = drv, drv.ffi, drv.hooks, drv.objects

    def replace_vkCreateDevice(self, physicalDevice, pCreateInfo, pAllocator, pDevice):
        ffi, drv, objects = self.ffi, self.drv, self.objects
        phys = physical_device_info(drv, objects.get(physicalDevice, PhysicalDevice))
        keep: structs.Keepalive = []
        names = structs.extension_names(ffi, pCreateInfo)
        passed = names   # what the backend is asked to enable
        dp = device_profile.of(drv)
        if dp is not None:
            if (refused := self.refused(dp, phys, pCreateInfo, names)) is not None:
                return refused
            passed = dp.backend_names(names, phys.extensions, phys.api_version)
        emulated = frozenset(n for n in passed if n not in phys.extensions)
        if not emulated <= identity.EMULATED_DEVICE_EXTENSIONS.keys():
            return vk.VK_ERROR_EXTENSION_NOT_PRESENT
        info = structs.with_extensions(ffi, "VkDeviceCreateInfo *", pCreateInfo,
                                       [n for n in passed if n not in emulated], keep)
        info.pNext = strip_chain(ffi, pCreateInfo.pNext, phys, keep, drv.hooks.errors.log)
        request = DeviceRequest(ffi, phys, pCreateInfo, info, frozenset(names), keep)
        on = []   # the features that want the device (icd/feature.py), in list order
        for feature in drv.features:
            if feature.wants(request):
                feature.enable(request)
                on.append(feature)
        result = phys.next.vkCreateDevice(physicalDevice, info, pAllocator, pDevice)
        if result != vk.VK_SUCCESS:
            return result
        handle = pDevice[0]
        table = self.hooks.dispatch_table(ffi, phys.instance.next.vkGetDeviceProcAddr, handle, DEVICE_COMMANDS)
        dev = objects.add(Device(handle, table, phys, frozenset(names), emulated,
                                 defers_begin=all(feature.defers_begin for feature in on)))
        created: list[Feature] = []
        for feature in on:
            if not self.set_up(dev, table, pAllocator, feature, request, created):
                return vk.VK_ERROR_INITIALIZATION_FAILED
            created.append(feature)
        return result

    def refused(self, dp: device_profile.DeviceProfile, phys: PhysicalDevice, info, names) -> int | None:
        """The error vkCreateDevice returns on the profiled device, or None: extensions, features and
        queues checked against what the emulated device reports."""
        ffi, log = self.ffi, self.drv.hooks.errors.log
        listed = dp.extensions(phys.extensions, phys.api_version)
        absent = [n for n in names if n not in listed]
        if absent:
            log.warning("vkCreateDevice: %s: not an extension of %s", ", ".join(absent), self.drv.profile.device_name)
            return vk.VK_ERROR_EXTENSION_NOT_PRESENT
        missing = dp.missing_features(ffi, phys, info, frozenset(names))
        if missing:
            log.warning("vkCreateDevice: %s: not a feature of %s", ", ".join(missing), self.drv.profile.device_name)
            return vk.VK_ERROR_FEATURE_NOT_PRESENT
        count = ffi.new("uint32_t *")
        phys.next.vkGetPhysicalDeviceQueueFamilyProperties(phys.handle, count, ffi.NULL)
        families = ffi.new("VkQueueFamilyProperties[]", count[0])
        phys.next.vkGetPhysicalDeviceQueueFamilyProperties(phys.handle, count, families)
        reported = dp.family_count(count[0])
        for i in range(info.queueCreateInfoCount):
            q = info.pQueueCreateInfos[i]
            if q.queueFamilyIndex < reported:
                dp.apply_queue_family(q.queueFamilyIndex, families[q.queueFamilyIndex])
            if q.queueFamilyIndex >= reported or q.queueCount > families[q.queueFamilyIndex].queueCount:
                log.warning("vkCreateDevice: %d queue(s) of family %d: more than %s reports", q.queueCount,
                            q.queueFamilyIndex, self.drv.profile.device_name)
                return vk.VK_ERROR_INITIALIZATION_FAILED
        return None

    def set_up(self, dev: Device, table, pAllocator, feature: Feature, request: DeviceRequest,
               created: list[Feature]) -> bool:
        """Set up a feature the device enabled; False when it cannot be: then the features `created`
        before it are torn down, in reverse order, and the device is destroyed."""
        try:
            feature.created(dev, request)
            return True
        except Exception:   # the feature was asked for and cannot be given: no device
            self.hooks.errors.report("vkCreateDevice", f"setting up {feature.label}; device not created")
        for earlier in reversed(created):
            try:
                earlier.destroyed(dev)
            except Exception:   # one failing teardown leaves the others theirs
                self.hooks.errors.report("vkCreateDevice", f"tearing down {earlier.label} of a device not created")
        self.objects.remove(dev.handle)
        table.vkDestroyDevice(dev.handle, pAllocator)
        return False

    def replace_vkDestroyDevice(self, device, pAllocator):
        if device == self.ffi.NULL:
            return
        drv, objects = self.drv, self.objects
        dev = objects.get(device, Device)
        for feature in reversed(drv.features):   # the submits settle first (icd/feature.py)
            feature.destroyed(dev)
        dev.next.vkDestroyDevice(device, pAllocator)
        with objects.lock:
            for address, obj in list(objects.by_address.items()):
                if getattr(obj, "device", None) is dev:
                    del objects.by_address[address]
        objects.remove(device)

    def track_queue(self, dev: Device, handle, family: int, index: int) -> None:
        """A queue the application got (vkapi/commands.py's vkGetDeviceQueue/vkGetDeviceQueue2 hooks)."""
        objects = self.objects
        if handle != self.ffi.NULL and objects.by_address.get(objects.address(handle)) is None:
            objects.add(Queue(handle, dev, family, index))

    def replace_vkGetDeviceProcAddr(self, device, pName):
        ffi, drv = self.ffi, self.drv
        dev = self.objects.get(device, Device)
        name = canonical(ffi.string(pName).decode())
        backend_gdpa = dev.physical.instance.next.vkGetDeviceProcAddr
        if name in drv.pointers and is_device_command(name):
            if name in EMULATED_COMMANDS or getattr(dev.next, name) is not None:
                return drv.pointers[name]
            return ffi.NULL
        found = backend_gdpa(device, pName)
        if found == ffi.NULL and device_profile.of(drv) is not None:
            # an extension the device lists under the name the backend's was promoted from or to
            # (device_clamp.provider): the backend has the command under another of its names
            for alias in command_names(name):
                found = backend_gdpa(device, alias.encode())
                if found != ffi.NULL:
                    break
        return found


def register(drv: Driver) -> None:
    devices = drv.hooks.bind(Devices(drv))
    track_device_queues(drv.hooks, devices.track_queue)   # the queue hooks are vkapi/commands.py's (its row)

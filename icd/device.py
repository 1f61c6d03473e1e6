"""Device hooks: creation (stripping what the backend does not know), queues, GetDeviceProcAddr."""
from __future__ import annotations

from tessera.vkapi import intercepts, structs
from tessera.vkapi.commands import track_device_queues
from tessera.vkapi.dispatch import canonical, is_device_command
from tessera.vkapi.vkconst import vk

from . import identity, indirect_sizes, instrumentation_metrics, regions, shader_costs, submit, tensors
from .driver import Driver
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


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects

    @hooks.replace("vkCreateDevice")
    def create_device(physicalDevice, pCreateInfo, pAllocator, pDevice):
        phys = physical_device_info(drv, objects.get(physicalDevice, PhysicalDevice))
        keep: structs.Keepalive = []
        names = structs.extension_names(ffi, pCreateInfo)
        emulated = frozenset(n for n in names if n not in phys.extensions)
        if not emulated <= identity.EMULATED_DEVICE_EXTENSIONS.keys():
            return vk.VK_ERROR_EXTENSION_NOT_PRESENT
        info = structs.with_extensions(ffi, "VkDeviceCreateInfo *", pCreateInfo,
                                       [n for n in names if n not in emulated], keep)
        info.pNext = strip_chain(ffi, pCreateInfo.pNext, phys, keep, drv.hooks.errors.log)
        instrumented = instrumentation_metrics.wants_instrumentation(ffi, pCreateInfo.pNext)
        if instrumented:
            instrumentation_metrics.enable_store_features(ffi, info, keep)
        by_region = regions.wants_regions(ffi, pCreateInfo.pNext)
        if by_region:   # the counting fragment shaders use atomics
            instrumentation_metrics.enable_store_features(ffi, info, keep)
        tensor_features = tensors.wants_tensors(ffi, pCreateInfo.pNext) if tensors.EXTENSION in names else None
        if tensors.EXTENSION in names:
            tensors.enable_backend_features(ffi, info, phys, keep)
        result = phys.next.vkCreateDevice(physicalDevice, info, pAllocator, pDevice)
        if result != vk.VK_SUCCESS:
            return result
        shader_costs.warm_up()
        handle = pDevice[0]
        table = hooks.dispatch_table(ffi, phys.instance.next.vkGetDeviceProcAddr, handle, DEVICE_COMMANDS)
        dev = objects.add(Device(handle, table, phys, frozenset(names), emulated))
        if tensors.EXTENSION in names:
            dev.tensors = tensors.DeviceTensors(tensor_features or tensors.Features())
        if by_region:
            try:
                drv.regions_setup(dev)
            except Exception:   # the feature was asked for and cannot be given: no device
                drv.hooks.errors.report("vkCreateDevice", "setting up per-region counters; device not created")
                objects.remove(handle)
                table.vkDestroyDevice(handle, pAllocator)
                return vk.VK_ERROR_INITIALIZATION_FAILED
        if instrumented:
            try:
                dev.instrumentation = drv.instrumentation_setup(dev)
            except Exception:   # the feature was asked for and cannot be given: no device
                drv.hooks.errors.report("vkCreateDevice", "setting up shader instrumentation; device not created")
                objects.remove(handle)
                table.vkDestroyDevice(handle, pAllocator)
                return vk.VK_ERROR_INITIALIZATION_FAILED
        return result

    @hooks.replace("vkDestroyDevice")
    def destroy_device(device, pAllocator):
        if device == ffi.NULL:
            return
        dev = objects.get(device, Device)
        submit.before_device_destroyed(drv, dev)
        indirect_sizes.teardown(dev)
        drv.instrumentation_teardown(dev)
        drv.regions_teardown(dev)
        drv.tensors_teardown(dev)
        dev.next.vkDestroyDevice(device, pAllocator)
        with objects.lock:
            for address, obj in list(objects.by_address.items()):
                if getattr(obj, "device", None) is dev:
                    del objects.by_address[address]
        objects.remove(device)

    def track_queue(dev: Device, handle, family: int, index: int) -> None:
        if handle != ffi.NULL and objects.by_address.get(objects.address(handle)) is None:
            objects.add(Queue(handle, dev, family, index))

    track_device_queues(hooks, track_queue)

    @hooks.replace("vkGetDeviceProcAddr")
    def get_device_proc_addr(device, pName):
        dev = objects.get(device, Device)
        name = canonical(ffi.string(pName).decode())
        backend_gdpa = dev.physical.instance.next.vkGetDeviceProcAddr
        if name in drv.pointers and is_device_command(name):
            if name in EMULATED_COMMANDS or getattr(dev.next, name) is not None:
                return drv.pointers[name]
            return ffi.NULL
        return backend_gdpa(device, pName)

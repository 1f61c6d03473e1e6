"""Dispatch chains: vkCreate/Destroy Instance and Device, layer queries, GetProcAddr.

Follows the Khronos loader-layer interface (version 2): in vkCreateInstance /
vkCreateDevice the loader passes a VkLayer*CreateInfo link whose head holds
the next element's GetProcAddr; the layer advances the link, calls down, and
resolves its dispatch table from the next element right away.
"""
from __future__ import annotations

from tessera.vkapi import structs
from tessera.vkapi.dispatch import canonical, is_device_command
from tessera.vkapi.enumerate import ExtensionList, fill_extensions, query_extensions
from tessera.vkapi.vkconst import vk

from . import encoder
from .shim_spec import CALLS, HOOKS, LAYER_DEVICE_EXTENSIONS, LAYER_NAME
from .state import DeviceState, InstanceState, LayerState

LOADER_INSTANCE_CREATE_INFO = 47
LOADER_DEVICE_CREATE_INFO = 48
LAYER_LINK_INFO = 0
GLOBAL_COMMANDS = frozenset({"vkCreateInstance", "vkEnumerateInstanceExtensionProperties",
                             "vkEnumerateInstanceLayerProperties", "vkEnumerateInstanceVersion"})
# Extensions the layer needs below it to label workloads.
REQUIRED_INSTANCE_EXTENSIONS = ("VK_EXT_debug_utils",)

_NEEDED = sorted(set(HOOKS) | set(CALLS))
INSTANCE_COMMANDS = [n for n in _NEEDED if not is_device_command(n) and n not in GLOBAL_COMMANDS]
DEVICE_COMMANDS = [n for n in _NEEDED if is_device_command(n)]


def _link(ffi, pnext, stype: int, ctype: str):
    for p in structs.chain(ffi, pnext):
        info = ffi.cast(ctype, p)
        if p.sType == stype and info.function == LAYER_LINK_INFO:
            return info
    return None


def register(hooks, state: LayerState, ffi, on_destroy_device, instrumenter=None) -> None:
    """`on_destroy_device(dev)` runs before a device is destroyed (read back captures, flush);
    `instrumenter` (instrument.py, under --instrument) extends device creation."""
    def with_extensions(pCreateInfo, next_gipa, keep):
        try:
            return _with_extensions(ffi, pCreateInfo, next_gipa, keep)
        except Exception:  # labels are lost, the application's instance is not
            hooks.errors.report("vkCreateInstance", "adding instance extensions; created without them")
            names = structs.extension_names(ffi, pCreateInfo)
            return pCreateInfo, frozenset(names)

    @hooks.replace("vkCreateInstance")
    def create_instance(pCreateInfo, pAllocator, pInstance):
        link = _link(ffi, pCreateInfo.pNext, LOADER_INSTANCE_CREATE_INFO, "VkLayerInstanceCreateInfo *")
        if link is None:
            return vk.VK_ERROR_INITIALIZATION_FAILED
        next_gipa = link.u.pLayerInfo.pfnNextGetInstanceProcAddr
        link.u.pLayerInfo = link.u.pLayerInfo.pNext
        create = ffi.cast("PFN_vkCreateInstance", next_gipa(ffi.NULL, b"vkCreateInstance"))
        keep: structs.Keepalive = []
        info, enabled = with_extensions(pCreateInfo, next_gipa, keep)
        result = create(info, pAllocator, pInstance)
        if result != vk.VK_SUCCESS:
            return result
        handle = pInstance[0]
        table = hooks.dispatch_table(ffi, next_gipa, handle, INSTANCE_COMMANDS)
        with state.lock:
            state.instances[state.key(handle)] = InstanceState(handle, table, next_gipa, enabled)
        return result

    @hooks.replace("vkDestroyInstance")
    def destroy_instance(instance, pAllocator):
        if instance == ffi.NULL:
            return
        key = state.key(instance)
        owner = state.instances[key]
        owner.next.vkDestroyInstance(instance, pAllocator)
        with state.lock:
            state.instances.pop(key, None)
            last = not state.instances
        transport = state.session.transport
        transport.close() if last else transport.flush()

    @hooks.replace("vkCreateDevice")
    def create_device(physicalDevice, pCreateInfo, pAllocator, pDevice):
        inst = state.instance_of(physicalDevice)
        link = _link(ffi, pCreateInfo.pNext, LOADER_DEVICE_CREATE_INFO, "VkLayerDeviceCreateInfo *")
        if link is None:
            return vk.VK_ERROR_INITIALIZATION_FAILED
        next_gipa = link.u.pLayerInfo.pfnNextGetInstanceProcAddr
        next_gdpa = link.u.pLayerInfo.pfnNextGetDeviceProcAddr
        link.u.pLayerInfo = link.u.pLayerInfo.pNext
        create = ffi.cast("PFN_vkCreateDevice", next_gipa(inst.handle, b"vkCreateDevice"))
        keep: structs.Keepalive = []
        names = structs.extension_names(ffi, pCreateInfo)
        below = query_extensions(ffi, inst.next.vkEnumerateDeviceExtensionProperties, physicalDevice, ffi.NULL)
        emulated = frozenset(n for n in names if n in LAYER_DEVICE_EXTENSIONS and n not in below)
        info = _without_emulated(pCreateInfo, emulated, keep) if emulated else pCreateInfo
        instrumented = False
        if instrumenter is not None:
            try:
                info, instrumented = instrumenter.device_info(info, names, below, keep)
            except Exception:
                hooks.errors.report("vkCreateDevice", "enabling shader instrumentation; created without it")
        result = create(physicalDevice, info, pAllocator, pDevice)
        if result != vk.VK_SUCCESS:
            return result
        handle = pDevice[0]
        table = hooks.dispatch_table(ffi, next_gdpa, handle, DEVICE_COMMANDS)
        dev = DeviceState(handle, state.address(handle), table, next_gdpa, inst, physicalDevice,
                          frozenset(names), emulated)
        with state.lock:
            state.devices[state.key(handle)] = dev
        if instrumenter is not None:
            instrumenter.device_created(dev, instrumented)
        try:
            _announce(dev)
        except Exception:
            hooks.errors.report("vkCreateDevice", "describing the device")
        return result

    def _without_emulated(pCreateInfo, emulated, keep):
        """The create info without extensions (and their feature structs) the layer provides itself."""
        info = structs.with_extensions(ffi, "VkDeviceCreateInfo *", pCreateInfo,
                                       [n for n in structs.extension_names(ffi, pCreateInfo) if n not in emulated],
                                       keep)
        nodes = list(structs.chain(ffi, pCreateInfo.pNext))
        dropped = {vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FRAME_BOUNDARY_FEATURES_EXT}
        if any(n.sType in dropped for n in nodes):
            info.pNext = structs.rebuild_chain(ffi, [n for n in nodes if n.sType not in dropped], keep)
        return info

    def _announce(dev: DeviceState) -> None:
        props = ffi.new("VkPhysicalDeviceProperties *")
        dev.instance.next.vkGetPhysicalDeviceProperties(dev.physical, props)
        name = structs.string(ffi, props.deviceName)
        rates = instrumenter.pipe_rates(dev, name) if instrumenter is not None else None
        state.session.transport.send(encoder.device(
            dev.address, name, props.vendorID, props.deviceID, "", props.apiVersion,
            sorted(dev.enabled_extensions), rates))

    @hooks.after("vkGetPhysicalDeviceFeatures2")
    def after_features2(inst, result, physicalDevice, pFeatures):
        fb = structs.find(ffi, pFeatures.pNext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FRAME_BOUNDARY_FEATURES_EXT,
                          "VkPhysicalDeviceFrameBoundaryFeaturesEXT *")
        if fb is not None:
            fb.frameBoundary = vk.VK_TRUE   # provided by the layer when the driver lacks it

    @hooks.replace("vkDestroyDevice")
    def destroy_device(device, pAllocator):
        if device == ffi.NULL:
            return
        key = state.key(device)
        owner = state.devices[key]
        try:
            on_destroy_device(owner)
        except Exception:
            hooks.errors.report("vkDestroyDevice", "reading back captures before destruction")
        owner.next.vkDestroyDevice(device, pAllocator)
        with state.lock:
            state.devices.pop(key, None)

    device_lists: dict[int, ExtensionList] = {}   # physical device -> what it lists under the layer

    @hooks.replace("vkEnumerateDeviceExtensionProperties")
    def enumerate_device_extensions(physicalDevice, pLayerName, pPropertyCount, pProperties):
        if pLayerName != ffi.NULL and structs.string(ffi, pLayerName) == LAYER_NAME:
            return fill_extensions(ffi, LAYER_DEVICE_EXTENSIONS, pPropertyCount, pProperties)
        inst = state.instance_of(physicalDevice)
        call = inst.next.vkEnumerateDeviceExtensionProperties
        if pLayerName != ffi.NULL:
            return call(physicalDevice, pLayerName, pPropertyCount, pProperties)
        # The device's own list (pLayerName NULL) is where programs look: a layer that provides
        # an extension the driver lacks lists it there too. Fixed per physical device: made once.
        listed = device_lists.get(state.address(physicalDevice))
        if listed is None:
            below = query_extensions(ffi, call, physicalDevice, ffi.NULL)
            provided = {n: v for n, v in LAYER_DEVICE_EXTENSIONS.items() if n not in below}
            hidden = instrumenter.hidden if instrumenter is not None else frozenset()   # the layer drives them
            listed = device_lists[state.address(physicalDevice)] = ExtensionList(
                ffi, {n: v for n, v in {**below, **provided}.items() if n not in hidden})
        return listed.fill(pPropertyCount, pProperties)


def _with_extensions(ffi, pCreateInfo, next_gipa, keep):
    """The create info with the instance extensions the layer needs, where available."""
    names = structs.extension_names(ffi, pCreateInfo)
    available = _instance_extensions(ffi, next_gipa)
    missing = [e for e in REQUIRED_INSTANCE_EXTENSIONS if e not in names and e in available]
    if not missing:
        return pCreateInfo, frozenset(names)
    names += missing
    return structs.with_extensions(ffi, "VkInstanceCreateInfo *", pCreateInfo, names, keep), frozenset(names)


def _instance_extensions(ffi, next_gipa) -> set[str]:
    enumerate_ = ffi.cast("PFN_vkEnumerateInstanceExtensionProperties",
                          next_gipa(ffi.NULL, b"vkEnumerateInstanceExtensionProperties"))
    if enumerate_ == ffi.NULL:
        return set()
    count = ffi.new("uint32_t *")
    if enumerate_(ffi.NULL, count, ffi.NULL) != vk.VK_SUCCESS:
        return set()
    props = ffi.new("VkExtensionProperties[]", count[0])
    enumerate_(ffi.NULL, count, props)
    return {structs.string(ffi, props[i].extensionName) for i in range(count[0])}


def make_proc_addr(ffi, state: LayerState, pointers: dict):
    """GetInstanceProcAddr and GetDeviceProcAddr of the layer (C glue handles their own names)."""
    null = ffi.NULL

    def gipa(instance, pName):
        name = canonical(ffi.string(pName).decode())
        if name in GLOBAL_COMMANDS and name in pointers:
            return pointers[name]
        if instance == null:
            return null
        inst = state.instances.get(state.key(instance))
        if inst is None:
            return null
        if name in pointers:
            if is_device_command(name) or getattr(inst.next, name, None) is not None:
                return pointers[name]
        return inst.next_gipa(instance, pName)

    def gdpa(device, pName):
        name = canonical(ffi.string(pName).decode())
        dev = state.devices.get(state.key(device))
        if dev is None:
            return null
        if name in pointers and is_device_command(name):
            return pointers[name] if getattr(dev.next, name, None) is not None else null
        return dev.next_gdpa(device, pName)

    return gipa, gdpa

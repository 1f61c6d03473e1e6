"""Dispatch chains: vkCreate/Destroy Instance and Device, layer queries, GetProcAddr.

Follows the Khronos loader-layer interface (version 2): in vkCreateInstance /
vkCreateDevice the loader passes a VkLayer*CreateInfo link whose head holds
the next element's GetProcAddr; the layer advances the link, calls down, and
resolves its dispatch table from the next element right away.

The bookkeeping (which instances and devices exist, what each enables, which
extensions the layer adds, provides or lists, the DEVICE message) is in
`Chains` and the functions beside it, on plain values; `ChainHooks`' methods
(one per command, bound by `register`) walk the loader's structures, call down
and hand them what they found. The hooks that call down themselves, except the
two creates, still forward when they raise (forwarding.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from tessera.vkapi import structs
from tessera.vkapi.dispatch import canonical, is_device_command
from tessera.vkapi.enumerate import ExtensionList, fill_extensions, query_extensions
from tessera.vkapi.vkconst import vk

from . import encoder
from .forwarding import forwarding
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


def missing_instance_extensions(names: list[str], available) -> list[str]:
    """The extensions the layer needs that the application did not enable and the instance has;
    `available` None: the element below did not say (every needed one is tried, see _instance_info)."""
    return [e for e in REQUIRED_INSTANCE_EXTENSIONS if e not in names and (available is None or e in available)]


def emulated_extensions(names, below) -> frozenset[str]:
    """Of the device extensions the application enables, those the layer provides itself (the
    driver below lacks them): they are not passed down."""
    return frozenset(n for n in names if n in LAYER_DEVICE_EXTENSIONS and n not in below)


def device_extension_list(below: dict[str, int], hidden=frozenset()) -> dict[str, int]:
    """A physical device's own extension list under the layer: the driver's, plus those the layer
    provides, minus those the layer drives itself (`hidden`)."""
    provided = {n: v for n, v in LAYER_DEVICE_EXTENSIONS.items() if n not in below}
    return {n: v for n, v in {**below, **provided}.items() if n not in hidden}


@dataclass(frozen=True)
class DeviceProperties:
    """What the DEVICE message says of the physical device (VkPhysicalDeviceProperties)."""
    name: str
    vendor_id: int
    device_id: int
    api_version: int


class Chains:
    """The instances and devices of the layer's dispatch chains, keyed by dispatch key, in `state`
    (state.LayerState: its maps and lock; its session's transport is flushed or closed when an
    instance goes). `send`: the transport's send (the DEVICE message); `errors`: HookErrors;
    `on_destroy_device(dev)`: runs before a device is destroyed; `instrumenter`: instrument.py's
    extension of device creation and listing (None without --instrument/--regions)."""

    def __init__(self, state: LayerState, send, errors, on_destroy_device, instrumenter=None) -> None:
        self.state = state
        self.send = send
        self.errors = errors
        self.on_destroy_device = on_destroy_device
        self.instrumenter = instrumenter
        self.device_lists: dict[int, object] = {}   # physical device -> what it lists under the layer

    # ---- instances --------------------------------------------------------------------------
    def instance_created(self, key: int, inst: InstanceState) -> None:
        state = self.state
        with state.lock:
            state.instances[key] = inst

    def destroy_instance(self, key: int, call_down) -> None:
        """`call_down(instance)` destroys it below; then it is forgotten, and the transport closed
        with the last instance (flushed otherwise)."""
        state = self.state
        call_down(state.instances[key])
        with state.lock:
            state.instances.pop(key, None)
            last = not state.instances
        transport = state.session.transport
        transport.close() if last else transport.flush()

    # ---- devices ----------------------------------------------------------------------------
    def instrumented_info(self, info, names: list[str], below: dict[str, int], keep):
        """The create info as the instrumenter extends it; (info, instrumented)."""
        instrumented = False
        if self.instrumenter is not None:
            try:
                info, instrumented = self.instrumenter.device_info(info, names, below, keep)
            except Exception:
                self.errors.report("vkCreateDevice", "enabling shader instrumentation; created without it")
        return info, instrumented

    def device_created(self, key: int, dev: DeviceState, instrumented, properties) -> None:
        """Remember `dev`, tell the instrumenter, send its DEVICE message; `properties(dev)`:
        its physical device's DeviceProperties."""
        state = self.state
        with state.lock:
            state.devices[key] = dev
        if self.instrumenter is not None:
            self.instrumenter.device_created(dev, instrumented)
        try:
            self.announce(dev, properties(dev))
        except Exception:
            self.errors.report("vkCreateDevice", "describing the device")

    def announce(self, dev: DeviceState, props: DeviceProperties) -> None:
        rates = self.instrumenter.pipe_rates(dev, props.name) if self.instrumenter is not None else None
        dev.announced = (dev.address, props.name, props.vendor_id, props.device_id, "", props.api_version,
                         sorted(dev.enabled_extensions), rates)
        self.send(encoder.device(*dev.announced))

    def destroy_device(self, key: int, call_down) -> None:
        """`on_destroy_device` (read back captures, flush; its failure is reported), then
        `call_down(device)` destroys it below, then it is forgotten."""
        state = self.state
        owner = state.devices[key]
        try:
            self.on_destroy_device(owner)
        except Exception:
            self.errors.report("vkDestroyDevice", "reading back captures before destruction")
        call_down(owner)
        with state.lock:
            state.devices.pop(key, None)

    def listed_extensions(self, physical: int, below, pack):
        """The list of the physical device at address `physical` (device_extension_list), made once
        per physical device: `below()` the driver's extensions, `pack(extensions)` what is kept."""
        listed = self.device_lists.get(physical)
        if listed is None:
            hidden = self.instrumenter.hidden if self.instrumenter is not None else frozenset()
            listed = self.device_lists[physical] = pack(device_extension_list(below(), hidden))
        return listed


def _link(ffi, pnext, stype: int, ctype: str):
    for p in structs.chain(ffi, pnext):
        info = ffi.cast(ctype, p)
        if p.sType == stype and info.function == LAYER_LINK_INFO:
            return info
    return None


class ChainHooks:
    """The dispatch chains' hooks: one method per command (HookSet.bind). They walk the loader's
    structures, call down and hand `chains` (Chains, on plain values) what they found.
    vkDestroyInstance, vkDestroyDevice and vkEnumerateDeviceExtensionProperties call down themselves:
    their methods (`forwarding_vk…`) are registered by `register` with forwarding.py, not bound."""

    def __init__(self, hooks, state: LayerState, ffi, chains: Chains) -> None:
        self.hooks = hooks
        self.state = state
        self.ffi = ffi
        self.errors = hooks.errors
        self.chains = chains

    def replace_vkCreateInstance(self, pCreateInfo, pAllocator, pInstance):
        ffi, errors = self.ffi, self.errors
        link = _link(ffi, pCreateInfo.pNext, LOADER_INSTANCE_CREATE_INFO, "VkLayerInstanceCreateInfo *")
        if link is None:
            return vk.VK_ERROR_INITIALIZATION_FAILED
        next_gipa = link.u.pLayerInfo.pfnNextGetInstanceProcAddr
        link.u.pLayerInfo = below = link.u.pLayerInfo.pNext
        create = ffi.cast("PFN_vkCreateInstance", next_gipa(ffi.NULL, b"vkCreateInstance"))
        keep: structs.Keepalive = []
        info, enabled = _instance_info(ffi, errors, pCreateInfo, next_gipa, keep)
        result = create(info, pAllocator, pInstance)
        if result == vk.VK_ERROR_EXTENSION_NOT_PRESENT and info is not pCreateInfo:
            # Refused below: an extension the layer added untold (_instance_info). The application's
            # own request instead; the elements below advanced the link as they passed: rewound.
            errors.log.warning("vkCreateInstance: refused with the extensions the layer adds; created without them")
            link.u.pLayerInfo = below
            enabled = frozenset(structs.extension_names(ffi, pCreateInfo))
            result = create(pCreateInfo, pAllocator, pInstance)
        if result != vk.VK_SUCCESS:
            return result
        handle = pInstance[0]
        table = self.hooks.dispatch_table(ffi, next_gipa, handle, INSTANCE_COMMANDS)
        self.chains.instance_created(self.state.key(handle), InstanceState(handle, table, next_gipa, enabled))
        return result

    def forwarding_vkDestroyInstance(self, call_down, instance, pAllocator):
        if instance == self.ffi.NULL:
            return
        self.chains.destroy_instance(self.state.key(instance), lambda owner: call_down(instance, pAllocator))

    def replace_vkCreateDevice(self, physicalDevice, pCreateInfo, pAllocator, pDevice):
        ffi, state, chains = self.ffi, self.state, self.chains
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
        emulated = emulated_extensions(names, below)
        info = _without_emulated(ffi, pCreateInfo, emulated, keep) if emulated else pCreateInfo
        info, instrumented = chains.instrumented_info(info, names, below, keep)
        result = create(physicalDevice, info, pAllocator, pDevice)
        if result != vk.VK_SUCCESS:
            return result
        handle = pDevice[0]
        table = self.hooks.dispatch_table(ffi, next_gdpa, handle, DEVICE_COMMANDS)
        dev = DeviceState(handle, state.address(handle), table, next_gdpa, inst, physicalDevice,
                          frozenset(names), emulated)
        chains.device_created(state.key(handle), dev, instrumented, lambda d: _properties(ffi, d))
        return result

    def after_vkGetPhysicalDeviceFeatures2(self, inst, result, physicalDevice, pFeatures):
        fb = structs.find(self.ffi, pFeatures.pNext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FRAME_BOUNDARY_FEATURES_EXT,
                          "VkPhysicalDeviceFrameBoundaryFeaturesEXT *")
        if fb is not None:
            fb.frameBoundary = vk.VK_TRUE   # provided by the layer when the driver lacks it

    def forwarding_vkDestroyDevice(self, call_down, device, pAllocator):
        if device == self.ffi.NULL:
            return
        self.chains.destroy_device(self.state.key(device), lambda owner: call_down(device, pAllocator))

    def forwarding_vkEnumerateDeviceExtensionProperties(self, call_down, physicalDevice, pLayerName, pPropertyCount,
                                                        pProperties):
        ffi, state = self.ffi, self.state
        if pLayerName != ffi.NULL and structs.string(ffi, pLayerName) == LAYER_NAME:
            return fill_extensions(ffi, LAYER_DEVICE_EXTENSIONS, pPropertyCount, pProperties)
        inst = state.instance_of(physicalDevice)
        call = inst.next.vkEnumerateDeviceExtensionProperties
        if pLayerName != ffi.NULL:
            return call_down(physicalDevice, pLayerName, pPropertyCount, pProperties)
        # The device's own list (pLayerName NULL) is where programs look: a layer that provides
        # an extension the driver lacks lists it there too. Fixed per physical device: made once.
        listed = self.chains.listed_extensions(state.address(physicalDevice),
                                               lambda: query_extensions(ffi, call, physicalDevice, ffi.NULL),
                                               lambda extensions: ExtensionList(ffi, extensions))
        return listed.fill(pPropertyCount, pProperties)


def register(hooks, state: LayerState, ffi, on_destroy_device, instrumenter=None) -> Chains:
    """`on_destroy_device(dev)` runs before a device is destroyed (read back captures, flush);
    `instrumenter` (instrument.py, under --instrument) extends device creation."""
    chains = Chains(state, state.session.transport.send, hooks.errors, on_destroy_device, instrumenter)
    feature = hooks.bind(ChainHooks(hooks, state, ffi, chains))
    forwarding(hooks, "vkDestroyInstance", lambda instance: state.owner_of(instance).next.vkDestroyInstance)(
        feature.forwarding_vkDestroyInstance)
    forwarding(hooks, "vkDestroyDevice", lambda device: state.owner_of(device).next.vkDestroyDevice)(
        feature.forwarding_vkDestroyDevice)
    forwarding(hooks, "vkEnumerateDeviceExtensionProperties",
               lambda physical: state.instance_of(physical).next.vkEnumerateDeviceExtensionProperties)(
        feature.forwarding_vkEnumerateDeviceExtensionProperties)
    return chains


def _instance_info(ffi, errors, pCreateInfo, next_gipa, keep):
    """The create info with the instance extensions the layer needs, and the names it enables.

    What the instance offers is asked of the element below, which answers when it is the loader's
    terminator. A layer below ours may not (the Khronos validation layer answers only for its own
    name, VK_ERROR_LAYER_NOT_PRESENT; others return no function): the needed extensions are then
    added untold. The Khronos loader passes each driver only the instance extensions it supports
    (terminator_CreateInstance), so a driver without them still creates the instance and the
    layer's label commands resolve to NULL (no labels, as on such a driver anyway); an element
    that refuses instead (VK_ERROR_EXTENSION_NOT_PRESENT) gets the application's request again."""
    try:
        return _with_extensions(ffi, pCreateInfo, next_gipa, keep)
    except Exception:  # labels are lost, the application's instance is not
        errors.report("vkCreateInstance", "adding instance extensions; created without them")
        names = structs.extension_names(ffi, pCreateInfo)
        return pCreateInfo, frozenset(names)


def _with_extensions(ffi, pCreateInfo, next_gipa, keep):
    """The create info with the instance extensions the layer needs, where available."""
    names = structs.extension_names(ffi, pCreateInfo)
    missing = missing_instance_extensions(names, _instance_extensions(ffi, next_gipa))
    if not missing:
        return pCreateInfo, frozenset(names)
    names += missing
    return structs.with_extensions(ffi, "VkInstanceCreateInfo *", pCreateInfo, names, keep), frozenset(names)


def _without_emulated(ffi, pCreateInfo, emulated, keep):
    """The create info without extensions (and their feature structs) the layer provides itself."""
    info = structs.with_extensions(ffi, "VkDeviceCreateInfo *", pCreateInfo,
                                   [n for n in structs.extension_names(ffi, pCreateInfo) if n not in emulated],
                                   keep)
    nodes = list(structs.chain(ffi, pCreateInfo.pNext))
    dropped = {vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FRAME_BOUNDARY_FEATURES_EXT}
    if any(n.sType in dropped for n in nodes):
        info.pNext = structs.rebuild_chain(ffi, [n for n in nodes if n.sType not in dropped], keep)
    return info


def _properties(ffi, dev: DeviceState) -> DeviceProperties:
    props = ffi.new("VkPhysicalDeviceProperties *")
    dev.instance.next.vkGetPhysicalDeviceProperties(dev.physical, props)
    return DeviceProperties(structs.string(ffi, props.deviceName), props.vendorID, props.deviceID, props.apiVersion)


def _instance_extensions(ffi, next_gipa) -> set[str] | None:
    """The instance extensions the element below lists; None if it does not answer (_instance_info)."""
    enumerate_ = ffi.cast("PFN_vkEnumerateInstanceExtensionProperties",
                          next_gipa(ffi.NULL, b"vkEnumerateInstanceExtensionProperties"))
    if enumerate_ == ffi.NULL:
        return None
    count = ffi.new("uint32_t *")
    if enumerate_(ffi.NULL, count, ffi.NULL) != vk.VK_SUCCESS:
        return None
    props = ffi.new("VkExtensionProperties[]", count[0])
    if enumerate_(ffi.NULL, count, props) not in (vk.VK_SUCCESS, vk.VK_INCOMPLETE):
        return None
    return {structs.string(ffi, props[i].extensionName) for i in range(count[0])}


def make_proc_addr(ffi, state: LayerState, pointers: dict):
    """GetInstanceProcAddr and GetDeviceProcAddr of the layer (C glue handles their own names).

    As the loader and the layers around ours expect (LoaderLayerInterface.md, "Layer Conventions and
    Rules"; Khronos validation and Mesa's layers answer the same way), GetInstanceProcAddr returns the
    layer's own intercept of a command for any `instance`: NULL (vkBasalt and MangoHud ask the next
    element `(NULL, "vkCreateDevice")` in their vkCreateDevice), one the layer does not know, or its
    own. With its own instance, an instance-level intercept the element below lacks is left to the
    element below (its answer, NULL); a command the layer does not intercept is the next element's
    answer, which needs a known instance (NULL otherwise)."""
    null = ffi.NULL

    def gipa(instance, pName):
        name = canonical(ffi.string(pName).decode())
        hook = pointers.get(name)
        if hook is not None and (instance == null or name in GLOBAL_COMMANDS):
            return hook
        if instance == null:
            return null
        inst = state.instances.get(state.key(instance))
        if inst is None:
            return null if hook is None else hook
        if hook is not None and (is_device_command(name) or getattr(inst.next, name, None) is not None):
            return hook
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

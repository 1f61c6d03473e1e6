"""The layer's vkCreateInstance and the instance extensions it adds for its labels (layer/chain.py,
issue #23), against hand-made elements below it: the loader's terminator (answers the extension query),
a layer that does not pass the query down (the Khronos validation layer answers
VK_ERROR_LAYER_NOT_PRESENT), and one that refuses an extension it does not know. No Vulkan, no shim:
the loader's structures are declared here (vk_layer.h) and the elements below are cffi callbacks.
"""
from __future__ import annotations

import threading
from types import SimpleNamespace

import cffi
import pytest

from tessera.layer import chain
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.vkconst import vk

CDEF = """
typedef int32_t VkResult;
typedef int VkStructureType;
typedef uint32_t VkFlags;
typedef struct VkInstance_T* VkInstance;
typedef struct VkAllocationCallbacks VkAllocationCallbacks;
typedef void (*PFN_vkVoidFunction)(void);
typedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance instance, const char* pName);
typedef struct VkBaseOutStructure { VkStructureType sType; struct VkBaseOutStructure* pNext; } VkBaseOutStructure;
typedef struct VkInstanceCreateInfo {
    VkStructureType sType; const void* pNext; VkFlags flags; const void* pApplicationInfo;
    uint32_t enabledLayerCount; const char* const* ppEnabledLayerNames;
    uint32_t enabledExtensionCount; const char* const* ppEnabledExtensionNames;
} VkInstanceCreateInfo;
typedef VkResult (*PFN_vkCreateInstance)(const VkInstanceCreateInfo*, const VkAllocationCallbacks*, VkInstance*);
typedef struct VkExtensionProperties { char extensionName[256]; uint32_t specVersion; } VkExtensionProperties;
typedef VkResult (*PFN_vkEnumerateInstanceExtensionProperties)(const char*, uint32_t*, VkExtensionProperties*);
typedef struct VkLayerInstanceLink_ {
    struct VkLayerInstanceLink_* pNext; PFN_vkGetInstanceProcAddr pfnNextGetInstanceProcAddr;
    void* pfnNextGetPhysicalDeviceProcAddr;
} VkLayerInstanceLink;
typedef struct VkLayerInstanceCreateInfo {
    VkStructureType sType; const void* pNext; int function;
    union { VkLayerInstanceLink* pLayerInfo; void* pfnSetInstanceLoaderData; } u;
} VkLayerInstanceCreateInfo;
"""
ffi = cffi.FFI()
ffi.cdef(CDEF)
DEBUG_UTILS = "VK_EXT_debug_utils"


class Below:
    """The element below the layer: `answers` its extension query (None: VK_ERROR_LAYER_NOT_PRESENT, as the
    validation layer does for a NULL layer name); `known`: the extensions it accepts (None: any, as the
    loader's terminator, which passes each driver only those it supports). Records what it was asked to
    create and where the loader's link pointed then."""

    def __init__(self, answers=("VK_KHR_surface", DEBUG_UTILS), known=None) -> None:
        self.answers, self.known = answers, known
        self.created: list[tuple[list[str], object]] = []
        self.link = None
        self.instance_key = ffi.new("uintptr_t *", 0x7E55E7A)   # a dispatchable handle: its first word is the key
        self._callbacks = [ffi.callback("PFN_vkCreateInstance", self._create),
                           ffi.callback("PFN_vkEnumerateInstanceExtensionProperties", self._enumerate)]
        self.gipa = ffi.callback("PFN_vkGetInstanceProcAddr", self._gipa)

    def _gipa(self, instance, pName):
        name = ffi.string(pName).decode()
        found = {"vkCreateInstance": self._callbacks[0],
                 "vkEnumerateInstanceExtensionProperties": self._callbacks[1]}.get(name)
        return ffi.cast("PFN_vkVoidFunction", found) if found is not None else ffi.NULL

    def _enumerate(self, pLayerName, pCount, pProps):
        if self.answers is None:
            return vk.VK_ERROR_LAYER_NOT_PRESENT
        if pProps == ffi.NULL:
            pCount[0] = len(self.answers)
            return vk.VK_SUCCESS
        for i, name in enumerate(self.answers[:pCount[0]]):
            pProps[i].extensionName = name.encode()
        return vk.VK_SUCCESS

    def _create(self, pCreateInfo, pAllocator, pInstance):
        names = [ffi.string(pCreateInfo.ppEnabledExtensionNames[i]).decode()
                 for i in range(pCreateInfo.enabledExtensionCount)]
        link = ffi.cast("VkLayerInstanceCreateInfo *", pCreateInfo.pNext)
        self.created.append((names, link.u.pLayerInfo))
        link.u.pLayerInfo = link.u.pLayerInfo.pNext   # as a layer passing the call down does
        if self.known is not None and any(n not in self.known for n in names):
            return vk.VK_ERROR_EXTENSION_NOT_PRESENT
        pInstance[0] = ffi.cast("VkInstance", self.instance_key)
        return vk.VK_SUCCESS


class Hooks:
    def __init__(self) -> None:
        self.replacements: dict = {}
        self.errors = SimpleNamespace(reported=[], log=SimpleNamespace(warnings=[]))
        self.errors.report = lambda command, where: self.errors.reported.append((command, where))
        self.errors.log.warning = lambda message, *args: self.errors.log.warnings.append(message % args)

    def replace(self, name):
        def register(fn):
            self.replacements[name] = fn
            return fn
        return register

    after = before = at_record = applies = replace
    bind = HookSet.bind   # a feature object's methods, registered by the verbs above (layer/chain.py)

    def dispatch_table(self, ffi_, gipa, handle, names):
        return SimpleNamespace()


def _create(below: Below, app_extensions: list[str]):
    hooks = Hooks()
    transport = SimpleNamespace(send=lambda *a: None)
    state = SimpleNamespace(session=SimpleNamespace(transport=transport), instances={}, lock=threading.Lock(),
                            key=lambda h: int(ffi.cast("uintptr_t *", h)[0]))
    chain.register(hooks, state, ffi, on_destroy_device=lambda dev: None)
    ours = ffi.new("VkLayerInstanceLink *", {"pfnNextGetInstanceProcAddr": below.gipa})
    further = ffi.new("VkLayerInstanceLink *")   # the next element's own link: the one below ours
    ours.pNext = further
    link = ffi.new("VkLayerInstanceCreateInfo *", {"sType": chain.LOADER_INSTANCE_CREATE_INFO,
                                                   "function": chain.LAYER_LINK_INFO})
    link.u.pLayerInfo = ours
    names = [ffi.new("char[]", n.encode()) for n in app_extensions]
    array = ffi.new("const char *[]", names) if names else ffi.NULL
    info = ffi.new("VkInstanceCreateInfo *", {"sType": 1, "pNext": link, "enabledExtensionCount": len(names),
                                              "ppEnabledExtensionNames": array})
    instance = ffi.new("VkInstance *")
    result = hooks.replacements["vkCreateInstance"](info, ffi.NULL, instance)
    return result, state, hooks, further


def test_the_loaders_answer_decides():
    below = Below()
    result, state, _, _ = _create(below, ["VK_KHR_surface"])
    assert result == vk.VK_SUCCESS and below.created[0][0] == ["VK_KHR_surface", DEBUG_UTILS]
    assert DEBUG_UTILS in next(iter(state.instances.values())).enabled_extensions
    below = Below(answers=("VK_KHR_surface",))   # the driver lacks it: not added
    result, _, _, _ = _create(below, ["VK_KHR_surface"])
    assert result == vk.VK_SUCCESS and below.created[0][0] == ["VK_KHR_surface"]


def test_a_layer_below_that_does_not_answer_still_gets_debug_utils():
    below = Below(answers=None)
    result, _, _, _ = _create(below, [])
    assert result == vk.VK_SUCCESS and below.created[0][0] == [DEBUG_UTILS]


@pytest.mark.parametrize("app", [[], ["VK_KHR_surface"]])
def test_a_refusal_of_what_the_layer_added_gets_the_applications_request_again(app):
    """The second call down finds the loader's link where the first one found it (the element below
    advanced it)."""
    below = Below(answers=None, known={"VK_KHR_surface"})
    result, state, hooks, further = _create(below, app)
    assert result == vk.VK_SUCCESS
    assert [names for names, _ in below.created] == [app + [DEBUG_UTILS], app]
    assert below.created[0][1] == below.created[1][1] == further
    assert DEBUG_UTILS not in next(iter(state.instances.values())).enabled_extensions
    assert hooks.errors.log.warnings and hooks.errors.reported == []


def test_a_refusal_of_the_applications_own_request_is_the_applications_answer():
    below = Below(answers=None, known=set())
    result, state, _, _ = _create(below, ["VK_KHR_surface"])
    assert result == vk.VK_ERROR_EXTENSION_NOT_PRESENT and state.instances == {}
    assert [names for names, _ in below.created] == [["VK_KHR_surface", DEBUG_UTILS], ["VK_KHR_surface"]]

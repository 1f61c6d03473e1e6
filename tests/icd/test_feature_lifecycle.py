"""The features' device lifecycle (icd/feature.py), run by icd/device.py from `Driver.features`, without Vulkan:
the order the steps run in, a feature that cannot be set up, features that do not want a device."""
from __future__ import annotations

import logging
from types import SimpleNamespace as NS

import cffi
import pytest

from tessera.icd import shader_costs
from tessera.icd.device import Devices
from tessera.icd.feature import DeviceRequest, Feature
from tessera.icd.instrumentation.hooks import Instrumentation
from tessera.icd.objects import Device, Instance, Objects, PhysicalDevice
from tessera.icd.regions.hooks import Regions
from tessera.icd.tensors.resources import EXTENSION, Tensors
from tessera.vkapi.vkconst import vk

CDEF = """
typedef struct VkBaseOutStructure { int sType; struct VkBaseOutStructure* pNext; } VkBaseOutStructure;
typedef struct VkDeviceCreateInfo {
    int sType; const void* pNext; uint32_t flags; uint32_t queueCreateInfoCount; const void* pQueueCreateInfos;
    uint32_t enabledLayerCount; const char* const* ppEnabledLayerNames;
    uint32_t enabledExtensionCount; const char* const* ppEnabledExtensionNames; const void* pEnabledFeatures;
} VkDeviceCreateInfo;
"""
PHYS, DEVICE = 0x100, 0x200


class Step(Feature):
    """A feature that writes down each step it is asked to take."""

    def __init__(self, name: str, log: list, want: bool = True, fail: bool = False) -> None:
        self.name, self.log, self.want, self.fail = name, log, want, fail
        self.label = f"feature {name}"

    def wants(self, request):
        self.log.append(("wants", self.name))
        return self.want

    def enable(self, request):
        self.log.append(("enable", self.name))
        request.keep.append(self.name)

    def created(self, dev, request):
        self.log.append(("created", self.name))
        if self.fail:
            raise RuntimeError("cannot")

    def destroyed(self, dev):
        self.log.append(("destroyed", self.name))


@pytest.fixture(autouse=True)
def no_warm_up(monkeypatch):
    """Creating a device does not start loading the compiler model (the first shader module does:
    shader_costs.CompilerWarmUp); a program that makes no shaders never pays for it."""
    def refuse():
        raise AssertionError("vkCreateDevice started the compiler model's warm-up")
    monkeypatch.setattr(shader_costs, "warm_up", refuse)


def driver(*features: Feature, log: list, backend_result=vk.VK_SUCCESS):
    """A Devices over a backend that writes down its vkCreateDevice and vkDestroyDevice."""
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    reports: list = []

    def create(physicalDevice, info, pAllocator, pDevice):
        log.append(("backend vkCreateDevice", ffi.typeof(info).cname))
        pDevice[0] = DEVICE
        return backend_result

    table = NS(vkDestroyDevice=lambda device, pAllocator: log.append(("backend vkDestroyDevice", device)))
    backend = NS(vkCreateDevice=create, vkGetDeviceProcAddr=None)
    hooks = NS(errors=NS(log=logging.getLogger("test_feature_lifecycle"), report=lambda *a: reports.append(a)),
               dispatch_table=lambda ffi, gdpa, handle, commands: table)
    objects = Objects(ffi)
    objects.add(PhysicalDevice(PHYS, Instance(0x1, backend, vk.VK_API_VERSION_1_0), extensions={}))
    drv = NS(ffi=ffi, hooks=hooks, objects=objects, features=list(features),
             profile=NS(vulkan_profile=lambda: None))   # no device profile: the backend's capabilities
    return Devices(drv), ffi, reports


def create(devices: Devices, ffi):
    info = ffi.new("VkDeviceCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO})
    pDevice = [None]
    return devices.replace_vkCreateDevice(PHYS, info, ffi.NULL, pDevice), pDevice[0]


def test_created_in_list_order_after_the_backend_destroyed_in_reverse_before_it():
    log: list = []
    devices, ffi, reports = driver(Step("a", log), Step("b", log), Step("c", log), log=log)
    result, handle = create(devices, ffi)
    assert (result, handle, reports) == (vk.VK_SUCCESS, DEVICE, [])
    assert log == [("wants", "a"), ("enable", "a"), ("wants", "b"), ("enable", "b"), ("wants", "c"), ("enable", "c"),
                   ("backend vkCreateDevice", "VkDeviceCreateInfo *"),
                   ("created", "a"), ("created", "b"), ("created", "c")]
    assert isinstance(devices.objects.get(DEVICE, Device), Device)
    log.clear()
    devices.replace_vkDestroyDevice(DEVICE, ffi.NULL)
    assert log == [("destroyed", "c"), ("destroyed", "b"), ("destroyed", "a"), ("backend vkDestroyDevice", DEVICE)]
    assert devices.objects.by_address.get(DEVICE) is None


def test_a_feature_that_cannot_be_set_up_destroys_the_device_and_the_create_fails():
    log: list = []
    devices, ffi, reports = driver(Step("a", log), Step("b", log, fail=True), Step("c", log), log=log)
    result, _ = create(devices, ffi)
    assert result == vk.VK_ERROR_INITIALIZATION_FAILED
    assert reports == [("vkCreateDevice", "setting up feature b; device not created")]
    assert log[-5:] == [("backend vkCreateDevice", "VkDeviceCreateInfo *"), ("created", "a"), ("created", "b"),
                        ("destroyed", "a"), ("backend vkDestroyDevice", DEVICE)]   # c never created; a torn down
    assert devices.objects.by_address.get(DEVICE) is None


def test_a_failed_set_up_tears_down_the_features_created_before_it_in_reverse_even_if_one_raises():
    log: list = []

    class BadTeardown(Step):
        def destroyed(self, dev):
            super().destroyed(dev)
            raise RuntimeError("cannot either")

    devices, ffi, reports = driver(Step("a", log), BadTeardown("b", log), Step("c", log), Step("d", log, fail=True),
                                   Step("e", log), log=log)
    assert create(devices, ffi)[0] == vk.VK_ERROR_INITIALIZATION_FAILED
    assert log[-8:] == [("created", "a"), ("created", "b"), ("created", "c"), ("created", "d"),
                        ("destroyed", "c"), ("destroyed", "b"), ("destroyed", "a"), ("backend vkDestroyDevice", DEVICE)]
    assert reports == [("vkCreateDevice", "setting up feature d; device not created"),
                       ("vkCreateDevice", "tearing down feature b of a device not created")]
    assert devices.objects.by_address.get(DEVICE) is None


def test_features_that_do_not_want_the_device_are_neither_enabled_nor_created():
    log: list = []
    devices, ffi, _ = driver(Step("a", log, want=False), Step("b", log), Step("c", log, want=False), log=log)
    assert create(devices, ffi)[0] == vk.VK_SUCCESS
    assert log == [("wants", "a"), ("wants", "b"), ("enable", "b"), ("wants", "c"),
                   ("backend vkCreateDevice", "VkDeviceCreateInfo *"), ("created", "b")]
    log.clear()
    devices.replace_vkDestroyDevice(DEVICE, ffi.NULL)   # every feature is told (one that was off has nothing)
    assert log == [("destroyed", "c"), ("destroyed", "b"), ("destroyed", "a"), ("backend vkDestroyDevice", DEVICE)]


def test_a_failing_backend_create_sets_up_no_feature():
    log: list = []
    devices, ffi, reports = driver(Step("a", log), log=log, backend_result=vk.VK_ERROR_OUT_OF_HOST_MEMORY)
    assert create(devices, ffi)[0] == vk.VK_ERROR_OUT_OF_HOST_MEMORY
    assert log == [("wants", "a"), ("enable", "a"), ("backend vkCreateDevice", "VkDeviceCreateInfo *")]
    assert reports == [] and devices.objects.by_address.get(DEVICE) is None


def test_the_request_features_see_is_the_application_create_info_and_the_copy_going_down():
    seen: list = []

    class Looks(Feature):
        def wants(self, request):
            seen.append(request)
            return True

    log: list = []
    devices, ffi, _ = driver(Looks(), log=log)
    info = ffi.new("VkDeviceCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO})
    devices.replace_vkCreateDevice(PHYS, info, ffi.NULL, [None])
    (request,) = seen
    assert isinstance(request, DeviceRequest) and request.create_info == info and request.info != info
    assert request.names == frozenset() and request.phys is devices.objects.get(PHYS, PhysicalDevice)


def test_a_feature_defaults_to_wanting_every_device_and_doing_nothing():
    f, dev = Feature(), NS()
    assert f.wants(None) is True
    assert (f.enable(None), f.created(dev, None), f.destroyed(dev)) == (None, None, None)


def test_the_drivers_features_keep_their_error_labels_and_what_they_check():
    assert Regions.label == "per-region counters"
    assert Instrumentation.label == "shader instrumentation"
    tensors = Tensors(NS(ffi=None, objects=None, hooks=NS(errors=NS(log=None))))
    assert tensors.wants(NS(names=frozenset({EXTENSION}))) and not tensors.wants(NS(names=frozenset()))


def test_the_compiler_warms_up_at_the_first_shader_not_at_device_creation():
    from tessera.vkapi.intercepts import ICD, INTERCEPTS
    hooked = {name for name in dir(shader_costs.CompilerWarmUp) if name.startswith("before_vk")}
    assert hooked == {"before_vkCreateShaderModule", "before_vkCreateShadersEXT"}
    for command in ("vkCreateShaderModule", "vkCreateShadersEXT"):
        assert "icd.shader_costs" in INTERCEPTS[command][ICD].modules

"""enable_store_features (icd/instrumentation/metrics.py), which shader instrumentation and per-region
counters run on the driver's copy of a VkDeviceCreateInfo: the copy going down asks for the two store
features, and the application's own structures are never written (with or without VK_ARM_tensors,
whose chain rebuild used to be what kept a VkPhysicalDeviceFeatures2 out of reach)."""
from __future__ import annotations

import cffi
import pytest

from tessera.icd.instrumentation.metrics import enable_store_features
from tessera.vkapi import cdecl, structs
from tessera.vkapi.vkconst import vk

FEATURES2 = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2


@pytest.fixture(scope="module")
def ffi():
    f = cffi.FFI()
    f.cdef(cdecl.generate(["vkCreateDevice", "vkGetPhysicalDeviceFeatures2"]).cdef)
    return f


def app_create_info(ffi, keep: list, features2: bool):
    """What an application passes: its VkPhysicalDeviceFeatures2 in the chain, or pEnabledFeatures."""
    info = ffi.new("VkDeviceCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO})
    if features2:
        f2 = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": FEATURES2})
        f2.features.shaderInt64 = vk.VK_TRUE
        info.pNext = f2
        keep.append(f2)
    else:
        f = ffi.new("VkPhysicalDeviceFeatures *", {"shaderInt64": vk.VK_TRUE})
        info.pEnabledFeatures = f
        keep.append(f)
    return info


def snapshot(ffi, info) -> bytes:
    """The bytes of every struct the application owns behind `info`."""
    out = bytes(ffi.buffer(info))
    if info.pEnabledFeatures != ffi.NULL:
        out += bytes(ffi.buffer(info.pEnabledFeatures))
    for node in structs.chain(ffi, info.pNext):
        out += bytes(ffi.buffer(ffi.cast("VkPhysicalDeviceFeatures2 *", node)))
    return out


@pytest.mark.parametrize("features2", [True, False], ids=["features2 in the chain", "pEnabledFeatures"])
def test_the_copy_going_down_asks_for_the_store_features_and_the_applications_structs_stay(ffi, features2):
    app_keep: list = []
    app = app_create_info(ffi, app_keep, features2)
    before = snapshot(ffi, app)
    keep: list = []
    info = structs.copy(ffi, "VkDeviceCreateInfo *", app, keep)   # the driver's copy (icd/device.py)
    enable_store_features(ffi, info, keep)
    assert snapshot(ffi, app) == before                            # nothing of the application's written
    if features2:
        f2 = structs.find(ffi, info.pNext, FEATURES2, "VkPhysicalDeviceFeatures2 *")
        assert f2 is not None and info.pNext != app.pNext and info.pEnabledFeatures == ffi.NULL
        enabled = f2.features
    else:
        assert info.pEnabledFeatures != app.pEnabledFeatures
        enabled = info.pEnabledFeatures
    assert (enabled.vertexPipelineStoresAndAtomics, enabled.fragmentStoresAndAtomics) == (vk.VK_TRUE, vk.VK_TRUE)
    assert enabled.shaderInt64 == vk.VK_TRUE                       # what the application asked for stays

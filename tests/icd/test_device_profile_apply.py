"""icd/device_profile.py without Vulkan: a small profile applied to structs a stand-in backend filled
(cffi structs declared from the registry, never compiled): features, limits, formats, queue families,
image-format support and vkCreateDevice's feature check."""
from __future__ import annotations

from types import SimpleNamespace as NS

import cffi
import pytest

from tessera.icd.device_profile import DeviceProfile
from tessera.icd.vulkan_profile import parse
from tessera.vkapi import cdecl
from tessera.vkapi.vkconst import vk

EMULATED = {"VK_ARM_shader_core_builtins": 2}
PROFILE = {
    "extensions": {"VK_KHR_swapchain": 70},
    "features": {
        "VkPhysicalDeviceFeatures": {"shaderInt64": True, "shaderFloat64": False, "wideLines": True},
        "VkPhysicalDeviceVulkan12Features": {"shaderInt8": False, "timelineSemaphore": True},
    },
    "properties": {"VkPhysicalDeviceProperties": {"limits": {
        "maxBoundDescriptorSets": 7, "maxImageDimension2D": 65536, "minUniformBufferOffsetAlignment": 16,
        "framebufferColorSampleCounts": ["VK_SAMPLE_COUNT_1_BIT", "VK_SAMPLE_COUNT_4_BIT", "VK_SAMPLE_COUNT_16_BIT"],
        "maxComputeWorkGroupCount": [4294967295, 4294967295, 4294967295]}},
        "VkPhysicalDeviceVulkan11Properties": {"subgroupSize": 16}},
    "formats": {"VK_FORMAT_R8G8B8A8_UNORM": {"VkFormatProperties": {
        "optimalTilingFeatures": ["VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT", "VK_FORMAT_FEATURE_COLOR_ATTACHMENT_BIT"],
        "linearTilingFeatures": [], "bufferFeatures": ["VK_FORMAT_FEATURE_VERTEX_BUFFER_BIT"]}}},
    "queueFamiliesProperties": [{"VkQueueFamilyProperties": {
        "queueFlags": ["VK_QUEUE_GRAPHICS_BIT", "VK_QUEUE_COMPUTE_BIT", "VK_QUEUE_TRANSFER_BIT"], "queueCount": 2,
        "timestampValidBits": 64}}],
}


@pytest.fixture(scope="module")
def ffi():
    decls = cdecl.generate(["vkGetPhysicalDeviceProperties2", "vkGetPhysicalDeviceFeatures2",
                            "vkGetPhysicalDeviceFormatProperties2", "vkGetPhysicalDeviceQueueFamilyProperties",
                            "vkCreateDevice"],
                           extra_types=["extenders:VkPhysicalDeviceFeatures2", "extenders:VkPhysicalDeviceProperties2",
                                        "extenders:VkFormatProperties2"])
    f = cffi.FFI()
    f.cdef(decls.cdef)
    return f


@pytest.fixture(scope="module")
def device() -> DeviceProfile:
    doc = {"profiles": {"P": {"api-version": "1.3.276", "capabilities": ["d"]}}, "capabilities": {"d": PROFILE}}
    return DeviceProfile(parse(doc, "test.json"), EMULATED)


def linked(ffi, *structs):
    for a, b in zip(structs, structs[1:]):
        a.pNext = b
    return structs[0]


def test_features_are_the_profiles_where_the_backend_has_them(ffi, device):
    f12 = ffi.new("VkPhysicalDeviceVulkan12Features *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                                         "shaderInt8": 1, "timelineSemaphore": 1, "hostQueryReset": 1})
    obj = ffi.new("VkPhysicalDeviceShaderObjectFeaturesEXT *",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT, "shaderObject": 1})
    core = ffi.new("VkPhysicalDeviceShaderCoreBuiltinsFeaturesARM *",
                   {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_FEATURES_ARM, "shaderCoreBuiltins": 1})
    f2 = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                                 "features": {"shaderInt64": 1, "shaderFloat64": 1, "wideLines": 0,
                                                              "geometryShader": 1}})
    linked(ffi, f2, f12, obj, core)
    device.apply_features2(ffi, f2)
    f = f2.features
    assert (f.shaderInt64, f.shaderFloat64, f.wideLines, f.geometryShader) == (1, 0, 0, 0)
    assert (f12.shaderInt8, f12.timelineSemaphore, f12.hostQueryReset) == (0, 1, 0)
    assert obj.shaderObject == 0                 # the profile has no shader objects
    assert core.shaderCoreBuiltins == 1          # Tessera's own extension: identity.py's business


def test_limits_clamp_toward_the_backend_and_the_subgroup_size_is_the_backends(ffi, device):
    v11 = ffi.new("VkPhysicalDeviceVulkan11Properties *",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES, "subgroupSize": 8})
    p2 = ffi.new("VkPhysicalDeviceProperties2 *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                                   "pNext": v11})
    p = p2.properties
    p.apiVersion = vk.VK_API_VERSION_1_4 | 305
    lim = p.limits
    lim.maxBoundDescriptorSets, lim.maxImageDimension2D, lim.minUniformBufferOffsetAlignment = 8, 16384, 64
    lim.framebufferColorSampleCounts = vk.VK_SAMPLE_COUNT_1_BIT | vk.VK_SAMPLE_COUNT_4_BIT
    lim.maxComputeWorkGroupCount = [65535, 65535, 65535]
    lim.maxViewports = 16                        # not in the profile: the backend's
    device.apply_properties2(ffi, p2)
    assert p.apiVersion == vk.VK_API_VERSION_1_3 | 276
    assert (lim.maxBoundDescriptorSets, lim.maxImageDimension2D, lim.minUniformBufferOffsetAlignment) == (7, 16384, 64)
    assert lim.framebufferColorSampleCounts == vk.VK_SAMPLE_COUNT_1_BIT | vk.VK_SAMPLE_COUNT_4_BIT
    assert list(lim.maxComputeWorkGroupCount) == [65535] * 3 and lim.maxViewports == 16
    assert v11.subgroupSize == 8


def test_formats_image_formats_and_queue_families(ffi, device):
    unorm, other = vk.VK_FORMAT_R8G8B8A8_UNORM, vk.VK_FORMAT_R16G16_SFLOAT
    everything = (vk.VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT | vk.VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT
                  | vk.VK_FORMAT_FEATURE_COLOR_ATTACHMENT_BIT)
    props = ffi.new("VkFormatProperties *", {"optimalTilingFeatures": everything, "linearTilingFeatures": everything,
                                             "bufferFeatures": vk.VK_FORMAT_FEATURE_VERTEX_BUFFER_BIT})
    device.apply_format(ffi, unorm, props)
    assert props.optimalTilingFeatures == everything & ~vk.VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT
    assert (props.linearTilingFeatures, props.bufferFeatures) == (0, vk.VK_FORMAT_FEATURE_VERTEX_BUFFER_BIT)
    absent = ffi.new("VkFormatProperties *", {"optimalTilingFeatures": everything})
    device.apply_format(ffi, other, absent)
    assert absent.optimalTilingFeatures == 0
    optimal, linear = vk.VK_IMAGE_TILING_OPTIMAL, vk.VK_IMAGE_TILING_LINEAR
    assert device.image_format_supported(unorm, optimal, vk.VK_IMAGE_USAGE_SAMPLED_BIT)
    assert not device.image_format_supported(unorm, optimal, vk.VK_IMAGE_USAGE_STORAGE_BIT)
    assert not device.image_format_supported(unorm, linear, vk.VK_IMAGE_USAGE_SAMPLED_BIT)
    assert not device.image_format_supported(other, optimal, vk.VK_IMAGE_USAGE_SAMPLED_BIT)
    q = ffi.new("VkQueueFamilyProperties *", {"queueFlags": 0xF, "queueCount": 1, "timestampValidBits": 64,
                                              "minImageTransferGranularity": {"width": 1, "height": 1, "depth": 1}})
    assert device.family_count(3) == 1
    device.apply_queue_family(0, q)
    assert (q.queueFlags, q.queueCount) == (vk.VK_QUEUE_GRAPHICS_BIT | vk.VK_QUEUE_COMPUTE_BIT
                                            | vk.VK_QUEUE_TRANSFER_BIT, 1)


def test_create_device_names_the_features_the_device_does_not_report(ffi, device):
    def backend_features(handle, f2):   # the backend has everything
        f2.features.shaderInt64 = f2.features.shaderFloat64 = f2.features.wideLines = 1
        for p in (ffi.cast("VkBaseOutStructure *", f2.pNext),):
            if p != ffi.NULL and p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES:
                ffi.cast("VkPhysicalDeviceVulkan12Features *", p).shaderInt8 = 1
    phys = NS(handle=1, api_version=vk.VK_API_VERSION_1_4, extensions={},
              next=NS(vkGetPhysicalDeviceFeatures2=backend_features))
    f12 = ffi.new("VkPhysicalDeviceVulkan12Features *",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, "shaderInt8": 1})
    obj = ffi.new("VkPhysicalDeviceShaderObjectFeaturesEXT *",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT, "shaderObject": 1})
    f12.pNext = obj
    enabled = ffi.new("VkPhysicalDeviceFeatures *", {"shaderInt64": 1, "shaderFloat64": 1})
    info = ffi.new("VkDeviceCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "pNext": f12,
                                            "pEnabledFeatures": enabled})
    # shaderObject's extension is not enabled: its struct is not the device's business
    assert device.missing_features(ffi, phys, info, frozenset()) == [
        "VkPhysicalDeviceFeatures.shaderFloat64", "VkPhysicalDeviceVulkan12Features.shaderInt8"]
    assert "VkPhysicalDeviceShaderObjectFeaturesEXT.shaderObject" in device.missing_features(
        ffi, phys, info, frozenset({"VK_EXT_shader_object"}))

"""icd/device_clamp.py without Vulkan: each vk.xml limittype clamps toward the backend in its own
direction, identity and executed values stay the backend's, and `differences` lists every change
with its reason."""
from __future__ import annotations

from tessera.icd import device_clamp as dc
from tessera.icd.vulkan_profile import Flags, parse
from tessera.vkapi.vkconst import vk

LIMITS = "VkPhysicalDeviceLimits"


def test_limit_types_come_from_the_registry():
    assert vk.LIMIT_TYPES[LIMITS]["maxBoundDescriptorSets"] == "max"
    assert vk.LIMIT_TYPES[LIMITS]["minUniformBufferOffsetAlignment"].startswith("min")
    assert vk.LIMIT_TYPES[LIMITS]["framebufferColorSampleCounts"] == "bitmask"
    assert vk.LIMIT_TYPES[LIMITS]["pointSizeRange"] == "range"
    assert vk.LIMIT_TYPES["VkPhysicalDeviceProperties"]["limits"] == "struct:VkPhysicalDeviceLimits"


def test_each_limit_type_clamps_toward_the_backend():
    assert dc.clamp(LIMITS, "maxBoundDescriptorSets", 7, 8) == (7, None)
    assert dc.clamp(LIMITS, "maxBoundDescriptorSets", 8, 7) == (7, dc.LOWER)
    assert dc.clamp(LIMITS, "minUniformBufferOffsetAlignment", 16, 64) == (64, dc.HIGHER)
    assert dc.clamp(LIMITS, "minUniformBufferOffsetAlignment", 64, 16) == (64, None)
    counts = Flags(("VK_SAMPLE_COUNT_1_BIT", "VK_SAMPLE_COUNT_4_BIT", "VK_SAMPLE_COUNT_16_BIT"), (1, 4, 16))
    assert dc.clamp(LIMITS, "framebufferColorSampleCounts", counts, 1 | 4) == (5, dc.BACKEND_LACKS)
    assert dc.clamp(LIMITS, "pointSizeRange", (1.0, 1024.0), (1.0, 255.0)) == ((1.0, 255.0), dc.LOWER)
    assert dc.clamp(LIMITS, "maxComputeWorkGroupCount", (2**32 - 1,) * 3, (65535,) * 3) == ((65535,) * 3, dc.LOWER)
    assert dc.clamp(LIMITS, "strictLines", True, 0) == (False, dc.BACKEND_LACKS)


def test_identity_executed_and_exact_values_stay_the_backends():
    assert dc.clamp("VkPhysicalDeviceProperties", "deviceName", "Mali-G720", "llvmpipe") == ("llvmpipe",
                                                                                            dc.IDENTITY_REASON)
    assert dc.clamp("VkPhysicalDeviceVulkan11Properties", "subgroupSize", 16, 8) == (8, dc.EXECUTED_REASON)
    clip = "VkPhysicalDeviceVulkan11Properties"
    user, every = vk.VK_POINT_CLIPPING_BEHAVIOR_USER_CLIP_PLANES_ONLY, vk.VK_POINT_CLIPPING_BEHAVIOR_ALL_CLIP_PLANES
    assert dc.clamp(clip, "pointClippingBehavior", user, every) == (every, dc.EXACT)
    assert dc.clamp(clip, "pointClippingBehavior", user, user) == (user, None)


def test_nested_structs_clamp_member_by_member():
    reported, why = dc.clamp("VkPhysicalDeviceProperties", "limits",
                             {"maxBoundDescriptorSets": 7, "maxClipDistances": 0},
                             {"maxBoundDescriptorSets": 8, "maxClipDistances": 8, "maxViewports": 16})
    assert reported == {"maxBoundDescriptorSets": 7, "maxClipDistances": 0, "maxViewports": 16}
    assert why is None


def test_features_extensions_and_queue_families():
    assert dc.feature(True, 1) is True and dc.feature(True, 0) is False and dc.feature(None, 1) is False
    assert dc.extensions({"VK_A": 2, "VK_B": 1}, {"VK_A": 1, "VK_C": 3}, {"VK_ARM_x": 1}) == {"VK_A": 1, "VK_ARM_x": 1}


def _profile(device: dict, api="1.3.0"):
    return parse({"profiles": {"P": {"api-version": api, "capabilities": ["d"]}}, "capabilities": {"d": device}}, "t")


def test_differences_name_every_change_with_its_reason():
    mali = _profile({
        "extensions": {"VK_KHR_swapchain": 70, "VK_EXT_fragment_density_map": 2, "VK_ARM_shader_core_builtins": 2},
        "features": {"VkPhysicalDeviceFeatures": {"shaderInt64": True, "shaderFloat64": False, "wideLines": True},
                     "VkPhysicalDeviceFragmentDensityMapFeaturesEXT": {"fragmentDensityMap": True}},
        "properties": {"VkPhysicalDeviceProperties": {"deviceName": "Mali", "limits": {
            "maxBoundDescriptorSets": 7, "maxComputeWorkGroupCount": [2**32 - 1] * 3}}},
        "formats": {"VK_FORMAT_R8_UNORM": {"VkFormatProperties": {
            "optimalTilingFeatures": ["VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT", "VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT"]}}},
        "queueFamiliesProperties": [{"VkQueueFamilyProperties": {
            "queueFlags": ["VK_QUEUE_GRAPHICS_BIT"], "queueCount": 2, "timestampValidBits": 64}}],
    })
    backend = _profile({
        "extensions": {"VK_KHR_swapchain": 70, "VK_EXT_mesh_shader": 1},
        "features": {"VkPhysicalDeviceFeatures": {"shaderInt64": True, "shaderFloat64": True, "wideLines": False}},
        "properties": {"VkPhysicalDeviceProperties": {"deviceName": "llvmpipe", "limits": {
            "maxBoundDescriptorSets": 8, "maxComputeWorkGroupCount": [65535] * 3}}},
        "formats": {"VK_FORMAT_R8_UNORM": {"VkFormatProperties": {
            "optimalTilingFeatures": ["VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT"]}}},
        "queueFamiliesProperties": [{"VkQueueFamilyProperties": {
            "queueFlags": ["VK_QUEUE_GRAPHICS_BIT", "VK_QUEUE_SPARSE_BINDING_BIT"], "queueCount": 1,
            "timestampValidBits": 64}}],
    }, api="1.4.0")
    found = {d.path: d for d in dc.differences(mali, backend, {"VK_ARM_shader_core_builtins": 2, "VK_ARM_tensors": 2})}
    assert found.pop("extensions.VK_EXT_fragment_density_map").reason == dc.BACKEND_LACKS
    assert found.pop("extensions.VK_ARM_tensors").reason == "provided by Tessera (emulated)"
    assert found.pop("features.VkPhysicalDeviceFragmentDensityMapFeaturesEXT").reported is None
    assert found.pop("features.VkPhysicalDeviceFeatures.wideLines").reason == dc.BACKEND_LACKS
    assert found.pop("properties.VkPhysicalDeviceProperties.deviceName").reason == dc.TESSERA_IDENTITY_REASON
    d = found.pop("properties.VkPhysicalDeviceProperties.limits.maxComputeWorkGroupCount")
    assert (d.profile, d.reported, d.reason) == ((2**32 - 1,) * 3, (65535,) * 3, dc.LOWER)
    d = found.pop("formats.VK_FORMAT_R8_UNORM.VkFormatProperties.optimalTilingFeatures")
    assert d.reported == vk.VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT and "STORAGE_IMAGE" in d.reason
    d = found.pop("queueFamiliesProperties[0].queueCount")
    assert (d.profile, d.reported) == (2, 1) and "no second queue" in d.reason
    assert found == {}   # maxBoundDescriptorSets 7 <= 8, shaderFloat64 false on the device: no difference


def test_an_extension_the_backend_has_under_a_promoted_name_is_reported():
    backend = {"VK_KHR_global_priority": 1, "VK_EXT_calibrated_timestamps": 2}
    v13 = vk.VK_API_VERSION_1_3
    assert vk.EXTENSION_PROMOTED["VK_EXT_global_priority"] == "VK_KHR_global_priority"
    assert dc.provider("VK_EXT_global_priority", backend, v13) == "VK_KHR_global_priority"   # promoted to
    assert dc.provider("VK_KHR_calibrated_timestamps", backend, v13) == "VK_EXT_calibrated_timestamps"  # from
    assert dc.provider("VK_EXT_tooling_info", backend, v13) == ""                               # core in 1.3
    assert dc.provider("VK_EXT_tooling_info", backend, vk.VK_API_VERSION_1_2) is None
    assert dc.provider("VK_EXT_fragment_density_map", backend, v13) is None
    profile = {"VK_EXT_global_priority": 2, "VK_EXT_tooling_info": 1, "VK_EXT_fragment_density_map": 2}
    assert dc.extensions(profile, backend, {}, v13) == {"VK_EXT_global_priority": 2, "VK_EXT_tooling_info": 1}


def test_report_lines_say_path_values_and_reason():
    from tessera.icd.device_report import lines

    found = [dc.Difference("properties.VkPhysicalDeviceProperties.limits.maxImageDimension2D", 65536, 16384, dc.LOWER),
             dc.Difference("extensions.VK_ARM_tensors", None, 2, "provided by Tessera (emulated)")]
    assert lines(found) == [
        "properties.VkPhysicalDeviceProperties.limits.maxImageDimension2D: 0x10000 -> 16384  (the backend's limit is lower)",
        "extensions.VK_ARM_tensors: - -> 2  (provided by Tessera (emulated))"]

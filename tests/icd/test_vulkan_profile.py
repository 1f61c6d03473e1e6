"""icd/vulkan_profile.py without Vulkan: a small Vulkan Profiles file written here is read into the
typed view (names converted with the registry's constants), and malformed files fail with the file
and the JSON path."""
from __future__ import annotations

import json

import pytest

from tessera.icd.vulkan_profile import Flags, api_version, load, parse
from tessera.vkapi.vkconst import vk


def document(device: dict, api: str = "1.3.276", extra_profiles: dict | None = None) -> dict:
    return {
        "$schema": "https://schema.khronos.org/vulkan/profiles-0.8-latest.json#",
        "profiles": {"VP_TEST_device": {"version": 1, "api-version": api, "label": "test device",
                                        "capabilities": ["device"]}, **(extra_profiles or {})},
        "capabilities": {"device": device},
    }


DEVICE = {
    "extensions": {"VK_KHR_swapchain": 70, "VK_EXT_inline_uniform_block": 1},
    "features": {
        "VkPhysicalDeviceFeatures": {"shaderInt64": True, "shaderFloat64": False},
        "VkPhysicalDeviceVulkan13Features": {"inlineUniformBlock": True},
        "VkPhysicalDeviceInlineUniformBlockFeaturesEXT": {"inlineUniformBlock": False,
                                                          "descriptorBindingInlineUniformBlockUpdateAfterBind": True},
    },
    "properties": {
        "VkPhysicalDeviceProperties": {
            "deviceName": "Mali-Test", "apiVersion": 4206868,
            "limits": {"maxBoundDescriptorSets": 7, "framebufferColorSampleCounts":
                       ["VK_SAMPLE_COUNT_1_BIT", "VK_SAMPLE_COUNT_4_BIT"], "pointSizeRange": [1, 1024]},
        },
        "VkPhysicalDeviceVulkan11Properties": {"pointClippingBehavior": "VK_POINT_CLIPPING_BEHAVIOR_ALL_CLIP_PLANES"},
    },
    "formats": {"VK_FORMAT_R8G8B8A8_UNORM": {"VkFormatProperties": {
        "linearTilingFeatures": [], "bufferFeatures": ["VK_FORMAT_FEATURE_VERTEX_BUFFER_BIT"],
        "optimalTilingFeatures": ["VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT", "VK_FORMAT_FEATURE_BLIT_SRC_BIT"]}}},
    "queueFamiliesProperties": [{"VkQueueFamilyProperties": {
        "queueFlags": ["VK_QUEUE_GRAPHICS_BIT", "VK_QUEUE_COMPUTE_BIT"], "queueCount": 2,
        "timestampValidBits": 64, "minImageTransferGranularity": {"width": 1, "height": 1, "depth": 1}}}],
}


def write(tmp_path, doc, name="gpu.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_a_profile_is_read_into_registry_values(tmp_path):
    p = load(write(tmp_path, document(DEVICE)))
    assert p.name == "VP_TEST_device" and p.label == "test device"
    assert p.api_version == (1 << 22) | (3 << 12) | 276
    assert dict(p.extensions) == {"VK_KHR_swapchain": 70, "VK_EXT_inline_uniform_block": 1}
    assert p.features["VkPhysicalDeviceFeatures"]["shaderInt64"] is True
    limits = p.properties["VkPhysicalDeviceProperties"]["limits"]
    assert limits["maxBoundDescriptorSets"] == 7
    assert limits["framebufferColorSampleCounts"] == Flags(("VK_SAMPLE_COUNT_1_BIT", "VK_SAMPLE_COUNT_4_BIT"),
                                                           (vk.VK_SAMPLE_COUNT_1_BIT, vk.VK_SAMPLE_COUNT_4_BIT))
    assert limits["framebufferColorSampleCounts"].mask == vk.VK_SAMPLE_COUNT_1_BIT | vk.VK_SAMPLE_COUNT_4_BIT
    assert limits["pointSizeRange"] == (1, 1024)
    assert (p.properties["VkPhysicalDeviceVulkan11Properties"]["pointClippingBehavior"]
            == vk.VK_POINT_CLIPPING_BEHAVIOR_ALL_CLIP_PLANES)
    assert p.properties["VkPhysicalDeviceProperties"]["deviceName"] == "Mali-Test"
    fmt = p.formats["VK_FORMAT_R8G8B8A8_UNORM"]["VkFormatProperties"]
    assert fmt["optimalTilingFeatures"].mask == vk.VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT | vk.VK_FORMAT_FEATURE_BLIT_SRC_BIT
    assert fmt["linearTilingFeatures"].mask == 0
    (family,) = p.queue_families
    assert family.flags == vk.VK_QUEUE_GRAPHICS_BIT | vk.VK_QUEUE_COMPUTE_BIT
    assert (family.count, family.timestamp_valid_bits, family.min_image_transfer_granularity) == (2, 64, (1, 1, 1))


def test_aliases_fold_into_the_canonical_struct_and_features_are_found_by_member(tmp_path):
    p = load(write(tmp_path, document(DEVICE)))
    assert "VkPhysicalDeviceInlineUniformBlockFeaturesEXT" not in p.features
    folded = p.features["VkPhysicalDeviceInlineUniformBlockFeatures"]
    assert folded == {"inlineUniformBlock": False, "descriptorBindingInlineUniformBlockUpdateAfterBind": True}
    # a struct the profile does not name takes the feature from the struct that has the member
    assert p.feature("VkPhysicalDeviceShaderFloat16Int8Features", "shaderInt64") is True
    assert p.feature("VkPhysicalDeviceVulkan13Features", "inlineUniformBlock") is True
    assert p.feature("VkPhysicalDeviceMeshShaderFeaturesEXT", "meshShader") is None


def test_capabilities_merge_in_order_and_a_named_profile_is_chosen(tmp_path):
    doc = document(DEVICE, extra_profiles={"VP_TEST_more": {"api-version": "1.4.300",
                                                            "capabilities": ["device", "more"]}})
    doc["capabilities"]["more"] = {"extensions": {"VK_KHR_swapchain": 71},
                                   "features": {"VkPhysicalDeviceFeatures": {"shaderFloat64": True}}}
    path = write(tmp_path, doc)
    with pytest.raises(ValueError, match=r"gpu.json: profiles: 2 profiles .*: name one"):
        load(path)
    p = load(path, "VP_TEST_more")
    assert p.extensions["VK_KHR_swapchain"] == 71
    assert p.features["VkPhysicalDeviceFeatures"] == {"shaderInt64": True, "shaderFloat64": True}
    assert p.api_version == (1 << 22) | (4 << 12) | 300


@pytest.mark.parametrize("change, where", [
    (lambda d: d["features"]["VkPhysicalDeviceFeatures"].update(shaderInt64="yes"),
     r"capabilities\.device\.features\.VkPhysicalDeviceFeatures\.shaderInt64: expected a boolean"),
    (lambda d: d["properties"]["VkPhysicalDeviceProperties"]["limits"].update(
        framebufferColorSampleCounts=["VK_SAMPLE_COUNT_3_BIT"]),
     r"limits\.framebufferColorSampleCounts\[0\]: 'VK_SAMPLE_COUNT_3_BIT' is not a Vulkan enum or flag"),
    (lambda d: d["extensions"].update(VK_KHR_swapchain="70"),
     r"capabilities\.device\.extensions\.VK_KHR_swapchain: expected a spec version"),
    (lambda d: d["formats"].update(VK_FORMAT_NOT_ONE={}),
     r"capabilities\.device\.formats\.VK_FORMAT_NOT_ONE: 'VK_FORMAT_NOT_ONE' is not a Vulkan"),
    (lambda d: d["queueFamiliesProperties"][0]["VkQueueFamilyProperties"].pop("queueCount"),
     r"queueFamiliesProperties\[0\]\.VkQueueFamilyProperties\.queueCount: expected an integer"),
    (lambda d: d.update(memoryProperties={}),
     r"capabilities\.device\.memoryProperties: not a section of the format"),
])
def test_malformed_files_name_the_file_and_the_json_path(tmp_path, change, where):
    device = json.loads(json.dumps(DEVICE))
    change(device)
    with pytest.raises(ValueError, match=where):
        parse(document(device), "gpu.json")


def test_unreadable_and_non_json_files_and_bad_versions(tmp_path):
    with pytest.raises(ValueError, match=r"missing.json: no such file"):
        load(tmp_path / "missing.json")
    with pytest.raises(ValueError, match=r": not a file"):
        load(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("{\"profiles\": ")
    with pytest.raises(ValueError, match=r"bad.json: not JSON: line 1"):
        load(bad)
    with pytest.raises(ValueError, match=r"api-version: api-version '1.3' is not MAJOR.MINOR.PATCH"):
        parse(document(DEVICE, api="1.3"), "gpu.json")
    assert api_version("1.0.0") == vk.VK_API_VERSION_1_0

"""What the installed Khronos validation layer cannot know, and the only messages of it the tests accept.

The tests run Debian 12's validation layer (vulkan-validationlayers 1.3.239, Vulkan headers 239). It
predates the structure types that `tessera run --instrument` and `--regions` chain (the Arm extensions
are in the registry from 1.4.3xx; VK_KHR_maintenance5 from 1.3.268), so it reports each as an unknown
structure in a pNext chain, and warns once per device that it does not know the extension. Neither
Debian's bookworm-backports nor PyPI offers a newer validation layer (checked for issue #23 with
`apt-cache policy vulkan-validationlayers` against bookworm-backports, and the registries' package
lists). Every other message fails the tests: a new one means a new mistake, or a newer layer.

Each entry: the message's VUID, the structure type's value (or the extension's name) it names, and why.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tessera.vkapi.vkconst import vk

VALIDATION_RELEASE = "1.3.239"


@dataclass(frozen=True)
class Predated:
    vuid: str
    names: int | str        # the sType value a "unknown VkStructureType (N)" message names, or an extension
    reason: str


_REGIONS = "--regions: VK_ARM_performance_counters_by_region (extension 606), newer than the layer"
_INSTRUMENT = "--instrument: VK_ARM_shader_instrumentation (extension 608), newer than the layer"
_FLAGS2 = ("--instrument: VkPipelineCreateFlags2CreateInfo carries VK_PIPELINE_CREATE_2_INSTRUMENT_SHADERS_BIT_ARM "
           "(VK_KHR_maintenance5, 1.3.268), newer than the layer")

PREDATED = (
    Predated("VUID-VkDeviceCreateInfo-pNext-pNext",
             vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_COUNTERS_BY_REGION_FEATURES_ARM,
             _REGIONS + ": the layer enables the feature"),
    Predated("VUID-VkPhysicalDeviceProperties2-pNext-pNext",
             vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_COUNTERS_BY_REGION_PROPERTIES_ARM,
             _REGIONS + ": the layer reads the region size and alignments"),
    Predated("VUID-VkRenderPassBeginInfo-pNext-pNext",
             vk.VK_STRUCTURE_TYPE_RENDER_PASS_PERFORMANCE_COUNTERS_BY_REGION_BEGIN_INFO_ARM,
             _REGIONS + ": the layer asks for counters in each render pass"),
    Predated("VUID-VkRenderingInfo-pNext-pNext",
             vk.VK_STRUCTURE_TYPE_RENDER_PASS_PERFORMANCE_COUNTERS_BY_REGION_BEGIN_INFO_ARM,
             _REGIONS + ": the layer asks for counters in each dynamic rendering pass"),
    Predated("VUID_Undefined", "VK_ARM_performance_counters_by_region",
             _REGIONS + ": 'Device Extension … is not supported by this layer', once per device"),
    Predated("VUID-VkDeviceCreateInfo-pNext-pNext",
             vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INSTRUMENTATION_FEATURES_ARM,
             _INSTRUMENT + ": the layer enables the feature"),
    Predated("VUID_Undefined", "VK_ARM_shader_instrumentation",
             _INSTRUMENT + ": 'Device Extension … is not supported by this layer', once per device"),
    Predated("VUID-VkComputePipelineCreateInfo-pNext-pNext", vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO,
             _FLAGS2),
    Predated("VUID-VkGraphicsPipelineCreateInfo-pNext-pNext", vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO,
             _FLAGS2),
)
_ACCEPTED = {(p.vuid, p.names) for p in PREDATED}

# How examples/vkapp.py prints each message its messenger counts (validation type, warning or error).
_LINE = re.compile(r"^\[validation (?:ERROR|WARNING|\d+)\] .*$", re.M)
_VUID = re.compile(r"\[ (VUID[\w-]*|UNASSIGNED[\w-]*) \]")
_STYPE = re.compile(r"unknown VkStructureType \((\d+)\)")
_EXTENSION = re.compile(r"Device Extension (VK_\w+) is not supported by this layer")


def messages(stderr: str) -> list[str]:
    """The validation messages an example printed (examples/vkapp.py's messenger)."""
    return _LINE.findall(stderr)


def predated(line: str) -> Predated | None:
    """The entry of PREDATED that accepts this message, if one does."""
    vuid = _VUID.search(line)
    named = _STYPE.search(line) or _EXTENSION.search(line)
    if vuid is None or named is None:
        return None
    value = int(named.group(1)) if named.re is _STYPE else named.group(1)
    key = (vuid.group(1), value)
    return next((p for p in PREDATED if (p.vuid, p.names) == key), None) if key in _ACCEPTED else None


def unexplained(stderr: str) -> list[str]:
    """The validation messages no entry of PREDATED accepts."""
    return [line for line in messages(stderr) if predated(line) is None]

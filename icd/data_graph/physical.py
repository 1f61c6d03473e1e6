"""VK_ARM_data_graph's physical-device answers in the emulated Mali (and VK_ARM_data_graph_instruction_set_tosa's).

Role: VkPhysicalDeviceDataGraphFeaturesARM (dataGraph, dataGraphShaderModule on; update after bind,
specialization constants, descriptor buffers off); VK_QUEUE_DATA_GRAPH_BIT_ARM on every queue family with
compute (a Mali runs graphs on its shader cores, so the compute queues take them: the bit is added to the
existing families rather than a family of its own); one engine per such family (DEFAULT, not foreign)
running the TOSA.001000.1 extended instruction set (vkGetPhysicalDeviceQueueFamilyDataGraphPropertiesARM,
its processing-engine properties: no foreign handle types; its TOSA properties: profiles PRO-FP and PRO-INT,
level 8K);
VK_FORMAT_FEATURE_2_TENSOR_DATA_GRAPH_BIT_ARM for the tensor formats the graphs run on (R32_SFLOAT; R8, R16 and
R32 SINT / UINT for integer graphs). TOSA profiles: PRO-FP (conformant) and PRO-INT (experimental: the integer
operators of quantized networks, quantized.py).
No state. Threads: any (answers only).
"""
from __future__ import annotations

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from ..objects import PhysicalDevice
from .objects import GRAPH_FORMATS, VALIDATION_FAILED, Hooks

QUEUE_BIT = vk.VK_QUEUE_DATA_GRAPH_BIT_ARM
TOSA_SET_NAME = "TOSA.001000.1"
TOSA_VERSION = 0x01000001            # (1 << 24) | 1: TOSA 1.0, SPIR-V extended instruction set version 1
# TOSA 1.0's profiles: floating point (fp32 graphs), and integer, experimental since only the operators of
# quantized networks are run (icd/data_graph/quantized.py)
TOSA_PROFILES = (("PRO-FP", vk.VK_DATA_GRAPH_TOSA_QUALITY_CONFORMANT_ARM),
                 ("PRO-INT", vk.VK_DATA_GRAPH_TOSA_QUALITY_EXPERIMENTAL_ARM))


class PhysicalQueries(Hooks):
    """The physical-device hooks: one method per command (HookSet.bind)."""

    def after_vkGetPhysicalDeviceFeatures2(self, phys, result, physicalDevice, pFeatures):
        f = structs.find(self.ffi, pFeatures.pNext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DATA_GRAPH_FEATURES_ARM,
                         "VkPhysicalDeviceDataGraphFeaturesARM *")
        if f is not None:
            f.dataGraph = f.dataGraphShaderModule = vk.VK_TRUE
            f.dataGraphUpdateAfterBind = f.dataGraphSpecializationConstants = vk.VK_FALSE
            f.dataGraphDescriptorBuffer = vk.VK_FALSE

    def after_vkGetPhysicalDeviceQueueFamilyProperties(self, phys, result, physicalDevice, pCount, pProperties):
        if pProperties != self.ffi.NULL:
            for i in range(pCount[0]):
                if pProperties[i].queueFlags & vk.VK_QUEUE_COMPUTE_BIT:
                    pProperties[i].queueFlags |= QUEUE_BIT

    def after_vkGetPhysicalDeviceQueueFamilyProperties2(self, phys, result, physicalDevice, pCount, pProperties):
        if pProperties != self.ffi.NULL:
            for i in range(pCount[0]):
                p = pProperties[i].queueFamilyProperties
                if p.queueFlags & vk.VK_QUEUE_COMPUTE_BIT:
                    p.queueFlags |= QUEUE_BIT

    def after_vkGetPhysicalDeviceFormatProperties2(self, phys, result, physicalDevice, fmt, pProperties):
        p = structs.find(self.ffi, pProperties.pNext, vk.VK_STRUCTURE_TYPE_TENSOR_FORMAT_PROPERTIES_ARM,
                         "VkTensorFormatPropertiesARM *")
        if p is not None and fmt in GRAPH_FORMATS:
            p.optimalTilingTensorFeatures |= vk.VK_FORMAT_FEATURE_2_TENSOR_DATA_GRAPH_BIT_ARM
            p.linearTilingTensorFeatures |= vk.VK_FORMAT_FEATURE_2_TENSOR_DATA_GRAPH_BIT_ARM

    def _family_flags(self, phys: PhysicalDevice, index: int) -> int | None:
        ffi = self.ffi
        count = ffi.new("uint32_t *")
        phys.next.vkGetPhysicalDeviceQueueFamilyProperties(phys.handle, count, ffi.NULL)
        if index >= count[0]:
            return None
        props = ffi.new("VkQueueFamilyProperties[]", count[0])
        phys.next.vkGetPhysicalDeviceQueueFamilyProperties(phys.handle, count, props)
        return int(props[index].queueFlags)

    def _graph_family(self, phys: PhysicalDevice, index: int) -> bool:
        flags = self._family_flags(phys, index)
        return flags is not None and bool(flags & vk.VK_QUEUE_COMPUTE_BIT)

    def replace_vkGetPhysicalDeviceQueueFamilyDataGraphPropertiesARM(self, physicalDevice, queueFamilyIndex, pCount,
                                                                     pProperties):
        phys = self.objects.get(physicalDevice, PhysicalDevice)
        if self._family_flags(phys, queueFamilyIndex) is None:
            self.refuse("vkGetPhysicalDeviceQueueFamilyDataGraphPropertiesARM",
                        f"queueFamilyIndex {queueFamilyIndex} is not a queue family of the physical device")
            return VALIDATION_FAILED
        available = 1 if self._graph_family(phys, queueFamilyIndex) else 0
        if pProperties == self.ffi.NULL:
            pCount[0] = available
            return vk.VK_SUCCESS
        n = min(pCount[0], available)
        for i in range(n):
            p = pProperties[i]
            p.engine.type = vk.VK_PHYSICAL_DEVICE_DATA_GRAPH_PROCESSING_ENGINE_TYPE_DEFAULT_ARM
            p.engine.isForeign = vk.VK_FALSE
            p.operation.operationType = vk.VK_PHYSICAL_DEVICE_DATA_GRAPH_OPERATION_TYPE_SPIRV_EXTENDED_INSTRUCTION_SET_ARM
            name = TOSA_SET_NAME.encode() + b"\0"
            self.ffi.memmove(p.operation.name, name, len(name))
            p.operation.version = TOSA_VERSION
        pCount[0] = n
        return vk.VK_INCOMPLETE if n < available else vk.VK_SUCCESS

    def replace_vkGetPhysicalDeviceQueueFamilyDataGraphProcessingEnginePropertiesARM(self, physicalDevice, pInfo,
                                                                                     pProperties):
        """The DEFAULT engine shares memory and semaphores with the device itself: no foreign handle types."""
        pProperties.foreignSemaphoreHandleTypes = 0
        pProperties.foreignMemoryHandleTypes = 0

    def replace_vkGetPhysicalDeviceQueueFamilyDataGraphEngineOperationPropertiesARM(
            self, physicalDevice, queueFamilyIndex, pQueueFamilyDataGraphProperties, pProperties):
        """VK_ARM_data_graph_instruction_set_tosa: the TOSA profile and level of the engine's TOSA operation."""
        ffi = self.ffi
        props = pQueueFamilyDataGraphProperties
        if props == ffi.NULL or ffi.string(props.operation.name).decode(errors="replace") != TOSA_SET_NAME:
            self.refuse("vkGetPhysicalDeviceQueueFamilyDataGraphEngineOperationPropertiesARM",
                        f"pQueueFamilyDataGraphProperties names no {TOSA_SET_NAME} operation of this device")
            return VALIDATION_FAILED
        if pProperties == ffi.NULL or pProperties.sType != vk.VK_STRUCTURE_TYPE_QUEUE_FAMILY_DATA_GRAPH_TOSA_PROPERTIES_ARM:
            self.refuse("vkGetPhysicalDeviceQueueFamilyDataGraphEngineOperationPropertiesARM",
                        "pProperties is not a VkQueueFamilyDataGraphTOSAPropertiesARM")
            return VALIDATION_FAILED
        t = ffi.cast("VkQueueFamilyDataGraphTOSAPropertiesARM *", pProperties)
        profiles = self._tosa_names
        t.profileCount = len(TOSA_PROFILES)
        t.pProfiles = profiles
        t.extensionCount = 0
        t.pExtensions = ffi.NULL
        t.level = vk.VK_DATA_GRAPH_TOSA_LEVEL_8K_ARM
        return vk.VK_SUCCESS

    @property
    def _tosa_names(self):
        names = getattr(self, "_tosa_profiles", None)
        if names is None:
            names = self.ffi.new(f"VkDataGraphTOSANameQualityARM[{len(TOSA_PROFILES)}]")
            for k, (name, quality) in enumerate(TOSA_PROFILES):
                data = name.encode() + b"\0"
                self.ffi.memmove(names[k].name, data, len(data))
                names[k].qualityFlags = quality
            self._tosa_profiles = names
        return names

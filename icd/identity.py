"""The Mali identity: what the emulated GPU reports about itself.

Applied after the backend has filled a query and the device profile has been
applied to it (icd/device_profile.py: limits, apiVersion, features of a real
device, clamped to the backend), so every field the identity does not own stays
theirs (UUIDs and conformance: the backend's).
The identity owns vendorID, deviceID, deviceType, deviceName, driverVersion
(the emulated driver's own release, profiles.DRIVER_VERSION), driverID and
driverName; driverInfo names the backend that really executes.
"""
from __future__ import annotations

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from .instrumentation.metrics import METRICS
from .profiles import ARM_VENDOR_ID, DRIVER_RELEASE_NAME, DRIVER_VERSION, GpuProfile
from .regions import props as region_props

DRIVER_NAME = "Mali (Tessera emulation)"
# Extensions this driver adds on top of the backend, with their spec versions (vk.xml).
EMULATED_DEVICE_EXTENSIONS = {
    "VK_EXT_debug_marker": 4,
    "VK_ARM_shader_core_properties": 1,
    "VK_ARM_shader_core_builtins": 2,
    "VK_ARM_shader_instrumentation": 1,
    "VK_ARM_performance_counters_by_region": 1,
    "VK_ARM_tensors": 2,
    "VK_ARM_data_graph": 1,                          # icd/data_graph/
    "VK_ARM_data_graph_instruction_set_tosa": 1,
}
EMULATED_INSTANCE_EXTENSIONS = {"VK_EXT_debug_utils": 2}


def _set_string(ffi, field, text: str) -> None:
    size = ffi.sizeof(field)
    data = text.encode()[: size - 1] + b"\0"
    ffi.memmove(field, data, len(data))


def apply_properties(ffi, props, profile: GpuProfile) -> None:
    """VkPhysicalDeviceProperties: vendor, device, name, type and driver version of the Mali."""
    props.vendorID = ARM_VENDOR_ID
    props.driverVersion = DRIVER_VERSION
    props.deviceID = profile.device_id
    props.deviceType = vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU
    _set_string(ffi, props.deviceName, profile.device_name)


def apply_properties2(ffi, props2, profile: GpuProfile) -> None:
    """VkPhysicalDeviceProperties2 and every struct of its pNext chain we own."""
    backend_name = structs.string(ffi, props2.properties.deviceName)
    apply_properties(ffi, props2.properties, profile)
    for p in structs.chain(ffi, props2.pNext):
        if p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES:
            _driver(ffi, ffi.cast("VkPhysicalDeviceDriverProperties *", p), backend_name)
        elif p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES:
            _driver(ffi, ffi.cast("VkPhysicalDeviceVulkan12Properties *", p), backend_name)
        elif p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_ARM:
            s = ffi.cast("VkPhysicalDeviceShaderCorePropertiesARM *", p)
            s.pixelRate, s.texelRate, s.fmaRate = profile.pixel_rate, profile.texel_rate, profile.fma_rate
        elif p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INSTRUMENTATION_PROPERTIES_ARM:
            s = ffi.cast("VkPhysicalDeviceShaderInstrumentationPropertiesARM *", p)
            s.numMetrics = len(METRICS)
            s.perBasicBlockGranularity = vk.VK_TRUE   # counts per SPIR-V block (icd/instrumentation/)
        elif p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_COUNTERS_BY_REGION_PROPERTIES_ARM:
            region_props.apply_properties(ffi, p)
        elif p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TENSOR_PROPERTIES_ARM:
            tensor_properties(ffi.cast("VkPhysicalDeviceTensorPropertiesARM *", p), props2.properties.limits)
        elif p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_PROPERTIES_ARM:
            s = ffi.cast("VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM *", p)
            s.shaderCoreMask = profile.shader_core_mask
            s.shaderCoreCount = profile.shader_cores
            s.shaderWarpsPerCore = profile.warps_per_core


def _driver(ffi, s, backend_name: str) -> None:
    """driverID/driverName of Arm's driver; driverInfo says what really executes.

    driverInfo: "<release> emulated; executes on <backend device> (<backend driverName> <backend
    driverInfo>)", e.g. "r49p0 emulated; executes on llvmpipe (LLVM 15.0.6, 256 bits) (llvmpipe
    Mesa 25.0.7-2~bpo12+1 (LLVM 15.0.6))"; cut at VK_MAX_DRIVER_INFO_SIZE.
    """
    backend_driver = " ".join(filter(None, (structs.string(ffi, s.driverName), structs.string(ffi, s.driverInfo))))
    s.driverID = vk.VK_DRIVER_ID_ARM_PROPRIETARY
    _set_string(ffi, s.driverName, DRIVER_NAME)
    backend = f"{backend_name} ({backend_driver})" if backend_driver else backend_name
    _set_string(ffi, s.driverInfo, f"{DRIVER_RELEASE_NAME} emulated; executes on {backend}")


def apply_features2(ffi, features2) -> None:
    """Features of the emulated extensions: the core built-ins work because the driver
    lowers them before the backend sees a shader (core_builtins.py)."""
    for p in structs.chain(ffi, features2.pNext):
        if p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_FEATURES_ARM:
            ffi.cast("VkPhysicalDeviceShaderCoreBuiltinsFeaturesARM *", p).shaderCoreBuiltins = vk.VK_TRUE
        elif p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INSTRUMENTATION_FEATURES_ARM:
            ffi.cast("VkPhysicalDeviceShaderInstrumentationFeaturesARM *", p).shaderInstrumentation = vk.VK_TRUE
        elif p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_COUNTERS_BY_REGION_FEATURES_ARM:
            region_props.apply_features(ffi, p)
        elif p.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TENSOR_FEATURES_ARM:
            f = ffi.cast("VkPhysicalDeviceTensorFeaturesARM *", p)
            f.tensors = f.tensorNonPacked = f.shaderTensorAccess = vk.VK_TRUE   # icd/tensors/
            f.shaderStorageTensorArrayDynamicIndexing = vk.VK_TRUE   # arrays of storage buffers, indexed the same
            f.shaderStorageTensorArrayNonUniformIndexing = vk.VK_FALSE
            f.descriptorBindingStorageTensorUpdateAfterBind = vk.VK_FALSE


def tensor_properties(s, limits) -> None:
    """VkPhysicalDeviceTensorPropertiesARM from what the emulation can honour: tensors are storage
    buffers on the backend (sizes bounded by its maxStorageBufferRange), shaders address elements
    with 32-bit indices, one storage buffer per descriptor set is the driver's tensor metadata."""
    from .tensors.resources import MAX_DIMENSIONS, SHADER_STAGES

    size = limits.maxStorageBufferRange
    s.maxTensorDimensionCount = MAX_DIMENSIONS
    s.maxTensorElements = size
    s.maxPerDimensionTensorElements = min(size, 0x7FFFFFFF)
    s.maxTensorStride = min(size, 0x7FFFFFFF)
    s.maxTensorSize = size
    s.maxTensorShaderAccessArrayLength = 16
    s.maxTensorShaderAccessSize = 128
    s.maxDescriptorSetStorageTensors = max(0, limits.maxDescriptorSetStorageBuffers - limits.maxBoundDescriptorSets)
    s.maxPerStageDescriptorSetStorageTensors = max(0, limits.maxPerStageDescriptorStorageBuffers
                                                   - limits.maxBoundDescriptorSets)
    s.maxDescriptorSetUpdateAfterBindStorageTensors = 0
    s.maxPerStageDescriptorUpdateAfterBindStorageTensors = 0
    s.shaderStorageTensorArrayNonUniformIndexingNative = vk.VK_FALSE
    s.shaderTensorSupportedStages = SHADER_STAGES

"""What the emulated Mali driver's shim exports and intercepts.

`HOOKS` is the intercept set (each command gets a Python callback; the
build fails if no module registers it). Commands not listed go straight to
the backend driver: the ICD's GetProcAddr returns the backend's own pointer.
"""
from __future__ import annotations

from tessera.vkapi import paths
from tessera.vkapi.commands import COMMAND_BUFFER_LIFETIME, DEVICE_QUEUES
from tessera.vkapi.pipelines import PIPELINE_HOOKS
from tessera.vkapi.resource_hooks import RESOURCE_HOOKS
from tessera.vkapi.recorder import Recorded
from tessera.vkapi.submits import SubmitPath
from tessera.vkapi.transfers import RECORDED_IN_C as RECORDED_TRANSFERS

from .recording import RECORDING_HOOKS
from .submit import CALLS as SUBMIT_CALLS, SUBMIT_HOOKS

LIBRARY = "libtessera_mali_icd.so"

INSTANCE_HOOKS = (
    "vkCreateInstance", "vkDestroyInstance", "vkEnumerateInstanceExtensionProperties",
    "vkEnumeratePhysicalDevices", "vkEnumeratePhysicalDeviceGroups",
    "vkGetPhysicalDeviceProperties", "vkGetPhysicalDeviceProperties2", "vkGetPhysicalDeviceFeatures2",
    "vkEnumerateDeviceExtensionProperties", "vkCreateDevice",
)
DEVICE_HOOKS = DEVICE_QUEUES + COMMAND_BUFFER_LIFETIME + (
    "vkGetDeviceProcAddr", "vkDestroyDevice",
    "vkBeginCommandBuffer", "vkEndCommandBuffer", "vkResetCommandBuffer",
)
LABEL_HOOKS = (
    "vkCmdBeginDebugUtilsLabelEXT", "vkCmdEndDebugUtilsLabelEXT", "vkCmdInsertDebugUtilsLabelEXT",
    "vkQueueBeginDebugUtilsLabelEXT", "vkQueueEndDebugUtilsLabelEXT", "vkQueueInsertDebugUtilsLabelEXT",
    "vkCmdDebugMarkerBeginEXT", "vkCmdDebugMarkerEndEXT", "vkCmdDebugMarkerInsertEXT",
    "vkDebugMarkerSetObjectNameEXT", "vkDebugMarkerSetObjectTagEXT", "vkSetDebugUtilsObjectNameEXT",
)
# VK_ARM_shader_instrumentation (instrumentation.py): the extension's commands, and the pipeline
# layouts the driver extends with the counters' descriptor set.
INSTRUMENTATION_HOOKS = (
    "vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM", "vkCreateShaderInstrumentationARM",
    "vkDestroyShaderInstrumentationARM", "vkCmdBeginShaderInstrumentationARM", "vkCmdEndShaderInstrumentationARM",
    "vkGetShaderInstrumentationValuesARM", "vkClearShaderInstrumentationMetricsARM",
)
# VK_ARM_tensors (tensors.py, tensor_descriptors.py): the extension's commands, and the core commands
# whose tensor structs and descriptor types the driver translates for the backend.
TENSOR_HOOKS = (
    "vkCreateTensorARM", "vkDestroyTensorARM", "vkCreateTensorViewARM", "vkDestroyTensorViewARM",
    "vkGetTensorMemoryRequirementsARM", "vkBindTensorMemoryARM", "vkGetDeviceTensorMemoryRequirementsARM",
    "vkCmdCopyTensorARM", "vkGetPhysicalDeviceExternalTensorPropertiesARM",
)
TENSOR_CORE_HOOKS = (
    "vkGetPhysicalDeviceFormatProperties2", "vkCreateDescriptorSetLayout", "vkDestroyDescriptorSetLayout",
    "vkCreateDescriptorPool", "vkDestroyDescriptorPool", "vkResetDescriptorPool", "vkAllocateDescriptorSets",
    "vkFreeDescriptorSets", "vkUpdateDescriptorSets",
    # tensor_push.py: push descriptors and update templates holding tensor descriptors
    "vkCreateDescriptorUpdateTemplate", "vkDestroyDescriptorUpdateTemplate", "vkUpdateDescriptorSetWithTemplate",
    "vkCmdPushDescriptorSet", "vkCmdPushDescriptorSetWithTemplate", "vkCmdPushDescriptorSet2",
    "vkCmdPushDescriptorSetWithTemplate2",
)
HOOKS = (INSTANCE_HOOKS + DEVICE_HOOKS + LABEL_HOOKS + RESOURCE_HOOKS + PIPELINE_HOOKS + RECORDING_HOOKS
         + SUBMIT_HOOKS + INSTRUMENTATION_HOOKS + ("vkCreatePipelineLayout", "vkDestroyPipelineLayout")
         + TENSOR_HOOKS + TENSOR_CORE_HOOKS)
# VK_ARM_performance_counters_by_region (regions.py): the enumeration, and subpass changes of captured passes.
REGIONS_HOOKS = ("vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM", "vkCmdNextSubpass",
                 "vkCmdNextSubpass2")
HOOKS += REGIONS_HOOKS
# Backend commands the driver calls itself (instrumentation.py: counters' memory and descriptors).
CALLS = (
    "vkCreateDescriptorSetLayout", "vkDestroyDescriptorSetLayout", "vkCreateDescriptorPool",
    "vkDestroyDescriptorPool", "vkAllocateDescriptorSets", "vkUpdateDescriptorSets", "vkCreateBuffer",
    "vkDestroyBuffer", "vkGetBufferMemoryRequirements", "vkAllocateMemory", "vkFreeMemory", "vkBindBufferMemory",
    "vkMapMemory", "vkCmdBindDescriptorSets", "vkGetPhysicalDeviceMemoryProperties",
    "vkGetPhysicalDeviceFeatures2",   # tensors.py: backend features the lowered shaders need
) + SUBMIT_CALLS

# Commands recorded in C (vkapi/recorder.py), applied by recording.py and labels.py. Labels are
# consumed here (not passed to the backend), so they are recorded without being forwarded.
_LABEL = Recorded(strings={"pLabelInfo": "pLabelName"}, forward=False)
_MARKER = Recorded(strings={"pMarkerInfo": "pMarkerName"}, forward=False)
RECORDED = {
    # Draws fold: count, vertices, primitives (recording._primitives: a third of the vertices, per draw).
    "vkCmdDraw": Recorded(fold=("(uint64_t)vertexCount * instanceCount",
                                "(uint64_t)vertexCount * instanceCount / 3")),
    "vkCmdDrawIndexed": Recorded(fold=("(uint64_t)indexCount * instanceCount",
                                       "(uint64_t)indexCount * instanceCount / 3")),
    "vkCmdBindPipeline": Recorded(),
    "vkCmdDispatch": Recorded(), "vkCmdDispatchBase": Recorded(),
    **{name: Recorded(fields=fields) for name, fields in RECORDED_TRANSFERS.items()},
    "vkCmdPipelineBarrier": Recorded(fields=("srcStageMask", "dstStageMask", "dependencyFlags")),
    "vkCmdBeginDebugUtilsLabelEXT": _LABEL, "vkCmdInsertDebugUtilsLabelEXT": _LABEL,
    "vkCmdEndDebugUtilsLabelEXT": Recorded(forward=False),
    "vkCmdDebugMarkerBeginEXT": _MARKER, "vkCmdDebugMarkerInsertEXT": _MARKER,
    "vkCmdDebugMarkerEndEXT": Recorded(forward=False),
}

C_GLUE = r"""
VkResult tessera_icd_negotiate(uint32_t* pVersion);
PFN_vkVoidFunction tessera_icd_gipa(VkInstance instance, const char* pName);
PFN_vkVoidFunction tessera_icd_gpdpa(VkInstance instance, const char* pName);

TESSERA_EXPORT VkResult vk_icdNegotiateLoaderICDInterfaceVersion(uint32_t* pVersion);
TESSERA_EXPORT PFN_vkVoidFunction vk_icdGetInstanceProcAddr(VkInstance instance, const char* pName);
TESSERA_EXPORT PFN_vkVoidFunction vk_icdGetPhysicalDeviceProcAddr(VkInstance instance, const char* pName);

#define TESSERA_VK_ERROR_INCOMPATIBLE_DRIVER (-9)

TESSERA_EXPORT VkResult vk_icdNegotiateLoaderICDInterfaceVersion(uint32_t* pVersion)
{
    if (!pVersion || !tessera_python_enter()) return TESSERA_VK_ERROR_INCOMPATIBLE_DRIVER;
    return tessera_icd_negotiate(pVersion);
}

/* Static, so that references from inside this library never bind to another
   library's exported vk_icdGetInstanceProcAddr (ELF symbol interposition). */
static PFN_vkVoidFunction icd_gipa(VkInstance instance, const char* pName)
{
    if (tessera_refuse || !pName) return NULL;
    if (!strcmp(pName, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)icd_gipa;
    return tessera_python_enter() ? tessera_icd_gipa(instance, pName) : NULL;
}

TESSERA_EXPORT PFN_vkVoidFunction vk_icdGetInstanceProcAddr(VkInstance instance, const char* pName)
{
    return icd_gipa(instance, pName);
}

TESSERA_EXPORT PFN_vkVoidFunction vk_icdGetPhysicalDeviceProcAddr(VkInstance instance, const char* pName)
{
    if (tessera_refuse || !pName) return NULL;
    return tessera_python_enter() ? tessera_icd_gpdpa(instance, pName) : NULL;
}
"""

# cffi-only declarations: dlopen of the backend driver (the C side is <dlfcn.h>).
DLFCN_CDEF = """
#define RTLD_NOW ...
#define RTLD_LOCAL ...
void* dlopen(const char* filename, int flags);
void* dlsym(void* handle, const char* symbol);
char* dlerror(void);
"""


# Structs a hook may copy or fill: everything that extends the create/query structs.
PNEXT_TYPES = tuple(f"extenders:{base}" for base in (
    "VkDeviceCreateInfo", "VkPhysicalDeviceProperties2", "VkPhysicalDeviceFeatures2", "VkInstanceCreateInfo",
    "VkComputePipelineCreateInfo", "VkGraphicsPipelineCreateInfo",
    # VK_ARM_tensors (tensors.py): structs found in or added to these chains
    "VkFormatProperties2", "VkDependencyInfo", "VkWriteDescriptorSet", "VkMemoryRequirements2",
    "VkTensorCreateInfoARM", "VkBindBufferMemoryInfo", "VkDescriptorSetLayoutCreateInfo"))

# regions.py: the begin info is found in (and stripped from) these chains.
PNEXT_TYPES += ("extenders:VkRenderPassBeginInfo", "extenders:VkRenderingInfo")


def spec() -> "ShimSpec":
    from tessera.vkapi.shim import ShimSpec   # the builder: not on the driver's/layer's load path

    return ShimSpec(
        module_name="_tessera_mali_icd_shim",
        library_name=LIBRARY,
        hooks=HOOKS,
        calls=CALLS,
        extra_types=PNEXT_TYPES,
        embedding_api="""
            VkResult tessera_icd_negotiate(uint32_t* pVersion);
            PFN_vkVoidFunction tessera_icd_gipa(VkInstance instance, const char* pName);
            PFN_vkVoidFunction tessera_icd_gpdpa(VkInstance instance, const char* pName);
        """,
        c_glue=C_GLUE,
        init_module="tessera.icd.entry",
        recorded=RECORDED,
        submit_path=SubmitPath(queue_labels=True),   # the driver consumes queue labels (labels.py)
        extra_cdef=DLFCN_CDEF,
        manifest={"file_format_version": "1.0.1", "ICD": {"library_path": "", "api_version": "1.3.0"}},
        manifest_dir=paths.ICD_MANIFEST_DIR,
    )

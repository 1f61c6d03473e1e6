"""What the emulated Mali driver's shim exports and intercepts.

`HOOKS` (what the driver intercepts), `RECORDED` (what it records in C) and `ANSWERED` (the
queries it answers in C once Python has answered them) come from the intercept table,
vkapi/intercepts.py: one row per command. Commands not intercepted go
straight to the backend driver: the ICD's GetProcAddr returns the backend's own pointer.
"""
from __future__ import annotations

from tessera.vkapi import intercepts, paths
from tessera.vkapi.submits import STAGE_CDEF, SubmitPath

from .submit import CALLS as SUBMIT_CALLS

LIBRARY = "libtessera_mali_icd.so"

HOOKS = intercepts.hooks(intercepts.ICD)
RECORDED = intercepts.recorded(intercepts.ICD)
ANSWERED = intercepts.answered(intercepts.ICD)
# Backend commands the driver calls itself (icd/instrumentation/: counters' memory and descriptors).
CALLS = (
    "vkCreateDescriptorSetLayout", "vkDestroyDescriptorSetLayout", "vkCreateDescriptorPool",
    "vkDestroyDescriptorPool", "vkAllocateDescriptorSets", "vkUpdateDescriptorSets", "vkCreateBuffer",
    "vkDestroyBuffer", "vkGetBufferMemoryRequirements", "vkAllocateMemory", "vkFreeMemory", "vkBindBufferMemory",
    "vkMapMemory", "vkCmdBindDescriptorSets", "vkGetPhysicalDeviceMemoryProperties",
    "vkGetPhysicalDeviceFeatures2",   # icd/tensors/: backend features the lowered shaders need
    # icd/measured_counters.py: the driver's pipeline-statistics queries
    "vkCreateQueryPool", "vkDestroyQueryPool", "vkCmdResetQueryPool", "vkCmdBeginQuery", "vkCmdEndQuery",
    "vkGetQueryPoolResults",
    # icd/visible_prims.py: transform feedback around the draws whose positions are captured
    "vkCmdBindTransformFeedbackBuffersEXT", "vkCmdBeginTransformFeedbackEXT", "vkCmdEndTransformFeedbackEXT",
) + SUBMIT_CALLS

C_GLUE = r"""
/* Devices on which VK_ARM_tensors is on (icd/tensors/resources.py Tensors.created, destroyed): while there is one,
   the push-descriptor commands take their Python hooks, which translate a set with tensor bindings; while there
   is none, C forwards them (vkapi/intercepts.py TENSOR_PUSH). */
int tessera_tensor_devices = 0;

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

# The timeline's placement plans in C (icd/placement_plans.py NativePlacer), and submits placed in C with them
# (icd/placed_submits.py): the C is vkapi/submits.PLACEMENT_C, compiled with the submit path (SubmitPath.place).
PLACEMENT_CDEF = """
long tessera_place_events(const uint8_t *plan, size_t plan_len, const uint8_t *texts, size_t texts_len,
                          int64_t *state, uint8_t *out, size_t cap);
long tessera_place_all(const uint8_t *const *plans, const size_t *plan_lens, size_t count, const uint8_t *texts,
                       size_t texts_len, int64_t *state, uint8_t *out, size_t cap, size_t *placed);
int tessera_placement_grant(int fd, const int64_t *state, size_t words, int check, const int64_t *semaphores,
                            long nsemaphores, const int64_t *timelines, size_t timelines_len, size_t ntimelines);
long tessera_placement_semaphores(int64_t *out);
long tessera_placement_timelines(int64_t *out, size_t room);
const uint8_t *tessera_placement_checked(size_t *len);
long tessera_placement_revoke(int64_t *state, size_t words, int *write_error);
void tessera_placement_counts(uint64_t *counts);
""" + STAGE_CDEF

# cffi-only declarations: dlopen of the backend driver (the C side is <dlfcn.h>).
DLFCN_CDEF = """
#define RTLD_NOW ...
#define RTLD_LOCAL ...
void* dlopen(const char* filename, int flags);
void* dlsym(void* handle, const char* symbol);
char* dlerror(void);
"""


# Structs a hook may name: every struct and union of vk.xml (vkapi/cdecl.py ALL_STRUCTS), so that a
# pNext walker can find, copy or rebuild whatever sType an application chains (issue #23: public
# programs chained structs the hooks look for that were not declared). Compiled into the shim, so
# they cost build time and library size, not load time.
PNEXT_TYPES = ("structs:all",)


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
        answered=ANSWERED,
        # the driver consumes queue labels (labels.py) and places submits in C (placed_submits.py)
        submit_path=SubmitPath(queue_labels=True, place=True),
        extra_cdef=DLFCN_CDEF + PLACEMENT_CDEF + "int tessera_tensor_devices;",
        manifest={"file_format_version": "1.0.1", "ICD": {"library_path": "", "api_version": "1.3.0"}},
        manifest_dir=paths.ICD_MANIFEST_DIR,
    )

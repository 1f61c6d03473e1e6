"""What the layer's shim exports and intercepts (input of the shim builder).

`HOOKS` (what the layer intercepts) and `RECORDED` (what it records in C) come from the
intercept table, vkapi/intercepts.py: one row per command. `CALLS` are commands the layer
calls down itself (for example to insert debug labels).
"""
from __future__ import annotations

from pathlib import Path

from tessera.vkapi import intercepts, paths
from tessera.vkapi.submits import STAGE_CDEF, SubmitPath

LAYER_NAME = "VK_LAYER_TESSERA_timeline"
LIBRARY = "libVkLayer_tessera_timeline.so"

HOOKS = intercepts.hooks(intercepts.LAYER)
RECORDED = intercepts.recorded(intercepts.LAYER)
# Commands the layer calls down itself: labels, indirect captures, device description.
CALLS = (
    "vkEnumerateInstanceExtensionProperties", "vkGetPhysicalDeviceProperties",
    "vkGetPhysicalDeviceMemoryProperties", "vkGetBufferMemoryRequirements", "vkAllocateMemory",
    "vkGetImageMemoryRequirements",   # allocations.py
    "vkBindBufferMemory", "vkMapMemory", "vkUnmapMemory", "vkFreeMemory", "vkCmdPipelineBarrier",
    "vkCreateFence", "vkDestroyFence", "vkResetFences",   # vkapi/fences.py (vkGetFenceStatus: hooked)
    # --instrument (instrument.py)
    "vkCreateShaderInstrumentationARM", "vkDestroyShaderInstrumentationARM", "vkCmdBeginShaderInstrumentationARM",
    "vkCmdEndShaderInstrumentationARM",
    "vkGetShaderInstrumentationValuesARM", "vkClearShaderInstrumentationMetricsARM",
    # --regions (regions.py)
    "vkGetPhysicalDeviceProperties2", "vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM",
    "vkGetBufferDeviceAddress",
)
# Structs the layer may read, copy or rebuild in a pNext chain: every struct and union of vk.xml
# (vkapi/cdecl.py ALL_STRUCTS; a chain may hold any of them, issue #23).
EXTRA_TYPES = ("structs:all",)


C_GLUE = (Path(__file__).with_name("passthrough.c").read_text() + r"""
/* tessera run --content: set by the layer's entry (lib.tessera_layer_content = 1); while on, the commands whose
   parameters content metrics read at record time take their Python hooks (vkapi/intercepts.py _CONTENT). */
int tessera_layer_content = 0;
PFN_vkVoidFunction tessera_layer_gipa(VkInstance instance, const char* pName);
PFN_vkVoidFunction tessera_layer_gdpa(VkDevice device, const char* pName);

/* Internal (static) entry points: exported names such as vkGetInstanceProcAddr
   would bind to libvulkan's definition through ELF symbol interposition when
   referenced from inside this library, so the library refers only to these. */
static PFN_vkVoidFunction layer_gipa(VkInstance instance, const char* pName);
static PFN_vkVoidFunction layer_gdpa(VkDevice device, const char* pName);

/* Without Python (it could not start here), the layer forwards in C: layer/passthrough.c. */
static PFN_vkVoidFunction layer_gipa(VkInstance instance, const char* pName)
{
    if (!pName) return NULL;
    if (!strcmp(pName, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)layer_gipa;
    if (!strcmp(pName, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)layer_gdpa;
    return tessera_python_enter() ? tessera_layer_gipa(instance, pName) : tessera_passthrough_gipa(instance, pName);
}

static PFN_vkVoidFunction layer_gdpa(VkDevice device, const char* pName)
{
    if (!pName) return NULL;
    if (!strcmp(pName, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)layer_gdpa;
    return tessera_python_enter() ? tessera_layer_gdpa(device, pName) : tessera_passthrough_gdpa(device, pName);
}

TESSERA_EXPORT PFN_vkVoidFunction vkGetInstanceProcAddr(VkInstance instance, const char* pName)
{
    return layer_gipa(instance, pName);
}

TESSERA_EXPORT PFN_vkVoidFunction vkGetDeviceProcAddr(VkDevice device, const char* pName)
{
    return layer_gdpa(device, pName);
}

/* Loader-layer interface version 2 (the loader's LoaderLayerInterface.md). */
TESSERA_EXPORT VkResult vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface* p)
{
    if (tessera_refuse || !p || p->sType != 1 || p->loaderLayerInterfaceVersion < 2)
        return TESSERA_VK_ERROR_INITIALIZATION_FAILED;
    p->loaderLayerInterfaceVersion = 2;
    p->pfnGetInstanceProcAddr = layer_gipa;
    p->pfnGetDeviceProcAddr = layer_gdpa;
    p->pfnGetPhysicalDeviceProcAddr = NULL;
    return 0;
}
""")


# Commands recorded in C (vkapi/recorder.py): the hot ones, whose parameters are scalars or arrays
# of plain structs. Their records are applied by the hooks' appliers (render_passes.py, workloads.py).

# Device extensions the layer provides itself when the driver lacks them (name -> spec version).
# Listed in the manifest too: the loader rejects a vkCreateDevice enabling an extension that
# neither the driver nor an enabled layer's manifest declares.
LAYER_DEVICE_EXTENSIONS = {"VK_EXT_frame_boundary": 1}


# Submits reported in C (layer/reported_submits.py; the C is vkapi/submits.REPORT_C, with the submit path).
REPORT_CDEF = """
int tessera_report_grant(int fd, int socket, const uint8_t *queues, size_t len);
long tessera_report_revoke(const uint8_t **written, size_t *written_len, const uint8_t **unsent, size_t *unsent_len,
                           int *error);
void tessera_report_counts(uint64_t *counts);
uint64_t tessera_report_presents(void);
void tessera_report_swapchain_images(uint64_t swapchain, const uint64_t *images, uint32_t count);
""" + STAGE_CDEF


def spec() -> "ShimSpec":
    from tessera.vkapi.shim import ShimSpec   # the builder: not on the driver's/layer's load path

    return ShimSpec(
        module_name="_tessera_layer_shim",
        library_name=LIBRARY,
        hooks=HOOKS,
        calls=CALLS,
        extra_types=EXTRA_TYPES,
        embedding_api="""
            PFN_vkVoidFunction tessera_layer_gipa(VkInstance instance, const char* pName);
            PFN_vkVoidFunction tessera_layer_gdpa(VkDevice device, const char* pName);
        """,
        c_glue=C_GLUE,
        extra_cdef="int tessera_layer_content;" + REPORT_CDEF,
        init_module="tessera.layer.entry",
        recorded=RECORDED,
        # Submits of buffers that need nothing of the queue's state skip Python (queues.py), and so does their
        # report while nothing else waits to be sent (reported_submits.py).
        submit_path=SubmitPath(number=True, wrap=True, frame_boundary=True, queue_labels=True, report=True),
        manifest={
            "file_format_version": "1.2.0",
            "layer": {
                "name": LAYER_NAME,
                "type": "GLOBAL",
                "library_path": "",
                "api_version": "1.4.366",
                "implementation_version": "1",
                "description": "Tessera GPU timeline: tags every workload for the Arm-style timeline",
                "device_extensions": [{"name": name, "spec_version": str(version), "entrypoints": []}
                                      for name, version in LAYER_DEVICE_EXTENSIONS.items()],
            },
        },
        manifest_dir=paths.LAYER_MANIFEST_DIR,
    )

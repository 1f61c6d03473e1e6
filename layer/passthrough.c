/* The layer without Python: a pass-through in C (compiled into the layer's shim after its generated
   declarations; layer/shim_spec.py includes this file).

   When the embedded interpreter cannot start in this process (the project's Python was moved, its
   environment is broken; vkapi/shim.py has said why in one line on stderr), the layer stays in the
   chain the loader built and forwards every command to the next element, so the application still
   sees a working Vulkan, only without Tessera's metadata. It links itself in as
   LoaderLayerInterface.md says: in vkCreateInstance / vkCreateDevice it takes the next element's
   GetProcAddr from the loader's link info and advances the link for the element below.

   One chain per process: the next element's GetInstanceProcAddr and GetDeviceProcAddr are the same
   for every instance and device the loader makes, so they are kept once (the first instance is used
   to ask for vkCreateDevice). */

#define TESSERA_LOADER_INSTANCE_CREATE_INFO 47   /* VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO */
#define TESSERA_LOADER_DEVICE_CREATE_INFO 48     /* VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO */
#define TESSERA_LAYER_LINK_INFO 0                /* VK_LAYER_LINK_INFO */

static PFN_vkGetInstanceProcAddr tessera_passthrough_next_gipa;
static PFN_vkGetDeviceProcAddr tessera_passthrough_next_gdpa;
static VkInstance tessera_passthrough_instance;

static void *tessera_passthrough_link(const void *chain, int32_t stype)
{
    for (const VkLayerInstanceCreateInfo *p = chain; p; p = p->pNext)
        if ((int32_t)p->sType == stype && p->function == TESSERA_LAYER_LINK_INFO)
            return (void *)p;
    return NULL;
}

static VkResult tessera_passthrough_vkCreateInstance(const VkInstanceCreateInfo *pCreateInfo,
                                                     const VkAllocationCallbacks *pAllocator, VkInstance *pInstance)
{
    VkLayerInstanceCreateInfo *link = tessera_passthrough_link(pCreateInfo->pNext,
                                                               TESSERA_LOADER_INSTANCE_CREATE_INFO);
    if (!link || !link->u.pLayerInfo) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr next = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)next(NULL, "vkCreateInstance");
    if (!create) return VK_ERROR_INITIALIZATION_FAILED;
    __atomic_store_n(&tessera_passthrough_next_gipa, next, __ATOMIC_RELEASE);
    VkResult result = create(pCreateInfo, pAllocator, pInstance);
    if (result == 0) {
        VkInstance none = NULL;
        __atomic_compare_exchange_n(&tessera_passthrough_instance, &none, *pInstance, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
    }
    return result;
}

static VkResult tessera_passthrough_vkCreateDevice(VkPhysicalDevice physicalDevice,
                                                   const VkDeviceCreateInfo *pCreateInfo,
                                                   const VkAllocationCallbacks *pAllocator, VkDevice *pDevice)
{
    VkLayerDeviceCreateInfo *link = tessera_passthrough_link(pCreateInfo->pNext, TESSERA_LOADER_DEVICE_CREATE_INFO);
    if (!link || !link->u.pLayerInfo) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    VkInstance instance = __atomic_load_n(&tessera_passthrough_instance, __ATOMIC_ACQUIRE);
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(instance, "vkCreateDevice");
    if (!create) return VK_ERROR_INITIALIZATION_FAILED;
    __atomic_store_n(&tessera_passthrough_next_gdpa, gdpa, __ATOMIC_RELEASE);
    return create(physicalDevice, pCreateInfo, pAllocator, pDevice);
}

static PFN_vkVoidFunction tessera_passthrough_gipa(VkInstance instance, const char *pName)
{
    if (!strcmp(pName, "vkCreateInstance")) return (PFN_vkVoidFunction)tessera_passthrough_vkCreateInstance;
    if (!strcmp(pName, "vkCreateDevice")) return (PFN_vkVoidFunction)tessera_passthrough_vkCreateDevice;
    PFN_vkGetInstanceProcAddr next = __atomic_load_n(&tessera_passthrough_next_gipa, __ATOMIC_ACQUIRE);
    return next ? next(instance, pName) : NULL;
}

static PFN_vkVoidFunction tessera_passthrough_gdpa(VkDevice device, const char *pName)
{
    PFN_vkGetDeviceProcAddr next = __atomic_load_n(&tessera_passthrough_next_gdpa, __ATOMIC_ACQUIRE);
    return next ? next(device, pName) : NULL;
}

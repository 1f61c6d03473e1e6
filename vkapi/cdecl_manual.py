"""Hand-written C declarations the registry model does not carry.

Each table is an exception to the generated rule, with its reason.
"""

# Base types are <type category="basetype"> in vk.xml without a model entry.
BASE_TYPES = """
typedef uint32_t VkBool32;
typedef uint32_t VkFlags;
typedef uint64_t VkFlags64;
typedef uint64_t VkDeviceSize;
typedef uint64_t VkDeviceAddress;
typedef uint32_t VkSampleMask;
typedef struct RemoteAddressNV_T* VkRemoteAddressNV;
"""

# Window-system and OS types: same-ABI stand-ins, because we never include
# the platform headers (the shims must build without X11/Wayland headers).
PLATFORM_TYPES = {
    "Display": "typedef struct _XDisplay Display;",
    "Window": "typedef unsigned long Window;",
    "VisualID": "typedef unsigned long VisualID;",
    "xcb_connection_t": "typedef struct xcb_connection_t xcb_connection_t;",
    "xcb_window_t": "typedef uint32_t xcb_window_t;",
    "xcb_visualid_t": "typedef uint32_t xcb_visualid_t;",
    "wl_display": "struct wl_display;",
    "wl_surface": "struct wl_surface;",
    "HANDLE": "typedef void* HANDLE;",
    "HINSTANCE": "typedef void* HINSTANCE;",
    "HWND": "typedef void* HWND;",
    "HMONITOR": "typedef void* HMONITOR;",
    "DWORD": "typedef unsigned long DWORD;",
    "LPCWSTR": "typedef const uint16_t* LPCWSTR;",
    "SECURITY_ATTRIBUTES": "typedef struct _SECURITY_ATTRIBUTES SECURITY_ATTRIBUTES;",
    "zx_handle_t": "typedef uint32_t zx_handle_t;",
    "ANativeWindow": "typedef struct ANativeWindow ANativeWindow;",
    "AHardwareBuffer": "typedef struct AHardwareBuffer AHardwareBuffer;",
    "CAMetalLayer": "typedef void CAMetalLayer;",
    "GgpStreamDescriptor": "typedef uint32_t GgpStreamDescriptor;",
    "GgpFrameToken": "typedef uint32_t GgpFrameToken;",
    "IOSurfaceRef": "typedef void* IOSurfaceRef;",
    "MTLDevice_id": "typedef void* MTLDevice_id;",
    "MTLCommandQueue_id": "typedef void* MTLCommandQueue_id;",
    "MTLBuffer_id": "typedef void* MTLBuffer_id;",
    "MTLTexture_id": "typedef void* MTLTexture_id;",
    "MTLSharedEvent_id": "typedef void* MTLSharedEvent_id;",
    "IDirectFB": "typedef struct _IDirectFB IDirectFB;",
    "IDirectFBSurface": "typedef struct _IDirectFBSurface IDirectFBSurface;",
    "_screen_context": "struct _screen_context;",
    "_screen_window": "struct _screen_window;",
    "_screen_buffer": "struct _screen_buffer;",
    "NvSciSyncAttrList": "typedef void* NvSciSyncAttrList;",
    "NvSciSyncObj": "typedef void* NvSciSyncObj;",
    "NvSciSyncFence": "typedef struct NvSciSyncFence { uint64_t payload[6]; } NvSciSyncFence;",
    "NvSciBufAttrList": "typedef void* NvSciBufAttrList;",
    "NvSciBufObj": "typedef void* NvSciBufObj;",
    "OHNativeWindow": "typedef struct OHNativeWindow OHNativeWindow;",
    "OH_NativeBuffer": "typedef struct OH_NativeBuffer OH_NativeBuffer;",
    "OHBufferHandle": "typedef struct OHBufferHandle OHBufferHandle;",
    "ubm_device": "struct ubm_device;",
    "ubm_surface": "struct ubm_surface;",
}

# The loader interface of vk_layer.h and vk_icd.h is not in vk.xml.
# Layouts follow the Khronos loader (loader interface version 2 for layers).
LOADER_INTERFACE = """
typedef PFN_vkVoidFunction (*PFN_vkGetPhysicalDeviceProcAddr_loader)(VkInstance instance, const char* pName);
typedef VkResult (*PFN_vkSetInstanceLoaderData)(VkInstance instance, void* object);
typedef VkResult (*PFN_vkSetDeviceLoaderData)(VkDevice device, void* object);
typedef VkResult (*PFN_vkLayerCreateDevice)(VkInstance, VkPhysicalDevice, const VkDeviceCreateInfo*, const VkAllocationCallbacks*, VkDevice*, PFN_vkGetInstanceProcAddr, PFN_vkGetDeviceProcAddr*);
typedef void (*PFN_vkLayerDestroyDevice)(VkDevice, const VkAllocationCallbacks*, PFN_vkDestroyDevice);

typedef struct VkLayerInstanceLink_ {
    struct VkLayerInstanceLink_* pNext;
    PFN_vkGetInstanceProcAddr pfnNextGetInstanceProcAddr;
    PFN_vkGetPhysicalDeviceProcAddr_loader pfnNextGetPhysicalDeviceProcAddr;
} VkLayerInstanceLink;

typedef struct VkLayerInstanceCreateInfo {
    VkStructureType sType;
    const void* pNext;
    int32_t function;
    union {
        VkLayerInstanceLink* pLayerInfo;
        PFN_vkSetInstanceLoaderData pfnSetInstanceLoaderData;
        struct {
            PFN_vkLayerCreateDevice pfnLayerCreateDevice;
            PFN_vkLayerDestroyDevice pfnLayerDestroyDevice;
        } layerDevice;
        uint32_t loaderFeatures;
    } u;
} VkLayerInstanceCreateInfo;

typedef struct VkLayerDeviceLink_ {
    struct VkLayerDeviceLink_* pNext;
    PFN_vkGetInstanceProcAddr pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr pfnNextGetDeviceProcAddr;
} VkLayerDeviceLink;

typedef struct VkLayerDeviceCreateInfo {
    VkStructureType sType;
    const void* pNext;
    int32_t function;
    union {
        VkLayerDeviceLink* pLayerInfo;
        PFN_vkSetDeviceLoaderData pfnSetDeviceLoaderData;
    } u;
} VkLayerDeviceCreateInfo;

typedef struct VkNegotiateLayerInterface {
    int32_t sType;
    void* pNext;
    uint32_t loaderLayerInterfaceVersion;
    PFN_vkGetInstanceProcAddr pfnGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr pfnGetDeviceProcAddr;
    PFN_vkGetPhysicalDeviceProcAddr_loader pfnGetPhysicalDeviceProcAddr;
} VkNegotiateLayerInterface;

typedef VkResult (*PFN_vk_icdNegotiateLoaderICDInterfaceVersion)(uint32_t* pVersion);
"""

# Values from vk_layer.h (protocol of the loader, not in vk.xml).
LOADER_CONSTANTS = {
    "VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO": 47,
    "VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO": 48,
    "VK_LAYER_LINK_INFO": 0,
    "LAYER_NEGOTIATE_INTERFACE_STRUCT": 1,
}

"""What the ctypes-only test programs (program_shapes.py, fixed_answers.py) need to create an instance:
they must run on any CPython 3 without the `vulkan` package, so they declare these structs themselves
(layouts of vulkan_core.h)."""
import ctypes

VK_SUCCESS = 0
VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
VK_API_VERSION_1_1 = (1 << 22) | (1 << 12)


class ApplicationInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("pApplicationName", ctypes.c_char_p),
                ("applicationVersion", ctypes.c_uint32), ("pEngineName", ctypes.c_char_p),
                ("engineVersion", ctypes.c_uint32), ("apiVersion", ctypes.c_uint32)]


class InstanceCreateInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("pApplicationInfo", ctypes.POINTER(ApplicationInfo)), ("enabledLayerCount", ctypes.c_uint32),
                ("ppEnabledLayerNames", ctypes.c_void_p), ("enabledExtensionCount", ctypes.c_uint32),
                ("ppEnabledExtensionNames", ctypes.c_void_p)]


def instance_create_info(app_name: bytes) -> InstanceCreateInfo:
    """A Vulkan 1.1 instance's create info, no layers or extensions (the pointer keeps the app info alive)."""
    app = ApplicationInfo(VK_STRUCTURE_TYPE_APPLICATION_INFO, None, app_name, 1, b"none", 1, VK_API_VERSION_1_1)
    return InstanceCreateInfo(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, None, 0, ctypes.pointer(app), 0, None, 0, None)

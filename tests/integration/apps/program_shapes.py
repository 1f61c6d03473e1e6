"""Program shapes that once hung or crashed inside the shims' embedded Python.

Run: PYTHON tests/integration/apps/program_shapes.py SHAPE [LIB]  (under `tessera run` or not)
Uses only ctypes and libvulkan.so.1, so any CPython 3 can run it (the
project's interpreter, Debian's /usr/bin/python3, a static build).

Shapes:
- capsule: a capsule attribute is looked up before the first Vulkan call
  (frameworks do this at import); cffi's embedding start-up once spun forever.
- late-destroy LIB: the instance is destroyed from LIB's destructor after the
  interpreter has finalised (LIB: tests/integration/apps/c/late_destroy.c).
- after-last-instance: the last instance is destroyed (the loader unloads the
  shims), then every module in sys.modules is inspected.
Each prints 'program_shapes SHAPE: <device name>' when it gets that far.
"""
import ctypes
import sys

from ctypes_vulkan import VK_SUCCESS, instance_create_info


class PhysicalDeviceProperties(ctypes.Structure):
    # Only the leading members are read; the buffer is as large as the real struct (824 bytes).
    _fields_ = [("apiVersion", ctypes.c_uint32), ("driverVersion", ctypes.c_uint32), ("vendorID", ctypes.c_uint32),
                ("deviceID", ctypes.c_uint32), ("deviceType", ctypes.c_int), ("deviceName", ctypes.c_char * 256),
                ("rest", ctypes.c_uint8 * 552)]


def create_instance(vulkan):
    info = instance_create_info(b"program_shapes")
    instance = ctypes.c_void_p()
    result = vulkan.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance))
    if result != VK_SUCCESS:
        sys.exit(f"vkCreateInstance failed: {result}")
    return instance


def first_device_name(vulkan, instance) -> str:
    count = ctypes.c_uint32(0)
    vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
    devices = (ctypes.c_void_p * count.value)()
    vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), devices)
    props = PhysicalDeviceProperties()
    vulkan.vkGetPhysicalDeviceProperties(ctypes.c_void_p(devices[0]), ctypes.byref(props))
    return props.deviceName.decode()


def main(shape: str, lib: str | None) -> None:
    if shape == "capsule":
        import datetime
        getattr(datetime.datetime_CAPI, "anything", None)   # gives PyCapsule_Type a version tag
    vulkan = ctypes.CDLL("libvulkan.so.1")
    instance = create_instance(vulkan)
    name = first_device_name(vulkan, instance)
    if shape == "late-destroy":
        keeper = ctypes.CDLL(lib)
        keeper.late_destroy_keep(instance, ctypes.cast(vulkan.vkDestroyInstance, ctypes.c_void_p))
    else:
        vulkan.vkDestroyInstance(instance, None)
    if shape == "after-last-instance":
        import inspect
        for module in list(sys.modules.values()):
            inspect.getmodule(module)
            for attr in dir(module):
                getattr(module, attr, None)
    print(f"program_shapes {shape}: {name}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)

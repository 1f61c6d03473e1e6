"""The driver's fixed answers asked again and again (tests/integration/test_fixed_answers.py).

Run: PYTHON tests/integration/apps/fixed_answers.py loader|icd [ICD_LIBRARY]
  loader  through libvulkan.so.1, the real loader (run it in `tessera run`'s environment);
  icd     ICD_LIBRARY (the emulated driver) called directly through its vk_icdGetInstanceProcAddr:
          the driver's own answers, which the loader would otherwise rework (its sorting, its handles).
Uses only ctypes. Two instances, one after the other (the second may get the first's addresses);
in each, REPEAT times: vkEnumeratePhysicalDevices and vkEnumeratePhysicalDeviceGroups (the count,
the full array, a short array), and per physical device vkGetPhysicalDeviceProperties and
vkEnumerateDeviceExtensionProperties (the count, the full list, a short list). Handles are printed
as indexes into the instance's vkEnumeratePhysicalDevices list. Array items are pre-filled with a
marker sType/pNext; whether the answer left them as they were is printed with the groups
(the driver must; loader 1.3.239 itself rewrites pNext). Bytes of vkGetPhysicalDeviceProperties'
answer are compared without the struct's padding (the backend leaves whatever was there). Prints
one JSON line, with the calls of the driver's Python hooks of these queries after each
instance's first round.
"""
import ctypes
import hashlib
import json
import sys

from ctypes_vulkan import VK_SUCCESS, instance_create_info

VK_INCOMPLETE = 5
VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GROUP_PROPERTIES = 1000070000
REPEAT = 4
MARKER_STYPE = 1000999999   # no real structure: nothing may follow this chain


class BaseOutStructure(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p)]


class PhysicalDeviceGroupProperties(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("physicalDeviceCount", ctypes.c_uint32),
                ("physicalDevices", ctypes.c_void_p * 32), ("subsetAllocation", ctypes.c_uint32)]


class ExtensionProperties(ctypes.Structure):
    _fields_ = [("extensionName", ctypes.c_char * 256), ("specVersion", ctypes.c_uint32)]


class PhysicalDeviceProperties(ctypes.Structure):
    # The leading members, then the rest of the real struct (824 bytes) as bytes.
    _fields_ = [("apiVersion", ctypes.c_uint32), ("driverVersion", ctypes.c_uint32), ("vendorID", ctypes.c_uint32),
                ("deviceID", ctypes.c_uint32), ("deviceType", ctypes.c_int), ("deviceName", ctypes.c_char * 256),
                ("rest", ctypes.c_uint8 * 548)]


assert ctypes.sizeof(PhysicalDeviceGroupProperties) == 288 and ctypes.sizeof(PhysicalDeviceProperties) == 824

PFN_CREATE_INSTANCE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
PFN_DESTROY_INSTANCE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
PFN_ENUMERATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p)
PFN_PROPERTIES = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
PFN_DEVICE_EXTENSIONS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                                         ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p)


class Api:
    """The five commands, from the loader or straight from the driver."""

    def __init__(self, mode: str, icd_library: str | None) -> None:
        if mode == "loader":
            lib = ctypes.CDLL("libvulkan.so.1")
            lib.vkGetInstanceProcAddr.restype = ctypes.c_void_p
            lib.vkGetInstanceProcAddr.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            self.gipa = lib.vkGetInstanceProcAddr
        else:
            lib = ctypes.CDLL(icd_library)
            version = ctypes.c_uint32(5)
            if lib.vk_icdNegotiateLoaderICDInterfaceVersion(ctypes.byref(version)) != VK_SUCCESS:
                sys.exit("negotiation with the driver failed")
            lib.vk_icdGetInstanceProcAddr.restype = ctypes.c_void_p
            lib.vk_icdGetInstanceProcAddr.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            self.gipa = lib.vk_icdGetInstanceProcAddr

    def fn(self, instance, name: str, kind):
        address = self.gipa(instance, name.encode())
        if not address:
            sys.exit(f"no {name}")
        return kind(address)


def two_call(call, *args):
    """(count-query result, count)."""
    count = ctypes.c_uint32(0)
    return call(*args, ctypes.byref(count), None), count.value


def groups_answers(enumerate_groups, instance, index_of) -> dict:
    def items(n):
        marker = [BaseOutStructure(MARKER_STYPE, None) for _ in range(max(n, 1))]
        array = (PhysicalDeviceGroupProperties * max(n, 1))()
        for i in range(max(n, 1)):
            array[i].sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GROUP_PROPERTIES
            array[i].pNext = ctypes.addressof(marker[i])
        return array, marker

    def read(array, marker, n):
        kept = all(array[i].sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GROUP_PROPERTIES
                   and array[i].pNext == ctypes.addressof(marker[i])
                   and marker[i].sType == MARKER_STYPE and not marker[i].pNext for i in range(len(marker)))
        return [{"devices": [index_of(array[i].physicalDevices[j]) for j in range(array[i].physicalDeviceCount)],
                 "subsetAllocation": array[i].subsetAllocation} for i in range(n)], kept

    result, total = two_call(enumerate_groups, instance)
    out = {"count": [result, total]}
    array, marker = items(total + 1)   # room for one more than there is
    count = ctypes.c_uint32(total + 1)
    result = enumerate_groups(instance, ctypes.byref(count), array)
    out["full"] = [result, count.value, *read(array, marker, count.value)]
    array, marker = items(total)
    count = ctypes.c_uint32(total - 1)
    result = enumerate_groups(instance, ctypes.byref(count), array)
    out["short"] = [result, count.value, *read(array, marker, count.value)]
    return out


def devices_answers(enumerate_devices, instance) -> tuple[dict, list]:
    result, total = two_call(enumerate_devices, instance)
    array = (ctypes.c_void_p * (total + 1))()
    count = ctypes.c_uint32(total + 1)
    full = enumerate_devices(instance, ctypes.byref(count), array)
    handles = list(array[:count.value])
    short = (ctypes.c_void_p * max(total, 1))(*([0x5A5A] * max(total, 1)))
    short_count = ctypes.c_uint32(total - 1)
    short_result = enumerate_devices(instance, ctypes.byref(short_count), short)
    untouched = [h == 0x5A5A for h in short[short_count.value:]]
    return ({"count": [result, total], "full": [full, count.value], "short": [short_result, short_count.value,
             [handles.index(h) if h in handles else None for h in short[:short_count.value]], all(untouched)]},
            handles)


def extensions_answers(enumerate_extensions, phys) -> dict:
    def names(array, n):
        return [[array[i].extensionName.decode(), array[i].specVersion] for i in range(n)]

    result, total = two_call(enumerate_extensions, phys, None)
    array = (ExtensionProperties * (total + 1))()
    count = ctypes.c_uint32(total + 1)
    full = enumerate_extensions(phys, None, ctypes.byref(count), array)
    short_array = (ExtensionProperties * total)()
    short_count = ctypes.c_uint32(total - 1)
    short = enumerate_extensions(phys, None, ctypes.byref(short_count), short_array)
    return {"count": [result, total], "full": [full, count.value, names(array, count.value)],
            "short": [short, short_count.value, names(short_array, short_count.value)]}


def member_bytes(ffi, type_name: str) -> list[int]:
    """Offsets of the bytes of a struct that belong to a member (not padding), from the driver's cffi
    declarations (its module is loaded in this process once the driver runs)."""
    out: list[int] = []

    def walk(ctype, base: int) -> None:
        if ctype.kind == "struct":
            for _, field in ctype.fields:
                walk(field.type, base + field.offset)
        elif ctype.kind == "array":
            size = ffi.sizeof(ctype.item)
            for i in range(ctype.length):
                walk(ctype.item, base + i * size)
        else:
            out.extend(range(base, base + ffi.sizeof(ctype)))
    walk(ffi.typeof(type_name), 0)
    return out


def properties_answer(get_properties, phys) -> dict:
    props = PhysicalDeviceProperties()
    get_properties(phys, ctypes.byref(props))
    ffi = sys.modules["_tessera_mali_icd_shim"].ffi
    assert ffi.sizeof("VkPhysicalDeviceProperties") == ctypes.sizeof(props)
    raw = bytes(props)
    members = bytes(raw[i] for i in member_bytes(ffi, "VkPhysicalDeviceProperties"))
    return {"apiVersion": props.apiVersion, "vendorID": props.vendorID, "deviceID": props.deviceID,
            "deviceType": props.deviceType, "deviceName": props.deviceName.decode(),
            "members": hashlib.sha256(members).hexdigest()}


def one_instance(api: Api) -> dict:
    info = instance_create_info(b"fixed_answers")
    instance = ctypes.c_void_p()
    result = api.fn(None, "vkCreateInstance", PFN_CREATE_INSTANCE)(ctypes.byref(info), None, ctypes.byref(instance))
    if result != VK_SUCCESS:
        sys.exit(f"vkCreateInstance failed: {result}")
    enumerate_devices = api.fn(instance, "vkEnumeratePhysicalDevices", PFN_ENUMERATE)
    enumerate_groups = api.fn(instance, "vkEnumeratePhysicalDeviceGroups", PFN_ENUMERATE)
    get_properties = api.fn(instance, "vkGetPhysicalDeviceProperties", PFN_PROPERTIES)
    enumerate_extensions = api.fn(instance, "vkEnumerateDeviceExtensionProperties", PFN_DEVICE_EXTENSIONS)
    rounds = []
    for n in range(REPEAT):
        if n == 1:
            sys.setprofile(count_hook_calls)   # from the second round on: the driver's Python hooks called
        devices, handles = devices_answers(enumerate_devices, instance)
        round_ = {"devices": devices,
                  "groups": groups_answers(enumerate_groups, instance,
                                           lambda h: handles.index(h) if h in handles else None),
                  "properties": [properties_answer(get_properties, h) for h in handles],
                  "extensions": [extensions_answers(enumerate_extensions, h) for h in handles]}
        rounds.append(round_)
    sys.setprofile(None)
    api.fn(instance, "vkDestroyInstance", PFN_DESTROY_INSTANCE)(instance, None)
    return {"instance": instance.value, "rounds": rounds}


QUERIES = frozenset({"vkEnumeratePhysicalDevices", "vkEnumeratePhysicalDeviceGroups", "vkGetPhysicalDeviceProperties",
                     "vkEnumerateDeviceExtensionProperties"})
hook_calls: dict[str, int] = {}


def count_hook_calls(frame, event, arg) -> None:
    """The driver's hook trampolines (vkapi/dispatch.py) run in this interpreter: count those of QUERIES."""
    if event == "call" and frame.f_code.co_name == "trampoline":
        name = frame.f_locals.get("name")
        if name in QUERIES:
            hook_calls[name] = hook_calls.get(name, 0) + 1


def main() -> None:
    api = Api(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
    first, second = one_instance(api), one_instance(api)
    print(json.dumps({"same_instance_address": first["instance"] == second["instance"],
                      "hook_calls_after_first_round": hook_calls,
                      "instances": [first["rounds"], second["rounds"]]}))


if __name__ == "__main__":
    main()

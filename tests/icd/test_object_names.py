"""icd/object_names.py without Vulkan: a call naming one of the device's emulated objects is answered
by the driver, which keeps the name, the tag and the private data on the object; any other call goes
to the backend unchanged (issue #23). The driver shim's compiled ffi makes the structs; the backend
is a table of recording functions."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tessera.icd.object_names import ObjectNames
from tessera.icd.objects import Device, EmulatedObject, Objects, adopt, release
from tessera.vkapi.vkconst import vk


class Tensor(EmulatedObject):
    OBJECT_TYPE = vk.VK_OBJECT_TYPE_TENSOR_ARM

    def __init__(self, handle: int) -> None:
        self.handle = handle


@pytest.fixture
def setup(shims):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vkapi"))
    from test_pnext_walkers import SHIMS, _load_shim

    ffi = _load_shim(*SHIMS["icd"])
    calls: list[tuple] = []

    def backend(name, result=vk.VK_SUCCESS):
        return lambda *args: calls.append((name, *args)) or result

    table = SimpleNamespace(**{n: backend(n) for n in (
        "vkSetDebugUtilsObjectNameEXT", "vkSetDebugUtilsObjectTagEXT", "vkDebugMarkerSetObjectNameEXT",
        "vkDebugMarkerSetObjectTagEXT", "vkSetPrivateData", "vkGetPrivateData", "vkDestroyPrivateDataSlot")})
    handle = ffi.new("char *")
    objects = Objects(ffi)
    dev = objects.add(Device(ffi.cast("VkDevice", handle), table, None, frozenset(), frozenset()))
    tensor = Tensor(0x7E55_7E50_0042)
    adopt(dev, tensor)
    keep = [handle]
    return SimpleNamespace(ffi=ffi, names=ObjectNames(SimpleNamespace(ffi=ffi, objects=objects)), dev=dev,
                           tensor=tensor, calls=calls, keep=keep)


def _name_info(s, object_type, handle, name: bytes):
    text = s.ffi.new("char[]", name)
    s.keep.append(text)
    return s.ffi.new("VkDebugUtilsObjectNameInfoEXT *", {
        "sType": vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT, "objectType": object_type,
        "objectHandle": handle, "pObjectName": text})


def test_an_emulated_objects_name_stays_in_the_driver(setup):
    s = setup
    info = _name_info(s, vk.VK_OBJECT_TYPE_TENSOR_ARM, s.tensor.handle, b"weights")
    assert s.names.vkSetDebugUtilsObjectNameEXT(s.dev.handle, info) == vk.VK_SUCCESS
    assert s.tensor.debug_name == "weights" and s.calls == []


def test_a_backend_objects_name_is_forwarded_and_remembered(setup):
    s = setup
    info = _name_info(s, vk.VK_OBJECT_TYPE_BUFFER, 0x1234, b"vertices")
    assert s.names.vkSetDebugUtilsObjectNameEXT(s.dev.handle, info) == vk.VK_SUCCESS
    assert [c[0] for c in s.calls] == ["vkSetDebugUtilsObjectNameEXT"]
    assert s.dev.object_names[0x1234] == "vertices"


def test_a_handle_of_another_type_is_the_backends(setup):
    """The same value under another object type is not the emulated object (handle values may collide)."""
    s = setup
    info = _name_info(s, vk.VK_OBJECT_TYPE_BUFFER, s.tensor.handle, b"a buffer")
    s.names.vkSetDebugUtilsObjectNameEXT(s.dev.handle, info)
    assert s.tensor.debug_name is None and len(s.calls) == 1


def test_debug_marker_names_and_tags_with_unknown_type(setup):
    s = setup
    text = s.ffi.new("char[]", b"marker name")
    tag = s.ffi.new("char[]", b"\x01\x02\x03")
    s.keep += [text, tag]
    name = s.ffi.new("VkDebugMarkerObjectNameInfoEXT *", {"objectType": 0, "object": s.tensor.handle,
                                                          "pObjectName": text})
    assert s.names.vkDebugMarkerSetObjectNameEXT(s.dev.handle, name) == vk.VK_SUCCESS
    info = s.ffi.new("VkDebugMarkerObjectTagInfoEXT *", {"objectType": 0, "object": s.tensor.handle, "tagName": 5,
                                                         "tagSize": 3, "pTag": tag})
    assert s.names.vkDebugMarkerSetObjectTagEXT(s.dev.handle, info) == vk.VK_SUCCESS
    assert (s.tensor.debug_name, s.tensor.tag, s.calls) == ("marker name", (5, b"\x01\x02\x03"), [])


def test_private_data_of_an_emulated_object_lives_in_the_driver_until_its_slot_goes(setup):
    s = setup
    t, h, out = vk.VK_OBJECT_TYPE_TENSOR_ARM, s.tensor.handle, s.ffi.new("uint64_t *")
    s.names.vkGetPrivateData(s.dev.handle, t, h, 77, out)
    assert out[0] == 0
    assert s.names.vkSetPrivateData(s.dev.handle, t, h, 77, 0xABCDEF) == vk.VK_SUCCESS
    s.names.vkGetPrivateData(s.dev.handle, t, h, 77, out)
    assert out[0] == 0xABCDEF and s.calls == []
    s.names.vkDestroyPrivateDataSlot(s.dev.handle, 77, s.ffi.NULL)   # forwarded: the slot is the backend's
    s.names.vkGetPrivateData(s.dev.handle, t, h, 77, out)
    assert out[0] == 0 and [c[0] for c in s.calls] == ["vkDestroyPrivateDataSlot"]


def test_a_released_object_is_the_backends_again(setup):
    s = setup
    release(s.dev, s.tensor.handle)
    s.names.vkSetPrivateData(s.dev.handle, vk.VK_OBJECT_TYPE_TENSOR_ARM, s.tensor.handle, 1, 2)
    assert [c[0] for c in s.calls] == ["vkSetPrivateData"]

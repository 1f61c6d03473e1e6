"""The layer's GetInstanceProcAddr and GetDeviceProcAddr answers (layer/chain.py make_proc_addr), as the
loader and the layers stacked with ours expect (issue #23): no Vulkan, no shim.

Handles are plain pointers made by cffi; a dispatch key is the handle's address; the layer's own
intercepts are strings; the next element's GetProcAddr records what it is asked.
"""
from __future__ import annotations

from types import SimpleNamespace

import cffi
import pytest

from tessera.layer.chain import make_proc_addr

ffi = cffi.FFI()
OURS = {"vkCreateInstance": "our vkCreateInstance", "vkEnumerateDeviceExtensionProperties": "our enumerate",
        "vkCreateDevice": "our vkCreateDevice", "vkDestroyInstance": "our vkDestroyInstance",
        "vkQueueSubmit": "our vkQueueSubmit", "vkCmdDraw": "our vkCmdDraw",
        "vkGetPhysicalDeviceFeatures2": "our features2"}


class Next:
    """The element below: answers what it has, remembers what it was asked."""

    def __init__(self, lacks=()) -> None:
        self.lacks = set(lacks)
        self.asked: list[str] = []

    def __call__(self, handle, pName):
        name = ffi.string(pName).decode()
        self.asked.append(name)
        return ffi.NULL if name in self.lacks else f"next {name}"


def _layer(lacks=()):
    instance, device = ffi.new("char *"), ffi.new("char *")
    next_gipa, next_gdpa = Next(lacks), Next(lacks)
    table = SimpleNamespace(**{n: (None if n in lacks else object()) for n in OURS})
    key = lambda handle: int(ffi.cast("uintptr_t", handle))   # noqa: E731
    state = SimpleNamespace(key=key,
                            instances={key(instance): SimpleNamespace(next=table, next_gipa=next_gipa)},
                            devices={key(device): SimpleNamespace(next=table, next_gdpa=next_gdpa)})
    gipa, gdpa = make_proc_addr(ffi, state, OURS)
    return gipa, gdpa, instance, device, next_gipa


def _name(text: str):
    return ffi.new("char[]", text.encode())


@pytest.mark.parametrize("name", sorted(OURS))
def test_a_null_instance_gets_every_intercept(name):
    """vkBasalt and MangoHud ask (NULL, "vkCreateDevice") in their vkCreateDevice (LoaderLayerInterface.md:
    a layer's GetInstanceProcAddr answers its own intercepts for any instance, NULL included)."""
    gipa, _, instance, device, _ = _layer()
    assert gipa(ffi.NULL, _name(name)) == OURS[name]


def test_an_instance_the_layer_does_not_know_gets_the_intercepts_and_nothing_else():
    gipa, _, instance, device, next_gipa = _layer()
    stranger = ffi.new("char *")   # while the layer's handles live: another address
    assert gipa(stranger, _name("vkCreateDevice")) == "our vkCreateDevice"
    assert gipa(stranger, _name("vkCmdDraw")) == "our vkCmdDraw"
    assert gipa(stranger, _name("vkGetPhysicalDeviceMemoryProperties")) == ffi.NULL
    assert gipa(ffi.NULL, _name("vkGetPhysicalDeviceMemoryProperties")) == ffi.NULL
    assert next_gipa.asked == []


def test_the_layers_instance_gets_intercepts_and_the_next_elements_answer_for_the_rest():
    gipa, _, instance, device, next_gipa = _layer(lacks={"vkGetPhysicalDeviceFeatures2",
                                                         "vkGetPhysicalDeviceFeatures2KHR"})
    assert gipa(instance, _name("vkCreateDevice")) == "our vkCreateDevice"
    assert gipa(instance, _name("vkCmdDraw")) == "our vkCmdDraw"
    assert gipa(instance, _name("vkGetPhysicalDeviceMemoryProperties")) == "next vkGetPhysicalDeviceMemoryProperties"
    # An instance command the element below lacks stays its answer (NULL): the hook would have nothing to call.
    assert gipa(instance, _name("vkGetPhysicalDeviceFeatures2")) == ffi.NULL
    # Aliases answer as their command.
    assert gipa(instance, _name("vkGetPhysicalDeviceFeatures2KHR")) == ffi.NULL
    assert "vkCreateDevice" not in next_gipa.asked and "vkCmdDraw" not in next_gipa.asked


def test_device_proc_addr_answers_intercepts_the_driver_has():
    _, gdpa, instance, device, _ = _layer(lacks={"vkCmdDraw"})
    assert gdpa(device, _name("vkQueueSubmit")) == "our vkQueueSubmit"
    assert gdpa(device, _name("vkCmdDraw")) == ffi.NULL
    assert gdpa(device, _name("vkCmdDispatch")) == "next vkCmdDispatch"
    assert gdpa(ffi.new("char *"), _name("vkQueueSubmit")) == ffi.NULL

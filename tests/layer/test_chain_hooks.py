"""layer/chain.py's ChainHooks (issue #24), without Vulkan: its methods are exactly the commands the
intercept table gives layer.chain, the ones that call down themselves are registered with forwarding()
beside bind, and the hooks' early exits and hand-overs to Chains driven with stand-ins."""
from __future__ import annotations

import logging
from types import SimpleNamespace as NS

import cffi

from tessera.layer import chain
from tessera.layer.chain import Chains, ChainHooks
from tessera.layer.forwarding import Forwarding
from tessera.vkapi import intercepts
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.vkconst import vk

FORWARDING = {"vkDestroyInstance", "vkDestroyDevice", "vkEnumerateDeviceExtensionProperties"}


def hook_set() -> HookSet:
    return HookSet(HookErrors(logging.getLogger("test_chain_hooks")))


def state():
    return NS(session=NS(transport=NS(send=lambda *a: None)), key=lambda handle: int(handle) + 1,
              address=int, owner_of=None, instance_of=None)


class StubChains:
    """What the hooks hand Chains: recorded."""

    def __init__(self) -> None:
        self.calls: list = []

    def destroy_instance(self, key, call_down):
        self.calls.append(("instance", key, call_down(None)))

    def destroy_device(self, key, call_down):
        self.calls.append(("device", key, call_down(None)))


def hooks_of(ffi=None, chains=None) -> ChainHooks:
    return ChainHooks(hook_set(), state(), ffi or NS(NULL=None, cast=lambda ctype, p: p), chains or StubChains())


def test_register_binds_the_hooks_and_forwards_the_ones_that_call_down():
    hooks = hook_set()
    got = chain.register(hooks, state(), None, on_destroy_device=lambda dev: None)
    assert isinstance(got, Chains)
    owned = {name for name, modules in intercepts.owners(intercepts.LAYER).items() if "tessera.layer.chain" in modules}
    assert set(hooks.modules()) == owned
    assert {name for name, fn in hooks.replacements.items() if isinstance(fn, Forwarding)} == FORWARDING
    assert set(hooks.modules()["vkDestroyDevice"]) == {"tessera.layer.chain"}


def test_only_the_creates_and_the_features_query_are_bound_by_name():
    hooks = hook_set()
    hooks.bind(hooks_of())
    assert set(hooks.modules()) == {"vkCreateInstance", "vkCreateDevice", "vkGetPhysicalDeviceFeatures2"}


def test_destroying_null_calls_nothing_and_a_handle_goes_to_chains_by_its_key():
    chains = StubChains()
    f = hooks_of(chains=chains)
    down: list = []
    call_down = lambda *args: down.append(args) or "down"
    f.forwarding_vkDestroyInstance(call_down, None, None)
    f.forwarding_vkDestroyDevice(call_down, None, None)
    assert chains.calls == [] and down == []
    f.forwarding_vkDestroyInstance(call_down, 0x10, "alloc")
    f.forwarding_vkDestroyDevice(call_down, 0x20, "alloc")
    assert chains.calls == [("instance", 0x11, "down"), ("device", 0x21, "down")]
    assert down == [(0x10, "alloc"), (0x20, "alloc")]


def test_a_create_without_the_loaders_link_fails_to_initialize():
    f = hooks_of()
    assert f.replace_vkCreateInstance(NS(pNext=None), None, [None]) == vk.VK_ERROR_INITIALIZATION_FAILED
    f.state.instance_of = lambda physical: NS(handle=1)
    assert f.replace_vkCreateDevice(2, NS(pNext=None), None, [None]) == vk.VK_ERROR_INITIALIZATION_FAILED


def test_the_layer_reports_frame_boundary_as_a_feature():
    fb = NS(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FRAME_BOUNDARY_FEATURES_EXT, pNext=None,
            frameBoundary=vk.VK_FALSE)
    other = NS(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, pNext=fb)
    hooks_of().after_vkGetPhysicalDeviceFeatures2(None, None, 1, NS(pNext=other))
    assert fb.frameBoundary == vk.VK_TRUE


def test_another_layers_extension_query_is_passed_down():
    ffi = cffi.FFI()
    f = hooks_of(ffi=ffi)
    f.state.instance_of = lambda physical: NS(next=NS(vkEnumerateDeviceExtensionProperties=None))
    name = ffi.new("char[]", b"VK_LAYER_other")
    down: list = []
    result = f.forwarding_vkEnumerateDeviceExtensionProperties(
        lambda *args: down.append(args) or vk.VK_INCOMPLETE, 3, name, "count", "props")
    assert result == vk.VK_INCOMPLETE and down == [(3, name, "count", "props")]

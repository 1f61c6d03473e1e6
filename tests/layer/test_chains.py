"""The layer's instance and device bookkeeping (layer/chain.py Chains and the extension
decisions beside it): no Vulkan, no shim.

Handles and dispatch keys are plain ints; "calling down" is a function that records the call;
the transport keeps what is sent (decoded with tessera.schemas.frames).
"""
from __future__ import annotations

import pytest

from tessera.layer.chain import (Chains, DeviceProperties, device_extension_list, emulated_extensions,
                                 missing_instance_extensions)
from tessera.layer.state import DeviceState, InstanceState, LayerState, Session
from tessera.schemas.frames import FrameDecoder, MessageType


class Transport:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.ends: list[str] = []

    def send(self, frame) -> None:
        self.sent.append(frame)

    def flush(self) -> None:
        self.ends.append("flush")

    def close(self) -> None:
        self.ends.append("close")

    def messages(self) -> list[tuple[str, dict]]:
        return [(MessageType(f.type).name, f.payload()) for f in FrameDecoder().feed(b"".join(self.sent))]


class Errors:
    def __init__(self) -> None:
        self.reported: list[tuple[str, str]] = []

    def report(self, command: str, message: str) -> None:
        self.reported.append((command, message))


class Instrumenter:
    hidden = frozenset({"VK_EXT_hidden_by_layer"})

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.created: list[tuple[int, bool]] = []

    def device_info(self, info, names, below, keep):
        if self.fail:
            raise RuntimeError("no instrumentation today")
        keep.append("instrumented")
        return (info, "extended"), True

    def device_created(self, dev, instrumented) -> None:
        self.created.append((dev.address, instrumented))

    def pipe_rates(self, dev, name: str):
        return {"fma": 32.0} if name == "Mali-G720" else None


class Rig:
    def __init__(self, instrumenter=None, on_destroy=None) -> None:
        self.transport = Transport()
        self.state = LayerState(None, Session(self.transport))
        self.errors = Errors()
        self.events: list = []
        self.chains = Chains(self.state, self.transport.send, self.errors,
                             on_destroy or (lambda dev: self.events.append(("on_destroy", dev.address))),
                             instrumenter)

    def instance(self, key: int) -> InstanceState:
        inst = InstanceState(handle=key + 1, next=None, next_gipa=None, enabled_extensions=frozenset())
        self.chains.instance_created(key, inst)
        return inst

    def device(self, key: int, address: int, inst: InstanceState, names=(), instrumented=False,
               properties=None) -> DeviceState:
        dev = DeviceState(handle=address, address=address, next=None, next_gdpa=None, instance=inst,
                          physical=0x500, enabled_extensions=frozenset(names))
        self.chains.device_created(key, dev, instrumented,
                                   properties or (lambda d: DeviceProperties("Mali-G720", 0x13B5, 0x72120000,
                                                                             (1 << 22) | (3 << 12) | 280)))
        return dev

    def call_down(self, owner) -> None:
        self.events.append(("down", owner.handle))


def test_instances_are_kept_by_key_and_the_last_one_closes_the_transport():
    rig = Rig()
    first, second = rig.instance(0x100), rig.instance(0x200)
    assert rig.state.instances == {0x100: first, 0x200: second}
    rig.chains.destroy_instance(0x100, rig.call_down)
    assert rig.events == [("down", 0x101)] and rig.transport.ends == ["flush"]
    assert rig.state.instances == {0x200: second}
    rig.chains.destroy_instance(0x200, rig.call_down)
    assert rig.events == [("down", 0x101), ("down", 0x201)] and rig.transport.ends == ["flush", "close"]
    assert rig.state.instances == {}


def test_destroying_an_unknown_instance_calls_nothing_down_and_keeps_the_others():
    rig = Rig()
    kept = rig.instance(0x100)
    with pytest.raises(KeyError):
        rig.chains.destroy_instance(0x999, rig.call_down)
    assert rig.events == [] and rig.transport.ends == [] and rig.state.instances == {0x100: kept}


def test_a_new_device_is_registered_and_described():
    rig = Rig()
    inst = rig.instance(0x100)
    dev = rig.device(0x300, 0xABC0, inst, names=["VK_KHR_swapchain", "VK_EXT_frame_boundary"])
    assert rig.state.devices == {0x300: dev}
    assert rig.transport.messages() == [("DEVICE", {
        "device": "0xabc0", "name": "Mali-G720", "vendor_id": 0x13B5, "device_id": 0x72120000, "driver": "",
        "api_version": "1.3.280", "extensions": ["VK_EXT_frame_boundary", "VK_KHR_swapchain"]})]
    assert rig.errors.reported == []


def test_an_instrumented_device_is_told_to_the_instrumenter_and_carries_pipe_rates():
    instrumenter = Instrumenter()
    rig = Rig(instrumenter)
    inst = rig.instance(0x100)
    rig.device(0x300, 0xABC0, inst, instrumented=True)
    rig.device(0x301, 0xABD0, inst, properties=lambda d: DeviceProperties("Other GPU", 1, 2, 1 << 22))
    assert instrumenter.created == [(0xABC0, True), (0xABD0, False)]
    (_, first), (_, second) = rig.transport.messages()
    assert first["pipe_rates"] == {"fma": 32.0} and "pipe_rates" not in second
    assert second["api_version"] == "1.0.0"


def test_a_device_that_cannot_be_described_is_still_registered():
    rig = Rig()
    inst = rig.instance(0x100)

    def broken(dev):
        raise OSError("no properties")
    dev = rig.device(0x300, 0xABC0, inst, properties=broken)
    assert rig.state.devices == {0x300: dev} and rig.transport.sent == []
    assert rig.errors.reported == [("vkCreateDevice", "describing the device")]


def test_a_device_is_read_back_before_it_is_destroyed_and_then_forgotten():
    rig = Rig()
    inst = rig.instance(0x100)
    dev = rig.device(0x300, 0xABC0, inst)
    other = rig.device(0x301, 0xABD0, inst)

    def call_down(owner):
        assert rig.state.devices[0x300] is owner   # still known while it is destroyed below
        rig.call_down(owner)
    rig.chains.destroy_device(0x300, call_down)
    assert rig.events == [("on_destroy", 0xABC0), ("down", dev.handle)]
    assert rig.state.devices == {0x301: other} and rig.errors.reported == []


def test_a_failing_read_back_is_reported_and_the_device_still_destroyed():
    def on_destroy(dev):
        raise RuntimeError("capture lost")
    rig = Rig(on_destroy=on_destroy)
    dev = rig.device(0x300, 0xABC0, rig.instance(0x100))
    rig.chains.destroy_device(0x300, rig.call_down)
    assert rig.events == [("down", dev.handle)] and rig.state.devices == {}
    assert rig.errors.reported == [("vkDestroyDevice", "reading back captures before destruction")]


def test_instrumentation_extends_the_create_info_or_is_left_out_with_a_report():
    keep: list = []
    assert Rig().chains.instrumented_info("info", [], {}, keep) == ("info", False) and keep == []
    assert Rig(Instrumenter()).chains.instrumented_info("info", [], {}, keep) == (("info", "extended"), True)
    failing = Rig(Instrumenter(fail=True))
    assert failing.chains.instrumented_info("info", [], {}, []) == ("info", False)
    assert failing.errors.reported == [("vkCreateDevice", "enabling shader instrumentation; created without it")]


def test_the_layer_adds_debug_utils_only_when_missing_and_available():
    assert missing_instance_extensions(["VK_KHR_surface"], {"VK_EXT_debug_utils", "VK_KHR_surface"}) == [
        "VK_EXT_debug_utils"]
    assert missing_instance_extensions(["VK_EXT_debug_utils"], {"VK_EXT_debug_utils"}) == []
    assert missing_instance_extensions([], {"VK_KHR_surface"}) == []


def test_the_layer_adds_debug_utils_when_the_element_below_does_not_say():
    """A layer below ours may not answer the instance-extension query (the Khronos validation layer
    answers VK_ERROR_LAYER_NOT_PRESENT): None, and the layer adds what it needs (issue #23)."""
    assert missing_instance_extensions(["VK_KHR_surface"], None) == ["VK_EXT_debug_utils"]
    assert missing_instance_extensions(["VK_EXT_debug_utils"], None) == []


def test_frame_boundary_is_emulated_only_when_enabled_and_the_driver_lacks_it():
    names = ["VK_KHR_swapchain", "VK_EXT_frame_boundary"]
    assert emulated_extensions(names, {"VK_KHR_swapchain": 70}) == {"VK_EXT_frame_boundary"}
    assert emulated_extensions(names, {"VK_KHR_swapchain": 70, "VK_EXT_frame_boundary": 1}) == frozenset()
    assert emulated_extensions(["VK_KHR_swapchain"], {}) == frozenset()


def test_a_device_lists_the_drivers_extensions_plus_the_layers_minus_hidden_ones():
    assert device_extension_list({"VK_KHR_swapchain": 70}) == {"VK_KHR_swapchain": 70, "VK_EXT_frame_boundary": 1}
    assert device_extension_list({"VK_EXT_frame_boundary": 2}) == {"VK_EXT_frame_boundary": 2}   # the driver's
    assert device_extension_list({"VK_KHR_swapchain": 70, "VK_EXT_hidden_by_layer": 1},
                                 frozenset({"VK_EXT_hidden_by_layer", "VK_EXT_frame_boundary"})) == {
        "VK_KHR_swapchain": 70}


def test_the_list_is_made_once_per_physical_device_and_hides_what_the_instrumenter_drives():
    rig = Rig(Instrumenter())
    asked: list[int] = []

    def below(physical):
        def query():
            asked.append(physical)
            return {"VK_KHR_swapchain": 70, "VK_EXT_hidden_by_layer": 3}
        return query
    first = rig.chains.listed_extensions(0x500, below(0x500), dict)
    again = rig.chains.listed_extensions(0x500, below(0x500), dict)
    other = rig.chains.listed_extensions(0x600, below(0x600), dict)
    assert first == {"VK_KHR_swapchain": 70, "VK_EXT_frame_boundary": 1}
    assert again is first and other is not first and other == first
    assert asked == [0x500, 0x600]
    plain = Rig().chains.listed_extensions(0x500, below(0x500), dict)
    assert plain == {"VK_KHR_swapchain": 70, "VK_EXT_hidden_by_layer": 3, "VK_EXT_frame_boundary": 1}

"""icd/measured_timing.py MeasuredTiming, called as HookSet.bind registers it: no Vulkan, no shim.

The instrumentation object is a stand-in with one region whose counters are a plain cffi array;
the recording's ops come from recording.Shadow, as the driver's hooks make them between this
feature's at_record mark and its before-hook.
"""
from __future__ import annotations

import logging
from types import SimpleNamespace as NS

import cffi
import pytest

from tessera.icd import measured_timing as mt
from tessera.icd.measured_timing import MeasuredRecording, MeasuredTiming
from tessera.icd.objects import CommandBuffer, Objects
from tessera.icd.recording import Shadow
from tessera.vkapi.commands import DISPATCHES, DRAWS
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.render_passes import PassInfo
from tessera.vkapi.resources import Resources
from tessera.vkapi.vkconst import vk


@pytest.fixture(scope="module")
def ffi():
    return cffi.FFI()


def instrumentation(ffi, stage: str, handle: int = 0x1A) -> NS:
    """An active instrumentation object whose last command took region 0 (one block, one counter)."""
    region = NS(pipeline=NS(counters=1, stages=[NS(name=stage, base=0, blocks=1, ops=[(1.0,) * 6])]),
                chunk=NS(mapped=ffi.new("char[]", 4)), offset=0)
    obj = NS(handle=handle, regions={0: region}, next_index=1, before_clear=[])
    obj.device = NS(instrumentation=NS(objects={handle: obj}))
    return obj


def setup(ffi, *buffers: CommandBuffer) -> MeasuredTiming:
    objects = Objects(ffi)
    for cb in buffers:
        objects.add(cb)
    feature = MeasuredTiming(NS(ffi=ffi, hooks=HookSet(HookErrors(logging.getLogger("test"))), objects=objects,
                                profile=NS(key="g720")))
    feature._costs = "costs"            # not loaded: no reading happens here
    return feature


def command_buffer(address: int = 0xC0) -> CommandBuffer:
    return CommandBuffer(handle=address, device=NS(res=Resources()), pool=1,
                         level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, address=address)


def test_every_draw_and_dispatch_is_marked_and_measured_by_its_own_methods():
    methods = set(dir(MeasuredTiming))
    for name in (*DRAWS, *DISPATCHES):
        assert {f"at_record_{name}", f"before_{name}"} <= methods, name


def test_an_uninstrumented_command_buffer_is_neither_marked_nor_measured(ffi):
    cb = command_buffer()
    feature = setup(ffi, cb)
    feature.at_record_vkCmdDispatch(cb, cb.handle, 1, 1, 1)
    Shadow().dispatch(cb, "vkCmdDispatch", (1, 1, 1))
    feature.before_vkCmdDispatch(cb, cb.handle, 1, 1, 1)
    assert cb.slots == {} and cb.ops[0].at_completion is None and not cb.needs_completion


def test_an_instrumented_dispatch_gets_a_reading_at_completion(ffi):
    cb = command_buffer()
    cb.instrumentation = instrumentation(ffi, "compute")
    feature = setup(ffi, cb)
    Shadow().draw(cb, 3)                                  # before the mark: not this command's
    feature.at_record_vkCmdDispatchBase(cb, cb.handle, 0, 0, 0, 4, 1, 1)
    assert cb.peek(MeasuredRecording).mark == 1
    Shadow().dispatch(cb, "vkCmdDispatchBase", (4, 1, 1))
    feature.before_vkCmdDispatchBase(cb, cb.handle, 0, 0, 0, 4, 1, 1)
    state = cb.peek(MeasuredRecording)
    assert state.mark is None and len(state.readers) == 1
    assert cb.ops[0].at_completion is None and cb.ops[1].at_completion is not None
    assert cb.needs_completion
    assert cb.instrumentation.before_clear               # a clear banks the reader's counts first


def test_a_draw_is_measured_only_inside_a_render_pass(ffi):
    cb = command_buffer()
    cb.instrumentation = instrumentation(ffi, "fragment")
    feature = setup(ffi, cb)
    feature.at_record_vkCmdDraw(cb, cb.handle, 3, 1, 0, 0)
    Shadow().draw(cb, 3)
    feature.before_vkCmdDraw(cb, cb.handle, 3, 1, 0, 0)
    assert cb.peek(MeasuredRecording).mark is None and not cb.needs_completion    # no pass: no area
    Shadow().begin_rendering(cb, PassInfo("vkCmdBeginRendering", 0, 16, 8, 1, 1, [], 0, 0, dynamic=True))
    feature.at_record_vkCmdDrawIndexed(cb, cb.handle, 3, 1, 0, 0, 0)
    Shadow().draw(cb, 3)
    feature.before_vkCmdDrawIndexed(cb, cb.handle, 3, 1, 0, 0, 0)
    assert cb.needs_completion and cb.peek(MeasuredRecording).area == 16 * 8
    assert cb.ops[-1].at_completion is not None


def test_a_command_whose_stage_is_not_instrumented_is_not_measured(ffi):
    cb = command_buffer()
    cb.instrumentation = instrumentation(ffi, "vertex")
    feature = setup(ffi, cb)
    feature.at_record_vkCmdDispatch(cb, cb.handle, 1, 1, 1)
    Shadow().dispatch(cb, "vkCmdDispatch", (1, 1, 1))
    feature.before_vkCmdDispatch(cb, cb.handle, 1, 1, 1)
    assert cb.peek(MeasuredRecording).readers == [] and not cb.needs_completion


def test_a_submit_counts_the_readers_of_its_buffers_and_their_secondaries_and_a_failed_one_does_not(ffi):
    primary, secondary = command_buffer(0xC0), command_buffer(0xC1)
    secondary.instrumentation = instrumentation(ffi, "compute", handle=0x2A)
    feature = setup(ffi, primary, secondary)
    feature.at_record_vkCmdDispatch(secondary, secondary.handle, 1, 1, 1)
    Shadow().dispatch(secondary, "vkCmdDispatch", (1, 1, 1))
    feature.before_vkCmdDispatch(secondary, secondary.handle, 1, 1, 1)
    feature.before_vkCmdExecuteCommands(primary, primary.handle, 1, [secondary.handle])
    [reader] = primary.peek(MeasuredRecording).readers
    submits = [NS(commandBufferCount=1, pCommandBuffers=[primary.handle])]
    feature.before_vkQueueSubmit(None, None, 1, submits, None)
    assert reader.submitted == 1
    feature.after_vkQueueSubmit(None, vk.VK_ERROR_DEVICE_LOST, None, 1, submits, None)
    assert reader.submitted == 0                          # nothing runs: never read
    feature.before_vkQueueSubmit(None, None, 1, submits, None)
    feature.after_vkQueueSubmit(None, vk.VK_SUCCESS, None, 1, submits, None)
    assert reader.submitted == 1


def test_binding_hooks_the_draws_dispatches_secondaries_and_submits():
    hooks = HookSet(HookErrors(logging.getLogger("test")))
    hooks.bind(MeasuredTiming(NS(ffi=None, hooks=hooks, objects=None, profile=None)))
    assert set(hooks.record_time) - {n for n, fns in hooks.record_time.items() if not fns} == {*DRAWS, *DISPATCHES}
    assert {n for n, fns in hooks.befores.items() if fns} == {*DRAWS, *DISPATCHES, "vkCmdExecuteCommands",
                                                              "vkQueueSubmit", "vkQueueSubmit2"}
    assert {n for n, fns in hooks.afters.items() if fns} == {"vkQueueSubmit", "vkQueueSubmit2"}
    assert mt.readers_of(command_buffer()) == []

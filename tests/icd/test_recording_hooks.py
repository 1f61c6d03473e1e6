"""The driver's recording feature objects, called as HookSet.bind registers them: no Vulkan, no shim.

icd/recording.py ShadowRecording (the timeline's shadow recording: one method per command, C's records
applied by its `apply_vk…` methods), icd/command_buffer.py CommandBufferLifecycle and icd/labels.py
DebugLabels, each built on a stand-in driver (a SimpleNamespace with the attributes it reads) and
driven through its methods with plain values or a tiny cffi FFI.
"""
from __future__ import annotations

import logging
from types import SimpleNamespace as NS

import cffi
import pytest

from tessera.icd.command_buffer import CommandBufferLifecycle
from tessera.icd.labels import DebugLabels
from tessera.icd.objects import CommandBuffer, CommandBufferState, Objects, Queue
from tessera.icd.recording import Draw, Shadow, ShadowRecording, Work
from tessera.vkapi import accel
from tessera.vkapi.commands import ACCELERATION_STRUCTURES, DISPATCHES, DRAWS
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.ops import LABEL_END, PASS_END, PASS_SUSPEND, Barrier, LabelBegin, LabelInsert, PassBegin
from tessera.vkapi.render_passes import PassInfo
from tessera.vkapi.resources import Resources
from tessera.vkapi.transfers import RECORDED_IN_C, TRANSFERS
from tessera.vkapi.vkconst import vk


def command_buffer(res: Resources | None = None, address: int = 0xC0) -> CommandBuffer:
    return CommandBuffer(handle=address, device=NS(res=res if res is not None else Resources()), pool=1,
                         level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, address=address)


def hooks() -> HookSet:
    return HookSet(HookErrors(logging.getLogger("test")))


@pytest.fixture(scope="module")
def ffi():
    return cffi.FFI()


def recording(ffi, objects=None) -> ShadowRecording:
    return ShadowRecording(NS(ffi=ffi, hooks=hooks(), objects=objects, profile=NS(key="g720")))


# ---- ShadowRecording: a method per command -------------------------------------------------------
def test_every_shared_table_command_has_its_own_method():
    methods = set(dir(ShadowRecording))
    for name in (*TRANSFERS, *ACCELERATION_STRUCTURES, *DISPATCHES, *DRAWS):
        assert f"before_{name}" in methods, name
    for name in RECORDED_IN_C:                           # every transfer recorded in C is applied
        assert f"apply_{name}" in methods, name


def test_binding_registers_the_hook_of_a_command_recorded_in_c_as_its_applier_too(ffi):
    hs = hooks()
    feature = hs.bind(recording(ffi))
    for name in ("vkCmdCopyImage2", "vkCmdBeginRendering", "vkCmdBindPipeline", "vkCmdWaitEvents"):
        assert hs.appliers[name] == hs.befores[name][0] == getattr(feature, f"before_{name}")
    assert hs.appliers["vkCmdDraw"] == feature.apply_vkCmdDraw != hs.befores["vkCmdDraw"][0]


def test_a_transfer_hook_appends_the_work_its_shared_table_sizes(ffi):
    rec = recording(ffi)
    res = Resources()
    res.buffers[0xB] = 4096
    cb = command_buffer(res)
    rec.before_vkCmdUpdateBuffer(cb, cb.handle, 0xB, 16, 256, None)
    rec.apply_vkCmdFillBuffer(cb, cb.handle, 0xB, 1024, vk.VK_WHOLE_SIZE, 0)   # to the buffer's end
    [update, fill] = cb.ops
    assert (type(update), type(fill)) == (Work, Work)
    assert (update.kind, update.stage, update.command, update.nbytes) == ("transfer", "update buffer",
                                                                          "vkCmdUpdateBuffer", 256)
    assert update.info["bytes"] == 256
    assert (fill.stage, fill.command, fill.nbytes) == ("fill buffer", "vkCmdFillBuffer", 3072)


def test_an_acceleration_structure_hook_describes_its_command_with_the_shared_table(ffi):
    res = Resources()
    res.accels[0xA1] = (65536, 0)
    cb, expected = command_buffer(res), command_buffer(res)
    info = NS(src=0xA1, dst=0xA2, mode=vk.VK_COPY_ACCELERATION_STRUCTURE_MODE_CLONE_KHR)
    recording(ffi).before_vkCmdCopyAccelerationStructureKHR(cb, cb.handle, info)
    Shadow().acceleration_structure(expected, "vkCmdCopyAccelerationStructureKHR", accel.describe_copy(res, info))
    assert cb.ops == expected.ops
    [work] = cb.ops
    assert (work.command, work.nbytes) == ("vkCmdCopyAccelerationStructureKHR", 65536)


def test_render_pass_records_made_in_c_are_applied_as_the_hooks_record_them(ffi):
    rec = recording(ffi)
    cb = command_buffer()
    begin = PassInfo("vkCmdBeginRendering", 0, 16, 16, 1, 1, [], 0, 0, dynamic=True, suspending=True)
    rec.shadow.begin_rendering(cb, begin)
    rec.apply_vkCmdDraw(cb, cb.handle, 2, 6, 2)
    rec.apply_vkCmdEndRendering(cb, cb.handle)
    rec.apply_vkCmdEndRenderPass2(cb, cb.handle, None)
    assert cb.ops == [PassBegin(begin), Draw(6, 2, False, None, None, count=2),
                      PASS_SUSPEND, PASS_END]


def test_mesh_tasks_applied_from_c_are_estimated_draws_and_empty_sync2_records_no_barrier(ffi):
    rec = recording(ffi)
    cb = command_buffer()
    rec.apply_vkCmdDrawMeshTasksEXT(cb, cb.handle, 3)
    rec.apply_vkCmdPipelineBarrier2(cb, cb.handle, 0, 0, 0)
    assert [type(op) for op in cb.ops] == [Draw] * 3
    assert all(d.estimated for d in cb.ops)
    rec.apply_vkCmdPipelineBarrier2(cb, cb.handle, 1, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                    vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT)
    assert cb.ops[-1] == Barrier((frozenset({"transfer"}), frozenset({"fragment"})))


def test_trace_rays_take_their_size_or_are_estimated(ffi):
    rec = recording(ffi)
    cb = command_buffer()
    rec.apply_vkCmdTraceRaysKHR(cb, cb.handle, None, None, None, None, 8, 4, 2)
    rec.before_vkCmdTraceRaysIndirectKHR(cb, cb.handle, None, None, None, None, 0x1000)
    [direct, indirect] = cb.ops
    assert (direct.invocations, direct.info, direct.estimated) == (64, {"width": 8, "height": 4, "depth": 2}, False)
    assert (indirect.command, indirect.estimated) == ("vkCmdTraceRaysIndirectKHR", True)


def test_the_stage_costs_are_the_profiles(ffi, monkeypatch):
    from tessera.icd import recording as module

    seen = []
    monkeypatch.setattr(module.shader_costs, "of_stages", lambda key, stages, log: seen.append((key, stages)) or 7)
    assert recording(ffi).stage_costs(["stage"]) == 7
    assert seen == [("g720", ["stage"])]


# ---- CommandBufferLifecycle ----------------------------------------------------------------------
class Recorder:
    """The hooks' recorder, as the lifecycle uses it: what it was told, in order."""

    def __init__(self) -> None:
        self.calls: list = []

    def device_table(self, nxt):
        self.calls.append(("device_table", nxt))
        return "table"

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name, *args))


class Timeline:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def pull(self) -> None:
        self.calls.append("pull")

    def start(self) -> None:
        self.calls.append("start")


def lifecycle(ffi, c_submits: bool = True) -> tuple[CommandBufferLifecycle, NS]:
    drv = NS(ffi=ffi, hooks=hooks(), objects=Objects(ffi), timeline=Timeline(), c_submits=c_submits)
    drv.hooks.recorder = Recorder()
    return CommandBufferLifecycle(drv), drv


def test_allocated_buffers_are_tracked_and_registered_with_the_devices_table_made_once(ffi):
    feature, drv = lifecycle(ffi)
    dev = NS(recording_table=None, next="next", res="resources")
    feature.added(dev, 0xC1, 0xC1, vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, 7)
    feature.added(dev, 0xC2, 0xC2, vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY, 7)
    # the table once, told whether the device's buffers may begin and end in C; each buffer with its level
    assert drv.hooks.recorder.calls == [("device_table", "next"), ("defer_lifecycle", "table", dev, "resources"),
                                        ("register", 0xC1, "table", True, 7), ("register", 0xC2, "table", False, 7)]
    cb = drv.objects.get(0xC2, CommandBuffer)
    assert (cb.pool, cb.level, cb.device) == (7, vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY, dev)
    assert feature.pools_of(dev) is drv.objects.pools


def test_a_freed_buffer_goes_after_the_timeline_pulled_and_a_reset_one_starts_over(ffi):
    feature, drv = lifecycle(ffi)
    dev = NS(recording_table="table", next=None)
    feature.added(dev, 0xC1, 0xC1, vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, 7)
    cb = drv.objects.get(0xC1, CommandBuffer)
    cb.ops.append(Draw(3, 1, False, None, None))
    feature.reset(dev, 0xC1)
    assert cb.ops == [] and drv.timeline.calls == ["pull"]
    feature.gone(dev, 0xC1)
    feature.gone(dev, 0xC1)                              # already gone: only the pull
    feature.reset(dev, 0xC1)                             # unknown: nothing
    assert 0xC1 not in drv.objects.by_address
    assert drv.timeline.calls == ["pull"] * 3
    assert drv.hooks.recorder.calls == [("register", 0xC1, "table", True, 7), ("reset", 0xC1), ("unregister", 0xC1)]


def test_begin_end_and_reset_move_the_state_and_begin_drops_the_last_recording(ffi):
    feature, drv = lifecycle(ffi)
    cb = command_buffer()
    cb.ops.append(Draw(3, 1, False, None, None))
    feature.after_vkBeginCommandBuffer(cb, vk.VK_ERROR_OUT_OF_HOST_MEMORY, cb.handle, None)
    assert cb.ops and cb.state == CommandBufferState.INITIAL
    feature.after_vkBeginCommandBuffer(cb, vk.VK_SUCCESS, cb.handle, None)
    assert (cb.ops, cb.state) == ([], CommandBufferState.RECORDING)
    feature.after_vkEndCommandBuffer(cb, vk.VK_SUCCESS, cb.handle)
    assert cb.state == CommandBufferState.EXECUTABLE
    feature.after_vkEndCommandBuffer(cb, vk.VK_ERROR_OUT_OF_HOST_MEMORY, cb.handle)
    assert cb.state == CommandBufferState.INVALID
    feature.after_vkResetCommandBuffer(cb, vk.VK_SUCCESS, cb.handle, 0)
    assert cb.state == CommandBufferState.INITIAL
    assert drv.hooks.recorder.calls == [("reset", cb.handle)] * 2


@pytest.mark.parametrize("c_submits, needs_completion, submit_ok", [
    (True, False, True), (True, True, False), (False, False, False)])
def test_at_end_a_buffer_may_take_the_c_submit_path_unless_it_holds_work_timed_after_execution(
        ffi, c_submits, needs_completion, submit_ok):
    feature, drv = lifecycle(ffi, c_submits)
    cb = command_buffer()
    cb.needs_completion = needs_completion
    feature.at_record_vkEndCommandBuffer(cb, cb.handle)
    assert drv.timeline.calls == ["start"]
    assert drv.hooks.recorder.calls == [("set_submit_ok", cb.handle, submit_ok)]


# ---- DebugLabels ---------------------------------------------------------------------------------
def test_label_and_marker_records_from_c_become_ops_in_order():
    labels = DebugLabels(NS(ffi=None, objects=None))
    cb = command_buffer()
    labels.apply_vkCmdBeginDebugUtilsLabelEXT(cb, cb.handle, "frame")
    labels.apply_vkCmdDebugMarkerInsertEXT(cb, cb.handle, "point")
    labels.apply_vkCmdDebugMarkerBeginEXT(cb, cb.handle, "pass")
    labels.apply_vkCmdDebugMarkerEndEXT(cb, cb.handle)
    labels.apply_vkCmdInsertDebugUtilsLabelEXT(cb, cb.handle, "here")
    labels.apply_vkCmdEndDebugUtilsLabelEXT(cb, cb.handle)
    assert cb.ops == [LabelBegin("frame"), LabelInsert("point"), LabelBegin("pass"), LABEL_END,
                      LabelInsert("here"), LABEL_END]


def test_labels_recorded_in_python_read_the_name_and_find_the_buffer_by_handle(ffi):
    objects = Objects(ffi)
    cb = objects.add(command_buffer())
    labels = DebugLabels(NS(ffi=ffi, objects=objects))
    name = ffi.new("char[]", b"shadow pass")
    labels.replace_vkCmdBeginDebugUtilsLabelEXT(cb.handle, NS(pLabelName=name))
    labels.replace_vkCmdDebugMarkerInsertEXT(cb.handle, NS(pMarkerName=name))
    labels.replace_vkCmdEndDebugUtilsLabelEXT(cb.handle)
    assert cb.ops == [LabelBegin("shadow pass"), LabelInsert("shadow pass"), LABEL_END]


def test_queue_labels_open_and_close_on_the_timeline_and_a_point_label_leaves_nothing(ffi):
    objects = Objects(ffi)
    queue = objects.add(Queue(handle=0x51, device=None, family=0, index=0))
    seen = []
    labels = DebugLabels(NS(ffi=ffi, objects=objects, timeline=NS(queue_label=lambda q, n: seen.append((q, n)))))
    labels.replace_vkQueueBeginDebugUtilsLabelEXT(0x51, NS(pLabelName=ffi.new("char[]", b"upload")))
    labels.replace_vkQueueInsertDebugUtilsLabelEXT(0x51, NS(pLabelName=ffi.new("char[]", b"point")))
    labels.replace_vkQueueEndDebugUtilsLabelEXT(0x51)
    assert seen == [(queue, "upload"), (queue, None)]


def test_binding_the_labels_replaces_every_label_command_and_applies_the_ones_recorded_in_c():
    hs = hooks()
    hs.bind(DebugLabels(NS(ffi=None, objects=None)))
    cmd = {"vkCmdBeginDebugUtilsLabelEXT", "vkCmdEndDebugUtilsLabelEXT", "vkCmdInsertDebugUtilsLabelEXT",
           "vkCmdDebugMarkerBeginEXT", "vkCmdDebugMarkerEndEXT", "vkCmdDebugMarkerInsertEXT"}
    queue = {"vkQueueBeginDebugUtilsLabelEXT", "vkQueueEndDebugUtilsLabelEXT", "vkQueueInsertDebugUtilsLabelEXT"}
    assert set(hs.replacements) == cmd | queue
    assert set(hs.appliers) == cmd

"""The driver's features keep their state in typed slots on its objects (vkapi/slots.py): no Vulkan.

A command buffer's slots hold one recording's state and go at its reset; what several modules
share (the shader objects bound) is a declared field kept as it always was. Each feature's state
class is exercised through the function of its module that reads or writes it.
"""
from __future__ import annotations

from types import SimpleNamespace as NS

from tessera.icd import indirect_sizes
from tessera.icd.counter_memory import Limits
from tessera.icd.indirect_sizes import IndirectPending, SnapshotMemory, memory_of
from tessera.icd.instrumentation.metrics import METRICS
from tessera.icd.instrumentation.objects import DeviceInstrumentation, InstrumentedPipeline, InstrumentedStage
from tessera.icd.instrumentation.recording import InstrumentedShaders, shaders_bound
from tessera.icd.measured_timing import MeasuredRecording, _pass_area
from tessera.icd.objects import CommandBuffer, Device
from tessera.icd.recording import Draw, Shadow
from tessera.vkapi.ops import PASS_END, PassBegin
from tessera.vkapi.resources import Pipeline, Resources
from tessera.vkapi.vkconst import vk

VERTEX, FRAGMENT, COMPUTE_STAGE = (vk.VK_SHADER_STAGE_VERTEX_BIT, vk.VK_SHADER_STAGE_FRAGMENT_BIT,
                                   vk.VK_SHADER_STAGE_COMPUTE_BIT)
GRAPHICS = vk.VK_PIPELINE_BIND_POINT_GRAPHICS


def command_buffer(device=None) -> CommandBuffer:
    return CommandBuffer(handle=0xC0, device=device or NS(res=Resources()), pool=1,
                         level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, address=0xC0)


def device() -> Device:
    return Device(handle=0xD0, next=None, physical=None, enabled_extensions=frozenset(),
                  emulated_extensions=frozenset())


# ---- command buffers: one recording's state --------------------------------------------------
def test_a_reset_drops_the_features_state_of_the_recording_and_keeps_the_shader_objects_bound():
    cb = command_buffer()
    cb.slot(IndirectPending).copies.append("copy")
    cb.slot(MeasuredRecording).mark = 4
    cb.shader_objects[VERTEX] = "vertex shader object"
    cb.reset()
    assert cb.peek(IndirectPending) is None and cb.peek(MeasuredRecording) is None
    assert cb.shader_objects == {VERTEX: "vertex shader object"}
    assert cb.slot(IndirectPending).copies == []


def test_shadow_bind_shaders_keeps_what_is_bound_in_the_command_buffers_declared_field():
    res = Resources()
    vs, fs = Pipeline(GRAPHICS, None, {"vertex": 1.0}), Pipeline(GRAPHICS, None, {"fragment": 2.0})
    res.shader_objects.update({0x6: (VERTEX, vs), 0x7: (FRAGMENT, fs)})
    cb = command_buffer(NS(res=res))
    Shadow().bind_shaders(cb, [VERTEX, FRAGMENT], [0x6, 0x7])
    assert cb.shader_objects == {VERTEX: vs, FRAGMENT: fs}
    assert cb.slots == {}                                 # a shared field, not a slot
    Shadow().bind_shaders(cb, [FRAGMENT], None)
    assert cb.shader_objects == {VERTEX: vs}


# ---- measured_timing: the render pass area, scanned once ----------------------------------------
def test_pass_area_scans_only_the_ops_recorded_since_its_last_call():
    cb = command_buffer()
    state = cb.slot(MeasuredRecording)
    assert _pass_area(cb, state) is None
    cb.ops += [PassBegin(NS(width=64, height=32, layers=2)), Draw(3, 1, False, None, None)]
    assert _pass_area(cb, state) == 64 * 32 * 2
    assert (state.scanned, state.area) == (2, 64 * 32 * 2)
    cb.ops.append(Draw(3, 1, False, None, None))
    cb.ops[0] = PASS_END                                  # behind the scan: not seen again
    assert _pass_area(cb, state) == 64 * 32 * 2 and state.scanned == 3
    cb.ops.append(PASS_END)
    assert _pass_area(cb, state) is None
    cb.reset()                                            # a new recording: scanned from its start
    cb.ops.append(PassBegin(NS(width=8, height=8, layers=0)))
    assert _pass_area(cb, cb.slot(MeasuredRecording)) == 64


# ---- indirect_sizes: the device's snapshot memory ------------------------------------------------
def test_snapshot_memory_is_the_devices_slot_made_once_and_dropped_at_teardown():
    dev = device()
    assert dev.peek(SnapshotMemory) is None
    mem = memory_of(None, dev)
    assert memory_of(None, dev) is mem and dev.peek(SnapshotMemory) is mem and mem.dev is dev
    indirect_sizes.teardown(dev)                          # no chunk made: nothing to free
    assert mem.destroyed and dev.peek(SnapshotMemory) is None
    indirect_sizes.teardown(dev)                          # twice: nothing left to destroy
    assert memory_of(None, dev) is not mem


# ---- instrumentation/recording.py: the graphics shader objects' plan ----------------------------
def instrumented(blocks: int) -> NS:
    """A shader object's cost record carrying its instrumentation plan (icd/instrumentation/rewrite.py)."""
    stage = InstrumentedStage("vertex", VERTEX, 0, blocks, [(1.0,) * 6] * blocks)
    return NS(instrumented=InstrumentedPipeline(0x1A, 2, [stage]))


def test_shaders_bound_keeps_the_plan_with_the_graphics_pipeline_it_goes_with():
    dev = NS(instrumentation=DeviceInstrumentation(Limits(0, 16, 8, 0)), res=Resources())
    cb = command_buffer(dev)
    cb.graphics_pipeline = pipeline = object()
    cb.shader_objects[VERTEX] = instrumented(3)
    shaders_bound(cb, 1, [COMPUTE_STAGE], print)          # no graphics stage bound: nothing planned
    assert cb.peek(InstrumentedShaders) is None
    shaders_bound(cb, 1, [VERTEX], print)
    shaders = cb.peek(InstrumentedShaders)
    assert shaders.pipeline is pipeline
    assert shaders.plan.layout == 0x1A and shaders.plan.bindings == ((2, 0),)
    assert [s.blocks for s in shaders.plan.stages] == [3]
    cb.reset()
    assert cb.peek(InstrumentedShaders) is None


def test_shaders_bound_does_nothing_on_a_device_without_instrumentation():
    cb = command_buffer(NS(instrumentation=None, res=Resources()))
    cb.shader_objects[VERTEX] = instrumented(3)
    shaders_bound(cb, 1, [VERTEX], print)
    assert cb.slots == {}


# ---- instrumentation/objects.py: a stage's pipe table, made once -------------------------------
def test_a_stages_pipe_table_is_made_once_and_not_part_of_the_stage():
    stage = InstrumentedStage("fragment", FRAGMENT, 0, 2, [(1.0, 2.0, 3.0, 4.0, 5.0, 6.0), (0.0,) * 6])
    table = stage.pipe_table
    assert table.shape == (2, len(METRICS) - 1)
    assert stage.pipe_table is table
    # METRICS order is fma, cvt, sfu, ls, tex, var; the ops tuples are fma, cvt, sfu, ls, var, tex
    assert [float(x) for x in table[0]] == [1.0, 2.0, 3.0, 4.0, 6.0, 5.0]
    assert stage == InstrumentedStage("fragment", FRAGMENT, 0, 2, [(1.0, 2.0, 3.0, 4.0, 5.0, 6.0), (0.0,) * 6])

"""The driver's shadow recording (icd/recording.py Shadow, and register's hooks): no Vulkan, no shim.

Command buffers are objects.CommandBuffer with a stand-in device holding a vkapi Resources;
Vulkan structures are SimpleNamespaces (or, where a hook reads memory through cffi, a tiny FFI
declaring only the struct it reads). Each case states by hand the ops the driver must append
(recording.py's docstring lists them) for what the application recorded.
"""
from __future__ import annotations

import functools
import logging
import operator
from types import SimpleNamespace as NS

import cffi
import pytest
from hypothesis import given, settings, strategies as st

from tessera.icd import timing
from tessera.icd.objects import CommandBuffer
from tessera.icd.recording import Draw, Shadow, Work, dependency_masks, multi, register, stage_classes
from tessera.icd.scheduler import ALL
from tessera.vkapi import intercepts
from tessera.vkapi.accel import describe_build, describe_copy
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.ops import PASS_END, PASS_SUSPEND, Barrier, Execute, PassBegin, PassEnd, Recording
from tessera.vkapi.render_passes import PassInfo
from tessera.vkapi.resources import Attachment, Framebuffer, Image, Pipeline, RenderPass, Resources
from tessera.vkapi.transfers import TRANSFERS
from tessera.vkapi.vkconst import vk

RGBA8 = vk.VK_FORMAT_R8G8B8A8_UNORM          # 4 bytes a texel
LOAD, STORE = vk.VK_ATTACHMENT_LOAD_OP_LOAD, vk.VK_ATTACHMENT_STORE_OP_STORE
DONT_LOAD, DONT_STORE = vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE, vk.VK_ATTACHMENT_STORE_OP_DONT_CARE
COMPUTE, GRAPHICS = vk.VK_PIPELINE_BIND_POINT_COMPUTE, vk.VK_PIPELINE_BIND_POINT_GRAPHICS
RAY_TRACING = vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR
BOTTOM = vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT


def command_buffer(res: Resources | None = None, address: int = 0xC0) -> CommandBuffer:
    return CommandBuffer(handle=address, device=NS(res=res if res is not None else Resources()), pool=1,
                         level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, address=address)


def dynamic(**kw) -> PassInfo:
    return PassInfo("vkCmdBeginRendering", 0, 16, 16, 1, 1, [], 0, 0, dynamic=True, **kw)


# ---- render passes ---------------------------------------------------------------------------
def render_pass_resources(waits_before: bool, waits_after: bool) -> Resources:
    res = Resources()
    res.render_passes[0x10] = RenderPass((Attachment(RGBA8, 1, LOAD, STORE, DONT_LOAD, DONT_STORE),), 2, (),
                                         waits_before=waits_before, waits_after=waits_after)
    res.framebuffers[0x20] = Framebuffer(64, 32, 2, ())
    return res


def begin_info(render_pass: int = 0x10, framebuffer: int = 0x20, width: int = 64, height: int = 32):
    return NS(renderPass=render_pass, framebuffer=framebuffer, renderArea=NS(extent=NS(width=width, height=height)))


@pytest.mark.parametrize("before, after", [(True, True), (True, False), (False, True), (False, False)])
def test_external_dependencies_of_a_render_pass_are_barriers_around_it(before, after):
    cb = command_buffer(render_pass_resources(before, after))
    shadow = Shadow()
    shadow.begin_render_pass(cb, begin_info(), "vkCmdBeginRenderPass2")
    shadow.draw(cb, 3)
    shadow.end_render_pass(cb)
    ops = [type(op) for op in cb.ops]
    assert ops == [Barrier] * before + [PassBegin, Draw, PassEnd] + [Barrier] * after
    assert all(op.scope is None for op in cb.ops if type(op) is Barrier)        # full barriers
    assert next(op for op in cb.ops if type(op) is PassEnd).suspending is False
    info = next(op for op in cb.ops if type(op) is PassBegin).info
    # 64x32 area, 2 framebuffer layers, one RGBA8 attachment loaded and stored: 64*32*2*4 bytes each way
    assert (info.command, info.handle, info.width, info.height, info.layers, info.subpasses) == (
        "vkCmdBeginRenderPass2", 0x10, 64, 32, 2, 2)
    assert (info.load_bytes, info.store_bytes, info.dynamic) == (16384, 16384, False)
    assert (info.waits_before, info.waits_after) == (before, after)


def test_a_render_pass_end_looks_at_the_last_begin_only():
    res = render_pass_resources(False, True)
    res.render_passes[0x11] = RenderPass((), 1, ())          # no external dependency
    cb = command_buffer(res)
    shadow = Shadow()
    shadow.begin_render_pass(cb, begin_info(), "vkCmdBeginRenderPass")
    shadow.end_render_pass(cb)
    shadow.dispatch(cb, "vkCmdDispatch", (1, 1, 1))
    shadow.begin_render_pass(cb, begin_info(0x11), "vkCmdBeginRenderPass")
    shadow.end_render_pass(cb)
    assert [type(op) for op in cb.ops] == [PassBegin, PassEnd, Barrier, Work, PassBegin, PassEnd]


def test_an_unknown_render_pass_and_framebuffer_give_one_subpass_one_layer_and_no_barriers():
    cb = command_buffer()
    Shadow().begin_render_pass(cb, begin_info(0x99, 0x98, 8, 4), "vkCmdBeginRenderPass")
    [op] = cb.ops
    assert type(op) is PassBegin
    info = op.info
    assert (info.width, info.height, info.layers, info.subpasses, info.attachments) == (8, 4, 1, 1, [])
    assert (info.load_bytes, info.store_bytes, info.waits_before) == (0, 0, False)


def test_the_resources_come_from_the_collaborator_given():
    theirs = render_pass_resources(True, False)
    cb = command_buffer()                                     # its device's resources know no render pass
    Shadow(resources=lambda c: theirs).begin_render_pass(cb, begin_info(), "vkCmdBeginRenderPass")
    assert [type(op) for op in cb.ops] == [Barrier, PassBegin]


def test_dynamic_rendering_suspends_and_resumes():
    cb = command_buffer()
    shadow = Shadow()
    first, second = dynamic(suspending=True), dynamic(resuming=True)
    shadow.begin_rendering(cb, first)
    shadow.draw(cb, 3)
    shadow.end_rendering(cb)
    shadow.begin_rendering(cb, second)
    shadow.end_rendering(cb)
    assert [op if type(op) is not Draw else Draw for op in cb.ops] == [
        PassBegin(first, False), Draw, PASS_SUSPEND, PassBegin(second, True), PASS_END]


def test_an_end_of_rendering_without_a_begin_in_the_buffer_ends_without_suspending():
    cb = command_buffer()                                     # the pass began in an earlier command buffer
    Shadow().end_rendering(cb)
    assert cb.ops == [PASS_END]


def test_dynamic_rendering_takes_no_barriers():
    cb = command_buffer()
    Shadow().begin_rendering(cb, dynamic(waits_before=True))   # only render pass objects have dependencies
    assert [type(op) for op in cb.ops] == [PassBegin]


# ---- draws ------------------------------------------------------------------------------------
def test_draws_one_by_one_take_the_bound_pipelines_costs_and_a_third_of_their_vertices():
    res = Resources()
    res.pipelines[0x50] = Pipeline(GRAPHICS, None, {"vertex": 2.5, "fragment": 7.0})
    cb = command_buffer(res)
    shadow = Shadow()
    shadow.draw(cb, 10)                                        # no pipeline bound yet
    shadow.bind_pipeline(cb, GRAPHICS, 0x50)
    shadow.draw(cb, 36)
    assert cb.ops == [Draw(10, 3, False, None, None), Draw(36, 12, False, 2.5, 7.0)]


def test_draws_folded_in_c_are_one_op_with_their_count_and_the_sums_as_recorded():
    res = Resources()
    res.pipelines[0x50] = Pipeline(GRAPHICS, None, {"vertex": 2.5})
    cb = command_buffer(res)
    shadow = Shadow()
    shadow.bind_pipeline(cb, GRAPHICS, 0x50)
    shadow.draws(cb, 3, 40, 11)             # C summed each draw's primitives: not 40 // 3
    assert cb.ops == [Draw(40, 11, False, 2.5, None, count=3)]


def test_estimated_draws():
    cb = command_buffer()
    shadow = Shadow()
    shadow.estimated_draws(cb, 2)                     # vkCmdDrawIndirect with drawCount 2
    shadow.estimated_draws(cb, 0)                     # drawCount 0: nothing drawn
    shadow.estimated_draws(cb, 1, 3)                  # vkCmdDrawIndirectByteCountEXT, 3 instances
    v = timing.INDIRECT_DRAW_VERTICES
    assert v == 3072
    assert cb.ops == [Draw(3072, 1024, True, None, None)] * 2 + [Draw(9216, 3072, True, None, None)]


def test_multi_draws_are_one_draw_per_element_times_the_instances():
    cb = command_buffer()
    Shadow().multi_draw(cb, [3, 7], 2)
    assert cb.ops == [Draw(6, 2, False, None, None), Draw(14, 4, False, None, None)]


MULTI_CDEF = """
typedef struct { uint32_t firstVertex; uint32_t vertexCount; } VkMultiDrawInfoEXT;
typedef struct { uint32_t firstIndex; uint32_t indexCount; int32_t vertexOffset; } VkMultiDrawIndexedInfoEXT;
"""


@pytest.fixture(scope="module")
def ffi():
    f = cffi.FFI()
    f.cdef(MULTI_CDEF)
    return f


def test_multi_draw_counts_are_read_with_the_applications_stride(ffi):
    # 16-byte stride over 8-byte VkMultiDrawInfoEXT: elements at 0, 16, 32 (padding between them)
    raw = ffi.new("uint32_t[12]", [0, 3, 99, 99, 0, 6, 99, 99, 0, 9, 99, 99])
    assert multi(ffi, raw, 3, 16, "VkMultiDrawInfoEXT *", "vertexCount") == [3, 6, 9]
    indexed = ffi.new("VkMultiDrawIndexedInfoEXT[2]", [(0, 30, 0), (5, 12, -1)])
    assert multi(ffi, indexed, 2, 12, "VkMultiDrawIndexedInfoEXT *", "indexCount") == [30, 12]


# ---- the registered hooks, called with stand-ins ----------------------------------------------
class Secondaries:
    def __init__(self, *buffers: CommandBuffer) -> None:
        self.by_handle = {b.handle: b for b in buffers}

    def get(self, handle, kind):
        obj = self.by_handle[handle]
        assert isinstance(obj, kind)
        return obj


def registered(ffi, objects=None) -> HookSet:
    hooks = HookSet(HookErrors(logging.getLogger("test")))
    register(NS(ffi=ffi, hooks=hooks, objects=objects, profile=NS(key="g720")))
    return hooks


def test_register_hooks_exactly_the_commands_the_intercept_table_gives_this_module(ffi):
    hooks = registered(ffi)
    ours = {name for name, modules in hooks.modules().items() if "tessera.icd.recording" in modules}
    named = {name for name, row in intercepts.INTERCEPTS.items()
             if intercepts.ICD in row and "icd.recording" in row[intercepts.ICD].modules}
    assert ours == named
    # every hook of the module is in its row (HookSet.install checks the same at load)
    owners = intercepts.owners(intercepts.ICD)
    assert all(m in owners[name] for name, modules in hooks.modules().items() for m in modules)
    # the records made in C that this module applies: every command of its rows recorded in C
    recorded = {name for name in named if intercepts.INTERCEPTS[name][intercepts.ICD].c is not None}
    assert set(hooks.appliers) == recorded
    assert {"vkCmdDraw", "vkCmdDispatchBase", "vkCmdPipelineBarrier2", "vkCmdCopyImage2"} <= recorded


def test_hooks_read_their_arguments(ffi):
    hooks = registered(ffi)
    before = {name: pair[0] for name, pair in hooks.observers.items()}
    cb = command_buffer()
    before["vkCmdDraw"](cb, cb.handle, 4, 3, 0, 0)                      # 12 vertices
    before["vkCmdDrawIndexed"](cb, cb.handle, 6, 2, 0, 0, 0)            # 12 indices
    before["vkCmdDrawIndirect"](cb, cb.handle, 0x1, 0, 2, 16)           # 2 draws, estimated
    before["vkCmdDrawIndexedIndirectCount"](cb, cb.handle, 0x1, 0, 0x2, 0, 50, 20)   # one estimated draw
    before["vkCmdDrawMeshTasksEXT"](cb, cb.handle, 4, 4, 1)
    raw = ffi.new("VkMultiDrawInfoEXT[2]", [(0, 3), (0, 9)])
    before["vkCmdDrawMultiEXT"](cb, cb.handle, 2, raw, 2, 0, 8)
    before["vkCmdDrawIndirectByteCountEXT"](cb, cb.handle, 2, 0, 0x3, 0, 0, 16)
    est = Draw(3072, 1024, True, None, None)
    assert cb.ops == [Draw(12, 4, False, None, None)] * 2 + [est] * 4 + [
        Draw(6, 2, False, None, None), Draw(18, 6, False, None, None), Draw(6144, 2048, True, None, None)]
    applied = command_buffer()
    hooks.appliers["vkCmdDraw"](applied, applied.handle, 5, 100, 30)
    assert applied.ops == [Draw(100, 30, False, None, None, count=5)]


def test_dispatch_hooks_and_appliers_read_groups_and_base(ffi):
    hooks = registered(ffi)
    res = Resources()
    res.pipelines[0x70] = Pipeline(COMPUTE, (4, 2, 1))
    cb = command_buffer(res)
    hooks.appliers["vkCmdBindPipeline"](cb, cb.handle, COMPUTE, 0x70)
    hooks.appliers["vkCmdDispatchBase"](cb, cb.handle, 1, 2, 3, 5, 1, 1)
    hooks.observers["vkCmdDispatchIndirect"][0](cb, cb.handle, 0x1, 0)
    [base, indirect] = cb.ops
    assert base.info == {"groups": (5, 1, 1), "group_size": (4, 2, 1), "base_group": (1, 2, 3)}
    assert (base.invocations, base.estimated) == (40, False)
    assert (indirect.invocations, indirect.estimated) == (64 * 8, True)


def test_sync2_hooks_take_every_barrier_of_every_dependency_info(ffi):
    hooks = registered(ffi)
    frag, xfer = vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT
    vert, comp = vk.VK_PIPELINE_STAGE_VERTEX_SHADER_BIT, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    one = dependency_info(memory=[(xfer, frag)])
    two = dependency_info(images=[(comp, vert)])
    cb = command_buffer()
    hooks.observers["vkCmdWaitEvents2"][0](cb, cb.handle, 2, None, [one, two])
    hooks.observers["vkCmdPipelineBarrier2"][0](cb, cb.handle, dependency_info())     # no barriers: no op
    hooks.appliers["vkCmdWaitEvents2"](cb, cb.handle, 2, xfer | comp, frag | vert)
    scope = (frozenset({"transfer", "compute"}), frozenset({"fragment", "vertex"}))
    assert cb.ops == [Barrier(scope), Barrier(scope)]


def test_execute_looks_the_secondaries_up_by_handle(ffi):
    a, b = command_buffer(address=0xA1), command_buffer(address=0xB2)
    hooks = registered(ffi, Secondaries(a, b))
    cb = command_buffer()
    hooks.observers["vkCmdExecuteCommands"][0](cb, cb.handle, 2, [0xB2, 0xA1])
    assert cb.ops == [Execute([Recording(0xB2, b.ops), Recording(0xA1, a.ops)])]


def test_bind_shaders_hook_reads_a_null_pshaders_as_unbinding(ffi):
    res = Resources()
    cs = Pipeline(COMPUTE, (8, 8, 1), {"compute": 3.0})
    res.shader_objects[0x5] = (vk.VK_SHADER_STAGE_COMPUTE_BIT, cs)
    hooks = registered(ffi)
    cb = command_buffer(res)
    bind = hooks.observers["vkCmdBindShadersEXT"][0]
    bind(cb, cb.handle, 1, [vk.VK_SHADER_STAGE_COMPUTE_BIT], [0x5])
    assert cb.compute_pipeline is cs
    bind(cb, cb.handle, 1, [vk.VK_SHADER_STAGE_COMPUTE_BIT], ffi.NULL)
    assert cb.compute_pipeline is None


# ---- pipelines and shader objects -------------------------------------------------------------
def test_bind_pipeline_by_bind_point():
    res = Resources()
    g, c, r = Pipeline(GRAPHICS), Pipeline(COMPUTE, (1, 1, 1)), Pipeline(RAY_TRACING)
    res.pipelines.update({1: g, 2: c, 3: r})
    cb = command_buffer(res)
    shadow = Shadow()
    shadow.bind_pipeline(cb, GRAPHICS, 1)
    shadow.bind_pipeline(cb, COMPUTE, 2)
    shadow.bind_pipeline(cb, RAY_TRACING, 3)
    assert (cb.graphics_pipeline, cb.compute_pipeline, cb.ray_tracing_pipeline) == (g, c, r)
    shadow.bind_pipeline(cb, COMPUTE, 99)                  # not seen created: nothing known bound
    assert (cb.graphics_pipeline, cb.compute_pipeline) == (g, None)
    assert cb.ops == []


def test_shader_objects_bind_per_stage_and_graphics_stages_merge_their_costs():
    res = Resources()
    cs = Pipeline(COMPUTE, (8, 8, 1), {"compute": 3.0})
    res.shader_objects.update({
        0x5: (vk.VK_SHADER_STAGE_COMPUTE_BIT, cs),
        0x6: (vk.VK_SHADER_STAGE_VERTEX_BIT, Pipeline(GRAPHICS, None, {"vertex": 1.5})),
        0x7: (vk.VK_SHADER_STAGE_FRAGMENT_BIT, Pipeline(GRAPHICS, None, {"fragment": 4.0}))})
    cb = command_buffer(res)
    shadow = Shadow()
    shadow.bind_shaders(cb, [vk.VK_SHADER_STAGE_VERTEX_BIT, vk.VK_SHADER_STAGE_FRAGMENT_BIT], [0x6, 0x7])
    assert cb.compute_pipeline is None
    assert cb.graphics_pipeline.shader_cycles == {"vertex": 1.5, "fragment": 4.0}
    shadow.bind_shaders(cb, [vk.VK_SHADER_STAGE_COMPUTE_BIT], [0x5])
    assert cb.compute_pipeline is cs
    assert cb.graphics_pipeline.shader_cycles == {"vertex": 1.5, "fragment": 4.0}   # untouched
    shadow.draw(cb, 3)
    assert cb.ops == [Draw(3, 1, False, 1.5, 4.0)]
    shadow.bind_shaders(cb, [vk.VK_SHADER_STAGE_FRAGMENT_BIT], None)          # unbinds the fragment stage
    assert cb.graphics_pipeline.shader_cycles == {"vertex": 1.5}
    assert cb.compute_pipeline is cs


# ---- dispatches -----------------------------------------------------------------------------
def compute_buffer(group_size=(8, 4, 2), cycles: dict | None = None) -> CommandBuffer:
    res = Resources()
    res.pipelines[0x70] = Pipeline(COMPUTE, group_size, cycles if cycles is not None else {"compute": 40.0})
    cb = command_buffer(res)
    Shadow().bind_pipeline(cb, COMPUTE, 0x70)
    return cb


def test_a_dispatch_counts_invocations_from_its_groups_and_the_pipelines_group_size():
    cb = compute_buffer()
    Shadow().dispatch(cb, "vkCmdDispatch", (3, 2, 1))
    assert cb.ops == [Work("dispatch", "compute", "vkCmdDispatch",
                                    {"groups": (3, 2, 1), "group_size": (8, 4, 2)},
                                    invocations=3 * 2 * 1 * 64, cycles=40.0)]


def test_a_dispatch_base_names_its_base_group_unless_it_is_zero():
    cb = compute_buffer()
    shadow = Shadow()
    shadow.dispatch(cb, "vkCmdDispatchBase", (2, 2, 2), (1, 0, 2))
    shadow.dispatch(cb, "vkCmdDispatchBase", (2, 2, 2), (0, 0, 0))
    first, second = cb.ops
    assert first.info == {"groups": (2, 2, 2), "group_size": (8, 4, 2), "base_group": (1, 0, 2)}
    assert second.info == {"groups": (2, 2, 2), "group_size": (8, 4, 2)}
    assert first.invocations == second.invocations == 8 * 64        # the base does not change the size


def test_an_indirect_dispatch_is_estimated():
    cb = compute_buffer(group_size=(16, 1, 1))
    Shadow().dispatch(cb, "vkCmdDispatchIndirect", None)
    [w] = cb.ops
    assert timing.INDIRECT_DISPATCH_GROUPS == 64
    assert (w.info, w.invocations, w.estimated, w.cycles) == (
        {"groups": (-1, -1, -1), "group_size": (16, 1, 1)}, 64 * 16, True, 40.0)


def test_a_dispatch_without_a_known_group_size_counts_one_invocation_a_group():
    shadow = Shadow()
    unknown_size = compute_buffer(group_size=None, cycles={})
    shadow.dispatch(unknown_size, "vkCmdDispatch", (4, 5, 6))
    nothing_bound = command_buffer()
    shadow.dispatch(nothing_bound, "vkCmdDispatch", (4, 5, 6))
    for cb in (unknown_size, nothing_bound):
        [w] = cb.ops
        assert (w.info["group_size"], w.invocations, w.cycles) == ((-1, -1, -1), 120, None)


# ---- trace rays -----------------------------------------------------------------------------
def test_trace_rays_size_and_ray_cost_of_the_bound_pipeline():
    res = Resources()
    res.pipelines[0x80] = Pipeline(RAY_TRACING, None, {"raygen": 20.0, "closest_hit": 30.0, "miss": 10.0})
    cb = command_buffer(res)
    shadow = Shadow()
    shadow.trace_rays(cb, 8, 4, 2)                 # no ray-tracing pipeline bound
    shadow.bind_pipeline(cb, RAY_TRACING, 0x80)
    shadow.trace_rays(cb, 8, 4, 2)
    shadow.trace_rays_indirect(cb)
    unbound, bound, indirect = cb.ops
    assert unbound == Work("trace_rays", "trace_rays", "vkCmdTraceRaysKHR", {"width": 8, "height": 4, "depth": 2},
                           invocations=64, cycles=None)
    # raygen 20 + traversal 100 + half the rays hit (30) + half miss (10)
    assert bound.cycles == pytest.approx(20.0 + 100.0 + 0.5 * 30.0 + 0.5 * 10.0)
    assert indirect == Work("trace_rays", "trace_rays", "vkCmdTraceRaysIndirectKHR", {"width": -1},
                            invocations=64 * 64, cycles=bound.cycles, estimated=True)


# ---- acceleration structures ------------------------------------------------------------------
def test_acceleration_structure_build_and_copy_work():
    res = Resources()
    res.accels[0xA0] = (4096, 1)
    cb = command_buffer(res)
    shadow = Shadow()
    triangles, instances = NS(geometryType=0), NS(geometryType=2)
    blas = NS(type=1, mode=0, flags=0x8, geometryCount=2, pGeometries=[triangles, triangles])
    tlas = NS(type=0, mode=0, flags=0x4, geometryCount=1, pGeometries=[instances])
    ranges = [[NS(primitiveCount=10), NS(primitiveCount=5)], [NS(primitiveCount=3)]]
    shadow.acceleration_structure(cb, "vkCmdBuildAccelerationStructuresKHR", describe_build(res, 2, [blas, tlas], ranges))
    shadow.acceleration_structure(cb, "vkCmdCopyAccelerationStructureKHR", describe_copy(res, NS(src=0xA0, mode=1)))
    build, copy = cb.ops
    assert build == Work("acceleration_structure_build", "acceleration structure 'fast build' build",
                         "vkCmdBuildAccelerationStructuresKHR", {"primitives": 15, "instances": 3, "structures": 2},
                         primitives=15, instances=3)
    assert copy == Work("acceleration_structure_copy", "acceleration structure copy to memory",
                        "vkCmdCopyAccelerationStructureKHR", {"copy_mode": "compact", "bytes": 4096}, nbytes=4096)


# ---- transfers --------------------------------------------------------------------------------
def transfer(res: Resources, name: str, *args) -> Work:
    cb = command_buffer(res)
    Shadow().transfer(cb, name, TRANSFERS[name](res, *args))
    [w] = cb.ops
    assert type(w) is Work
    return w


def test_buffer_transfers():
    res = Resources()
    res.buffers[0xB0] = 1000
    assert transfer(res, "vkCmdCopyBuffer", 0xB0, 0xB1, 2, [NS(size=100), NS(size=28)]) == Work(
        "transfer", "copy buffer", "vkCmdCopyBuffer", {"bytes": 128, "regions": 2}, nbytes=128)
    # VK_WHOLE_SIZE from offset 10 of a 1000-byte buffer: 990 rounded down to 4
    assert transfer(res, "vkCmdFillBuffer", 0xB0, 10, vk.VK_WHOLE_SIZE, 0) == Work(
        "transfer", "fill buffer", "vkCmdFillBuffer", {"bytes": 988}, nbytes=988)
    assert transfer(res, "vkCmdUpdateBuffer", 0xB0, 0, 64, None).nbytes == 64
    info = NS(regionCount=1, pRegions=[NS(size=256)])
    assert transfer(res, "vkCmdCopyBuffer2", info) == Work(
        "transfer", "copy buffer", "vkCmdCopyBuffer2", {"bytes": 256, "regions": 1}, nbytes=256)


def test_image_transfers():
    res = Resources()
    res.images[0xE0] = Image(RGBA8, 32, 16, 1, 2, 3, 1)       # 32x16, 2 layers, 3 mips, RGBA8
    region = NS(imageExtent=NS(width=8, height=4, depth=1), imageSubresource=NS(layerCount=2))
    assert transfer(res, "vkCmdCopyBufferToImage", 0xB0, 0xE0, 0, 1, [region]) == Work(
        "transfer", "copy buffer to image", "vkCmdCopyBufferToImage", {"bytes": 256, "pixels": 64, "regions": 1},
        nbytes=256)
    everything = NS(baseMipLevel=0, levelCount=vk.VK_REMAINING_MIP_LEVELS, baseArrayLayer=0,
                    layerCount=vk.VK_REMAINING_ARRAY_LAYERS)
    # mips 32x16, 16x8, 8x4 over 2 layers: (512 + 128 + 32) * 2 = 1344 pixels
    assert transfer(res, "vkCmdClearColorImage", 0xE0, 0, None, 1, [everything]) == Work(
        "transfer", "clear image", "vkCmdClearColorImage", {"bytes": 5376, "pixels": 1344, "regions": 1},
        nbytes=5376)
    copy2 = NS(srcImage=0xE0, regionCount=1,
               pRegions=[NS(extent=NS(width=4, height=4, depth=1), srcSubresource=NS(layerCount=1))])
    assert transfer(res, "vkCmdCopyImage2", copy2).info == {"bytes": 64, "pixels": 16, "regions": 1}
    unknown = NS(srcImage=0xEE, regionCount=1, pRegions=copy2.pRegions)
    assert transfer(res, "vkCmdCopyImage2", unknown).info == {"bytes": 0, "pixels": 16, "regions": 1}


# ---- barriers ---------------------------------------------------------------------------------
def dependency_info(memory=(), buffers=(), images=()):
    barriers = lambda masks: [NS(srcStageMask=s, dstStageMask=d) for s, d in masks]  # noqa: E731
    return NS(memoryBarrierCount=len(memory), pMemoryBarriers=barriers(memory),
              bufferMemoryBarrierCount=len(buffers), pBufferMemoryBarriers=barriers(buffers),
              imageMemoryBarrierCount=len(images), pImageMemoryBarriers=barriers(images))


def test_dependency_masks_read_memory_buffer_and_image_barriers_in_order():
    info = dependency_info(memory=[(1, 2)], buffers=[(3, 4), (5, 6)], images=[(7, 8)])
    assert dependency_masks(info) == [(1, 2), (3, 4), (5, 6), (7, 8)]


def test_stage_classes_by_hand():
    assert stage_classes(vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, "src") == {"fragment"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_ALL_GRAPHICS_BIT, "dst") == {"vertex", "fragment"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT | vk.VK_PIPELINE_STAGE_HOST_BIT, "dst") == set()
    assert stage_classes(BOTTOM | vk.VK_PIPELINE_STAGE_VERTEX_SHADER_BIT, "dst") == set()
    assert stage_classes(BOTTOM, "src") == ALL
    assert stage_classes(vk.VK_PIPELINE_STAGE_2_INDEX_INPUT_BIT, "dst") == {"vertex"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_2_COPY_BIT | vk.VK_PIPELINE_STAGE_2_RESOLVE_BIT, "dst") == {"transfer"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_2_BLIT_BIT, "dst") == {"transfer"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_2_CLEAR_BIT, "src") == {"transfer"}
    assert stage_classes(vk.VK_PIPELINE_STAGE_RAY_TRACING_SHADER_BIT_KHR, "dst") == {"compute"}
    assert stage_classes(1 << 50, "dst") == ALL                     # unknown: every class


def test_a_barrier_is_the_union_of_its_barriers_classes():
    cb = command_buffer()
    shadow = Shadow()
    shadow.barrier(cb, [(vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT),
                        (vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_VERTEX_SHADER_BIT | BOTTOM)])
    shadow.barrier(cb, [])                                           # no barriers: no op
    shadow.reduced_barrier(cb, 0, 0, 0)
    assert cb.ops == [Barrier((frozenset({"fragment", "transfer"}), frozenset({"fragment"})))]


def reduce_in_c(masks: list[tuple[int, int]]) -> tuple[int, int, int]:
    """What vkapi/recorder.py's dependency record holds: the barriers, OR of the sources, OR of the
    destinations that hold no bottom-of-pipe."""
    return (len(masks), functools.reduce(operator.or_, (s for s, _ in masks), 0),
            functools.reduce(operator.or_, (d for _, d in masks if not d & BOTTOM), 0))


def test_the_reduced_record_gives_the_barriers_classes_by_hand():
    masks = [(vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT),
             (vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_VERTEX_SHADER_BIT | BOTTOM),
             (BOTTOM, vk.VK_PIPELINE_STAGE_HOST_BIT)]
    assert reduce_in_c(masks) == (3, 0x400 | 0x1000 | BOTTOM, 0x80 | 0x4000)
    cb = command_buffer()
    Shadow().reduced_barrier(cb, *reduce_in_c(masks))
    assert cb.ops == [Barrier((ALL, frozenset({"fragment"})))]


# Every stage bit of VkPipelineStageFlags2 the table knows, bottom-of-pipe, ALL_COMMANDS and bits it does not know.
STAGE_BITS = [1 << i for i in range(24)] + [1 << i for i in range(32, 40)] + [1 << 45, 1 << 50]
masks_st = st.lists(st.sampled_from(STAGE_BITS), max_size=4).map(lambda bits: functools.reduce(operator.or_, bits, 0))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(masks_st, masks_st), max_size=6))
def test_the_reduced_sync2_record_gives_the_classes_of_the_union(masks):
    shadow = Shadow()
    one_by_one, reduced = command_buffer(), command_buffer()
    shadow.barrier(one_by_one, masks)
    shadow.reduced_barrier(reduced, *reduce_in_c(masks))
    assert reduced.ops == one_by_one.ops


# ---- secondaries ------------------------------------------------------------------------------
def test_execute_holds_the_secondaries_op_lists_and_their_need_of_completion():
    a, b = command_buffer(address=0xA1), command_buffer(address=0xB2)
    Shadow().draw(a, 3)
    b.needs_completion = True
    cb = command_buffer()
    shadow = Shadow()
    shadow.execute(cb, [a])
    assert cb.needs_completion is False
    shadow.execute(cb, [a, b])
    assert cb.needs_completion is True
    one, two = cb.ops
    assert (type(one), type(two)) == (Execute, Execute)
    first, second = one.secondaries, two.secondaries
    assert [s.address for s in second] == [0xA1, 0xB2]
    assert first[0].ops is a.ops and second[1].ops is b.ops       # the lists themselves: expanded at submit
    assert first[0].ops == [Draw(3, 1, False, None, None)]


"""Shadow recording: what each command buffer will execute, in command order.

Each recorded command appends one op to `CommandBuffer.ops`:

    ("begin", name) / ("end", None) / ("insert", name)   debug labels (labels.py)
    ("pass_begin", PassInfo)   render pass or dynamic rendering begins (or resumes)
    ("draw", Draw)
    ("pass_end", suspending)   ends (or suspends) the current render pass
    ("work", Work)             a dispatch, trace rays, acceleration-structure build or copy, or transfer
    ("barrier", scope)         barrier / wait events: (source classes, destination classes), or None
                               for a full barrier (external subpass dependency)
    ("execute", [(address, ops), ...])  secondaries' recordings, expanded at submit

Sizes that depend only on the recording are computed here; what depends on
submission (split render passes, label stacks) is resolved in submit.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from tessera.vkapi import accel, pipelines
from tessera.vkapi.commands import ACCELERATION_STRUCTURES
from tessera.vkapi.render_passes import describe_begin, describe_rendering
from tessera.vkapi.transfers import RECORDED_IN_C as RECORDED_TRANSFERS, TRANSFERS
from tessera.vkapi.vkconst import vk

from . import shader_costs, timing
from .driver import Driver
from .objects import CommandBuffer
from .scheduler import ALL


@dataclass
class Draw:
    """`count` consecutive draws with one pipeline (draws recorded in C fold into one record);
    vertices and primitives are their totals."""
    vertices: int
    primitives: int
    estimated: bool              # indirect: sizes not readable at record time
    vertex_cycles: float | None
    fragment_cycles: float | None
    count: int = 1
    # Run by the timeline's worker once the GPU has executed the draw, before timing it; may update the
    # sizes and cycles in place (set CommandBuffer.needs_completion with it). See timeline.py.
    at_completion: Callable[[], None] | None = None


@dataclass
class Work:
    kind: str                    # dispatch, trace_rays, transfer
    stage: str                   # stage name in the trace
    command: str
    info: dict = field(default_factory=dict)   # sizes for the trace's extra_data
    invocations: int = 0
    cycles: float | None = None
    nbytes: int = 0
    estimated: bool = False
    primitives: int = 0          # acceleration-structure builds: triangles + AABBs
    instances: int = 0           # acceleration-structure builds: instances
    at_completion: Callable[[], None] | None = None   # as Draw.at_completion


# Pipeline stages (VkPipelineStageFlags2 bits; the first 17 equal VkPipelineStageFlags) by work class.
_NO_WORK = 0x1 | 0x2 | 0x4000                     # top of pipe, draw indirect, host
_VERTEX = 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | (0x7 << 36)   # vertex input .. geometry; index/attribute/pre-raster
_FRAGMENT = 0x80 | 0x100 | 0x200 | 0x400         # fragment shader, depth tests, color attachment output
_COMPUTE = 0x800 | 0x200000                       # compute shader, ray tracing
_TRANSFER = 0x1000 | (0xF << 32)                  # transfer; copy, resolve, blit, clear
_ALL_GRAPHICS = 0x8000


def stage_classes(mask: int, role: str) -> frozenset[str]:
    """The work classes a barrier's source or destination stage mask covers (scheduler.CLASSES).

    Bottom-of-pipe is every class as a source and none as a destination (spec 7.6.2);
    bits this table does not know count as every class, to stay safe.
    """
    if mask & 0x2000:                    # BOTTOM_OF_PIPE
        return ALL if role == "src" else frozenset()
    classes = set()
    for bits, cls in ((_VERTEX, "vertex"), (_FRAGMENT, "fragment"), (_COMPUTE, "compute"), (_TRANSFER, "transfer")):
        if mask & bits:
            classes.add(cls)
    if mask & _ALL_GRAPHICS:
        classes |= {"vertex", "fragment"}
    if mask & ~(_NO_WORK | _VERTEX | _FRAGMENT | _COMPUTE | _TRANSFER | _ALL_GRAPHICS):
        return ALL                       # ALL_COMMANDS and anything unknown
    return frozenset(classes)


def _primitives(vertices: int) -> int:
    return vertices // 3   # triangle lists; strips and fans shade about as many vertices


def register(drv: Driver) -> None:
    ffi, hooks = drv.ffi, drv.hooks
    res = lambda cb: cb.device.res  # noqa: E731

    def add(cb: CommandBuffer, op: str, value=None) -> None:
        cb.ops.append((op, value))

    # ---- render passes -------------------------------------------------
    # Recorded in C (intercepts.PASS_BEGIN, RENDERING_BEGIN, PASS_END) unless Python must act at record
    # time: the hooks below also apply those records, with the same arguments.
    def begin_render_pass(cb, begin, command: str):
        info = describe_begin(res(cb), begin, command)
        if info.waits_before:
            add(cb, "barrier")   # spec 8.1: a dependency from VK_SUBPASS_EXTERNAL orders earlier work first
        add(cb, "pass_begin", info)

    def end_render_pass(cb) -> None:
        begin = next((v for op, v in reversed(cb.ops) if op == "pass_begin"), None)
        add(cb, "pass_end", False)
        if begin is not None and begin.waits_after:
            add(cb, "barrier")

    @hooks.applies("vkCmdBeginRenderPass")
    @hooks.before("vkCmdBeginRenderPass")
    def cmd_begin_render_pass(cb, commandBuffer, pRenderPassBegin, contents):
        begin_render_pass(cb, pRenderPassBegin, "vkCmdBeginRenderPass")

    @hooks.applies("vkCmdBeginRenderPass2")
    @hooks.before("vkCmdBeginRenderPass2")
    def cmd_begin_render_pass2(cb, commandBuffer, pRenderPassBegin, pSubpassBeginInfo):
        begin_render_pass(cb, pRenderPassBegin, "vkCmdBeginRenderPass2")

    @hooks.applies("vkCmdEndRenderPass")
    @hooks.before("vkCmdEndRenderPass")
    def cmd_end_render_pass(cb, commandBuffer):
        end_render_pass(cb)

    @hooks.applies("vkCmdEndRenderPass2")
    @hooks.before("vkCmdEndRenderPass2")
    def cmd_end_render_pass2(cb, commandBuffer, pSubpassEndInfo):
        end_render_pass(cb)

    @hooks.applies("vkCmdBeginRendering")
    @hooks.before("vkCmdBeginRendering")
    def cmd_begin_rendering(cb, commandBuffer, info):
        add(cb, "pass_begin", describe_rendering(ffi, res(cb), info))

    @hooks.applies("vkCmdEndRendering")
    @hooks.before("vkCmdEndRendering")
    def cmd_end_rendering(cb, commandBuffer):
        begin = next((v for op, v in reversed(cb.ops) if op == "pass_begin"), None)
        add(cb, "pass_end", bool(begin and begin.suspending))

    # ---- draws ---------------------------------------------------------
    def draw(cb, vertices: int, estimated: bool) -> None:
        costs = cb.graphics_pipeline.shader_cycles if cb.graphics_pipeline else {}
        add(cb, "draw", Draw(vertices, _primitives(vertices), estimated, costs.get("vertex"), costs.get("fragment")))

    @hooks.before("vkCmdDraw")
    def cmd_draw(cb, commandBuffer, vertexCount, instanceCount, firstVertex, firstInstance):
        draw(cb, vertexCount * instanceCount, False)

    @hooks.before("vkCmdDrawIndexed")
    def cmd_draw_indexed(cb, commandBuffer, indexCount, instanceCount, firstIndex, vertexOffset, firstInstance):
        draw(cb, indexCount * instanceCount, False)

    @hooks.before("vkCmdDrawIndirect")
    def cmd_draw_indirect(cb, commandBuffer, buffer, offset, drawCount, stride):
        for _ in range(drawCount):
            draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    @hooks.before("vkCmdDrawIndexedIndirect")
    def cmd_draw_indexed_indirect(cb, commandBuffer, buffer, offset, drawCount, stride):
        for _ in range(drawCount):
            draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    @hooks.before("vkCmdDrawIndirectCount")
    def cmd_draw_indirect_count(cb, commandBuffer, buffer, offset, countBuffer, countOffset, maxDrawCount, stride):
        draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    @hooks.before("vkCmdDrawIndexedIndirectCount")
    def cmd_draw_indexed_indirect_count(cb, commandBuffer, buffer, offset, countBuffer, countOffset,
                                        maxDrawCount, stride):
        draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    def multi(pInfo, drawCount: int, stride: int, ctype: str, field: str):
        """The `field` of each element of a strided VkMultiDraw*InfoEXT array."""
        base = ffi.cast("char *", pInfo)
        return [getattr(ffi.cast(ctype, base + i * stride), field) for i in range(drawCount)]

    @hooks.before("vkCmdDrawMultiEXT")
    def cmd_draw_multi(cb, commandBuffer, drawCount, pVertexInfo, instanceCount, firstInstance, stride):
        for vertices in multi(pVertexInfo, drawCount, stride, "VkMultiDrawInfoEXT *", "vertexCount"):
            draw(cb, vertices * instanceCount, False)

    @hooks.before("vkCmdDrawMultiIndexedEXT")
    def cmd_draw_multi_indexed(cb, commandBuffer, drawCount, pIndexInfo, instanceCount, firstInstance, stride,
                               pVertexOffset):
        for indices in multi(pIndexInfo, drawCount, stride, "VkMultiDrawIndexedInfoEXT *", "indexCount"):
            draw(cb, indices * instanceCount, False)

    @hooks.before("vkCmdDrawIndirectByteCountEXT")
    def cmd_draw_indirect_byte_count(cb, commandBuffer, instanceCount, firstInstance, counterBuffer,
                                     counterBufferOffset, counterOffset, vertexStride):
        draw(cb, timing.INDIRECT_DRAW_VERTICES * instanceCount, True)   # the count is in a GPU buffer

    # Mesh shading has no vertex count at record time: estimated like an indirect draw.
    @hooks.before("vkCmdDrawMeshTasksEXT")
    def cmd_draw_mesh_tasks(cb, commandBuffer, groupCountX, groupCountY, groupCountZ):
        draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    @hooks.before("vkCmdDrawMeshTasksIndirectEXT")
    def cmd_draw_mesh_tasks_indirect(cb, commandBuffer, buffer, offset, drawCount, stride):
        for _ in range(drawCount):
            draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    @hooks.before("vkCmdDrawMeshTasksIndirectCountEXT")
    def cmd_draw_mesh_tasks_indirect_count(cb, commandBuffer, buffer, offset, countBuffer, countOffset,
                                           maxDrawCount, stride):
        draw(cb, timing.INDIRECT_DRAW_VERTICES, True)

    # ---- compute and trace rays ---------------------------------------
    @hooks.before("vkCmdBindPipeline")
    def cmd_bind_pipeline(cb, commandBuffer, bindPoint, pipeline):
        p = res(cb).pipelines.get(int(pipeline))
        if bindPoint == vk.VK_PIPELINE_BIND_POINT_COMPUTE:
            cb.compute_pipeline = p
        elif bindPoint == vk.VK_PIPELINE_BIND_POINT_GRAPHICS:
            cb.graphics_pipeline = p
        elif bindPoint == vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR:
            cb.ray_tracing_pipeline = p   # an attribute of this module's own (objects.CommandBuffer is shared)

    def dispatch(cb, command: str, groups: tuple[int, int, int] | None, base=(0, 0, 0)) -> None:
        p = cb.compute_pipeline
        size = p.group_size if p and p.group_size else None
        estimated = groups is None
        g = groups or (timing.INDIRECT_DISPATCH_GROUPS, 1, 1)
        per_group = size[0] * size[1] * size[2] if size else 1
        # Tuples, not lists: a tuple of ints leaves the garbage collector's care at its first
        # collection, and the dict holding only them at the next full one (trace.py writes them as lists).
        info = {"groups": tuple(groups) if groups else (-1, -1, -1),
                "group_size": tuple(size) if size else (-1, -1, -1)}
        if any(base):
            info["base_group"] = tuple(base)
        add(cb, "work", Work("dispatch", "compute", command, info, invocations=g[0] * g[1] * g[2] * per_group,
                             cycles=p.shader_cycles.get("compute") if p else None, estimated=estimated))

    @hooks.before("vkCmdDispatch")
    def cmd_dispatch(cb, commandBuffer, x, y, z):
        dispatch(cb, "vkCmdDispatch", (x, y, z))

    @hooks.before("vkCmdDispatchBase")
    def cmd_dispatch_base(cb, commandBuffer, bx, by, bz, x, y, z):
        dispatch(cb, "vkCmdDispatchBase", (x, y, z), (bx, by, bz))

    @hooks.before("vkCmdDispatchIndirect")
    def cmd_dispatch_indirect(cb, commandBuffer, buffer, offset):
        dispatch(cb, "vkCmdDispatchIndirect", None)

    def ray_cycles(cb) -> float | None:
        """Cycles per ray of the bound ray-tracing pipeline (its stages' compiler-model costs)."""
        p = getattr(cb, "ray_tracing_pipeline", None)
        return timing.ray_cycles(p.shader_cycles) if p is not None else None

    @hooks.before("vkCmdTraceRaysKHR")
    def cmd_trace_rays(cb, commandBuffer, raygen, miss, hit, callable_, width, height, depth):
        add(cb, "work", Work("trace_rays", "trace_rays", "vkCmdTraceRaysKHR",
                             {"width": width, "height": height, "depth": depth}, invocations=width * height * depth,
                             cycles=ray_cycles(cb)))

    @hooks.before("vkCmdTraceRaysIndirectKHR")
    def cmd_trace_rays_indirect(cb, commandBuffer, raygen, miss, hit, callable_, address):
        # The size is in device memory, written possibly by earlier GPU work: estimated here; the
        # layer captures the real one (merged trace: its ANNEX).
        add(cb, "work", Work("trace_rays", "trace_rays", "vkCmdTraceRaysIndirectKHR", {"width": -1},
                             invocations=timing.INDIRECT_TRACE_RAYS, cycles=ray_cycles(cb), estimated=True))

    # ---- acceleration structures (sizes from the table shared with the layer) ------------
    accel.register(hooks, ffi)
    log = hooks.errors.log
    pipelines.register_ray_tracing(hooks, ffi, lambda stages: shader_costs.of_stages(drv.profile.key, stages, log))

    # ---- shader objects: bound per stage, costed like pipelines -------------------------
    pipelines.register_shader_objects(hooks, ffi, lambda stages: shader_costs.of_stages(drv.profile.key, stages, log))

    @hooks.before("vkCmdBindShadersEXT")
    def cmd_bind_shaders(cb, commandBuffer, count, pStages, pShaders):
        bound = cb.__dict__.setdefault("shader_objects", {})   # this module's own state, like ray_tracing_pipeline
        now = pipelines.bind_shader_objects(res(cb), bound, count, pStages, None if pShaders == ffi.NULL else pShaders)
        if any(s == vk.VK_SHADER_STAGE_COMPUTE_BIT for s in (pStages[i] for i in range(count))):
            cb.compute_pipeline = now[vk.VK_PIPELINE_BIND_POINT_COMPUTE]
        if any(s != vk.VK_SHADER_STAGE_COMPUTE_BIT for s in (pStages[i] for i in range(count))):
            cb.graphics_pipeline = now[vk.VK_PIPELINE_BIND_POINT_GRAPHICS]

    def accel_hook(name: str):
        describe = accel.DESCRIBE[name]

        def before(cb, commandBuffer, *args):
            a = describe(res(cb), *args)
            if a.kind == "acceleration_structure_build":
                info = {"primitives": a.primitives, "instances": a.instances, "structures": len(a.fields["structures"])}
            else:
                info = {"copy_mode": a.fields["copy_mode"], "bytes": a.nbytes}
            add(cb, "work", Work(a.kind, a.stage, name, info, nbytes=a.nbytes, estimated=a.estimated,
                                 primitives=a.primitives, instances=a.instances))
        return before

    for name in ACCELERATION_STRUCTURES:
        hooks.before(name)(accel_hook(name))

    # ---- transfers (sizes from the table shared with the layer) -----------
    def transfer_hook(name: str):
        describe = TRANSFERS[name]

        def before(cb, commandBuffer, *args):
            t = describe(res(cb), *args)
            add(cb, "work", Work("transfer", t.stage, name, t.fields(), nbytes=t.nbytes))
        return before

    for name in TRANSFERS:
        hooks.before(name)(transfer_hook(name))

    # ---- ordering and secondaries ---------------------------------------
    def barrier(cb, masks: list[tuple[int, int]]) -> None:
        if masks:
            add(cb, "barrier", (frozenset().union(*(stage_classes(s, "src") for s, _ in masks)),
                                frozenset().union(*(stage_classes(d, "dst") for _, d in masks))))

    def dependency_masks(info) -> list[tuple[int, int]]:
        """Stage masks of every barrier in a VkDependencyInfo (synchronization2)."""
        out = [(b.srcStageMask, b.dstStageMask) for b in (info.pMemoryBarriers[i]
                                                          for i in range(info.memoryBarrierCount))]
        out += [(b.srcStageMask, b.dstStageMask) for b in (info.pBufferMemoryBarriers[i]
                                                           for i in range(info.bufferMemoryBarrierCount))]
        out += [(b.srcStageMask, b.dstStageMask) for b in (info.pImageMemoryBarriers[i]
                                                           for i in range(info.imageMemoryBarrierCount))]
        return out

    @hooks.before("vkCmdPipelineBarrier")
    def cmd_barrier(cb, commandBuffer, src, dst, flags, *barriers):
        barrier(cb, [(src, dst)])

    @hooks.before("vkCmdPipelineBarrier2")
    def cmd_barrier2(cb, commandBuffer, info):
        barrier(cb, dependency_masks(info))

    @hooks.before("vkCmdWaitEvents")
    def cmd_wait_events(cb, commandBuffer, count, pEvents, src, dst, *barriers):
        barrier(cb, [(src, dst)])

    @hooks.before("vkCmdWaitEvents2")
    def cmd_wait_events2(cb, commandBuffer, count, pEvents, pInfos):
        barrier(cb, [m for i in range(count) for m in dependency_masks(pInfos[i])])

    # Recorded in C (intercepts.DEPENDENCIES): the barriers' count and reduced masks, which give the
    # same classes as the union above (the destinations that hold bottom-of-pipe are left out in C).
    @hooks.applies("vkCmdPipelineBarrier2")
    @hooks.applies("vkCmdWaitEvents2")
    def reduced_barrier(cb, commandBuffer, barriers: int, src: int, dst: int) -> None:
        if barriers:
            add(cb, "barrier", (stage_classes(src, "src"), stage_classes(dst, "dst")))

    @hooks.before("vkCmdExecuteCommands")
    def cmd_execute(cb, commandBuffer, count, pCommandBuffers):
        objects = drv.objects
        secondaries = [objects.get(pCommandBuffers[i], CommandBuffer) for i in range(count)]
        cb.needs_completion |= any(s.needs_completion for s in secondaries)
        add(cb, "execute", [(s.address, s.ops) for s in secondaries])

    # Commands recorded in C (shim_spec.RECORDED) are applied later, mostly by the same functions;
    # consecutive draws arrive folded: their count and total vertices and primitives.
    def draws(cb, commandBuffer, count: int, vertices: int, primitives: int) -> None:
        costs = cb.graphics_pipeline.shader_cycles if cb.graphics_pipeline else {}
        add(cb, "draw", Draw(vertices, primitives, False, costs.get("vertex"), costs.get("fragment"), count))

    hooks.applies("vkCmdDraw")(draws)
    hooks.applies("vkCmdDrawIndexed")(draws)
    for name, fn in (("vkCmdBindPipeline", cmd_bind_pipeline), ("vkCmdDispatch", cmd_dispatch),
                     ("vkCmdDispatchBase", cmd_dispatch_base), ("vkCmdPipelineBarrier", cmd_barrier)):
        hooks.applies(name)(fn)
    for name in RECORDED_TRANSFERS:
        hooks.applies(name)(transfer_hook(name))



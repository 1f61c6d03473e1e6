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

`Shadow` holds the logic: one method per kind of command, taking plain values
(counts, masks, handles as ints, the `PassInfo`, `Transfer` or `AccelWork` the
shared vkapi tables describe) and appending the ops; its collaborators are
passed in (the resources of a command buffer's device). `register` only reads
the Vulkan structures, registers the hooks and the appliers of the records
made in C (`hooks.applies`), and calls it; the unit tests (tests/icd/
test_shadow_recording.py) drive `Shadow` with stand-ins, without Vulkan.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from tessera.vkapi import accel, pipelines
from tessera.vkapi.accel import AccelWork
from tessera.vkapi.commands import ACCELERATION_STRUCTURES
from tessera.vkapi.render_passes import PassInfo, describe_begin, describe_rendering
from tessera.vkapi.resources import Resources
from tessera.vkapi.transfers import RECORDED_IN_C as RECORDED_TRANSFERS, TRANSFERS, Transfer
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


def add_barrier(cb: CommandBuffer, masks: list[tuple[int, int]]) -> None:
    """Barriers given as (source, destination) stage masks: one op, the union of their classes."""
    if masks:
        cb.ops.append(("barrier", (frozenset().union(*(stage_classes(s, "src") for s, _ in masks)),
                                   frozenset().union(*(stage_classes(d, "dst") for _, d in masks)))))


def _primitives(vertices: int) -> int:
    return vertices // 3   # triangle lists; strips and fans shade about as many vertices


def dependency_masks(info) -> list[tuple[int, int]]:
    """Stage masks of every barrier in a VkDependencyInfo (synchronization2)."""
    out = [(b.srcStageMask, b.dstStageMask) for b in (info.pMemoryBarriers[i]
                                                      for i in range(info.memoryBarrierCount))]
    out += [(b.srcStageMask, b.dstStageMask) for b in (info.pBufferMemoryBarriers[i]
                                                       for i in range(info.bufferMemoryBarrierCount))]
    out += [(b.srcStageMask, b.dstStageMask) for b in (info.pImageMemoryBarriers[i]
                                                       for i in range(info.imageMemoryBarrierCount))]
    return out


def multi(ffi, pInfo, drawCount: int, stride: int, ctype: str, field: str) -> list[int]:
    """The `field` of each element of a strided VkMultiDraw*InfoEXT array."""
    base = ffi.cast("char *", pInfo)
    return [getattr(ffi.cast(ctype, base + i * stride), field) for i in range(drawCount)]


def device_resources(cb: CommandBuffer) -> Resources:
    """What the driver remembers of the resources of the buffer's device (vkapi/resource_hooks.py)."""
    return cb.device.res


class Shadow:
    """Turns recorded commands into the shadow recording's ops (`cb.ops`), one method per kind.

    `resources(cb)`: the Resources that size a command of `cb` (its device's: render passes and
    framebuffers, pipelines and shader objects with their shader costs, images, buffers). Shader
    costs reach the ops through the pipelines bound (`Pipeline.shader_cycles`, `group_size`).
    The other inputs are plain values: what `register` read from the Vulkan call or C's record.
    """

    def __init__(self, resources: Callable[[CommandBuffer], Resources] = device_resources) -> None:
        self.resources = resources

    # ---- render passes -------------------------------------------------
    def begin_render_pass(self, cb: CommandBuffer, begin, command: str) -> None:
        """vkCmdBeginRenderPass(2): `begin` a VkRenderPassBeginInfo (or anything with its members)."""
        self.begin_pass(cb, describe_begin(self.resources(cb), begin, command))

    def begin_pass(self, cb: CommandBuffer, info: PassInfo) -> None:
        if info.waits_before:
            cb.ops.append(("barrier", None))   # spec 8.1: a dependency from VK_SUBPASS_EXTERNAL orders earlier work first
        cb.ops.append(("pass_begin", info))

    def end_render_pass(self, cb: CommandBuffer) -> None:
        begin = _last_begin(cb)
        cb.ops.append(("pass_end", False))
        if begin is not None and begin.waits_after:
            cb.ops.append(("barrier", None))

    def begin_rendering(self, cb: CommandBuffer, info: PassInfo) -> None:
        cb.ops.append(("pass_begin", info))

    def end_rendering(self, cb: CommandBuffer) -> None:
        begin = _last_begin(cb)
        cb.ops.append(("pass_end", bool(begin and begin.suspending)))

    # ---- draws ---------------------------------------------------------
    def draw(self, cb: CommandBuffer, vertices: int, estimated: bool = False) -> None:
        """One draw of `vertices` (instances included)."""
        costs = cb.graphics_pipeline.shader_cycles if cb.graphics_pipeline else {}
        cb.ops.append(("draw", Draw(vertices, _primitives(vertices), estimated, costs.get("vertex"),
                                    costs.get("fragment"))))

    def draws(self, cb: CommandBuffer, count: int, vertices: int, primitives: int) -> None:
        """Consecutive draws recorded in C, folded: their count and total vertices and primitives."""
        costs = cb.graphics_pipeline.shader_cycles if cb.graphics_pipeline else {}
        cb.ops.append(("draw", Draw(vertices, primitives, False, costs.get("vertex"), costs.get("fragment"), count)))

    def multi_draw(self, cb: CommandBuffer, counts: list[int], instances: int) -> None:
        """vkCmdDrawMulti(Indexed)EXT: one draw per element (its vertex or index count)."""
        for n in counts:
            self.draw(cb, n * instances, False)

    def estimated_draws(self, cb: CommandBuffer, draws: int = 1, instances: int = 1) -> None:
        """Draws whose sizes are in GPU memory (indirect, mesh tasks, byte count): `draws` draws of
        timing.INDIRECT_DRAW_VERTICES per instance, estimated. An indirect count draw is one."""
        for _ in range(draws):
            self.draw(cb, timing.INDIRECT_DRAW_VERTICES * instances, True)

    # ---- pipelines and shader objects -----------------------------------
    def bind_pipeline(self, cb: CommandBuffer, bind_point: int, pipeline: int) -> None:
        p = self.resources(cb).pipelines.get(pipeline)
        if bind_point == vk.VK_PIPELINE_BIND_POINT_COMPUTE:
            cb.compute_pipeline = p
        elif bind_point == vk.VK_PIPELINE_BIND_POINT_GRAPHICS:
            cb.graphics_pipeline = p
        elif bind_point == vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR:
            cb.ray_tracing_pipeline = p

    def bind_shaders(self, cb: CommandBuffer, stages: list[int], shaders: list[int] | None) -> None:
        """vkCmdBindShadersEXT: `shaders` None for a NULL pShaders (every stage named unbound)."""
        now = pipelines.bind_shader_objects(self.resources(cb), cb.shader_objects, len(stages), stages, shaders)
        if any(s == vk.VK_SHADER_STAGE_COMPUTE_BIT for s in stages):
            cb.compute_pipeline = now[vk.VK_PIPELINE_BIND_POINT_COMPUTE]
        if any(s != vk.VK_SHADER_STAGE_COMPUTE_BIT for s in stages):
            cb.graphics_pipeline = now[vk.VK_PIPELINE_BIND_POINT_GRAPHICS]

    # ---- compute and trace rays ---------------------------------------
    def dispatch(self, cb: CommandBuffer, command: str, groups: tuple[int, int, int] | None,
                 base: tuple[int, int, int] = (0, 0, 0)) -> None:
        """`groups` None: indirect (estimated, timing.INDIRECT_DISPATCH_GROUPS groups)."""
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
        cb.ops.append(("work", Work("dispatch", "compute", command, info, invocations=g[0] * g[1] * g[2] * per_group,
                                    cycles=p.shader_cycles.get("compute") if p else None, estimated=estimated)))

    @staticmethod
    def ray_cycles(cb: CommandBuffer) -> float | None:
        """Cycles per ray of the bound ray-tracing pipeline (its stages' compiler-model costs)."""
        p = cb.ray_tracing_pipeline
        return timing.ray_cycles(p.shader_cycles) if p is not None else None

    def trace_rays(self, cb: CommandBuffer, width: int, height: int, depth: int) -> None:
        cb.ops.append(("work", Work("trace_rays", "trace_rays", "vkCmdTraceRaysKHR",
                                    {"width": width, "height": height, "depth": depth},
                                    invocations=width * height * depth, cycles=self.ray_cycles(cb))))

    def trace_rays_indirect(self, cb: CommandBuffer) -> None:
        # The size is in device memory, written possibly by earlier GPU work: estimated here; the
        # layer captures the real one (merged trace: its ANNEX).
        cb.ops.append(("work", Work("trace_rays", "trace_rays", "vkCmdTraceRaysIndirectKHR", {"width": -1},
                                    invocations=timing.INDIRECT_TRACE_RAYS, cycles=self.ray_cycles(cb),
                                    estimated=True)))

    # ---- acceleration structures and transfers (sized by the tables shared with the layer) ----
    def acceleration_structure(self, cb: CommandBuffer, command: str, a: AccelWork) -> None:
        if a.kind == "acceleration_structure_build":
            info = {"primitives": a.primitives, "instances": a.instances, "structures": len(a.fields["structures"])}
        else:
            info = {"copy_mode": a.fields["copy_mode"], "bytes": a.nbytes}
        cb.ops.append(("work", Work(a.kind, a.stage, command, info, nbytes=a.nbytes, estimated=a.estimated,
                                    primitives=a.primitives, instances=a.instances)))

    def transfer(self, cb: CommandBuffer, command: str, t: Transfer) -> None:
        cb.ops.append(("work", Work("transfer", t.stage, command, t.fields(), nbytes=t.nbytes)))

    # ---- ordering and secondaries ---------------------------------------
    def barrier(self, cb: CommandBuffer, masks: list[tuple[int, int]]) -> None:
        add_barrier(cb, masks)

    def reduced_barrier(self, cb: CommandBuffer, barriers: int, src: int, dst: int) -> None:
        """A synchronization2 record made in C (intercepts.DEPENDENCIES): the barriers' count, the OR
        of their source masks and of their destination masks without bottom-of-pipe, which give the
        classes of `barrier`'s union."""
        if barriers:
            cb.ops.append(("barrier", (stage_classes(src, "src"), stage_classes(dst, "dst"))))

    def execute(self, cb: CommandBuffer, secondaries: list[CommandBuffer]) -> None:
        """vkCmdExecuteCommands: the secondaries' op lists as they are now (expanded at submit)."""
        cb.needs_completion |= any(s.needs_completion for s in secondaries)
        cb.ops.append(("execute", [(s.address, s.ops) for s in secondaries]))


def _last_begin(cb: CommandBuffer) -> PassInfo | None:
    return next((v for op, v in reversed(cb.ops) if op == "pass_begin"), None)


def register(drv: Driver) -> None:
    """The hooks and appliers of the shadow recording: each reads its Vulkan arguments (or C's
    record) and calls `Shadow`."""
    ffi, hooks = drv.ffi, drv.hooks
    shadow = Shadow()
    res = shadow.resources

    # ---- render passes -------------------------------------------------
    # Recorded in C (intercepts.PASS_BEGIN, RENDERING_BEGIN, PASS_END) unless Python must act at record
    # time: the hooks below also apply those records, with the same arguments.
    @hooks.applies("vkCmdBeginRenderPass")
    @hooks.before("vkCmdBeginRenderPass")
    def cmd_begin_render_pass(cb, commandBuffer, pRenderPassBegin, contents):
        shadow.begin_render_pass(cb, pRenderPassBegin, "vkCmdBeginRenderPass")

    @hooks.applies("vkCmdBeginRenderPass2")
    @hooks.before("vkCmdBeginRenderPass2")
    def cmd_begin_render_pass2(cb, commandBuffer, pRenderPassBegin, pSubpassBeginInfo):
        shadow.begin_render_pass(cb, pRenderPassBegin, "vkCmdBeginRenderPass2")

    @hooks.applies("vkCmdEndRenderPass")
    @hooks.before("vkCmdEndRenderPass")
    def cmd_end_render_pass(cb, commandBuffer):
        shadow.end_render_pass(cb)

    @hooks.applies("vkCmdEndRenderPass2")
    @hooks.before("vkCmdEndRenderPass2")
    def cmd_end_render_pass2(cb, commandBuffer, pSubpassEndInfo):
        shadow.end_render_pass(cb)

    @hooks.applies("vkCmdBeginRendering")
    @hooks.before("vkCmdBeginRendering")
    def cmd_begin_rendering(cb, commandBuffer, info):
        shadow.begin_rendering(cb, describe_rendering(ffi, res(cb), info))

    @hooks.applies("vkCmdEndRendering")
    @hooks.before("vkCmdEndRendering")
    def cmd_end_rendering(cb, commandBuffer):
        shadow.end_rendering(cb)

    # ---- draws ---------------------------------------------------------
    @hooks.before("vkCmdDraw")
    def cmd_draw(cb, commandBuffer, vertexCount, instanceCount, firstVertex, firstInstance):
        shadow.draw(cb, vertexCount * instanceCount)

    @hooks.before("vkCmdDrawIndexed")
    def cmd_draw_indexed(cb, commandBuffer, indexCount, instanceCount, firstIndex, vertexOffset, firstInstance):
        shadow.draw(cb, indexCount * instanceCount)

    @hooks.before("vkCmdDrawIndirect")
    def cmd_draw_indirect(cb, commandBuffer, buffer, offset, drawCount, stride):
        shadow.estimated_draws(cb, drawCount)

    @hooks.before("vkCmdDrawIndexedIndirect")
    def cmd_draw_indexed_indirect(cb, commandBuffer, buffer, offset, drawCount, stride):
        shadow.estimated_draws(cb, drawCount)

    @hooks.before("vkCmdDrawIndirectCount")
    def cmd_draw_indirect_count(cb, commandBuffer, buffer, offset, countBuffer, countOffset, maxDrawCount, stride):
        shadow.estimated_draws(cb)

    @hooks.before("vkCmdDrawIndexedIndirectCount")
    def cmd_draw_indexed_indirect_count(cb, commandBuffer, buffer, offset, countBuffer, countOffset,
                                        maxDrawCount, stride):
        shadow.estimated_draws(cb)

    @hooks.before("vkCmdDrawMultiEXT")
    def cmd_draw_multi(cb, commandBuffer, drawCount, pVertexInfo, instanceCount, firstInstance, stride):
        shadow.multi_draw(cb, multi(ffi, pVertexInfo, drawCount, stride, "VkMultiDrawInfoEXT *", "vertexCount"),
                          instanceCount)

    @hooks.before("vkCmdDrawMultiIndexedEXT")
    def cmd_draw_multi_indexed(cb, commandBuffer, drawCount, pIndexInfo, instanceCount, firstInstance, stride,
                               pVertexOffset):
        shadow.multi_draw(cb, multi(ffi, pIndexInfo, drawCount, stride, "VkMultiDrawIndexedInfoEXT *", "indexCount"),
                          instanceCount)

    @hooks.before("vkCmdDrawIndirectByteCountEXT")
    def cmd_draw_indirect_byte_count(cb, commandBuffer, instanceCount, firstInstance, counterBuffer,
                                     counterBufferOffset, counterOffset, vertexStride):
        shadow.estimated_draws(cb, 1, instanceCount)   # the count is in a GPU buffer

    # Mesh shading has no vertex count at record time: estimated like an indirect draw.
    @hooks.before("vkCmdDrawMeshTasksEXT")
    def cmd_draw_mesh_tasks(cb, commandBuffer, groupCountX, groupCountY, groupCountZ):
        shadow.estimated_draws(cb)

    @hooks.before("vkCmdDrawMeshTasksIndirectEXT")
    def cmd_draw_mesh_tasks_indirect(cb, commandBuffer, buffer, offset, drawCount, stride):
        shadow.estimated_draws(cb, drawCount)

    @hooks.before("vkCmdDrawMeshTasksIndirectCountEXT")
    def cmd_draw_mesh_tasks_indirect_count(cb, commandBuffer, buffer, offset, countBuffer, countOffset,
                                           maxDrawCount, stride):
        shadow.estimated_draws(cb)

    # ---- compute and trace rays ---------------------------------------
    @hooks.before("vkCmdBindPipeline")
    def cmd_bind_pipeline(cb, commandBuffer, bindPoint, pipeline):
        shadow.bind_pipeline(cb, bindPoint, int(pipeline))

    @hooks.before("vkCmdDispatch")
    def cmd_dispatch(cb, commandBuffer, x, y, z):
        shadow.dispatch(cb, "vkCmdDispatch", (x, y, z))

    @hooks.before("vkCmdDispatchBase")
    def cmd_dispatch_base(cb, commandBuffer, bx, by, bz, x, y, z):
        shadow.dispatch(cb, "vkCmdDispatchBase", (x, y, z), (bx, by, bz))

    @hooks.before("vkCmdDispatchIndirect")
    def cmd_dispatch_indirect(cb, commandBuffer, buffer, offset):
        shadow.dispatch(cb, "vkCmdDispatchIndirect", None)

    @hooks.before("vkCmdTraceRaysKHR")
    def cmd_trace_rays(cb, commandBuffer, raygen, miss, hit, callable_, width, height, depth):
        shadow.trace_rays(cb, width, height, depth)

    @hooks.before("vkCmdTraceRaysIndirectKHR")
    def cmd_trace_rays_indirect(cb, commandBuffer, raygen, miss, hit, callable_, address):
        shadow.trace_rays_indirect(cb)

    # ---- acceleration structures (sizes from the table shared with the layer) ------------
    accel.register(hooks, ffi)
    log = hooks.errors.log
    pipelines.register_ray_tracing(hooks, ffi, lambda stages: shader_costs.of_stages(drv.profile.key, stages, log))

    # ---- shader objects: bound per stage, costed like pipelines -------------------------
    pipelines.register_shader_objects(hooks, ffi, lambda stages: shader_costs.of_stages(drv.profile.key, stages, log))

    @hooks.before("vkCmdBindShadersEXT")
    def cmd_bind_shaders(cb, commandBuffer, count, pStages, pShaders):
        shadow.bind_shaders(cb, [pStages[i] for i in range(count)],
                            None if pShaders == ffi.NULL else [int(pShaders[i]) for i in range(count)])

    def accel_hook(name: str):
        describe = accel.DESCRIBE[name]

        def before(cb, commandBuffer, *args):
            shadow.acceleration_structure(cb, name, describe(res(cb), *args))
        return before

    for name in ACCELERATION_STRUCTURES:
        hooks.before(name)(accel_hook(name))

    # ---- transfers (sizes from the table shared with the layer) -----------
    def transfer_hook(name: str):
        describe = TRANSFERS[name]

        def before(cb, commandBuffer, *args):
            shadow.transfer(cb, name, describe(res(cb), *args))
        return before

    for name in TRANSFERS:
        hooks.before(name)(transfer_hook(name))

    # ---- ordering and secondaries ---------------------------------------
    @hooks.before("vkCmdPipelineBarrier")
    def cmd_barrier(cb, commandBuffer, src, dst, flags, *barriers):
        shadow.barrier(cb, [(src, dst)])

    @hooks.before("vkCmdPipelineBarrier2")
    def cmd_barrier2(cb, commandBuffer, info):
        shadow.barrier(cb, dependency_masks(info))

    @hooks.before("vkCmdWaitEvents")
    def cmd_wait_events(cb, commandBuffer, count, pEvents, src, dst, *barriers):
        shadow.barrier(cb, [(src, dst)])

    @hooks.before("vkCmdWaitEvents2")
    def cmd_wait_events2(cb, commandBuffer, count, pEvents, pInfos):
        shadow.barrier(cb, [m for i in range(count) for m in dependency_masks(pInfos[i])])

    # Recorded in C (intercepts.DEPENDENCIES): the barriers' count and reduced masks, which give the
    # same classes as the union above (the destinations that hold bottom-of-pipe are left out in C).
    @hooks.applies("vkCmdPipelineBarrier2")
    @hooks.applies("vkCmdWaitEvents2")
    def reduced_barrier(cb, commandBuffer, barriers: int, src: int, dst: int) -> None:
        shadow.reduced_barrier(cb, barriers, src, dst)

    @hooks.before("vkCmdExecuteCommands")
    def cmd_execute(cb, commandBuffer, count, pCommandBuffers):
        objects = drv.objects
        shadow.execute(cb, [objects.get(pCommandBuffers[i], CommandBuffer) for i in range(count)])

    # Commands recorded in C (shim_spec.RECORDED) are applied later, mostly by the same functions;
    # consecutive draws arrive folded: their count and total vertices and primitives.
    def draws(cb, commandBuffer, count: int, vertices: int, primitives: int) -> None:
        shadow.draws(cb, count, vertices, primitives)

    hooks.applies("vkCmdDraw")(draws)
    hooks.applies("vkCmdDrawIndexed")(draws)
    hooks.applies("vkCmdDrawMeshTasksEXT")(lambda cb, commandBuffer, count: shadow.estimated_draws(cb, count))
    for name, fn in (("vkCmdBindPipeline", cmd_bind_pipeline), ("vkCmdDispatch", cmd_dispatch),
                     ("vkCmdDispatchBase", cmd_dispatch_base), ("vkCmdPipelineBarrier", cmd_barrier),
                     ("vkCmdWaitEvents", cmd_wait_events), ("vkCmdTraceRaysKHR", cmd_trace_rays)):
        hooks.applies(name)(fn)
    for name in RECORDED_TRANSFERS:
        hooks.applies(name)(transfer_hook(name))

"""Shadow recording: what each command buffer will execute, in command order.

Each recorded command appends one op to `CommandBuffer.ops` (the typed vocabulary of
vkapi/ops.py, shared with the layer, plus this module's `Draw` and `Work`):

    LabelBegin(name) / LABEL_END / LabelInsert(name)   debug labels (labels.py)
    PassBegin(PassInfo, resuming)   render pass or dynamic rendering begins (or resumes)
    Draw
    PASS_END / PASS_SUSPEND    ends (or suspends) the current render pass
    Work                       a dispatch, trace rays, acceleration-structure build or copy, or transfer
    Barrier(scope)             barrier / wait events: (source classes, destination classes), or
                               FULL_BARRIER (external subpass dependency)
    Execute([Recording(address, ops), ...])  secondaries' recordings, expanded at submit

Sizes that depend only on the recording are computed here; what depends on
submission (split render passes, label stacks) is resolved in submit.py.

`Shadow` holds the logic: one method per kind of command, taking plain values
(counts, masks, handles as ints, the `PassInfo`, `Transfer` or `AccelWork` the
shared vkapi tables describe) and appending the ops; its collaborators are
passed in (the resources of a command buffer's device). `ShadowRecording`
holds the hooks: one method per command (HookSet.bind), each reading the
Vulkan structures (or, `apply_vk…`, C's record of the command) and calling
`Shadow`; the unit tests (tests/icd/test_shadow_recording.py,
test_recording_hooks.py) drive both with stand-ins, without Vulkan.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tessera.vkapi import accel, pipelines
from tessera.vkapi.accel import AccelWork
from tessera.vkapi.ops import FULL_BARRIER, PASS_END, PASS_SUSPEND, Barrier, Execute, PassBegin, Recording
from tessera.vkapi.render_passes import PassInfo, describe_begin, describe_rendering
from tessera.vkapi.resources import Resources
from tessera.vkapi.transfers import TRANSFERS, Transfer
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
    # The backend query bracketing its render pass part (measured_counters.Reading), None if not measured
    measured: Any = None
    # Its positions captured by transform feedback (visible_prims.Capture), None if not captured
    visible: Any = None


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
    measured: Any = None         # dispatches: the backend's pipeline statistics (measured_counters.Stats)


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
        cb.ops.append(Barrier((frozenset().union(*(stage_classes(s, "src") for s, _ in masks)),
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
    The other inputs are plain values: what `ShadowRecording` read from the Vulkan call or C's record.
    """

    def __init__(self, resources: Callable[[CommandBuffer], Resources] = device_resources) -> None:
        self.resources = resources

    # ---- render passes -------------------------------------------------
    def begin_render_pass(self, cb: CommandBuffer, begin, command: str) -> None:
        """vkCmdBeginRenderPass(2): `begin` a VkRenderPassBeginInfo (or anything with its members)."""
        self.begin_pass(cb, describe_begin(self.resources(cb), begin, command))

    def begin_pass(self, cb: CommandBuffer, info: PassInfo) -> None:
        if info.waits_before:
            cb.ops.append(FULL_BARRIER)   # spec 8.1: a dependency from VK_SUBPASS_EXTERNAL orders earlier work first
        cb.ops.append(PassBegin(info, info.resuming))

    def end_render_pass(self, cb: CommandBuffer) -> None:
        begin = _last_begin(cb)
        cb.ops.append(PASS_END)
        if begin is not None and begin.waits_after:
            cb.ops.append(FULL_BARRIER)

    def begin_rendering(self, cb: CommandBuffer, info: PassInfo) -> None:
        cb.ops.append(PassBegin(info, info.resuming))

    def end_rendering(self, cb: CommandBuffer) -> None:
        begin = _last_begin(cb)
        cb.ops.append(PASS_SUSPEND if begin and begin.suspending else PASS_END)

    # ---- draws ---------------------------------------------------------
    def draw(self, cb: CommandBuffer, vertices: int, estimated: bool = False) -> None:
        """One draw of `vertices` (instances included)."""
        costs = cb.graphics_pipeline.shader_cycles if cb.graphics_pipeline else {}
        cb.ops.append(Draw(vertices, _primitives(vertices), estimated, costs.get("vertex"), costs.get("fragment")))

    def draws(self, cb: CommandBuffer, count: int, vertices: int, primitives: int) -> None:
        """Consecutive draws recorded in C, folded: their count and total vertices and primitives."""
        costs = cb.graphics_pipeline.shader_cycles if cb.graphics_pipeline else {}
        cb.ops.append(Draw(vertices, primitives, False, costs.get("vertex"), costs.get("fragment"), count))

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
        cb.ops.append(Work("dispatch", "compute", command, info, invocations=g[0] * g[1] * g[2] * per_group,
                           cycles=p.shader_cycles.get("compute") if p else None, estimated=estimated))

    @staticmethod
    def ray_cycles(cb: CommandBuffer) -> float | None:
        """Cycles per ray of the bound ray-tracing pipeline (its stages' compiler-model costs)."""
        p = cb.ray_tracing_pipeline
        return timing.ray_cycles(p.shader_cycles) if p is not None else None

    def trace_rays(self, cb: CommandBuffer, width: int, height: int, depth: int) -> None:
        cb.ops.append(Work("trace_rays", "trace_rays", "vkCmdTraceRaysKHR",
                           {"width": width, "height": height, "depth": depth},
                           invocations=width * height * depth, cycles=self.ray_cycles(cb)))

    def trace_rays_indirect(self, cb: CommandBuffer) -> None:
        # The size is in device memory, written possibly by earlier GPU work: estimated here; the
        # layer captures the real one (merged trace: its ANNEX).
        cb.ops.append(Work("trace_rays", "trace_rays", "vkCmdTraceRaysIndirectKHR", {"width": -1},
                           invocations=timing.INDIRECT_TRACE_RAYS, cycles=self.ray_cycles(cb),
                           estimated=True))

    # ---- acceleration structures and transfers (sized by the tables shared with the layer) ----
    def acceleration_structure(self, cb: CommandBuffer, command: str, a: AccelWork) -> None:
        if a.kind == "acceleration_structure_build":
            info = {"primitives": a.primitives, "instances": a.instances, "structures": len(a.fields["structures"])}
        else:
            info = {"copy_mode": a.fields["copy_mode"], "bytes": a.nbytes}
        cb.ops.append(Work(a.kind, a.stage, command, info, nbytes=a.nbytes, estimated=a.estimated,
                           primitives=a.primitives, instances=a.instances))

    def transfer(self, cb: CommandBuffer, command: str, t: Transfer) -> None:
        cb.ops.append(Work("transfer", t.stage, command, t.fields(), nbytes=t.nbytes))

    # ---- ordering and secondaries ---------------------------------------
    def barrier(self, cb: CommandBuffer, masks: list[tuple[int, int]]) -> None:
        add_barrier(cb, masks)

    def reduced_barrier(self, cb: CommandBuffer, barriers: int, src: int, dst: int) -> None:
        """A synchronization2 record made in C (intercepts.DEPENDENCIES): the barriers' count, the OR
        of their source masks and of their destination masks without bottom-of-pipe, which give the
        classes of `barrier`'s union."""
        if barriers:
            cb.ops.append(Barrier((stage_classes(src, "src"), stage_classes(dst, "dst"))))

    def execute(self, cb: CommandBuffer, secondaries: list[CommandBuffer]) -> None:
        """vkCmdExecuteCommands: the secondaries' op lists as they are now (expanded at submit)."""
        cb.needs_completion |= any(s.needs_completion for s in secondaries)
        cb.ops.append(Execute([Recording(s.address, s.ops) for s in secondaries]))


def _last_begin(cb: CommandBuffer) -> PassInfo | None:
    return next((op.info for op in reversed(cb.ops) if type(op) is PassBegin), None)


class ShadowRecording:
    """The hooks and appliers of the shadow recording, one method per command (HookSet.bind): each
    reads its Vulkan arguments (or C's record) and calls `Shadow`.

    Commands recorded in C (shim_spec.RECORDED) are applied later by the `apply_vk…` methods, mostly
    the same functions as the hooks; consecutive draws arrive folded: their count and total vertices
    and primitives."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi, self.objects = drv, drv.ffi, drv.objects
        self.log = drv.hooks.errors.log
        self.shadow = Shadow()
        self.resources = self.shadow.resources

    def stage_costs(self, stages):
        """The compiler model's costs of a ray-tracing pipeline's or shader object's stages."""
        return shader_costs.of_stages(self.drv.profile.key, stages, self.log)

    # ---- render passes -------------------------------------------------
    # Recorded in C (intercepts.PASS_BEGIN, RENDERING_BEGIN, PASS_END) unless Python must act at record
    # time: the hooks below also apply those records, with the same arguments.
    def before_vkCmdBeginRenderPass(self, cb, commandBuffer, pRenderPassBegin, contents):
        self.shadow.begin_render_pass(cb, pRenderPassBegin, "vkCmdBeginRenderPass")

    def before_vkCmdBeginRenderPass2(self, cb, commandBuffer, pRenderPassBegin, pSubpassBeginInfo):
        self.shadow.begin_render_pass(cb, pRenderPassBegin, "vkCmdBeginRenderPass2")

    def before_vkCmdEndRenderPass(self, cb, commandBuffer):
        self.shadow.end_render_pass(cb)

    def before_vkCmdEndRenderPass2(self, cb, commandBuffer, pSubpassEndInfo):
        self.shadow.end_render_pass(cb)

    def before_vkCmdBeginRendering(self, cb, commandBuffer, info):
        self.shadow.begin_rendering(cb, describe_rendering(self.ffi, self.resources(cb), info))

    def before_vkCmdEndRendering(self, cb, commandBuffer):
        self.shadow.end_rendering(cb)

    apply_vkCmdBeginRenderPass = before_vkCmdBeginRenderPass
    apply_vkCmdBeginRenderPass2 = before_vkCmdBeginRenderPass2
    apply_vkCmdEndRenderPass = before_vkCmdEndRenderPass
    apply_vkCmdEndRenderPass2 = before_vkCmdEndRenderPass2
    apply_vkCmdBeginRendering = before_vkCmdBeginRendering
    apply_vkCmdEndRendering = before_vkCmdEndRendering

    # ---- draws ---------------------------------------------------------
    def before_vkCmdDraw(self, cb, commandBuffer, vertexCount, instanceCount, firstVertex, firstInstance):
        self.shadow.draw(cb, vertexCount * instanceCount)

    def before_vkCmdDrawIndexed(self, cb, commandBuffer, indexCount, instanceCount, firstIndex, vertexOffset,
                                firstInstance):
        self.shadow.draw(cb, indexCount * instanceCount)

    def before_vkCmdDrawIndirect(self, cb, commandBuffer, buffer, offset, drawCount, stride):
        self.shadow.estimated_draws(cb, drawCount)

    def before_vkCmdDrawIndexedIndirect(self, cb, commandBuffer, buffer, offset, drawCount, stride):
        self.shadow.estimated_draws(cb, drawCount)

    def before_vkCmdDrawIndirectCount(self, cb, commandBuffer, buffer, offset, countBuffer, countOffset,
                                      maxDrawCount, stride):
        self.shadow.estimated_draws(cb)

    def before_vkCmdDrawIndexedIndirectCount(self, cb, commandBuffer, buffer, offset, countBuffer, countOffset,
                                             maxDrawCount, stride):
        self.shadow.estimated_draws(cb)

    def before_vkCmdDrawMultiEXT(self, cb, commandBuffer, drawCount, pVertexInfo, instanceCount, firstInstance,
                                 stride):
        self.shadow.multi_draw(cb, multi(self.ffi, pVertexInfo, drawCount, stride, "VkMultiDrawInfoEXT *",
                                         "vertexCount"), instanceCount)

    def before_vkCmdDrawMultiIndexedEXT(self, cb, commandBuffer, drawCount, pIndexInfo, instanceCount,
                                        firstInstance, stride, pVertexOffset):
        self.shadow.multi_draw(cb, multi(self.ffi, pIndexInfo, drawCount, stride, "VkMultiDrawIndexedInfoEXT *",
                                         "indexCount"), instanceCount)

    def before_vkCmdDrawIndirectByteCountEXT(self, cb, commandBuffer, instanceCount, firstInstance, counterBuffer,
                                             counterBufferOffset, counterOffset, vertexStride):
        self.shadow.estimated_draws(cb, 1, instanceCount)   # the count is in a GPU buffer

    # Mesh shading has no vertex count at record time: estimated like an indirect draw.
    def before_vkCmdDrawMeshTasksEXT(self, cb, commandBuffer, groupCountX, groupCountY, groupCountZ):
        self.shadow.estimated_draws(cb)

    def before_vkCmdDrawMeshTasksIndirectEXT(self, cb, commandBuffer, buffer, offset, drawCount, stride):
        self.shadow.estimated_draws(cb, drawCount)

    def before_vkCmdDrawMeshTasksIndirectCountEXT(self, cb, commandBuffer, buffer, offset, countBuffer,
                                                  countOffset, maxDrawCount, stride):
        self.shadow.estimated_draws(cb)

    # Recorded in C: consecutive draws folded into their count and total vertices and primitives.
    def apply_vkCmdDraw(self, cb, commandBuffer, count: int, vertices: int, primitives: int) -> None:
        self.shadow.draws(cb, count, vertices, primitives)

    def apply_vkCmdDrawIndexed(self, cb, commandBuffer, count: int, vertices: int, primitives: int) -> None:
        self.shadow.draws(cb, count, vertices, primitives)

    def apply_vkCmdDrawMeshTasksEXT(self, cb, commandBuffer, count: int) -> None:
        self.shadow.estimated_draws(cb, count)

    # ---- compute and trace rays ---------------------------------------
    def before_vkCmdBindPipeline(self, cb, commandBuffer, bindPoint, pipeline):
        self.shadow.bind_pipeline(cb, bindPoint, int(pipeline))

    def before_vkCmdDispatch(self, cb, commandBuffer, x, y, z):
        self.shadow.dispatch(cb, "vkCmdDispatch", (x, y, z))

    def before_vkCmdDispatchBase(self, cb, commandBuffer, bx, by, bz, x, y, z):
        self.shadow.dispatch(cb, "vkCmdDispatchBase", (x, y, z), (bx, by, bz))

    def before_vkCmdDispatchIndirect(self, cb, commandBuffer, buffer, offset):
        self.shadow.dispatch(cb, "vkCmdDispatchIndirect", None)

    def before_vkCmdTraceRaysKHR(self, cb, commandBuffer, raygen, miss, hit, callable_, width, height, depth):
        self.shadow.trace_rays(cb, width, height, depth)

    def before_vkCmdTraceRaysIndirectKHR(self, cb, commandBuffer, raygen, miss, hit, callable_, address):
        self.shadow.trace_rays_indirect(cb)

    apply_vkCmdBindPipeline = before_vkCmdBindPipeline
    apply_vkCmdDispatch = before_vkCmdDispatch
    apply_vkCmdDispatchBase = before_vkCmdDispatchBase
    apply_vkCmdTraceRaysKHR = before_vkCmdTraceRaysKHR

    # ---- shader objects: bound per stage, costed like pipelines -------------------------
    def before_vkCmdBindShadersEXT(self, cb, commandBuffer, count, pStages, pShaders):
        self.shadow.bind_shaders(cb, [pStages[i] for i in range(count)],
                                 None if pShaders == self.ffi.NULL else [int(pShaders[i]) for i in range(count)])

    # ---- acceleration structures (sizes from the table shared with the layer) ------------
    def _acceleration_structure(self, name: str, cb, args: tuple) -> None:
        self.shadow.acceleration_structure(cb, name, accel.DESCRIBE[name](self.resources(cb), *args))

    def before_vkCmdBuildAccelerationStructuresKHR(self, cb, commandBuffer, *args):
        self._acceleration_structure("vkCmdBuildAccelerationStructuresKHR", cb, args)

    def before_vkCmdBuildAccelerationStructuresIndirectKHR(self, cb, commandBuffer, *args):
        self._acceleration_structure("vkCmdBuildAccelerationStructuresIndirectKHR", cb, args)

    def before_vkCmdCopyAccelerationStructureKHR(self, cb, commandBuffer, *args):
        self._acceleration_structure("vkCmdCopyAccelerationStructureKHR", cb, args)

    def before_vkCmdCopyAccelerationStructureToMemoryKHR(self, cb, commandBuffer, *args):
        self._acceleration_structure("vkCmdCopyAccelerationStructureToMemoryKHR", cb, args)

    def before_vkCmdCopyMemoryToAccelerationStructureKHR(self, cb, commandBuffer, *args):
        self._acceleration_structure("vkCmdCopyMemoryToAccelerationStructureKHR", cb, args)

    # ---- transfers (sizes from the table shared with the layer; all recorded in C too) ----------
    def _transfer(self, name: str, cb, args: tuple) -> None:
        self.shadow.transfer(cb, name, TRANSFERS[name](self.resources(cb), *args))

    def before_vkCmdFillBuffer(self, cb, commandBuffer, *args):
        self._transfer("vkCmdFillBuffer", cb, args)

    def before_vkCmdUpdateBuffer(self, cb, commandBuffer, *args):
        self._transfer("vkCmdUpdateBuffer", cb, args)

    def before_vkCmdCopyBuffer(self, cb, commandBuffer, *args):
        self._transfer("vkCmdCopyBuffer", cb, args)

    def before_vkCmdCopyBuffer2(self, cb, commandBuffer, *args):
        self._transfer("vkCmdCopyBuffer2", cb, args)

    def before_vkCmdClearColorImage(self, cb, commandBuffer, *args):
        self._transfer("vkCmdClearColorImage", cb, args)

    def before_vkCmdClearDepthStencilImage(self, cb, commandBuffer, *args):
        self._transfer("vkCmdClearDepthStencilImage", cb, args)

    def before_vkCmdCopyImage(self, cb, commandBuffer, *args):
        self._transfer("vkCmdCopyImage", cb, args)

    def before_vkCmdCopyImage2(self, cb, commandBuffer, *args):
        self._transfer("vkCmdCopyImage2", cb, args)

    def before_vkCmdBlitImage(self, cb, commandBuffer, *args):
        self._transfer("vkCmdBlitImage", cb, args)

    def before_vkCmdBlitImage2(self, cb, commandBuffer, *args):
        self._transfer("vkCmdBlitImage2", cb, args)

    def before_vkCmdResolveImage(self, cb, commandBuffer, *args):
        self._transfer("vkCmdResolveImage", cb, args)

    def before_vkCmdResolveImage2(self, cb, commandBuffer, *args):
        self._transfer("vkCmdResolveImage2", cb, args)

    def before_vkCmdCopyBufferToImage(self, cb, commandBuffer, *args):
        self._transfer("vkCmdCopyBufferToImage", cb, args)

    def before_vkCmdCopyBufferToImage2(self, cb, commandBuffer, *args):
        self._transfer("vkCmdCopyBufferToImage2", cb, args)

    def before_vkCmdCopyImageToBuffer(self, cb, commandBuffer, *args):
        self._transfer("vkCmdCopyImageToBuffer", cb, args)

    def before_vkCmdCopyImageToBuffer2(self, cb, commandBuffer, *args):
        self._transfer("vkCmdCopyImageToBuffer2", cb, args)

    apply_vkCmdFillBuffer = before_vkCmdFillBuffer
    apply_vkCmdUpdateBuffer = before_vkCmdUpdateBuffer
    apply_vkCmdCopyBuffer = before_vkCmdCopyBuffer
    apply_vkCmdCopyBuffer2 = before_vkCmdCopyBuffer2
    apply_vkCmdClearColorImage = before_vkCmdClearColorImage
    apply_vkCmdClearDepthStencilImage = before_vkCmdClearDepthStencilImage
    apply_vkCmdCopyImage = before_vkCmdCopyImage
    apply_vkCmdCopyImage2 = before_vkCmdCopyImage2
    apply_vkCmdBlitImage = before_vkCmdBlitImage
    apply_vkCmdBlitImage2 = before_vkCmdBlitImage2
    apply_vkCmdResolveImage = before_vkCmdResolveImage
    apply_vkCmdResolveImage2 = before_vkCmdResolveImage2
    apply_vkCmdCopyBufferToImage = before_vkCmdCopyBufferToImage
    apply_vkCmdCopyBufferToImage2 = before_vkCmdCopyBufferToImage2
    apply_vkCmdCopyImageToBuffer = before_vkCmdCopyImageToBuffer
    apply_vkCmdCopyImageToBuffer2 = before_vkCmdCopyImageToBuffer2

    # ---- ordering and secondaries ---------------------------------------
    def before_vkCmdPipelineBarrier(self, cb, commandBuffer, src, dst, flags, *barriers):
        self.shadow.barrier(cb, [(src, dst)])

    def before_vkCmdPipelineBarrier2(self, cb, commandBuffer, info):
        self.shadow.barrier(cb, dependency_masks(info))

    def before_vkCmdWaitEvents(self, cb, commandBuffer, count, pEvents, src, dst, *barriers):
        self.shadow.barrier(cb, [(src, dst)])

    def before_vkCmdWaitEvents2(self, cb, commandBuffer, count, pEvents, pInfos):
        self.shadow.barrier(cb, [m for i in range(count) for m in dependency_masks(pInfos[i])])

    apply_vkCmdPipelineBarrier = before_vkCmdPipelineBarrier
    apply_vkCmdWaitEvents = before_vkCmdWaitEvents

    # Recorded in C (intercepts.DEPENDENCIES): the barriers' count and reduced masks, which give the
    # same classes as the union above (the destinations that hold bottom-of-pipe are left out in C).
    def apply_vkCmdPipelineBarrier2(self, cb, commandBuffer, barriers: int, src: int, dst: int) -> None:
        self.shadow.reduced_barrier(cb, barriers, src, dst)

    def apply_vkCmdWaitEvents2(self, cb, commandBuffer, barriers: int, src: int, dst: int) -> None:
        self.shadow.reduced_barrier(cb, barriers, src, dst)

    def before_vkCmdExecuteCommands(self, cb, commandBuffer, count, pCommandBuffers):
        self.shadow.execute(cb, [self.objects.get(pCommandBuffers[i], CommandBuffer) for i in range(count)])

    apply_vkCmdExecuteCommands = before_vkCmdExecuteCommands   # recorded in C (intercepts.EXECUTE)


def register(drv: Driver) -> None:
    recording = drv.hooks.bind(ShadowRecording(drv))
    # acceleration structures, ray-tracing pipelines and shader objects: what sizes and costs them
    accel.register(drv.hooks)
    pipelines.register_ray_tracing(drv.hooks, drv.ffi, recording.stage_costs)
    pipelines.register_shader_objects(drv.hooks, drv.ffi, recording.stage_costs)

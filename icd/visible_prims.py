"""Measured visible primitives (MaliGeomVisiblePrim): each draw's clip-space positions captured with the
backend's transform feedback and culled on the CPU as a Mali's tiler culls them (#27).

Role: with `TESSERA_COUNTERS=measured` (measured_counters.py) on a device whose backend has
VK_EXT_transform_feedback and whose application did not enable it, the driver

  - creates every graphics pipeline (a vertex stage, a fragment stage or none; no tessellation,
    geometry or mesh shading, no multiview, no rasterizer discard, not points) with a vertex shader
    that also writes its Position output to transform feedback buffer 0
    (spirv/passes/capture_position.py: the Xfb execution mode; outside active transform feedback
    the pipeline draws as the application's), and keeps what culls
    its primitives on the pipeline's record (`Plan`: topology, cull mode, front face, the viewport's
    y direction, depth clipping, which of them are dynamic state);
  - in every primary command buffer of such a device, sends vkCmdDraw and vkCmdDrawIndexed to their
    Python hooks (`Recorder.python_brackets(..., draws=True)`: the C recorder's folded-draw path
    checks it) and keeps the dynamic state that culls (vkCmdSetCullMode, vkCmdSetFrontFace,
    vkCmdSetPrimitiveTopology, vkCmdSetViewport(WithCount): forwarded by C unless the buffer has
    the flag); around each draw with such a pipeline it binds a host-visible buffer of its own
    (`DeviceCapture.take`), begins transform feedback before the draw and ends it after, writing the
    bytes captured to a counter at the buffer's end;
  - once the submit has completed (`then`, the timeline's worker, as measured_counters reads its
    queries), reads the captured positions and counts the primitives that survive
    (`count_visible`): not wholly outside one clip plane (x and y in [-w, w], z in [0, w], or
    [-w, w] under depthClipControl's negativeOneToOne; z not tested without depth clipping), and,
    for triangles, neither zero-area nor culled by the cull mode and front face (spec 28.7.1: the
    facing of a triangle from the sign of det[x y w] of its vertices, which is its framebuffer area
    with every w positive and stays right for a triangle crossing w = 0; a negative viewport height
    flips it).

Transform feedback writes strips, fans, restarted strips and indexed draws as independent
primitives in winding-preserving order (spec 30.1), so the CPU needs only the vertices per primitive.
A render pass's visible primitives (`pass_visible`) are its draws' sum, and only when every draw was
captured and read: a pass with an indirect, multi, mesh or byte-count draw, a draw of a pipeline
without a plan (shader objects, pipeline libraries, points, ...) or whose dynamic state was not set
in the buffer shows none (docs/counters.md "Measured"). Without measured counters the driver does
not hand out the state commands (CAPTURE_ONLY); on a device without the feature C forwards them and
the draws. The memo of small captures' counts (`DeviceCapture.memo`) spares a steady frame numpy's
~20 µs per count.

State: the device's `DeviceCapture` (slot; its buffers, reused by capacity class, freed in
`destroyed`); a primary command buffer's `_State` (slot: the dynamic state set, the draw being
captured); a Draw's `visible` (recording.Draw: the `Capture`, whose buffer goes back to its device's
free list when the last op list holding it goes). Threads: recording threads take and give back
buffers (list operations under the GIL; new buffers under `lock`); the worker reads them.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from . import shader_modules
from .driver import Driver
from .feature import DeviceRequest, Feature
from .indirect_sizes import then
from .objects import CommandBuffer, Device
from .recording import Draw

if TYPE_CHECKING:
    import numpy as np

EXTENSION = "VK_EXT_transform_feedback"
# The state-setting commands only this module reads: handed out only with measured counters on (entry.py), so
# without them the application calls the backend's as before.
CAPTURE_ONLY = ("vkCmdSetCullMode", "vkCmdSetFrontFace", "vkCmdSetPrimitiveTopology", "vkCmdSetViewport",
                "vkCmdSetViewportWithCount")
STRIDE = 16                          # bytes per captured vertex (a vec4 position)
MIN_CAPACITY = 256                   # vertices of the smallest buffer; capacities are powers of two
# Counts of small captures are remembered by their bytes and culling state: a steady frame captures the same
# positions again, and numpy's ~20 µs per count of a few triangles would otherwise be paid per draw and frame.
MEMO_BYTES, MEMO_ENTRIES = 4096, 4096
_USAGE = (vk.VK_BUFFER_USAGE_TRANSFORM_FEEDBACK_BUFFER_BIT_EXT
          | vk.VK_BUFFER_USAGE_TRANSFORM_FEEDBACK_COUNTER_BUFFER_BIT_EXT)
_HOST_COHERENT = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
# Topology -> vertices per captured primitive (adjacency vertices are not captured). Points are not
# counted: a point sprite whose centre lies outside the view volume can still cover pixels, which a
# test of its position would miss; patches need tessellation, which is not captured.
PER_PRIMITIVE = {1: 2, 2: 2, 3: 3, 4: 3, 5: 3, 6: 2, 7: 2, 8: 3, 9: 3}
_LISTS = {1, 3}                      # LINE_LIST, TRIANGLE_LIST: at most `count` vertices captured
# Dynamic state a plan follows from the command buffer; those it cannot follow refuse the pipeline.
_FOLLOWED = {vk.VK_DYNAMIC_STATE_CULL_MODE, vk.VK_DYNAMIC_STATE_FRONT_FACE, vk.VK_DYNAMIC_STATE_PRIMITIVE_TOPOLOGY,
             vk.VK_DYNAMIC_STATE_VIEWPORT, vk.VK_DYNAMIC_STATE_VIEWPORT_WITH_COUNT}
_REFUSED = {vk.VK_DYNAMIC_STATE_RASTERIZER_DISCARD_ENABLE, vk.VK_DYNAMIC_STATE_DEPTH_CLAMP_ENABLE_EXT,
            vk.VK_DYNAMIC_STATE_DEPTH_CLIP_ENABLE_EXT, vk.VK_DYNAMIC_STATE_DEPTH_CLIP_NEGATIVE_ONE_TO_ONE_EXT}
_CULL_FRONT, _CULL_BACK = 0x1, 0x2
_CLOCKWISE = 1                       # VK_FRONT_FACE_CLOCKWISE


def count_visible(positions: np.ndarray, per_primitive: int, cull_mode: int, front_face: int, flip_y: bool,
                  depth_clip: bool = True, z_negative_one: bool = False) -> int:
    """The primitives of `positions` (clip-space x, y, z, w per vertex, `per_primitive` vertices each)
    that survive Mali's culling: the frustum test (wholly outside one clip plane), then for
    triangles the zero-area and facing tests (VkCullModeFlags `cull_mode`, VkFrontFace `front_face`;
    `flip_y`: the viewport's height is negative)."""
    import numpy as np   # here: only measured counters count, and numpy takes ~35 ms to import at start-up
    n = len(positions) // per_primitive
    p = np.asarray(positions[:n * per_primitive], dtype=np.float64).reshape(n, per_primitive, 4)
    x, y, z, w = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    out = (x > w).all(1) | (x < -w).all(1) | (y > w).all(1) | (y < -w).all(1)
    if depth_clip:
        out |= (z > w).all(1) | ((z < -w) if z_negative_one else (z < 0)).all(1)
    keep = ~out
    if per_primitive == 3:
        (x0, x1, x2), (y0, y1, y2), (w0, w1, w2) = x.T, y.T, w.T
        det = x0 * (y1 * w2 - y2 * w1) - y0 * (x1 * w2 - x2 * w1) + w0 * (x1 * y2 - x2 * y1)   # det[x y w]
        # spec 28.7.1: a = -1/2 sum(x_i y_i+1 - x_i+1 y_i) in framebuffer coordinates; y grows downwards
        # with a positive viewport height, so a has the sign of -det (of +det with a negative height)
        area = det if flip_y else -det
        front = area > 0 if front_face != _CLOCKWISE else area < 0
        keep &= det != 0
        if cull_mode & _CULL_FRONT:
            keep &= ~front
        if cull_mode & _CULL_BACK:
            keep &= front
    return int(np.count_nonzero(keep))


@dataclass(frozen=True)
class Plan:
    """What culls a captured pipeline's primitives (None: dynamic state, read from the command buffer)."""
    topology: int | None
    cull_mode: int | None
    front_face: int | None
    flip_y: bool | None
    depth_clip: bool
    z_negative_one: bool


class _Buffer:
    """A capture buffer: `capacity` positions, then the counter; with the arrays its commands take, made once."""
    __slots__ = ("buffer", "memory", "mapped", "capacity", "handles", "zero", "size", "counter")

    def __init__(self, ffi, buffer, memory, mapped, capacity: int) -> None:
        self.buffer, self.memory, self.mapped, self.capacity = buffer, memory, mapped, capacity
        self.handles = ffi.new("VkBuffer[1]", [buffer])
        self.zero = ffi.new("VkDeviceSize[1]", [0])
        self.size = ffi.new("VkDeviceSize[1]", [capacity * STRIDE])      # the positions' range
        self.counter = self.size                                         # the counter's offset: right after them


class DeviceCapture:
    """The driver's transform feedback buffers of one device, by capacity (vertices)."""

    def __init__(self, ffi, dev: Device) -> None:
        self.ffi, self.dev = ffi, dev
        self.free: dict[int, list[_Buffer]] = {}
        self.made: list[_Buffer] = []
        self.lock = threading.Lock()
        self.destroyed = False
        self.multiview: set[int] = set()          # render passes with multiview (no transform feedback there)
        self.memo: dict[tuple, int] = {}          # (captured bytes, culling state) -> visible (the worker's)
        mem = ffi.new("VkPhysicalDeviceMemoryProperties *")
        dev.physical.next.vkGetPhysicalDeviceMemoryProperties(dev.physical.handle, mem)
        self.memory_type = next((i for i in range(mem.memoryTypeCount)
                                 if mem.memoryTypes[i].propertyFlags & _HOST_COHERENT == _HOST_COHERENT), None)
        if self.memory_type is None:
            raise RuntimeError("the backend has no host-visible, coherent memory")
        nxt = dev.next
        self.bind_buffers = nxt.vkCmdBindTransformFeedbackBuffersEXT
        self.begin, self.end = nxt.vkCmdBeginTransformFeedbackEXT, nxt.vkCmdEndTransformFeedbackEXT
        if None in (self.bind_buffers, self.begin, self.end):
            raise RuntimeError("the backend lacks the transform feedback commands")

    def take(self, vertices: int) -> "Capture | None":
        capacity = MIN_CAPACITY
        while capacity < vertices:
            capacity *= 2
        try:
            buf = self.free.setdefault(capacity, []).pop()
        except IndexError:
            with self.lock:
                if self.destroyed:
                    return None
                buf = self._make(capacity)
            if buf is None:
                return None
        return Capture(self, buf)

    def _make(self, capacity: int) -> _Buffer | None:
        ffi, dev = self.ffi, self.dev
        size = capacity * STRIDE + 16         # the counter after the positions
        info = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                                "usage": _USAGE})
        out = ffi.new("VkBuffer *")
        if dev.next.vkCreateBuffer(dev.handle, info, ffi.NULL, out) != vk.VK_SUCCESS:
            return None
        reqs = ffi.new("VkMemoryRequirements *")
        dev.next.vkGetBufferMemoryRequirements(dev.handle, out[0], reqs)
        ainfo = ffi.new("VkMemoryAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                   "allocationSize": reqs.size, "memoryTypeIndex": self.memory_type})
        mem = ffi.new("VkDeviceMemory *")
        ptr = ffi.new("void **")
        if dev.next.vkAllocateMemory(dev.handle, ainfo, ffi.NULL, mem) != vk.VK_SUCCESS:
            dev.next.vkDestroyBuffer(dev.handle, out[0], ffi.NULL)
            return None
        if dev.next.vkBindBufferMemory(dev.handle, out[0], mem[0], 0) != vk.VK_SUCCESS or \
                dev.next.vkMapMemory(dev.handle, mem[0], 0, vk.VK_WHOLE_SIZE, 0, ptr) != vk.VK_SUCCESS:
            dev.next.vkDestroyBuffer(dev.handle, out[0], ffi.NULL)
            dev.next.vkFreeMemory(dev.handle, mem[0], ffi.NULL)
            return None
        buf = _Buffer(ffi, out[0], mem[0], ffi.cast("char *", ptr[0]), capacity)
        self.made.append(buf)
        return buf

    def destroy(self) -> None:
        with self.lock:
            self.destroyed = True
            made, self.made = self.made, []
        for buf in made:
            self.dev.next.vkDestroyBuffer(self.dev.handle, buf.buffer, self.ffi.NULL)
            self.dev.next.vkFreeMemory(self.dev.handle, buf.memory, self.ffi.NULL)


class Capture:
    """One draw's capture: its buffer (given back when unreferenced), what culls it, its last count."""
    __slots__ = ("owner", "buf", "per_primitive", "cull_mode", "front_face", "flip_y", "depth_clip",
                 "z_negative_one", "visible")

    def __init__(self, owner: DeviceCapture, buf: _Buffer) -> None:
        self.owner, self.buf = owner, buf
        self.visible: int | None = None

    def __del__(self) -> None:
        if not self.owner.destroyed:
            self.owner.free.setdefault(self.buf.capacity, []).append(self.buf)

    def read(self) -> None:
        """This execution's count (the timeline's worker, after the submit completed): None when the
        counter says more was written than the buffer holds."""
        self.visible = None
        if self.owner.destroyed:
            return
        ffi, buf = self.owner.ffi, self.buf
        written = int(ffi.cast("uint32_t *", buf.mapped + buf.capacity * STRIDE)[0])
        if written % STRIDE or written > buf.capacity * STRIDE:
            return
        if written // STRIDE % self.per_primitive:
            return
        state = (self.per_primitive, self.cull_mode, self.front_face, self.flip_y, self.depth_clip, self.z_negative_one)
        key = None
        if written <= MEMO_BYTES:
            key = (ffi.buffer(buf.mapped, written)[:], *state)
            hit = self.owner.memo.get(key)
            if hit is not None:
                self.visible = hit
                return
        import numpy as np
        positions = np.frombuffer(ffi.buffer(buf.mapped, written), dtype=np.float32).reshape(-1, 4)
        self.visible = count_visible(positions, *state)
        if key is not None:
            memo = self.owner.memo
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            memo[key] = self.visible


@dataclass
class _State:
    """This module's state on a primary command buffer of a capturing device (dropped at reset)."""
    cull_mode: int | None = None
    front_face: int | None = None
    topology: int | None = None
    flip_y: bool | None = None
    capture: Capture | None = None       # the draw being captured (its transform feedback is active)


def pass_visible(draws: list) -> int | None:
    """A render pass's visible primitives: the sum of its draws' captures, None unless each was read."""
    total = 0
    for d in draws:
        c = d.visible
        if c is None or c.visible is None:
            return None
        total += c.visible
    return total if draws else None


class VisiblePrimitives(Feature):
    """The captures and their counts, one method per command (HookSet.bind)."""

    label = "measured visible primitives (transform feedback)"
    defers_begin = False   # its begin hook routes the buffer's commands to Python

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi, self.hooks = drv, drv.ffi, drv.hooks
        self.report = drv.hooks.errors.report
        self.log = drv.hooks.errors.log
        self.pending: dict[int, list] = {}     # pPipelines address -> [plans, keep, modules]

    # ---- device lifecycle (icd/feature.py) ---------------------------------------------------
    def wants(self, request: DeviceRequest) -> bool:
        """Measured counters on, the backend has transform feedback, the application does not use it."""
        if not self.drv.measured_counters or EXTENSION in request.names or \
                EXTENSION not in (request.phys.extensions or {}):
            return False
        ffi, phys = self.ffi, request.phys
        xfb = ffi.new("VkPhysicalDeviceTransformFeedbackFeaturesEXT *",
                      {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TRANSFORM_FEEDBACK_FEATURES_EXT})
        f2 = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                                      "pNext": xfb})
        phys.next.vkGetPhysicalDeviceFeatures2(phys.handle, f2)
        return bool(xfb.transformFeedback)

    def enable(self, request: DeviceRequest) -> None:
        """The extension and its feature in the driver's copy of the create info (never the application's)."""
        ffi, info = self.ffi, request.info
        names = structs.strings(ffi, info.ppEnabledExtensionNames, info.enabledExtensionCount)
        info.ppEnabledExtensionNames = structs.string_array(ffi, [*names, EXTENSION], request.keep)
        info.enabledExtensionCount = len(names) + 1
        xfb = ffi.new("VkPhysicalDeviceTransformFeedbackFeaturesEXT *",
                      {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TRANSFORM_FEEDBACK_FEATURES_EXT,
                       "pNext": info.pNext, "transformFeedback": vk.VK_TRUE})
        request.keep.append(xfb)
        info.pNext = xfb

    def created(self, dev: Device, request: DeviceRequest) -> None:
        capture = DeviceCapture(self.ffi, dev)
        dev.slot(DeviceCapture, lambda: capture)

    def destroyed(self, dev: Device) -> None:
        capture = dev.drop(DeviceCapture)
        if capture is not None:
            capture.destroy()

    # ---- render passes with multiview: no transform feedback in them (VUID-vkCmdBeginTransformFeedbackEXT-None-02373)
    def after_vkCreateRenderPass(self, dev, result, device, pCreateInfo, pAllocator, pRenderPass):
        capture = dev.peek(DeviceCapture)
        if capture is None or result != vk.VK_SUCCESS:
            return
        mv = structs.find(self.ffi, pCreateInfo.pNext, vk.VK_STRUCTURE_TYPE_RENDER_PASS_MULTIVIEW_CREATE_INFO,
                          "VkRenderPassMultiviewCreateInfo *")
        if mv is not None and any(mv.pViewMasks[i] for i in range(mv.subpassCount)):
            capture.multiview.add(int(pRenderPass[0]))

    def after_vkCreateRenderPass2(self, dev, result, device, pCreateInfo, pAllocator, pRenderPass):
        capture = dev.peek(DeviceCapture)
        if capture is not None and result == vk.VK_SUCCESS and \
                any(pCreateInfo.pSubpasses[i].viewMask for i in range(pCreateInfo.subpassCount)):
            capture.multiview.add(int(pRenderPass[0]))

    # ---- pipelines: the capturing vertex shader ---------------------------------------------
    def plan(self, capture: DeviceCapture, info) -> Plan | None:
        """What culls the pipeline's primitives, or None when this module does not capture it."""
        ffi = self.ffi
        stages = {info.pStages[i].stage for i in range(info.stageCount)}
        if info.flags & vk.VK_PIPELINE_CREATE_LIBRARY_BIT_KHR or vk.VK_SHADER_STAGE_VERTEX_BIT not in stages or \
                not stages <= {vk.VK_SHADER_STAGE_VERTEX_BIT, vk.VK_SHADER_STAGE_FRAGMENT_BIT}:
            return None     # a depth-only pipeline (no fragment stage) is captured too
        raster, assembly = info.pRasterizationState, info.pInputAssemblyState
        if raster == ffi.NULL or assembly == ffi.NULL or raster.rasterizerDiscardEnable:
            return None
        if int(info.renderPass) in capture.multiview:
            return None
        rendering = structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
                                 "VkPipelineRenderingCreateInfo *")
        if rendering is not None and rendering.viewMask and not int(info.renderPass):
            return None
        dynamic = set()
        if info.pDynamicState != ffi.NULL:
            d = info.pDynamicState
            dynamic = {d.pDynamicStates[i] for i in range(d.dynamicStateCount)}
        if dynamic & _REFUSED:
            return None
        topology = None if vk.VK_DYNAMIC_STATE_PRIMITIVE_TOPOLOGY in dynamic else assembly.topology
        if topology is not None and topology not in PER_PRIMITIVE:
            return None     # points and patches: not counted (PER_PRIMITIVE)
        flip = None
        if not dynamic & {vk.VK_DYNAMIC_STATE_VIEWPORT, vk.VK_DYNAMIC_STATE_VIEWPORT_WITH_COUNT}:
            vs = info.pViewportState
            if vs == ffi.NULL or vs.pViewports == ffi.NULL or not vs.viewportCount:
                return None
            flip = vs.pViewports[0].height < 0
        depth_clip = not raster.depthClampEnable
        clip = structs.find(ffi, raster.pNext,
                            vk.VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_DEPTH_CLIP_STATE_CREATE_INFO_EXT,
                            "VkPipelineRasterizationDepthClipStateCreateInfoEXT *")
        if clip is not None:
            depth_clip = bool(clip.depthClipEnable)
        z_negative_one = False
        if info.pViewportState != ffi.NULL:
            control = structs.find(ffi, info.pViewportState.pNext,
                                   vk.VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_DEPTH_CLIP_CONTROL_CREATE_INFO_EXT,
                                   "VkPipelineViewportDepthClipControlCreateInfoEXT *")
            z_negative_one = control is not None and bool(control.negativeOneToOne)
        return Plan(topology, None if vk.VK_DYNAMIC_STATE_CULL_MODE in dynamic else raster.cullMode,
                    None if vk.VK_DYNAMIC_STATE_FRONT_FACE in dynamic else raster.frontFace, flip, depth_clip,
                    z_negative_one)

    def before_vkCreateGraphicsPipelines(self, dev, device, cache, count, pInfos, pAllocator, pPipelines):
        """The arguments with the driver's copy of the create infos, each capturable pipeline's vertex
        stage replaced by the capturing one; None when no pipeline is captured."""
        capture = dev.peek(DeviceCapture)
        if capture is None:
            return None
        from tessera.vkapi.pipelines import _stage_code

        from .instrumentation.rewrite import graphics_stages

        ffi = self.ffi
        plans = [self.plan(capture, pInfos[i]) for i in range(count)]
        if not any(plans):
            return None
        infos = ffi.new("VkGraphicsPipelineCreateInfo[]", count)
        ffi.memmove(infos, pInfos, ffi.sizeof("VkGraphicsPipelineCreateInfo") * count)
        keep: list = [infos]
        modules: list[int] = []
        for i, plan in enumerate(plans):
            if plan is None:
                continue
            stages = graphics_stages(ffi, infos[i], keep)
            stage = next(s for s in stages if s.stage == vk.VK_SHADER_STAGE_VERTEX_BIT)
            code = _stage_code(ffi, dev, stage) if int(stage.module) else None   # inline code: not captured
            module = self.capturing_module(dev, code, structs.string(ffi, stage.pName)) if code else None
            if module is None:
                plans[i] = None
                continue
            modules.append(module)
            stage.module = module
        self.pending[int(ffi.cast("uintptr_t", pPipelines))] = [plans, keep, modules]
        return (device, cache, count, infos, pAllocator, pPipelines)

    def capturing_module(self, dev: Device, code: bytes, entry: str) -> int | None:
        """A backend shader module of `code` whose `entry` also writes its positions (the rewritten
        code is kept as the module's, so that instrumentation rewrites the capturing version)."""
        from tessera.spirv import SpirvError, parse
        from tessera.spirv.passes.capture_position import capture_position

        ffi = self.ffi
        try:
            module = parse(code)
            capture_position(module, entry)
        except SpirvError as e:
            self.log.info("visible primitives: a vertex shader is not captured (%s)", e)
            return None
        rewritten = module.to_bytes()
        result, shader = shader_modules.create(ffi, dev, rewritten)
        if result != vk.VK_SUCCESS:
            return None
        dev.res.shaders[int(shader)] = rewritten
        return int(shader)

    def after_vkCreateGraphicsPipelines(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        entry = self.pending.pop(int(self.ffi.cast("uintptr_t", pPipelines)), None)
        if entry is None:
            return
        plans, _, modules = entry
        for i, plan in enumerate(plans):
            handle = int(pPipelines[i])
            pipeline = dev.res.pipelines.get(handle)
            if plan is not None and handle and pipeline is not None:
                dev.res.pipelines[handle] = replace(pipeline, visible=plan)
        for module in modules:    # the pipelines keep their code; the modules can go
            dev.next.vkDestroyShaderModule(dev.handle, module, self.ffi.NULL)
            dev.res.shaders.pop(module, None)

    # ---- command buffers ---------------------------------------------------------------------
    def after_vkBeginCommandBuffer(self, cb, result, commandBuffer, pBeginInfo):
        """A primary buffer of a capturing device sends its draws and culling state to Python."""
        if result != vk.VK_SUCCESS or cb.device.peek(DeviceCapture) is None or \
                cb.level != vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY:
            return
        self.hooks.recorder.python_brackets(commandBuffer, True, draws=True)
        cb.slot(_State)

    def before_vkCmdSetCullMode(self, cb, commandBuffer, cullMode):
        state = cb.peek(_State)
        if state is not None:
            state.cull_mode = cullMode

    def before_vkCmdSetFrontFace(self, cb, commandBuffer, frontFace):
        state = cb.peek(_State)
        if state is not None:
            state.front_face = frontFace

    def before_vkCmdSetPrimitiveTopology(self, cb, commandBuffer, primitiveTopology):
        state = cb.peek(_State)
        if state is not None:
            state.topology = primitiveTopology

    def before_vkCmdSetViewport(self, cb, commandBuffer, firstViewport, viewportCount, pViewports):
        state = cb.peek(_State)
        if state is not None and firstViewport == 0 and viewportCount:
            state.flip_y = pViewports[0].height < 0

    def before_vkCmdSetViewportWithCount(self, cb, commandBuffer, viewportCount, pViewports):
        self.before_vkCmdSetViewport(cb, commandBuffer, 0, viewportCount, pViewports)

    # ---- draws: transform feedback around each ------------------------------------------------
    def _begin(self, cb: CommandBuffer, commandBuffer, count: int, instances: int) -> None:
        state = cb.peek(_State)
        if state is None:
            return
        state.capture = None
        p = cb.graphics_pipeline
        plan = p.visible if p is not None else None
        last = cb.ops[-1] if cb.ops else None
        if plan is None or type(last) is not Draw:
            return
        topology = plan.topology if plan.topology is not None else state.topology
        resolved = (plan.cull_mode if plan.cull_mode is not None else state.cull_mode,
                    plan.front_face if plan.front_face is not None else state.front_face,
                    plan.flip_y if plan.flip_y is not None else state.flip_y)
        k = PER_PRIMITIVE.get(topology)
        if k is None or None in resolved or count * instances == 0:
            return
        device_capture = cb.device.peek(DeviceCapture)
        c = device_capture.take(count * instances * (1 if topology in _LISTS else k))
        if c is None:
            return
        c.per_primitive = k
        c.cull_mode, c.front_face, c.flip_y = resolved
        c.depth_clip, c.z_negative_one = plan.depth_clip, plan.z_negative_one
        buf = c.buf
        device_capture.bind_buffers(commandBuffer, 0, 1, buf.handles, buf.zero, buf.size)
        device_capture.begin(commandBuffer, 0, 0, self.ffi.NULL, self.ffi.NULL)
        state.capture = c
        last.visible = c

    def _end(self, cb: CommandBuffer, commandBuffer) -> None:
        state = cb.peek(_State)
        if state is None or state.capture is None:
            return
        c, state.capture = state.capture, None
        c.owner.end(commandBuffer, 0, 1, c.buf.handles, c.buf.counter)
        then(_draw_of(cb, c), c.read, first=True, report=self.report)
        cb.needs_completion = True

    def before_vkCmdDraw(self, cb, commandBuffer, vertexCount, instanceCount, firstVertex, firstInstance):
        self._begin(cb, commandBuffer, vertexCount, instanceCount)

    def after_vkCmdDraw(self, cb, result, commandBuffer, *args):
        self._end(cb, commandBuffer)

    def before_vkCmdDrawIndexed(self, cb, commandBuffer, indexCount, instanceCount, firstIndex, vertexOffset,
                                firstInstance):
        self._begin(cb, commandBuffer, indexCount, instanceCount)

    def after_vkCmdDrawIndexed(self, cb, result, commandBuffer, *args):
        self._end(cb, commandBuffer)


def _draw_of(cb: CommandBuffer, capture: Capture) -> Draw:
    return next(op for op in reversed(cb.ops) if type(op) is Draw and op.visible is capture)


def register(drv: Driver) -> VisiblePrimitives:
    feature = drv.hooks.bind(VisiblePrimitives(drv))
    drv.features.append(feature)
    return feature

"""Shader modules and pipelines: what a bound pipeline tells about its work.

At pipeline creation, per pipeline: the compute work-group size (from the
SPIR-V, specialization applied) and, when the caller supplies a cost
function, per-stage shader costs. SPIR-V is kept per shader module until it
is destroyed. Shared by the layer and the driver (the owner of an observer
must have `res`). vkapi imports the SPIR-V toolkit here (when the first pipeline is created, not at
start-up), which sits beside it in the import order and never imports vkapi.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from . import structs
from .resources import Pipeline
from .vkconst import vk

# (stage name, SPIR-V or None, entry point, specialization values) per stage -> stage name -> cycles
CostFunction = Callable[[list[tuple[str, bytes | None, str, dict | None]]], dict[str, float]]

STAGE_NAMES = {
    vk.VK_SHADER_STAGE_VERTEX_BIT: "vertex",
    vk.VK_SHADER_STAGE_FRAGMENT_BIT: "fragment",
    vk.VK_SHADER_STAGE_COMPUTE_BIT: "compute",
}


def _spec_values(ffi, info) -> dict[int, bytes] | None:
    if info == ffi.NULL or info.mapEntryCount == 0:
        return None
    from tessera.spirv import spec_values_from_map   # the toolkit loads with the first pipeline, not at start-up
    entries = [(info.pMapEntries[i].constantID, info.pMapEntries[i].offset, info.pMapEntries[i].size)
               for i in range(info.mapEntryCount)]
    return spec_values_from_map(entries, bytes(ffi.buffer(info.pData, info.dataSize)))


def _stage_code(ffi, dev, stage) -> bytes | None:
    """SPIR-V of a pipeline stage: its module, or a VkShaderModuleCreateInfo in its pNext."""
    if int(stage.module):
        return dev.res.shaders.get(int(stage.module))
    inline = structs.find(ffi, stage.pNext, vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                          "VkShaderModuleCreateInfo *")
    return bytes(ffi.buffer(inline.pCode, inline.codeSize)) if inline is not None else None


class Pipelines:
    """Shader modules and compute/graphics pipelines: one method per command (HookSet.bind); the state
    is the owner's `res` (its SPIR-V per module, its records per pipeline)."""

    def __init__(self, ffi, costs: CostFunction | None, log: logging.Logger) -> None:
        self.ffi, self.costs, self.log = ffi, costs, log

    def after_vkCreateShaderModule(self, dev, result, device, ci, pAllocator, pModule):
        if result == vk.VK_SUCCESS:
            dev.res.shaders[int(pModule[0])] = bytes(self.ffi.buffer(ci.pCode, ci.codeSize))

    def before_vkDestroyShaderModule(self, dev, device, module, pAllocator):
        dev.res.shaders.pop(int(module), None)

    def stage_info(self, dev, stage) -> tuple[str, bytes | None, str, dict | None]:
        ffi = self.ffi
        name = STAGE_NAMES.get(stage.stage, f"stage 0x{stage.stage:x}")
        return (name, _stage_code(ffi, dev, stage), structs.string(ffi, stage.pName),
                _spec_values(ffi, stage.pSpecializationInfo))

    def after_vkCreateComputePipelines(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        for i in range(count):
            handle = int(pPipelines[i])
            if not handle:
                continue
            name, code, entry, spec = self.stage_info(dev, pInfos[i].stage)
            size = None
            if code is not None:
                from tessera.spirv import SpirvError, workgroup_size
                try:
                    size = workgroup_size(code, entry, spec)
                except SpirvError as e:
                    self.log.info("compute pipeline %#x: work-group size unknown (%s)", handle, e)
            cycles = self.costs([(name, code, entry, spec)]) if self.costs else {}
            dev.res.pipelines[handle] = Pipeline(vk.VK_PIPELINE_BIND_POINT_COMPUTE, size, cycles)

    def after_vkCreateGraphicsPipelines(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        for i in range(count):
            handle = int(pPipelines[i])
            if not handle:
                continue
            info = pInfos[i]
            stages = [self.stage_info(dev, info.pStages[s]) for s in range(info.stageCount)]
            cycles = self.costs(stages) if self.costs else {}
            dev.res.pipelines[handle] = Pipeline(vk.VK_PIPELINE_BIND_POINT_GRAPHICS, None, cycles)

    def before_vkDestroyPipeline(self, dev, device, pipeline, pAllocator):
        dev.res.pipelines.pop(int(pipeline), None)


def register(hooks, ffi, costs: CostFunction | None = None, log: logging.Logger | None = None) -> Pipelines:
    return hooks.bind(Pipelines(ffi, costs, log or hooks.errors.log))


# ---- ray-tracing pipelines (VK_KHR_ray_tracing_pipeline) --------------------------------------
# Registered by the driver only (icd/recording.py): the layer sizes trace rays by the launch size.
RAY_TRACING_STAGE_NAMES = {
    vk.VK_SHADER_STAGE_RAYGEN_BIT_KHR: "raygen", vk.VK_SHADER_STAGE_ANY_HIT_BIT_KHR: "any_hit",
    vk.VK_SHADER_STAGE_CLOSEST_HIT_BIT_KHR: "closest_hit", vk.VK_SHADER_STAGE_MISS_BIT_KHR: "miss",
    vk.VK_SHADER_STAGE_INTERSECTION_BIT_KHR: "intersection", vk.VK_SHADER_STAGE_CALLABLE_BIT_KHR: "callable",
}


class RayTracingPipelines:
    """Per ray-tracing pipeline, the cost of each stage type: the mean over its shaders (a pipeline
    may hold several miss shaders or hit groups). Pipelines created with a deferred operation get
    their handles only when it completes: they are not costed (their trace rays use the timing
    model's default ray cost). Pipeline libraries are not followed."""

    def __init__(self, ffi, costs: CostFunction | None) -> None:
        self.ffi, self.costs = ffi, costs

    def after_vkCreateRayTracingPipelinesKHR(self, dev, result, device, deferredOperation, cache, count, pInfos,
                                             pAllocator, pPipelines):
        if result != vk.VK_SUCCESS:
            return
        for i in range(count):
            handle = int(pPipelines[i])
            if handle:
                cycles = self.stage_costs(dev, pInfos[i])
                dev.res.pipelines[handle] = Pipeline(vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR, None, cycles)

    def stage_costs(self, dev, info) -> dict[str, float]:
        """Stage type -> the mean cost of the pipeline's shaders of that type."""
        ffi = self.ffi
        per_stage: dict[str, list[float]] = {}
        for s in range(info.stageCount):
            stage = info.pStages[s]
            name = RAY_TRACING_STAGE_NAMES.get(stage.stage, f"stage 0x{stage.stage:x}")
            code = _stage_code(ffi, dev, stage)
            entry = structs.string(ffi, stage.pName)
            spec = _spec_values(ffi, stage.pSpecializationInfo)
            cost = self.costs([(name, code, entry, spec)]) if self.costs else {}
            if name in cost:
                per_stage.setdefault(name, []).append(cost[name])
        return {name: sum(v) / len(v) for name, v in per_stage.items()}


def register_ray_tracing(hooks, ffi, costs: CostFunction | None = None) -> RayTracingPipelines:
    return hooks.bind(RayTracingPipelines(ffi, costs))


# ---- shader objects (VK_EXT_shader_object) --------------------------------------------------------
# A shader object is costed like a one-stage pipeline; binding shader objects binds, per bind point,
# the combination of the stages bound so far (vkCmdBindShadersEXT binds and unbinds stage by stage).
STAGE_BIND_POINTS = {vk.VK_SHADER_STAGE_COMPUTE_BIT: vk.VK_PIPELINE_BIND_POINT_COMPUTE}


class ShaderObjects:
    """Shader objects' creation and destruction (HookSet.bind); the state is the owner's `res`."""

    def __init__(self, ffi, costs: CostFunction | None, log: logging.Logger) -> None:
        self.ffi, self.costs, self.log = ffi, costs, log

    def after_vkCreateShadersEXT(self, dev, result, device, count, pInfos, pAllocator, pShaders):
        if result not in (vk.VK_SUCCESS, vk.VK_INCOMPATIBLE_SHADER_BINARY_EXT):
            return
        for i in range(count):
            handle = int(pShaders[i])
            info = pInfos[i]
            if not handle or info.codeType != vk.VK_SHADER_CODE_TYPE_SPIRV_EXT:
                continue   # binary shaders carry no SPIR-V to reflect or cost
            dev.res.shader_objects[handle] = (info.stage, self.record(handle, info))

    def record(self, handle: int, info) -> Pipeline:
        """A SPIR-V shader object as a one-stage pipeline: its work-group size (compute) and costs."""
        ffi = self.ffi
        name = STAGE_NAMES.get(info.stage, f"stage 0x{info.stage:x}")
        code = bytes(ffi.buffer(info.pCode, info.codeSize))
        entry = structs.string(ffi, info.pName)
        spec = _spec_values(ffi, info.pSpecializationInfo)
        size = None
        if info.stage == vk.VK_SHADER_STAGE_COMPUTE_BIT:
            from tessera.spirv import SpirvError, workgroup_size
            try:
                size = workgroup_size(code, entry, spec)
            except SpirvError as e:
                self.log.info("compute shader object %#x: work-group size unknown (%s)", handle, e)
        cycles = self.costs([(name, code, entry, spec)]) if self.costs else {}
        point = STAGE_BIND_POINTS.get(info.stage, vk.VK_PIPELINE_BIND_POINT_GRAPHICS)
        return Pipeline(point, size, cycles)

    def before_vkDestroyShaderEXT(self, dev, device, shader, pAllocator):
        dev.res.shader_objects.pop(int(shader), None)


def register_shader_objects(hooks, ffi, costs: CostFunction | None = None,
                            log: logging.Logger | None = None) -> ShaderObjects:
    return hooks.bind(ShaderObjects(ffi, costs, log or hooks.errors.log))

def bind_shader_objects(res, bound: dict[int, Pipeline], count: int, pStages, pShaders
                        ) -> dict[int, Pipeline | None]:
    """Update `bound` (stage bit -> shader object, a command buffer's state) for one
    vkCmdBindShadersEXT and return what is now bound per bind point (a graphics entry combines
    the graphics stages' costs; None when nothing is bound there)."""
    for i in range(count):
        stage = pStages[i]
        handle = int(pShaders[i]) if pShaders is not None else 0   # NULL pShaders: unbind all
        entry = res.shader_objects.get(handle)
        if entry is None:
            bound.pop(stage, None)
        else:
            bound[stage] = entry[1]
    compute = bound.get(vk.VK_SHADER_STAGE_COMPUTE_BIT)
    graphics = [p for stage, p in bound.items() if stage != vk.VK_SHADER_STAGE_COMPUTE_BIT]
    merged = None
    if graphics:
        cycles: dict[str, float] = {}
        for p in graphics:
            cycles.update(p.shader_cycles)
        merged = Pipeline(vk.VK_PIPELINE_BIND_POINT_GRAPHICS, None, cycles)
    return {vk.VK_PIPELINE_BIND_POINT_COMPUTE: compute, vk.VK_PIPELINE_BIND_POINT_GRAPHICS: merged}

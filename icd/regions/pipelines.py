"""Per-region counters: the counting variant of a graphics pipeline.

Role: for a device that enabled the feature, every graphics pipeline with a fragment stage gets a
second "counting" pipeline (`make_variant`): the same create info with the fragment shader rewritten
by the SPIR-V toolkit's region-counter pass (spirv/passes/region_counters.py; per-block op costs from
the compiler model) and a driver-made pipeline layout with one more descriptor set (a dynamic storage
buffer of driver memory, icd/counter_memory.py). hooks.py's vkCreateGraphicsPipelines hook calls it and
keeps the result in `DeviceRegions.variants`. The compiler and SPIR-V toolkit are imported on first
use (they are heavy, and most programs never enable the feature).

Threads: any thread creating pipelines; the device's layout list is appended under `DeviceRegions.lock`.
"""
from __future__ import annotations

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from .. import counter_memory, shader_modules
from ..objects import Device
from .props import REGION_SIZE
from .state import DeviceRegions, RegionsError, Variant

_OPS_INDEX = {"fma": 0, "cvt": 1, "sfu": 2, "ls": 3, "var": 4, "tex": 5}   # compiler BlockCost.ops order


def check(result: int, what: str) -> None:
    if result != vk.VK_SUCCESS:
        raise RegionsError(f"{what} failed ({result})")


def extended_layout(ffi, dev: Device, state: DeviceRegions, app_layout: int) -> tuple[int, int]:
    layout, set_index = counter_memory.counters_layout(ffi, dev, state.limits, app_layout)
    with state.lock:
        state.own_layouts.append(layout)
    return layout, set_index


def view_mask_of(ffi, state: DeviceRegions, info) -> int:
    """The view mask the pipeline is used with: its subpass's (VkRenderPass) or its rendering info's."""
    if int(info.renderPass):
        masks = state.view_masks.get(int(info.renderPass), ())
        return masks[info.subpass] if info.subpass < len(masks) else 0
    rendering = structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
                             "VkPipelineRenderingCreateInfo *")
    return rendering.viewMask if rendering is not None else 0


def make_variant(ffi, dev: Device, state: DeviceRegions, src, profile_key) -> Variant | None:
    """The counting pipeline of one graphics create info (None: nothing to count)."""
    from tessera.compiler import api
    from tessera.spirv import parse
    from tessera.spirv.passes.region_counters import PIPES, add_region_counters
    from tessera.vkapi.pipelines import _spec_values, _stage_code

    if src.flags & vk.VK_PIPELINE_CREATE_LIBRARY_BIT_KHR or structs.find(
            ffi, src.pNext, vk.VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR, "VkBaseInStructure *"):
        raise RegionsError("pipeline libraries are not supported")
    stage_bits = [src.pStages[s].stage for s in range(src.stageCount)]
    if vk.VK_SHADER_STAGE_FRAGMENT_BIT not in stage_bits:
        return None
    index = stage_bits.index(vk.VK_SHADER_STAGE_FRAGMENT_BIT)
    keep: list = []
    info = ffi.new("VkGraphicsPipelineCreateInfo *")
    ffi.memmove(info, src, ffi.sizeof("VkGraphicsPipelineCreateInfo"))
    stages = ffi.new("VkPipelineShaderStageCreateInfo[]", src.stageCount)
    ffi.memmove(stages, src.pStages, ffi.sizeof("VkPipelineShaderStageCreateInfo") * src.stageCount)
    info.pStages = stages
    stage = stages[index]
    code = _stage_code(ffi, dev, stage)
    if code is None:
        raise RegionsError("its fragment shader's SPIR-V is unknown to the driver")
    entry = structs.string(ffi, stage.pName)
    cost = api.shader_cost(code, entry, profile_key, _spec_values(ffi, stage.pSpecializationInfo))
    ops = [{p: b.ops[_OPS_INDEX[p]] for p in PIPES} for b in cost.blocks]
    mask = view_mask_of(ffi, state, src)
    source = "view" if mask else "layer" if vk.VK_SHADER_STAGE_GEOMETRY_BIT in stage_bits else None
    layout, set_index = extended_layout(ffi, dev, state, int(src.layout))
    module = parse(code)
    add_region_counters(module, entry, set_index, 0, REGION_SIZE, ops, source)
    result, shader = shader_modules.create(ffi, dev, module.to_bytes())
    check(result, "vkCreateShaderModule")
    stage.module = shader
    if stage.pNext != ffi.NULL:   # an inline VkShaderModuleCreateInfo would override the module
        stage.pNext = structs.rebuild_chain(ffi, [n for n in structs.chain(ffi, stage.pNext)
                                                  if n.sType != vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO],
                                            keep)
    info.layout = layout
    info.flags &= ~vk.VK_PIPELINE_CREATE_DERIVATIVE_BIT
    info.basePipelineHandle, info.basePipelineIndex = 0, -1
    out = ffi.new("VkPipeline *")
    try:
        check(dev.next.vkCreateGraphicsPipelines(dev.handle, 0, 1, info, ffi.NULL, out),
              "vkCreateGraphicsPipelines")
    finally:
        dev.next.vkDestroyShaderModule(dev.handle, shader, ffi.NULL)
    return Variant(int(out[0]), layout, set_index)

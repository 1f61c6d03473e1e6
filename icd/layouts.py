"""Pipeline layouts the driver makes beside the application's: its set layouts and push-constant ranges
plus one descriptor set of the driver's own, last (the counters' memory, counter_memory.py; the
data-graph operators' tensors, data_graph/kernels.py), so the application's sets stay bound where they are."""
from __future__ import annotations

from collections.abc import Callable

from tessera.vkapi.vkconst import vk


def with_set(ffi, dev, sets, ranges, extra, check: Callable[[int, str], None]) -> tuple[int, int]:
    """(a backend pipeline layout of `sets` then `extra`, with `ranges` as (stageFlags, offset, size)
    push-constant ranges; the index of `extra`). `check(result, what)` raises for a failed call. The
    caller checks that a set is left (maxBoundDescriptorSets)."""
    set_layouts = ffi.new("VkDescriptorSetLayout[]", [*sets, extra])
    push = ffi.new("VkPushConstantRange[]", [{"stageFlags": f, "offset": o, "size": s} for f, o, s in ranges]) \
        if ranges else ffi.NULL
    info = ffi.new("VkPipelineLayoutCreateInfo *", {
        "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": len(sets) + 1,
        "pSetLayouts": set_layouts, "pushConstantRangeCount": len(ranges), "pPushConstantRanges": push})
    out = ffi.new("VkPipelineLayout *")
    check(dev.next.vkCreatePipelineLayout(dev.handle, info, ffi.NULL, out), "vkCreatePipelineLayout")
    return int(out[0]), len(sets)

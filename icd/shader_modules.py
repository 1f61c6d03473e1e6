"""Backend shader modules of SPIR-V the driver made itself: stages rewritten for instrumentation,
per-region counters or visible primitives, tensor shaders lowered, the data-graph kernels."""
from __future__ import annotations

from typing import Any

from tessera.vkapi.vkconst import vk


def create(ffi, dev, code: bytes) -> tuple[int, Any]:
    """vkCreateShaderModule on `dev`'s backend for `code`: (its VkResult, the VkShaderModule). The words
    are copied into memory cffi owns for the call (the create info only points at them)."""
    words = ffi.new("uint32_t[]", len(code) // 4)
    ffi.memmove(words, code, len(code))
    info = ffi.new("VkShaderModuleCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                  "codeSize": len(code), "pCode": words})
    out = ffi.new("VkShaderModule *")
    result = dev.next.vkCreateShaderModule(dev.handle, info, ffi.NULL, out)
    return result, out[0]

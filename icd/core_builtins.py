"""VK_ARM_shader_core_builtins on a backend that lacks it.

Shader modules using the SPV_ARM_core_builtins built-ins are lowered
(tessera.spirv.passes.core_builtins) with the GPU profile's core count,
warps per core and warp width before the backend sees them, so the driver
can report the shaderCoreBuiltins feature as supported.
"""
from __future__ import annotations

import threading

from tessera.spirv import SpirvError, parse
from tessera.spirv.passes.core_builtins import CoreTopology, lower_core_builtins, uses_core_builtins

from .driver import Driver


def register(drv: Driver) -> None:
    ffi, hooks, profile = drv.ffi, drv.hooks, drv.profile
    topology = CoreTopology(profile.shader_cores, profile.warps_per_core, profile.warp_width)
    log = hooks.errors.log
    keep = threading.local()

    @hooks.before("vkCreateShaderModule")
    def before_create_shader(dev, device, pCreateInfo, pAllocator, pModule):
        code = bytes(ffi.buffer(pCreateInfo.pCode, pCreateInfo.codeSize))
        try:
            module = parse(code)
            if not uses_core_builtins(module):
                return None
            lower_core_builtins(module, topology)
        except SpirvError as e:
            log.info("vkCreateShaderModule: not lowered (%s); passed on as it is", e)
            return None
        lowered = module.to_bytes()
        words = ffi.new("uint32_t[]", len(lowered) // 4)
        ffi.memmove(words, lowered, len(lowered))
        info = ffi.new("VkShaderModuleCreateInfo *", pCreateInfo[0])
        info.codeSize, info.pCode = len(lowered), words
        # cffi frees `words` with its last Python reference, and the struct field is not one:
        # keep both until this thread's next lowering (the create call has returned by then).
        keep.buffers = (info, words)
        return device, info, pAllocator, pModule

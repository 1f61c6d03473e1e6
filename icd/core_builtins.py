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


class CoreBuiltins:
    """vkCreateShaderModule: a module using the Arm shader-core built-ins is lowered for this GPU's
    topology before the backend sees it."""

    def __init__(self, drv: Driver) -> None:
        self.ffi, self.log = drv.ffi, drv.hooks.errors.log
        p = drv.profile
        self.topology = CoreTopology(p.shader_cores, p.warps_per_core, p.warp_width)
        self.keep = threading.local()

    def before_vkCreateShaderModule(self, dev, device, pCreateInfo, pAllocator, pModule):
        ffi = self.ffi
        code = bytes(ffi.buffer(pCreateInfo.pCode, pCreateInfo.codeSize))
        try:
            module = parse(code)
            if not uses_core_builtins(module):
                return None
            lower_core_builtins(module, self.topology)
        except SpirvError as e:
            self.log.info("vkCreateShaderModule: not lowered (%s); passed on as it is", e)
            return None
        lowered = module.to_bytes()
        words = ffi.new("uint32_t[]", len(lowered) // 4)
        ffi.memmove(words, lowered, len(lowered))
        info = ffi.new("VkShaderModuleCreateInfo *", pCreateInfo[0])
        info.codeSize, info.pCode = len(lowered), words
        # cffi frees `words` with its last Python reference, and the struct field is not one:
        # keep both until this thread's next lowering (the create call has returned by then).
        self.keep.buffers = (info, words)
        return device, info, pAllocator, pModule


def register(drv: Driver) -> None:
    drv.hooks.bind(CoreBuiltins(drv))

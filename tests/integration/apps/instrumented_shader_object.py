"""VK_ARM_shader_instrumentation on a shader object (VK_EXT_shader_object), used directly.

Run: .venv/bin/python tests/integration/apps/instrumented_shader_object.py  (on the emulated Mali
over a backend with VK_EXT_shader_object, e.g. Mesa 25 lavapipe)
Creates examples/shaders/collatz.comp as a compute VkShaderEXT with
VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM (bit 11 in vk.xml 1.4.366), binds it with
vkCmdBindShadersEXT and, with an instrumentation object active, dispatches it twice over the
inputs of instrumentation_api.py (resultIndex 0 and 1), then once more with a shader object
created without the bit (resultIndex 2: no entries). Checks the outputs against the Python
reference and prints one JSON line with the read values, for
tests/integration/test_instrumentation.py.
"""
import ctypes
import json
import struct
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import vkapp  # noqa: E402
from compute_collatz import collatz_reference  # noqa: E402
from instrumentation_api import (COUNT, CREATE_INFO_STYPE, FEATURES_STYPE, INPUTS, INVOCATIONS,  # noqa: E402
                                 LOCAL, Extension, handle)

SHADER_INSTRUMENT_BIT = 1 << 11


def body(ctx: vkapp.Context) -> str:
    if "VK_EXT_shader_object" not in ctx.device_extensions:
        raise vkapp.CheckFailed("the device has no VK_EXT_shader_object")
    ext = Extension(ctx)
    create = vk.vkGetDeviceProcAddr(ctx.device, "vkCreateShadersEXT")
    bind = vk.vkGetDeviceProcAddr(ctx.device, "vkCmdBindShadersEXT")
    destroy = vk.vkGetDeviceProcAddr(ctx.device, "vkDestroyShaderEXT")
    storage, stage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk.VK_SHADER_STAGE_COMPUTE_BIT
    inbuf = ctx.buffer(INVOCATIONS * 4, storage, np.array(INPUTS, dtype=np.uint32))
    outbuf = ctx.buffer(INVOCATIONS * 4, storage, np.zeros(INVOCATIONS, dtype=np.uint32))
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    code = vkapp.compile_glsl(ctx.settings, vkapp.SHADER_DIR / "collatz.comp")
    spec_entry = vk.VkSpecializationMapEntry(constantID=0, offset=0, size=4)
    spec_data = vk.ffi.new("uint32_t[1]", [LOCAL])
    spec = vk.VkSpecializationInfo(mapEntryCount=1, pMapEntries=[spec_entry], dataSize=4, pData=spec_data)
    push = vk.VkPushConstantRange(stageFlags=stage, offset=0, size=4)

    def shader(flags: int):
        info = vk.VkShaderCreateInfoEXT(
            sType=vk.VK_STRUCTURE_TYPE_SHADER_CREATE_INFO_EXT, flags=flags, stage=stage,
            codeType=vk.VK_SHADER_CODE_TYPE_SPIRV_EXT, codeSize=len(code), pCode=code, pName="main",
            setLayoutCount=1, pSetLayouts=[set_layout], pushConstantRangeCount=1, pPushConstantRanges=[push],
            pSpecializationInfo=spec)
        return create(ctx.device, 1, [info], None)[0]

    instrumented, plain = shader(SHADER_INSTRUMENT_BIT), shader(0)
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])
    obj = ctypes.c_uint64(0)
    info = ctypes.create_string_buffer(struct.pack("<IxxxxQ", CREATE_INFO_STYPE, 0))
    assert ext.create(ext.device, info, None, ctypes.byref(obj)) == 0
    obj = obj.value

    cmd = ctx.command_buffer()
    bind(cmd, 1, [stage], [instrumented])
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, vk.ffi.new("uint32_t[1]", [COUNT]))
    ext.begin(handle(cmd), obj)
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)                  # resultIndex 0
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)                  # resultIndex 1
    bind(cmd, 1, [stage], [plain])
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)                  # resultIndex 2: no entries
    ext.end(handle(cmd))
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    ctx.submit([cmd])
    values = ext.read(obj)
    ext.destroy(ext.device, obj, None)
    destroy(ctx.device, instrumented, None)
    destroy(ctx.device, plain, None)
    vkapp.check_equal("collatz steps", outbuf.array(np.uint32)[:COUNT].copy(),
                      np.array([collatz_reference(int(v)) for v in INPUTS[:COUNT]], dtype=np.uint32))
    print(json.dumps({"values": values}), flush=True)
    return f"{values['total']} entries from an instrumented shader object"


if __name__ == "__main__":
    shader_object = vk.VkPhysicalDeviceShaderObjectFeaturesEXT(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT, shaderObject=vk.VK_TRUE)
    features = vk.ffi.new("char[24]")   # VkPhysicalDeviceShaderInstrumentationFeaturesARM -> shader object
    struct.pack_into("<IxxxxQI", vk.ffi.buffer(features), 0, FEATURES_STYPE,
                     handle(vk.ffi.addressof(shader_object)), 1)
    vkapp.run_main("instrumented_shader_object", body,
                   optional_device_extensions=["VK_EXT_shader_object", "VK_ARM_shader_instrumentation"],
                   device_features=features)

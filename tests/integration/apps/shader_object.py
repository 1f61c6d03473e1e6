"""A compute dispatch through a shader object (VK_EXT_shader_object) instead of a pipeline.

Run: .venv/bin/python tests/integration/apps/shader_object.py  (under `tessera run` or not; needs a
backend with VK_EXT_shader_object, e.g. Mesa 25 lavapipe)
Creates examples/shaders/collatz.comp as a VkShaderEXT (work-group size 64 by specialization),
binds it with vkCmdBindShadersEXT, dispatches 4 groups over 256 inputs (count 200) and checks
the outputs against the Python reference. Prints 'shader_object: OK ...'.
"""
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402
from compute_collatz import collatz_reference  # noqa: E402

N, COUNT, LOCAL = 256, 200, 64


def body(ctx: vkapp.Context) -> str:
    if "VK_EXT_shader_object" not in ctx.device_extensions:
        raise vkapp.CheckFailed("the device has no VK_EXT_shader_object")
    create = vk.vkGetDeviceProcAddr(ctx.device, "vkCreateShadersEXT")
    bind = vk.vkGetDeviceProcAddr(ctx.device, "vkCmdBindShadersEXT")
    destroy = vk.vkGetDeviceProcAddr(ctx.device, "vkDestroyShaderEXT")
    inputs = np.array([(i * 7919 + 13) % 20000 for i in range(N)], dtype=np.uint32)
    storage, stage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk.VK_SHADER_STAGE_COMPUTE_BIT
    inbuf = ctx.buffer(N * 4, storage, inputs)
    outbuf = ctx.buffer(N * 4, storage, np.zeros(N, dtype=np.uint32))
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    code = vkapp.compile_glsl(ctx.settings, vkapp.SHADER_DIR / "collatz.comp")
    spec_entry = vk.VkSpecializationMapEntry(constantID=0, offset=0, size=4)
    spec_data = vk.ffi.new("uint32_t[1]", [LOCAL])
    spec = vk.VkSpecializationInfo(mapEntryCount=1, pMapEntries=[spec_entry], dataSize=4, pData=spec_data)
    push = vk.VkPushConstantRange(stageFlags=stage, offset=0, size=4)
    info = vk.VkShaderCreateInfoEXT(
        sType=vk.VK_STRUCTURE_TYPE_SHADER_CREATE_INFO_EXT, stage=stage, codeType=vk.VK_SHADER_CODE_TYPE_SPIRV_EXT,
        codeSize=len(code), pCode=code, pName="main", setLayoutCount=1, pSetLayouts=[set_layout],
        pushConstantRangeCount=1, pPushConstantRanges=[push], pSpecializationInfo=spec)
    shader = create(ctx.device, 1, [info], None)[0]
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])
    cmd = ctx.command_buffer()
    bind(cmd, 1, [stage], [shader])
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, vk.ffi.new("uint32_t[1]", [COUNT]))
    vk.vkCmdDispatch(cmd, N // LOCAL, 1, 1)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    ctx.submit([cmd])
    destroy(ctx.device, shader, None)
    vkapp.check_equal("collatz steps", outbuf.array(np.uint32)[:COUNT].copy(),
                      np.array([collatz_reference(int(v)) for v in inputs[:COUNT]], dtype=np.uint32))
    return f"{COUNT} outputs of a shader object's dispatch ({N // LOCAL} groups of {LOCAL})"


if __name__ == "__main__":
    features = vk.VkPhysicalDeviceShaderObjectFeaturesEXT(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT, shaderObject=vk.VK_TRUE)
    vkapp.run_main("shader_object", body, optional_device_extensions=["VK_EXT_shader_object"],
                   device_features=features)

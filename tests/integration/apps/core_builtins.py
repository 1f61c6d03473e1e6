"""A compute shader reading the VK_ARM_shader_core_builtins built-ins.

Run: .venv/bin/python tests/integration/apps/core_builtins.py GROUPS
Enables VK_ARM_shader_core_builtins with its shaderCoreBuiltins feature,
dispatches GROUPS work groups of 64 invocations writing gl_CoreCountARM,
gl_CoreMaxIDARM, gl_WarpMaxIDARM, gl_CoreIDARM, gl_WarpIDARM, and prints the
device's VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM and the values as JSON.
"""
import json
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "examples"))
import vkapp  # noqa: E402

LOCAL = 64


def main() -> None:
    groups = int(sys.argv[1])
    settings = vkapp.Settings.from_env()
    feature = vk.VkPhysicalDeviceShaderCoreBuiltinsFeaturesARM(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_FEATURES_ARM, shaderCoreBuiltins=vk.VK_TRUE)
    ctx = vkapp.Context(settings, "core_builtins", optional_device_extensions=["VK_ARM_shader_core_builtins"],
                        device_features=feature)
    if "VK_ARM_shader_core_builtins" not in ctx.device_extensions:
        raise SystemExit("core_builtins: device lacks VK_ARM_shader_core_builtins")
    props = vk.VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_PROPERTIES_ARM)
    props2 = vk.VkPhysicalDeviceProperties2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=props)
    vk.vkGetPhysicalDeviceProperties2(ctx.physical_device, props2)

    count = groups * LOCAL
    out = ctx.buffer(count * 5 * 4, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, np.full(count * 5, 0xFFFFFFFF, np.uint32))
    stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout])
    code = vkapp.compile_glsl(settings, HERE / "shaders" / "core_builtins.comp")
    module_info = vk.VkShaderModuleCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                              codeSize=len(code), pCode=code)
    module = ctx.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(ctx.device, module_info, None))
    stage_info = vk.VkPipelineShaderStageCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                    stage=stage, module=module, pName="main")
    info = vk.VkComputePipelineCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                          stage=stage_info, layout=layout, basePipelineIndex=-1)
    pipeline = ctx.own(vk.vkDestroyPipeline, vk.vkCreateComputePipelines(ctx.device, None, 1, [info], None)[0])
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 1}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, out, 0, vkapp.WHOLE_SIZE)])
    cmd = ctx.command_buffer()
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdDispatch(cmd, groups, 1, 1)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    ctx.submit([cmd])
    values = out.array(np.uint32).reshape(count, 5).tolist()
    ctx.close()
    print(json.dumps({"properties": [props.shaderCoreCount, props.shaderWarpsPerCore, props.shaderCoreMask],
                      "values": values}))


if __name__ == "__main__":
    main()

"""Ray-query sample: a compute shader traces examples/rt_scene.py's scene with ray queries.

Run (needs a Vulkan driver with VK_KHR_ray_query, e.g. Mesa 25 lavapipe, Tessera's default
backend; add VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation to validate):
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python examples/ray_query.py

What it does: one vkCmdBuildAccelerationStructuresKHR builds bottom levels A (3 triangles) and B
(2 + 1 triangles in two geometries), both PREFER_FAST_TRACE, as two build infos of one command;
a second builds the top level (3 instances: A, A, B; PREFER_FAST_BUILD); then vkCmdDispatch (8x8
groups of 8x8) runs examples/shaders/rt_query.comp, one ray query per pixel with the same rays as
ray_tracing.py.
What it checks: the 64x64 image equals rt_scene.reference_image() exactly, the reference of
ray_tracing.py. Exit 0 and one 'ray_query: OK ...' line on success.
"""

from __future__ import annotations

import vulkan as vk

import rt_scene as rs
import vkapp

COMPUTE = vk.VK_SHADER_STAGE_COMPUTE_BIT
EXTENSIONS = rs.EXTENSIONS + ("VK_KHR_ray_query",)


def body(ctx: vkapp.Context) -> str:
    rs.require_extensions(ctx, EXTENSIONS)
    want = rs.reference_image()
    raw = rs.Raw(ctx)
    builder = rs.Builder(ctx, raw)

    cmd = ctx.command_buffer()
    blas = builder.build_bottoms(cmd, [rs.GEOMETRIES["A"], rs.GEOMETRIES["B"]], rs.FAST_TRACE)
    rs.accel_barrier(cmd, rs.AS_BUILD_STAGE, rs.AS_READ)
    by_name = {"A": blas[0], "B": blas[1]}
    tlas = builder.build_top(cmd, [(by_name[name], translation, custom)
                                   for name, translation, custom in rs.INSTANCES], rs.FAST_BUILD)
    rs.accel_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, rs.AS_READ)
    image = rs.storage_image(ctx)
    rs.to_general(cmd, image, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT)
    set_layout, (dset,) = rs.scene_descriptors(ctx, COMPUTE, tlas, [image])
    layout = ctx.pipeline_layout([set_layout])
    code = rs.spirv("rt_query.comp")
    module_info = vk.VkShaderModuleCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                              codeSize=len(code), pCode=code)
    module = ctx.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(ctx.device, module_info, None))
    stage = vk.VkPipelineShaderStageCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                               stage=COMPUTE, module=module, pName="main")
    info = vk.VkComputePipelineCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage,
                                          layout=layout, basePipelineIndex=-1)
    pipeline = ctx.own(vk.vkDestroyPipeline, vk.vkCreateComputePipelines(ctx.device, None, 1, [info], None)[0])
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdDispatch(cmd, rs.WIDTH // 8, rs.HEIGHT // 8, 1)
    ctx.submit([cmd])
    vkapp.check_equal("ray query image", rs.read_result(ctx, image, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT), want)
    builder.keep.clear()
    return (f"on {ctx.device_name}: {rs.WIDTH}x{rs.HEIGHT} pixels equal the CPU reference ({rs.describe_image(want)}); "
            f"AS sizes A={blas[0].size} B={blas[1].size}")


if __name__ == "__main__":
    FEATURES = rs.device_features(ray_tracing_pipeline=False, ray_query=True)   # kept alive: a pNext chain
    vkapp.run_main("ray_query", body, optional_device_extensions=EXTENSIONS, device_features=FEATURES[0])

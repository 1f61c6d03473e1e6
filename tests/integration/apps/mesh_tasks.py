"""Mesh-shading app: vkCmdDrawMeshTasksEXT draws (VK_EXT_mesh_shader) inside one dynamic-rendering pass.

Run (under `tessera run`, or on plain lavapipe):
    .venv/bin/tessera run --out OUT -- .venv/bin/python tests/integration/apps/mesh_tasks.py

The device is created with VK_EXT_mesh_shader (feature meshShader) and Vulkan 1.3 dynamicRendering.
One submit, one render pass instance into a 32x32 R8G8B8A8_UNORM image cleared to CLEAR, with a
pipeline of a mesh shader (shaders/mesh_rect.mesh: one rectangle per workgroup, its corners a push
constant) and examples/shaders/solid.frag (its color a push constant):
  3 x vkCmdDrawMeshTasksEXT(1, 1, 1), one after the other: rectangles R_A (RED), R_B (RED), R_C (GREEN)
So the pass holds 3 draws, consecutive (the shims fold them into one record). What it checks: every
pixel of the image against a numpy painting of the three rectangles (exact: edges are pixel-aligned).
Prints 'mesh_tasks: OK ...'.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import vulkan as vk

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "examples"))
import vkapp  # noqa: E402

W = H = 32
FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM
R_A = (2, 2, 14, 14)      # x0, y0, x1, y1 in pixels, exclusive end
R_B = (18, 4, 30, 12)
R_C = (8, 10, 24, 28)
CLEAR = (0, 0, 32, 255)
RED, GREEN = (255, 0, 0, 255), (0, 255, 0, 255)
DRAWS = [(R_A, RED), (R_B, RED), (R_C, GREEN)]
STAGES = vk.VK_SHADER_STAGE_MESH_BIT_EXT | vk.VK_SHADER_STAGE_FRAGMENT_BIT


def expected() -> np.ndarray:
    img = np.empty((H, W, 4), dtype=np.uint8)
    img[:] = CLEAR
    for (x0, y0, x1, y1), color in DRAWS:
        img[y0:y1, x0:x1] = color
    return img


def pipeline(ctx: vkapp.Context, layout) -> object:
    mesh = vkapp.compile_glsl(ctx.settings, HERE / "shaders" / "mesh_rect.mesh")
    module = ctx.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(ctx.device, vk.VkShaderModuleCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(mesh), pCode=mesh), None))
    stages = [vk.VkPipelineShaderStageCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                 stage=vk.VK_SHADER_STAGE_MESH_BIT_EXT, module=module, pName="main"),
              vk.VkPipelineShaderStageCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                 stage=vk.VK_SHADER_STAGE_FRAGMENT_BIT, module=ctx.shader("solid.frag"),
                                                 pName="main")]
    rendering = vk.VkPipelineRenderingCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
                                                 colorAttachmentCount=1, pColorAttachmentFormats=[FORMAT])
    blend = vk.VkPipelineColorBlendAttachmentState(
        blendEnable=vk.VK_FALSE, colorWriteMask=vk.VK_COLOR_COMPONENT_R_BIT | vk.VK_COLOR_COMPONENT_G_BIT
        | vk.VK_COLOR_COMPONENT_B_BIT | vk.VK_COLOR_COMPONENT_A_BIT)
    dynamic_states = [vk.VK_DYNAMIC_STATE_VIEWPORT, vk.VK_DYNAMIC_STATE_SCISSOR]
    info = vk.VkGraphicsPipelineCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO, pNext=rendering, stageCount=2, pStages=stages,
        pViewportState=vk.VkPipelineViewportStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO, viewportCount=1, scissorCount=1),
        pRasterizationState=vk.VkPipelineRasterizationStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO, polygonMode=vk.VK_POLYGON_MODE_FILL,
            cullMode=vk.VK_CULL_MODE_NONE, frontFace=vk.VK_FRONT_FACE_COUNTER_CLOCKWISE, lineWidth=1.0),
        pMultisampleState=vk.VkPipelineMultisampleStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
            rasterizationSamples=vk.VK_SAMPLE_COUNT_1_BIT),
        pColorBlendState=vk.VkPipelineColorBlendStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO, attachmentCount=1,
            pAttachments=[blend]),
        pDynamicState=vk.VkPipelineDynamicStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO, dynamicStateCount=len(dynamic_states),
            pDynamicStates=dynamic_states),
        layout=layout, basePipelineIndex=-1)
    return ctx.own(vk.vkDestroyPipeline, vk.vkCreateGraphicsPipelines(ctx.device, None, 1, [info], None)[0])


def body(ctx: vkapp.Context) -> str:
    if "VK_EXT_mesh_shader" not in ctx.device_extensions:
        raise vkapp.CheckFailed(f"device {ctx.device_name} does not offer VK_EXT_mesh_shader")
    draw_mesh_tasks = vk.vkGetDeviceProcAddr(ctx.device, "vkCmdDrawMeshTasksEXT")
    layout = ctx.pipeline_layout([], push_size=32, push_stages=STAGES)
    pipe = pipeline(ctx, layout)
    img = ctx.image(W, H, FORMAT, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
                    view=True)
    params = []   # kept alive until the submit
    for (x0, y0, x1, y1), color in DRAWS:
        params.append(vk.ffi.new("float[8]", [c / 255.0 for c in color] + [2.0 * x0 / W - 1.0, 2.0 * y0 / H - 1.0,
                                                                           2.0 * x1 / W - 1.0, 2.0 * y1 / H - 1.0]))

    cmd = ctx.command_buffer()
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0,
                        vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
    clear = vk.VkClearValue(color=vk.VkClearColorValue(float32=[c / 255.0 for c in CLEAR]))
    attachment = vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=img.view,
        imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE, clearValue=clear)
    vk.vkCmdBeginRendering(cmd, vk.VkRenderingInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
        renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
        layerCount=1, colorAttachmentCount=1, pColorAttachments=[attachment]))
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipe)
    vkapp.set_viewport_scissor(cmd, W, H)
    for p in params:
        vk.vkCmdPushConstants(cmd, layout, STAGES, 0, 32, p)
        draw_mesh_tasks(cmd, 1, 1, 1)
    vk.vkCmdEndRendering(cmd)
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                        vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
    ctx.submit([cmd])
    vkapp.check_equal("mesh-shaded pass", ctx.read_image(img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL), expected())
    return f"{W}x{H} pixels checked: 1 render pass, 3 vkCmdDrawMeshTasksEXT; on {ctx.device_name}"


def main() -> None:
    features13 = vk.VkPhysicalDeviceVulkan13Features(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, dynamicRendering=vk.VK_TRUE)
    mesh = vk.VkPhysicalDeviceMeshShaderFeaturesEXT(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MESH_SHADER_FEATURES_EXT, pNext=features13, meshShader=vk.VK_TRUE)
    vkapp.run_main("mesh_tasks", body, optional_device_extensions=["VK_EXT_mesh_shader"], device_features=mesh)


if __name__ == "__main__":
    main()

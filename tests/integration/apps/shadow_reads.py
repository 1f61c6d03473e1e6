"""A shadow map sampled by a later pass, and a sampleable image stored for nothing (#28, reads through descriptors).

Run (under `tessera run`, with or without --content, or on plain lavapipe):
    .venv/bin/tessera run --content --out OUT -- .venv/bin/python tests/integration/apps/shadow_reads.py

One command buffer, one submit, 64x64 images moved to GENERAL first, dynamic rendering; each pass in a
debug label:
  shadow   a depth-only pass (D32, DEPTH_STENCIL_ATTACHMENT | SAMPLED) clears to 1.0, draws a full-screen
           triangle at depth 0.0 and stores the depth
  wasted   stores the colour image X (COLOR_ATTACHMENT | SAMPLED | TRANSFER_SRC), which nothing samples
  lit      samples the shadow map through a combined image sampler (tests/integration/apps/shaders/
           sample_shadow.frag) into the colour image L: red = the depth sampled
  again    clears and stores X again (its first store was never read)
then L and X are copied to a buffer (the read-back).
What it checks: every pixel of L is (0, 0, 0, 255): the depth the lit pass sampled is the shadow pass's
0.0, not the clear's 1.0. Prints 'shadow_reads: OK ...'. Under --content the layer names the lit pass's
descriptor read of the shadow map: the advisor links it to the shadow pass, and calls the wasted pass's
store of X unread (tests/integration/test_advice.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import vkapp  # noqa: E402
from overdraw import Labels  # noqa: E402
from planted_advice import COLOR, DEPTH, H, W, attachment, pipeline, view  # noqa: E402

SHADER = Path(__file__).resolve().parent / "shaders" / "sample_shadow.frag"


def module(ctx: vkapp.Context, source: Path):
    code = vkapp.compile_glsl(ctx.settings, source)
    info = vk.VkShaderModuleCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code),
                                       pCode=code)
    return ctx.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(ctx.device, info, None))


def body(ctx: vkapp.Context) -> str:
    labels = Labels(ctx)
    frag = vk.VK_SHADER_STAGE_FRAGMENT_BIT
    solid_layout = ctx.pipeline_layout([], push_size=16, push_stages=frag)
    shadow_pipe = pipeline(ctx, solid_layout, depth=True, colors=0)
    plain = pipeline(ctx, solid_layout)
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, frag)])
    lit_layout = ctx.pipeline_layout([set_layout], push_size=16, push_stages=frag)
    lit_pipe = pipeline(ctx, lit_layout, fragment=module(ctx, SHADER))

    shadow = ctx.image(W, H, DEPTH, vk.VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_SAMPLED_BIT)
    view(ctx, shadow, vk.VK_IMAGE_ASPECT_DEPTH_BIT)
    colour_usage = vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
    lit = ctx.image(W, H, COLOR, colour_usage, view=True)
    x = ctx.image(W, H, COLOR, colour_usage | vk.VK_IMAGE_USAGE_SAMPLED_BIT, view=True)
    sampler = ctx.own(vk.vkDestroySampler, vk.vkCreateSampler(ctx.device, vk.VkSamplerCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO, magFilter=vk.VK_FILTER_NEAREST, minFilter=vk.VK_FILTER_NEAREST,
        mipmapMode=vk.VK_SAMPLER_MIPMAP_MODE_NEAREST, addressModeU=vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
        addressModeV=vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE, addressModeW=vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
        maxLod=0.0, borderColor=vk.VK_BORDER_COLOR_FLOAT_OPAQUE_BLACK), None))
    dset = ctx.allocate_set(ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER: 1}, 1), set_layout)
    image_info = vk.VkDescriptorImageInfo(sampler=sampler, imageView=shadow.view,
                                          imageLayout=vk.VK_IMAGE_LAYOUT_GENERAL)
    write = vk.VkWriteDescriptorSet(sType=vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, dstSet=dset, dstBinding=0,
                                    dstArrayElement=0, descriptorCount=1,
                                    descriptorType=vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
                                    pImageInfo=[image_info])
    vk.vkUpdateDescriptorSets(ctx.device, 1, [write], 0, None)
    readback = ctx.buffer(W * H * 4 * 2, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)

    cmd = ctx.command_buffer()
    all_stages = vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
    memory = vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT
    for img in (lit, x):
        vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_GENERAL,
                            vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, all_stages, memory)
    depth_range = vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_DEPTH_BIT, baseMipLevel=0, levelCount=1,
                                             baseArrayLayer=0, layerCount=1)
    vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, all_stages, 0, 0, None, 0, None, 1, [
        vk.VkImageMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER, srcAccessMask=0, dstAccessMask=memory,
                                oldLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED, newLayout=vk.VK_IMAGE_LAYOUT_GENERAL,
                                srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                                dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=shadow.handle,
                                subresourceRange=depth_range)])

    def render(label: str, atts: list, depth_att=None, pipe=plain, layout=solid_layout, descriptors=None) -> None:
        labels.push(cmd, label)
        vk.vkCmdBeginRendering(cmd, vk.VkRenderingInfo(
            sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
            renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
            layerCount=1, colorAttachmentCount=len(atts), pColorAttachments=atts or None, pDepthAttachment=depth_att))
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipe)
        if descriptors is not None:
            vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, layout, 0, 1, [descriptors], 0, None)
        vkapp.set_viewport_scissor(cmd, W, H)
        vk.vkCmdPushConstants(cmd, layout, frag, 0, 16, vk.ffi.new("float[4]", [0.2, 0.4, 0.6, 1.0]))
        vk.vkCmdDraw(cmd, 3, 1, 0, 0)
        vk.vkCmdEndRendering(cmd)
        labels.pop(cmd)

    clear, store = vk.VK_ATTACHMENT_LOAD_OP_CLEAR, vk.VK_ATTACHMENT_STORE_OP_STORE
    render("shadow", [], attachment(shadow, clear, store, depth=True), pipe=shadow_pipe)
    render("wasted", [attachment(x, clear, store)])
    vkapp.memory_barrier(cmd, vk.VK_PIPELINE_STAGE_LATE_FRAGMENT_TESTS_BIT,
                         vk.VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT, vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
                         vk.VK_ACCESS_SHADER_READ_BIT)
    render("lit", [attachment(lit, clear, store)], pipe=lit_pipe, layout=lit_layout, descriptors=dset)
    render("again", [attachment(x, clear, store)])
    for i, img in enumerate((lit, x)):
        vkapp.copy_image_to_buffer(cmd, img, vk.VK_IMAGE_LAYOUT_GENERAL, readback, i * W * H * 4)
    vkapp.host_barrier(cmd)
    ctx.submit([cmd])
    got = readback.array(np.uint8)[:W * H * 4].reshape(H, W, 4)
    vkapp.check_equal("lit pixels (the shadow pass's depth 0.0 sampled)", got,
                      np.broadcast_to(np.array([0, 0, 0, 255], dtype=np.uint8), (H, W, 4)))
    return f"{W}x{H}: the lit pass sampled the shadow pass's depth"


if __name__ == "__main__":
    vkapp.run_main("shadow_reads", body, dynamic_rendering=True)

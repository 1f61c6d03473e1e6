"""One frame with one planted anti-pattern per advice rule (#28): the advisor must find exactly these.

Run (under `tessera run`, or on plain lavapipe):
    .venv/bin/tessera run --out OUT -- .venv/bin/python tests/integration/apps/planted_advice.py
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) .venv/bin/python tests/integration/apps/planted_advice.py

One command buffer, one submit. Every image is 64x64 (R8G8B8A8_UNORM colour, D32_SFLOAT depth, 4x
multisampled colour), moved to GENERAL by barriers at the start so that no barrier sits between the
passes except the one planted. Each workload is inside a debug label naming the rule it plants
(`PLANTED`, in recording order); the draws are one full-screen triangle of a solid colour:

  load-undefined      pass "A": LOAD of an image nothing wrote (the first workload)
  binning-serialised  passes "N1", "N2" with a pipeline barrier (fragment -> vertex stage) between them
  workgroup-warp-waste a dispatch of 12-thread work groups (collatz.comp, local_size_x 12) on 16-wide warps
  clear-then-load     vkCmdClearColorImage, then pass "B" LOADs that image
  redundant-clear     vkCmdClearColorImage, then pass "C" clears that image again (LOAD_OP_CLEAR)
  store-overwritten   pass "D" stores an image that pass "E" clears right after
  msaa-stored         pass "G" (a classic render pass) stores its 4x attachment (resolved on tile too)
  resolve-transfer    vkCmdClearColorImage of a 4x image, vkCmdResolveImage of it
  transfer-then-load  vkCmdCopyImage into an image that pass "I" then LOADs
  outputs-unread      pass "J" stores nothing (STORE_OP_DONT_CARE)
  non-transient-attachment  pass "J"'s depth attachment is cleared and discarded, but its image is not
                      TRANSIENT_ATTACHMENT
  pass-round-trip     pass "L" stores an image, pass "M" right after LOADs it
  depth-store-unread  pass "F" stores its depth attachment, which nothing reads (the last pass that draws)
  empty-pass          pass "K": no draw
  small-transfers     two 64-byte vkCmdUpdateBuffer
  vertex-reuse        pass "vertex-reuse": one vkCmdDrawIndexed of INDICES (0..127 fifteen times over, the
                      validation layer's worst case): every index misses a 32-entry post-transform cache
                      (seen only under `tessera run --content`, which reads the index data back)
  high-overdraw       pass "high-overdraw": 9 full-screen triangles (the model's fragments: 64x64 x 9 x 0.25
                      = 9216 threads over 4096 pixels, overdraw 2.25)
  store-unpresented   pass "store-unpresented" stores "U" (and "U2"): nothing reads U, and the frame's
                      VkFrameBoundaryEXT (VK_EXT_frame_boundary, which the layer provides) names "O" as its
                      output image, so the layer's FRAME names its images and U's store is dead
  too-many-passes     17 render passes in the frame (over 8)
then every colour image except the multisampled ones and U is copied to a buffer (the read-back).
What it checks: nothing about pixels (the frame is about its shape). Prints 'planted_advice: OK ...'.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402
from overdraw import Labels  # noqa: E402

W = H = 64
COLOR, DEPTH = vk.VK_FORMAT_R8G8B8A8_UNORM, vk.VK_FORMAT_D32_SFLOAT
MS = vk.VK_SAMPLE_COUNT_4_BIT
# The label of each planted workload, in recording order (the test reads them back).
PLANTED = ["load-undefined", "binning-serialised", "workgroup-warp-waste", "clear-then-load", "redundant-clear",
           "store-overwritten", "msaa-stored", "resolve-transfer", "transfer-then-load", "outputs-unread",
           "non-transient-attachment", "pass-round-trip", "depth-store-unread", "empty-pass", "vertex-reuse",
           "high-overdraw", "store-unpresented", "small-transfers"]
GROUP_SIZE = 12
INDICES = np.tile(np.arange(128, dtype=np.uint16), 15)     # 1920 indices, 640 triangles, 128 distinct vertices
OVERDRAW_DRAWS = 9


def pipeline(ctx: vkapp.Context, layout, *, depth: bool = False, samples: int = vk.VK_SAMPLE_COUNT_1_BIT,
             colors: int = 1, render_pass=None, fragment=None):
    """A full-screen triangle writing a push-constant colour, for dynamic rendering into `colors` COLOR
    attachments (and a DEPTH one), or for subpass 0 of `render_pass`, `samples` per pixel; `fragment`:
    another fragment shader module than solid.frag's."""
    stages = [vk.VkPipelineShaderStageCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                 stage=stage, module=module, pName="main")
              for stage, module in ((vk.VK_SHADER_STAGE_VERTEX_BIT, ctx.shader("fullscreen.vert")),
                                    (vk.VK_SHADER_STAGE_FRAGMENT_BIT, fragment or ctx.shader("solid.frag")))]
    rendering = vk.VkPipelineRenderingCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO, colorAttachmentCount=colors,
        pColorAttachmentFormats=[COLOR] * colors, depthAttachmentFormat=DEPTH if depth else vk.VK_FORMAT_UNDEFINED)
    depth_state = vk.VkPipelineDepthStencilStateCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO, depthTestEnable=depth,
        depthWriteEnable=depth, depthCompareOp=vk.VK_COMPARE_OP_LESS_OR_EQUAL, maxDepthBounds=1.0)
    info = vk.VkGraphicsPipelineCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO, pNext=None if render_pass else rendering,
        renderPass=render_pass, subpass=0, stageCount=2, pStages=stages,
        pVertexInputState=vk.VkPipelineVertexInputStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO),
        pInputAssemblyState=vk.VkPipelineInputAssemblyStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
            topology=vk.VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST),
        pViewportState=vk.VkPipelineViewportStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO, viewportCount=1, scissorCount=1),
        pRasterizationState=vk.VkPipelineRasterizationStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO, polygonMode=vk.VK_POLYGON_MODE_FILL,
            cullMode=vk.VK_CULL_MODE_NONE, frontFace=vk.VK_FRONT_FACE_COUNTER_CLOCKWISE, lineWidth=1.0),
        pMultisampleState=vk.VkPipelineMultisampleStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO, rasterizationSamples=samples),
        pDepthStencilState=depth_state,   # always: the validation layer 1.3.239's best practices read it
        pColorBlendState=vk.VkPipelineColorBlendStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO, attachmentCount=colors,
            pAttachments=[vk.VkPipelineColorBlendAttachmentState(blendEnable=vk.VK_FALSE, colorWriteMask=0xF)] * colors),
        pDynamicState=vk.VkPipelineDynamicStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO, dynamicStateCount=2,
            pDynamicStates=[vk.VK_DYNAMIC_STATE_VIEWPORT, vk.VK_DYNAMIC_STATE_SCISSOR]),
        layout=layout, basePipelineIndex=-1)
    return ctx.own(vk.vkDestroyPipeline, vk.vkCreateGraphicsPipelines(ctx.device, None, 1, [info], None)[0])


def msaa_render_pass(ctx: vkapp.Context):
    """A classic render pass: a 4x colour attachment (cleared, stored) resolved into a 1x one. (A
    classic pass, not dynamic rendering: the validation layer 1.3.239's best practices crash on a
    multisampled pipeline made for dynamic rendering.)"""
    general = vk.VK_IMAGE_LAYOUT_GENERAL
    atts = [vk.VkAttachmentDescription(format=COLOR, samples=MS, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
                                       storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
                                       stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
                                       stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE,
                                       initialLayout=general, finalLayout=general),
            vk.VkAttachmentDescription(format=COLOR, samples=vk.VK_SAMPLE_COUNT_1_BIT,
                                       loadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
                                       storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
                                       stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
                                       stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE,
                                       initialLayout=general, finalLayout=general)]
    subpass = vk.VkSubpassDescription(
        pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS, colorAttachmentCount=1,
        pColorAttachments=[vk.VkAttachmentReference(attachment=0, layout=general)],
        pResolveAttachments=[vk.VkAttachmentReference(attachment=1, layout=general)])
    info = vk.VkRenderPassCreateInfo(sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO, attachmentCount=2,
                                     pAttachments=atts, subpassCount=1, pSubpasses=[subpass])
    return ctx.own(vk.vkDestroyRenderPass, vk.vkCreateRenderPass(ctx.device, info, None))


def view(ctx: vkapp.Context, img: vkapp.Image, aspect: int) -> None:
    rng = vk.VkImageSubresourceRange(aspectMask=aspect, baseMipLevel=0, levelCount=1, baseArrayLayer=0,
                                     layerCount=1)
    info = vk.VkImageViewCreateInfo(sType=vk.VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO, image=img.handle,
                                    viewType=vk.VK_IMAGE_VIEW_TYPE_2D, format=img.format, subresourceRange=rng)
    img.view = ctx.own(vk.vkDestroyImageView, vk.vkCreateImageView(ctx.device, info, None))


def attachment(img: vkapp.Image, load: int, store: int, *, depth: bool = False, resolve: vkapp.Image | None = None):
    clear = (vk.VkClearValue(depthStencil=vk.VkClearDepthStencilValue(depth=1.0, stencil=0)) if depth
             else vk.VkClearValue(color=vk.VkClearColorValue(float32=[0.0, 0.0, 0.0, 1.0])))
    return vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=img.view,
        imageLayout=vk.VK_IMAGE_LAYOUT_GENERAL, loadOp=load, storeOp=store, clearValue=clear,
        resolveMode=vk.VK_RESOLVE_MODE_AVERAGE_BIT if resolve else vk.VK_RESOLVE_MODE_NONE,
        resolveImageView=resolve.view if resolve else None, resolveImageLayout=vk.VK_IMAGE_LAYOUT_GENERAL)


def body(ctx: vkapp.Context) -> str:
    labels = Labels(ctx)
    layout = ctx.pipeline_layout([], push_size=16, push_stages=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
    msaa_pass = msaa_render_pass(ctx)
    plain, with_depth = pipeline(ctx, layout), pipeline(ctx, layout, depth=True)
    msaa = pipeline(ctx, layout, samples=MS, render_pass=msaa_pass)
    two = pipeline(ctx, layout, colors=2)
    color_usage = (vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
                   | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)
    colors = {name: ctx.image(W, H, COLOR, color_usage, view=True)
              for name in ("A", "N1", "N2", "B", "C", "D", "D2", "G", "R", "src", "I", "J", "L", "F", "K", "V", "O",
                           "U2")}
    unread = ctx.image(W, H, COLOR, color_usage, view=True)      # store-unpresented's U: never read back
    ms = {name: ctx.image(W, H, COLOR, color_usage, samples=MS) for name in ("G", "resolve")}
    depth, tile_depth = (ctx.image(W, H, DEPTH, vk.VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT) for _ in range(2))
    view(ctx, ms["G"], vk.VK_IMAGE_ASPECT_COLOR_BIT)
    view(ctx, depth, vk.VK_IMAGE_ASPECT_DEPTH_BIT)
    view(ctx, tile_depth, vk.VK_IMAGE_ASPECT_DEPTH_BIT)
    framebuffer = ctx.own(vk.vkDestroyFramebuffer, vk.vkCreateFramebuffer(ctx.device, vk.VkFramebufferCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO, renderPass=msaa_pass, attachmentCount=2,
        pAttachments=[ms["G"].view, colors["G"].view], width=W, height=H, layers=1), None))

    values = np.arange(64 * GROUP_SIZE, dtype=np.uint32)
    inputs = ctx.buffer(values.nbytes, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, values)
    outputs = ctx.buffer(values.nbytes, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    set_layout = ctx.set_layout([(b, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk.VK_SHADER_STAGE_COMPUTE_BIT)
                                 for b in (0, 1)])
    compute_layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=vk.VK_SHADER_STAGE_COMPUTE_BIT)
    collatz = ctx.compute_pipeline("collatz.comp", compute_layout, spec={0: GROUP_SIZE})
    dset = ctx.allocate_set(ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, 1), set_layout)
    ctx.write_storage_buffers(dset, [(0, inputs, 0, values.nbytes), (1, outputs, 0, values.nbytes)])
    readback = ctx.buffer(W * H * 4 * len(colors), vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    index_buffer = ctx.buffer(INDICES.nbytes, vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT, INDICES)

    cmd = ctx.command_buffer()
    everything = [*colors.values(), *ms.values(), unread]
    for img in everything:
        vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_GENERAL,
                            vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                            vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)
    depth_barriers = [vk.VkImageMemoryBarrier(
        sType=vk.VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER, srcAccessMask=0,
        dstAccessMask=vk.VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT, oldLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
        newLayout=vk.VK_IMAGE_LAYOUT_GENERAL, srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=img.handle,
        subresourceRange=vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_DEPTH_BIT, baseMipLevel=0,
                                                    levelCount=1, baseArrayLayer=0, layerCount=1))
        for img in (depth, tile_depth)]
    vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0,
                            0, None, 0, None, 2, depth_barriers)

    def render(label: str, atts: list, depth_att=None, draws: int = 1, pipe=plain, indexed: bool = False) -> None:
        labels.push(cmd, label)
        info = vk.VkRenderingInfo(
            sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
            renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
            layerCount=1, colorAttachmentCount=len(atts), pColorAttachments=atts, pDepthAttachment=depth_att)
        vk.vkCmdBeginRendering(cmd, info)
        if draws:
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipe)
            vkapp.set_viewport_scissor(cmd, W, H)
            vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, 16,
                                  vk.ffi.new("float[4]", [0.2, 0.4, 0.6, 1.0]))
            if indexed:
                vk.vkCmdBindIndexBuffer(cmd, index_buffer.handle, 0, vk.VK_INDEX_TYPE_UINT16)
                vk.vkCmdDrawIndexed(cmd, len(INDICES), 1, 0, 0, 0)
            else:
                for _ in range(draws):
                    vk.vkCmdDraw(cmd, 3, 1, 0, 0)
        vk.vkCmdEndRendering(cmd)
        labels.pop(cmd)

    def clear_image(img) -> None:
        vk.vkCmdClearColorImage(cmd, img.handle, vk.VK_IMAGE_LAYOUT_GENERAL,
                                vk.VkClearColorValue(float32=[0.0, 0.0, 0.0, 1.0]), 1, [vkapp.color_range()])

    LOAD, CLEAR = vk.VK_ATTACHMENT_LOAD_OP_LOAD, vk.VK_ATTACHMENT_LOAD_OP_CLEAR
    STORE, DONT = vk.VK_ATTACHMENT_STORE_OP_STORE, vk.VK_ATTACHMENT_STORE_OP_DONT_CARE
    c = colors
    render("load-undefined", [attachment(c["A"], LOAD, STORE)])
    render("binning-serialised N1", [attachment(c["N1"], CLEAR, STORE)])
    vkapp.memory_barrier(cmd, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                         vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, vk.VK_PIPELINE_STAGE_VERTEX_SHADER_BIT,
                         vk.VK_ACCESS_SHADER_READ_BIT)
    render("binning-serialised", [attachment(c["N2"], CLEAR, STORE)])

    labels.push(cmd, "workgroup-warp-waste")
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, collatz)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, compute_layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, compute_layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4,
                          vk.ffi.new("uint32_t[1]", [len(values)]))
    vk.vkCmdDispatch(cmd, 64, 1, 1)
    labels.pop(cmd)

    labels.push(cmd, "clear-then-load")
    clear_image(c["B"])
    labels.pop(cmd)
    render("clear-then-load", [attachment(c["B"], LOAD, STORE)])
    labels.push(cmd, "redundant-clear")
    clear_image(c["C"])
    labels.pop(cmd)
    render("redundant-clear C", [attachment(c["C"], CLEAR, STORE)])
    render("store-overwritten", [attachment(c["D"], CLEAR, STORE), attachment(c["D2"], CLEAR, STORE)], pipe=two)
    render("store-overwritten E", [attachment(c["D"], CLEAR, STORE)])
    labels.push(cmd, "msaa-stored")
    clear = vk.VkClearValue(color=vk.VkClearColorValue(float32=[0.0, 0.0, 0.0, 1.0]))
    vk.vkCmdBeginRenderPass(cmd, vk.VkRenderPassBeginInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO, renderPass=msaa_pass, framebuffer=framebuffer,
        renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
        clearValueCount=2, pClearValues=[clear, clear]), vk.VK_SUBPASS_CONTENTS_INLINE)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, msaa)
    vkapp.set_viewport_scissor(cmd, W, H)
    vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, 16, vk.ffi.new("float[4]", [1, 0, 0, 1]))
    vk.vkCmdDraw(cmd, 3, 1, 0, 0)
    vk.vkCmdEndRenderPass(cmd)
    labels.pop(cmd)
    labels.push(cmd, "resolve-transfer")
    clear_image(ms["resolve"])
    region = vk.VkImageResolve(srcSubresource=vkapp.color_layers(), srcOffset=vk.VkOffset3D(x=0, y=0, z=0),
                               dstSubresource=vkapp.color_layers(), dstOffset=vk.VkOffset3D(x=0, y=0, z=0),
                               extent=vk.VkExtent3D(width=W, height=H, depth=1))
    vk.vkCmdResolveImage(cmd, ms["resolve"].handle, vk.VK_IMAGE_LAYOUT_GENERAL, c["R"].handle,
                         vk.VK_IMAGE_LAYOUT_GENERAL, 1, [region])
    labels.pop(cmd)
    labels.push(cmd, "transfer-then-load")
    copy = vk.VkImageCopy(srcSubresource=vkapp.color_layers(), srcOffset=vk.VkOffset3D(x=0, y=0, z=0),
                          dstSubresource=vkapp.color_layers(), dstOffset=vk.VkOffset3D(x=0, y=0, z=0),
                          extent=vk.VkExtent3D(width=W, height=H, depth=1))
    vk.vkCmdCopyImage(cmd, c["src"].handle, vk.VK_IMAGE_LAYOUT_GENERAL, c["I"].handle, vk.VK_IMAGE_LAYOUT_GENERAL,
                      1, [copy])
    labels.pop(cmd)
    render("transfer-then-load", [attachment(c["I"], LOAD, STORE)])
    render("outputs-unread", [attachment(c["J"], CLEAR, DONT)], attachment(tile_depth, CLEAR, DONT, depth=True),
           pipe=with_depth)
    render("pass-round-trip L", [attachment(c["L"], CLEAR, STORE)])
    render("pass-round-trip", [attachment(c["L"], LOAD, STORE)])
    render("depth-store-unread", [attachment(c["F"], CLEAR, STORE)],
           attachment(depth, CLEAR, STORE, depth=True), pipe=with_depth)
    render("empty-pass", [attachment(c["K"], CLEAR, STORE)], draws=0)
    render("vertex-reuse", [attachment(c["V"], CLEAR, STORE)], indexed=True)
    render("high-overdraw", [attachment(c["O"], CLEAR, STORE)], draws=OVERDRAW_DRAWS)
    render("store-unpresented", [attachment(unread, CLEAR, STORE), attachment(c["U2"], CLEAR, STORE)], pipe=two)
    labels.push(cmd, "small-transfers")
    for offset in (0, 64):
        vk.vkCmdUpdateBuffer(cmd, outputs.handle, offset, 64, vk.ffi.new("uint32_t[16]"))
    labels.pop(cmd)
    for i, img in enumerate(colors.values()):
        vkapp.copy_image_to_buffer(cmd, img, vk.VK_IMAGE_LAYOUT_GENERAL, readback, i * W * H * 4)
    vkapp.host_barrier(cmd)
    submit(ctx, cmd, c["O"])
    return f"{len(PLANTED)} anti-patterns planted in 1 submit"


def submit(ctx: vkapp.Context, cmd, output: vkapp.Image) -> None:
    """One submit, waited for; with VK_EXT_frame_boundary (the layer provides it; plain lavapipe does not)
    its VkFrameBoundaryEXT ends frame 0 and names `output` as the frame's output image."""
    vk.vkEndCommandBuffer(cmd)
    boundary = None
    if "VK_EXT_frame_boundary" in ctx.device_extensions:
        boundary = vk.VkFrameBoundaryEXT(sType=vk.VK_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT,
                                         flags=vk.VK_FRAME_BOUNDARY_FRAME_END_BIT_EXT, frameID=0, imageCount=1,
                                         pImages=[output.handle])
    fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
    info = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, pNext=boundary, commandBufferCount=1,
                           pCommandBuffers=[cmd])
    vk.vkQueueSubmit(ctx.queue, 1, [info], fence)
    vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
    vk.vkDestroyFence(ctx.device, fence, None)


if __name__ == "__main__":
    vkapp.run_main("planted_advice", body, dynamic_rendering=True, optional_device_extensions=["VK_EXT_frame_boundary"])

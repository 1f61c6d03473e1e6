"""Graphics sample: classic render pass, dynamic rendering, suspend/resume (offscreen).

Run (plain lavapipe; add VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation to validate):
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python examples/render_passes.py

Needs Vulkan 1.3 (dynamicRendering feature). All targets are 64x64
R8G8B8A8_UNORM images; every draw is an axis-aligned rectangle (two
triangles) with pixel-aligned edges and a solid push-constant color, so the
expected images are exact and computed by painting rectangles in numpy.

1. Classic render pass (vkCmdBeginRenderPass / VkFramebuffer), two subpasses:
   subpass 0 clears attachment A and draws three rectangles with vkCmdDraw,
   vkCmdDrawIndexed and vkCmdDrawIndirect; vkCmdNextSubpass; subpass 1 reads
   A as an input attachment and writes its inverse to attachment B with a
   full-screen triangle.
2. Dynamic rendering (vkCmdBeginRendering, Vulkan 1.3 core) into image C:
   clear, vkCmdDrawIndexedIndirect, vkCmdDraw.
3. Dynamic rendering suspended in one command buffer
   (VK_RENDERING_SUSPENDING_BIT) and resumed in another
   (VK_RENDERING_RESUMING_BIT) into image D; both command buffers go to one
   vkQueueSubmit, in order, in one batch.
What it checks: all pixels of A, B, C and D against the numpy expectations.
Exit 0 and one 'render_passes: OK ...' line on success.
"""

from __future__ import annotations

import numpy as np
import vulkan as vk

import vkapp

W = H = 64
FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM
Rect = tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels, exclusive end
Color = tuple[int, int, int, int]  # RGBA8

# Rectangles (pixel-aligned) and their colors, in drawing order per target.
R_RED: Rect = (8, 8, 40, 40)
R_GREEN: Rect = (24, 24, 56, 48)
R_BLUE: Rect = (4, 50, 20, 62)
R_WIDE: Rect = (0, 30, 64, 34)
R_TALL: Rect = (44, 0, 52, 64)
RECTS = [R_RED, R_GREEN, R_BLUE, R_WIDE, R_TALL]

RED, GREEN, BLUE = (255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255)
YELLOW, MAGENTA, WHITE, CYAN = (255, 255, 0, 255), (255, 0, 255, 255), (255, 255, 255, 255), (0, 255, 255, 255)
CLEAR_A: Color = (0, 0, 0, 255)
CLEAR_C: Color = (10, 20, 30, 255)
CLEAR_D: Color = (0, 0, 64, 255)


def ndc(px: int, size: int) -> float:
    return 2.0 * px / size - 1.0


def geometry() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(triangle-list vertices: 6 per rect, corner vertices: 4 per rect, uint16 indices for one rect)."""
    tri, corners = [], []
    for x0, y0, x1, y1 in RECTS:
        a, b, c, d = (ndc(x0, W), ndc(y0, H)), (ndc(x1, W), ndc(y0, H)), (ndc(x0, W), ndc(y1, H)), (ndc(x1, W), ndc(y1, H))
        tri += [a, b, c, c, b, d]
        corners += [a, b, c, d]
    return (np.array(tri, dtype=np.float32), np.array(corners, dtype=np.float32),
            np.array([0, 1, 2, 2, 1, 3], dtype=np.uint16))


def paint(clear: Color, draws: list[tuple[Rect, Color]]) -> np.ndarray:
    img = np.empty((H, W, 4), dtype=np.uint8)
    img[:] = clear
    for (x0, y0, x1, y1), color in draws:
        img[y0:y1, x0:x1] = color
    return img


def clear_value(color: Color) -> object:
    return vk.VkClearValue(color=vk.VkClearColorValue(float32=[c / 255.0 for c in color]))


class Scene:
    """Pipelines, geometry buffers and draw helpers shared by the three parts."""

    def __init__(self, ctx: vkapp.Context) -> None:
        tri, corners, indices = geometry()
        self.tri = ctx.buffer(tri.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, tri)
        self.corners = ctx.buffer(corners.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, corners)
        self.indices = ctx.buffer(indices.nbytes, vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT, indices)
        # VkDrawIndirectCommand for R_BLUE, VkDrawIndexedIndirectCommand for R_WIDE.
        blue, wide = RECTS.index(R_BLUE), RECTS.index(R_WIDE)
        args = np.array([6, 1, 6 * blue, 0, 6, 1, 0, 4 * wide, 0], dtype=np.uint32)
        self.indirect = ctx.buffer(args.nbytes, vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT, args)
        self.solid_layout = ctx.pipeline_layout([], push_size=16, push_stages=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
        self.colors: list[object] = []  # keeps push-constant data alive until submit

    def color(self, cmd: object, color: Color) -> None:
        data = vk.ffi.new("float[4]", [c / 255.0 for c in color])
        self.colors.append(data)
        vk.vkCmdPushConstants(cmd, self.solid_layout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, 16, data)

    def draw(self, cmd: object, rect: Rect, color: Color) -> None:
        self.color(cmd, color)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [self.tri.handle], [0])
        vk.vkCmdDraw(cmd, 6, 1, 6 * RECTS.index(rect), 0)

    def draw_indexed(self, cmd: object, rect: Rect, color: Color) -> None:
        self.color(cmd, color)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [self.corners.handle], [0])
        vk.vkCmdBindIndexBuffer(cmd, self.indices.handle, 0, vk.VK_INDEX_TYPE_UINT16)
        vk.vkCmdDrawIndexed(cmd, 6, 1, 0, 4 * RECTS.index(rect), 0)

    def draw_indirect(self, cmd: object, color: Color) -> None:  # draws R_BLUE
        self.color(cmd, color)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [self.tri.handle], [0])
        vk.vkCmdDrawIndirect(cmd, self.indirect.handle, 0, 1, 16)

    def draw_indexed_indirect(self, cmd: object, color: Color) -> None:  # draws R_WIDE
        self.color(cmd, color)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [self.corners.handle], [0])
        vk.vkCmdBindIndexBuffer(cmd, self.indices.handle, 0, vk.VK_INDEX_TYPE_UINT16)
        vk.vkCmdDrawIndexedIndirect(cmd, self.indirect.handle, 16, 1, 20)


def classic_render_pass(ctx: vkapp.Context, scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """Two-subpass VkRenderPass; returns the read-back attachments A and B."""
    usage = vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
    img_a = ctx.image(W, H, FORMAT, usage | vk.VK_IMAGE_USAGE_INPUT_ATTACHMENT_BIT, view=True)
    img_b = ctx.image(W, H, FORMAT, usage, view=True)
    transfer_src = vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL
    attachments = [
        vk.VkAttachmentDescription(
            format=FORMAT, samples=vk.VK_SAMPLE_COUNT_1_BIT, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
            storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE, stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
            stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
            finalLayout=transfer_src),
        vk.VkAttachmentDescription(
            format=FORMAT, samples=vk.VK_SAMPLE_COUNT_1_BIT, loadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
            storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE, stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
            stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
            finalLayout=transfer_src),
    ]
    color_a = vk.VkAttachmentReference(attachment=0, layout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    input_a = vk.VkAttachmentReference(attachment=0, layout=vk.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL)
    color_b = vk.VkAttachmentReference(attachment=1, layout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    subpass0 = vk.VkSubpassDescription(pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS,
                                       colorAttachmentCount=1, pColorAttachments=[color_a])
    subpass1 = vk.VkSubpassDescription(pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS,
                                       inputAttachmentCount=1, pInputAttachments=[input_a],
                                       colorAttachmentCount=1, pColorAttachments=[color_b])
    color_out = vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT
    color_write = vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT
    dependencies = [
        vk.VkSubpassDependency(srcSubpass=0, dstSubpass=1, srcStageMask=color_out,
                               dstStageMask=vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, srcAccessMask=color_write,
                               dstAccessMask=vk.VK_ACCESS_INPUT_ATTACHMENT_READ_BIT,
                               dependencyFlags=vk.VK_DEPENDENCY_BY_REGION_BIT),
        # Both attachments are copied to host buffers after the render pass.
        vk.VkSubpassDependency(srcSubpass=0, dstSubpass=vk.VK_SUBPASS_EXTERNAL, srcStageMask=color_out,
                               dstStageMask=vk.VK_PIPELINE_STAGE_TRANSFER_BIT, srcAccessMask=color_write,
                               dstAccessMask=vk.VK_ACCESS_TRANSFER_READ_BIT),
        vk.VkSubpassDependency(srcSubpass=1, dstSubpass=vk.VK_SUBPASS_EXTERNAL, srcStageMask=color_out,
                               dstStageMask=vk.VK_PIPELINE_STAGE_TRANSFER_BIT, srcAccessMask=color_write,
                               dstAccessMask=vk.VK_ACCESS_TRANSFER_READ_BIT),
    ]
    rp_info = vk.VkRenderPassCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO, attachmentCount=len(attachments),
        pAttachments=attachments, subpassCount=2, pSubpasses=[subpass0, subpass1],
        dependencyCount=len(dependencies), pDependencies=dependencies,
    )
    render_pass = ctx.own(vk.vkDestroyRenderPass, vk.vkCreateRenderPass(ctx.device, rp_info, None))
    fb_info = vk.VkFramebufferCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO, renderPass=render_pass, attachmentCount=2,
        pAttachments=[img_a.view, img_b.view], width=W, height=H, layers=1,
    )
    framebuffer = ctx.own(vk.vkDestroyFramebuffer, vk.vkCreateFramebuffer(ctx.device, fb_info, None))

    solid = ctx.graphics_pipeline("quad.vert", "solid.frag", scene.solid_layout, render_pass=render_pass, subpass=0)
    frag = vk.VK_SHADER_STAGE_FRAGMENT_BIT
    input_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_INPUT_ATTACHMENT, frag)])
    invert_layout = ctx.pipeline_layout([input_layout])
    invert = ctx.graphics_pipeline("fullscreen.vert", "invert.frag", invert_layout, render_pass=render_pass,
                                   subpass=1, vec2_input=False)
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_INPUT_ATTACHMENT: 1}, max_sets=1)
    dset = ctx.allocate_set(pool, input_layout)
    image_info = vk.VkDescriptorImageInfo(imageView=img_a.view, imageLayout=vk.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL)
    write = vk.VkWriteDescriptorSet(sType=vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, dstSet=dset, dstBinding=0,
                                    descriptorCount=1, descriptorType=vk.VK_DESCRIPTOR_TYPE_INPUT_ATTACHMENT,
                                    pImageInfo=[image_info])
    vk.vkUpdateDescriptorSets(ctx.device, 1, [write], 0, None)

    out = ctx.buffer(2 * W * H * 4, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    clears = [clear_value(CLEAR_A), clear_value(CLEAR_A)]
    begin = vk.VkRenderPassBeginInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO, renderPass=render_pass, framebuffer=framebuffer,
        renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
        clearValueCount=2, pClearValues=clears,
    )
    cmd = ctx.command_buffer()
    vk.vkCmdBeginRenderPass(cmd, begin, vk.VK_SUBPASS_CONTENTS_INLINE)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, solid)
    vkapp.set_viewport_scissor(cmd, W, H)
    scene.draw(cmd, R_RED, RED)
    scene.draw_indexed(cmd, R_GREEN, GREEN)
    scene.draw_indirect(cmd, BLUE)
    vk.vkCmdNextSubpass(cmd, vk.VK_SUBPASS_CONTENTS_INLINE)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, invert)
    vkapp.set_viewport_scissor(cmd, W, H)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, invert_layout, 0, 1, [dset], 0, None)
    vk.vkCmdDraw(cmd, 3, 1, 0, 0)
    vk.vkCmdEndRenderPass(cmd)
    vkapp.copy_image_to_buffer(cmd, img_a, transfer_src, out, 0)
    vkapp.copy_image_to_buffer(cmd, img_b, transfer_src, out, W * H * 4)
    vkapp.host_barrier(cmd)
    ctx.submit([cmd])
    both = out.array().reshape(2, H, W, 4).copy()
    return both[0], both[1]


def rendering_info(img: vkapp.Image, clear: Color, flags: int) -> tuple[object, object]:
    attachment = vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=img.view,
        imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE, clearValue=clear_value(clear),
    )
    info = vk.VkRenderingInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO, flags=flags,
        renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
        layerCount=1, colorAttachmentCount=1, pColorAttachments=[attachment],
    )
    return info, attachment  # the attachment must outlive the call that uses info


def to_attachment(cmd: object, img: vkapp.Image) -> None:
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0,
                        vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)


def to_transfer_src(cmd: object, img: vkapp.Image) -> None:
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                        vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)


def dynamic_rendering(ctx: vkapp.Context, scene: Scene, pipeline: object) -> np.ndarray:
    img = ctx.image(W, H, FORMAT, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT, view=True)
    cmd = ctx.command_buffer()
    to_attachment(cmd, img)
    info, keep = rendering_info(img, CLEAR_C, 0)
    vk.vkCmdBeginRendering(cmd, info)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
    vkapp.set_viewport_scissor(cmd, W, H)
    scene.draw_indexed_indirect(cmd, YELLOW)
    scene.draw(cmd, R_TALL, MAGENTA)
    vk.vkCmdEndRendering(cmd)
    to_transfer_src(cmd, img)
    ctx.submit([cmd])
    return ctx.read_image(img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL)


def suspend_resume(ctx: vkapp.Context, scene: Scene, pipeline: object) -> np.ndarray:
    """One render pass instance spanning two command buffers of one batch."""
    img = ctx.image(W, H, FORMAT, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT, view=True)
    first = ctx.command_buffer()
    to_attachment(first, img)
    info1, keep1 = rendering_info(img, CLEAR_D, vk.VK_RENDERING_SUSPENDING_BIT)
    vk.vkCmdBeginRendering(first, info1)
    vk.vkCmdBindPipeline(first, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
    vkapp.set_viewport_scissor(first, W, H)
    scene.draw(first, R_RED, WHITE)
    vk.vkCmdEndRendering(first)

    second = ctx.command_buffer()
    info2, keep2 = rendering_info(img, CLEAR_D, vk.VK_RENDERING_RESUMING_BIT)
    vk.vkCmdBeginRendering(second, info2)
    vk.vkCmdBindPipeline(second, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
    vkapp.set_viewport_scissor(second, W, H)
    scene.draw_indexed(second, R_GREEN, CYAN)
    vk.vkCmdEndRendering(second)
    to_transfer_src(second, img)
    ctx.submit([first, second])
    return ctx.read_image(img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL)


def body(ctx: vkapp.Context) -> str:
    scene = Scene(ctx)
    got_a, got_b = classic_render_pass(ctx, scene)
    want_a = paint(CLEAR_A, [(R_RED, RED), (R_GREEN, GREEN), (R_BLUE, BLUE)])
    want_b = want_a.copy()
    want_b[..., :3] = 255 - want_a[..., :3]
    vkapp.check_equal("classic render pass, subpass 0 (attachment A)", got_a, want_a)
    vkapp.check_equal("classic render pass, subpass 1 inverse (attachment B)", got_b, want_b)

    dyn_pipeline = ctx.graphics_pipeline("quad.vert", "solid.frag", scene.solid_layout, color_formats=[FORMAT])
    got_c = dynamic_rendering(ctx, scene, dyn_pipeline)
    vkapp.check_equal("dynamic rendering (image C)", got_c, paint(CLEAR_C, [(R_WIDE, YELLOW), (R_TALL, MAGENTA)]))
    got_d = suspend_resume(ctx, scene, dyn_pipeline)
    vkapp.check_equal("suspended/resumed rendering (image D)", got_d, paint(CLEAR_D, [(R_RED, WHITE), (R_GREEN, CYAN)]))
    return (f"4 attachments x {W}x{H} pixels checked: render pass with 2 subpasses (draw, indexed, indirect, "
            f"input attachment), dynamic rendering (indexed indirect, draw), suspend/resume across 2 command buffers "
            f"in 1 submit; on {ctx.device_name}")


if __name__ == "__main__":
    vkapp.run_main("render_passes", body, dynamic_rendering=True)

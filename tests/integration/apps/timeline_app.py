"""Timeline acceptance app: every workload kind, split passes, labels, reuse, frame boundary.

Run: .venv/bin/python tests/integration/apps/timeline_app.py  (under `tessera run` or not)
The numbers are chosen so tests/integration/test_timeline.py can write the
expected metadata by hand. One queue, submits in this order (submitIDs 1..8
under the layer, which counts the application's submits only):

 1 compute (queue labels "frame 1" > "frame 1 compute"; cmd label "compute"):
     vkCmdDispatch(4,1,1)                      group 16 (spec constant) -> 64 items
     vkCmdDispatchIndirect(args 3,2,1)         -> ANNEX groups [3,2,1], items 96
     cmd label "base": vkCmdDispatchBase(base 4,0,0; 2,1,1) -> 32 items
 2 transfers (cmd label "transfers"):
     vkCmdFillBuffer(A: 1002 bytes, offset 12, VK_WHOLE_SIZE)  -> (1002-12) & ~3 = 988 bytes
     vkCmdCopyBuffer(B -> C, regions 100 + 60 bytes)            -> 160 bytes, 2 regions
     vkCmdUpdateBuffer(C, offset 256, 64 bytes)                 -> 64 bytes
     vkCmdClearColorImage(M: 32x16 RGBA8, mips 0..1)            -> 512 + 128 = 640 pixels
     vkCmdCopyBufferToImage(D: 16x8)                            -> 128 pixels
     vkCmdBlitImage(M mip 0 32x16 -> D 16x8)                    -> 128 pixels (destination)
     vkCmdCopyImageToBuffer(D -> host)                          -> 128 pixels (readback)
 3 two dynamic-rendering passes, no barrier between them (cmd label "passes" around pass 1):
     pass P1 into E1: 1 draw; pass P2 into E2: vkCmdDrawIndirect (6,1,12,0) + 1 draw
     then readback copies of E1 and E2 (2 x 4096 pixels)
 4 two dynamic-rendering passes with a pipeline barrier between them:
     pass P3 into E3: 1 draw; barrier; pass P4 into E4: 1 draw; readback E3, E4
 5 a pass suspended in cmd X (1 draw) and resumed in cmd Y (2 draws), one submit [X, Y]; readback
 6 classic render pass, subpass contents SECONDARY_COMMAND_BUFFERS, 2 draws in a secondary; readback
 7, 8 one command buffer (no ONE_TIME_SUBMIT) submitted twice, waiting in between:
     vkCmdDispatchIndirect(args 3,2,1), vkCmdFillBuffer(F: 256 bytes, offset 0, 128 bytes)
     submit 8 carries VkFrameBoundaryEXT(FRAME_END, frameID 42) when the package has it
Checks every buffer and image result against numpy; prints 'timeline_app: OK ...'.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402
from compute_collatz import DISPATCH_BASE_BIT, collatz_reference  # noqa: E402
from render_passes import (BLUE, CYAN, FORMAT, GREEN, R_BLUE, R_GREEN, R_RED, R_TALL, R_WIDE, RED,  # noqa: E402
                           WHITE, YELLOW, H, W, Scene, clear_value, paint, rendering_info, to_attachment,
                           to_transfer_src)

LOCAL = 16
N = 128
FRAME_ID = 42
HAS_FRAME_BOUNDARY = hasattr(vk, "VkFrameBoundaryEXT")
CLEAR_E = (0, 0, 0, 255)


class App:
    def __init__(self, ctx: vkapp.Context) -> None:
        self.ctx = ctx
        get = lambda name: vk.vkGetInstanceProcAddr(ctx.instance, name)  # noqa: E731
        self.cmd_begin, self.cmd_end = get("vkCmdBeginDebugUtilsLabelEXT"), get("vkCmdEndDebugUtilsLabelEXT")
        self.queue_begin, self.queue_end = get("vkQueueBeginDebugUtilsLabelEXT"), get("vkQueueEndDebugUtilsLabelEXT")
        self.kept: list[object] = []

    def label(self, cmd, name: str) -> None:
        info = vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName=name)
        self.kept.append(info)
        self.cmd_begin(cmd, info)

    def queue_label(self, name: str) -> None:
        info = vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName=name)
        self.kept.append(info)
        self.queue_begin(self.ctx.queue, info)

    def submit(self, cmds, pnext=None) -> None:
        """One batch, wait; the command buffers stay allocated (reusable)."""
        ctx = self.ctx
        fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
        info = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, pNext=pnext,
                               commandBufferCount=len(cmds), pCommandBuffers=list(cmds))
        vk.vkQueueSubmit(ctx.queue, 1, [info], fence)
        vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
        vk.vkDestroyFence(ctx.device, fence, None)

    def primary(self, one_time: bool = True):
        ctx = self.ctx
        info = vk.VkCommandBufferAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=ctx.command_pool,
            level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
        cmd = vk.vkAllocateCommandBuffers(ctx.device, info)[0]
        begin = vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT if one_time else 0)
        vk.vkBeginCommandBuffer(cmd, begin)
        return cmd


# ---- 1: compute ---------------------------------------------------------------
class Compute:
    def __init__(self, ctx: vkapp.Context) -> None:
        rng = np.random.default_rng(7)
        self.inputs = rng.integers(1, 30_000, size=N, dtype=np.uint32)
        storage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
        self.inbuf = ctx.buffer(N * 4, storage, self.inputs)
        self.outbuf = ctx.buffer(N * 4, storage, np.full(N, 0xFFFFFFFF, dtype=np.uint32))
        self.args = ctx.buffer(12, vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT, np.array([3, 2, 1], dtype=np.uint32))
        stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
        set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                     (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
        self.layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
        self.pipeline = ctx.compute_pipeline("collatz.comp", self.layout, spec={0: LOCAL}, flags=DISPATCH_BASE_BIT)
        pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
        self.dset = ctx.allocate_set(pool, set_layout)
        ctx.write_storage_buffers(self.dset, [(0, self.inbuf, 0, vkapp.WHOLE_SIZE),
                                              (1, self.outbuf, 0, vkapp.WHOLE_SIZE)])
        self.count = vk.ffi.new("uint32_t[1]", [96])   # elements [0, 96) are computed

    def bind(self, cmd) -> None:
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.pipeline)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.layout, 0, 1, [self.dset], 0, None)
        vk.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, self.count)

    def check(self, what: str) -> None:
        want = np.full(N, 0xFFFFFFFF, dtype=np.uint32)
        want[:96] = [collatz_reference(int(v)) for v in self.inputs[:96]]
        vkapp.check_equal(what, self.outbuf.array(np.uint32).copy(), want)


def compute(app: App, c: Compute) -> None:
    cmd = app.primary()
    app.label(cmd, "compute")
    c.bind(cmd)
    vk.vkCmdDispatch(cmd, 4, 1, 1)                 # [0, 64)
    vk.vkCmdDispatchIndirect(cmd, c.args.handle, 0)  # x in [0, 48), y 0..1: same values again
    app.label(cmd, "base")
    vk.vkCmdDispatchBase(cmd, 4, 0, 0, 2, 1, 1)    # [64, 96)
    app.cmd_end(cmd)
    app.cmd_end(cmd)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    vk.vkEndCommandBuffer(cmd)
    app.queue_label("frame 1")
    app.queue_label("frame 1 compute")
    app.submit([cmd])
    app.queue_end(app.ctx.queue)
    app.queue_end(app.ctx.queue)
    c.check("compute (dispatch, indirect, base)")


# ---- 2: transfers -------------------------------------------------------------------
def mip_image(ctx: vkapp.Context, width: int, height: int, mips: int) -> vkapp.Image:
    info = vk.VkImageCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, imageType=vk.VK_IMAGE_TYPE_2D, format=FORMAT,
        extent=vk.VkExtent3D(width=width, height=height, depth=1), mipLevels=mips, arrayLayers=1,
        samples=vk.VK_SAMPLE_COUNT_1_BIT, tiling=vk.VK_IMAGE_TILING_OPTIMAL,
        usage=vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT,
        sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED)
    handle = vk.vkCreateImage(ctx.device, info, None)
    memory = ctx._allocate(vk.vkGetImageMemoryRequirements(ctx.device, handle), vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
    ctx.own(vk.vkDestroyImage, handle)
    vk.vkBindImageMemory(ctx.device, handle, memory, 0)
    return vkapp.Image(handle, memory, width, height, FORMAT)


def mips_barrier(cmd, image, mips: int, old: int, new: int, src_access: int, dst_access: int) -> None:
    rng = vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0, levelCount=mips,
                                     baseArrayLayer=0, layerCount=1)
    barrier = vk.VkImageMemoryBarrier(
        sType=vk.VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER, srcAccessMask=src_access, dstAccessMask=dst_access,
        oldLayout=old, newLayout=new, srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=image.handle, subresourceRange=rng)
    vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT | vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                            vk.VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, None, 0, None, 1, [barrier])


def transfers(app: App) -> None:
    ctx = app.ctx
    usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
    a = ctx.buffer(1002, usage, np.zeros(1002, dtype=np.uint8))
    b_data = np.arange(256, dtype=np.uint8)
    b = ctx.buffer(256, usage, b_data)
    c = ctx.buffer(512, usage, np.zeros(512, dtype=np.uint8))
    update = np.arange(100, 164, dtype=np.uint8)
    update_c = vk.ffi.new("char[]", update.tobytes())
    texels = ctx.buffer(16 * 8 * 4, usage, np.full(16 * 8 * 4, 7, dtype=np.uint8))
    readback = ctx.buffer(16 * 8 * 4, usage)
    m = mip_image(ctx, 32, 16, 2)
    d = mip_image(ctx, 16, 8, 1)
    dst, src = vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL
    tw, tr = vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT

    cmd = app.primary()
    app.label(cmd, "transfers")
    vk.vkCmdFillBuffer(cmd, a.handle, 12, vkapp.WHOLE_SIZE, 0xA5A5A5A5)
    regions = [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=100), vk.VkBufferCopy(srcOffset=100, dstOffset=200, size=60)]
    vk.vkCmdCopyBuffer(cmd, b.handle, c.handle, 2, regions)
    vkapp.transfer_barrier(cmd)
    vk.vkCmdUpdateBuffer(cmd, c.handle, 256, 64, update_c)
    mips_barrier(cmd, m, 2, vk.VK_IMAGE_LAYOUT_UNDEFINED, dst, 0, tw)
    mips_barrier(cmd, d, 1, vk.VK_IMAGE_LAYOUT_UNDEFINED, dst, 0, tw)
    color = vk.VkClearColorValue(float32=[1.0, 0.0, 1.0, 1.0])
    both_mips = vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0, levelCount=2,
                                           baseArrayLayer=0, layerCount=1)
    vk.vkCmdClearColorImage(cmd, m.handle, dst, color, 1, [both_mips])
    to_d = vk.VkBufferImageCopy(bufferOffset=0, bufferRowLength=0, bufferImageHeight=0,
                                imageSubresource=vkapp.color_layers(), imageOffset=vk.VkOffset3D(x=0, y=0, z=0),
                                imageExtent=vk.VkExtent3D(width=16, height=8, depth=1))
    vk.vkCmdCopyBufferToImage(cmd, texels.handle, d.handle, dst, 1, [to_d])
    mips_barrier(cmd, m, 2, dst, src, tw, tr)
    mips_barrier(cmd, d, 1, dst, dst, tw, tw)
    blit = vk.VkImageBlit(srcSubresource=vkapp.color_layers(),
                          srcOffsets=[vk.VkOffset3D(x=0, y=0, z=0), vk.VkOffset3D(x=32, y=16, z=1)],
                          dstSubresource=vkapp.color_layers(),
                          dstOffsets=[vk.VkOffset3D(x=0, y=0, z=0), vk.VkOffset3D(x=16, y=8, z=1)])
    vk.vkCmdBlitImage(cmd, m.handle, src, d.handle, dst, 1, [blit], vk.VK_FILTER_NEAREST)
    mips_barrier(cmd, d, 1, dst, src, tw, tr)
    vkapp.copy_image_to_buffer(cmd, d, src, readback)
    app.cmd_end(cmd)
    vkapp.host_barrier(cmd)
    vk.vkEndCommandBuffer(cmd)
    app.submit([cmd])

    want_a = np.zeros(1002, dtype=np.uint8)
    want_a[12:1000] = 0xA5
    vkapp.check_equal("fill buffer", a.array().copy(), want_a)
    want_c = np.zeros(512, dtype=np.uint8)
    want_c[0:100] = b_data[0:100]
    want_c[200:260] = b_data[100:160]
    want_c[256:320] = update
    vkapp.check_equal("copy buffer + update buffer", c.array().copy(), want_c)
    want_d = np.tile(np.array([255, 0, 255, 255], dtype=np.uint8), 16 * 8)
    vkapp.check_equal("clear, blit, readback", readback.array().copy(), want_d)


# ---- 3..6: render passes -------------------------------------------------------------
class Targets:
    def __init__(self, ctx: vkapp.Context, count: int) -> None:
        usage = vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
        self.images = [ctx.image(W, H, FORMAT, usage, view=True) for _ in range(count)]
        self.out = ctx.buffer(count * W * H * 4, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)

    def readback(self, cmd) -> None:
        for i, img in enumerate(self.images):
            to_transfer_src(cmd, img)
            vkapp.copy_image_to_buffer(cmd, img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, self.out, i * W * H * 4)
        vkapp.host_barrier(cmd)

    def check(self, what: str, wants: list[np.ndarray]) -> None:
        got = self.out.array().reshape(len(self.images), H, W, 4).copy()
        for i, want in enumerate(wants):
            vkapp.check_equal(f"{what}, image {i}", got[i], want)


def begin_pass(cmd, img, pipeline, flags=0):
    info, keep = rendering_info(img, CLEAR_E, flags)
    vk.vkCmdBeginRendering(cmd, info)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
    vkapp.set_viewport_scissor(cmd, W, H)
    return keep


def passes_without_barrier(app: App, scene: Scene, pipeline) -> None:
    t = Targets(app.ctx, 2)
    cmd = app.primary()
    for img in t.images:
        to_attachment(cmd, img)
    app.label(cmd, "passes")
    begin_pass(cmd, t.images[0], pipeline)
    scene.draw(cmd, R_RED, RED)
    vk.vkCmdEndRendering(cmd)
    app.cmd_end(cmd)
    begin_pass(cmd, t.images[1], pipeline)
    scene.draw_indirect(cmd, BLUE)             # VkDrawIndirectCommand (6, 1, 12, 0)
    scene.draw(cmd, R_GREEN, GREEN)
    vk.vkCmdEndRendering(cmd)
    t.readback(cmd)
    vk.vkEndCommandBuffer(cmd)
    app.submit([cmd])
    t.check("passes without barrier", [paint(CLEAR_E, [(R_RED, RED)]),
                                       paint(CLEAR_E, [(R_BLUE, BLUE), (R_GREEN, GREEN)])])


def passes_with_barrier(app: App, scene: Scene, pipeline) -> None:
    t = Targets(app.ctx, 2)
    cmd = app.primary()
    for img in t.images:
        to_attachment(cmd, img)
    begin_pass(cmd, t.images[0], pipeline)
    scene.draw(cmd, R_TALL, YELLOW)
    vk.vkCmdEndRendering(cmd)
    vkapp.memory_barrier(cmd, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                         vk.VK_PIPELINE_STAGE_VERTEX_SHADER_BIT, vk.VK_ACCESS_SHADER_READ_BIT)
    begin_pass(cmd, t.images[1], pipeline)
    scene.draw(cmd, R_WIDE, CYAN)
    vk.vkCmdEndRendering(cmd)
    t.readback(cmd)
    vk.vkEndCommandBuffer(cmd)
    app.submit([cmd])
    t.check("passes with barrier", [paint(CLEAR_E, [(R_TALL, YELLOW)]), paint(CLEAR_E, [(R_WIDE, CYAN)])])


def suspend_resume(app: App, scene: Scene, pipeline) -> None:
    t = Targets(app.ctx, 1)
    x = app.primary()
    to_attachment(x, t.images[0])
    keep1 = begin_pass(x, t.images[0], pipeline, vk.VK_RENDERING_SUSPENDING_BIT)
    scene.draw(x, R_RED, WHITE)
    vk.vkCmdEndRendering(x)
    vk.vkEndCommandBuffer(x)
    y = app.primary()
    keep2 = begin_pass(y, t.images[0], pipeline, vk.VK_RENDERING_RESUMING_BIT)
    scene.draw(y, R_GREEN, GREEN)
    scene.draw_indexed(y, R_BLUE, BLUE)
    vk.vkCmdEndRendering(y)
    t.readback(y)
    vk.vkEndCommandBuffer(y)
    app.submit([x, y])
    del keep1, keep2
    t.check("suspend/resume", [paint(CLEAR_E, [(R_RED, WHITE), (R_GREEN, GREEN), (R_BLUE, BLUE)])])


def secondary_render_pass(app: App, scene: Scene) -> None:
    ctx = app.ctx
    t = Targets(ctx, 1)
    img = t.images[0]
    render_pass, framebuffer = ctx.color_pass(img, vk.VK_IMAGE_LAYOUT_UNDEFINED,
                                              vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    pipeline = ctx.graphics_pipeline("quad.vert", "solid.frag", scene.solid_layout, render_pass=render_pass)

    alloc = vk.VkCommandBufferAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=ctx.command_pool,
        level=vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY, commandBufferCount=1)
    sec = vk.vkAllocateCommandBuffers(ctx.device, alloc)[0]
    inheritance = vk.VkCommandBufferInheritanceInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO, renderPass=render_pass, subpass=0,
        framebuffer=framebuffer)
    sec_begin = vk.VkCommandBufferBeginInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT | vk.VK_COMMAND_BUFFER_USAGE_RENDER_PASS_CONTINUE_BIT,
        pInheritanceInfo=inheritance)
    vk.vkBeginCommandBuffer(sec, sec_begin)
    vk.vkCmdBindPipeline(sec, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
    vkapp.set_viewport_scissor(sec, W, H)
    scene.draw(sec, R_TALL, RED)
    scene.draw_indexed(sec, R_WIDE, GREEN)
    vk.vkEndCommandBuffer(sec)

    cmd = app.primary()
    clears = [clear_value(CLEAR_E)]
    begin = vk.VkRenderPassBeginInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO, renderPass=render_pass, framebuffer=framebuffer,
        renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
        clearValueCount=1, pClearValues=clears)
    vk.vkCmdBeginRenderPass(cmd, begin, vk.VK_SUBPASS_CONTENTS_SECONDARY_COMMAND_BUFFERS)
    vk.vkCmdExecuteCommands(cmd, 1, [sec])
    vk.vkCmdEndRenderPass(cmd)
    t.readback(cmd)
    vk.vkEndCommandBuffer(cmd)
    app.submit([cmd])
    t.check("classic pass with a secondary", [paint(CLEAR_E, [(R_TALL, RED), (R_WIDE, GREEN)])])


# ---- 7, 8: a command buffer submitted twice, frame boundary -------------------------------
def reused(app: App, c: Compute) -> None:
    ctx = app.ctx
    f = ctx.buffer(256, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT, np.zeros(256, dtype=np.uint8))
    cmd = app.primary(one_time=False)
    c.bind(cmd)
    vk.vkCmdDispatchIndirect(cmd, c.args.handle, 0)
    vk.vkCmdFillBuffer(cmd, f.handle, 0, 128, 0x01010101)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                       vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
    vk.vkEndCommandBuffer(cmd)
    c.outbuf.array(np.uint32)[:] = 0xFFFFFFFF
    app.submit([cmd])
    want = np.zeros(256, dtype=np.uint8)
    want[:128] = 1
    vkapp.check_equal("reused, first submit", f.array().copy(), want)
    f.array()[:] = 0
    boundary = None
    if HAS_FRAME_BOUNDARY and "VK_EXT_frame_boundary" in ctx.device_extensions:
        boundary = vk.VkFrameBoundaryEXT(sType=vk.VK_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT,
                                         flags=vk.VK_FRAME_BOUNDARY_FRAME_END_BIT_EXT, frameID=FRAME_ID)
    app.submit([cmd], pnext=boundary)
    vkapp.check_equal("reused, second submit", f.array().copy(), want)
    got = c.outbuf.array(np.uint32)[:48].copy()
    vkapp.check_equal("reused indirect dispatch", got,
                      np.array([collatz_reference(int(v)) for v in c.inputs[:48]], dtype=np.uint32))


def body(ctx: vkapp.Context) -> str:
    if not ctx.has_debug_utils:
        raise vkapp.CheckFailed("VK_EXT_debug_utils instance extension not available")
    app = App(ctx)
    c = Compute(ctx)
    scene = Scene(ctx)
    pipeline = ctx.graphics_pipeline("quad.vert", "solid.frag", scene.solid_layout, color_formats=[FORMAT])
    compute(app, c)
    transfers(app)
    passes_without_barrier(app, scene, pipeline)
    passes_with_barrier(app, scene, pipeline)
    suspend_resume(app, scene, pipeline)
    secondary_render_pass(app, scene)
    reused(app, c)
    fb = "frame boundary 42" if "VK_EXT_frame_boundary" in ctx.device_extensions else "no frame boundary"
    return f"8 submits checked ({fb}) on {ctx.device_name}"


if __name__ == "__main__":
    vkapp.run_main("timeline_app", body, dynamic_rendering=True, optional_device_extensions=["VK_EXT_frame_boundary"])

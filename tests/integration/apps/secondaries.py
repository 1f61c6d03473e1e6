"""A frame loop that re-records secondary command buffers every frame and executes them, as engines that record
in parallel do.

Run: .venv/bin/python tests/integration/apps/secondaries.py [FRAMES] [labelled] [prerecorded] [threads]
Each frame: the pool is reset; three secondaries are recorded: A (a label "copy" around a fill of buffer S and a
copy of S into O), B (a fill of buffer T), D (render pass continuing: the graphics pipeline bound and two draws);
the primary executes A and B (with `labelled`, A inside a label "frame" the primary opens, so the secondary's
workloads run inside a label its recording does not know), then a render pass whose contents are D, then reads the
image back; submit and wait. With `prerecorded`, B is recorded once, before the frames, in a pool of its own (its
fill value then the first frame's), and executed every frame. With `threads`, the secondaries are recorded at once
on a thread each, each from a pool of its own (reset every frame with the primary's), as engines record in parallel. The fill values change with the frame's parity, so equal recordings alternate.
Checks O, T and every pixel against numpy each frame; prints 'secondaries: OK <frames> frames'.
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402
from render_passes import (FORMAT, GREEN, R_TALL, R_WIDE, RED, H, W, Scene, clear_value, paint,  # noqa: E402
                           to_attachment, to_transfer_src)

SIZE = 1024
CLEAR = (0, 0, 0, 255)
VALUES = (0x11111111, 0x22222222)


def main() -> None:
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    labelled, prerecorded, threaded = ("labelled" in sys.argv[2:], "prerecorded" in sys.argv[2:],
                                       "threads" in sys.argv[2:])
    ctx = vkapp.Context(vkapp.Settings.from_env(), "secondaries")
    usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
    s, o, t = (ctx.buffer(SIZE, usage) for _ in range(3))
    scene = Scene(ctx)
    img = ctx.image(W, H, FORMAT, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
                    view=True)
    readback = ctx.buffer(W * H * 4, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    render_pass, framebuffer = ctx.color_pass(img, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                                              vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    pipeline = ctx.graphics_pipeline("quad.vert", "solid.frag", scene.solid_layout, render_pass=render_pass)
    def new_pool():
        return ctx.own(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(ctx.device, vk.VkCommandPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, queueFamilyIndex=ctx.queue_family), None))

    def allocate(pool, level: int = vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY):
        return vk.vkAllocateCommandBuffers(ctx.device, vk.VkCommandBufferAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=pool, level=level,
            commandBufferCount=1))[0]

    pool = new_pool()
    pools = [pool] + ([new_pool() for _ in range(3)] if threaded else [])   # reset every frame
    a, d = allocate(pools[-1 if threaded else 0]), allocate(pools[-2 if threaded else 0])
    b = allocate(ctx.command_pool if prerecorded else pools[-3 if threaded else 0])   # recorded once: not reset
    p = allocate(pool, vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY)
    get = lambda name: vk.vkGetInstanceProcAddr(ctx.instance, name)  # noqa: E731
    label_begin, label_end = get("vkCmdBeginDebugUtilsLabelEXT"), get("vkCmdEndDebugUtilsLabelEXT")
    labels = {name: vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName=name)
              for name in ("copy", "frame")}
    plain = vk.VkCommandBufferInheritanceInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO)
    in_pass = vk.VkCommandBufferInheritanceInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO,
                                                renderPass=render_pass, subpass=0, framebuffer=framebuffer)
    fence = ctx.own(vk.vkDestroyFence, ctx.fence())

    first = ctx.command_buffer()   # the image into the attachment layout once
    to_attachment(first, img)
    ctx.submit([first])

    def begin(cmd, inheritance=None, flags: int = vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT) -> None:
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, flags=flags, pInheritanceInfo=inheritance))

    def record_a(value: int) -> None:
        begin(a, plain)
        label_begin(a, labels["copy"])
        vk.vkCmdFillBuffer(a, s.handle, 0, SIZE, value)
        vkapp.transfer_barrier(a)
        vk.vkCmdCopyBuffer(a, s.handle, o.handle, 1, [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=SIZE)])
        label_end(a)
        vk.vkEndCommandBuffer(a)

    def record_b(value: int, flags: int = vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT) -> None:
        begin(b, plain, flags)
        vk.vkCmdFillBuffer(b, t.handle, 0, SIZE, value ^ 0xFFFFFFFF)
        vk.vkEndCommandBuffer(b)

    def record_d(value: int) -> None:
        begin(d, in_pass, vk.VK_COMMAND_BUFFER_USAGE_RENDER_PASS_CONTINUE_BIT
              | vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        vk.vkCmdBindPipeline(d, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
        vkapp.set_viewport_scissor(d, W, H)
        scene.draw(d, R_TALL, RED)
        scene.draw_indexed(d, R_WIDE, GREEN)
        vk.vkEndCommandBuffer(d)

    if prerecorded:
        record_b(VALUES[0], 0)
    recordings = [record_a] + ([] if prerecorded else [record_b]) + [record_d]
    for frame in range(frames):
        value = VALUES[frame % 2]
        for buffer in (o, t, readback):
            buffer.mapped[0:len(buffer.mapped)] = bytes(len(buffer.mapped))
        for each in pools:
            vk.vkResetCommandPool(ctx.device, each, 0)
        if threaded:   # each on its own thread, at once
            workers = [threading.Thread(target=record, args=(value,)) for record in recordings]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        else:
            for record in recordings:
                record(value)

        begin(p)
        if labelled:
            label_begin(p, labels["frame"])
        vk.vkCmdExecuteCommands(p, 1, [a])
        if labelled:
            label_end(p)
        vk.vkCmdExecuteCommands(p, 1, [b])
        vk.vkCmdBeginRenderPass(p, vk.VkRenderPassBeginInfo(
            sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO, renderPass=render_pass, framebuffer=framebuffer,
            renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
            clearValueCount=1, pClearValues=[clear_value(CLEAR)]), vk.VK_SUBPASS_CONTENTS_SECONDARY_COMMAND_BUFFERS)
        vk.vkCmdExecuteCommands(p, 1, [d])
        vk.vkCmdEndRenderPass(p)
        to_transfer_src(p, img)
        vkapp.copy_image_to_buffer(p, img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, readback)
        vkapp.image_barrier(p, img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                            vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                            vk.VK_ACCESS_TRANSFER_READ_BIT, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                            vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
        vkapp.host_barrier(p)
        vk.vkEndCommandBuffer(p)
        vk.vkQueueSubmit(ctx.queue, 1, [vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                                                        pCommandBuffers=[p])], fence)
        vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
        vk.vkResetFences(ctx.device, 1, [fence])
        vkapp.check_equal(f"frame {frame}: O", o.array(np.uint32).copy(), np.full(SIZE // 4, value, np.uint32))
        vkapp.check_equal(f"frame {frame}: T", t.array(np.uint32).copy(),
                          np.full(SIZE // 4, (VALUES[0] if prerecorded else value) ^ 0xFFFFFFFF, np.uint32))
        vkapp.check_equal(f"frame {frame}: image", readback.array().reshape(H, W, 4).copy(),
                          paint(CLEAR, [(R_TALL, RED), (R_WIDE, GREEN)]))
    ctx.close()
    print(f"secondaries: OK {frames} frames", flush=True)


if __name__ == "__main__":
    main()

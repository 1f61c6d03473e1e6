"""Indirect-sizes app: the same work recorded directly and indirectly, the arguments written by the GPU.

Run (under `tessera run`, or on plain lavapipe):
    .venv/bin/tessera run --out OUT -- .venv/bin/python tests/integration/apps/indirect_sizes_app.py
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python tests/integration/apps/indirect_sizes_app.py

One command buffer, one submit, in this order:
  compute (examples/shaders/collatz.comp, local size LOCAL = 16 by spec constant, count = 320):
    vkCmdDispatch(20, 15, 1)                                   direct
    vkCmdUpdateBuffer(ARGS <- 20, 15, 1); barrier to the indirect read
    vkCmdDispatchIndirect(ARGS)                                the same 20 x 15 x 1 groups
    barrier; vkCmdUpdateBuffer(ARGS <- 2, 1, 1)                rewritten after its use
  pass A (dynamic rendering, 64x64 RGBA8 cleared, quad.vert + solid.frag, examples/render_passes.py
  geometry), direct:
    vkCmdDraw(6, 2, 0, 0)                                      R_RED, 2 instances: 12 vertices
    vkCmdDrawIndexed(6, 1, 0, 4 * index(R_WIDE), 0)            R_WIDE: 6 vertices
  pass B, the same draws indirect, their arguments written by vkCmdUpdateBuffer before the pass and
  zeroed after it:
    vkCmdDrawIndirect(DRAWS, 0, 1, 16)                         (6, 2, 0, 0)
    vkCmdDrawIndexedIndirectCount(DRAWS, 16, COUNT, 0, 2, 20)  count 1 of at most 2:
                                                               (6, 1, 0, 4 * index(R_WIDE), 0) drawn,
                                                               (6, 1, 0, 4 * index(R_TALL), 0) not
So both passes hold 2 draws and 18 vertices; tests/integration/test_indirect_sizes.py checks that the
emulated Mali times the indirect work exactly like the direct work.
What it checks: the Collatz outputs against a Python reference, both images against numpy (R_RED and
R_WIDE painted, R_TALL not), and the arguments' final values. Prints 'indirect_sizes_app: OK ...'.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402
from compute_collatz import collatz_reference  # noqa: E402
from render_passes import (CLEAR_C, FORMAT, R_RED, R_TALL, R_WIDE, RECTS, RED, H, W, Scene, paint,  # noqa: E402
                           rendering_info, to_attachment, to_transfer_src)

LOCAL = 16
GROUPS = (20, 15, 1)
COUNT = GROUPS[0] * LOCAL          # outputs: rows of the dispatch (y) repeat the same elements
INPUTS = [(i * 7919 + 13) % 20000 for i in range(COUNT)]
DRAW_ARGS = [6, 2, 0, 0]                                        # VkDrawIndirectCommand: R_RED, 2 instances
INDEXED_ARGS = [6, 1, 0, 4 * RECTS.index(R_WIDE), 0, 6, 1, 0, 4 * RECTS.index(R_TALL), 0]
WIDE_COLOR = (0, 255, 0, 255)


def u32(values) -> np.ndarray:
    return np.array(values, dtype=np.uint32)


def indirect_barrier(cmd) -> None:
    vkapp.memory_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                         vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, vk.VK_ACCESS_INDIRECT_COMMAND_READ_BIT)


def rewrite_barrier(cmd) -> None:
    vkapp.memory_barrier(cmd, vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, 0,
                         vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT)


def update(cmd, buf: vkapp.Buffer, offset: int, values) -> None:
    data = u32(values).tobytes()
    vk.vkCmdUpdateBuffer(cmd, buf.handle, offset, len(data), vk.ffi.from_buffer(data))


def body(ctx: vkapp.Context) -> str:
    storage, stage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk.VK_SHADER_STAGE_COMPUTE_BIT
    indirect = vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
    inbuf = ctx.buffer(COUNT * 4, storage, u32(INPUTS))
    outbuf = ctx.buffer(COUNT * 4, storage, np.zeros(COUNT, dtype=np.uint32))
    args = ctx.buffer(12, indirect, u32([1, 1, 1]))
    draws = ctx.buffer(16 + 40, indirect, np.zeros(14, dtype=np.uint32))
    count = ctx.buffer(4, indirect, u32([0]))
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    compute = ctx.compute_pipeline("collatz.comp", layout, spec={0: LOCAL})
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])
    scene = Scene(ctx)
    graphics = ctx.graphics_pipeline("quad.vert", "solid.frag", scene.solid_layout, color_formats=[FORMAT])
    usage = vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
    images = [ctx.image(W, H, FORMAT, usage, view=True) for _ in range(2)]
    readback = ctx.buffer(2 * W * H * 4, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)

    cmd = ctx.command_buffer()
    n = vk.ffi.new("uint32_t[1]", [COUNT])
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, compute)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, n)
    vk.vkCmdDispatch(cmd, *GROUPS)
    update(cmd, args, 0, GROUPS)
    vkapp.memory_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT | vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         vk.VK_ACCESS_TRANSFER_WRITE_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT,
                         vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT | vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         vk.VK_ACCESS_INDIRECT_COMMAND_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
    vk.vkCmdDispatchIndirect(cmd, args.handle, 0)
    rewrite_barrier(cmd)
    update(cmd, args, 0, [2, 1, 1])

    update(cmd, draws, 0, DRAW_ARGS + INDEXED_ARGS)
    update(cmd, count, 0, [1])
    indirect_barrier(cmd)
    for img in images:
        to_attachment(cmd, img)
    keep = []
    for i, img in enumerate(images):
        info, attachment = rendering_info(img, CLEAR_C, 0)
        keep.append(attachment)
        vk.vkCmdBeginRendering(cmd, info)
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, graphics)
        vkapp.set_viewport_scissor(cmd, W, H)
        scene.color(cmd, RED)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [scene.tri.handle], [0])
        if i == 0:
            vk.vkCmdDraw(cmd, 6, 2, 6 * RECTS.index(R_RED), 0)
        else:
            vk.vkCmdDrawIndirect(cmd, draws.handle, 0, 1, 16)
        scene.color(cmd, WIDE_COLOR)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [scene.corners.handle], [0])
        vk.vkCmdBindIndexBuffer(cmd, scene.indices.handle, 0, vk.VK_INDEX_TYPE_UINT16)
        if i == 0:
            vk.vkCmdDrawIndexed(cmd, 6, 1, 0, 4 * RECTS.index(R_WIDE), 0)
        else:
            vk.vkCmdDrawIndexedIndirectCount(cmd, draws.handle, 16, count.handle, 0, 2, 20)
        vk.vkCmdEndRendering(cmd)
    rewrite_barrier(cmd)
    update(cmd, draws, 0, [0] * 14)
    update(cmd, count, 0, [0])
    for i, img in enumerate(images):
        to_transfer_src(cmd, img)
        vkapp.copy_image_to_buffer(cmd, img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, readback, i * W * H * 4)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT | vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       vk.VK_ACCESS_TRANSFER_WRITE_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
    ctx.submit([cmd])

    vkapp.check_equal("collatz outputs", outbuf.array(np.uint32), u32([collatz_reference(v) for v in INPUTS]))
    want = paint(CLEAR_C, [(R_RED, RED), (R_WIDE, WIDE_COLOR)])
    pixels = readback.array(np.uint8).reshape(2, H, W, 4)
    vkapp.check_equal("pass A (direct draws)", pixels[0], want)
    vkapp.check_equal("pass B (indirect draws)", pixels[1], want)
    vkapp.check_equal("arguments rewritten after use", np.concatenate([args.array(np.uint32), count.array(np.uint32)]),
                      u32([2, 1, 1, 0]))
    return (f"dispatch {GROUPS} direct and indirect, {COUNT} outputs; passes A (direct) and B (indirect) "
            f"{W}x{H}, 2 draws and 18 vertices each")


def features():
    f12 = vk.VkPhysicalDeviceVulkan12Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                              drawIndirectCount=vk.VK_TRUE)
    return vk.VkPhysicalDeviceVulkan13Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                               pNext=f12, dynamicRendering=vk.VK_TRUE)


if __name__ == "__main__":
    vkapp.run_main("indirect_sizes_app", body, device_features=features())

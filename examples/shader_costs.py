"""Shader-cost sample: data-dependent compute and a branching, discarding fragment shader.

Run it with per-basic-block shader instrumentation (the layer drives VK_ARM_shader_instrumentation):
    .venv/bin/tessera run --instrument -- .venv/bin/python examples/shader_costs.py
    .venv/bin/tessera report <session folder> --top 3
Or on plain lavapipe:
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) .venv/bin/python examples/shader_costs.py

What it does, in one command buffer:
  - vkCmdDispatch of examples/shaders/collatz.comp over INPUTS (data-dependent loop trips and
    branches; 256 invocations, count 200, so some threads return at once);
  - one dynamic-rendering pass into a W x H RGBA8 image with two draws of
    examples/shaders/branchy.frag (a third of the pixels discarded, the left 8 columns take a
    branch, the others a loop of row % 4 trips): a full-image quad, then a small SMALL x SMALL one
    in the top-left corner, so the first draw is the expensive one.
What it checks: every Collatz output against a Python reference, and every pixel against numpy
(discarded pixels keep what was there; others get the branch's or the loop's colour, green within
1/255). Exit 0 and one 'shader_costs: OK ...' line on success.
"""

from __future__ import annotations

import numpy as np
import vulkan as vk

import vkapp
from compute_collatz import collatz_reference

W, H, SMALL = 64, 32, 8
INVOCATIONS, COUNT, LOCAL = 256, 200, 64
INPUTS = [(i * 7919 + 13) % 20000 for i in range(INVOCATIONS)]
CLEAR = (0, 0, 0, 255)
GREEN = 0.0                                     # push-constant green, the loop's starting value


def expected_image() -> np.ndarray:
    """What branchy.frag leaves after the full quad and then the small one (same colours)."""
    img = np.empty((H, W, 4), dtype=np.float64)
    img[:] = np.array(CLEAR) / 255.0
    for x0, y0, x1, y1 in ((0, 0, W, H), (0, 0, SMALL, SMALL)):
        for y in range(y0, y1):
            for x in range(x0, x1):
                if (x + y) % 3 == 0:
                    continue                    # discarded: the earlier value stays
                r, g = 0.0, GREEN
                if x < 8:
                    r = 1.0
                else:
                    for _ in range(y % 4):
                        g = g * 0.5 + 0.25
                img[y, x] = (r, g, 0.0, 1.0)
    return np.rint(img * 255.0)


def ndc_quad(x0: int, y0: int, x1: int, y1: int) -> list[tuple[float, float]]:
    a, b = (2 * x0 / W - 1, 2 * y0 / H - 1), (2 * x1 / W - 1, 2 * y1 / H - 1)
    return [(a[0], a[1]), (b[0], a[1]), (a[0], b[1]), (a[0], b[1]), (b[0], a[1]), (b[0], b[1])]


def body(ctx: vkapp.Context) -> str:
    storage, stage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk.VK_SHADER_STAGE_COMPUTE_BIT
    inbuf = ctx.buffer(INVOCATIONS * 4, storage, np.array(INPUTS, dtype=np.uint32))
    outbuf = ctx.buffer(INVOCATIONS * 4, storage, np.zeros(INVOCATIONS, dtype=np.uint32))
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    compute = ctx.compute_pipeline("collatz.comp", layout, spec={0: LOCAL})
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])

    fmt = vk.VK_FORMAT_R8G8B8A8_UNORM
    target = ctx.image(W, H, fmt, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
                       view=True)
    glayout = ctx.pipeline_layout([], push_size=16, push_stages=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
    graphics = ctx.graphics_pipeline("quad.vert", "branchy.frag", glayout, color_formats=[fmt])
    quads = np.array(ndc_quad(0, 0, W, H) + ndc_quad(0, 0, SMALL, SMALL), dtype=np.float32)
    vbuf = ctx.buffer(quads.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, quads)

    cmd = ctx.command_buffer()
    count = vk.ffi.new("uint32_t[1]", [COUNT])
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, compute)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, count)
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)
    vkapp.image_barrier(cmd, target, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                        vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
    attachment = vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=target.view,
        imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
        clearValue=vk.VkClearValue(color=vk.VkClearColorValue(float32=[c / 255.0 for c in CLEAR])))
    rendering = vk.VkRenderingInfo(sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
                                   renderArea=vk.VkRect2D(offset=vk.VkOffset2D(0, 0), extent=vk.VkExtent2D(W, H)),
                                   layerCount=1, colorAttachmentCount=1, pColorAttachments=[attachment])
    vk.vkCmdBeginRendering(cmd, rendering)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, graphics)
    vkapp.set_viewport_scissor(cmd, W, H)
    color = vk.ffi.new("float[4]", [0.0, GREEN, 0.0, 1.0])
    vk.vkCmdPushConstants(cmd, glayout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, 16, color)
    vk.vkCmdBindVertexBuffers(cmd, 0, 1, [vbuf.handle], [0])
    vk.vkCmdDraw(cmd, 6, 1, 0, 0)                 # the whole image
    vk.vkCmdDraw(cmd, 6, 1, 6, 0)                 # the small corner quad
    vk.vkCmdEndRendering(cmd)
    vkapp.image_barrier(cmd, target, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                        vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                        vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                        vk.VK_ACCESS_TRANSFER_READ_BIT)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    ctx.submit([cmd])

    steps = outbuf.array(np.uint32)[:COUNT].copy()
    vkapp.check_equal("collatz steps", steps, np.array([collatz_reference(v) for v in INPUTS[:COUNT]],
                                                       dtype=np.uint32))
    pixels = ctx.read_image(target, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL).astype(np.int32)
    want = expected_image().astype(np.int32)
    if np.abs(pixels - want).max() > 1:
        y, x = np.argwhere(np.abs(pixels - want).max(axis=2) > 1)[0]
        raise vkapp.CheckFailed(f"pixel ({x}, {y}) is {pixels[y, x].tolist()}, expected {want[y, x].tolist()}")
    drawn = int(((np.arange(W)[None, :] + np.arange(H)[:, None]) % 3 != 0).sum())
    return f"{COUNT} Collatz outputs and {W}x{H} pixels checked ({drawn} drawn, the rest discarded)"


if __name__ == "__main__":
    vkapp.run_main("shader_costs", body, dynamic_rendering=True)

"""Draws with known coverage, partly and wholly outside the viewport: the measured-counters app (#27).

Run (under `tessera run --counters measured`, or on plain lavapipe):
    .venv/bin/tessera run --counters measured --out OUT -- .venv/bin/python tests/integration/apps/clipped_draws.py
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) .venv/bin/python tests/integration/apps/clipped_draws.py

One submit, one 64x64 R8G8B8A8_UNORM target (dynamic rendering) in the pass "clipped pass", cleared
to black; one vkCmdDraw of QUADS quads (two triangles each, 6 vertices a quad) in white:
  inside:       x in [-1, 0]   -> pixel columns 0..31, every row: 32 x 64 = 2048 pixels;
  half outside: x in [0.5, 1.5] -> columns 48..63 on screen (the rest beyond the right edge): 1024 pixels;
  outside:      x in [2, 3]    -> no pixel: both triangles lie wholly outside the view volume.
The hand-computed references (the test's): input primitives 6, vertex invocations 18, fragment
shader invocations 3072 (= the covered pixels: no quad overlaps another), visible primitives (those
not wholly outside the view volume) 4. What it checks itself: the image's white pixels are exactly
the covered columns. Prints 'clipped_draws: OK ...'.

--own-query: the application counts too, with a pipeline-statistics query of its own around the pass
(begun and ended outside it; the device needs pipelineStatisticsQuery: `--gpu mali-g78`, whose
timing-only profile reports lavapipe's features); it checks its own results against the references
(6 input primitives, 3072 fragment shader invocations).
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
FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM
PASS = "clipped pass"
# (x0, x1) in normalized device coordinates, full height; the covered pixel columns [c0, c1)
QUADS = (((-1.0, 0.0), (0, 32)), ((0.5, 1.5), (48, 64)), ((2.0, 3.0), (0, 0)))
VISIBLE_QUADS = 2


def quad(x0: float, x1: float) -> list[tuple[float, float]]:
    return [(x0, -1), (x1, -1), (x0, 1), (x0, 1), (x1, -1), (x1, 1)]


STATISTICS = vk.VK_QUERY_PIPELINE_STATISTIC_INPUT_ASSEMBLY_PRIMITIVES_BIT | \
    vk.VK_QUERY_PIPELINE_STATISTIC_FRAGMENT_SHADER_INVOCATIONS_BIT
COVERED = sum((c1 - c0) * H for _, (c0, c1) in QUADS)


def body(ctx: vkapp.Context, own_query: bool) -> str:
    vertices = np.array([v for (x0, x1), _ in QUADS for v in quad(x0, x1)], dtype=np.float32)
    vbuf = ctx.buffer(vertices.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, vertices)
    layout = ctx.pipeline_layout([], push_size=16, push_stages=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
    solid = ctx.graphics_pipeline("quad.vert", "solid.frag", layout, color_formats=[FORMAT])
    usage = vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
    img = ctx.image(W, H, FORMAT, usage, view=True)
    labels = Labels(ctx)
    cmd = ctx.command_buffer()
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                        vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
    attachment = vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=img.view,
        imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
        clearValue=vk.VkClearValue(color=vk.VkClearColorValue(float32=[0.0, 0.0, 0.0, 1.0])))
    info = vk.VkRenderingInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
        renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
        layerCount=1, colorAttachmentCount=1, pColorAttachments=[attachment])
    white = vk.ffi.new("float[4]", [1.0, 1.0, 1.0, 1.0])
    pool = None
    if own_query:
        pool = ctx.own(vk.vkDestroyQueryPool, vk.vkCreateQueryPool(ctx.device, vk.VkQueryPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, queryType=vk.VK_QUERY_TYPE_PIPELINE_STATISTICS,
            queryCount=1, pipelineStatistics=STATISTICS), None))
        vk.vkCmdResetQueryPool(cmd, pool, 0, 1)
        vk.vkCmdBeginQuery(cmd, pool, 0, 0)
    labels.push(cmd, PASS)
    vk.vkCmdBeginRendering(cmd, info)
    vkapp.set_viewport_scissor(cmd, W, H)
    vk.vkCmdBindVertexBuffers(cmd, 0, 1, [vbuf.handle], [0])
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, solid)
    vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, 16, white)
    vk.vkCmdDraw(cmd, len(vertices), 1, 0, 0)
    vk.vkCmdEndRendering(cmd)
    labels.pop(cmd)
    if own_query:
        vk.vkCmdEndQuery(cmd, pool, 0)
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                        vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
    ctx.submit([cmd])
    got = ctx.read_image(img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL)
    want = np.zeros((H, W, 4), dtype=np.uint8)
    want[..., 3] = 255
    for _, (c0, c1) in QUADS:
        want[:, c0:c1] = 255
    vkapp.check_equal("clipped pass image", got, want)
    covered = int((got[..., 0] == 255).sum())
    own = ""
    if own_query:
        data = vk.ffi.new("uint64_t[2]")
        # (the vulkan package raises on an error result)
        vk.vkGetQueryPoolResults(ctx.device, pool, 0, 1, 16, data, 16,
                                 vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
        if (data[0], data[1]) != (2 * len(QUADS), COVERED):
            raise vkapp.CheckFailed(f"own query: primitives {data[0]}, fragments {data[1]}; "
                                    f"want {2 * len(QUADS)}, {COVERED}")
        own = f"; own query: {data[0]} primitives, {data[1]} fragments"
    return f"{covered} of {W}x{H} pixels covered by {len(QUADS)} quads ({VISIBLE_QUADS} visible); on {ctx.device_name}{own}"


if __name__ == "__main__":
    if "--own-query" in sys.argv[1:]:
        features = vk.VkPhysicalDeviceFeatures2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
            pNext=vk.VkPhysicalDeviceVulkan13Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                                      dynamicRendering=vk.VK_TRUE),
            features=vk.VkPhysicalDeviceFeatures(pipelineStatisticsQuery=vk.VK_TRUE))
        vkapp.run_main("clipped_draws", lambda ctx: body(ctx, True), device_features=features)
    else:
        vkapp.run_main("clipped_draws", lambda ctx: body(ctx, False), dynamic_rendering=True)

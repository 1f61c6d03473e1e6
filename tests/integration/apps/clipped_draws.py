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

--culling: after the clipped pass, four more passes (each its own 64x64 target, cleared to black, one
draw in white) whose visible primitives (#27: MaliGeomVisiblePrim) differ from their input primitives
by culling; the references, by hand (quad(x0, x1) below is wound clockwise on screen: y grows downwards
with the positive-height viewport, so its triangles have negative area a, spec 28.7.1):
  "culled pass": cull BACK, front face COUNTER_CLOCKWISE; quad(-1, -0.5) (clockwise: back, culled),
      the reversed quads over [-0.5, 0] and [0.5, 1.5] (counter-clockwise: front; the second half
      outside) -> 4 visible of 6 (2 if the facing were taken the wrong way round); columns 16..31
      and 48..63 lit;
  "dynamic cull pass": the pipeline's cull mode and front face are dynamic state, set to BACK and
      CLOCKWISE (vkCmdSetCullMode, vkCmdSetFrontFace); quad(-1, 0) (front), the reversed [0, 1]
      (back, culled), quad(2, 3) (front but wholly outside), quad(0.5, 1) (front) -> 4 visible of 8;
      columns 0..31 and 48..63 lit;
  "strip pass": a TRIANGLE_STRIP of 8 vertices over x = -1, 0, 2, 3 (full height), cull BACK, front
      COUNTER_CLOCKWISE: 6 triangles, all counter-clockwise as rasterized (a strip's odd triangles
      are turned), the last two wholly beyond x = 1 -> 4 visible of 6; every column lit;
  "indexed pass": vkCmdDrawIndexed of a TRIANGLE_STRIP with primitive restart, 16-bit indices
      0 1 2 3 0xFFFF 4 5 6 7: a strip of 2 triangles over [-1, 0] and one of 2 over [2, 3] (wholly
      outside) -> 2 visible of 4; columns 0..31 lit.
The app checks each image's lit columns.

--app-xfb: the application enables VK_EXT_transform_feedback on its device (and uses it for nothing):
the driver then captures no positions of its own, and shows no visible primitives.

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


def reversed_quad(x0: float, x1: float) -> list[tuple[float, float]]:
    """quad(x0, x1) with each triangle's winding turned (counter-clockwise on screen)."""
    q = quad(x0, x1)
    return [q[0], q[2], q[1], q[3], q[5], q[4]]


def strip(xs: tuple[float, ...]) -> list[tuple[float, float]]:
    return [(x, y) for x in xs for y in (-1.0, 1.0)]


# name -> (input primitives, visible primitives, lit columns [c0, c1) ...): the references (see the docstring)
CULLING = {"culled pass": (6, 4, ((16, 32), (48, 64))), "dynamic cull pass": (8, 4, ((0, 32), (48, 64))),
           "strip pass": (6, 4, ((0, 64),)), "indexed pass": (4, 2, ((0, 32),))}


def culling_passes(ctx: vkapp.Context, cmd, layout, labels, white) -> list[tuple[str, object]]:
    """The --culling passes, recorded into `cmd`: (name, image) per pass."""
    usage = vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
    strip_topology = vk.VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP
    back, cw = vk.VK_CULL_MODE_BACK_BIT, vk.VK_FRONT_FACE_CLOCKWISE
    culled = ctx.graphics_pipeline("quad.vert", "solid.frag", layout, color_formats=[FORMAT], cull_mode=back)
    dynamic = ctx.graphics_pipeline("quad.vert", "solid.frag", layout, color_formats=[FORMAT],
                                    dynamic=[vk.VK_DYNAMIC_STATE_CULL_MODE, vk.VK_DYNAMIC_STATE_FRONT_FACE])
    stripped = ctx.graphics_pipeline("quad.vert", "solid.frag", layout, color_formats=[FORMAT],
                                     topology=strip_topology, cull_mode=back)
    restarted = ctx.graphics_pipeline("quad.vert", "solid.frag", layout, color_formats=[FORMAT],
                                      topology=strip_topology, primitive_restart=True)
    indices = np.array([0, 1, 2, 3, 0xFFFF, 4, 5, 6, 7], dtype=np.uint16)
    ibuf = ctx.buffer(indices.nbytes, vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT, indices)
    passes = (
        ("culled pass", culled, quad(-1, -0.5) + reversed_quad(-0.5, 0) + reversed_quad(0.5, 1.5), None),
        ("dynamic cull pass", dynamic, quad(-1, 0) + reversed_quad(0, 1) + quad(2, 3) + quad(0.5, 1), None),
        ("strip pass", stripped, strip((-1, 0, 2, 3)), None),
        ("indexed pass", restarted, strip((-1, 0)) + strip((2, 3)), ibuf),
    )
    out = []
    for name, pipeline, points, index_buffer in passes:
        vertices = np.array(points, dtype=np.float32)
        vbuf = ctx.buffer(vertices.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, vertices)
        img = ctx.image(W, H, FORMAT, usage, view=True)
        vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                            vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                            vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
        labels.push(cmd, name)
        vk.vkCmdBeginRendering(cmd, rendering_info(img))
        vkapp.set_viewport_scissor(cmd, W, H)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [vbuf.handle], [0])
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
        vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, 16, white)
        if pipeline is dynamic:
            vk.vkCmdSetCullMode(cmd, back)
            vk.vkCmdSetFrontFace(cmd, cw)
        if index_buffer is not None:
            vk.vkCmdBindIndexBuffer(cmd, index_buffer.handle, 0, vk.VK_INDEX_TYPE_UINT16)
            vk.vkCmdDrawIndexed(cmd, len(indices), 1, 0, 0, 0)
        else:
            vk.vkCmdDraw(cmd, len(vertices), 1, 0, 0)
        vk.vkCmdEndRendering(cmd)
        labels.pop(cmd)
        vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                            vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                            vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                            vk.VK_ACCESS_TRANSFER_READ_BIT)
        out.append((name, img))
    return out


def rendering_info(img):
    attachment = vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=img.view,
        imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
        clearValue=vk.VkClearValue(color=vk.VkClearColorValue(float32=[0.0, 0.0, 0.0, 1.0])))
    return vk.VkRenderingInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
        renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
        layerCount=1, colorAttachmentCount=1, pColorAttachments=[attachment])


def lit(columns) -> np.ndarray:
    want = np.zeros((H, W, 4), dtype=np.uint8)
    want[..., 3] = 255
    for c0, c1 in columns:
        want[:, c0:c1] = 255
    return want


def body(ctx: vkapp.Context, own_query: bool, culling: bool = False) -> str:
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
    more = culling_passes(ctx, cmd, layout, labels, white) if culling else []
    ctx.submit([cmd])
    for name, image in more:
        vkapp.check_equal(f"{name} image", ctx.read_image(image, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL),
                          lit(CULLING[name][2]))
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
    extra = f"; {len(more)} culling passes" if more else ""
    if ctx.device_extensions:
        extra += f"; enabled {', '.join(ctx.device_extensions)}"
    return (f"{covered} of {W}x{H} pixels covered by {len(QUADS)} quads ({VISIBLE_QUADS} visible); "
            f"on {ctx.device_name}{own}{extra}")


if __name__ == "__main__":
    if "--own-query" in sys.argv[1:]:
        features = vk.VkPhysicalDeviceFeatures2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
            pNext=vk.VkPhysicalDeviceVulkan13Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                                      dynamicRendering=vk.VK_TRUE),
            features=vk.VkPhysicalDeviceFeatures(pipelineStatisticsQuery=vk.VK_TRUE))
        vkapp.run_main("clipped_draws", lambda ctx: body(ctx, True), device_features=features)
    else:
        extensions = ["VK_EXT_transform_feedback"] if "--app-xfb" in sys.argv[1:] else []
        vkapp.run_main("clipped_draws", lambda ctx: body(ctx, False, "--culling" in sys.argv[1:]),
                       dynamic_rendering=True, optional_device_extensions=extensions)

"""Draw-variant app: VK_EXT_multi_draw draws inside one dynamic-rendering pass.

Run (under `tessera run`, or on plain lavapipe):
    .venv/bin/tessera run --out OUT -- .venv/bin/python tests/integration/apps/draw_variants.py
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python tests/integration/apps/draw_variants.py

The device is created with VK_EXT_multi_draw (feature multiDraw) and Vulkan 1.3
dynamicRendering. One submit, one render pass instance (vkCmdBeginRendering)
into a 32x32 R8G8B8A8_UNORM image cleared to CLEAR:
  vkCmdDrawMultiEXT, drawCount 2, one push-constant color (RED):
      draw 0 = vertices 0..5 (rectangle R_A), draw 1 = vertices 6..11 (R_B);
      the VkMultiDrawInfoEXT array is strided 16 bytes (8 of padding per element)
  vkCmdDrawMultiIndexedEXT, drawCount 1, color GREEN:
      6 uint16 indices over the 4 corners of R_C (vertexOffset 8 in the corner buffer),
      pVertexOffset NULL so the per-draw vertexOffset is used; R_C overlaps R_A and R_B
So the pass holds 3 draws (2 + 1) of 6 vertices each: 18 vertices.
tests/integration/test_draw_variants.py checks the pass's draw count under Tessera.
What it checks: every pixel of the image against a numpy painting of the three
rectangles (exact: edges are pixel-aligned). Prints 'draw_variants: OK ...'.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402

W = H = 32
FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM
R_A = (2, 2, 14, 14)      # x0, y0, x1, y1 in pixels, exclusive end
R_B = (18, 4, 30, 12)
R_C = (8, 10, 24, 28)
RECTS = [R_A, R_B, R_C]
CLEAR = (0, 0, 32, 255)
RED, GREEN = (255, 0, 0, 255), (0, 255, 0, 255)
MULTI_STRIDE = 16          # bytes between VkMultiDrawInfoEXT elements (the struct is 8)


def ndc(px: int, size: int) -> float:
    return 2.0 * px / size - 1.0


def geometry() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(triangle-list vertices: 6 per rect, corner vertices: 4 per rect, uint16 indices of one rect)."""
    tri, corners = [], []
    for x0, y0, x1, y1 in RECTS:
        a, b = (ndc(x0, W), ndc(y0, H)), (ndc(x1, W), ndc(y0, H))
        c, d = (ndc(x0, W), ndc(y1, H)), (ndc(x1, W), ndc(y1, H))
        tri += [a, b, c, c, b, d]
        corners += [a, b, c, d]
    return (np.array(tri, dtype=np.float32), np.array(corners, dtype=np.float32),
            np.array([0, 1, 2, 2, 1, 3], dtype=np.uint16))


def expected() -> np.ndarray:
    img = np.empty((H, W, 4), dtype=np.uint8)
    img[:] = CLEAR
    for (x0, y0, x1, y1), color in [(R_A, RED), (R_B, RED), (R_C, GREEN)]:
        img[y0:y1, x0:x1] = color
    return img


def body(ctx: vkapp.Context) -> str:
    if "VK_EXT_multi_draw" not in ctx.device_extensions:
        raise vkapp.CheckFailed(f"device {ctx.device_name} does not offer VK_EXT_multi_draw")
    draw_multi = vk.vkGetDeviceProcAddr(ctx.device, "vkCmdDrawMultiEXT")
    draw_multi_indexed = vk.vkGetDeviceProcAddr(ctx.device, "vkCmdDrawMultiIndexedEXT")

    tri, corners, indices = geometry()
    tri_buf = ctx.buffer(tri.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, tri)
    corner_buf = ctx.buffer(corners.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, corners)
    index_buf = ctx.buffer(indices.nbytes, vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT, indices)
    layout = ctx.pipeline_layout([], push_size=16, push_stages=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
    pipeline = ctx.graphics_pipeline("quad.vert", "solid.frag", layout, color_formats=[FORMAT])
    img = ctx.image(W, H, FORMAT, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
                    view=True)

    # Per-draw parameters; all kept alive in locals until the submit.
    words = MULTI_STRIDE // 4
    padded = vk.ffi.new(f"uint32_t[{2 * words}]")
    for i, rect in enumerate((R_A, R_B)):
        padded[i * words] = 6 * RECTS.index(rect)   # firstVertex
        padded[i * words + 1] = 6                   # vertexCount
        padded[i * words + 2] = padded[i * words + 3] = 0xDEADBEEF   # padding a reader must skip
    vertex_info = vk.ffi.cast("VkMultiDrawInfoEXT *", padded)
    index_info = vk.ffi.new("VkMultiDrawIndexedInfoEXT[1]",
                            [{"firstIndex": 0, "indexCount": 6, "vertexOffset": 4 * RECTS.index(R_C)}])
    red = vk.ffi.new("float[4]", [c / 255.0 for c in RED])
    green = vk.ffi.new("float[4]", [c / 255.0 for c in GREEN])

    cmd = ctx.command_buffer()
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0,
                        vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
    clear = vk.VkClearValue(color=vk.VkClearColorValue(float32=[c / 255.0 for c in CLEAR]))
    attachment = vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=img.view,
        imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE, clearValue=clear,
    )
    info = vk.VkRenderingInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
        renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
        layerCount=1, colorAttachmentCount=1, pColorAttachments=[attachment],
    )
    vk.vkCmdBeginRendering(cmd, info)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
    vkapp.set_viewport_scissor(cmd, W, H)
    frag = vk.VK_SHADER_STAGE_FRAGMENT_BIT
    vk.vkCmdPushConstants(cmd, layout, frag, 0, 16, red)
    vk.vkCmdBindVertexBuffers(cmd, 0, 1, [tri_buf.handle], [0])
    draw_multi(cmd, 2, vertex_info, 1, 0, MULTI_STRIDE)
    vk.vkCmdPushConstants(cmd, layout, frag, 0, 16, green)
    vk.vkCmdBindVertexBuffers(cmd, 0, 1, [corner_buf.handle], [0])
    vk.vkCmdBindIndexBuffer(cmd, index_buf.handle, 0, vk.VK_INDEX_TYPE_UINT16)
    draw_multi_indexed(cmd, 1, index_info, 1, 0, vk.ffi.sizeof("VkMultiDrawIndexedInfoEXT"), vk.ffi.NULL)
    vk.vkCmdEndRendering(cmd)
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                        vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
    ctx.submit([cmd])
    got = ctx.read_image(img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL)
    vkapp.check_equal("multi-draw pass", got, expected())
    return (f"{W}x{H} pixels checked: 1 render pass, vkCmdDrawMultiEXT 2 draws + vkCmdDrawMultiIndexedEXT 1 draw; "
            f"on {ctx.device_name}")


def main() -> None:
    # multiDraw (VK_EXT_multi_draw) chained before Vulkan 1.3's dynamicRendering; kept alive in locals.
    features13 = vk.VkPhysicalDeviceVulkan13Features(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, dynamicRendering=vk.VK_TRUE)
    multi_draw = vk.VkPhysicalDeviceMultiDrawFeaturesEXT(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MULTI_DRAW_FEATURES_EXT, pNext=features13,
        multiDraw=vk.VK_TRUE)
    vkapp.run_main("draw_variants", body, optional_device_extensions=["VK_EXT_multi_draw"],
                   device_features=multi_draw)


if __name__ == "__main__":
    main()

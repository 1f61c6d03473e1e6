"""Overdraw and discard patterns in one render pass: the example for per-region counters.

Run (plain lavapipe; add VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation to validate):
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) .venv/bin/python examples/overdraw.py
Under Tessera with per-region counters, then the heatmaps (docs/regions.md):
    .venv/bin/tessera run --regions --out tessera-out/overdraw -- .venv/bin/python examples/overdraw.py
    .venv/bin/tessera regions tessera-out/overdraw

One dynamic-rendering pass (inside the debug label "overdraw scene") into a 160x100
R8G8B8A8_UNORM image, so with the emulated Mali's 32x32 regions the grid is 5x4 and its bottom
row is 4 pixels high. Depth testing and blending are off, so every covered pixel runs the
fragment shader once per draw:
1. a background rectangle over the whole image (solid.frag): depth 1 everywhere;
2. STACK, a 64x64 square at (8, 8), drawn STACK_DRAWS times (solid.frag), each in another color:
   overdraw depth 1 + STACK_DRAWS where it lies, over parts of four regions. It is deliberately not
   aligned to 64 pixels: lavapipe (the emulated Mali's backend) drops the earlier draws of a 64x64
   bin that a later opaque draw covers whole, so their fragments would neither run nor be counted
   (docs/regions.md, limits);
3. CHECKER, a 64x64 square at (96, 32) with checker_discard.frag, which discards the 8x8 cells
   whose (x/8 + y/8) is even (half of its pixels): killed fragments on regions (3..4, 1..2);
4. HALF, a rectangle over half of region (2, 0) drawn twice: a region partly overdrawn.
What it checks: every pixel of the image against a numpy painting of the same rectangles and
the checkerboard. `fragment_threads()` and `killed_fragments()` give the per-region counts the
emulated Mali measures (tests/integration/test_regions_layer.py compares them). Exit 0 and one
'overdraw: OK ...' line on success.
"""
from __future__ import annotations

import numpy as np
import vulkan as vk

import vkapp

W, H = 160, 100
REGION = 32
FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM
Rect = tuple[int, int, int, int]   # x0, y0, x1, y1 in pixels, exclusive end
Color = tuple[int, int, int, int]

BACKGROUND: Rect = (0, 0, W, H)
STACK: Rect = (8, 8, 72, 72)
STACK_DRAWS = 4
CHECKER: Rect = (96, 32, 160, 96)
HALF: Rect = (64, 0, 80, 32)
RECTS = [BACKGROUND, STACK, CHECKER, HALF]
GREY: Color = (40, 40, 40, 255)
STACK_COLORS: list[Color] = [(255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255), (255, 255, 0, 255)]
CHECKER_COLOR: Color = (255, 0, 255, 255)
HALF_COLORS: list[Color] = [(0, 255, 255, 255), (255, 255, 255, 255)]
CLEAR: Color = (0, 0, 0, 255)
LABEL = "overdraw scene"


def ndc(px: int, size: int) -> float:
    return 2.0 * px / size - 1.0


def vertices() -> np.ndarray:
    """Two triangles per rectangle of RECTS, in NDC."""
    tri = []
    for x0, y0, x1, y1 in RECTS:
        a, b, c, d = (ndc(x0, W), ndc(y0, H)), (ndc(x1, W), ndc(y0, H)), (ndc(x0, W), ndc(y1, H)), (ndc(x1, W), ndc(y1, H))
        tri += [a, b, c, c, b, d]
    return np.array(tri, dtype=np.float32)


def mask(rect: Rect) -> np.ndarray:
    x0, y0, x1, y1 = rect
    m = np.zeros((H, W), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


def discarded(rect: Rect) -> np.ndarray:
    """Pixels of `rect` that checker_discard.frag discards."""
    ys, xs = np.mgrid[0:H, 0:W]
    return mask(rect) & ((xs // 8 + ys // 8) % 2 == 0)


def expected_image() -> np.ndarray:
    img = np.empty((H, W, 4), dtype=np.uint8)
    img[:] = CLEAR
    img[mask(BACKGROUND)] = GREY
    for color in STACK_COLORS[:STACK_DRAWS]:
        img[mask(STACK)] = color
    img[mask(CHECKER) & ~discarded(CHECKER)] = CHECKER_COLOR
    for color in HALF_COLORS:
        img[mask(HALF)] = color
    return img


def per_region(pixels: np.ndarray) -> np.ndarray:
    """Sum of a per-pixel count over each 32x32 region: (rows, cols), the bottom row partial."""
    rows, cols = -(-H // REGION), -(-W // REGION)
    return np.array([[pixels[ry * REGION:(ry + 1) * REGION, rx * REGION:(rx + 1) * REGION].sum()
                      for rx in range(cols)] for ry in range(rows)], dtype=np.int64)


def fragment_threads() -> np.ndarray:
    """Fragment shader invocations per region: every draw's covered pixels (no depth test)."""
    depth = mask(BACKGROUND).astype(np.int64) + STACK_DRAWS * mask(STACK) + mask(CHECKER) + len(HALF_COLORS) * mask(HALF)
    return per_region(depth)


def killed_fragments() -> np.ndarray:
    return per_region(discarded(CHECKER).astype(np.int64))


class Labels:
    """vkCmdBegin/EndDebugUtilsLabelEXT when the instance has VK_EXT_debug_utils."""

    def __init__(self, ctx: vkapp.Context) -> None:
        self.begin = self.end = None
        if ctx.has_debug_utils:
            self.begin = vk.vkGetInstanceProcAddr(ctx.instance, "vkCmdBeginDebugUtilsLabelEXT")
            self.end = vk.vkGetInstanceProcAddr(ctx.instance, "vkCmdEndDebugUtilsLabelEXT")

    def push(self, cmd: object, name: str) -> None:
        if self.begin:
            self.begin(cmd, vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT,
                                                    pLabelName=name, color=[0.0, 0.0, 0.0, 0.0]))

    def pop(self, cmd: object) -> None:
        if self.end:
            self.end(cmd)


def body(ctx: vkapp.Context) -> str:
    tri = vertices()
    vbuf = ctx.buffer(tri.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, tri)
    layout = ctx.pipeline_layout([], push_size=16, push_stages=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
    solid = ctx.graphics_pipeline("quad.vert", "solid.frag", layout, color_formats=[FORMAT])
    checker = ctx.graphics_pipeline("quad.vert", "checker_discard.frag", layout, color_formats=[FORMAT])
    img = ctx.image(W, H, FORMAT, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT, view=True)
    keep: list[object] = []   # push-constant data alive until the submit

    def draw(cmd: object, rect: Rect, color: Color) -> None:
        data = vk.ffi.new("float[4]", [c / 255.0 for c in color])
        keep.append(data)
        vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, 16, data)
        vk.vkCmdDraw(cmd, 6, 1, 6 * RECTS.index(rect), 0)

    labels = Labels(ctx)
    cmd = ctx.command_buffer()
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                        vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
    attachment = vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=img.view,
        imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
        clearValue=vk.VkClearValue(color=vk.VkClearColorValue(float32=[c / 255.0 for c in CLEAR])))
    info = vk.VkRenderingInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
        renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
        layerCount=1, colorAttachmentCount=1, pColorAttachments=[attachment])
    labels.push(cmd, LABEL)
    vk.vkCmdBeginRendering(cmd, info)
    vkapp.set_viewport_scissor(cmd, W, H)
    vk.vkCmdBindVertexBuffers(cmd, 0, 1, [vbuf.handle], [0])
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, solid)
    draw(cmd, BACKGROUND, GREY)
    for color in STACK_COLORS[:STACK_DRAWS]:
        draw(cmd, STACK, color)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, checker)
    draw(cmd, CHECKER, CHECKER_COLOR)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, solid)
    for color in HALF_COLORS:
        draw(cmd, HALF, color)
    vk.vkCmdEndRendering(cmd)
    labels.pop(cmd)
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                        vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
    ctx.submit([cmd])
    got = ctx.read_image(img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL)
    vkapp.check_equal("overdraw image", got, expected_image())
    threads = fragment_threads()
    return (f"{W}x{H} pixels checked: {1 + STACK_DRAWS + 1 + len(HALF_COLORS)} draws, overdraw up to "
            f"{1 + STACK_DRAWS}, {int(killed_fragments().sum())} fragments discarded, {int(threads.sum())} "
            f"fragment threads (busiest 32x32 region {int(threads.max())}); on {ctx.device_name}")


if __name__ == "__main__":
    vkapp.run_main("overdraw", body, dynamic_rendering=True)

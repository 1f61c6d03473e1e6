"""A frame of two labelled passes, and its variant with one more full-screen draw: the CI acceptance app (#29).

Run (under `tessera run`, or on plain lavapipe):
    .venv/bin/tessera run --out OUT -- .venv/bin/python tests/integration/apps/ci_frame.py [--extra-draw]
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) .venv/bin/python tests/integration/apps/ci_frame.py

One submit into a 64x64 R8G8B8A8_UNORM image (dynamic rendering), inside the debug label "frame":
  "shadow pass": one full-screen draw (SHADOW color);
  "main pass": MAIN_DRAWS full-screen draws, each in another color (the last one covers all),
               one more with --extra-draw;
then an unlabelled copy of the image to a buffer (the readback).
The two programs differ only in the draws of "main pass", so `tessera diff` must name that pass
and `tessera check` with a budget on it must fail the variant (tests/integration/test_ci_commands.py).
What it checks: every pixel equals the last draw's color. Prints 'ci_frame: OK ...'.
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
FRAME, SHADOW_PASS, MAIN_PASS = "frame", "shadow pass", "main pass"
SHADOW = (10, 20, 30, 255)
MAIN_COLORS = [(255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255)]
MAIN_DRAWS = 2
CLEAR = (0, 0, 0, 255)


def main_draws(extra: bool) -> int:
    return MAIN_DRAWS + (1 if extra else 0)


def body(ctx: vkapp.Context, extra: bool) -> str:
    full = np.array([(-1, -1), (1, -1), (-1, 1), (-1, 1), (1, -1), (1, 1)], dtype=np.float32)
    vbuf = ctx.buffer(full.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, full)
    layout = ctx.pipeline_layout([], push_size=16, push_stages=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
    solid = ctx.graphics_pipeline("quad.vert", "solid.frag", layout, color_formats=[FORMAT])
    usage = vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
    shadow, img = (ctx.image(W, H, FORMAT, usage, view=True) for _ in range(2))
    keep: list[object] = []     # push-constant data alive until the submit
    labels = Labels(ctx)
    cmd = ctx.command_buffer()

    def render(target: vkapp.Image, name: str, colors) -> None:
        vkapp.image_barrier(cmd, target, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                            vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                            vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
        attachment = vk.VkRenderingAttachmentInfo(
            sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=target.view,
            imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
            storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
            clearValue=vk.VkClearValue(color=vk.VkClearColorValue(float32=[c / 255.0 for c in CLEAR])))
        info = vk.VkRenderingInfo(
            sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
            renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=W, height=H)),
            layerCount=1, colorAttachmentCount=1, pColorAttachments=[attachment])
        labels.push(cmd, name)
        vk.vkCmdBeginRendering(cmd, info)
        vkapp.set_viewport_scissor(cmd, W, H)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [vbuf.handle], [0])
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, solid)
        for color in colors:
            data = vk.ffi.new("float[4]", [c / 255.0 for c in color])
            keep.append(data)
            vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, 16, data)
            vk.vkCmdDraw(cmd, 6, 1, 0, 0)
        vk.vkCmdEndRendering(cmd)
        labels.pop(cmd)

    colors = MAIN_COLORS[:main_draws(extra)]
    labels.push(cmd, FRAME)
    render(shadow, SHADOW_PASS, [SHADOW])
    render(img, MAIN_PASS, colors)
    labels.pop(cmd)
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                        vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
    ctx.submit([cmd])
    got = ctx.read_image(img, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL)
    want = np.empty((H, W, 4), dtype=np.uint8)
    want[:] = colors[-1]
    vkapp.check_equal("main pass image", got, want)
    return f"{W}x{H} pixels checked: {SHADOW_PASS} 1 draw, {MAIN_PASS} {len(colors)} draws; on {ctx.device_name}"


if __name__ == "__main__":
    extra = "--extra-draw" in sys.argv[1:]
    vkapp.run_main("ci_frame", lambda ctx: body(ctx, extra), dynamic_rendering=True)

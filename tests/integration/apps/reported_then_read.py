"""A recording whose submits the layer's C reported, looked at by Python after the resources moved on.

Run: .venv/bin/python tests/integration/apps/reported_then_read.py [FRAMES]
FRAMES frames re-record one command buffer (a debug label around a vkCmdFillBuffer of `out`), submit it
with a fence and wait: after the first few, both shims handle these submits in C (layer/reported_submits.py).
Then a buffer no recording names is destroyed (the device's resources move on: no kept recording holds), and
the last recording, not recorded again, is submitted once more in a vkQueueSubmit of two batches (the
second empty), which the layer reads in Python: the recording's hooks run then, without its kept product.
Checks the filled bytes; prints 'reported_then_read: OK <frames> frames'.
"""
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402

VALUE = 0x7E557E55


def submit(ctx, batches: list, fence) -> None:
    vk.vkQueueSubmit(ctx.queue, len(batches), batches, fence)
    vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
    vk.vkResetFences(ctx.device, 1, [fence])


def main() -> None:
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    ctx = vkapp.Context(vkapp.Settings.from_env(), "reported_then_read")
    out = ctx.buffer(256, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    unnamed = vk.vkCreateBuffer(ctx.device, vk.VkBufferCreateInfo(   # no recording names it
        sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=256, usage=vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
    cmd, fence = ctx.primary(), ctx.fence()
    label = vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName="fill")
    begin_label, end_label = ctx.cmd_labels()
    batch = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1, pCommandBuffers=[cmd])
    for _ in range(frames):
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
        begin_label(cmd, label)
        vk.vkCmdFillBuffer(cmd, out.handle, 0, 256, VALUE)
        vkapp.host_barrier(cmd)
        end_label(cmd)
        vk.vkEndCommandBuffer(cmd)
        submit(ctx, [batch], fence)
    vk.vkDestroyBuffer(ctx.device, unnamed, None)
    out.mapped[0:256] = bytes(256)
    submit(ctx, [batch, vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO)], fence)
    if not (out.array(np.uint32) == VALUE).all():
        raise SystemExit("reported_then_read: the last submit did not fill the buffer")
    vk.vkDestroyFence(ctx.device, fence, None)
    ctx.close()
    print(f"reported_then_read: OK {frames} frames")


if __name__ == "__main__":
    main()

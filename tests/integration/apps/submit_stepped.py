"""submit_loop.py in lockstep with its caller: one iteration per line on stdin.

Run: .venv/bin/python tests/integration/apps/submit_stepped.py [fence|timeline|rerecord]
Each iteration submits one small transfer (a fill of the buffer with N),
waits for it, checks it, prints 'iteration N' and reads a line: 'next' runs
another, anything else (or end of input) closes the device and exits. The
caller decides when things happen (kill the daemon, restart it, kill the app)
from what it has seen, so no test has to guess how fast anything runs.
`fence` (the default) waits with vkWaitForFences; `timeline` signals a timeline
semaphore to N and waits for it with vkWaitSemaphores, as engines that pace
frames with timeline semaphores do; `rerecord` records one command buffer again
every iteration with the same commands (a fill of REPEATED, after the host
cleared the buffer), as frame loops do: once one such recording was kept, the
shims' C submits, places and reports the next ones whole (docs/shims.md).
"""
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402

REPEATED = 0x5EED


def rerecord_submit(ctx: vkapp.Context, cmd, fence, buf) -> None:
    """`cmd` recorded again (its pool reset) with the same commands, submitted with `fence` and waited for."""
    buf.array(np.uint32)[:] = 0
    vk.vkResetCommandPool(ctx.device, ctx.command_pool, 0)
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
    vk.vkCmdFillBuffer(cmd, buf.handle, 0, 256, REPEATED)
    vkapp.host_barrier(cmd)
    vk.vkEndCommandBuffer(cmd)
    submit = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1, pCommandBuffers=[cmd])
    vk.vkQueueSubmit(ctx.queue, 1, [submit], fence)
    vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
    vk.vkResetFences(ctx.device, 1, [fence])


def timeline_submit(ctx: vkapp.Context, semaphore, cmd, value: int) -> None:
    """`cmd` submitted signalling `semaphore` to `value`, then the host waits for that value."""
    vk.vkEndCommandBuffer(cmd)
    values = vk.VkTimelineSemaphoreSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                              signalSemaphoreValueCount=1, pSignalSemaphoreValues=[value])
    submit = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, pNext=values, commandBufferCount=1,
                             pCommandBuffers=[cmd], signalSemaphoreCount=1, pSignalSemaphores=[semaphore])
    vk.vkQueueSubmit(ctx.queue, 1, [submit], None)
    wait = vk.VkSemaphoreWaitInfo(sType=vk.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, semaphoreCount=1,
                                  pSemaphores=[semaphore], pValues=[value])
    vk.vkWaitSemaphores(ctx.device, wait, 10 * 1000**3)   # raises unless VK_SUCCESS
    vk.vkFreeCommandBuffers(ctx.device, ctx.command_pool, 1, [cmd])


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "fence"
    features = None
    if mode == "timeline":
        features = vk.VkPhysicalDeviceTimelineSemaphoreFeatures(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES, timelineSemaphore=vk.VK_TRUE)
    ctx = vkapp.Context(vkapp.Settings.from_env(), "submit_stepped", device_features=features)
    semaphore = None
    if mode == "timeline":
        kind = vk.VkSemaphoreTypeCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                            semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
        semaphore = vk.vkCreateSemaphore(
            ctx.device, vk.VkSemaphoreCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, pNext=kind), None)
    buf = ctx.buffer(256, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    again = fence = None
    if mode == "rerecord":
        again = vk.vkAllocateCommandBuffers(ctx.device, vk.VkCommandBufferAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=ctx.command_pool,
            level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
    i = 0
    while True:
        i += 1
        if again is not None:
            rerecord_submit(ctx, again, fence, buf)
        else:
            cmd = ctx.command_buffer()
            vk.vkCmdFillBuffer(cmd, buf.handle, 0, 256, i)
            vkapp.host_barrier(cmd)
            if semaphore is None:
                ctx.submit([cmd])
            else:
                timeline_submit(ctx, semaphore, cmd, i)
        if not (buf.array(np.uint32) == (REPEATED if again is not None else i)).all():
            raise SystemExit(f"iteration {i}: wrong buffer contents")
        print(f"iteration {i}", flush=True)
        if sys.stdin.readline().strip() != "next":
            break
    if semaphore is not None:
        vk.vkDestroySemaphore(ctx.device, semaphore, None)
    if fence is not None:
        vk.vkDestroyFence(ctx.device, fence, None)
    ctx.close()


if __name__ == "__main__":
    main()

"""Submits through the shims' C path and their Python path, mixed, in a known order.

Run: .venv/bin/python tests/integration/apps/submit_paths.py  (under `tessera run` or not)
One queue; buffer A fills 16 bytes (reusable, no labels: its submits may skip Python), buffer L
fills 16 bytes inside an application label it opens and closes (balanced: its submits may skip
Python too), buffer O fills 16 bytes inside a label it leaves open and buffer E closes it (their
submit takes the Python path, which plans what they do to the queue's label stack). Submits, in
order (submitIDs under the layer):

 1  A                      first submit of A: not wrapped
 2  A                      A again: wrapped in s2
 3  L                      L's first submit: not wrapped
 4  A inside the queue label "q" (the label in the C path's ledger): wrapped in s4, ANNEX labels
 5  vkQueueSubmit2 of A    wrapped in s5
 6  two batches [A] then [L], the second waiting for a semaphore the first signals
 7  A                      wrapped in s7
 8  one batch [O, E]       O's label is open across the two buffers: Python path; not wrapped

Every fill is checked; prints 'submit_paths: OK'.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402


def main() -> None:
    ctx = vkapp.Context(vkapp.Settings.from_env(), "submit_paths")
    dev = ctx.device
    get = lambda name: vk.vkGetInstanceProcAddr(ctx.instance, name)  # noqa: E731
    cmd_begin, cmd_end = get("vkCmdBeginDebugUtilsLabelEXT"), get("vkCmdEndDebugUtilsLabelEXT")
    queue_begin, queue_end = get("vkQueueBeginDebugUtilsLabelEXT"), get("vkQueueEndDebugUtilsLabelEXT")
    submit2 = get("vkQueueSubmit2KHR") if not hasattr(vk, "vkQueueSubmit2") else vk.vkQueueSubmit2
    buf = ctx.buffer(64, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)

    def recorded(value: int | None, offset: int = 0, label: str | None = None, close: bool = True,
                 closes_earlier: bool = False):
        """A buffer filling 16 bytes at `offset` with `value` (None: no fill) inside `label` (`close`: and
        closing it), after closing a label opened before it (`closes_earlier`)."""
        info = vk.VkCommandBufferAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                              commandPool=ctx.command_pool,
                                              level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
        cmd = vk.vkAllocateCommandBuffers(dev, info)[0]
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
        if closes_earlier:
            cmd_end(cmd)
        if label:
            cmd_begin(cmd, vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName=label))
        if value is not None:
            vk.vkCmdFillBuffer(cmd, buf.handle, offset, 16, value)
        if label and close:
            cmd_end(cmd)
        vkapp.host_barrier(cmd)
        vk.vkEndCommandBuffer(cmd)
        return cmd

    a, l_ = recorded(0xA, 0), recorded(0x1, 16, "labelled")
    o, e = recorded(0x2, 32, "open", close=False), recorded(None, closes_earlier=True)
    fence = vk.vkCreateFence(dev, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)

    def wait() -> None:
        vk.vkWaitForFences(dev, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
        vk.vkResetFences(dev, 1, [fence])

    def submit(*batches, signal=None, wait_on=None) -> None:
        infos = []
        for i, cmds in enumerate(batches):
            extra = {}
            if i == 0 and signal is not None:
                extra = {"signalSemaphoreCount": 1, "pSignalSemaphores": [signal]}
            if i == 1 and wait_on is not None:
                extra = {"waitSemaphoreCount": 1, "pWaitSemaphores": [wait_on],
                         "pWaitDstStageMask": [vk.VK_PIPELINE_STAGE_TRANSFER_BIT]}
            infos.append(vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=len(cmds),
                                         pCommandBuffers=list(cmds), **extra))
        vk.vkQueueSubmit(ctx.queue, len(infos), infos, fence)
        wait()

    submit([a])                                                     # 1
    submit([a])                                                     # 2
    submit([l_])                                                    # 3
    queue_begin(ctx.queue, vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName="q"))
    submit([a])                                                     # 4
    queue_end(ctx.queue)
    info = vk.VkCommandBufferSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO, commandBuffer=a)
    submit2(ctx.queue, 1, [vk.VkSubmitInfo2(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO_2, commandBufferInfoCount=1,
                                            pCommandBufferInfos=[info])], fence)   # 5
    wait()
    semaphore = vk.vkCreateSemaphore(dev, vk.VkSemaphoreCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO),
                                     None)
    submit([a], [l_], signal=semaphore, wait_on=semaphore)          # 6
    submit([a])                                                     # 7
    submit([o, e])                                                  # 8
    got = buf.array(np.uint32)[:12]
    vkapp.check_equal("fills", got, np.array([0xA] * 4 + [0x1] * 4 + [0x2] * 4, np.uint32))
    vk.vkDestroySemaphore(dev, semaphore, None)
    vk.vkDestroyFence(dev, fence, None)
    vk.vkFreeCommandBuffers(dev, ctx.command_pool, 4, [a, l_, o, e])
    ctx.close()
    print("submit_paths: OK")


if __name__ == "__main__":
    main()

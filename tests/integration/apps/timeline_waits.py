"""Submits on one queue joined by a timeline semaphore, to see which signal a wait follows.

Run: .venv/bin/python tests/integration/apps/timeline_waits.py  (under `tessera run` or not)
 1  F1: a 16-byte fill (transfer)                          signals the semaphore to 1
 2  one vkQueueSubmit of three batches:
      D:  a Collatz dispatch of 32768 elements (compute)   signals it to 2
      F2: a 16-byte fill                                   waits for 1
      F3: a 16-byte fill                                   waits for 2, then signals 3
and the host waits for 3 (vkWaitSemaphores), then for the queue (F2 signals nothing: a signal must raise
the value when it runs, and F2 may finish before D). The batches are submitted at one host time. F2's wait is met
by F1, long done: on the emulated Mali F2 starts with D, on its own (transfer) queue, not after D (which a
wait for the semaphore's last signal would give); F3's is met by D's end. Every result is checked; prints
'timeline_waits: OK'.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402

COUNT = 32768


def main() -> None:
    features = vk.VkPhysicalDeviceTimelineSemaphoreFeatures(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES, timelineSemaphore=vk.VK_TRUE)
    ctx = vkapp.Context(vkapp.Settings.from_env(), "timeline_waits", device_features=features)
    dev = ctx.device
    kind = vk.VkSemaphoreTypeCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                        semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
    semaphore = vk.vkCreateSemaphore(dev, vk.VkSemaphoreCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                                                   pNext=kind), None)
    fills = ctx.buffer(48, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    storage, stage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk.VK_SHADER_STAGE_COMPUTE_BIT
    inputs = np.arange(1, COUNT + 1, dtype=np.uint32)
    inbuf, outbuf = ctx.buffer(COUNT * 4, storage, inputs), ctx.buffer(COUNT * 4, storage)
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    pipeline = ctx.compute_pipeline("collatz.comp", layout, spec={0: 32})
    dset = ctx.allocate_set(ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1), set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])

    def fill(offset: int, value: int):
        cmd = ctx.command_buffer()
        vk.vkCmdFillBuffer(cmd, fills.handle, offset, 16, value)
        vkapp.host_barrier(cmd)
        vk.vkEndCommandBuffer(cmd)
        return cmd

    cmd = ctx.command_buffer()
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, vk.ffi.new("uint32_t[1]", [COUNT]))
    vk.vkCmdDispatch(cmd, (COUNT + 31) // 32, 1, 1)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    vk.vkEndCommandBuffer(cmd)
    buffers = [fill(0, 0xF1), cmd, fill(16, 0xF2), fill(32, 0xF3)]

    def batch(buffer, signal: int | None, wait: int | None = None):
        """A batch running `buffer` that signals the semaphore to `signal` if given, after it reaches `wait` if
        given; with the VkTimelineSemaphoreSubmitInfo of its values (returned too: it must outlive the submit)."""
        waits, signals = [] if wait is None else [wait], [] if signal is None else [signal]
        values = vk.VkTimelineSemaphoreSubmitInfo(
            sType=vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, waitSemaphoreValueCount=len(waits),
            pWaitSemaphoreValues=waits or None, signalSemaphoreValueCount=len(signals),
            pSignalSemaphoreValues=signals or None)
        extra = {"waitSemaphoreCount": 1, "pWaitSemaphores": [semaphore],
                 "pWaitDstStageMask": [vk.VK_PIPELINE_STAGE_TRANSFER_BIT]} if waits else {}
        if signals:
            extra.update(signalSemaphoreCount=1, pSignalSemaphores=[semaphore])
        return vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, pNext=values, commandBufferCount=1,
                               pCommandBuffers=[buffer], **extra), values

    first, kept = batch(buffers[0], 1)
    vk.vkQueueSubmit(ctx.queue, 1, [first], None)
    second = [batch(buffers[1], 2), batch(buffers[2], None, wait=1), batch(buffers[3], 3, wait=2)]
    vk.vkQueueSubmit(ctx.queue, 3, [info for info, _ in second], None)
    vk.vkWaitSemaphores(dev, vk.VkSemaphoreWaitInfo(sType=vk.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, semaphoreCount=1,
                                                    pSemaphores=[semaphore], pValues=[3]), 10 * 1000**3)
    vk.vkQueueWaitIdle(ctx.queue)
    vkapp.check_equal("fills", fills.array(np.uint32)[:12], np.array([0xF1] * 4 + [0xF2] * 4 + [0xF3] * 4, np.uint32))
    if (outbuf.array(np.uint32) == 0).all():
        raise SystemExit("timeline_waits: the dispatch wrote nothing")
    vk.vkDestroySemaphore(dev, semaphore, None)
    vk.vkFreeCommandBuffers(dev, ctx.command_pool, len(buffers), buffers)
    ctx.close()
    print("timeline_waits: OK")


if __name__ == "__main__":
    main()

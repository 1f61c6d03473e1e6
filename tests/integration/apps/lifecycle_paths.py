"""Re-records two command buffers every frame, with what may come between a begin and end made in C and
their hooks (vkapi/lifecycle.py): recordings never submitted, resets, a secondary executed, a submit the
layer makes in Python, two buffers in one submit, a buffer freed and one allocated, one submit naming a buffer
twice, a pool reset, a buffer submitted again.

Run: .venv/bin/python tests/integration/apps/lifecycle_paths.py [FRAMES]
Each frame, buffer P: a debug label around a fill of `src` and a copy of it into `out`; buffer Q: a fill
of `other`, the same every frame (so that the recordings can be reused: vkapi/replay.py). The host clears
what they write, both are submitted together with a fence and waited for, and the bytes are checked. On some frames (FRAME_* below) something else happens too. Prints
'lifecycle_paths: OK <frames> frames'.
"""
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402

SIZE = 256
SECONDARY_VALUE = 0x77777777
FRAME_UNSUBMITTED = 3     # P is recorded, then begun again before anything submitted it
FRAME_RESET = 5           # P is reset with vkResetCommandBuffer after the frame
FRAME_SECONDARY = 7       # P executes a secondary buffer (a hook in Python in the middle of the recording)
FRAME_QUEUE_LABEL = 9     # the submit is inside a queue label (the C path records the label in the layer's
                          # ledger and wraps the submit; the layer reads it from the ledger, its ANNEX from the
                          # kept product)
FRAME_FREE = 11           # Q, recorded but not submitted, is freed and a new Q allocated
FRAME_TWICE = 12          # P is named twice in the frame's submit: batches [P, Q] and [P] (P is recorded for
                          # simultaneous use every frame)
FRAME_POOL_RESET = 13     # the pool is reset before the frame's recordings
FRAME_SUBMIT_AGAIN = 15   # after the frame, P alone is submitted again inside a queue label (a recording whose
                          # first submit the layer reported without running its hooks)


def allocate(ctx, pool, level: int):
    return vk.vkAllocateCommandBuffers(ctx.device, vk.VkCommandBufferAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=pool, level=level,
        commandBufferCount=1))[0]


def begin(cmd, inheritance=None, flags: int = 0) -> None:
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, flags=flags, pInheritanceInfo=inheritance))


def main() -> None:
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    ctx = vkapp.Context(vkapp.Settings.from_env(), "lifecycle_paths")
    usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
    src, out, other, extra = (ctx.buffer(SIZE, usage) for _ in range(4))
    pool = ctx.own(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(
        ctx.device, vk.VkCommandPoolCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                               flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                               queueFamilyIndex=ctx.queue_family), None))
    primary, level2 = vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY
    p, q, secondary = allocate(ctx, pool, primary), allocate(ctx, pool, primary), allocate(ctx, pool, level2)
    begin(secondary, vk.VkCommandBufferInheritanceInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO))
    vk.vkCmdFillBuffer(secondary, extra.handle, 0, SIZE, SECONDARY_VALUE)
    vk.vkEndCommandBuffer(secondary)
    fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
    label = vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName="frame work")
    queue_label = vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName="queue work")
    proc = {name: vk.vkGetInstanceProcAddr(ctx.instance, name) for name in (
        "vkCmdBeginDebugUtilsLabelEXT", "vkCmdEndDebugUtilsLabelEXT", "vkQueueBeginDebugUtilsLabelEXT",
        "vkQueueEndDebugUtilsLabelEXT")}

    def record_p(value: int, with_secondary: bool = False) -> None:
        begin(p, flags=vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT)
        proc["vkCmdBeginDebugUtilsLabelEXT"](p, label)
        vk.vkCmdFillBuffer(p, src.handle, 0, SIZE, value)
        vkapp.transfer_barrier(p)
        vk.vkCmdCopyBuffer(p, src.handle, out.handle, 1, [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=SIZE)])
        if with_secondary:
            vk.vkCmdExecuteCommands(p, 1, [secondary])
        vkapp.host_barrier(p)
        proc["vkCmdEndDebugUtilsLabelEXT"](p)
        vk.vkEndCommandBuffer(p)

    def record_q(value: int) -> None:
        begin(q)
        vk.vkCmdFillBuffer(q, other.handle, 0, SIZE, value)
        vkapp.host_barrier(q)
        vk.vkEndCommandBuffer(q)

    value = 0x5A5A5A5A
    for frame in range(frames):
        for buffer in (out, other, extra):   # what the frame's work writes, cleared by the host first
            buffer.mapped[0:SIZE] = bytes(SIZE)
        if frame == FRAME_POOL_RESET:
            vk.vkResetCommandPool(ctx.device, pool, 0)
            begin(secondary, vk.VkCommandBufferInheritanceInfo(
                sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO))
            vk.vkCmdFillBuffer(secondary, extra.handle, 0, SIZE, SECONDARY_VALUE)
            vk.vkEndCommandBuffer(secondary)
        if frame == FRAME_UNSUBMITTED:
            record_p(value)
        record_p(value, with_secondary=frame == FRAME_SECONDARY)
        if frame == FRAME_FREE:
            record_q(value ^ 0xFFFFFFFF)
            vk.vkFreeCommandBuffers(ctx.device, pool, 1, [q])
            q = allocate(ctx, pool, primary)
        record_q(value ^ 0xFFFFFFFF)
        if frame == FRAME_QUEUE_LABEL:
            proc["vkQueueBeginDebugUtilsLabelEXT"](ctx.queue, queue_label)
        batches = [vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=2, pCommandBuffers=[p, q])]
        if frame == FRAME_TWICE:
            batches.append(vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                                           pCommandBuffers=[p]))
        vk.vkQueueSubmit(ctx.queue, len(batches), batches, fence)
        if frame == FRAME_QUEUE_LABEL:
            proc["vkQueueEndDebugUtilsLabelEXT"](ctx.queue)
        vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
        vk.vkResetFences(ctx.device, 1, [fence])
        if frame == FRAME_RESET:
            vk.vkResetCommandBuffer(p, 0)
        words, others = out.array(np.uint32), other.array(np.uint32)
        if not ((words == value).all() and (others == value ^ 0xFFFFFFFF).all()):
            raise SystemExit(f"frame {frame}: wrong bytes")
        if (extra.array(np.uint32) == SECONDARY_VALUE).all() != (frame == FRAME_SECONDARY):
            raise SystemExit(f"frame {frame}: the secondary's fill ran {'not ' if frame == FRAME_SECONDARY else ''}as recorded")
        if frame == FRAME_SUBMIT_AGAIN:
            out.mapped[0:SIZE] = bytes(SIZE)
            proc["vkQueueBeginDebugUtilsLabelEXT"](ctx.queue, queue_label)
            vk.vkQueueSubmit(ctx.queue, 1, [vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                                                            pCommandBuffers=[p])], fence)
            proc["vkQueueEndDebugUtilsLabelEXT"](ctx.queue)
            vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
            vk.vkResetFences(ctx.device, 1, [fence])
            if not (out.array(np.uint32) == value).all():
                raise SystemExit(f"frame {frame}: wrong bytes after submitting P again")
    vk.vkDestroyFence(ctx.device, fence, None)
    ctx.close()
    print(f"lifecycle_paths: OK {frames} frames")


if __name__ == "__main__":
    main()

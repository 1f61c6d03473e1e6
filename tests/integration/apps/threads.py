"""Four threads record command buffers at the same time (one command pool each).

Run: .venv/bin/python tests/integration/apps/threads.py
Each thread records ROUNDS command buffers, each with a vkCmdFillBuffer of its
own value and a vkCmdCopyBuffer into its own slice; the main thread submits
them all and checks every slice. Prints 'threads: OK <n> command buffers'.
"""
import sys
import threading
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402

THREADS, ROUNDS, SLICE = 4, 25, 256


def main() -> None:
    ctx = vkapp.Context(vkapp.Settings.from_env(), "threads")
    usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
    scratch = ctx.buffer(THREADS * ROUNDS * SLICE, usage)
    out = ctx.buffer(THREADS * ROUNDS * SLICE, usage)
    recorded: list[list] = [[] for _ in range(THREADS)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def record(t: int) -> None:
        try:
            info = vk.VkCommandPoolCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                              queueFamilyIndex=ctx.queue_family)
            pool = ctx.own(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(ctx.device, info, None))
            alloc = vk.VkCommandBufferAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                                   commandPool=pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                                   commandBufferCount=ROUNDS)
            cmds = vk.vkAllocateCommandBuffers(ctx.device, alloc)
            barrier.wait()   # all threads record at once
            for r, cmd in enumerate(cmds):
                offset = (t * ROUNDS + r) * SLICE
                begin = vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                                    flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
                vk.vkBeginCommandBuffer(cmd, begin)
                vk.vkCmdFillBuffer(cmd, scratch.handle, offset, SLICE, t * 1000 + r)
                vkapp.transfer_barrier(cmd)
                region = vk.VkBufferCopy(srcOffset=offset, dstOffset=offset, size=SLICE)
                vk.vkCmdCopyBuffer(cmd, scratch.handle, out.handle, 1, [region])
                vkapp.host_barrier(cmd)
                vk.vkEndCommandBuffer(cmd)
            recorded[t] = cmds
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=record, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    all_cmds = [c for cmds in recorded for c in cmds]
    fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
    submit = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=len(all_cmds),
                             pCommandBuffers=all_cmds)
    vk.vkQueueSubmit(ctx.queue, 1, [submit], fence)
    vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
    vk.vkDestroyFence(ctx.device, fence, None)
    got = out.array(np.uint32).reshape(THREADS * ROUNDS, SLICE // 4)
    want = np.array([[t * 1000 + r] * (SLICE // 4) for t in range(THREADS) for r in range(ROUNDS)], dtype=np.uint32)
    vkapp.check_equal("slices", got, want)
    ctx.close()
    print(f"threads: OK {len(all_cmds)} command buffers recorded by {THREADS} threads at once")


if __name__ == "__main__":
    main()

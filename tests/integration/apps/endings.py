"""GPU work followed by each way a Python program can end (tests/integration/test_endings.py).

Run: .venv/bin/python tests/integration/apps/endings.py ENDING SUBMITS plain|indirect

Makes SUBMITS submits of one command buffer each, without waiting in between: a labelled
vkCmdFillBuffer and, with `indirect`, a labelled vkCmdDispatchIndirect of examples/shaders/collatz.comp
(whose size the driver reads only after execution). Then:
  return        returns at once: nothing waited for, nothing destroyed
  raise         raises an uncaught exception at once (exit status 1)
  wait-return   vkQueueWaitIdle + vkDeviceWaitIdle, then returns without vkDestroyDevice
  fence-_exit   waits for the last submit's fence, then os._exit(0) (no atexit functions)
  wait-kill     vkQueueWaitIdle, then SIGKILL to itself
Prints 'endings: submitted N' before it ends.
"""
import os
import signal
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402


def main() -> None:
    ending, submits, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ctx = vkapp.Context(vkapp.Settings.from_env(), "endings")
    storage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
    data = ctx.buffer(4096, storage | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    args = ctx.buffer(16, vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT, np.array([2, 1, 1, 0], dtype=np.uint32))
    stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    pipeline = ctx.compute_pipeline("collatz.comp", layout, spec={0: 32})
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, data, 0, 2048), (1, data, 2048, 2048)])
    count = vk.ffi.new("uint32_t[1]", [64])

    begin_label = vk.vkGetInstanceProcAddr(ctx.instance, "vkCmdBeginDebugUtilsLabelEXT")
    end_label = vk.vkGetInstanceProcAddr(ctx.instance, "vkCmdEndDebugUtilsLabelEXT")
    fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
    cmds = []
    for i in range(submits):
        cmd = ctx.command_buffer()
        begin_label(cmd, vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT,
                                                 pLabelName=f"submit {i}"))
        vk.vkCmdFillBuffer(cmd, data.handle, 0, 2048, i)
        vkapp.memory_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                             vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_READ_BIT)
        if work == "indirect":
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
            vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
            vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, count)
            vk.vkCmdDispatchIndirect(cmd, args.handle, 0)
        end_label(cmd)
        vk.vkEndCommandBuffer(cmd)
        cmds.append(cmd)
        submit = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1, pCommandBuffers=[cmd])
        vk.vkQueueSubmit(ctx.queue, 1, [submit], fence if i == submits - 1 else None)
    print(f"endings: submitted {submits}", flush=True)

    if ending == "return":
        return
    if ending == "raise":
        raise RuntimeError("endings: an uncaught exception, on purpose")
    if ending == "fence-_exit":
        vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
        os._exit(0)
    vk.vkQueueWaitIdle(ctx.queue)
    if ending == "wait-return":
        vk.vkDeviceWaitIdle(ctx.device)
        return
    if ending == "wait-kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(f"endings: unknown ending {ending}")


if __name__ == "__main__":
    main()

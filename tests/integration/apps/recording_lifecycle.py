"""Command buffers through their whole life while the layer and driver record in C.

Run: .venv/bin/python tests/integration/apps/recording_lifecycle.py  (under `tessera run` or not)
One command buffer records FIRST dispatches (its arena grows far past its first 4 KiB) with a
fill every 100 dispatches, is submitted, its pool is reset and it is recorded again with
SECOND dispatches, submitted, then freed; a new command buffer (lavapipe may hand back the
same handle) records THIRD dispatches and is submitted. The last dispatch of each recording
computes Collatz step counts of 32 inputs, checked against a Python reference, so the work
really ran. Prints the counts it recorded and 'recording_lifecycle: OK'.
"""
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402
from compute_collatz import collatz_reference  # noqa: E402

FIRST, SECOND, THIRD = 3000, 700, 50
FILL_EVERY = 100
N = 32


def record(cmd, ctx, pipeline, layout, dset, scratch, dispatches: int) -> int:
    """Record `dispatches` dispatches (and fills); returns the number of fills."""
    stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    count = vk.ffi.new("uint32_t[1]", [N])
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, count)
    fills = 0
    for i in range(dispatches):
        if i and i % FILL_EVERY == 0:
            vk.vkCmdFillBuffer(cmd, scratch.handle, 0, 64, i)
            fills += 1
        vk.vkCmdDispatch(cmd, 1, 1, 1)
    return fills


def run(ctx, cmds) -> None:
    fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
    submit = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=len(cmds),
                             pCommandBuffers=list(cmds))
    vk.vkQueueSubmit(ctx.queue, 1, [submit], fence)
    vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 60 * 1000**3)
    vk.vkDestroyFence(ctx.device, fence, None)


def body(ctx: vkapp.Context) -> str:
    inputs = np.arange(1, N + 1, dtype=np.uint32) * 7
    expected = np.array([collatz_reference(int(v)) for v in inputs], dtype=np.uint32)
    storage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
    inbuf = ctx.buffer(N * 4, storage, inputs)
    outbuf = ctx.buffer(N * 4, storage, np.zeros(N, dtype=np.uint32))
    scratch = ctx.buffer(64, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    pipeline = ctx.compute_pipeline("collatz.comp", layout, spec={0: N})
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])

    def check(what: str) -> None:
        vkapp.check_equal(what, outbuf.array(np.uint32).copy(), expected)
        outbuf.array(np.uint32)[:] = 0

    counts = []
    cmd = ctx.command_buffer()                                   # recording
    fills = record(cmd, ctx, pipeline, layout, dset, scratch, FIRST)
    vk.vkEndCommandBuffer(cmd)
    run(ctx, [cmd])
    check("first recording")
    counts.append(FIRST + fills)

    vk.vkResetCommandPool(ctx.device, ctx.command_pool, 0)       # reset, recorded again
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
    fills = record(cmd, ctx, pipeline, layout, dset, scratch, SECOND)
    vk.vkEndCommandBuffer(cmd)
    run(ctx, [cmd])
    check("second recording")
    counts.append(SECOND + fills)

    vk.vkFreeCommandBuffers(ctx.device, ctx.command_pool, 1, [cmd])   # freed; a new one, maybe the same handle
    cmd = ctx.command_buffer()
    fills = record(cmd, ctx, pipeline, layout, dset, scratch, THIRD)
    vk.vkEndCommandBuffer(cmd)
    run(ctx, [cmd])
    check("third recording")
    counts.append(THIRD + fills)
    vk.vkFreeCommandBuffers(ctx.device, ctx.command_pool, 1, [cmd])
    return f"workloads per submit {counts}"


if __name__ == "__main__":
    vkapp.run_main("recording_lifecycle", body)

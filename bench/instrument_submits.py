"""What one submit of instrumented work costs: a Vulkan program for bench/bench_instrument.py.

Run: .venv/bin/python bench/instrument_submits.py SUBMITS DISPATCHES  (under `tessera run
[--instrument]`, or in a loader environment of bench/common.py)
Records one command buffer of DISPATCHES vkCmdDispatch of examples/shaders/collatz.comp (2 groups of
64 over 128 inputs, count 100: a data-dependent loop), then submits it SUBMITS times, each time
waiting for its fence, and times the submit + wait (CLOCK_MONOTONIC via perf_counter_ns). Under
`--instrument` the layer reads the values of every completed submit (vkGetShaderInstrumentationValuesARM,
clear, one INSTRUMENTATION message per tag) where it next polls: in the wait or the next submit, so
the readback falls inside the timed part. Prints one JSON line:
{"submits": S, "dispatches": D, "ns_per_submit": X, "record_ns_per_dispatch": R}.
"""
import json
import sys
import time
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import vkapp  # noqa: E402

INVOCATIONS, LOCAL, COUNT = 128, 64, 100


def body(ctx: vkapp.Context, submits: int, dispatches: int) -> dict:
    storage, stage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk.VK_SHADER_STAGE_COMPUTE_BIT
    inputs = np.array([(i * 7919 + 13) % 5000 for i in range(INVOCATIONS)], dtype=np.uint32)
    inbuf = ctx.buffer(INVOCATIONS * 4, storage, inputs)
    outbuf = ctx.buffer(INVOCATIONS * 4, storage, np.zeros(INVOCATIONS, dtype=np.uint32))
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    pipeline = ctx.compute_pipeline("collatz.comp", layout, spec={0: LOCAL})
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])
    cmd = vk.vkAllocateCommandBuffers(ctx.device, vk.VkCommandBufferAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=ctx.command_pool,
        level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
    t = time.perf_counter_ns()
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, vk.ffi.new("uint32_t[1]", [COUNT]))
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    for _ in range(dispatches):
        vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)
    vk.vkEndCommandBuffer(cmd)
    record = time.perf_counter_ns() - t
    fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
    submit = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1, pCommandBuffers=[cmd])
    elapsed = 0
    for _ in range(submits):
        t = time.perf_counter_ns()
        vk.vkQueueSubmit(ctx.queue, 1, [submit], fence)
        vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 60 * 1000**3)
        elapsed += time.perf_counter_ns() - t
        vk.vkResetFences(ctx.device, 1, [fence])
    vk.vkDestroyFence(ctx.device, fence, None)
    return {"submits": submits, "dispatches": dispatches, "ns_per_submit": elapsed / submits,
            "record_ns_per_dispatch": record / dispatches}


if __name__ == "__main__":
    n_submits, n_dispatches = int(sys.argv[1]), int(sys.argv[2])
    result: dict = {}

    def run(ctx: vkapp.Context) -> str:
        result.update(body(ctx, n_submits, n_dispatches))
        return f"{n_submits} submits of {n_dispatches} dispatches"
    try:
        vkapp.run_main("instrument_submits", run)
    finally:
        if result:
            print(json.dumps(result), flush=True)

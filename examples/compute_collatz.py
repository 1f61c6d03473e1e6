"""Compute sample: Collatz step counts with data-dependent loops and branches.

Run (plain lavapipe; add VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation to validate):
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python examples/compute_collatz.py

What it does: runs examples/shaders/collatz.comp over 1000 uint32 inputs
(fixed seed, plus hand-picked values 0, 1, 2, 27, 97, 871) with a work-group
size of 32 set through VkSpecializationInfo (constant id 0), so the last
work-group is partial (1000 = 31 * 32 + 8). The elements are covered by
three dispatches in one command buffer, recorded in this order:
  - vkCmdDispatch        groups [0, 10)   -> elements [0, 320)
  - vkCmdDispatchIndirect, group count (12) read from a buffer written by
    the host, on a second descriptor set whose bindings start at element
    640, with push constant count = 360 -> elements [640, 1000)
  - vkCmdDispatchBase    groups [10, 20)  -> elements [320, 640)
    (pipeline created with VK_PIPELINE_CREATE_DISPATCH_BASE_BIT)
What it checks: every output equals a Python reference of the shader
(uint32 arithmetic, at most 1000 steps, +1000 when steps > 20).
Exit 0 and one 'compute_collatz: OK ...' line on success.
"""

from __future__ import annotations

import numpy as np
import vulkan as vk

import vkapp

COUNT = 1000
LOCAL_SIZE = 32
SPLIT_BASE = 320  # first element of the vkCmdDispatchBase part
SPLIT_INDIRECT = 640  # first element of the vkCmdDispatchIndirect part
DISPATCH_BASE_BIT = 0x10  # VK_PIPELINE_CREATE_DISPATCH_BASE_BIT (the package only names the _KHR alias)


def collatz_reference(v: int) -> int:
    steps = 0
    while v > 1 and steps < 1000:
        v = v >> 1 if v % 2 == 0 else (3 * v + 1) & 0xFFFFFFFF
        steps += 1
    return steps + 1000 if steps > 20 else steps


def body(ctx: vkapp.Context) -> str:
    rng = np.random.default_rng(20240601)
    inputs = rng.integers(1, 100_000, size=COUNT, dtype=np.uint32)
    inputs[:6] = [0, 1, 2, 27, 97, 871]
    expected = np.array([collatz_reference(int(v)) for v in inputs], dtype=np.uint32)

    storage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
    inbuf = ctx.buffer(COUNT * 4, storage, inputs)
    outbuf = ctx.buffer(COUNT * 4, storage, np.full(COUNT, 0xFFFFFFFF, dtype=np.uint32))
    indirect_groups = (COUNT - SPLIT_INDIRECT + LOCAL_SIZE - 1) // LOCAL_SIZE
    indirect = ctx.buffer(16, vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT,
                          np.array([0xAAAA, indirect_groups, 1, 1], dtype=np.uint32))  # args at offset 4

    align = ctx.properties.limits.minStorageBufferOffsetAlignment
    if (SPLIT_INDIRECT * 4) % align:
        raise vkapp.CheckFailed(f"minStorageBufferOffsetAlignment {align} does not divide {SPLIT_INDIRECT * 4}")

    stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    pipeline = ctx.compute_pipeline("collatz.comp", layout, spec={0: LOCAL_SIZE},
                                    flags=DISPATCH_BASE_BIT)
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 4}, max_sets=2)
    whole_set = ctx.allocate_set(pool, set_layout)
    tail_set = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(whole_set, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])
    tail_bytes = (COUNT - SPLIT_INDIRECT) * 4
    ctx.write_storage_buffers(tail_set, [(0, inbuf, SPLIT_INDIRECT * 4, tail_bytes),
                                         (1, outbuf, SPLIT_INDIRECT * 4, tail_bytes)])

    count_all = vk.ffi.new("uint32_t[1]", [COUNT])
    count_tail = vk.ffi.new("uint32_t[1]", [COUNT - SPLIT_INDIRECT])
    cmd = ctx.command_buffer()
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [whole_set], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, count_all)
    vk.vkCmdDispatch(cmd, SPLIT_BASE // LOCAL_SIZE, 1, 1)
    # Indirect before base: lavapipe (Mesa 23) keeps the base group of a
    # preceding vkCmdDispatchBase for a following vkCmdDispatchIndirect.
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [tail_set], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, count_tail)
    vk.vkCmdDispatchIndirect(cmd, indirect.handle, 4)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [whole_set], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, count_all)
    vk.vkCmdDispatchBase(cmd, SPLIT_BASE // LOCAL_SIZE, 0, 0, (SPLIT_INDIRECT - SPLIT_BASE) // LOCAL_SIZE, 1, 1)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    ctx.submit([cmd])

    got = outbuf.array(np.uint32).copy()
    vkapp.check_equal("collatz steps", got, expected)
    return (f"{COUNT} elements checked, local_size_x={LOCAL_SIZE} (spec constant), dispatches: direct, indirect, "
            f"base; max steps {int(expected.max()) - 1000} on {ctx.device_name}")


if __name__ == "__main__":
    vkapp.run_main("compute_collatz", body)

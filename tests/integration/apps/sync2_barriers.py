"""Synchronization2 barriers between compute and transfer work, in shapes the driver's timeline
orders differently: the C path records them reduced (vkapi/recorder.py Recorded.dependencies).

Run: .venv/bin/python tests/integration/apps/sync2_barriers.py  (under `tessera run` or not)
Six command buffers, one submit each; each dispatches collatz.comp over 256 values, then has the
barriers below, then fills 4 KiB of another buffer:

 1  vkCmdPipelineBarrier2: a memory barrier COMPUTE -> TRANSFER              (the fill waits)
 2  a buffer barrier COMPUTE -> BOTTOM_OF_PIPE (orders nothing) and a memory barrier
    TRANSFER -> TRANSFER                                                      (the fill waits: src holds compute)
 3  a buffer barrier COMPUTE -> BOTTOM_OF_PIPE alone                         (the fill need not wait)
 4  an image barrier TOP_OF_PIPE -> TRANSFER (UNDEFINED -> GENERAL), no barrier from compute
 5  vkCmdSetEvent2 twice, then vkCmdWaitEvents2 on both: one dependency COMPUTE -> BOTTOM_OF_PIPE,
    the other COMPUTE -> TRANSFER, and a vkCmdPipelineBarrier2 with no barriers at all
 6  vkCmdSetEvent, then vkCmdWaitEvents (the original commands) COMPUTE -> TRANSFER   (the fill waits)

Results are checked (collatz steps against a CPU reference, the fills); prints 'sync2_barriers: OK'.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402
from compute_collatz import LOCAL_SIZE, collatz_reference  # noqa: E402

COUNT = 256
FILL = 4096
S2 = {"compute": vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT, "transfer": vk.VK_PIPELINE_STAGE_2_TRANSFER_BIT,
      "bottom": vk.VK_PIPELINE_STAGE_2_BOTTOM_OF_PIPE_BIT, "top": vk.VK_PIPELINE_STAGE_2_TOP_OF_PIPE_BIT}


def memory(src: str, dst: str):
    return vk.VkMemoryBarrier2(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER_2, srcStageMask=S2[src],
                               srcAccessMask=vk.VK_ACCESS_2_MEMORY_WRITE_BIT, dstStageMask=S2[dst],
                               dstAccessMask=vk.VK_ACCESS_2_MEMORY_READ_BIT | vk.VK_ACCESS_2_MEMORY_WRITE_BIT)


def buffer_barrier(buf, src: str, dst: str):
    return vk.VkBufferMemoryBarrier2(sType=vk.VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER_2, srcStageMask=S2[src],
                                     srcAccessMask=vk.VK_ACCESS_2_SHADER_WRITE_BIT, dstStageMask=S2[dst],
                                     dstAccessMask=0, srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                                     dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, buffer=buf.handle,
                                     offset=0, size=vkapp.WHOLE_SIZE)


def dependency(memories=(), buffers=(), images=()):
    return vk.VkDependencyInfo(sType=vk.VK_STRUCTURE_TYPE_DEPENDENCY_INFO,
                               memoryBarrierCount=len(memories), pMemoryBarriers=list(memories) or None,
                               bufferMemoryBarrierCount=len(buffers), pBufferMemoryBarriers=list(buffers) or None,
                               imageMemoryBarrierCount=len(images), pImageMemoryBarriers=list(images) or None)


def body(ctx: vkapp.Context) -> str:
    inputs = np.arange(1, COUNT + 1, dtype=np.uint32)
    expected = np.array([collatz_reference(int(v)) for v in inputs], dtype=np.uint32)
    storage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
    inbuf = ctx.buffer(COUNT * 4, storage, inputs)
    outbufs = [ctx.buffer(COUNT * 4, storage) for _ in range(6)]
    fills = [ctx.buffer(FILL, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT) for _ in range(6)]
    image = ctx.image(8, 8, vk.VK_FORMAT_R8G8B8A8_UNORM, vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)

    stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    pipeline = ctx.compute_pipeline("collatz.comp", layout, spec={0: LOCAL_SIZE})
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 12}, max_sets=6)
    count = vk.ffi.new("uint32_t[1]", [COUNT])
    events = [ctx.own(vk.vkDestroyEvent, vk.vkCreateEvent(
        ctx.device, vk.VkEventCreateInfo(sType=vk.VK_STRUCTURE_TYPE_EVENT_CREATE_INFO), None)) for _ in range(2)]
    image_barrier = vk.VkImageMemoryBarrier2(
        sType=vk.VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER_2, srcStageMask=S2["top"], srcAccessMask=0,
        dstStageMask=S2["transfer"], dstAccessMask=vk.VK_ACCESS_2_TRANSFER_WRITE_BIT,
        oldLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED, newLayout=vk.VK_IMAGE_LAYOUT_GENERAL,
        srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        image=image.handle, subresourceRange=vkapp.color_range())

    def barriers(cmd, variant: int, out) -> None:
        if variant == 1:
            vk.vkCmdPipelineBarrier2(cmd, dependency(memories=[memory("compute", "transfer")]))
        elif variant == 2:
            vk.vkCmdPipelineBarrier2(cmd, dependency(memories=[memory("transfer", "transfer")],
                                                     buffers=[buffer_barrier(out, "compute", "bottom")]))
        elif variant == 3:
            vk.vkCmdPipelineBarrier2(cmd, dependency(buffers=[buffer_barrier(out, "compute", "bottom")]))
        elif variant == 4:
            vk.vkCmdPipelineBarrier2(cmd, dependency(images=[image_barrier]))
        elif variant == 6:
            vk.vkCmdSetEvent(cmd, events[0], vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT)
            vk.vkCmdWaitEvents(cmd, 1, [events[0]], vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                               vk.VK_PIPELINE_STAGE_TRANSFER_BIT, 0, None, 0, None, 0, None)
        else:
            infos = [dependency(memories=[memory("compute", "bottom")]),
                     dependency(memories=[memory("compute", "transfer")])]
            for event, info in zip(events, infos):
                vk.vkCmdSetEvent2(cmd, event, info)
            vk.vkCmdWaitEvents2(cmd, 2, events, infos)
            vk.vkCmdPipelineBarrier2(cmd, dependency())

    for variant in range(1, 7):
        dset = ctx.allocate_set(pool, set_layout)
        out = outbufs[variant - 1]
        ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, out, 0, vkapp.WHOLE_SIZE)])
        cmd = ctx.command_buffer()
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
        vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, count)
        vk.vkCmdDispatch(cmd, COUNT // LOCAL_SIZE, 1, 1)
        barriers(cmd, variant, out)
        vk.vkCmdFillBuffer(cmd, fills[variant - 1].handle, 0, FILL, 0x5A5A0000 + variant)
        vkapp.host_barrier(cmd)
        vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
        ctx.submit([cmd])
        vkapp.check_equal(f"collatz steps, submit {variant}", out.array(np.uint32).copy(), expected)
        vkapp.check_equal(f"fill, submit {variant}", fills[variant - 1].array(np.uint32).copy(),
                          np.full(FILL // 4, 0x5A5A0000 + variant, np.uint32))
    return f"6 submits checked on {ctx.device_name}"


if __name__ == "__main__":
    features = vk.VkPhysicalDeviceVulkan13Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                                   synchronization2=vk.VK_TRUE)
    vkapp.run_main("sync2_barriers", body, device_features=features)

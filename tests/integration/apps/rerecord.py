"""Re-records one command buffer every frame, as engines do; halfway, the buffer it fills is replaced.

Run: .venv/bin/python tests/integration/apps/rerecord.py [FRAMES]
Each frame: vkBeginCommandBuffer on the same buffer (begin resets it), a debug label around a
vkCmdFillBuffer of the whole source buffer (VK_WHOLE_SIZE) and a copy of its first 256 bytes; submit
and wait.
After FRAMES // 2 frames the source is destroyed and a bigger one made with the same handle (buffers
are created until lavapipe hands the freed handle out again), so the same command stream names a
buffer of another size (only the fill's size differs): a re-recording must not reuse what the old one's recording made
(vkapi/replay.py). Checks the copied bytes every frame; prints whether the handle came back and
'rerecord: OK <frames> frames'.
"""
import sys
from pathlib import Path

import numpy as np
import vulkan as vk
from vulkan import ffi

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402

SIZES = (256, 1024)
VALUE = 0x5A5A5A5A
WHOLE_SIZE = (1 << 64) - 1   # VK_WHOLE_SIZE (the binding has it as -1)


def address(handle) -> int:
    return int(ffi.cast("uintptr_t", handle))


def target(ctx, size: int, wanted: int | None = None):
    """A buffer of `size` bytes, bound to memory; with `wanted`, the handle `wanted` if one of up to
    1024 creations gets it (the others are destroyed)."""
    info = vk.VkBufferCreateInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size,
                                 usage=vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                 sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
    handle, spare = vk.vkCreateBuffer(ctx.device, info, None), []
    while wanted is not None and address(handle) != wanted and len(spare) < 1024:
        spare.append(handle)
        handle = vk.vkCreateBuffer(ctx.device, info, None)
    for other in spare:
        vk.vkDestroyBuffer(ctx.device, other, None)
    reqs = vk.vkGetBufferMemoryRequirements(ctx.device, handle)
    memory = vk.vkAllocateMemory(ctx.device, vk.VkMemoryAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=reqs.size,
        memoryTypeIndex=ctx.memory_type(reqs.memoryTypeBits, vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)), None)
    vk.vkBindBufferMemory(ctx.device, handle, memory, 0)
    return handle, memory


def main() -> None:
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    ctx = vkapp.Context(vkapp.Settings.from_env(), "rerecord")
    out = ctx.buffer(max(SIZES), vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    cmd, fence = ctx.primary(), ctx.fence()
    label = vk.VkDebugUtilsLabelEXT(sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, pLabelName="frame work")
    begin_label, end_label = ctx.cmd_labels()
    src, memory = target(ctx, SIZES[0])
    for frame in range(frames):
        size = SIZES[0] if frame < frames // 2 else SIZES[1]
        if frame == frames // 2:
            old = address(src)
            vk.vkDestroyBuffer(ctx.device, src, None)
            vk.vkFreeMemory(ctx.device, memory, None)
            src, memory = target(ctx, size, old)
            print("rerecord: the new buffer has the old one's handle" if address(src) == old
                  else "rerecord: the new buffer has a new handle", flush=True)
        out.mapped[0:len(out.mapped)] = bytes(len(out.mapped))
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
        begin_label(cmd, label)
        vk.vkCmdFillBuffer(cmd, src, 0, WHOLE_SIZE, VALUE)
        vkapp.transfer_barrier(cmd)
        vk.vkCmdCopyBuffer(cmd, src, out.handle, 1, [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=SIZES[0])])
        vkapp.host_barrier(cmd)
        end_label(cmd)
        vk.vkEndCommandBuffer(cmd)
        vk.vkQueueSubmit(ctx.queue, 1, [vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                                                        pCommandBuffers=[cmd])], fence)
        vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
        vk.vkResetFences(ctx.device, 1, [fence])
        words = out.array(np.uint32)
        if not ((words[:SIZES[0] // 4] == VALUE).all() and (words[SIZES[0] // 4:] == 0).all()):
            raise SystemExit(f"frame {frame}: wrong bytes copied")
    vk.vkDestroyFence(ctx.device, fence, None)
    vk.vkDestroyBuffer(ctx.device, src, None)
    vk.vkFreeMemory(ctx.device, memory, None)
    ctx.close()
    print(f"rerecord: OK {frames} frames")


if __name__ == "__main__":
    main()

"""The three pNext chains public test programs broke the shims with (issue #23, deliverable 2):
`ffi.error: undefined type name` in the hooks' walkers, which never declared these structs.

Run: .venv/bin/python tests/integration/apps/pnext_chains.py  (under `tessera run`, with or
without --regions, or with the tessera_env of the tests). Enables VK_KHR_maintenance5,
VK_EXT_frame_boundary (the layer provides it) and VK_ARM_tensors (the driver does), then:
- vkCreateBuffer with VkBufferUsageFlags2CreateInfo (maintenance5's usage, read by the driver's
  indirect-size hooks);
- vkCreateRenderPass with VkRenderPassMultiviewCreateInfo (read by the per-region counters);
- vkQueueSubmit with VkFrameBoundaryEXT -> VkFrameBoundaryTensorsARM (the layer rebuilds the chain
  without the frame boundary it emulates, copying the tensor struct).
Prints "pnext chains: ok" when every call succeeded; the test also reads stderr for hook errors.
Structs the `vulkan` package lacks are ctypes (vk.xml 1.4.366).
"""
from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import vulkan as vk

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2] / "examples")]
import vkapp  # noqa: E402
import vktensors as vt  # noqa: E402

c_ptr, u32, u64, size_t = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t


class FrameBoundaryFeatures(vt.Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("frameBoundary", u32)]


class FrameBoundary(vt.Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u32), ("frameID", u64), ("imageCount", u32),
                ("pImages", c_ptr), ("bufferCount", u32), ("pBuffers", c_ptr), ("tagName", u64), ("tagSize", size_t),
                ("pTag", c_ptr)]


class FrameBoundaryTensors(vt.Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("tensorCount", u32), ("pTensors", c_ptr)]


class BufferUsageFlags2(vt.Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("usage", u64)]


def address(cdata) -> int:
    return int(vk.ffi.cast("uintptr_t", vk.ffi.addressof(cdata)))


def main() -> None:
    tensor_features, keep = vt.device_features(shader=False)
    frame_features = FrameBoundaryFeatures(sType=1000375000, frameBoundary=1)
    multiview = vk.VkPhysicalDeviceMultiviewFeatures(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MULTIVIEW_FEATURES,
                                                     multiview=vk.VK_TRUE)
    maintenance5 = vk.VkPhysicalDeviceMaintenance5FeaturesKHR(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR, maintenance5=vk.VK_TRUE,
        pNext=multiview)
    keep[0].pNext = frame_features.ptr()               # tensors -> frame boundary -> maintenance5 -> multiview
    frame_features.pNext = address(maintenance5)
    ctx = vkapp.Context(vkapp.Settings.from_env(), "pnext_chains",
                        optional_device_extensions=["VK_KHR_maintenance5", "VK_EXT_frame_boundary", vt.EXTENSION],
                        device_features=tensor_features)
    try:
        missing = {"VK_KHR_maintenance5", "VK_EXT_frame_boundary", vt.EXTENSION} - set(ctx.device_extensions)
        if missing:
            raise SystemExit(f"extensions not offered: {sorted(missing)}")
        usage2 = BufferUsageFlags2(sType=1000470006, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)
        info = vk.VkBufferCreateInfo(pNext=vk.ffi.cast("void *", usage2.ptr()), size=256, usage=0,
                                     sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        buffer = vk.vkCreateBuffer(ctx.device, info, None)

        attachment = vk.VkAttachmentDescription(
            format=vk.VK_FORMAT_R8G8B8A8_UNORM, samples=vk.VK_SAMPLE_COUNT_1_BIT, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
            storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE, stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
            stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
            finalLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
        color = vk.VkAttachmentReference(0, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
        subpass = vk.VkSubpassDescription(pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS,
                                          pColorAttachments=[color])
        views = vk.VkRenderPassMultiviewCreateInfo(pViewMasks=[0b11], pCorrelationMasks=[0b11])
        render_pass = vk.vkCreateRenderPass(ctx.device, vk.VkRenderPassCreateInfo(
            pNext=views, pAttachments=[attachment], pSubpasses=[subpass]), None)

        tensors = vt.Tensors(ctx)
        tensor = tensors.tensor(vk.VK_FORMAT_R32_SFLOAT, (4,))
        handles = (u64 * 1)(tensor.handle)
        frame_tensors = FrameBoundaryTensors(sType=1000460023, tensorCount=1, pTensors=ctypes.addressof(handles))
        boundary = FrameBoundary(sType=1000375001, pNext=frame_tensors.ptr(), flags=1, frameID=1)
        cmd = ctx.command_buffer()   # recording
        vk.vkEndCommandBuffer(cmd)
        submit = vk.VkSubmitInfo(pNext=vk.ffi.cast("void *", boundary.ptr()), pCommandBuffers=[cmd])
        vk.vkQueueSubmit(ctx.queue, 1, [submit], None)
        vk.vkQueueWaitIdle(ctx.queue)
        vk.vkDestroyRenderPass(ctx.device, render_pass, None)
        vk.vkDestroyBuffer(ctx.device, buffer, None)
        print("pnext chains: ok")
    finally:
        ctx.close()
    del keep


if __name__ == "__main__":
    main()

"""VK_ARM_performance_counters_by_region used directly by an application, as the registry describes it.

Run: .venv/bin/python tests/integration/apps/regions_api.py  (on the emulated Mali: under
`tessera run`, or with the tessera_env of the tests)
The `vulkan` package predates the Arm extension, so its structs are written by hand here
(layouts from vk.xml 1.4.366) and the enumeration is called through ctypes.

Scenarios (each reads back the raw bytes of the counter buffers, which were filled with 0xAB first,
so padding and bytes past the arrays show whether the driver wrote them):
- "area": dynamic rendering, render area 100x70 at (8, 4) of a 128x96 image (not a multiple of
  the region size), all counters: a full quad (solid.frag), the same exact-region square drawn twice
  more (overdraw), and a branchy.frag rectangle (discards where (x+y) % 3 == 0);
- "subpasses": a VkRenderPass with two subpasses, one counter (so each region has padding), a
  different rectangle per subpass;
- "views": multiview (viewMask 0b11): view 1 draws the quad squeezed into its left half;
- "layers": layerCount 2, nothing writes Layer: everything counts in layer 0, layer 1 is zeros;
- misuse: too few addresses, an unknown counter ID, too many counters, an address too close to its
  buffer's end, and capture disabled: what is not to be written stays 0xAB.
Prints one JSON line for tests/integration/test_regions.py.
"""
import ctypes
import json
import struct
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402

HERE = Path(__file__).resolve().parent
# vk.xml 1.4.366 (VK_ARM_performance_counters_by_region, extension 606)
FEATURES_STYPE = 1000605000
PROPERTIES_STYPE = 1000605001
COUNTER_STYPE = 1000605002
DESCRIPTION_STYPE = 1000605003
BEGIN_INFO_STYPE = 1000605004
SENTINEL = 0xAB
SHADER_DEVICE_ADDRESS_BIT = 0x20000          # VkBufferUsageFlagBits (Vulkan 1.2)
MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT = 0x2     # VkMemoryAllocateFlagBits (Vulkan 1.2)
FMT = vk.VK_FORMAT_R8G8B8A8_UNORM
AREA_IMAGE = (128, 96)
AREA = (8, 4, 100, 70)                      # x, y, width, height
SQUARE = (40, 36, 72, 68)                   # exactly the region (1, 1) of AREA (x0, y0, x1, y1)
BRANCHY = (20, 10, 90, 50)
SMALL = (64, 64)
SUB_RECTS = [(0, 0, 40, 24), (16, 8, 64, 64)]
VIEW_RECT = (8, 8, 56, 40)


def handle(cdata) -> int:
    return int(vk.ffi.cast("uintptr_t", cdata))


class Extension:
    def __init__(self, ctx) -> None:
        loader = ctypes.CDLL("libvulkan.so.1")
        gipa = loader.vkGetInstanceProcAddr
        gipa.restype = ctypes.c_void_p
        gipa.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        address = gipa(handle(ctx.instance), b"vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM")
        if not address:
            raise SystemExit("vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM: not exposed")
        u32p, vp = ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p
        self.enumerate = ctypes.CFUNCTYPE(ctypes.c_int32, vp, ctypes.c_uint32, u32p, vp, vp)(address)
        self.physical = handle(ctx.physical_device)
        self.family = ctx.queue_family

    def counters(self, room: int | None = None) -> dict:
        count = ctypes.c_uint32(0)
        assert self.enumerate(self.physical, self.family, ctypes.byref(count), None, None) == 0
        total = count.value
        room = total if room is None else room
        ids = ctypes.create_string_buffer(b"\xAB" * (24 * room + 24))
        descs = ctypes.create_string_buffer(b"\xAB" * ((16 + 4 + 256 + 4) * room + 24))
        dsize = 16 + 4 + 256 + 4   # sType, pNext, flags, name[256], padding to 8
        for i in range(room):
            struct.pack_into("<IxxxxQ", ids, i * 24, COUNTER_STYPE, 0)
            struct.pack_into("<IxxxxQ", descs, i * dsize, DESCRIPTION_STYPE, 0)
        count = ctypes.c_uint32(room)
        result = self.enumerate(self.physical, self.family, ctypes.byref(count), ids, descs)
        raw_ids, raw_descs = ids.raw, descs.raw
        return {"total": total, "result": result, "written": count.value,
                "ids": [struct.unpack_from("<I", raw_ids, i * 24 + 16)[0] for i in range(count.value)],
                "names": [raw_descs[i * dsize + 20:i * dsize + 276].split(b"\0")[0].decode()
                          for i in range(count.value)],
                "sentinel_intact": raw_ids[24 * room:24 * room + 24] == b"\xAB" * 24}


def properties(ctx) -> dict:
    raw = vk.ffi.new("char[40]")
    struct.pack_into("<IxxxxQ", vk.ffi.buffer(raw), 0, PROPERTIES_STYPE, 0)
    props2 = vk.VkPhysicalDeviceProperties2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=raw)
    vk.vkGetPhysicalDeviceProperties2(ctx.physical_device, props2)
    m, rw, rh, row, region, identity = struct.unpack_from("<IIIIII", vk.ffi.buffer(raw), 16)
    return {"max": m, "region": [rw, rh], "row_alignment": row, "region_alignment": region, "identity": identity}


class Counters:
    """Buffers with device addresses, filled with the sentinel byte."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.buffers = []
        gdpa = ctypes.CDLL("libvulkan.so.1").vkGetDeviceProcAddr
        gdpa.restype, gdpa.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
        self.get_address = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p)(
            gdpa(handle(ctx.device), b"vkGetBufferDeviceAddress"))

    def buffer(self, size: int):
        ctx = self.ctx
        info = vk.VkBufferCreateInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size,
                                     usage=SHADER_DEVICE_ADDRESS_BIT
                                     | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                     sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        buf = vk.vkCreateBuffer(ctx.device, info, None)
        reqs = vk.vkGetBufferMemoryRequirements(ctx.device, buf)
        flags = vk.VkMemoryAllocateFlagsInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                             flags=MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT)
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        mem = ctx.own(vk.vkFreeMemory, vk.vkAllocateMemory(ctx.device, vk.VkMemoryAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, pNext=flags, allocationSize=reqs.size,
            memoryTypeIndex=ctx.memory_type(reqs.memoryTypeBits, want)), None))
        ctx.own(vk.vkDestroyBuffer, buf)
        vk.vkBindBufferMemory(ctx.device, buf, mem, 0)
        mapped = vk.vkMapMemory(ctx.device, mem, 0, size, 0)
        mapped[0:size] = bytes([SENTINEL]) * size
        info = vk.VkBufferDeviceAddressInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, buffer=buf)
        address = self.get_address(handle(ctx.device), handle(vk.ffi.addressof(info)))
        self.buffers.append(mapped)
        return address, mapped


def begin_info(addresses: list[int], ids: list[int], keep: list):
    addr = vk.ffi.new("uint64_t[]", addresses or [0])
    idx = vk.ffi.new("uint32_t[]", ids or [0])
    raw = vk.ffi.new("char[48]")
    struct.pack_into("<IxxxxQIxxxxQIIQ", vk.ffi.buffer(raw), 0, BEGIN_INFO_STYPE, 0, len(addresses),
                     handle(addr), 1, len(ids), handle(idx))
    keep += [addr, idx, raw]
    return raw


def quads(rects: list[tuple[int, int, int, int]], width: int, height: int) -> np.ndarray:
    """Two triangles per pixel rectangle (x0, y0, x1, y1), in NDC of a width x height viewport."""
    out = []
    for x0, y0, x1, y1 in rects:
        a, b = 2 * x0 / width - 1, 2 * x1 / width - 1
        c, d = 2 * y0 / height - 1, 2 * y1 / height - 1
        out += [(a, c), (b, c), (a, d), (a, d), (b, c), (b, d)]
    return np.array(out, dtype=np.float32)


def image_2d(ctx, width: int, height: int, layers: int):
    info = vk.VkImageCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, imageType=vk.VK_IMAGE_TYPE_2D, format=FMT,
        extent=vk.VkExtent3D(width=width, height=height, depth=1), mipLevels=1, arrayLayers=layers,
        samples=vk.VK_SAMPLE_COUNT_1_BIT, tiling=vk.VK_IMAGE_TILING_OPTIMAL,
        usage=vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
        initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED)
    image = vk.vkCreateImage(ctx.device, info, None)
    mem = ctx.own(vk.vkFreeMemory, vk.vkAllocateMemory(ctx.device, vk.VkMemoryAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        allocationSize=vk.vkGetImageMemoryRequirements(ctx.device, image).size,
        memoryTypeIndex=ctx.memory_type(vk.vkGetImageMemoryRequirements(ctx.device, image).memoryTypeBits,
                                        vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)), None))
    ctx.own(vk.vkDestroyImage, image)
    vk.vkBindImageMemory(ctx.device, image, mem, 0)
    rng = vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0, levelCount=1,
                                     baseArrayLayer=0, layerCount=layers)
    view = ctx.own(vk.vkDestroyImageView, vk.vkCreateImageView(ctx.device, vk.VkImageViewCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO, image=image,
        viewType=vk.VK_IMAGE_VIEW_TYPE_2D_ARRAY if layers > 1 else vk.VK_IMAGE_VIEW_TYPE_2D, format=FMT,
        subresourceRange=rng), None))
    return image, view, rng


def to_attachment(cmd, image, rng) -> None:
    barrier = vk.VkImageMemoryBarrier(
        sType=vk.VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER, srcAccessMask=0,
        dstAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, oldLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
        newLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=image, subresourceRange=rng)
    vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                            vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, 0, 0, None, 0, None, 1, [barrier])


def rendering(view, area, layers: int = 1, view_mask: int = 0, pnext=None):
    attachment = vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=view,
        imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
        clearValue=vk.VkClearValue(color=vk.VkClearColorValue(float32=[0, 0, 0, 1])))
    x, y, w, h = area
    return vk.VkRenderingInfo(sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO, pNext=pnext,
                              renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x, y), extent=vk.VkExtent2D(w, h)),
                              layerCount=layers, viewMask=view_mask, colorAttachmentCount=1,
                              pColorAttachments=[attachment])


def viewport_scissor(cmd, width: int, height: int, area) -> None:
    x, y, w, h = area
    vk.vkCmdSetViewport(cmd, 0, 1, [vk.VkViewport(x=0.0, y=0.0, width=float(width), height=float(height),
                                                  minDepth=0.0, maxDepth=1.0)])
    vk.vkCmdSetScissor(cmd, 0, 1, [vk.VkRect2D(offset=vk.VkOffset2D(x, y), extent=vk.VkExtent2D(w, h))])


def array_bytes(w: int, h: int, c: int, props: dict) -> int:
    rw, rh = props["region"]
    region = -(-c * 4 // props["region_alignment"]) * props["region_alignment"]
    row = -(-(-(-w // rw) * region) // props["row_alignment"]) * props["row_alignment"]
    return row * -(-h // rh)


def body(ctx: vkapp.Context) -> str:
    ext = Extension(ctx)
    out = {"counters": ext.counters(), "short": ext.counters(room=3), "properties": properties(ctx)}
    props = out["properties"]
    ids = out["counters"]["ids"]
    counters = Counters(ctx)
    keep: list = []
    push = vk.VK_SHADER_STAGE_FRAGMENT_BIT
    layout = ctx.pipeline_layout([], push_size=16, push_stages=push)
    color = vk.ffi.new("float[4]", [0.2, 0.4, 0.6, 1.0])
    solid = ctx.graphics_pipeline("quad.vert", "solid.frag", layout, color_formats=[FMT])
    branchy = ctx.graphics_pipeline("quad.vert", "branchy.frag", layout, color_formats=[FMT])
    views = ctx.graphics_pipeline(str(HERE / "shaders" / "views.vert"), "solid.frag", layout, color_formats=[FMT],
                                  view_mask=0b11)

    def vertex_buffer(rects, w, h):
        data = quads(rects, w, h)
        return ctx.buffer(data.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, data)

    results: dict = {}
    cmd = ctx.command_buffer()

    # ---- "area" + "disabled" + misuse in one command buffer, one image ----
    iw, ih = AREA_IMAGE
    image, view, rng = image_2d(ctx, iw, ih, 1)
    to_attachment(cmd, image, rng)
    full = (AREA[0], AREA[1], AREA[0] + AREA[2], AREA[1] + AREA[3])
    vb = vertex_buffer([full, SQUARE, BRANCHY], iw, ih)
    size = array_bytes(AREA[2], AREA[3], len(ids), props)
    area_address, area_mapped = counters.buffer(size + 64)

    def area_pass(pnext, draws=True):
        vk.vkCmdBeginRendering(cmd, rendering(view, AREA, pnext=pnext))
        viewport_scissor(cmd, iw, ih, AREA)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [vb.handle], [0])
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, solid)
        vk.vkCmdPushConstants(cmd, layout, push, 0, 16, color)
        if draws:
            vk.vkCmdDraw(cmd, 6, 1, 0, 0)        # the whole render area
            vk.vkCmdDraw(cmd, 6, 2, 6, 0)        # the square, twice (instances)
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, branchy)
            vk.vkCmdDraw(cmd, 6, 1, 12, 0)
        vk.vkCmdEndRendering(cmd)

    area_pass(begin_info([area_address], ids, keep))
    results["area"] = {"size": size, "mapped": area_mapped}
    disabled_address, disabled_mapped = counters.buffer(size)
    area_pass(None)                                   # capture disabled: nothing may be written
    results["disabled"] = {"mapped": disabled_mapped}
    unknown_address, unknown_mapped = counters.buffer(size)
    area_pass(begin_info([unknown_address], [ids[0], 0xDEAD], keep))
    results["unknown"] = {"mapped": unknown_mapped}
    many_address, many_mapped = counters.buffer(size + 4096)
    area_pass(begin_info([many_address], ids + [ids[0]], keep))
    results["too_many"] = {"mapped": many_mapped}
    small_size = array_bytes(AREA[2], AREA[3], 1, props)
    tight_address, tight_mapped = counters.buffer(small_size)
    area_pass(begin_info([tight_address + 16], ids[:1], keep))   # the array would end 16 bytes past the buffer
    results["tight"] = {"mapped": tight_mapped}

    # ---- "subpasses": VkRenderPass with two subpasses, one counter ----
    sw, sh = SMALL
    simage, sview, srng = image_2d(ctx, sw, sh, 1)
    att = vk.VkAttachmentDescription(format=FMT, samples=vk.VK_SAMPLE_COUNT_1_BIT,
                                     loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR, storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
                                     stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
                                     stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE,
                                     initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
                                     finalLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    ref = vk.VkAttachmentReference(attachment=0, layout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    sub = [vk.VkSubpassDescription(pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS, colorAttachmentCount=1,
                                   pColorAttachments=[ref]) for _ in range(2)]
    dep = vk.VkSubpassDependency(srcSubpass=0, dstSubpass=1,
                                 srcStageMask=vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                                 dstStageMask=vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                                 srcAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                                 dstAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
    render_pass = ctx.own(vk.vkDestroyRenderPass, vk.vkCreateRenderPass(ctx.device, vk.VkRenderPassCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO, attachmentCount=1, pAttachments=[att], subpassCount=2,
        pSubpasses=sub, dependencyCount=1, pDependencies=[dep]), None))
    framebuffer = ctx.own(vk.vkDestroyFramebuffer, vk.vkCreateFramebuffer(ctx.device, vk.VkFramebufferCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO, renderPass=render_pass, attachmentCount=1,
        pAttachments=[sview], width=sw, height=sh, layers=1), None))
    sub_pipes = [ctx.graphics_pipeline("quad.vert", "solid.frag", layout, render_pass=render_pass, subpass=s)
                 for s in range(2)]
    svb = vertex_buffer(SUB_RECTS, sw, sh)
    ssize = array_bytes(sw, sh, 1, props)
    sub_buffers = [counters.buffer(ssize + 64) for _ in range(2)]
    few_buffers = [counters.buffer(ssize) for _ in range(2)]

    def subpass_pass(addresses):
        begin = vk.VkRenderPassBeginInfo(
            sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO, pNext=begin_info(addresses, ids[:1], keep),
            renderPass=render_pass, framebuffer=framebuffer,
            renderArea=vk.VkRect2D(offset=vk.VkOffset2D(0, 0), extent=vk.VkExtent2D(sw, sh)), clearValueCount=1,
            pClearValues=[vk.VkClearValue(color=vk.VkClearColorValue(float32=[0, 0, 0, 1]))])
        vk.vkCmdBeginRenderPass(cmd, begin, vk.VK_SUBPASS_CONTENTS_INLINE)
        vkapp.set_viewport_scissor(cmd, sw, sh)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [svb.handle], [0])
        for s in range(2):
            if s:
                vk.vkCmdNextSubpass(cmd, vk.VK_SUBPASS_CONTENTS_INLINE)
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, sub_pipes[s])
            vk.vkCmdPushConstants(cmd, layout, push, 0, 16, color)
            vk.vkCmdDraw(cmd, 6, 1, 6 * s, 0)
        vk.vkCmdEndRenderPass(cmd)

    subpass_pass([a for a, _ in sub_buffers])
    subpass_pass([few_buffers[0][0]])                 # one address for two subpasses: the second is not written
    results["subpasses"] = {"size": ssize, "mapped": [m for _, m in sub_buffers]}
    results["few"] = {"mapped": [m for _, m in few_buffers]}

    # ---- "views" (multiview) and "layers" (layerCount 2) ----
    limage, lview, lrng = image_2d(ctx, sw, sh, 2)
    to_attachment(cmd, limage, lrng)
    lvb = vertex_buffer([VIEW_RECT], sw, sh)
    view_buffers = [counters.buffer(ssize) for _ in range(2)]
    layer_buffers = [counters.buffer(ssize) for _ in range(2)]
    for pipeline, buffers, mask in ((views, view_buffers, 0b11), (solid, layer_buffers, 0)):
        info = rendering(lview, (0, 0, sw, sh), layers=1 if mask else 2, view_mask=mask,
                         pnext=begin_info([a for a, _ in buffers], ids[:1], keep))
        vk.vkCmdBeginRendering(cmd, info)
        vkapp.set_viewport_scissor(cmd, sw, sh)
        vk.vkCmdBindVertexBuffers(cmd, 0, 1, [lvb.handle], [0])
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
        vk.vkCmdPushConstants(cmd, layout, push, 0, 16, color)
        vk.vkCmdDraw(cmd, 6, 1, 0, 0)
        vk.vkCmdEndRendering(cmd)
    results["views"] = {"mapped": [m for _, m in view_buffers]}
    results["layers"] = {"mapped": [m for _, m in layer_buffers]}

    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_MEMORY_WRITE_BIT)
    ctx.submit([cmd])

    def raw(m) -> str:
        return bytes(m).hex()
    for key, value in results.items():
        m = value["mapped"]
        value["bytes"] = [raw(x) for x in m] if isinstance(m, list) else raw(m)
        del value["mapped"]
    out.update(results)
    print(json.dumps(out), flush=True)
    return f"{len(ids)} counters"


def features():
    """Feature chain: the extension's feature -> Vulkan 1.1 (multiview) -> 1.2 (bufferDeviceAddress) -> 1.3."""
    f13 = vk.VkPhysicalDeviceVulkan13Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                              dynamicRendering=vk.VK_TRUE)
    f12 = vk.VkPhysicalDeviceVulkan12Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                              pNext=f13, bufferDeviceAddress=vk.VK_TRUE)
    f11 = vk.VkPhysicalDeviceVulkan11Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                              pNext=f12, multiview=vk.VK_TRUE)
    raw = vk.ffi.new("char[24]")
    struct.pack_into("<IxxxxQI", vk.ffi.buffer(raw), 0, FEATURES_STYPE, handle(vk.ffi.addressof(f11)), 1)
    return raw, (f11, f12, f13)


if __name__ == "__main__":
    chain, _keep = features()
    vkapp.run_main("regions_api", body, device_features=chain,
                   optional_device_extensions=["VK_ARM_performance_counters_by_region"])

"""VK_ARM_shader_instrumentation used directly by an application, as the registry describes it.

Run: .venv/bin/python tests/integration/apps/instrumentation_api.py  (on the emulated Mali:
under `tessera run`, or with the tessera_env of the tests)
The `vulkan` package predates the Arm extension, so its structs are written by hand here
(layouts from vk.xml 1.4.366) and its commands are called through ctypes.

Records the registry's example sequence into one command buffer: begin; an instrumented
dispatch (resultIndex 0); end; begin; an instrumented dispatch (1); a dispatch with an
uninstrumented pipeline (2: reserved, no entries); a draw with an instrumented vertex +
fragment pipeline (3); end. The dispatches run examples/shaders/collatz.comp over INPUTS
(128 invocations, count 100); the draw covers a W x H image with examples/shaders/branchy.frag.
Then: the count query, a short read (VK_INCOMPLETE, nothing written past it), the full read,
a second submission (values add up), vkClearShaderInstrumentationMetricsARM (zeros), and two
misuses (begin twice, end with nothing active) that must only be reported.
Prints one JSON line: every read, for tests/integration/test_instrumentation.py to check.
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

# vk.xml 1.4.366 (VK_ARM_shader_instrumentation, extension 608)
FEATURES_STYPE = 1000607000
CREATE_INFO_STYPE = 1000607002
DESCRIPTION_STYPE = 1000607003
INSTRUMENT_SHADERS_BIT = 1 << 39
VK_INCOMPLETE = 5
W, H = 16, 8
COUNT, INVOCATIONS, LOCAL = 100, 128, 64
INPUTS = [(i * 7919 + 13) % 5000 for i in range(INVOCATIONS)]
NUM_METRICS = 7
STRIDE = 16 + 8 * NUM_METRICS


class Extension:
    """The extension's commands, through the loader (ctypes)."""

    def __init__(self, ctx) -> None:
        loader = ctypes.CDLL("libvulkan.so.1")
        gipa, gdpa = loader.vkGetInstanceProcAddr, loader.vkGetDeviceProcAddr
        gipa.restype = gdpa.restype = ctypes.c_void_p
        gipa.argtypes = gdpa.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.device = handle(ctx.device)
        instance = handle(ctx.instance)
        u32p, u64p, vp = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p

        def fn(get, owner, name, restype, *args):
            address = get(owner, name.encode())
            if not address:
                raise SystemExit(f"{name}: not exposed by the driver")
            return ctypes.CFUNCTYPE(restype, *args)(address)

        self.enumerate = fn(gipa, instance, "vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM",
                            ctypes.c_int32, vp, u32p, vp)
        self.create = fn(gdpa, self.device, "vkCreateShaderInstrumentationARM", ctypes.c_int32, vp, vp, vp, u64p)
        self.destroy = fn(gdpa, self.device, "vkDestroyShaderInstrumentationARM", None, vp, ctypes.c_uint64, vp)
        self.begin = fn(gdpa, self.device, "vkCmdBeginShaderInstrumentationARM", None, vp, ctypes.c_uint64)
        self.end = fn(gdpa, self.device, "vkCmdEndShaderInstrumentationARM", None, vp)
        self.values = fn(gdpa, self.device, "vkGetShaderInstrumentationValuesARM", ctypes.c_int32, vp,
                         ctypes.c_uint64, u32p, vp, ctypes.c_uint32)
        self.clear = fn(gdpa, self.device, "vkClearShaderInstrumentationMetricsARM", None, vp, ctypes.c_uint64)

    def read(self, obj: int, room: int | None = None) -> dict:
        """vkGetShaderInstrumentationValuesARM: the count query, then `room` entries (all by default)."""
        count = ctypes.c_uint32(0)
        assert self.values(self.device, obj, ctypes.byref(count), None, 0) == 0
        total = count.value
        room = total if room is None else room
        data = ctypes.create_string_buffer(b"\xAB" * (STRIDE * room + 64))   # 64 sentinel bytes past the end
        count = ctypes.c_uint32(room)
        result = self.values(self.device, obj, ctypes.byref(count), data, 0)
        raw = data.raw
        rows = [list(struct.unpack_from(f"<IIII{NUM_METRICS}Q", raw, i * STRIDE)) for i in range(count.value)]
        return {"total": total, "result": result, "written": count.value, "rows": rows,
                "sentinel_intact": raw[STRIDE * room:STRIDE * room + 64] == b"\xAB" * 64}


def handle(cdata) -> int:
    return int(vk.ffi.cast("uintptr_t", cdata))


def raw_features() -> tuple[object, object]:
    """VkPhysicalDeviceShaderInstrumentationFeaturesARM{shaderInstrumentation = TRUE} -> Vulkan 1.3 features."""
    features13 = vk.VkPhysicalDeviceVulkan13Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                                     dynamicRendering=vk.VK_TRUE)
    raw = vk.ffi.new("char[24]")
    struct.pack_into("<IxxxxQI", vk.ffi.buffer(raw), 0, FEATURES_STYPE, handle(vk.ffi.addressof(features13)), 1)
    return raw, features13


def metric_names(ext: Extension, ctx) -> list[str]:
    count = ctypes.c_uint32(0)
    physical = handle(ctx.physical_device)
    assert ext.enumerate(physical, ctypes.byref(count), None) == 0
    size = 16 + 256 + 256
    data = ctypes.create_string_buffer(size * count.value)
    for i in range(count.value):
        struct.pack_into("<I", data, i * size, DESCRIPTION_STYPE)
    assert ext.enumerate(physical, ctypes.byref(count), data) == 0
    return [data.raw[i * size + 16:i * size + 16 + 256].split(b"\0")[0].decode() for i in range(count.value)]


def body(ctx: vkapp.Context) -> str:
    ext = Extension(ctx)
    names = metric_names(ext, ctx)
    flags2 = vk.VkPipelineCreateFlags2CreateInfoKHR(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR,
                                                    flags=INSTRUMENT_SHADERS_BIT)
    storage, stage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk.VK_SHADER_STAGE_COMPUTE_BIT
    inbuf = ctx.buffer(INVOCATIONS * 4, storage, np.array(INPUTS, dtype=np.uint32))
    outbuf = ctx.buffer(INVOCATIONS * 4, storage, np.zeros(INVOCATIONS, dtype=np.uint32))
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    instrumented = ctx.compute_pipeline("collatz.comp", layout, spec={0: LOCAL}, pnext=flags2)
    plain = ctx.compute_pipeline("collatz.comp", layout, spec={0: LOCAL})
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])

    fmt = vk.VK_FORMAT_R8G8B8A8_UNORM
    target = ctx.image(W, H, fmt, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT, view=True)
    glayout = ctx.pipeline_layout([], push_size=16, push_stages=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
    graphics = ctx.graphics_pipeline("quad.vert", "branchy.frag", glayout, color_formats=[fmt], pnext=flags2)
    quad = np.array([(-1, -1), (1, -1), (-1, 1), (-1, 1), (1, -1), (1, 1)], dtype=np.float32)
    vbuf = ctx.buffer(quad.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, quad)

    obj = ctypes.c_uint64(0)
    info = ctypes.create_string_buffer(struct.pack("<IxxxxQ", CREATE_INFO_STYPE, 0))
    assert ext.create(ext.device, info, None, ctypes.byref(obj)) == 0
    obj = obj.value

    pool_info = vk.VkCommandPoolCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                           queueFamilyIndex=ctx.queue_family)
    cmd_pool = ctx.own(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(ctx.device, pool_info, None))
    cmd = vk.vkAllocateCommandBuffers(ctx.device, vk.VkCommandBufferAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=cmd_pool,
        level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
    c = handle(cmd)
    count = vk.ffi.new("uint32_t[1]", [COUNT])
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, count)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, instrumented)
    ext.begin(c, obj)
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)                  # resultIndex 0
    ext.end(c)
    ext.end(c)                                                           # misuse: nothing active
    ext.begin(c, obj)
    ext.begin(c, obj)                                                    # misuse: already active
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)                  # resultIndex 1
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, plain)
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)                  # resultIndex 2: no entries
    vkapp.image_barrier(cmd, target.handle, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                        vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                        vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT)
    attachment = vk.VkRenderingAttachmentInfo(
        sType=vk.VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, imageView=target.view,
        imageLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE,
        clearValue=vk.VkClearValue(color=vk.VkClearColorValue(float32=[0, 0, 0, 1])))
    rendering = vk.VkRenderingInfo(sType=vk.VK_STRUCTURE_TYPE_RENDERING_INFO,
                                   renderArea=vk.VkRect2D(offset=vk.VkOffset2D(0, 0), extent=vk.VkExtent2D(W, H)),
                                   layerCount=1, colorAttachmentCount=1, pColorAttachments=[attachment])
    vk.vkCmdBeginRendering(cmd, rendering)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, graphics)
    vkapp.set_viewport_scissor(cmd, W, H)
    color = vk.ffi.new("float[4]", [0.0, 0.5, 0.0, 1.0])
    vk.vkCmdPushConstants(cmd, glayout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, 16, color)
    vk.vkCmdBindVertexBuffers(cmd, 0, 1, [vbuf.handle], [0])
    vk.vkCmdDraw(cmd, 6, 1, 0, 0)                                      # resultIndex 3: vertex + fragment
    vk.vkCmdEndRendering(cmd)
    ext.end(c)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    vk.vkEndCommandBuffer(cmd)

    def submit() -> None:
        fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
        vk.vkQueueSubmit(ctx.queue, 1, [vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                                                        pCommandBuffers=[cmd])], fence)
        vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 60 * 1000**3)
        vk.vkDestroyFence(ctx.device, fence, None)

    submit()
    reads = {"metrics": names, "first": ext.read(obj), "short": ext.read(obj, room=3)}
    submit()
    reads["second"] = ext.read(obj)
    ext.clear(ext.device, obj)
    reads["cleared"] = ext.read(obj)
    reads["outputs"] = outbuf.array(np.uint32).tolist()
    ext.destroy(ext.device, obj, None)
    reads.update(secondaries_and_bad_input(ctx, ext, layout, dset, instrumented, set_layout, flags2, outbuf))
    print(json.dumps(reads), flush=True)
    return f"{reads['first']['total']} entries"


def secondaries_and_bad_input(ctx, ext, layout, dset, instrumented, set_layout, flags2, outbuf) -> dict:
    """A secondary command buffer recorded with its own active object (two dispatches: its
    resultIndex 0 and 1), executed by a primary while another object is active there (a misuse:
    the primary's object gets nothing); an instrumented pipeline dispatched with no object active
    (legal: no entries anywhere); a pipeline whose layout uses every descriptor set (the rewrite
    has no set left for its counters: created uninstrumented, one warning, no entries)."""
    stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
    limits = vk.vkGetPhysicalDeviceProperties(ctx.physical_device).limits
    # Distinct empty set layouts: the `vulkan` package was seen passing a list that repeats one
    # handle as a shorter array.
    empty = [ctx.set_layout([]) for _ in range(limits.maxBoundDescriptorSets - 1)]
    full_layout = ctx.pipeline_layout([set_layout, *empty], push_size=4, push_stages=stage)
    refused = ctx.compute_pipeline("collatz.comp", full_layout, spec={0: LOCAL}, pnext=flags2)
    count = vk.ffi.new("uint32_t[1]", [COUNT])
    objs = []
    for _ in range(3):
        o = ctypes.c_uint64(0)
        info = ctypes.create_string_buffer(struct.pack("<IxxxxQ", CREATE_INFO_STYPE, 0))
        assert ext.create(ext.device, info, None, ctypes.byref(o)) == 0
        objs.append(o.value)
    own, outer, bad = objs

    pool_info = vk.VkCommandPoolCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                           queueFamilyIndex=ctx.queue_family)
    cmd_pool = ctx.own(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(ctx.device, pool_info, None))

    def allocate(level):
        return vk.vkAllocateCommandBuffers(ctx.device, vk.VkCommandBufferAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=cmd_pool, level=level,
            commandBufferCount=1))[0]

    secondary = allocate(vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY)
    inheritance = vk.VkCommandBufferInheritanceInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO)
    vk.vkBeginCommandBuffer(secondary, vk.VkCommandBufferBeginInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, pInheritanceInfo=inheritance))
    vk.vkCmdBindDescriptorSets(secondary, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(secondary, layout, stage, 0, 4, count)
    vk.vkCmdBindPipeline(secondary, vk.VK_PIPELINE_BIND_POINT_COMPUTE, instrumented)
    ext.begin(handle(secondary), own)
    vk.vkCmdDispatch(secondary, INVOCATIONS // LOCAL, 1, 1)            # own: resultIndex 0
    vk.vkCmdDispatch(secondary, INVOCATIONS // LOCAL, 1, 1)            # own: resultIndex 1
    ext.end(handle(secondary))
    vk.vkEndCommandBuffer(secondary)

    primary = allocate(vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY)
    vk.vkBeginCommandBuffer(primary, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
    ext.begin(handle(primary), outer)
    vk.vkCmdExecuteCommands(primary, 1, [secondary])                   # misuse: `outer` is active here
    ext.end(handle(primary))
    vkapp.memory_barrier(primary, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                         vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    vk.vkCmdBindDescriptorSets(primary, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(primary, layout, stage, 0, 4, count)
    vk.vkCmdBindPipeline(primary, vk.VK_PIPELINE_BIND_POINT_COMPUTE, instrumented)
    vk.vkCmdDispatch(primary, INVOCATIONS // LOCAL, 1, 1)              # no object active: no entries
    vk.vkCmdBindDescriptorSets(primary, vk.VK_PIPELINE_BIND_POINT_COMPUTE, full_layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(primary, full_layout, stage, 0, 4, count)
    vk.vkCmdBindPipeline(primary, vk.VK_PIPELINE_BIND_POINT_COMPUTE, refused)
    ext.begin(handle(primary), bad)
    vk.vkCmdDispatch(primary, INVOCATIONS // LOCAL, 1, 1)              # bad: resultIndex 0, no entries
    ext.end(handle(primary))
    vkapp.host_barrier(primary, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    vk.vkEndCommandBuffer(primary)
    fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
    vk.vkQueueSubmit(ctx.queue, 1, [vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                                                    pCommandBuffers=[primary])], fence)
    vk.vkWaitForFences(ctx.device, 1, [fence], vk.VK_TRUE, 60 * 1000**3)
    vk.vkDestroyFence(ctx.device, fence, None)
    out = {"secondary": ext.read(own), "executed_while_active": ext.read(outer), "uninstrumentable": ext.read(bad),
           "outputs_after": outbuf.array(np.uint32).tolist()}
    for o in objs:
        ext.destroy(ext.device, o, None)
    return out


if __name__ == "__main__":
    features, keep = raw_features()
    vkapp.run_main("instrumentation_api", body,
                   optional_device_extensions=["VK_ARM_shader_instrumentation", "VK_KHR_maintenance5"],
                   device_features=features)

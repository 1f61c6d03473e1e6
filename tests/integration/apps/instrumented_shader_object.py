"""VK_ARM_shader_instrumentation on a shader object (VK_EXT_shader_object), used directly.

Run: .venv/bin/python tests/integration/apps/instrumented_shader_object.py  (on the emulated Mali
over a backend with VK_EXT_shader_object, e.g. Mesa 25 lavapipe)
Creates examples/shaders/collatz.comp as a compute VkShaderEXT with
VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM (bit 11 in vk.xml 1.4.366), binds it with
vkCmdBindShadersEXT and, with an instrumentation object active, dispatches it twice over the
inputs of instrumentation_api.py (resultIndex 0 and 1), then once more with a shader object
created without the bit (resultIndex 2: no entries). Then a draw with vertex and fragment shader
objects (examples/shaders/quad.vert + branchy.frag, both with the bit, bound separately) over a
W x H image under a second object (resultIndex 0: vertex and fragment entries). Checks the
outputs against the Python reference and prints one JSON line with both objects' values, for
tests/integration/test_instrumentation.py.
"""
import ctypes
import json
import struct
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import vkapp  # noqa: E402
from compute_collatz import collatz_reference  # noqa: E402
from instrumentation_api import (COUNT, CREATE_INFO_STYPE, FEATURES_STYPE, INPUTS, INVOCATIONS,  # noqa: E402
                                 LOCAL, H, W, Extension, handle)

SHADER_INSTRUMENT_BIT = 1 << 11


def body(ctx: vkapp.Context) -> str:
    if "VK_EXT_shader_object" not in ctx.device_extensions:
        raise vkapp.CheckFailed("the device has no VK_EXT_shader_object")
    ext = Extension(ctx)
    create = vk.vkGetDeviceProcAddr(ctx.device, "vkCreateShadersEXT")
    bind = vk.vkGetDeviceProcAddr(ctx.device, "vkCmdBindShadersEXT")
    destroy = vk.vkGetDeviceProcAddr(ctx.device, "vkDestroyShaderEXT")
    storage, stage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk.VK_SHADER_STAGE_COMPUTE_BIT
    inbuf = ctx.buffer(INVOCATIONS * 4, storage, np.array(INPUTS, dtype=np.uint32))
    outbuf = ctx.buffer(INVOCATIONS * 4, storage, np.zeros(INVOCATIONS, dtype=np.uint32))
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    code = vkapp.compile_glsl(ctx.settings, vkapp.SHADER_DIR / "collatz.comp")
    spec_entry = vk.VkSpecializationMapEntry(constantID=0, offset=0, size=4)
    spec_data = vk.ffi.new("uint32_t[1]", [LOCAL])
    spec = vk.VkSpecializationInfo(mapEntryCount=1, pMapEntries=[spec_entry], dataSize=4, pData=spec_data)
    push = vk.VkPushConstantRange(stageFlags=stage, offset=0, size=4)

    def shader(flags: int):
        info = vk.VkShaderCreateInfoEXT(
            sType=vk.VK_STRUCTURE_TYPE_SHADER_CREATE_INFO_EXT, flags=flags, stage=stage,
            codeType=vk.VK_SHADER_CODE_TYPE_SPIRV_EXT, codeSize=len(code), pCode=code, pName="main",
            setLayoutCount=1, pSetLayouts=[set_layout], pushConstantRangeCount=1, pPushConstantRanges=[push],
            pSpecializationInfo=spec)
        return create(ctx.device, 1, [info], None)[0]

    instrumented, plain = shader(SHADER_INSTRUMENT_BIT), shader(0)
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    ctx.write_storage_buffers(dset, [(0, inbuf, 0, vkapp.WHOLE_SIZE), (1, outbuf, 0, vkapp.WHOLE_SIZE)])
    obj = ctypes.c_uint64(0)
    info = ctypes.create_string_buffer(struct.pack("<IxxxxQ", CREATE_INFO_STYPE, 0))
    assert ext.create(ext.device, info, None, ctypes.byref(obj)) == 0
    obj = obj.value

    cmd = ctx.command_buffer()
    bind(cmd, 1, [stage], [instrumented])
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, stage, 0, 4, vk.ffi.new("uint32_t[1]", [COUNT]))
    ext.begin(handle(cmd), obj)
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)                  # resultIndex 0
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)                  # resultIndex 1
    bind(cmd, 1, [stage], [plain])
    vk.vkCmdDispatch(cmd, INVOCATIONS // LOCAL, 1, 1)                  # resultIndex 2: no entries
    ext.end(handle(cmd))
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    ctx.submit([cmd])
    values = ext.read(obj)
    ext.destroy(ext.device, obj, None)
    destroy(ctx.device, instrumented, None)
    destroy(ctx.device, plain, None)
    vkapp.check_equal("collatz steps", outbuf.array(np.uint32)[:COUNT].copy(),
                      np.array([collatz_reference(int(v)) for v in INPUTS[:COUNT]], dtype=np.uint32))
    graphics = draw_with_shader_objects(ctx, ext, create, bind, destroy)
    print(json.dumps({"values": values, "graphics": graphics}), flush=True)
    return f"{values['total']} + {graphics['total']} entries from instrumented shader objects"


def draw_with_shader_objects(ctx: vkapp.Context, ext: Extension, create, bind, destroy) -> dict:
    """quad.vert + branchy.frag as two instrumented shader objects, one draw (resultIndex 0)."""
    fmt, vertex, fragment = vk.VK_FORMAT_R8G8B8A8_UNORM, vk.VK_SHADER_STAGE_VERTEX_BIT, vk.VK_SHADER_STAGE_FRAGMENT_BIT
    target = ctx.image(W, H, fmt, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT, view=True)
    push = vk.VkPushConstantRange(stageFlags=fragment, offset=0, size=16)
    layout = ctx.pipeline_layout([], push_size=16, push_stages=fragment)
    quad = np.array([(-1, -1), (1, -1), (-1, 1), (-1, 1), (1, -1), (1, 1)], dtype=np.float32)
    vbuf = ctx.buffer(quad.nbytes, vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, quad)
    codes = {s: vkapp.compile_glsl(ctx.settings, vkapp.SHADER_DIR / name)
             for s, name in ((vertex, "quad.vert"), (fragment, "branchy.frag"))}
    infos = [vk.VkShaderCreateInfoEXT(
        sType=vk.VK_STRUCTURE_TYPE_SHADER_CREATE_INFO_EXT, flags=SHADER_INSTRUMENT_BIT, stage=s,
        nextStage=fragment if s == vertex else 0, codeType=vk.VK_SHADER_CODE_TYPE_SPIRV_EXT, codeSize=len(code),
        pCode=code, pName="main", pushConstantRangeCount=1, pPushConstantRanges=[push]) for s, code in codes.items()]
    shaders = create(ctx.device, len(infos), infos, None)
    obj = ctypes.c_uint64(0)
    info = ctypes.create_string_buffer(struct.pack("<IxxxxQ", CREATE_INFO_STYPE, 0))
    assert ext.create(ext.device, info, None, ctypes.byref(obj)) == 0
    obj = obj.value

    def fn(name):
        return vk.vkGetDeviceProcAddr(ctx.device, name)

    cmd = ctx.command_buffer()
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
    bind(cmd, 2, [vertex, fragment], list(shaders))
    # Every state a draw with shader objects needs (VK_EXT_shader_object, "Setting State").
    vk.vkCmdSetViewportWithCount(cmd, 1, [vk.VkViewport(0, 0, W, H, 0, 1)])
    vk.vkCmdSetScissorWithCount(cmd, 1, [vk.VkRect2D(vk.VkOffset2D(0, 0), vk.VkExtent2D(W, H))])
    vk.vkCmdSetRasterizerDiscardEnable(cmd, vk.VK_FALSE)
    vk.vkCmdSetCullMode(cmd, vk.VK_CULL_MODE_NONE)
    vk.vkCmdSetFrontFace(cmd, vk.VK_FRONT_FACE_COUNTER_CLOCKWISE)
    vk.vkCmdSetDepthTestEnable(cmd, vk.VK_FALSE)
    vk.vkCmdSetDepthWriteEnable(cmd, vk.VK_FALSE)
    vk.vkCmdSetDepthBiasEnable(cmd, vk.VK_FALSE)
    vk.vkCmdSetStencilTestEnable(cmd, vk.VK_FALSE)
    vk.vkCmdSetPrimitiveTopology(cmd, vk.VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST)
    vk.vkCmdSetPrimitiveRestartEnable(cmd, vk.VK_FALSE)
    fn("vkCmdSetPolygonModeEXT")(cmd, vk.VK_POLYGON_MODE_FILL)
    fn("vkCmdSetRasterizationSamplesEXT")(cmd, vk.VK_SAMPLE_COUNT_1_BIT)
    fn("vkCmdSetSampleMaskEXT")(cmd, vk.VK_SAMPLE_COUNT_1_BIT, [0xFFFFFFFF])
    fn("vkCmdSetAlphaToCoverageEnableEXT")(cmd, vk.VK_FALSE)
    fn("vkCmdSetColorBlendEnableEXT")(cmd, 0, 1, [vk.VK_FALSE])
    fn("vkCmdSetColorWriteMaskEXT")(cmd, 0, 1, [0xF])
    binding = vk.VkVertexInputBindingDescription2EXT(
        sType=vk.VK_STRUCTURE_TYPE_VERTEX_INPUT_BINDING_DESCRIPTION_2_EXT, binding=0, stride=8,
        inputRate=vk.VK_VERTEX_INPUT_RATE_VERTEX, divisor=1)
    attribute = vk.VkVertexInputAttributeDescription2EXT(
        sType=vk.VK_STRUCTURE_TYPE_VERTEX_INPUT_ATTRIBUTE_DESCRIPTION_2_EXT, location=0, binding=0,
        format=vk.VK_FORMAT_R32G32_SFLOAT, offset=0)
    fn("vkCmdSetVertexInputEXT")(cmd, 1, [binding], 1, [attribute])
    vk.vkCmdBindVertexBuffers(cmd, 0, 1, [vbuf.handle], [0])
    vk.vkCmdPushConstants(cmd, layout, fragment, 0, 16, vk.ffi.new("float[4]", [0.0, 0.5, 0.0, 1.0]))
    ext.begin(handle(cmd), obj)
    vk.vkCmdDraw(cmd, 6, 1, 0, 0)                                      # resultIndex 0: vertex + fragment
    ext.end(handle(cmd))
    vk.vkCmdEndRendering(cmd)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    ctx.submit([cmd])
    values = ext.read(obj)
    ext.destroy(ext.device, obj, None)
    for shader in shaders:
        destroy(ctx.device, shader, None)
    return values


if __name__ == "__main__":
    features13 = vk.VkPhysicalDeviceVulkan13Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                                     dynamicRendering=vk.VK_TRUE)
    shader_object = vk.VkPhysicalDeviceShaderObjectFeaturesEXT(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_OBJECT_FEATURES_EXT, pNext=features13,
        shaderObject=vk.VK_TRUE)
    features = vk.ffi.new("char[24]")   # VkPhysicalDeviceShaderInstrumentationFeaturesARM -> shader object
    struct.pack_into("<IxxxxQI", vk.ffi.buffer(features), 0, FEATURES_STYPE,
                     handle(vk.ffi.addressof(shader_object)), 1)
    vkapp.run_main("instrumented_shader_object", body,
                   optional_device_extensions=["VK_EXT_shader_object", "VK_ARM_shader_instrumentation"],
                   device_features=features)

"""Ray-tracing sample: a ray-tracing pipeline renders examples/rt_scene.py's scene, checked pixel-exact.

Run (needs a Vulkan driver with VK_KHR_ray_tracing_pipeline, e.g. Mesa 25 lavapipe, Tessera's
default backend; add VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation to validate):
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python examples/ray_tracing.py

What it does, in three submits:
  1. vkCmdBuildAccelerationStructuresKHR: bottom level A (3 triangles, PREFER_FAST_BUILD |
     ALLOW_UPDATE) from vertices shifted 5 pixels right, then bottom level B (2 geometries: 2 + 1
     triangles, PREFER_FAST_TRACE); vkCmdBuildAccelerationStructuresKHR in UPDATE mode moves A to
     its final vertices; vkCmdWriteAccelerationStructuresPropertiesKHR asks B's serialized size.
  2. vkCmdCopyAccelerationStructureKHR clones A into A2; vkCmdCopyAccelerationStructureToMemoryKHR
     serializes B into a buffer and vkCmdCopyMemoryToAccelerationStructureKHR deserializes it into
     B2; the top level (PREFER_FAST_TRACE) instances A, A2 and B2.
  3. vkCmdTraceRaysKHR (64x64x1) into one image and vkCmdTraceRaysIndirectKHR, its size (64, 64, 1)
     read from a buffer at a device address, into another, with raygen / miss / closest-hit shaders
     (examples/shaders/rt_scene.*).
What it checks: both images equal rt_scene.reference_image() exactly (so the update, the clone and
the serialize/deserialize round trip all took effect). Its OK line gives the created sizes of A and
B (bytes of the copies). Exit 0 and one 'ray_tracing: OK ...' line on success.
"""

from __future__ import annotations

import numpy as np
import vulkan as vk

import rt_scene as rs
import vkapp

SERIALIZATION_SIZE_QUERY = 1000150001   # VK_QUERY_TYPE_ACCELERATION_STRUCTURE_SERIALIZATION_SIZE_KHR
CLONE, SERIALIZE, DESERIALIZE = 0, 2, 3
RAYGEN = vk.VK_SHADER_STAGE_RAYGEN_BIT_KHR
GENERAL, TRIANGLES_HIT_GROUP = 0, 1         # VkRayTracingShaderGroupTypeKHR
UNUSED = 0xFFFFFFFF                         # VK_SHADER_UNUSED_KHR


def pipeline_properties(ctx: vkapp.Context):
    rt = vk.ffi.new("VkPhysicalDeviceRayTracingPipelinePropertiesKHR *", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_PROPERTIES_KHR})
    props = vk.ffi.new("VkPhysicalDeviceProperties2 *", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": rt})
    vk.lib.vkGetPhysicalDeviceProperties2(ctx.physical_device, props)
    return rt


def module(ctx: vkapp.Context, name: str):
    code = rs.spirv(name)
    info = vk.VkShaderModuleCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code),
                                       pCode=code)
    return ctx.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(ctx.device, info, None))


def ray_tracing_pipeline(ctx: vkapp.Context, raw: rs.Raw, layout):
    names = vk.ffi.new("char[]", b"main")
    modules = [module(ctx, n) for n in ("rt_scene.rgen", "rt_scene.rmiss", "rt_scene.rchit")]
    stage_bits = [RAYGEN, vk.VK_SHADER_STAGE_MISS_BIT_KHR, vk.VK_SHADER_STAGE_CLOSEST_HIT_BIT_KHR]
    stages = vk.ffi.new("VkPipelineShaderStageCreateInfo[]", [
        {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "stage": bit, "module": m, "pName": names}
        for bit, m in zip(stage_bits, modules)])
    group = {"sType": rs.SHADER_GROUP_CREATE_INFO_TYPE, "generalShader": UNUSED,
             "closestHitShader": UNUSED, "anyHitShader": UNUSED, "intersectionShader": UNUSED}
    groups = vk.ffi.new("VkRayTracingShaderGroupCreateInfoKHR[]", [
        {**group, "type": GENERAL, "generalShader": 0}, {**group, "type": GENERAL, "generalShader": 1},
        {**group, "type": TRIANGLES_HIT_GROUP, "closestHitShader": 2}])
    info = vk.ffi.new("VkRayTracingPipelineCreateInfoKHR *", {
        "sType": rs.PIPELINE_CREATE_INFO_TYPE, "stageCount": 3, "pStages": stages,
        "groupCount": 3, "pGroups": groups, "maxPipelineRayRecursionDepth": 1, "layout": layout,
        "basePipelineIndex": -1})
    out = vk.ffi.new("VkPipeline *")
    rs.check(raw.vkCreateRayTracingPipelinesKHR(ctx.device, vk.ffi.NULL, vk.ffi.NULL, 1, info, vk.ffi.NULL, out),
             "vkCreateRayTracingPipelinesKHR")
    return ctx.own(vk.vkDestroyPipeline, out[0])


def shader_binding_table(ctx: vkapp.Context, raw: rs.Raw, pipeline):
    """raygen, miss, hit records, each at a multiple of shaderGroupBaseAlignment; returns the four regions."""
    rt = pipeline_properties(ctx)
    size, align = rt.shaderGroupHandleSize, rt.shaderGroupBaseAlignment
    stride = -(-size // align) * align
    handles = vk.ffi.new("uint8_t[]", 3 * size)
    rs.check(raw.vkGetRayTracingShaderGroupHandlesKHR(ctx.device, pipeline, 0, 3, 3 * size, handles),
             "vkGetRayTracingShaderGroupHandlesKHR")
    data = bytearray(3 * stride)
    for g in range(3):
        data[g * stride:g * stride + size] = bytes(vk.ffi.buffer(handles, 3 * size))[g * size:(g + 1) * size]
    sbt = rs.address_buffer(ctx, raw, len(data) + align, rs.SBT_USAGE)
    base = -(-sbt.address // align) * align
    sbt.buffer.mapped[base - sbt.address:base - sbt.address + len(data)] = bytes(data)
    regions = vk.ffi.new("VkStridedDeviceAddressRegionKHR[4]")
    for g in range(3):
        regions[g].deviceAddress, regions[g].stride, regions[g].size = base + g * stride, stride, stride
    return sbt, regions


def serialized_size(ctx: vkapp.Context, raw: rs.Raw, pool) -> int:
    out = vk.ffi.new("uint64_t[1]")
    rs.check(vk.lib.vkGetQueryPoolResults(ctx.device, pool, 0, 1, 8, out, 8,
                                          vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT),
             "vkGetQueryPoolResults")
    return int(out[0])


def body(ctx: vkapp.Context) -> str:
    rs.require_extensions(ctx, rs.EXTENSIONS + ("VK_KHR_ray_tracing_pipeline",))
    want = rs.reference_image()
    raw = rs.Raw(ctx)
    builder = rs.Builder(ctx, raw)

    # 1. bottom levels: build A (shifted) and B, update A to its final place, ask B's serialized size
    pool_info = vk.VkQueryPoolCreateInfo(sType=vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                         queryType=SERIALIZATION_SIZE_QUERY, queryCount=1)
    pool = ctx.own(vk.vkDestroyQueryPool, vk.vkCreateQueryPool(ctx.device, pool_info, None))
    cmd = ctx.command_buffer()
    vk.vkCmdResetQueryPool(cmd, pool, 0, 1)
    blas_a = builder.build_bottom(cmd, [rs.TRIS_A_BEFORE_UPDATE], rs.FAST_BUILD | rs.ALLOW_UPDATE)
    blas_b = builder.build_bottom(cmd, rs.GEOMETRIES["B"], rs.FAST_TRACE)
    rs.accel_barrier(cmd, rs.AS_BUILD_STAGE, rs.AS_READ | rs.AS_WRITE)
    builder.update_bottom(cmd, blas_a, [rs.TRIS_A], rs.FAST_BUILD | rs.ALLOW_UPDATE)
    handles = vk.ffi.new("VkAccelerationStructureKHR[]", [blas_b.handle])
    raw.vkCmdWriteAccelerationStructuresPropertiesKHR(cmd, 1, handles, SERIALIZATION_SIZE_QUERY, pool, 0)
    ctx.submit([cmd])
    ser_size = serialized_size(ctx, raw, pool)

    # 2. clone A, serialize + deserialize B, build the top level over A, A2, B2
    blas_a2 = builder.create(blas_a.size, rs.BOTTOM)
    blas_b2 = builder.create(blas_b.size, rs.BOTTOM)
    memory = rs.address_buffer(ctx, raw, ser_size + 256, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)
    mem_address = (memory.address + 255) & ~255      # serialized data: 256-byte aligned (spec 37.7)
    cmd = ctx.command_buffer()
    clone = vk.ffi.new("VkCopyAccelerationStructureInfoKHR *", {
        "sType": vk.VK_STRUCTURE_TYPE_COPY_ACCELERATION_STRUCTURE_INFO_KHR, "src": blas_a.handle,
        "dst": blas_a2.handle, "mode": CLONE})
    raw.vkCmdCopyAccelerationStructureKHR(cmd, clone)
    to_memory = vk.ffi.new("VkCopyAccelerationStructureToMemoryInfoKHR *", {
        "sType": vk.VK_STRUCTURE_TYPE_COPY_ACCELERATION_STRUCTURE_TO_MEMORY_INFO_KHR, "src": blas_b.handle,
        "mode": SERIALIZE})
    to_memory.dst.deviceAddress = mem_address
    raw.vkCmdCopyAccelerationStructureToMemoryKHR(cmd, to_memory)
    rs.accel_barrier(cmd, rs.AS_BUILD_STAGE, rs.AS_READ | rs.AS_WRITE | vk.VK_ACCESS_SHADER_READ_BIT)
    from_memory = vk.ffi.new("VkCopyMemoryToAccelerationStructureInfoKHR *", {
        "sType": vk.VK_STRUCTURE_TYPE_COPY_MEMORY_TO_ACCELERATION_STRUCTURE_INFO_KHR, "dst": blas_b2.handle,
        "mode": DESERIALIZE})
    from_memory.src.deviceAddress = mem_address
    raw.vkCmdCopyMemoryToAccelerationStructureKHR(cmd, from_memory)
    rs.accel_barrier(cmd, rs.AS_BUILD_STAGE, rs.AS_READ)
    accels = {0: blas_a, 1: blas_a2, 2: blas_b2}
    refs = [(accels[i], translation, custom) for i, (_, translation, custom) in enumerate(rs.INSTANCES)]
    tlas = builder.build_top(cmd, refs, rs.FAST_TRACE)
    ctx.submit([cmd])

    # 3. trace rays, direct and indirect, into two images
    images = [rs.storage_image(ctx), rs.storage_image(ctx)]
    set_layout, sets = rs.scene_descriptors(ctx, RAYGEN, tlas, images)
    layout = ctx.pipeline_layout([set_layout])
    pipeline = ray_tracing_pipeline(ctx, raw, layout)
    sbt, regions = shader_binding_table(ctx, raw, pipeline)
    params = rs.address_buffer(ctx, raw, 12, vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT,
                               np.array([rs.WIDTH, rs.HEIGHT, 1], dtype=np.uint32).tobytes())
    cmd = ctx.command_buffer()
    for img in images:
        rs.to_general(cmd, img, rs.RAY_TRACING_STAGE)
    vk.vkCmdBindPipeline(cmd, rs.BIND_POINT_RAY_TRACING, pipeline)
    raygen, miss, hit, callable_ = (regions + i for i in range(4))
    for i, dset in enumerate(sets):
        vk.vkCmdBindDescriptorSets(cmd, rs.BIND_POINT_RAY_TRACING, layout, 0, 1, [dset], 0, None)
        if i == 0:
            raw.vkCmdTraceRaysKHR(cmd, raygen, miss, hit, callable_, rs.WIDTH, rs.HEIGHT, 1)
        else:
            raw.vkCmdTraceRaysIndirectKHR(cmd, raygen, miss, hit, callable_, params.address)
    ctx.submit([cmd])
    for what, img in zip(("vkCmdTraceRaysKHR", "vkCmdTraceRaysIndirectKHR"), images):
        vkapp.check_equal(f"{what} image", rs.read_result(ctx, img, rs.RAY_TRACING_STAGE), want)
    builder.keep.clear()
    return (f"on {ctx.device_name}: {rs.WIDTH}x{rs.HEIGHT} pixels equal the CPU reference twice (trace rays direct + indirect; "
            f"{rs.describe_image(want)}); AS sizes A={blas_a.size} B={blas_b.size} serialized B={ser_size}")


if __name__ == "__main__":
    FEATURES = rs.device_features(ray_tracing_pipeline=True, ray_query=False)   # kept alive: a pNext chain
    vkapp.run_main("ray_tracing", body, optional_device_extensions=rs.EXTENSIONS + ("VK_KHR_ray_tracing_pipeline",),
                   device_features=FEATURES[0])

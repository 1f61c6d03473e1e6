"""The small ray-tracing scene shared by examples/ray_tracing.py and examples/ray_query.py, its CPU
reference, and the acceleration-structure plumbing both need (not an example itself).

Scene (pixel units, 64x64 image): bottom-level structure A = one geometry of 3 triangles;
bottom-level structure B = two geometries, a quad (2 triangles) and 1 triangle. The top level has 3
instances: A translated to depth z = 6, A again (ray_tracing.py: a clone of A) at z = 3, overlapping
the first (so closest-hit order matters), and B (ray_tracing.py: B serialized and deserialized) at
z = 5. Rays: one per pixel, origin (x + 0.5, y + 0.5, -1), direction +z, t in [0, 100]; the shaders
(examples/shaders/rt_scene.*, rt_query.comp) write (instance custom index, primitive index + 1,
round(t), 100 + geometry index) to an RGBA8_UINT image, (0, 0, 0, 0) where nothing is hit.

The reference intersects the same rays with the same triangles (Möller-Trumbore, numpy float64)
and refuses a scene in which a pixel centre lies within EDGE_MARGIN of a triangle edge (in
barycentric terms), where float rounding could legitimately decide either way: so a mismatch is
a real error, and pixel-exact comparison is fair.

Hand-computed build sizes (what the trace must report): A: 3 primitives in 1 geometry; B: 3
primitives, geometries [2, 1]; top level: 3 instances.

Everything here runs in the example's process on its single thread; Vulkan objects are owned by
the vkapp.Context (destroyed at close). Shader SPIR-V is built by examples/Makefile
(build/examples/shaders/*.spv, `--target-env spirv1.4`, which GL_EXT_ray_tracing needs); `spirv()`
runs that make target when the file is missing or older than its source.
"""
from __future__ import annotations

import struct
import subprocess
from dataclasses import dataclass
from typing import Any

import numpy as np
import vulkan as vk

import vkapp

WIDTH = HEIGHT = 64
EDGE_MARGIN = 1e-5      # barycentric: ~2.5e-4 pixel on these triangles, far above float32 rounding at 64

# Object-space triangles (x, y, z): coordinates chosen off the pixel grid.
TRIS_A = np.array([[[4.3, 4.1, 0], [27.6, 6.2, 0], [10.2, 29.7, 0]],
                   [[30.1, 3.3, 0], [40.2, 19.6, 0], [25.9, 23.8, 0]],
                   [[6.2, 35.9, 0], [23.7, 33.6, 0], [13.9, 57.3, 0]]], dtype=np.float32)
# A as first built by ray_tracing.py (shifted), before the update moves it to TRIS_A.
TRIS_A_BEFORE_UPDATE = TRIS_A + np.array([5.0, 0.0, 0.0], dtype=np.float32)
QUAD_B = np.array([[[0.2, 0.4, 0], [20.3, 0.1, 0], [19.8, 20.2, 0]],
                   [[0.2, 0.4, 0], [19.8, 20.2, 0], [0.3, 19.9, 0]]], dtype=np.float32)
TRI_B = np.array([[[22.1, 2.3, 0], [34.2, 2.2, 0], [28.3, 18.1, 0]]], dtype=np.float32)
GEOMETRIES = {"A": [TRIS_A], "B": [QUAD_B, TRI_B]}
# (structure, translation, instance custom index)
INSTANCES = [("A", (0.13, 0.27, 6.0), 11), ("A", (18.41, 20.77, 3.0), 22), ("B", (36.61, 38.13, 5.0), 33)]
PRIMITIVES = {"A": 3, "B": 3}
GEOMETRY_PRIMITIVES = {"A": [3], "B": [2, 1]}

# VK_KHR_acceleration_structure / ray tracing enum values the `vulkan` package may not name.
AS_BUFFER_USAGE = 0x00080000 | 0x00020000      # ACCELERATION_STRUCTURE_BUILD_INPUT_READ_ONLY | SHADER_DEVICE_ADDRESS
AS_STORAGE_USAGE = 0x00100000 | 0x00020000     # ACCELERATION_STRUCTURE_STORAGE | SHADER_DEVICE_ADDRESS
DEVICE_ADDRESS_USAGE = 0x00020000
SBT_USAGE = 0x00000400 | 0x00020000            # SHADER_BINDING_TABLE | SHADER_DEVICE_ADDRESS
AS_BUILD_STAGE = 0x02000000                    # VK_PIPELINE_STAGE_ACCELERATION_STRUCTURE_BUILD_BIT_KHR
RAY_TRACING_STAGE = 0x00200000                 # VK_PIPELINE_STAGE_RAY_TRACING_SHADER_BIT_KHR
AS_READ, AS_WRITE = 0x00200000, 0x00400000     # VK_ACCESS_ACCELERATION_STRUCTURE_READ/WRITE_BIT_KHR
TOP, BOTTOM = 0, 1
FAST_TRACE, FAST_BUILD, ALLOW_UPDATE = 0x4, 0x8, 0x1
MODE_BUILD, MODE_UPDATE = 0, 1
TRIANGLES, INSTANCES_GEOMETRY = 0, 2
OPAQUE_GEOMETRY = 0x1
# Values the `vulkan` package (1.3.275) has from the provisional extension; the registry's are these.
BIND_POINT_RAY_TRACING = 1000165000              # VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR (package: 1000347000)
PIPELINE_CREATE_INFO_TYPE = 1000150015          # VK_STRUCTURE_TYPE_RAY_TRACING_PIPELINE_CREATE_INFO_KHR
SHADER_GROUP_CREATE_INFO_TYPE = 1000150016      # VK_STRUCTURE_TYPE_RAY_TRACING_SHADER_GROUP_CREATE_INFO_KHR
INDEX_TYPE_NONE = 1000165000                    # VK_INDEX_TYPE_NONE_KHR (the `vulkan` package says 1000150000)
DEVICE_BUILD = 1                               # VK_ACCELERATION_STRUCTURE_BUILD_TYPE_DEVICE_KHR
EXTENSIONS = ("VK_KHR_acceleration_structure", "VK_KHR_deferred_host_operations")


# ---- CPU reference -----------------------------------------------------------------------------
def world_triangles() -> list[tuple[int, int, int, np.ndarray]]:
    """(custom index, geometry index, primitive index, 3x3 float64 vertices) in world space."""
    out = []
    for name, translation, custom in INSTANCES:
        for g, tris in enumerate(GEOMETRIES[name]):
            for p, tri in enumerate(tris):
                out.append((custom, g, p, tri.astype(np.float64) + np.array(translation)))
    return out


def reference_image() -> np.ndarray:
    """H x W x 4 uint8: what the shaders must write. Raises CheckFailed for an ambiguous scene."""
    ys, xs = np.mgrid[0:HEIGHT, 0:WIDTH]
    origin = np.stack([xs + 0.5, ys + 0.5, np.full(xs.shape, -1.0)], axis=-1)
    direction = np.array([0.0, 0.0, 1.0])
    best_t = np.full(xs.shape, np.inf)
    image = np.zeros((HEIGHT, WIDTH, 4), dtype=np.uint8)
    for custom, g, p, (v0, v1, v2) in world_triangles():
        e1, e2 = v1 - v0, v2 - v0
        pvec = np.cross(direction, e2)
        det = float(e1 @ pvec)
        s = origin - v0
        u = (s @ pvec) / det
        q = np.cross(s, e1)
        v = (q @ direction) / det
        t = (q @ e2) / det
        w = 1.0 - u - v
        inside_or_on = (u > -EDGE_MARGIN) & (v > -EDGE_MARGIN) & (w > -EDGE_MARGIN)
        near_edge = inside_or_on & (np.minimum(np.minimum(np.abs(u), np.abs(v)), np.abs(w)) < EDGE_MARGIN)
        if near_edge.any():
            y, x = np.argwhere(near_edge)[0]
            raise vkapp.CheckFailed(f"scene is ambiguous: pixel ({x}, {y}) lies on an edge of instance {custom}")
        hit = (u > 0) & (v > 0) & (w > 0) & (t >= 0.0) & (t <= 100.0) & (t < best_t)
        best_t[hit] = t[hit]
        image[hit] = np.array([custom, p + 1, 0, 100 + g], dtype=np.uint8)
        image[hit, 2] = np.floor(t[hit] + 0.5).astype(np.uint8)
    return image


def describe_image(image: np.ndarray) -> str:
    hits = {int(c): int((image[..., 0] == c).sum()) for c in np.unique(image[..., 0]) if c}
    return f"{int((image[..., 3] == 0).sum())} misses, hits per instance {hits}"


# ---- Vulkan plumbing ---------------------------------------------------------------------------
def spirv(name: str) -> bytes:
    """build/examples/shaders/<name>.spv, made by examples/Makefile when missing or stale."""
    out = vkapp.REPO_DIR / "build" / "examples" / "shaders" / f"{name}.spv"
    src = vkapp.SHADER_DIR / name
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["make", "-s", "-C", str(vkapp.EXAMPLES_DIR), str(out)], check=True)
    return out.read_bytes()


def device_features(ray_tracing_pipeline: bool, ray_query: bool) -> list[Any]:
    """The VkDeviceCreateInfo pNext chain (first element heads it); keep the list alive."""
    chain: list[Any] = []
    if ray_query:
        chain.append(vk.VkPhysicalDeviceRayQueryFeaturesKHR(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_RAY_QUERY_FEATURES_KHR, rayQuery=vk.VK_TRUE))
    if ray_tracing_pipeline:
        chain.append(vk.VkPhysicalDeviceRayTracingPipelineFeaturesKHR(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_RAY_TRACING_PIPELINE_FEATURES_KHR,
            pNext=chain[-1] if chain else None, rayTracingPipeline=vk.VK_TRUE,
            rayTracingPipelineTraceRaysIndirect=vk.VK_TRUE))
    chain.append(vk.VkPhysicalDeviceAccelerationStructureFeaturesKHR(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ACCELERATION_STRUCTURE_FEATURES_KHR,
        pNext=chain[-1] if chain else None, accelerationStructure=vk.VK_TRUE))
    chain.append(vk.VkPhysicalDeviceVulkan12Features(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, pNext=chain[-1],
        bufferDeviceAddress=vk.VK_TRUE))
    return chain[::-1]


def require_extensions(ctx: vkapp.Context, wanted: tuple[str, ...]) -> None:
    missing = [e for e in wanted if e not in ctx.device_extensions]
    if missing:
        raise vkapp.CheckFailed(f"device {ctx.device_name} lacks {', '.join(missing)} (a Vulkan 1.4 backend "
                                "such as Mesa 25 lavapipe has them)")


class Raw:
    """Device-level commands called through cffi directly (the `vulkan` package's wrappers of
    vkGetBufferDeviceAddress and vkGetAccelerationStructureDeviceAddressKHR drop the result)."""

    def __init__(self, ctx: vkapp.Context) -> None:
        self.ctx = ctx
        self._fns: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        fn = self._fns.get(name)
        if fn is None:
            ptr = vk.lib.vkGetDeviceProcAddr(self.ctx.device, name.encode())
            if ptr == vk.ffi.NULL:
                raise vkapp.CheckFailed(f"{name} not available")
            fn = self._fns[name] = vk.ffi.cast(f"PFN_{name}", ptr)
        return fn


@dataclass
class AddressBuffer:
    buffer: vkapp.Buffer
    address: int

    @property
    def handle(self) -> Any:
        return self.buffer.handle


def address_buffer(ctx: vkapp.Context, raw: Raw, size: int, usage: int, data: bytes | None = None) -> AddressBuffer:
    """A host-visible, coherent, mapped buffer with a device address (VkMemoryAllocateFlagsInfo)."""
    info = vk.VkBufferCreateInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size,
                                 usage=usage | DEVICE_ADDRESS_USAGE, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
    handle = vk.vkCreateBuffer(ctx.device, info, None)
    reqs = vk.vkGetBufferMemoryRequirements(ctx.device, handle)
    flags = vk.VkMemoryAllocateFlagsInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                         flags=0x2)   # VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT
    alloc = vk.VkMemoryAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, pNext=flags, allocationSize=reqs.size,
        memoryTypeIndex=ctx.memory_type(reqs.memoryTypeBits, vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
                                        | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
    memory = ctx.own(vk.vkFreeMemory, vk.vkAllocateMemory(ctx.device, alloc, None))
    ctx.own(vk.vkDestroyBuffer, handle)
    vk.vkBindBufferMemory(ctx.device, handle, memory, 0)
    buf = vkapp.Buffer(handle, memory, size, vk.vkMapMemory(ctx.device, memory, 0, size, 0))
    if data is not None:
        buf.mapped[0:len(data)] = data
    addr_info = vk.ffi.new("VkBufferDeviceAddressInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                                           "buffer": handle})
    return AddressBuffer(buf, int(raw.vkGetBufferDeviceAddress(ctx.device, addr_info)))


@dataclass
class Accel:
    handle: Any
    storage: AddressBuffer
    size: int                  # accelerationStructureSize it was created with
    address: int
    update_scratch: int = 0


class Builder:
    """Acceleration structures: create, and record builds / updates with their inputs kept alive."""

    def __init__(self, ctx: vkapp.Context, raw: Raw) -> None:
        self.ctx, self.raw = ctx, raw
        self.keep: list[Any] = []          # cffi objects and buffers a recorded command still reads

    def create(self, size: int, kind: int) -> Accel:
        storage = address_buffer(self.ctx, self.raw, size, AS_STORAGE_USAGE)
        info = vk.ffi.new("VkAccelerationStructureCreateInfoKHR *", {
            "sType": vk.VK_STRUCTURE_TYPE_ACCELERATION_STRUCTURE_CREATE_INFO_KHR, "buffer": storage.handle,
            "offset": 0, "size": size, "type": kind})
        out = vk.ffi.new("VkAccelerationStructureKHR *")
        check(self.raw.vkCreateAccelerationStructureKHR(self.ctx.device, info, vk.ffi.NULL, out),
              "vkCreateAccelerationStructureKHR")
        handle = out[0]
        destroy = self.raw.vkDestroyAccelerationStructureKHR
        self.ctx.own(lambda device, h, alloc: destroy(device, h, vk.ffi.NULL), handle)
        addr = vk.ffi.new("VkAccelerationStructureDeviceAddressInfoKHR *", {
            "sType": vk.VK_STRUCTURE_TYPE_ACCELERATION_STRUCTURE_DEVICE_ADDRESS_INFO_KHR,
            "accelerationStructure": handle})
        return Accel(handle, storage, size, int(self.raw.vkGetAccelerationStructureDeviceAddressKHR(
            self.ctx.device, addr)))

    def _triangles(self, tris_list: list[np.ndarray]) -> tuple[Any, list[int]]:
        geoms = vk.ffi.new("VkAccelerationStructureGeometryKHR[]", len(tris_list))
        for g, tris in enumerate(tris_list):
            vb = address_buffer(self.ctx, self.raw, tris.nbytes, AS_BUFFER_USAGE, tris.astype(np.float32).tobytes())
            self.keep.append(vb)
            geoms[g].sType = vk.VK_STRUCTURE_TYPE_ACCELERATION_STRUCTURE_GEOMETRY_KHR
            geoms[g].geometryType = TRIANGLES
            geoms[g].flags = OPAQUE_GEOMETRY
            t = geoms[g].geometry.triangles
            t.sType = vk.VK_STRUCTURE_TYPE_ACCELERATION_STRUCTURE_GEOMETRY_TRIANGLES_DATA_KHR
            t.vertexFormat = vk.VK_FORMAT_R32G32B32_SFLOAT
            t.vertexData.deviceAddress = vb.address
            t.vertexStride = 12
            t.maxVertex = len(tris) * 3 - 1
            t.indexType = INDEX_TYPE_NONE
        return geoms, [len(t) for t in tris_list]

    def _instances(self, refs: list[tuple[Accel, tuple[float, float, float], int]]) -> tuple[Any, list[int]]:
        data = b""
        for accel, (tx, ty, tz), custom in refs:
            transform = struct.pack("<12f", 1, 0, 0, tx, 0, 1, 0, ty, 0, 0, 1, tz)
            # instanceCustomIndex:24 | mask:8, sbt record offset:24 | flags:8, structure reference
            data += transform + struct.pack("<IIQ", custom | (0xFF << 24), 0, accel.address)
        ib = address_buffer(self.ctx, self.raw, len(data), AS_BUFFER_USAGE, data)
        self.keep.append(ib)
        geoms = vk.ffi.new("VkAccelerationStructureGeometryKHR[]", 1)
        geoms[0].sType = vk.VK_STRUCTURE_TYPE_ACCELERATION_STRUCTURE_GEOMETRY_KHR
        geoms[0].geometryType = INSTANCES_GEOMETRY
        geoms[0].flags = OPAQUE_GEOMETRY
        inst = geoms[0].geometry.instances
        inst.sType = vk.VK_STRUCTURE_TYPE_ACCELERATION_STRUCTURE_GEOMETRY_INSTANCES_DATA_KHR
        inst.arrayOfPointers = vk.VK_FALSE
        inst.data.deviceAddress = ib.address
        return geoms, [len(refs)]

    def _infos(self, n: int) -> Any:
        infos = vk.ffi.new("VkAccelerationStructureBuildGeometryInfoKHR[]", n)
        for i in range(n):
            infos[i].sType = vk.VK_STRUCTURE_TYPE_ACCELERATION_STRUCTURE_BUILD_GEOMETRY_INFO_KHR
        return infos

    @staticmethod
    def _fill(info: Any, kind: int, flags: int, geoms: Any, count: int) -> None:
        info.type, info.flags, info.mode, info.geometryCount, info.pGeometries = kind, flags, MODE_BUILD, count, geoms

    def _sizes(self, info: Any, counts: list[int]) -> Any:
        sizes = vk.ffi.new("VkAccelerationStructureBuildSizesInfoKHR *", {
            "sType": vk.VK_STRUCTURE_TYPE_ACCELERATION_STRUCTURE_BUILD_SIZES_INFO_KHR})
        self.raw.vkGetAccelerationStructureBuildSizesKHR(self.ctx.device, DEVICE_BUILD, info,
                                                         vk.ffi.new("uint32_t[]", counts), sizes)
        return sizes

    def _record(self, cmd: Any, infos: Any, counts: list[list[int]], scratch_sizes: list[int]) -> None:
        """One vkCmdBuildAccelerationStructuresKHR for every info of `infos`."""
        pranges = vk.ffi.new("VkAccelerationStructureBuildRangeInfoKHR *[]", len(counts))
        for i, (per_geometry, scratch_size) in enumerate(zip(counts, scratch_sizes)):
            scratch = address_buffer(self.ctx, self.raw, scratch_size + 256, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)
            infos[i].scratchData.deviceAddress = (scratch.address + 255) & ~255
            ranges = vk.ffi.new("VkAccelerationStructureBuildRangeInfoKHR[]", [
                {"primitiveCount": n, "primitiveOffset": 0, "firstVertex": 0, "transformOffset": 0}
                for n in per_geometry])
            pranges[i] = ranges
            self.keep += [scratch, ranges]
        self.keep += [infos, pranges]
        self.raw.vkCmdBuildAccelerationStructuresKHR(cmd, len(counts), infos, pranges)

    def build_bottoms(self, cmd: Any, structures: list[list[np.ndarray]], flags: int) -> list[Accel]:
        """Record one command building a bottom-level structure per entry (a list of triangle
        lists, one geometry each)."""
        infos = self._infos(len(structures))
        counts, scratch, out = [], [], []
        for i, tris_list in enumerate(structures):
            geoms, per_geometry = self._triangles(tris_list)
            self.keep.append(geoms)
            self._fill(infos[i], BOTTOM, flags, geoms, len(tris_list))
            sizes = self._sizes(infos + i, per_geometry)
            accel = self.create(sizes.accelerationStructureSize, BOTTOM)
            accel.update_scratch = sizes.updateScratchSize
            infos[i].dstAccelerationStructure = accel.handle
            counts.append(per_geometry)
            scratch.append(sizes.buildScratchSize)
            out.append(accel)
        self._record(cmd, infos, counts, scratch)
        return out

    def build_bottom(self, cmd: Any, tris_list: list[np.ndarray], flags: int) -> Accel:
        """Record the build of one bottom-level structure from triangle lists (one geometry each)."""
        return self.build_bottoms(cmd, [tris_list], flags)[0]

    def update_bottom(self, cmd: Any, accel: Accel, tris_list: list[np.ndarray], flags: int) -> None:
        """Record an in-place update (mode UPDATE) of `accel` to new vertex positions."""
        geoms, counts = self._triangles(tris_list)
        self.keep.append(geoms)
        infos = self._infos(1)
        self._fill(infos[0], BOTTOM, flags, geoms, len(tris_list))
        infos[0].mode = MODE_UPDATE
        infos[0].srcAccelerationStructure = infos[0].dstAccelerationStructure = accel.handle
        self._record(cmd, infos, [counts], [accel.update_scratch])

    def build_top(self, cmd: Any, refs: list[tuple[Accel, tuple[float, float, float], int]], flags: int) -> Accel:
        geoms, counts = self._instances(refs)
        self.keep.append(geoms)
        infos = self._infos(1)
        self._fill(infos[0], TOP, flags, geoms, 1)
        sizes = self._sizes(infos, counts)
        accel = self.create(sizes.accelerationStructureSize, TOP)
        infos[0].dstAccelerationStructure = accel.handle
        self._record(cmd, infos, [counts], [sizes.buildScratchSize])
        return accel


def check(result: int, what: str) -> None:
    if result != vk.VK_SUCCESS:
        raise vkapp.CheckFailed(f"{what} returned {result}")


def accel_barrier(cmd: Any, dst_stage: int, dst_access: int) -> None:
    """Acceleration-structure writes (builds, copies) before `dst_stage` reads."""
    vkapp.memory_barrier(cmd, AS_BUILD_STAGE, AS_WRITE, dst_stage, dst_access)


def storage_image(ctx: vkapp.Context) -> vkapp.Image:
    return ctx.image(WIDTH, HEIGHT, vk.VK_FORMAT_R8G8B8A8_UINT,
                     vk.VK_IMAGE_USAGE_STORAGE_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT, view=True)


def scene_descriptors(ctx: vkapp.Context, stage: int, tlas: Accel, images: list[vkapp.Image]) -> tuple[Any, list]:
    """Set layout (binding 0 the top level, binding 1 a storage image) and one set per image."""
    layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_ACCELERATION_STRUCTURE_KHR, stage),
                             (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE, stage)])
    pool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_ACCELERATION_STRUCTURE_KHR: len(images),
                                vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE: len(images)}, len(images))
    sets = []
    for img in images:
        dset = ctx.allocate_set(pool, layout)
        handles = vk.ffi.new("VkAccelerationStructureKHR[]", [tlas.handle])
        as_write = vk.ffi.new("VkWriteDescriptorSetAccelerationStructureKHR *", {
            "sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_ACCELERATION_STRUCTURE_KHR,
            "accelerationStructureCount": 1, "pAccelerationStructures": handles})
        image_info = vk.ffi.new("VkDescriptorImageInfo *", {"imageView": img.view,
                                                            "imageLayout": vk.VK_IMAGE_LAYOUT_GENERAL})
        writes = vk.ffi.new("VkWriteDescriptorSet[]", [
            {"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "pNext": as_write, "dstSet": dset, "dstBinding": 0,
             "descriptorCount": 1, "descriptorType": vk.VK_DESCRIPTOR_TYPE_ACCELERATION_STRUCTURE_KHR},
            {"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstSet": dset, "dstBinding": 1,
             "descriptorCount": 1, "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE, "pImageInfo": image_info}])
        vk.lib.vkUpdateDescriptorSets(ctx.device, 2, writes, 0, vk.ffi.NULL)
        sets.append(dset)
    return layout, sets


def to_general(cmd: Any, img: vkapp.Image, dst_stage: int) -> None:
    vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_GENERAL,
                        vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, dst_stage, vk.VK_ACCESS_SHADER_WRITE_BIT)


def read_result(ctx: vkapp.Context, img: vkapp.Image, src_stage: int) -> np.ndarray:
    """Make the shader's writes visible to the copy, then read the image back."""
    cmd = ctx.command_buffer()
    vkapp.memory_barrier(cmd, src_stage, vk.VK_ACCESS_SHADER_WRITE_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                         vk.VK_ACCESS_TRANSFER_READ_BIT)
    ctx.submit([cmd])
    return ctx.read_image(img, vk.VK_IMAGE_LAYOUT_GENERAL)

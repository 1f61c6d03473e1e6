"""Acceleration structures (VK_KHR_acceleration_structure): what the layer and the driver know of
them, and the sizes of the commands that build and copy them. Shared so that both describe each
build and copy identically (the layer's WORKLOAD metadata, the driver's render stage).

Resources remembered (on the owner's `res`, written by the hooks below, read by recording hooks):
- `res.accels`: acceleration structure -> (size in bytes it was created with, type);
- `res.buffer_addresses`: buffer -> its device address (vkGetBufferDeviceAddress and aliases), so a
  device address can be turned back into (buffer, offset) for indirect captures.

Stage names are Arm's driver vocabulary (reference/FACTS.md: the names Arm's trace reader knows).
Vulkan has no stage name for a structure-to-structure copy (clone, compact); it is reported as
`acceleration structure copy to memory`, since it writes a structure's bytes to memory (our
choice, documented in docs/timing.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .vkconst import vk

FAST_BUILD_STAGE = "acceleration structure 'fast build' build"
FAST_TRACE_STAGE = "acceleration structure 'fast trace' build"
UPDATE_STAGE = "acceleration structure update"
TO_MEMORY_STAGE = "acceleration structure copy to memory"
FROM_MEMORY_STAGE = "acceleration structure copy from memory"
STAGES = (FAST_BUILD_STAGE, FAST_TRACE_STAGE, UPDATE_STAGE, TO_MEMORY_STAGE, FROM_MEMORY_STAGE)

# VkAccelerationStructureTypeKHR, VkBuildAccelerationStructureModeKHR, VkGeometryTypeKHR,
# VkCopyAccelerationStructureModeKHR as metadata words.
TYPES = {0: "top_level", 1: "bottom_level", 2: "generic"}
GEOMETRIES = {0: "triangles", 1: "aabbs", 2: "instances"}
COPY_MODES = {0: "clone", 1: "compact", 2: "serialize", 3: "deserialize"}
_FAST_TRACE = 0x4     # VK_BUILD_ACCELERATION_STRUCTURE_PREFER_FAST_TRACE_BIT_KHR
_FAST_BUILD = 0x8     # VK_BUILD_ACCELERATION_STRUCTURE_PREFER_FAST_BUILD_BIT_KHR
_MODE_UPDATE = 1      # VK_BUILD_ACCELERATION_STRUCTURE_MODE_UPDATE_KHR
_INSTANCES = 2        # VK_GEOMETRY_TYPE_INSTANCES_KHR


@dataclass(frozen=True)
class AccelWork:
    """One build or copy command: its render stage and sizes."""
    kind: str                    # acceleration_structure_build / acceleration_structure_copy
    stage: str                   # Arm stage name (STAGES)
    fields: dict = field(default_factory=dict)   # WORKLOAD metadata (schema names)
    primitives: int = 0          # triangles + AABBs of bottom-level builds (-1 unknown)
    instances: int = 0           # instances of top-level builds (-1 unknown)
    nbytes: int = 0              # copies: bytes moved (-1 unknown)
    estimated: bool = False      # indirect builds: counts are upper bounds (maxPrimitiveCounts)


def build_stage(flags: int, mode: int) -> str:
    """Arm's stage for one build info: an update, else a build by its preference. A build that
    states no preference is counted 'fast trace' (a driver builds for trace quality by default:
    our assumption, docs/timing.md)."""
    if mode == _MODE_UPDATE:
        return UPDATE_STAGE
    if flags & _FAST_BUILD and not flags & _FAST_TRACE:
        return FAST_BUILD_STAGE
    return FAST_TRACE_STAGE


def _geometry(info, g: int):
    return info.pGeometries[g] if info.pGeometries else info.ppGeometries[g][0]


def _describe_build(command: str, infos: list, counts: list[list[int]], estimated: bool) -> AccelWork:
    """`infos[i]` a VkAccelerationStructureBuildGeometryInfoKHR, `counts[i][g]` its geometry g's
    primitive count (primitiveCount, or maxPrimitiveCounts for indirect builds)."""
    structures, stages = [], []
    primitives = instances = 0
    for info, per_geometry in zip(infos, counts):
        geometries = []
        for g, n in enumerate(per_geometry):
            gtype = _geometry(info, g).geometryType
            geometries.append({"type": GEOMETRIES.get(gtype, f"geometry {gtype}"), "primitives": n})
            if gtype == _INSTANCES:
                instances += n
            else:
                primitives += n
        stage = build_stage(info.flags, info.mode)
        stages.append(stage)
        structures.append({"type": TYPES.get(info.type, f"type {info.type}"),
                           "mode": "update" if info.mode == _MODE_UPDATE else "build",
                           "stage": stage, "geometries": geometries})
    # One workload per command: its stage is the first build's that is not an update, else update.
    stage = next((s for s in stages if s != UPDATE_STAGE), UPDATE_STAGE)
    fields = {"subtype": stage, "structures": structures, "primitives": primitives, "instances": instances,
              "indirect": estimated}
    return AccelWork("acceleration_structure_build", stage, fields, primitives, instances, 0, estimated)


def describe_build(res, infoCount: int, pInfos, ppBuildRangeInfos) -> AccelWork:
    """vkCmdBuildAccelerationStructuresKHR: sizes from the build range infos (spec 37.3)."""
    infos = [pInfos[i] for i in range(infoCount)]
    counts = [[ppBuildRangeInfos[i][g].primitiveCount for g in range(info.geometryCount)]
              for i, info in enumerate(infos)]
    return _describe_build("vkCmdBuildAccelerationStructuresKHR", infos, counts, False)


def describe_build_indirect(res, infoCount: int, pInfos, pIndirectDeviceAddresses, pIndirectStrides,
                            ppMaxPrimitiveCounts) -> AccelWork:
    """vkCmdBuildAccelerationStructuresIndirectKHR: the real counts are in device memory; the
    maximum counts the application declared stand in for them (marked estimated)."""
    infos = [pInfos[i] for i in range(infoCount)]
    counts = [[ppMaxPrimitiveCounts[i][g] for g in range(info.geometryCount)] for i, info in enumerate(infos)]
    return _describe_build("vkCmdBuildAccelerationStructuresIndirectKHR", infos, counts, True)


def _size(res, accel) -> int:
    entry = res.accels.get(int(accel))
    return entry[0] if entry else -1


def describe_copy(res, pInfo) -> AccelWork:
    """vkCmdCopyAccelerationStructureKHR (clone / compact): bytes = the source's created size (the
    compacted size is known only to a query)."""
    nbytes = _size(res, pInfo.src)
    mode = COPY_MODES.get(pInfo.mode, str(pInfo.mode))
    return AccelWork("acceleration_structure_copy", TO_MEMORY_STAGE,
                     {"subtype": TO_MEMORY_STAGE, "copy_mode": mode, "bytes": nbytes}, nbytes=nbytes)


def describe_copy_to_memory(res, pInfo) -> AccelWork:
    """vkCmdCopyAccelerationStructureToMemoryKHR (serialize): bytes = the source's created size."""
    nbytes = _size(res, pInfo.src)
    return AccelWork("acceleration_structure_copy", TO_MEMORY_STAGE,
                     {"subtype": TO_MEMORY_STAGE, "copy_mode": COPY_MODES.get(pInfo.mode, str(pInfo.mode)),
                      "bytes": nbytes}, nbytes=nbytes)


def describe_copy_from_memory(res, pInfo) -> AccelWork:
    """vkCmdCopyMemoryToAccelerationStructureKHR (deserialize): bytes = the destination's size."""
    nbytes = _size(res, pInfo.dst)
    return AccelWork("acceleration_structure_copy", FROM_MEMORY_STAGE,
                     {"subtype": FROM_MEMORY_STAGE, "copy_mode": COPY_MODES.get(pInfo.mode, str(pInfo.mode)),
                      "bytes": nbytes}, nbytes=nbytes)


# command name -> describe(res, *command args after the command buffer)
DESCRIBE = {
    "vkCmdBuildAccelerationStructuresKHR": describe_build,
    "vkCmdBuildAccelerationStructuresIndirectKHR": describe_build_indirect,
    "vkCmdCopyAccelerationStructureKHR": describe_copy,
    "vkCmdCopyAccelerationStructureToMemoryKHR": describe_copy_to_memory,
    "vkCmdCopyMemoryToAccelerationStructureKHR": describe_copy_from_memory,
}


def buffer_at(res, address: int) -> tuple[int, int] | None:
    """(buffer, offset) of the tracked buffer whose device-address range holds `address`."""
    for buffer, base in res.buffer_addresses.items():
        size = res.buffers.get(buffer)
        if size is not None and base <= address < base + size:
            return buffer, address - base
    return None


class AccelerationStructures:
    """Create/destroy and device-address hooks. The owner's `res` needs `accels`, `buffer_addresses`
    and `buffers`."""

    def after_vkCreateAccelerationStructureKHR(self, dev, result, device, ci, pAllocator, pAccel):
        if result == vk.VK_SUCCESS:
            dev.res.accels[int(pAccel[0])] = (ci.size, ci.type)

    def before_vkDestroyAccelerationStructureKHR(self, dev, device, accel, pAllocator):
        dev.res.accels.pop(int(accel), None)

    def after_vkGetBufferDeviceAddress(self, dev, result, device, pInfo):
        if result:
            dev.res.buffer_addresses[int(pInfo.buffer)] = int(result)


def register(hooks) -> None:
    hooks.bind(AccelerationStructures())

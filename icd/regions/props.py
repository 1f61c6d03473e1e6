"""VK_ARM_performance_counters_by_region: what the emulated Mali reports (counters, properties, layout).

Role: the extension's constants and queries: the counters offered (`COUNTERS`: stable IDs, names;
docs/regions.md says how each is computed), the feature and properties structs icd/identity.py fills,
the feature request icd/device.py reads, the enumeration of counters (the hooks.py hook calls
`enumerate_counters`), and the layout arithmetic of one array (vk.xml 1.4.366, extension 606).

State: none; constants and pure functions, safe on any thread.
"""
from __future__ import annotations

from dataclasses import dataclass

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

REGION_SIZE = (32, 32)          # 2x2 of the emulated 16x16 tiles
ROW_STRIDE_ALIGNMENT = 64       # bytes
REGION_ALIGNMENT = 16           # bytes
IDENTITY_TRANSFORM_ORDER = True


@dataclass(frozen=True)
class Counter:
    id: int
    name: str
    raw: str | None          # the region-counter pass's counter, None when computed by the driver
    description: str


# Stable IDs (never reuse one); shader-core counters only, as the proposal's security model requires.
COUNTERS = (
    Counter(0x1001, "Fragment threads", "threads", "fragment shader invocations started (helpers excluded)"),
    Counter(0x1002, "Covered samples", "samples", "popcount(SampleMaskIn) summed over fragment invocations"),
    Counter(0x1003, "Killed fragments", "killed", "invocations that executed discard / terminate / demote"),
    Counter(0x1004, "FMA pipe thread-operations", "fma", "sum over executed blocks of the compiler model's FMA ops"),
    Counter(0x1005, "CVT pipe thread-operations", "cvt", "sum over executed blocks of the compiler model's CVT ops"),
    Counter(0x1006, "SFU pipe thread-operations", "sfu", "sum over executed blocks of the compiler model's SFU ops"),
    Counter(0x1007, "LS pipe thread-operations", "ls", "sum over executed blocks of the compiler model's LS ops"),
    Counter(0x1008, "Texture pipe thread-operations", "tex", "sum over executed blocks of the texture ops"),
    Counter(0x1009, "Varying pipe thread-operations", "var", "sum over executed blocks of the varying ops"),
    Counter(0x100A, "Tile write-back bytes", None,
            "pixels of the region inside the render area x bytes per texel (x samples) of stored attachments"),
)
BY_ID = {c.id: c for c in COUNTERS}
MAX_COUNTERS = len(COUNTERS)


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def row_bytes(width: int, counters: int) -> int:
    """vk.xml: an array is align(ceil(w/rw) * align(c*4, regionAlignment), rowStrideAlignment) * ceil(h/rh)
    bytes; this is its row stride."""
    return align(-(-width // REGION_SIZE[0]) * align(counters * 4, REGION_ALIGNMENT), ROW_STRIDE_ALIGNMENT)


def wants_regions(ffi, pnext) -> bool:
    f = structs.find(ffi, pnext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_COUNTERS_BY_REGION_FEATURES_ARM,
                     "VkPhysicalDevicePerformanceCountersByRegionFeaturesARM *")
    return f is not None and bool(f.performanceCountersByRegion)


def apply_properties(ffi, p) -> None:
    s = ffi.cast("VkPhysicalDevicePerformanceCountersByRegionPropertiesARM *", p)
    s.maxPerRegionPerformanceCounters = MAX_COUNTERS
    s.performanceCounterRegionSize.width, s.performanceCounterRegionSize.height = REGION_SIZE
    s.rowStrideAlignment = ROW_STRIDE_ALIGNMENT
    s.regionAlignment = REGION_ALIGNMENT
    s.identityTransformOrder = vk.VK_TRUE if IDENTITY_TRANSFORM_ORDER else vk.VK_FALSE


def apply_features(ffi, p) -> None:
    ffi.cast("VkPhysicalDevicePerformanceCountersByRegionFeaturesARM *", p).performanceCountersByRegion = vk.VK_TRUE


def enumerate_counters(ffi, pCounterCount, pCounters, pCounterDescriptions) -> int:
    """vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM's two-call idiom (the same
    counters on every queue family)."""
    if pCounters == ffi.NULL and pCounterDescriptions == ffi.NULL:
        pCounterCount[0] = len(COUNTERS)
        return vk.VK_SUCCESS
    n = min(pCounterCount[0], len(COUNTERS))
    for i in range(n):
        if pCounters != ffi.NULL:
            pCounters[i].counterID = COUNTERS[i].id
        if pCounterDescriptions != ffi.NULL:
            d = pCounterDescriptions[i]
            d.flags = 0
            data = COUNTERS[i].name.encode()[: ffi.sizeof(d.name) - 1] + b"\0"
            ffi.memmove(d.name, data, len(data))
    pCounterCount[0] = n
    return vk.VK_INCOMPLETE if n < len(COUNTERS) else vk.VK_SUCCESS

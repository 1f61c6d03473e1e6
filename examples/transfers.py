"""Transfer sample: buffer and image copy/fill/clear/blit/resolve commands.

Run (plain lavapipe; add VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation to validate):
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python examples/transfers.py

Command buffer 1 (buffers), on a 4096-byte destination:
  vkCmdFillBuffer (offset 64, VK_WHOLE_SIZE), vkCmdCopyBuffer (two regions
  from a random source), vkCmdFillBuffer (offset 3072, 256 bytes),
  vkCmdUpdateBuffer (offset 3584, 128 bytes).
Command buffer 2 (R8G8B8A8_UNORM images), submitted with 1 in one batch:
  vkCmdClearColorImage on A, B, C and a 4-sample image M;
  vkCmdCopyBufferToImage into A (two regions, one with bufferRowLength);
  vkCmdCopyImage A -> B (16x16 region);
  vkCmdBlitImage A -> C (16x16 -> 32x32, x mirrored, NEAREST);
  vkCmdResolveImage M -> R;
  vkCmdCopyImageToBuffer of A, B, C, R for the checks.
With --copy2 the copies, blit, resolve and buffer<->image copies (read-backs included) go through
their Vulkan 1.3 variants instead (vkCmdCopyBuffer2, vkCmdCopyImage2, vkCmdBlitImage2,
vkCmdResolveImage2, vkCmdCopyBufferToImage2, vkCmdCopyImageToBuffer2), with the same regions.
What it checks: every byte of the destination buffer and of the four read-back
images against numpy models of each command (fixed random seed).
Exit 0 and one 'transfers: OK ...' line on success.
"""

from __future__ import annotations

import sys

import numpy as np
import vulkan as vk

import vkapp

FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM
BUF_SIZE = 4096
N = 32  # images A, B, M, R are N x N; C is 2N x 2N
COLOR_A, COLOR_B, COLOR_C, COLOR_M = (10, 20, 30, 40), (200, 150, 100, 50), (1, 2, 3, 4), (64, 128, 192, 255)
FILL_WHOLE, FILL_PART = 0x11223344, 0xDEADBEEF
DST = vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL
SRC = vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL
T = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
TW, TR = vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT
COPY2 = "--copy2" in sys.argv[1:]   # the *2 commands (Vulkan 1.3) instead of the originals


# The copies, by either command: the regions are given as the original commands' structs.
def copy_buffer(cmd: object, src: object, dst: object, regions: list) -> None:
    if COPY2:
        regions2 = [vk.VkBufferCopy2(srcOffset=r.srcOffset, dstOffset=r.dstOffset, size=r.size) for r in regions]
        vk.vkCmdCopyBuffer2(cmd, vk.VkCopyBufferInfo2(srcBuffer=src, dstBuffer=dst, regionCount=len(regions2),
                                                      pRegions=regions2))
    else:
        vk.vkCmdCopyBuffer(cmd, src, dst, len(regions), regions)


def _buffer_image2(r: object) -> object:
    return vk.VkBufferImageCopy2(bufferOffset=r.bufferOffset, bufferRowLength=r.bufferRowLength,
                                 bufferImageHeight=r.bufferImageHeight, imageSubresource=r.imageSubresource,
                                 imageOffset=r.imageOffset, imageExtent=r.imageExtent)


def copy_buffer_to_image(cmd: object, src: object, image: object, layout: int, regions: list) -> None:
    if COPY2:
        regions2 = [_buffer_image2(r) for r in regions]
        vk.vkCmdCopyBufferToImage2(cmd, vk.VkCopyBufferToImageInfo2(
            srcBuffer=src, dstImage=image, dstImageLayout=layout, regionCount=len(regions2), pRegions=regions2))
    else:
        vk.vkCmdCopyBufferToImage(cmd, src, image, layout, len(regions), regions)


def copy_image_to_buffer(cmd: object, img: vkapp.Image, layout: int, buf: vkapp.Buffer, offset: int) -> None:
    if not COPY2:
        vkapp.copy_image_to_buffer(cmd, img, layout, buf, offset)
        return
    region = vk.VkBufferImageCopy2(bufferOffset=offset, bufferRowLength=0, bufferImageHeight=0,
                                   imageSubresource=vkapp.color_layers(), imageOffset=offset3(0, 0),
                                   imageExtent=extent3(img.width, img.height))
    vk.vkCmdCopyImageToBuffer2(cmd, vk.VkCopyImageToBufferInfo2(
        srcImage=img.handle, srcImageLayout=layout, dstBuffer=buf.handle, regionCount=1, pRegions=[region]))


def copy_image(cmd: object, src: object, src_layout: int, dst: object, dst_layout: int, r: object) -> None:
    if COPY2:
        region = vk.VkImageCopy2(srcSubresource=r.srcSubresource, srcOffset=r.srcOffset,
                                 dstSubresource=r.dstSubresource, dstOffset=r.dstOffset, extent=r.extent)
        vk.vkCmdCopyImage2(cmd, vk.VkCopyImageInfo2(srcImage=src, srcImageLayout=src_layout, dstImage=dst,
                                                    dstImageLayout=dst_layout, regionCount=1, pRegions=[region]))
    else:
        vk.vkCmdCopyImage(cmd, src, src_layout, dst, dst_layout, 1, [r])


def blit_image(cmd: object, src: object, src_layout: int, dst: object, dst_layout: int, r: object,
               flt: int) -> None:
    if COPY2:
        region = vk.VkImageBlit2(srcSubresource=r.srcSubresource, srcOffsets=r.srcOffsets,
                                 dstSubresource=r.dstSubresource, dstOffsets=r.dstOffsets)
        vk.vkCmdBlitImage2(cmd, vk.VkBlitImageInfo2(srcImage=src, srcImageLayout=src_layout, dstImage=dst,
                                                    dstImageLayout=dst_layout, regionCount=1, pRegions=[region],
                                                    filter=flt))
    else:
        vk.vkCmdBlitImage(cmd, src, src_layout, dst, dst_layout, 1, [r], flt)


def resolve_image(cmd: object, src: object, src_layout: int, dst: object, dst_layout: int, r: object) -> None:
    if COPY2:
        region = vk.VkImageResolve2(srcSubresource=r.srcSubresource, srcOffset=r.srcOffset,
                                    dstSubresource=r.dstSubresource, dstOffset=r.dstOffset, extent=r.extent)
        vk.vkCmdResolveImage2(cmd, vk.VkResolveImageInfo2(srcImage=src, srcImageLayout=src_layout, dstImage=dst,
                                                          dstImageLayout=dst_layout, regionCount=1,
                                                          pRegions=[region]))
    else:
        vk.vkCmdResolveImage(cmd, src, src_layout, dst, dst_layout, 1, [r])


def clear_color(cmd: object, img: vkapp.Image, color: tuple[int, int, int, int]) -> None:
    value = vk.VkClearColorValue(float32=[c / 255.0 for c in color])
    ranges = [vkapp.color_range()]
    vk.vkCmdClearColorImage(cmd, img.handle, DST, value, 1, ranges)


def offset3(x: int, y: int, z: int = 0) -> object:
    return vk.VkOffset3D(x=x, y=y, z=z)


def extent3(w: int, h: int) -> object:
    return vk.VkExtent3D(width=w, height=h, depth=1)


def record_buffers(cmd: object, src: vkapp.Buffer, dst: vkapp.Buffer, update: np.ndarray) -> None:
    vk.vkCmdFillBuffer(cmd, dst.handle, 64, vkapp.WHOLE_SIZE, FILL_WHOLE)
    vkapp.transfer_barrier(cmd)
    regions = [vk.VkBufferCopy(srcOffset=0, dstOffset=256, size=512),
               vk.VkBufferCopy(srcOffset=1024, dstOffset=2048, size=100)]
    copy_buffer(cmd, src.handle, dst.handle, regions)
    vk.vkCmdFillBuffer(cmd, dst.handle, 3072, 256, FILL_PART)
    data = vk.ffi.from_buffer(update)
    vk.vkCmdUpdateBuffer(cmd, dst.handle, 3584, update.nbytes, data)
    vkapp.host_barrier(cmd)


def expected_buffer(src: np.ndarray, update: np.ndarray) -> np.ndarray:
    want = np.zeros(BUF_SIZE, dtype=np.uint8)
    want[64:] = np.frombuffer(np.full((BUF_SIZE - 64) // 4, FILL_WHOLE, dtype="<u4").tobytes(), dtype=np.uint8)
    want[256:768] = src[0:512]
    want[2048:2148] = src[1024:1124]
    want[3072:3328] = np.frombuffer(np.full(64, FILL_PART, dtype="<u4").tobytes(), dtype=np.uint8)
    want[3584:3712] = update
    return want


def record_images(cmd: object, src: vkapp.Buffer, a: vkapp.Image, b: vkapp.Image, c: vkapp.Image,
                  m: vkapp.Image, r: vkapp.Image, out: vkapp.Buffer) -> list[int]:
    """Record the image commands; returns the byte offsets of A, B, C, R in `out`."""
    for img in (a, b, c, m, r):
        vkapp.image_barrier(cmd, img, vk.VK_IMAGE_LAYOUT_UNDEFINED, DST, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0, T, TW)
    for img, color in ((a, COLOR_A), (b, COLOR_B), (c, COLOR_C), (m, COLOR_M)):
        clear_color(cmd, img, color)
    vkapp.transfer_barrier(cmd)  # clears before the copies that overwrite parts of A, B, C

    layers = vkapp.color_layers()
    uploads = [
        vk.VkBufferImageCopy(bufferOffset=0, bufferRowLength=0, bufferImageHeight=0, imageSubresource=layers,
                             imageOffset=offset3(4, 6), imageExtent=extent3(16, 8)),
        vk.VkBufferImageCopy(bufferOffset=1024, bufferRowLength=20, bufferImageHeight=8, imageSubresource=layers,
                             imageOffset=offset3(20, 20), imageExtent=extent3(8, 8)),
    ]
    copy_buffer_to_image(cmd, src.handle, a.handle, DST, uploads)
    vkapp.image_barrier(cmd, a, DST, SRC, T, TW, T, TR)
    vkapp.image_barrier(cmd, m, DST, SRC, T, TW, T, TR)

    copy = vk.VkImageCopy(srcSubresource=layers, srcOffset=offset3(0, 0), dstSubresource=layers,
                          dstOffset=offset3(16, 16), extent=extent3(16, 16))
    copy_image(cmd, a.handle, SRC, b.handle, DST, copy)
    blit = vk.VkImageBlit(srcSubresource=layers, srcOffsets=[offset3(20, 4), offset3(4, 20, 1)],
                          dstSubresource=layers, dstOffsets=[offset3(0, 0), offset3(2 * 16, 2 * 16, 1)])
    blit_image(cmd, a.handle, SRC, c.handle, DST, blit, vk.VK_FILTER_NEAREST)
    resolve = vk.VkImageResolve(srcSubresource=layers, srcOffset=offset3(0, 0), dstSubresource=layers,
                                dstOffset=offset3(0, 0), extent=extent3(N, N))
    resolve_image(cmd, m.handle, SRC, r.handle, DST, resolve)
    for img in (b, c, r):
        vkapp.image_barrier(cmd, img, DST, SRC, T, TW, T, TR)

    offsets, pos = [], 0
    for img in (a, b, c, r):
        offsets.append(pos)
        copy_image_to_buffer(cmd, img, SRC, out, pos)
        pos += img.width * img.height * 4
    vkapp.host_barrier(cmd)
    return offsets


def expected_images(src: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    a = np.empty((N, N, 4), dtype=np.uint8)
    a[:] = COLOR_A
    a[6:14, 4:20] = src[0:16 * 8 * 4].reshape(8, 16, 4)
    a[20:28, 20:28] = src[1024:1024 + 20 * 8 * 4].reshape(8, 20, 4)[:, :8]
    b = np.empty_like(a)
    b[:] = COLOR_B
    b[16:32, 16:32] = a[0:16, 0:16]
    c = np.empty((2 * N, 2 * N, 4), dtype=np.uint8)
    c[:] = COLOR_C
    # NEAREST sampling at destination texel centres: row i <- 4 + i//2, column j <- 19 - j//2 (mirrored).
    rows = 4 + np.arange(32) // 2
    cols = 19 - np.arange(32) // 2
    c[0:32, 0:32] = a[rows][:, cols]
    r = np.empty_like(a)
    r[:] = COLOR_M
    return a, b, c, r


def body(ctx: vkapp.Context) -> str:
    rng = np.random.default_rng(7)
    src_bytes = rng.integers(0, 256, size=BUF_SIZE, dtype=np.uint8)
    update = rng.integers(0, 256, size=128, dtype=np.uint8)
    usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
    src = ctx.buffer(BUF_SIZE, usage, src_bytes)
    dst = ctx.buffer(BUF_SIZE, usage, np.zeros(BUF_SIZE, dtype=np.uint8))

    props = vk.vkGetPhysicalDeviceImageFormatProperties(
        ctx.physical_device, FORMAT, vk.VK_IMAGE_TYPE_2D, vk.VK_IMAGE_TILING_OPTIMAL,
        vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT, 0)
    if not props.sampleCounts & vk.VK_SAMPLE_COUNT_4_BIT:
        raise vkapp.CheckFailed("device lacks 4x MSAA for R8G8B8A8_UNORM; needed for vkCmdResolveImage")
    img_usage = vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT
    a = ctx.image(N, N, FORMAT, img_usage)
    b = ctx.image(N, N, FORMAT, img_usage)
    c = ctx.image(2 * N, 2 * N, FORMAT, img_usage)
    m = ctx.image(N, N, FORMAT, img_usage | vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT, samples=vk.VK_SAMPLE_COUNT_4_BIT)
    r = ctx.image(N, N, FORMAT, img_usage)
    out = ctx.buffer((3 * N * N + 4 * N * N) * 4, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)

    cmd_buffers = ctx.command_buffer()
    record_buffers(cmd_buffers, src, dst, update)
    cmd_images = ctx.command_buffer()
    offsets = record_images(cmd_images, src, a, b, c, m, r, out)
    ctx.submit([cmd_buffers, cmd_images])

    vkapp.check_equal("destination buffer", dst.array().copy(), expected_buffer(src_bytes, update))
    raw = out.array()
    want = expected_images(src_bytes)
    for name, img, off, w in zip("ABCR", (a, b, c, r), offsets, want):
        got = raw[off:off + img.width * img.height * 4].reshape(img.height, img.width, 4)
        vkapp.check_equal(f"image {name}", got, w)
    nbytes = BUF_SIZE + sum(x.size for x in want)
    variants = " (*2 commands)" if COPY2 else ""
    return (f"{nbytes} bytes checked{variants}: fill (incl. VK_WHOLE_SIZE), copy, update buffer; clear, buffer->image, "
            f"image->image, blit, resolve, image->buffer; on {ctx.device_name}")


if __name__ == "__main__":
    vkapp.run_main("transfers", body)

"""VK_ARM_tensors beyond tensors_api.py (issue #14): image aliasing, arrays of tensors indexed
dynamically, descriptor update templates and push descriptors, more invalid usage.

Run: .venv/bin/python tests/integration/apps/tensor_extras.py  (on the emulated Mali: under
`tessera run`, or with the tessera_env of the tests). Prints one JSON line (the last but one line
of stdout) that tests/integration/test_tensor_extras.py checks; every data check compares what the
GPU left in memory with a numpy reference computed here:

- aliasing: a LINEAR image and a LINEAR tensor bound to the same memory (the tensor's strides
  from vkGetImageSubresourceLayout; innermost dimension = the image's components), then an
  OPTIMAL image with VK_IMAGE_USAGE_TENSOR_ALIASING_BIT_ARM and an OPTIMAL tensor with
  VK_TENSOR_USAGE_IMAGE_ALIASING_BIT_ARM (the image moved to VK_IMAGE_LAYOUT_TENSOR_ALIASING_ARM
  with a synchronization2 barrier): image writes (vkCmdCopyBufferToImage) read through the tensor
  (a tensor copy and a shader), tensor writes (a tensor copy and a shader) read through the image
  (vkCmdCopyImageToBuffer);
- the results of refused calls (see `invalid`).
"""
from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2] / "examples")]
import tensor_shaders as shaders  # noqa: E402
import vkapp  # noqa: E402
import vktensors as vt  # noqa: E402
from tensors_api import Runner  # noqa: E402

F32, U8 = vk.VK_FORMAT_R32_SFLOAT, vk.VK_FORMAT_R8_UINT
RNG = np.random.default_rng(1414)
HOST = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
ALL_COMMANDS, MEMORY_WRITE = vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, vk.VK_ACCESS_2_MEMORY_WRITE_BIT
MEMORY_RW = vk.VK_ACCESS_2_MEMORY_READ_BIT | vk.VK_ACCESS_2_MEMORY_WRITE_BIT


class AliasedPair:
    """An image and a tensor bound to one host-visible allocation at offset 0."""

    def __init__(self, r: Runner, image_format: int, width: int, height: int, tiling: int, image_usage: int,
                 tensor_format: int, dims, strides=None, tensor_tiling: int = vt.TILING_LINEAR,
                 tensor_usage: int = vt.USAGE_ALL) -> None:
        ctx = r.ctx
        self.width, self.height = width, height
        info = vk.VkImageCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, imageType=vk.VK_IMAGE_TYPE_2D, format=image_format,
            extent=vk.VkExtent3D(width=width, height=height, depth=1), mipLevels=1, arrayLayers=1,
            samples=vk.VK_SAMPLE_COUNT_1_BIT, tiling=tiling, usage=image_usage,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED)
        self.image = vk.vkCreateImage(ctx.device, info, None)
        image_reqs = vk.vkGetImageMemoryRequirements(ctx.device, self.image)
        self.row_pitch = None
        if tiling == vk.VK_IMAGE_TILING_LINEAR:
            sub = vk.VkImageSubresource(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0, arrayLayer=0)
            self.row_pitch = vk.vkGetImageSubresourceLayout(ctx.device, self.image, sub).rowPitch
            strides = strides(self.row_pitch) if callable(strides) else strides
        # the tensor's requirements come from a tensor created with the same description
        probe = r.t.try_create(tensor_format, dims, strides, tensor_tiling, tensor_usage)
        if probe[0] != 0:
            raise RuntimeError(f"vkCreateTensorARM: {probe[0]}")
        tensor_reqs = r.t.requirements_of(probe[1])
        r.t.destroy_tensor(r.t.device, probe[1], None)
        size = max(image_reqs.size, tensor_reqs.size)
        alloc = vk.VkMemoryAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=size,
            memoryTypeIndex=ctx.memory_type(image_reqs.memoryTypeBits & tensor_reqs.memoryTypeBits, HOST))
        self.memory = vk.vkAllocateMemory(ctx.device, alloc, None)
        vk.vkBindImageMemory(ctx.device, self.image, self.memory, 0)
        mapped = vk.vkMapMemory(ctx.device, self.memory, 0, size, 0)
        mapped[0:size] = bytes(size)
        self.tensor = r.t.bind_alias(tensor_format, dims, self.memory, mapped, size, strides, tensor_tiling,
                                     tensor_usage)
        self.r = r

    def close(self) -> None:
        ctx = self.r.ctx
        self.r.t.drop(self.tensor)
        vk.vkDestroyImage(ctx.device, self.image, None)
        vk.vkUnmapMemory(ctx.device, self.memory)
        vk.vkFreeMemory(ctx.device, self.memory, None)

    def region(self):
        return vk.VkBufferImageCopy(
            bufferOffset=0, bufferRowLength=0, bufferImageHeight=0, imageSubresource=vkapp.color_layers(),
            imageOffset=vk.VkOffset3D(x=0, y=0, z=0),
            imageExtent=vk.VkExtent3D(width=self.width, height=self.height, depth=1))

    def write_image(self, data: np.ndarray, before: int, during: int, after: int) -> None:
        """vkCmdCopyBufferToImage of `data` (packed texels), the image moved from `before` to
        `during` for the copy and left in `after` (synchronization2 barriers)."""
        r = self.r
        staging = r.ctx.buffer(data.nbytes, vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, data)

        def record(cmd):
            r.t.cmd_image_barrier(cmd, self.image, before, during, ALL_COMMANDS, MEMORY_WRITE, ALL_COMMANDS,
                                  MEMORY_RW)
            vk.vkCmdCopyBufferToImage(cmd, staging.handle, self.image, during, 1, [self.region()])
            r.t.cmd_image_barrier(cmd, self.image, during, after, ALL_COMMANDS, MEMORY_WRITE, ALL_COMMANDS,
                                  MEMORY_RW)
        r.submit(record)

    def read_image(self, nbytes: int, before: int, during: int, after: int) -> np.ndarray:
        """The image's texels (packed) by vkCmdCopyImageToBuffer, the image moved from `before` to
        `during` for the copy and left in `after`."""
        r = self.r
        staging = r.ctx.buffer(nbytes, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)

        def record(cmd):
            r.t.cmd_image_barrier(cmd, self.image, before, during, ALL_COMMANDS, MEMORY_WRITE, ALL_COMMANDS,
                                  MEMORY_RW)
            vk.vkCmdCopyImageToBuffer(cmd, self.image, during, staging.handle, 1, [self.region()])
            r.t.cmd_image_barrier(cmd, self.image, during, after, ALL_COMMANDS, MEMORY_WRITE, ALL_COMMANDS,
                                  MEMORY_RW)
        r.submit(record)
        return staging.array().copy()


def values(shape, fmt: int) -> np.ndarray:
    if fmt == F32:
        return RNG.integers(-1000, 1000, size=shape).astype(np.float32) / 8
    return RNG.integers(0, 250, size=shape).astype(np.uint8)


def through(pair: AliasedPair, r: Runner, fmt: int, dims, element: str, layouts: tuple[int, int, int]) -> dict:
    """Image writes read through the tensor and tensor writes read through the image; `layouts`:
    (layout for image transfers in, for transfers out, while the tensor uses the memory)."""
    rank = len(dims)
    dtype = np.dtype(vt.DTYPES[fmt])
    transfer_in, transfer_out, shared = layouts
    out: dict[str, bool] = {}
    # image -> tensor: a tensor copy and a shader read the image's texels
    a = values(dims, fmt)
    pair.write_image(a, vk.VK_IMAGE_LAYOUT_UNDEFINED, transfer_in, shared)
    copied = r.t.tensor(fmt, dims)
    r.submit(lambda cmd: r.t.cmd_copy(cmd, pair.tensor, copied))
    out["image_to_tensor_copy"] = bool(np.array_equal(copied.array(), a))
    read = r.t.tensor(fmt, dims)
    r.dispatch(shaders.elementwise(rank, element), pair.tensor, read)
    out["image_to_tensor_shader"] = bool(np.array_equal(read.array(), a))
    # tensor -> image: a tensor copy, then a shader, write the tensor; the image is read back
    b = values(dims, fmt)
    src = r.t.tensor(fmt, dims, data=b)
    r.submit(lambda cmd: r.t.cmd_copy(cmd, src, pair.tensor))
    got = pair.read_image(b.nbytes, shared, transfer_out, shared).view(dtype).reshape(dims)
    out["tensor_copy_to_image"] = bool(np.array_equal(got, b))
    c = values(dims, fmt)
    src2 = r.t.tensor(fmt, dims, data=c)
    r.dispatch(shaders.elementwise(rank, element), src2, pair.tensor)
    got = pair.read_image(c.nbytes, shared, transfer_out, shared).view(dtype).reshape(dims)
    out["tensor_shader_to_image"] = bool(np.array_equal(got, c))
    return out


def aliasing(r: Runner) -> dict:
    general = vk.VK_IMAGE_LAYOUT_GENERAL
    transfers = vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT
    out = {}
    # LINEAR image (5x3 RGBA8: rows padded to the backend's row pitch) + LINEAR rank-3 uint8 tensor
    pair = AliasedPair(r, vk.VK_FORMAT_R8G8B8A8_UINT, 5, 3, vk.VK_IMAGE_TILING_LINEAR, transfers, U8, (3, 5, 4),
                       strides=lambda pitch: (pitch, 4, 1))
    out["linear_rgba8"] = {"row_pitch": pair.row_pitch, **through(pair, r, U8, (3, 5, 4), "uint8",
                                                                   (general, general, general))}
    pair.close()
    # LINEAR image (3x4 RG32F) + LINEAR rank-4 float tensor (1, 4, 3, 2)
    pair = AliasedPair(r, vk.VK_FORMAT_R32G32_SFLOAT, 3, 4, vk.VK_IMAGE_TILING_LINEAR, transfers, F32,
                       (1, 4, 3, 2), strides=lambda pitch: (4 * pitch, pitch, 8, 4))
    out["linear_rg32f"] = {"row_pitch": pair.row_pitch, **through(pair, r, F32, (1, 4, 3, 2), "float",
                                                                   (general, general, general))}
    pair.close()
    # OPTIMAL image with TENSOR_ALIASING usage (7x3 RGBA8 unorm) + OPTIMAL uint8 tensor with IMAGE_ALIASING
    pair = AliasedPair(r, vk.VK_FORMAT_R8G8B8A8_UNORM, 7, 3, vk.VK_IMAGE_TILING_OPTIMAL,
                       transfers | vt.IMAGE_USAGE_TENSOR_ALIASING, U8, (3, 7, 4), tensor_tiling=vt.TILING_OPTIMAL,
                       tensor_usage=vt.USAGE_ALL | vt.USAGE_IMAGE_ALIASING)
    out["optimal_rgba8"] = through(pair, r, U8, (3, 7, 4), "uint8",
                                   (vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                                    vt.IMAGE_LAYOUT_TENSOR_ALIASING))
    # the same through the legacy vkCmdPipelineBarrier, whose layouts the driver does not translate
    a = values((3, 7, 4), U8)
    staging = r.ctx.buffer(a.nbytes, vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, a)

    def record(cmd):
        dst_optimal = vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL
        vkapp.image_barrier(cmd, pair.image, vk.VK_IMAGE_LAYOUT_UNDEFINED, dst_optimal,
                            vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0)
        vk.vkCmdCopyBufferToImage(cmd, staging.handle, pair.image, dst_optimal, 1, [pair.region()])
        vkapp.image_barrier(cmd, pair.image, dst_optimal, vt.IMAGE_LAYOUT_TENSOR_ALIASING,
                            vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_MEMORY_WRITE_BIT,
                            vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_MEMORY_READ_BIT)
    r.submit(record)
    copied = r.t.tensor(U8, (3, 7, 4))
    r.submit(lambda cmd: r.t.cmd_copy(cmd, pair.tensor, copied))
    out["optimal_rgba8"]["legacy_barrier_image_to_tensor"] = bool(np.array_equal(copied.array(), a))
    pair.close()
    return out


def dynamic_indexing(r: Runner) -> dict:
    lengths, cols = (5, 8, 3), 8
    datas = [values((n,), F32) for n in lengths]
    srcs = [r.t.tensor(F32, (n,), data=a) for n, a in zip(lengths, datas)]
    dst = r.t.tensor(F32, (len(lengths), cols))
    layout = r.t.set_layout([(0, vt.DESCRIPTOR_TYPE_TENSOR, len(srcs)), (1, vt.DESCRIPTOR_TYPE_TENSOR, 1)])
    pipeline_layout = r.ctx.pipeline_layout([layout])
    pipeline = r.t.compute_pipeline(vt.assemble(shaders.DYNAMIC_INDEXING), pipeline_layout)
    pool = r.ctx.descriptor_pool({vt.DESCRIPTOR_TYPE_TENSOR: 4}, max_sets=1)
    dset = r.ctx.allocate_set(pool, layout)
    r.t.write_tensors(dset, [(0, srcs), (1, [dst])])

    def record(cmd):
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout, 0, 1, [dset], 0, None)
        vk.vkCmdDispatch(cmd, len(srcs), 1, 1)
    r.submit(record)
    want = np.full((len(lengths), cols), -2, dtype=np.float32)
    for g, a in enumerate(datas):
        want[g, :len(a)] = a
        want[g] += np.float32(len(a))
    got = dst.array()
    return {"ok": bool(np.array_equal(got, want)), "mismatches": int(np.count_nonzero(got != want))}


def templates_and_pushes(r: Runner) -> dict:
    """An update template for a descriptor set; push descriptors (a second push of one binding
    keeps the other's tensor); a push-descriptor template. Each dispatch copies its binding-0
    tensor into its binding-1 tensor (elementwise shader), compared with numpy."""
    r.t.push_commands()
    shape, out = (4, 6), {}
    shader = shaders.elementwise(2, "float")
    groups = (shaders.invocations(shape) + shaders.LOCAL - 1) // shaders.LOCAL
    # a template updating a descriptor set
    data = values(shape, F32)
    src, dst = r.t.tensor(F32, shape, data=data), r.t.tensor(F32, shape)
    template = r.t.tensor_template([0, 1], push=False, set_layout=r.layout)
    dset = r.ctx.allocate_set(r.pool, r.layout)
    views = r.t.views_data([src, dst])
    r.t.update_with_template(r.t.device, vt.handle(dset), template, ctypes.addressof(views))
    pipeline = r.t.compute_pipeline(vt.assemble(shader), r.pipeline_layout)

    def record(cmd):
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, r.pipeline_layout, 0, 1, [dset], 0, None)
        vk.vkCmdDispatch(cmd, groups, 1, 1)
    r.submit(record)
    out["set_template"] = bool(np.array_equal(dst.array(), data))
    r.t.destroy_template(r.t.device, template, None)
    # push descriptors, then a push template, in one command buffer
    push_layout = r.t.set_layout([(0, vt.DESCRIPTOR_TYPE_TENSOR, 1), (1, vt.DESCRIPTOR_TYPE_TENSOR, 1)], flags=1)
    layout = r.ctx.pipeline_layout([push_layout])
    pipeline = r.t.compute_pipeline(vt.assemble(shader), layout)
    push_template = r.t.tensor_template([1, 0], push=True, pipeline_layout=layout)
    a, b = values(shape, F32), values(shape, F32)
    src_a, src_b = r.t.tensor(F32, shape, data=a), r.t.tensor(F32, shape, data=b)
    dsts = [r.t.tensor(F32, shape) for _ in range(3)]
    pushed = r.t.views_data([dsts[2], src_b])           # template entries: binding 1, then binding 0

    def record_pushes(cmd):
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
        keep = r.t.cmd_push_tensors(cmd, layout, [(0, src_a), (1, dsts[0])])
        vk.vkCmdDispatch(cmd, groups, 1, 1)
        keep += r.t.cmd_push_tensors(cmd, layout, [(1, dsts[1])])      # binding 0 stays src_a
        vk.vkCmdDispatch(cmd, groups, 1, 1)
        r.t.push_with_template(vt.handle(cmd), push_template, vt.handle(layout), 0, ctypes.addressof(pushed))
        vk.vkCmdDispatch(cmd, groups, 1, 1)
        return keep
    r.submit(record_pushes)
    out["push"] = bool(np.array_equal(dsts[0].array(), a))
    out["push_one_binding_keeps_the_other"] = bool(np.array_equal(dsts[1].array(), a))
    out["push_template"] = bool(np.array_equal(dsts[2].array(), b))
    # the same through VK_KHR_maintenance6's vkCmdPushDescriptorSet2KHR / ...WithTemplate2KHR
    if r.t.push_descriptor_set2 is not None:
        dsts2 = [r.t.tensor(F32, shape) for _ in range(2)]
        pushed2 = r.t.views_data([dsts2[1], src_b])

        def record_pushes2(cmd):
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
            keep = r.t.cmd_push_tensors(cmd, layout, [(0, src_a), (1, dsts2[0])], info2=True)
            vk.vkCmdDispatch(cmd, groups, 1, 1)
            info = vt.PushDescriptorSetWithTemplateInfo(sType=1000545006, descriptorUpdateTemplate=push_template,
                                                        layout=vt.handle(layout), set=0,
                                                        pData=ctypes.addressof(pushed2))
            r.t.push_with_template2(vt.handle(cmd), info.ptr())
            vk.vkCmdDispatch(cmd, groups, 1, 1)
            return keep + [info]
        r.submit(record_pushes2)
        out["push2"] = bool(np.array_equal(dsts2[0].array(), a))
        out["push_template2"] = bool(np.array_equal(dsts2[1].array(), b))
    r.t.destroy_template(r.t.device, push_template, None)
    out.update(mixed_templates(r))
    return out


def mixed_templates(r: Runner) -> dict:
    """Templates mixing a tensor, a storage buffer and a uniform buffer (out = tensor * scale), for
    a descriptor set and for a push descriptor set."""
    n, scale = 40, 2.5
    data = values((n,), F32)
    src = r.t.tensor(F32, (n,), data=data)
    bindings = [(0, vt.DESCRIPTOR_TYPE_TENSOR, 1), (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1),
                (2, vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1)]
    entries = [(0, vt.DESCRIPTOR_TYPE_TENSOR, 0), (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 8),
               (2, vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 32)]
    ubo = r.ctx.buffer(16, vk.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT, np.array([scale, 0, 0, 0], np.float32))
    code = vt.assemble(shaders.MIXED_DESCRIPTORS)
    out = {}
    for push in (False, True):
        layout = r.t.set_layout(bindings, flags=1 if push else 0)
        pipeline_layout = r.ctx.pipeline_layout([layout])
        pipeline = r.t.compute_pipeline(code, pipeline_layout)
        template = r.t.update_template(entries, push, None if push else layout, pipeline_layout if push else None)
        result = r.ctx.buffer(4 * n, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)
        pdata = (ctypes.c_uint64 * 7)(src.view, vt.handle(result.handle), 0, 4 * n, vt.handle(ubo.handle), 0, 16)
        dset = None
        if not push:
            pool = r.ctx.descriptor_pool({vt.DESCRIPTOR_TYPE_TENSOR: 1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 1,
                                          vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER: 1}, max_sets=1)
            dset = r.ctx.allocate_set(pool, layout)
            r.t.update_with_template(r.t.device, vt.handle(dset), template, ctypes.addressof(pdata))

        def record(cmd):
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
            if push:
                r.t.push_with_template(vt.handle(cmd), template, vt.handle(pipeline_layout), 0, ctypes.addressof(pdata))
            else:
                vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout, 0, 1, [dset], 0,
                                           None)
            vk.vkCmdDispatch(cmd, 1, 1, 1)
        r.submit(record)
        got = result.array(np.float32)
        out["mixed_push_template" if push else "mixed_set_template"] = bool(np.array_equal(
            got, data * np.float32(scale)))
        r.t.destroy_template(r.t.device, template, None)
    return out


def external_memory(r: Runner) -> dict:
    """What a tensor can export/import (vs. the backend's answer for a storage buffer), then memory
    exported as an opaque fd by a tensor's allocation and imported for a second tensor: what was
    written through the first is read through the second."""
    opaque_fd = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT
    out: dict = {"properties": {name: r.t.external_properties(F32, (3, 7), bit) for name, bit in (
        ("opaque_fd", opaque_fd), ("dma_buf", vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_DMA_BUF_BIT_EXT),
        ("host_allocation", vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT))}}
    shape = (3, 7)
    data = values(shape, F32)
    ext = vt.ExternalMemoryTensorCreateInfo(sType=1000460017, handleTypes=opaque_fd)
    probe = r.t.try_create(F32, shape, pnext=ext.ptr())
    out["create_with_opaque_fd"] = probe[0]
    reqs = r.t.requirements_of(probe[1])
    r.t.destroy_tensor(r.t.device, probe[1], None)
    type_index = r.ctx.memory_type(reqs.memoryTypeBits, HOST)
    export = vk.VkExportMemoryAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
                                           handleTypes=opaque_fd)
    memory = vk.vkAllocateMemory(r.ctx.device, vk.VkMemoryAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, pNext=export, allocationSize=reqs.size,
        memoryTypeIndex=type_index), None)
    mapped = vk.vkMapMemory(r.ctx.device, memory, 0, reqs.size, 0)
    first = r.t.bind_alias(F32, shape, memory, mapped, reqs.size, pnext=ext.ptr())
    first.array()[...] = data
    get_fd = vk.vkGetDeviceProcAddr(r.ctx.device, "vkGetMemoryFdKHR")
    fd = get_fd(r.ctx.device, vk.VkMemoryGetFdInfoKHR(sType=vk.VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
                                                      memory=memory, handleType=opaque_fd))
    imported = vk.vkAllocateMemory(r.ctx.device, vk.VkMemoryAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=reqs.size, memoryTypeIndex=type_index,
        pNext=vk.VkImportMemoryFdInfoKHR(sType=vk.VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
                                         handleType=opaque_fd, fd=fd)), None)
    second = r.t.bind_alias(F32, shape, imported, None, reqs.size, pnext=ext.ptr())
    copied = r.t.tensor(F32, shape)
    r.submit(lambda cmd: r.t.cmd_copy(cmd, second, copied))
    out["exported_then_imported"] = bool(np.array_equal(copied.array(), data))
    r.t.drop(second)
    r.t.drop(first)
    vk.vkFreeMemory(r.ctx.device, imported, None)
    vk.vkUnmapMemory(r.ctx.device, memory)
    vk.vkFreeMemory(r.ctx.device, memory, None)
    # a handle type the backend's buffers cannot have (a Windows handle) is refused
    win32 = vt.ExternalMemoryTensorCreateInfo(sType=1000460017,
                                              handleTypes=vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32_BIT)
    out["win32_properties"] = r.t.external_properties(F32, shape, vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32_BIT)
    out["create_with_opaque_win32"] = r.t.try_create(F32, shape, pnext=win32.ptr())[0]
    return out


def fragment_stage(r: Runner) -> dict:
    """A render pass drawing one full-screen triangle into a 6x4 RGBA32F image; its fragment shader
    reads a 3x5 tensor at the pixel (-1 out of bounds) into red and writes twice that value into a
    4x6 tensor."""
    ctx = r.ctx
    width, height, fmt = 6, 4, vk.VK_FORMAT_R32G32B32A32_SFLOAT
    data = values((3, 5), F32)
    src, dst = r.t.tensor(F32, (3, 5), data=data), r.t.tensor(F32, (height, width))
    layout = r.t.set_layout([(0, vt.DESCRIPTOR_TYPE_TENSOR, 1), (1, vt.DESCRIPTOR_TYPE_TENSOR, 1)],
                            stages=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
    pipeline_layout = ctx.pipeline_layout([layout])
    pool = ctx.descriptor_pool({vt.DESCRIPTOR_TYPE_TENSOR: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, layout)
    r.t.write_tensors(dset, [(0, [src]), (1, [dst])])
    image = ctx.image(width, height, fmt, vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
                      view=True)
    render_pass, framebuffer = ctx.color_pass(image, vk.VK_IMAGE_LAYOUT_UNDEFINED,
                                              vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL)
    modules = {}
    for name, text in (("vert", shaders.FULLSCREEN_VERTEX), ("frag", shaders.TENSOR_FRAGMENT)):
        code = vt.assemble(text)
        info = vk.VkShaderModuleCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code),
                                           pCode=code)
        modules[name] = ctx.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(ctx.device, info, None))
    ctx.shader = modules.__getitem__          # graphics_pipeline asks for its modules by name
    pipeline = ctx.graphics_pipeline("vert", "frag", pipeline_layout, render_pass=render_pass, vec2_input=False)
    del ctx.shader

    def record(cmd):
        clear = vk.VkClearValue(color=vk.VkClearColorValue(float32=[9.0, 9.0, 9.0, 9.0]))
        vk.vkCmdBeginRenderPass(cmd, vk.VkRenderPassBeginInfo(
            sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO, renderPass=render_pass, framebuffer=framebuffer,
            renderArea=vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=width, height=height)),
            clearValueCount=1, pClearValues=[clear]), vk.VK_SUBPASS_CONTENTS_INLINE)
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline_layout, 0, 1, [dset], 0, None)
        vkapp.set_viewport_scissor(cmd, width, height)
        vk.vkCmdDraw(cmd, 3, 1, 0, 0)
        vk.vkCmdEndRenderPass(cmd)
    r.submit(record)
    want = np.full((height, width), -1, dtype=np.float32)
    want[:3, :5] = data
    pixels = ctx.read_image(image, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, texel_bytes=16).view(np.float32)
    red = pixels.reshape(height, width, 4)[..., 0]
    return {"read_into_color": bool(np.array_equal(red, want)),
            "written_to_tensor": bool(np.array_equal(dst.array(), want * 2)),
            "supported_stages": r.t.properties().shaderTensorSupportedStages}


def invalid(r: Runner) -> dict:
    aliasing_usage = vt.USAGE_ALL | vt.USAGE_IMAGE_ALIASING
    # a storage-buffer descriptor written to a tensor binding (the backend sees a storage buffer
    # binding there and would take it): skipped with a message; the tensor written after it works
    dset = r.ctx.allocate_set(r.pool, r.layout)
    buf = r.ctx.buffer(64, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)
    r.ctx.write_storage_buffers(dset, [(0, buf, 0, 64)])
    data = values((4, 6), F32)
    src, dst = r.t.tensor(F32, (4, 6), data=data), r.t.tensor(F32, (4, 6))
    r.t.write_tensors(dset, [(0, [src]), (1, [dst])])

    pipeline = r.t.compute_pipeline(vt.assemble(shaders.elementwise(2, "float")), r.pipeline_layout)

    def record(cmd):
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, r.pipeline_layout, 0, 1, [dset], 0, None)
        vk.vkCmdDispatch(cmd, 1, 1, 1)
    r.submit(record)
    # views of another format: only of a MUTABLE_FORMAT tensor, and only of a compatible format
    fixed = r.t.try_create(F32, (2, 3))[1]
    mutable = r.t.try_create(F32, (2, 3), flags=1)[1]
    views = {"view_u32_of_fixed_f32": r.t.try_view(fixed, vk.VK_FORMAT_R32_UINT),
             "view_u32_of_mutable_f32": r.t.try_view(mutable, vk.VK_FORMAT_R32_UINT),
             "view_u16_of_mutable_f32": r.t.try_view(mutable, vk.VK_FORMAT_R16_UINT)}
    for t in (fixed, mutable):
        r.t.destroy_tensor(r.t.device, t, None)
    return {
        **views,
        "storage_buffer_in_tensor_binding_then_tensor_ok": bool(np.array_equal(dst.array(), data)),
        "linear_with_image_aliasing": r.t.try_create(U8, (3, 5, 4), usage=aliasing_usage)[0],
        "optimal_aliasing_inner_5": r.t.try_create(U8, (3, 5, 5), tiling=vt.TILING_OPTIMAL,
                                                   usage=aliasing_usage)[0],
        "optimal_aliasing_inner_4": r.t.try_create(U8, (3, 5, 4), tiling=vt.TILING_OPTIMAL,
                                                   usage=aliasing_usage)[0],
    }


def body(ctx) -> str:
    r = Runner(ctx)
    features = r.t.format_features(U8)
    results = {"format_features_u8": list(features), "aliasing": aliasing(r), "dynamic_indexing": dynamic_indexing(r),
               "templates": templates_and_pushes(r), "external": external_memory(r),
               "fragment": fragment_stage(r), "invalid": invalid(r)}
    r.t.close()
    print(json.dumps(results), flush=True)
    return "tensor extras checked"


if __name__ == "__main__":
    FEATURES, KEEP = vt.device_features()
    vkapp.run_main("tensor_extras", body, optional_device_extensions=[vt.EXTENSION, "VK_KHR_push_descriptor",
                                                                         "VK_KHR_external_memory_fd",
                                                                         "VK_KHR_maintenance6"],
                   device_features=FEATURES)

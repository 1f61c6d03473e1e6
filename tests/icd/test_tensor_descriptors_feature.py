"""The VK_ARM_tensors descriptor features (icd/tensors/descriptors.py's TensorDescriptors, icd/tensors/push.py's
TensorPush) as objects (issue #24), without Vulkan: their methods are the commands the intercept table gives their
modules, and the descriptor translation they expose (metadata records, write translation, misplaced writes, the
shader pass's bindings, set bookkeeping, push metadata writes) called directly with a small cffi declaration of
the structs it touches and stand-ins for the driver and the device."""
from __future__ import annotations

import logging
import struct
from types import SimpleNamespace as NS

import cffi
import pytest

from tessera.icd.tensors import descriptors
from tessera.icd.tensors.descriptors import (RECORD_BYTES, DescriptorState, SetLayoutInfo, SetMeta,
                                            TensorDescriptors)
from tessera.icd.tensors.push import Chunk, TensorPush
from tessera.spirv.passes.tensors import DIMS_AT, RANK_AT, RECORD_WORDS, SCRATCH_AT, STRIDES_AT, TensorBinding
from tessera.vkapi import intercepts
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.vkconst import vk

TENSOR, STORAGE = vk.VK_DESCRIPTOR_TYPE_TENSOR_ARM, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
UNIFORM = vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER
SHADER = vk.VK_TENSOR_USAGE_SHADER_BIT_ARM

CDEF = """
typedef uint64_t VkBuffer;
typedef uint64_t VkDescriptorSet;
typedef uint64_t VkBufferView;
typedef uint64_t VkTensorViewARM;
typedef struct VkBaseOutStructure { int sType; struct VkBaseOutStructure *pNext; } VkBaseOutStructure;
typedef struct VkDescriptorImageInfo { uint64_t sampler; uint64_t imageView; int imageLayout; } VkDescriptorImageInfo;
typedef struct VkDescriptorBufferInfo { VkBuffer buffer; uint64_t offset; uint64_t range; } VkDescriptorBufferInfo;
typedef struct VkWriteDescriptorSet {
    int sType; const void *pNext; VkDescriptorSet dstSet; uint32_t dstBinding; uint32_t dstArrayElement;
    uint32_t descriptorCount; int descriptorType; const VkDescriptorImageInfo *pImageInfo;
    const VkDescriptorBufferInfo *pBufferInfo; const VkBufferView *pTexelBufferView;
} VkWriteDescriptorSet;
typedef struct VkWriteDescriptorSetTensorARM {
    int sType; const void *pNext; uint32_t tensorViewCount; const VkTensorViewARM *pTensorViews;
} VkWriteDescriptorSetTensorARM;
"""


@pytest.fixture(scope="module")
def ffi():
    f = cffi.FFI()
    f.cdef(CDEF)
    return f


def hook_set() -> HookSet:
    return HookSet(HookErrors(logging.getLogger("test_tensor_descriptors_feature")))


def driver(ffi, hooks: HookSet | None = None):
    return NS(ffi=ffi, hooks=hooks or hook_set(), objects=NS(get=lambda handle, kind=None: handle), lib=None,
              profile=None, features=[])


class Next:
    """The backend's device functions the features call: what they were called with, in order."""

    def __init__(self) -> None:
        self.calls: list = []

    def vkDestroyBuffer(self, device, buffer, pAllocator):
        self.calls.append(("destroy buffer", buffer))

    def vkFreeMemory(self, device, memory, pAllocator):
        self.calls.append(("free memory", memory))


def tensor_view(buffer: int, dims=(2, 3), element: int = 4, usage: int = SHADER):
    strides = tuple(element * s for s in (dims[1], 1))
    tensor = NS(dims=dims, strides=strides, rank=len(dims), data_bytes=element * dims[0] * dims[1], usage=usage,
                buffer=buffer)
    return NS(tensor=tensor, format=vk.VK_FORMAT_R32_SFLOAT)


class Buffer:
    """A command buffer: its device (and weak references, which the push state's finalizer takes)."""

    def __init__(self, dev) -> None:
        self.device = dev


def device(views: dict | None = None, pipeline_layouts: dict | None = None):
    tensors = NS(views=views or {}, descriptors=None, features=NS(shader_access=True))
    return NS(tensors=tensors, pipeline_layouts=pipeline_layouts or {}, next=Next(), handle=0xDE)


def feature(ffi, hooks: HookSet | None = None) -> TensorDescriptors:
    return TensorDescriptors(driver(ffi, hooks))


def writes(ffi, keep: list, *specs):
    """A VkWriteDescriptorSet array: each spec (binding, array element, type, tensor views or None)."""
    array = ffi.new("VkWriteDescriptorSet[]", len(specs))
    keep.append(array)
    for i, (binding, element, dtype, views) in enumerate(specs):
        array[i].dstSet, array[i].dstBinding, array[i].dstArrayElement = 0x5E7, binding, element
        array[i].descriptorType, array[i].descriptorCount = dtype, len(views) if views else 1
        if views is not None:
            handles = ffi.new("VkTensorViewARM[]", views)
            ext = ffi.new("VkWriteDescriptorSetTensorARM *", {
                "sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_TENSOR_ARM, "tensorViewCount": len(views),
                "pTensorViews": handles})
            keep += [handles, ext]
            array[i].pNext = ext
    return array


# Binding 0: a uniform buffer; binding 1: two tensors (records 0, 1); binding 3: one tensor (record 2);
# binding 4: the set's metadata buffer.
LAYOUT = SetLayoutInfo(meta_binding=4, slots={1: (0, 2), 3: (2, 1)})


# ---- the objects' hooks -------------------------------------------------------------------------------
def named(module: str) -> set[str]:
    return {name for name, modules in intercepts.owners(intercepts.ICD).items() if f"tessera.{module}" in modules}


def modules_of(*features) -> dict[str, set[str]]:
    hooks = hook_set()
    for f in features:
        hooks.bind(f)
    return hooks.modules()


def test_each_objects_methods_are_the_commands_its_modules_rows_name(ffi):
    f = feature(ffi)
    assert set(modules_of(f)) == named("icd.tensors.descriptors")
    assert set(modules_of(f.push)) == named("icd.tensors.push")
    assert {m for ms in modules_of(f.push).values() for m in ms} == {"tessera.icd.tensors.push"}


def test_register_binds_both_objects_and_hands_the_device_teardown_over(ffi):
    drv = driver(ffi)
    f = descriptors.register(drv)
    assert isinstance(f.push, TensorPush) and f.push.translation is f
    assert drv.features == [f]   # its device lifecycle (icd/feature.py)
    assert set(drv.hooks.modules()) == named("icd.tensors.descriptors") | named("icd.tensors.push")


# ---- metadata records and write translation -----------------------------------------------------------
def test_a_views_record_holds_dims_strides_in_elements_the_scratch_element_and_the_rank():
    words = struct.unpack(f"<{RECORD_WORDS}I", TensorDescriptors.record_bytes(tensor_view(0xB0, dims=(2, 3))))
    assert words[DIMS_AT:DIMS_AT + 2] == (2, 3)
    assert words[STRIDES_AT:STRIDES_AT + 2] == (3, 1)
    assert (words[SCRATCH_AT], words[RANK_AT]) == (6, 2)
    assert len(TensorDescriptors.record_bytes(tensor_view(0xB0))) == RECORD_BYTES


def test_a_write_of_another_type_into_a_tensor_or_the_metadata_binding_is_misplaced():
    misplaced = TensorDescriptors.misplaced
    assert misplaced(None, NS(dstBinding=1, descriptorType=UNIFORM), 0) is None    # a set without tensors
    assert misplaced(LAYOUT, NS(dstBinding=0, descriptorType=UNIFORM), 0) is None
    assert "VUID-VkWriteDescriptorSet-descriptorType-00319" in misplaced(LAYOUT, NS(dstBinding=3,
                                                                                    descriptorType=UNIFORM), 2)
    assert "VUID-VkWriteDescriptorSet-dstBinding-00315" in misplaced(LAYOUT, NS(dstBinding=4,
                                                                               descriptorType=UNIFORM), 1)


def test_tensor_writes_become_storage_buffer_writes_of_the_tensors_buffers_and_their_records_go_to_the_sink(ffi):
    f, keep, sunk = feature(ffi), [], []
    dev = device({0x71: tensor_view(0xB1), 0x72: tensor_view(0xB2, dims=(4, 5))})
    app = writes(ffi, keep, (0, 0, UNIFORM, None), (1, 0, TENSOR, [0x71, 0x72]))
    n, out = f.translate_writes(dev, "vkUpdateDescriptorSets", 2, app, lambda w: LAYOUT,
                                lambda w, index, data: sunk.append((index, data)), keep)
    assert n == 2
    assert (out[0].descriptorType, out[1].descriptorType) == (UNIFORM, STORAGE)
    assert [out[1].pBufferInfo[k].buffer for k in range(2)] == [0xB1, 0xB2]
    assert out[1].pNext == ffi.NULL    # the tensor struct is not the backend's
    assert sunk == [(0, TensorDescriptors.record_bytes(dev.tensors.views[0x71])),
                    (1, TensorDescriptors.record_bytes(dev.tensors.views[0x72]))]
    assert app[1].descriptorType == TENSOR    # the application's writes are left as they are


def test_writes_without_tensors_are_not_translated(ffi):
    f, keep = feature(ffi), []
    app = writes(ffi, keep, (0, 0, UNIFORM, None))
    assert f.translate_writes(device(), "vkUpdateDescriptorSets", 1, app, lambda w: LAYOUT, None, keep) is None
    assert f.translate_writes(device(), "vkUpdateDescriptorSets", 1, app, lambda w: None, None, keep) is None


def test_writes_the_emulation_cannot_take_are_skipped_with_a_message(ffi, capsys):
    f, keep, sunk = feature(ffi), [], []
    dev = device({0x71: tensor_view(0xB1), 0x7A: tensor_view(0xBA, usage=0)})
    app = writes(ffi, keep,
                 (3, 0, TENSOR, [0x71]),            # taken: record 2
                 (1, 1, TENSOR, [0x71, 0x71]),      # spills into the next binding
                 (1, 0, TENSOR, [0x99]),            # not a view of the device
                 (1, 0, TENSOR, [0x7A]),            # its tensor is not for shaders
                 (4, 0, UNIFORM, None))             # into the metadata binding
    n, out = f.translate_writes(dev, "vkUpdateDescriptorSets", 5, app, lambda w: LAYOUT,
                                lambda w, index, data: sunk.append(index), keep)
    assert (n, out[0].dstBinding, out[0].descriptorType, sunk) == (1, 3, STORAGE, [2])
    err = capsys.readouterr().err
    assert err.count("the write is skipped") == 4
    assert all(f"pDescriptorWrites[{i}]" in err for i in (1, 2, 3, 4))


def test_set_writes_put_the_records_into_the_written_sets_metadata_buffer(ffi):
    f, keep = feature(ffi), []
    mapped = ffi.new("char[]", 3 * RECORD_BYTES)
    st = DescriptorState(sets={0x5E7: SetMeta(LAYOUT, pool=0x900, buffer=0xB5, memory=0xA5, mapped=mapped)})
    dev = device({0x71: tensor_view(0xB1)})
    n, _ = f.set_writes(dev, st, "vkUpdateDescriptorSets", 1, writes(ffi, keep, (3, 0, TENSOR, [0x71])), keep)
    assert n == 1
    assert ffi.buffer(mapped)[2 * RECORD_BYTES:] == TensorDescriptors.record_bytes(dev.tensors.views[0x71])
    assert ffi.buffer(mapped)[:2 * RECORD_BYTES] == bytes(2 * RECORD_BYTES)


# ---- device state, the shader pass's bindings, set bookkeeping ------------------------------------------
def test_a_devices_descriptor_state_is_made_once_and_only_with_tensors(ffi):
    f = feature(ffi)
    assert f.state(NS(tensors=None)) is None
    dev = device()
    assert f.state(dev) is f.state(dev) is dev.tensors.descriptors


def test_the_shader_pass_gets_each_tensor_bindings_metadata_binding_and_first_record():
    st = DescriptorState(layouts={0x10: LAYOUT, 0x12: SetLayoutInfo(0, {})})
    dev = device(pipeline_layouts={0x70: ([0x11, 0x10, 0x12], [])})   # set 0: a layout without tensors
    assert TensorDescriptors.bindings_for(dev, st, 0x70) == {(1, 1): TensorBinding(4, 0), (1, 3): TensorBinding(4, 2)}
    assert TensorDescriptors.bindings_for(dev, st, 0x99) == {}


def test_freed_sets_and_destroyed_pools_give_their_metadata_buffers_back(ffi):
    f, dev = feature(ffi), device()
    st = f.state(dev)
    for handle, buffer in ((0x51, 0xB1), (0x52, 0xB2), (0x53, 0xB3)):
        st.sets[handle] = SetMeta(LAYOUT, 0x900 if handle < 0x53 else 0x901, buffer, buffer + 0x100, None)
        st.pools.setdefault(st.sets[handle].pool, set()).add(handle)
    f.before_vkFreeDescriptorSets(dev, dev.handle, 0x900, 2, [0x51, 0x77])   # 0x77: a set without tensors
    assert dev.next.calls == [("destroy buffer", 0xB1), ("free memory", 0x1B1)]
    assert st.pools == {0x900: {0x52}, 0x901: {0x53}}
    f.after_vkResetDescriptorPool(dev, vk.VK_SUCCESS, dev.handle, 0x900, 0)
    f.before_vkDestroyDescriptorPool(dev, dev.handle, 0x901, None)
    assert dev.next.calls[2:] == [("destroy buffer", 0xB2), ("free memory", 0x1B2),
                                  ("destroy buffer", 0xB3), ("free memory", 0x1B3)]
    assert (st.sets, st.pools) == ({}, {0x900: set()})


# ---- push descriptors -------------------------------------------------------------------------------
def test_a_push_to_a_set_with_tensors_adds_a_metadata_write_of_the_records_pushed_so_far(ffi):
    f, keep = feature(ffi), []
    dev = device({0x71: tensor_view(0xB1), 0x72: tensor_view(0xB2)}, pipeline_layouts={0x70: ([0x10], [])})
    f.state(dev).layouts[0x10] = LAYOUT
    mapped = ffi.new("char[]", 4096)
    f.push.free_chunks[id(dev)] = [Chunk(0xC4, 0xC5, mapped)]   # no backend memory needed
    cb = Buffer(dev)
    bind = vk.VK_PIPELINE_BIND_POINT_COMPUTE
    f.push.push_writes(cb, "vkCmdPushDescriptorSet", bind, 0x70, 0, 1, writes(ffi, keep, (3, 0, TENSOR, [0x71])), keep)
    n, out = f.push.push_writes(cb, "vkCmdPushDescriptorSet", bind, 0x70, 0, 1,
                                writes(ffi, keep, (1, 1, TENSOR, [0x72])), keep)
    assert (n, out[0].descriptorType, out[1].dstBinding, out[1].descriptorType) == (2, STORAGE, 4, STORAGE)
    info = out[1].pBufferInfo[0]
    assert (info.buffer, info.range) == (0xC4, 3 * RECORD_BYTES)
    record = TensorDescriptors.record_bytes
    assert ffi.buffer(mapped)[info.offset:info.offset + info.range] == \
        bytes(RECORD_BYTES) + record(dev.tensors.views[0x72]) + record(dev.tensors.views[0x71])
    assert f.push.push_writes(cb, "vkCmdPushDescriptorSet", bind, 0x99, 0, 1, out, keep) is None   # no tensors
    del cb   # freed: its chunk goes back to the device
    assert [c.buffer for c in f.push.free_chunks[id(dev)]] == [0xC4] and not f.push.pushes

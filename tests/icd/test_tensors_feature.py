"""icd/tensors/resources.py's feature object (issue #24), without Vulkan: its methods are exactly the commands
the intercept table gives icd.tensors.resources, and its validation (views, copies, the device's feature) and
object bookkeeping called directly with stand-ins for the driver, its ffi and its objects."""
from __future__ import annotations

import logging
from types import SimpleNamespace as NS

import pytest

from tessera.icd.tensors import resources
from tessera.icd.tensors.resources import (DeviceTensors, Features, Tensor, TensorError, Tensors, check_view_format,
                                           device_state, tensor_of)
from tessera.vkapi import intercepts
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.vkconst import vk

F32, U32, U16 = vk.VK_FORMAT_R32_SFLOAT, vk.VK_FORMAT_R32_UINT, vk.VK_FORMAT_R16_UINT
TRANSFER = vk.VK_TENSOR_USAGE_TRANSFER_SRC_BIT_ARM | vk.VK_TENSOR_USAGE_TRANSFER_DST_BIT_ARM


class Objects:
    """The driver's objects: handles are themselves."""

    def get(self, handle, kind=None):
        return handle

    def address(self, handle) -> int:
        return int(handle)


def driver():
    hooks = HookSet(HookErrors(logging.getLogger("test_tensors_feature")))
    return NS(ffi=NS(NULL=None), hooks=hooks, objects=Objects(), lib=None, profile=None, features=[])


def tensor(handle=0x10, fmt=F32, dims=(2, 3), usage=TRANSFER, memory=0x99, flags=0) -> Tensor:
    element = resources.FORMATS[fmt][0]
    strides = resources.packed_strides(dims, element)
    return Tensor(handle, fmt, vk.VK_TENSOR_TILING_OPTIMAL_ARM, dims, strides, usage, element,
                  resources.data_bytes(dims, strides, element), buffer=handle + 1, memory=memory, flags=flags)


def device(*ts: Tensor, enabled: bool = True):
    st = DeviceTensors(Features(tensors=enabled), tensors={t.handle: t for t in ts})
    return NS(tensors=st, emulated={})


def test_its_methods_are_the_commands_the_table_gives_icd_tensors():
    hooks = driver().hooks
    hooks.bind(Tensors(NS(ffi=None, objects=None, hooks=hooks, drv=None)))
    owned = {name for name, modules in intercepts.owners(intercepts.ICD).items()
             if "tessera.icd.tensors.resources" in modules}
    assert set(hooks.modules()) == owned


def test_register_binds_the_object_and_tensor_aliasings_hooks():
    drv = driver()
    f = resources.register(drv)
    assert isinstance(f, Tensors)
    assert drv.hooks.replacements["vkCreateTensorARM"] == f.replace_vkCreateTensorARM
    assert {fn.__module__ for fn in drv.hooks.befores["vkCreateImage"]} == {"tessera.icd.tensors.aliasing"}


def test_a_device_without_the_tensors_feature_is_refused():
    with pytest.raises(TensorError, match="without VK_ARM_tensors"):
        device_state(NS(tensors=None))
    with pytest.raises(TensorError, match="`tensors` feature"):
        device_state(device(enabled=False))
    dev = device()
    assert device_state(dev) is dev.tensors


def test_a_tensor_is_found_by_handle_and_an_unknown_one_named_in_the_error():
    t = tensor()
    st = device(t).tensors
    assert tensor_of(st, 0x10, "srcTensor") is t
    with pytest.raises(TensorError, match=r"srcTensor \(0x20\) is not a VkTensorARM"):
        tensor_of(st, 0x20, "srcTensor")


@pytest.mark.parametrize("fmt, flags, vuid", [
    (vk.VK_FORMAT_R8G8B8A8_UNORM, 0, "not a tensor format"),
    (U32, 0, "09743"),                                             # another format, not mutable
    (U16, vk.VK_TENSOR_CREATE_MUTABLE_FORMAT_BIT_ARM, "09744"),    # mutable, another element size
])
def test_a_views_format_must_be_a_tensor_format_compatible_with_the_tensors(fmt, flags, vuid):
    with pytest.raises(TensorError, match=vuid):
        check_view_format(tensor(flags=flags), fmt)


def test_a_view_may_have_the_tensors_format_or_a_same_sized_one_when_mutable():
    check_view_format(tensor(), F32)
    check_view_format(tensor(flags=vk.VK_TENSOR_CREATE_MUTABLE_FORMAT_BIT_ARM), U32)


def test_views_are_created_adopted_and_destroyed_and_a_bad_one_refused(capsys):
    f = Tensors(driver())
    t = tensor()
    dev = device(t)
    out = [0]
    info = NS(tensor=t.handle, format=F32)
    assert f.replace_vkCreateTensorViewARM(dev, info, None, out) == vk.VK_SUCCESS
    view = dev.tensors.views[out[0]]
    assert view.tensor is t and dev.emulated[out[0]] is view
    f.replace_vkDestroyTensorViewARM(dev, out[0], None)
    assert dev.tensors.views == {} and dev.emulated == {}
    assert f.replace_vkCreateTensorViewARM(dev, NS(tensor=0x77, format=F32), None, out) == resources.VALIDATION_FAILED
    assert "vkCreateTensorViewARM: pCreateInfo->tensor (0x77)" in capsys.readouterr().err


def copy_info(*regions, src=0x10, dst=0x20):
    return NS(sType=vk.VK_STRUCTURE_TYPE_COPY_TENSOR_INFO_ARM, srcTensor=src, dstTensor=dst,
              regionCount=len(regions), pRegions=list(regions))


def region(n=2, src_offset=None, dst_offset=None, extent=None):
    return NS(sType=vk.VK_STRUCTURE_TYPE_TENSOR_COPY_ARM, dimensionCount=n, pSrcOffset=src_offset,
              pDstOffset=dst_offset, pExtent=extent)


def test_a_copy_is_planned_into_its_regions_offsets_and_extents():
    f = Tensors(driver())
    src, dst = tensor(0x10, dims=(4, 4)), tensor(0x20, dims=(4, 4))
    st = device(src, dst).tensors
    got = f.plan_copy(st, copy_info(region(), region(src_offset=[1, 2], dst_offset=[0, 1], extent=[3, 2])))
    assert got == (src, dst, [([0, 0], [0, 0], [4, 4]), ([1, 2], [0, 1], [3, 2])])


@pytest.mark.parametrize("make, message", [
    (lambda: (tensor(0x10, usage=vk.VK_TENSOR_USAGE_TRANSFER_DST_BIT_ARM), tensor(0x20), region()),
     "TRANSFER_SRC"),
    (lambda: (tensor(0x10), tensor(0x20, memory=0), region()), "bound to memory"),
    (lambda: (tensor(0x10), tensor(0x20, fmt=U16), region()), "differ in element size"),
    (lambda: (tensor(0x10), tensor(0x20, dims=(2, 4)), region()), "pExtent is NULL"),
    (lambda: (tensor(0x10), tensor(0x20), region(n=3)), "dimensionCount"),
    (lambda: (tensor(0x10), tensor(0x20), region(src_offset=[1, 0], extent=[2, 3])), "beyond srcTensor"),
    (lambda: (tensor(0x10), tensor(0x20), region(extent=[0, 3])), r"pExtent\[0\] is 0"),
])
def test_an_invalid_copy_names_the_rule_it_breaks(make, message):
    src, dst, r = make()
    with pytest.raises(TensorError, match=message):
        Tensors(driver()).plan_copy(device(src, dst).tensors, copy_info(r))


def test_an_invalid_copy_is_refused_and_not_recorded(capsys):
    f = Tensors(driver())
    cb = NS(device=device(tensor(0x10)), ops=[])
    f.replace_vkCmdCopyTensorARM(cb, copy_info(region()))
    assert cb.ops == []
    assert "the copy is not recorded" in capsys.readouterr().err


def test_barriers_of_a_device_without_tensors_are_left_alone():
    f = Tensors(driver())
    cb = NS(device=NS(tensors=None), address=0xC0)
    assert f.before_vkCmdPipelineBarrier2(cb, 0xC0, object()) is None
    assert f.before_vkCmdWaitEvents2(cb, 0xC0, 1, None, None) is None
    assert f.keepalive == {}

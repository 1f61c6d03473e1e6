"""The tensor usages icd/tensors/resources.py accepts, without Vulkan (`describe` with stand-ins for the
ffi and the VkTensorDescriptionARM): VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM is accepted (Arm's ML emulation
layer, VkLayer_Graph, creates its tensors with usage 0x2e and passes them down to the driver, which
provides VK_ARM_tensors under it: docs/ml.md), a bit outside VkTensorUsageFlagBitsARM and 0 are refused."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from tessera.icd.tensors.resources import Features, TensorError, describe
from tessera.vkapi.vkconst import vk

FFI = NS(NULL=None)


def description(usage: int) -> NS:
    return NS(sType=vk.VK_STRUCTURE_TYPE_TENSOR_DESCRIPTION_ARM, dimensionCount=2, format=vk.VK_FORMAT_R32_SFLOAT,
              pDimensions=[1, 4], pStrides=None, usage=usage, tiling=vk.VK_TENSOR_TILING_LINEAR_ARM)


def test_the_graph_layers_usage_is_accepted():
    usage = (vk.VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM | vk.VK_TENSOR_USAGE_SHADER_BIT_ARM
             | vk.VK_TENSOR_USAGE_TRANSFER_SRC_BIT_ARM | vk.VK_TENSOR_USAGE_TRANSFER_DST_BIT_ARM)
    assert usage == 0x2e                                   # what VkLayer_Graph 0.11 asks for
    assert describe(FFI, description(usage), Features(tensors=True)) == (
        vk.VK_FORMAT_R32_SFLOAT, vk.VK_TENSOR_TILING_LINEAR_ARM, (1, 4), (16, 4), usage, 4)


@pytest.mark.parametrize("usage", [0, 0x1, 0x40 | vk.VK_TENSOR_USAGE_SHADER_BIT_ARM])
def test_other_usages_are_refused(usage):
    with pytest.raises(TensorError, match=f"usage \\(0x{usage:x}\\) must be a non-zero combination"):
        describe(FFI, description(usage), Features(tensors=True))

"""VK_ARM_tensors in the layer: what it remembers of tensors to size their copies.

Role: vkCreateTensorARM / vkDestroyTensorARM keep each tensor's dimensions and element size in the
device's `Resources.tensors` (keyed by handle, like buffers), so that workloads.py can tag
vkCmdCopyTensorARM as a `tensor_copy` transfer with its byte count (vkapi/transfers.tensor_copy:
the elements of each region times the element size, what the driver copies). The layer does not
enable or validate the extension: the application does, and the driver checks its use.

Threads: the maps are written by the creating/destroying thread and read by recording threads
(dict operations are atomic under the GIL).
"""
from __future__ import annotations

from tessera.vkapi.resources import texel_bytes
from tessera.vkapi.vkconst import vk


class Tensors:
    """Each tensor's dimensions and element size, kept from its creation to its destruction."""

    def after_vkCreateTensorARM(self, dev, result, device, pCreateInfo, pAllocator, pTensor):
        if result != vk.VK_SUCCESS:
            return
        desc = pCreateInfo.pDescription
        dims = tuple(int(desc.pDimensions[i]) for i in range(desc.dimensionCount))
        dev.res.tensors[int(pTensor[0])] = (dims, int(texel_bytes(desc.format)))

    def before_vkDestroyTensorARM(self, dev, device, tensor, pAllocator):
        dev.res.tensors.pop(int(tensor), None)


def register(hooks) -> None:
    hooks.bind(Tensors())

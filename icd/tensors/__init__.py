"""Tensors (VK_ARM_tensors) in the emulated Mali, on a backend without them.

Owns: tensors and tensor views (vkCreate/DestroyTensorARM, vkCreate/DestroyTensorViewARM), their memory
(vkGet[Device]TensorMemoryRequirementsARM, vkBindTensorMemoryARM), copies (vkCmdCopyTensorARM), tensor
barriers (vkCmdPipelineBarrier2, vkCmdWaitEvents2), physical-device queries (features, format and external
tensor properties), tensor descriptors (set layouts, pools, sets, vkUpdateDescriptorSets, pipelines whose
shaders use SPV_ARM_tensors), push descriptors and update templates, and images aliasing tensors
(vkCreateImage). State: `dev.tensors` (resources.DeviceTensors: tensors, views, the descriptors' state,
the backend pitches cache); a command buffer's push chunks. Threads: objects are created and destroyed
under the application's synchronisation; a command buffer's state belongs to its recording thread.

Architecture (each module below is named in the intercept table's rows for the commands it handles):

    resources.py    the `Tensors` feature: objects, memory, copies, barriers, device queries and features
    descriptors.py  the `TensorDescriptors` feature: a tensor descriptor = a storage buffer + a metadata
                    record; layouts, pools, sets, writes, and shaders lowered by spirv/passes/tensors.py
    push.py         push descriptors and update templates, translated through descriptors.py's writes
    aliasing.py     images aliasing tensors (linear layouts both sides; the TENSOR_ALIASING image layout)
    external.py     what a tensor's memory can export or import: its backing buffer's (no state)

Data flow: a tensor is a region of a backend VkBuffer (resources.py); a descriptor write becomes a
storage-buffer write plus the view's record in the set's metadata buffer (descriptors.py, push.py),
which the lowered shader reads. Devices create `Tensors` before `TensorDescriptors` (icd/entry.py), so
sets go before the tensors' buffers at destroy. Nothing is imported here:
`from tessera.icd.tensors import resources`.
"""

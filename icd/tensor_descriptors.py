"""VK_ARM_tensors descriptors and shaders in the emulated Mali.

Role: VK_DESCRIPTOR_TYPE_TENSOR_ARM on a backend without it, and the pipelines whose shaders use
SPV_ARM_tensors. A tensor descriptor is a storage buffer (the tensor's backing buffer, tensors.py)
plus a metadata record (shape, strides in elements, scratch element, rank: the layout of
tessera.spirv.passes.tensors) the lowered shader reads:

- set layouts: each TENSOR binding becomes a STORAGE_BUFFER binding; a layout with tensors gets
  one more storage-buffer binding (its highest binding + 1) for the set's metadata buffer, whose
  records are numbered by tensor binding (in binding order) and array element;
- pools: TENSOR pool sizes become STORAGE_BUFFER ones, plus one per set for the metadata;
- sets: each set of such a layout gets a host-visible metadata buffer the driver owns, bound at
  allocation; vkUpdateDescriptorSets writes the tensor's buffer as a storage buffer and the
  view's record into the mapped metadata (copies copy the records too);
- pipelines: compute and graphics stages declaring TensorsARM are lowered by the toolkit's pass
  with the layout's metadata bindings; the driver's module replaces the application's for the
  backend (the lowered code is what costs and instrumentation see, with the same blocks);
- push descriptors and update templates: tensor_push.py, through `translate_writes` here.

Not done: descriptor buffers (a tensor descriptor's record is reached through a binding the
driver adds, which a descriptor buffer has no place for: descriptorBufferTensorDescriptors is
reported false), update-after-bind, writes that spill over into the next binding. A shader that
cannot be lowered gets an empty shader of its stage and a clear message.
Threads: layouts, pools and sets are created by the application under its own synchronisation.
"""
from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from . import tensors
from .driver import Driver
from .objects import Device

TENSOR = vk.VK_DESCRIPTOR_TYPE_TENSOR_ARM
STORAGE = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER


@dataclass(frozen=True)
class SetLayoutInfo:
    meta_binding: int
    slots: dict[int, tuple[int, int]]     # tensor binding -> (first record, descriptor count)

    @property
    def records(self) -> int:
        return sum(count for _, count in self.slots.values())


@dataclass
class SetMeta:
    layout: SetLayoutInfo
    pool: int
    buffer: int
    memory: int
    mapped: Any


@dataclass
class DescriptorState:
    layouts: dict[int, SetLayoutInfo] = field(default_factory=dict)
    sets: dict[int, SetMeta] = field(default_factory=dict)
    pools: dict[int, set[int]] = field(default_factory=dict)
    memory_type: int | None = None


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects
    log = hooks.errors.log
    pending_layouts: dict[int, SetLayoutInfo] = {}
    pending_pipelines: dict[int, list] = {}

    def refuse(command: str, message: str) -> None:
        log.warning("%s: %s", command, message)
        print(f"tessera: {tensors.EXTENSION}: {command}: {message}", file=sys.stderr, flush=True)

    def state(dev: Device) -> DescriptorState | None:
        st = dev.tensors
        if st is None:
            return None
        if st.descriptors is None:
            st.descriptors = DescriptorState()
        return st.descriptors

    # ---- set layouts --------------------------------------------------------------------
    @hooks.before("vkCreateDescriptorSetLayout")
    def before_create_set_layout(dev, device, pCreateInfo, pAllocator, pSetLayout):
        if state(dev) is None:
            return None
        n = pCreateInfo.bindingCount
        bindings = [pCreateInfo.pBindings[i] for i in range(n)]
        if not any(b.descriptorType == TENSOR for b in bindings):
            return None
        keep: list = []
        array = ffi.new("VkDescriptorSetLayoutBinding[]", n + 1)
        keep.append(array)
        slots, record, stages = {}, 0, 0
        for i, b in enumerate(sorted(bindings, key=lambda b: b.binding)):
            array[i] = b
            if b.descriptorType == TENSOR:
                array[i].descriptorType = STORAGE
                slots[b.binding] = (record, b.descriptorCount)
                record += b.descriptorCount
                stages |= b.stageFlags
        meta = max(b.binding for b in bindings) + 1
        array[n] = {"binding": meta, "descriptorType": STORAGE, "descriptorCount": 1, "stageFlags": stages}
        info = structs.copy(ffi, "VkDescriptorSetLayoutCreateInfo *", pCreateInfo, keep)
        info.bindingCount = n + 1
        info.pBindings = array
        flags = structs.find(ffi, pCreateInfo.pNext, vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO,
                             "VkDescriptorSetLayoutBindingFlagsCreateInfo *")
        if flags is not None and flags.bindingCount:
            # Binding flags are per pBindings entry (the application's order): sorted above, so
            # re-pair them by binding number; the metadata binding has none.
            by_binding = {pCreateInfo.pBindings[i].binding: flags.pBindingFlags[i] for i in range(n)}
            nodes = list(structs.chain(ffi, pCreateInfo.pNext))
            info.pNext = head = structs.rebuild_chain(ffi, nodes, keep)
            new_flags = ffi.new("VkDescriptorBindingFlags[]", [by_binding[array[i].binding] for i in range(n)] + [0])
            keep.append(new_flags)
            for node in structs.chain(ffi, head):
                if node.sType == vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO:
                    f = ffi.cast("VkDescriptorSetLayoutBindingFlagsCreateInfo *", node)
                    f.bindingCount, f.pBindingFlags = n + 1, new_flags
        pending_layouts[int(ffi.cast("uintptr_t", info))] = (SetLayoutInfo(meta, slots), keep)
        return (device, info, pAllocator, pSetLayout)

    @hooks.after("vkCreateDescriptorSetLayout")
    def after_create_set_layout(dev, result, device, pCreateInfo, pAllocator, pSetLayout):
        entry = pending_layouts.pop(int(ffi.cast("uintptr_t", pCreateInfo)), None)
        if entry is not None and result == vk.VK_SUCCESS:
            state(dev).layouts[int(pSetLayout[0])] = entry[0]

    @hooks.before("vkDestroyDescriptorSetLayout")
    def before_destroy_set_layout(dev, device, layout, pAllocator):
        st = state(dev)
        if st is not None:
            st.layouts.pop(int(layout), None)

    # ---- pools and sets -------------------------------------------------------------------
    @hooks.before("vkCreateDescriptorPool")
    def before_create_pool(dev, device, pCreateInfo, pAllocator, pPool):
        if state(dev) is None:
            return None
        sizes = [pCreateInfo.pPoolSizes[i] for i in range(pCreateInfo.poolSizeCount)]
        if not any(s.type == TENSOR for s in sizes):
            return None
        keep: list = []
        array = ffi.new("VkDescriptorPoolSize[]", len(sizes) + 1)
        keep.append(array)
        for i, s in enumerate(sizes):
            array[i] = {"type": STORAGE if s.type == TENSOR else s.type, "descriptorCount": s.descriptorCount}
        array[len(sizes)] = {"type": STORAGE, "descriptorCount": pCreateInfo.maxSets}
        info = structs.copy(ffi, "VkDescriptorPoolCreateInfo *", pCreateInfo, keep)
        info.poolSizeCount, info.pPoolSizes = len(sizes) + 1, array
        pending_layouts[int(ffi.cast("uintptr_t", info))] = (None, keep)
        return (device, info, pAllocator, pPool)

    @hooks.after("vkCreateDescriptorPool")
    def after_create_pool(dev, result, device, pCreateInfo, pAllocator, pPool):
        pending_layouts.pop(int(ffi.cast("uintptr_t", pCreateInfo)), None)

    def free_set(dev: Device, st: DescriptorState, handle: int) -> None:
        meta = st.sets.pop(handle, None)
        if meta is not None:
            dev.next.vkDestroyBuffer(dev.handle, meta.buffer, ffi.NULL)
            dev.next.vkFreeMemory(dev.handle, meta.memory, ffi.NULL)
            st.pools.get(meta.pool, set()).discard(handle)

    @hooks.before("vkDestroyDescriptorPool")
    def before_destroy_pool(dev, device, pool, pAllocator):
        st = state(dev)
        if st is not None:
            for handle in list(st.pools.pop(int(pool), ())):
                free_set(dev, st, handle)

    @hooks.after("vkResetDescriptorPool")
    def after_reset_pool(dev, result, device, pool, flags):
        st = state(dev)
        if st is not None:
            for handle in list(st.pools.get(int(pool), ())):
                free_set(dev, st, handle)

    @hooks.before("vkFreeDescriptorSets")
    def before_free_sets(dev, device, pool, count, pSets):
        st = state(dev)
        if st is not None:
            for i in range(count):
                free_set(dev, st, int(pSets[i]))

    def memory_type(dev: Device, st: DescriptorState) -> int:
        if st.memory_type is None:
            mem = ffi.new("VkPhysicalDeviceMemoryProperties *")
            dev.physical.next.vkGetPhysicalDeviceMemoryProperties(dev.physical.handle, mem)
            want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
            st.memory_type = next(i for i in range(mem.memoryTypeCount)
                                  if mem.memoryTypes[i].propertyFlags & want == want)
        return st.memory_type

    def check(result: int, what: str) -> None:
        if result != vk.VK_SUCCESS:
            raise RuntimeError(f"{what} failed ({result})")

    @hooks.after("vkAllocateDescriptorSets")
    def after_allocate_sets(dev, result, device, pAllocateInfo, pSets):
        st = state(dev)
        if st is None or result != vk.VK_SUCCESS:
            return
        for i in range(pAllocateInfo.descriptorSetCount):
            layout = st.layouts.get(int(pAllocateInfo.pSetLayouts[i]))
            if layout is None:
                continue
            size = max(1, layout.records) * RECORD_BYTES
            binfo = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                                     "usage": vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT})
            buf = ffi.new("VkBuffer *")
            check(dev.next.vkCreateBuffer(device, binfo, ffi.NULL, buf), "vkCreateBuffer")
            reqs = ffi.new("VkMemoryRequirements *")
            dev.next.vkGetBufferMemoryRequirements(device, buf[0], reqs)
            ainfo = ffi.new("VkMemoryAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                       "allocationSize": reqs.size,
                                                       "memoryTypeIndex": memory_type(dev, st)})
            mem = ffi.new("VkDeviceMemory *")
            check(dev.next.vkAllocateMemory(device, ainfo, ffi.NULL, mem), "vkAllocateMemory")
            check(dev.next.vkBindBufferMemory(device, buf[0], mem[0], 0), "vkBindBufferMemory")
            ptr = ffi.new("void **")
            check(dev.next.vkMapMemory(device, mem[0], 0, vk.VK_WHOLE_SIZE, 0, ptr), "vkMapMemory")
            mapped = ffi.cast("char *", ptr[0])
            ffi.memmove(mapped, bytes(size), size)
            dinfo = ffi.new("VkDescriptorBufferInfo *", {"buffer": buf[0], "offset": 0, "range": vk.VK_WHOLE_SIZE})
            write = ffi.new("VkWriteDescriptorSet *", {
                "sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstSet": pSets[i],
                "dstBinding": layout.meta_binding, "descriptorCount": 1, "descriptorType": STORAGE,
                "pBufferInfo": dinfo})
            dev.next.vkUpdateDescriptorSets(device, 1, write, 0, ffi.NULL)
            handle = int(pSets[i])
            st.sets[handle] = SetMeta(layout, int(pAllocateInfo.descriptorPool), int(buf[0]), int(mem[0]), mapped)
            st.pools.setdefault(int(pAllocateInfo.descriptorPool), set()).add(handle)

    # ---- updates ------------------------------------------------------------------------------
    def record_bytes(view: tensors.TensorView) -> bytes:
        t = view.tensor
        element = tensors.FORMATS[view.format][0]
        words = [0] * RECORD_WORDS
        for i, (d, s) in enumerate(zip(t.dims, t.strides)):
            words[DIMS_AT + i] = d
            words[STRIDES_AT + i] = s // element
        words[SCRATCH_AT] = t.data_bytes // element
        words[RANK_AT] = t.rank
        return struct.pack(f"<{RECORD_WORDS}I", *words)

    def translate_writes(dev: Device, command: str, count: int, pWrites, layout_of, sink, keep: list):
        """The writes for the backend: tensor writes become storage-buffer writes of the tensors'
        buffers (their records go to `sink(record index, bytes)`), writes the emulation cannot
        take are skipped with a message. `layout_of(write)`: the SetLayoutInfo of the written set
        (None: not a set with tensors). Returns (count, writes) or None when nothing changes."""
        tensor_writes = [i for i in range(count) if pWrites[i].descriptorType == TENSOR]
        wrong = {i: problem for i in range(count) if pWrites[i].descriptorType != TENSOR
                 and (problem := misplaced(layout_of(pWrites[i]), pWrites[i], i)) is not None}
        if not tensor_writes and not wrong:
            return None
        writes = ffi.new("VkWriteDescriptorSet[]", max(1, count))
        keep.append(writes)
        for i in range(count):
            writes[i] = pWrites[i]
        for i, problem in wrong.items():
            refuse(command, f"{problem}: the write is skipped")
            writes[i].descriptorCount = 0
        for i in tensor_writes:
            w = pWrites[i]
            views = structs.find(ffi, w.pNext, vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_TENSOR_ARM,
                                 "VkWriteDescriptorSetTensorARM *")
            layout = layout_of(w)
            infos = ffi.new("VkDescriptorBufferInfo[]", max(1, w.descriptorCount))
            keep.append(infos)
            problem = None
            if views is None or views.tensorViewCount != w.descriptorCount:
                problem = (f"pDescriptorWrites[{i}] is of type VK_DESCRIPTOR_TYPE_TENSOR_ARM but its pNext has no "
                           "VkWriteDescriptorSetTensorARM with tensorViewCount == descriptorCount")
            elif layout is None or w.dstBinding not in layout.slots:
                problem = f"pDescriptorWrites[{i}]: dstBinding {w.dstBinding} of dstSet is not a tensor binding"
            else:
                first, slots = layout.slots[w.dstBinding]
                if w.dstArrayElement + w.descriptorCount > slots:
                    problem = (f"pDescriptorWrites[{i}]: dstArrayElement + descriptorCount exceeds the binding's "
                               f"{slots} descriptors (writes into the next binding are not emulated)")
            records = []
            for k in range(w.descriptorCount if problem is None else 0):
                view = dev.tensors.views.get(int(views.pTensorViews[k]))
                if view is None:
                    problem = f"pDescriptorWrites[{i}]: pTensorViews[{k}] is not a VkTensorViewARM of this device"
                    break
                if not view.tensor.usage & vk.VK_TENSOR_USAGE_SHADER_BIT_ARM:
                    problem = (f"pDescriptorWrites[{i}]: pTensorViews[{k}]'s tensor was not created with "
                               "VK_TENSOR_USAGE_SHADER_BIT_ARM")
                    break
                infos[k] = {"buffer": view.tensor.buffer, "offset": 0, "range": vk.VK_WHOLE_SIZE}
                records.append((first + w.dstArrayElement + k, record_bytes(view)))
            if problem is not None:
                refuse(command, f"{problem}: the write is skipped")
                writes[i].descriptorCount = 0
            else:
                for index, data in records:
                    sink(w, index, data)
            nodes = [n for n in structs.chain(ffi, w.pNext)
                     if n.sType != vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_TENSOR_ARM]
            writes[i].pNext = structs.rebuild_chain(ffi, nodes, keep)
            writes[i].descriptorType = STORAGE
            writes[i].pBufferInfo = infos
        kept = [i for i in range(count) if writes[i].descriptorCount]
        if len(kept) != count:
            compact = ffi.new("VkWriteDescriptorSet[]", max(1, len(kept)))
            for j, i in enumerate(kept):
                compact[j] = writes[i]
            keep.append(compact)
            writes = compact
        return len(kept), writes

    def set_writes(dev: Device, st: DescriptorState, command: str, count: int, pWrites, keep: list):
        """translate_writes for descriptor sets: records go to each set's metadata buffer."""
        def layout_of(w):
            meta = st.sets.get(int(w.dstSet))
            return meta.layout if meta is not None else None

        def sink(w, index: int, data: bytes) -> None:
            ffi.memmove(st.sets[int(w.dstSet)].mapped + index * RECORD_BYTES, data, len(data))
        return translate_writes(dev, command, count, pWrites, layout_of, sink, keep)

    @hooks.before("vkUpdateDescriptorSets")
    def before_update(dev, device, writeCount, pWrites, copyCount, pCopies):
        st = state(dev)
        if st is None:
            return None
        for i in range(copyCount):
            copy_records(st, pCopies[i])
        keep: list = []
        out = set_writes(dev, st, "vkUpdateDescriptorSets", writeCount, pWrites, keep)
        if out is None:
            return None
        pending_updates[int(ffi.cast("uintptr_t", out[1]))] = keep
        return (device, out[0], out[1], copyCount, pCopies)

    pending_updates: dict[int, list] = {}

    def misplaced(layout: SetLayoutInfo | None, w, i: int) -> str | None:
        """Why a write of another type may not go where it goes (the backend sees storage buffers
        there and would accept it), or None."""
        if layout is None:
            return None
        if w.dstBinding in layout.slots:
            return (f"VUID-VkWriteDescriptorSet-descriptorType-00319: pDescriptorWrites[{i}].descriptorType "
                    f"({w.descriptorType}) differs from binding {w.dstBinding}'s type, "
                    "VK_DESCRIPTOR_TYPE_TENSOR_ARM")
        if w.dstBinding == layout.meta_binding:
            return (f"VUID-VkWriteDescriptorSet-dstBinding-00315: pDescriptorWrites[{i}].dstBinding "
                    f"({w.dstBinding}) is not a binding of dstSet's layout")
        return None

    @hooks.after("vkUpdateDescriptorSets")
    def after_update(dev, result, device, writeCount, pWrites, copyCount, pCopies):
        pending_updates.pop(int(ffi.cast("uintptr_t", pWrites)), None)

    def copy_records(st: DescriptorState, c) -> None:
        src, dst = st.sets.get(int(c.srcSet)), st.sets.get(int(c.dstSet))
        if src is None or dst is None or c.srcBinding not in src.layout.slots or c.dstBinding not in dst.layout.slots:
            return
        s_first, _ = src.layout.slots[c.srcBinding]
        d_first, _ = dst.layout.slots[c.dstBinding]
        n = c.descriptorCount * RECORD_BYTES
        data = bytes(ffi.buffer(src.mapped + (s_first + c.srcArrayElement) * RECORD_BYTES, n))
        ffi.memmove(dst.mapped + (d_first + c.dstArrayElement) * RECORD_BYTES, data, n)

    # ---- compute pipelines using tensors --------------------------------------------------------
    def bindings_for(dev: Device, st: DescriptorState, layout: int) -> dict:
        from tessera.spirv.passes.tensors import TensorBinding

        out = {}
        # Device.pipeline_layouts: counter_memory.track_pipeline_layouts keeps every application layout
        for set_index, handle in enumerate(dev.pipeline_layouts.get(layout, ([], []))[0]):
            info = st.layouts.get(handle)
            if info is None:
                continue
            for binding, (first, _) in info.slots.items():
                out[(set_index, binding)] = TensorBinding(info.meta_binding, first)
        return out

    def lowered_module(dev: Device, st: DescriptorState, code: bytes, layout: int) -> tuple[bytes, str | None]:
        from tessera.spirv import SpirvError, parse
        from tessera.spirv.passes.tensors import lower_tensors

        try:
            module = parse(code)
            lower_tensors(module, bindings_for(dev, st, layout))
            return module.to_bytes(), None
        except SpirvError as e:
            return EMPTY, str(e)

    def lower_stage(dev: Device, st: DescriptorState, stage, code: bytes, layout: int, where: str, command: str,
                    modules: list, keep: list) -> None:
        """Point `stage` (a copy the driver owns) at a backend module of the lowered shader; a shader
        that cannot be lowered (or a device without shaderTensorAccess) gets an empty one."""
        if not dev.tensors.features.shader_access:
            refuse(command, f"{where} uses tensors in a shader but the shaderTensorAccess feature is not "
                   "enabled: the shader is replaced by an empty one")
            lowered, problem = EMPTY, None
        else:
            lowered, problem = lowered_module(dev, st, code, layout)
        if problem is not None:
            refuse(command, f"{where}: the tensor shader cannot be lowered ({problem}): it is replaced by an "
                   "empty one")
        empty = lowered is EMPTY
        if empty:
            lowered = EMPTY_SHADERS.get(stage.stage)
            if lowered is None:
                refuse(command, f"{where}: no empty stand-in for stage 0x{stage.stage:x}: left as it is")
                return
        words = ffi.new("uint32_t[]", len(lowered) // 4)
        ffi.memmove(words, lowered, len(lowered))
        minfo = ffi.new("VkShaderModuleCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                       "codeSize": len(lowered), "pCode": words})
        out = ffi.new("VkShaderModule *")
        if dev.next.vkCreateShaderModule(dev.handle, minfo, ffi.NULL, out) != vk.VK_SUCCESS:
            refuse(command, f"{where}: the backend refused the lowered tensor shader")
            return
        dev.res.shaders[int(out[0])] = lowered
        modules.append(int(out[0]))
        stage.module = out[0]
        nodes = [n for n in structs.chain(ffi, stage.pNext)
                 if n.sType != vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO]
        stage.pNext = structs.rebuild_chain(ffi, nodes, keep)
        if empty:
            name = ffi.new("char[]", b"main")
            keep.append(name)
            stage.pName = name
            stage.pSpecializationInfo = ffi.NULL

    @hooks.before("vkCreateComputePipelines")
    def before_create_compute(dev, device, cache, count, pInfos, pAllocator, pPipelines):
        from tessera.spirv.passes.tensors import uses_tensors
        from tessera.vkapi.pipelines import _stage_code

        st = state(dev)
        if st is None:
            return None
        codes = [_stage_code(ffi, dev, pInfos[i].stage) for i in range(count)]
        wanted = [i for i, code in enumerate(codes) if code is not None and uses_tensors(code)]
        if not wanted:
            return None
        infos = ffi.new("VkComputePipelineCreateInfo[]", count)
        ffi.memmove(infos, pInfos, ffi.sizeof("VkComputePipelineCreateInfo") * count)
        keep: list = [infos]
        modules: list = []
        for i in wanted:
            lower_stage(dev, st, infos[i].stage, codes[i], int(pInfos[i].layout), f"pCreateInfos[{i}]",
                        "vkCreateComputePipelines", modules, keep)
        pending_pipelines[int(ffi.cast("uintptr_t", infos))] = [modules, keep]
        return (device, cache, count, infos, pAllocator, pPipelines)

    @hooks.before("vkCreateGraphicsPipelines")
    def before_create_graphics(dev, device, cache, count, pInfos, pAllocator, pPipelines):
        """Graphics stages reading or writing tensors (shaderTensorSupportedStages: fragment tested),
        lowered as compute stages are."""
        from tessera.spirv.passes.tensors import uses_tensors
        from tessera.vkapi.pipelines import _stage_code

        st = state(dev)
        if st is None:
            return None
        wanted = {}
        for i in range(count):
            for j in range(pInfos[i].stageCount):
                code = _stage_code(ffi, dev, pInfos[i].pStages[j])
                if code is not None and uses_tensors(code):
                    wanted.setdefault(i, []).append((j, code))
        if not wanted:
            return None
        infos = ffi.new("VkGraphicsPipelineCreateInfo[]", count)
        ffi.memmove(infos, pInfos, ffi.sizeof("VkGraphicsPipelineCreateInfo") * count)
        keep: list = [infos]
        modules: list = []
        for i, stages in wanted.items():
            n = pInfos[i].stageCount
            array = ffi.new("VkPipelineShaderStageCreateInfo[]", n)
            ffi.memmove(array, pInfos[i].pStages, ffi.sizeof("VkPipelineShaderStageCreateInfo") * n)
            keep.append(array)
            infos[i].pStages = array
            for j, code in stages:
                lower_stage(dev, st, array[j], code, int(pInfos[i].layout), f"pCreateInfos[{i}].pStages[{j}]",
                            "vkCreateGraphicsPipelines", modules, keep)
        pending_pipelines[int(ffi.cast("uintptr_t", infos))] = [modules, keep]
        return (device, cache, count, infos, pAllocator, pPipelines)

    @hooks.after("vkCreateGraphicsPipelines")
    def after_create_graphics(dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        after_create_compute(dev, result, device, cache, count, pInfos, pAllocator, pPipelines)

    @hooks.after("vkCreateComputePipelines")
    def after_create_compute(dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        entry = pending_pipelines.pop(int(ffi.cast("uintptr_t", pInfos)), None)
        if entry is None:
            return
        for module in entry[0]:
            dev.next.vkDestroyShaderModule(device, module, ffi.NULL)
            dev.res.shaders.pop(module, None)

    from .tensor_push import register as register_push   # push descriptors and update templates
    push_teardown = register_push(drv, state, lambda dev, st, command, count, pWrites, keep:
                                  set_writes(dev, st, command, count, pWrites, keep),
                                  translate_writes, memory_type, RECORD_BYTES)

    def teardown(dev: Device) -> None:
        if dev.tensors is not None:
            push_teardown(dev)
        st = dev.tensors.descriptors if dev.tensors is not None else None
        if st is not None:
            for handle in list(st.sets):
                free_set(dev, st, handle)
        tensors.teardown(ffi, dev)
    drv.tensors_teardown = teardown


from tessera.spirv.passes.tensors import DIMS_AT, RANK_AT, RECORD_WORDS, SCRATCH_AT, STRIDES_AT  # noqa: E402

RECORD_BYTES = RECORD_WORDS * 4
# An empty compute shader (SPIR-V 1.0, LocalSize 1 1 1): stands in for a tensor shader that cannot be lowered.
_EMPTY_WORDS = [
    0x07230203, 0x00010000, 0, 5, 0,
    (2 << 16) | 17, 1,                                   # OpCapability Shader
    (3 << 16) | 14, 0, 1,                                # OpMemoryModel Logical GLSL450
    (5 << 16) | 15, 5, 1, 0x6E69616D, 0,                 # OpEntryPoint GLCompute %1 "main"
    (6 << 16) | 16, 1, 17, 1, 1, 1,                      # OpExecutionMode %1 LocalSize 1 1 1
    (2 << 16) | 19, 2,                                   # %2 = OpTypeVoid
    (3 << 16) | 33, 3, 2,                                # %3 = OpTypeFunction %2
    (5 << 16) | 54, 2, 1, 0, 3,                          # %1 = OpFunction %2 None %3
    (2 << 16) | 248, 4,                                  # %4 = OpLabel
    (1 << 16) | 253, (1 << 16) | 56,                     # OpReturn; OpFunctionEnd
]
EMPTY_COMPUTE = struct.pack(f"<{len(_EMPTY_WORDS)}I", *_EMPTY_WORDS)
EMPTY = EMPTY_COMPUTE   # marker: "replace by the stage's empty shader"


def _empty_shader(model: int, modes: list[int]) -> bytes:
    """An empty shader of one execution model (the compute one above with another entry point)."""
    words = list(_EMPTY_WORDS)
    at = words.index((5 << 16) | 15)
    words[at + 1] = model
    local_size = words.index((6 << 16) | 16)
    del words[local_size:local_size + 6]
    words[local_size:local_size] = [(2 + len(modes)) << 16 | 16, 1, *modes] if modes else []
    return struct.pack(f"<{len(words)}I", *words)


# The stand-in for a stage whose tensor shader cannot be lowered, by VkShaderStageFlagBits.
EMPTY_SHADERS = {vk.VK_SHADER_STAGE_COMPUTE_BIT: EMPTY_COMPUTE,
                 vk.VK_SHADER_STAGE_VERTEX_BIT: _empty_shader(0, []),                   # Vertex
                 vk.VK_SHADER_STAGE_FRAGMENT_BIT: _empty_shader(4, [7])}                # Fragment, OriginUpperLeft

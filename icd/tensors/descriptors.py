"""VK_ARM_tensors descriptors and shaders in the emulated Mali.

Role: VK_DESCRIPTOR_TYPE_TENSOR_ARM on a backend without it, and the pipelines whose shaders use
SPV_ARM_tensors. A tensor descriptor is a storage buffer (the tensor's backing buffer, resources.py)
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
- push descriptors and update templates: push.py, through `translate_writes` here.

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

from .. import shader_modules
from ..driver import Driver
from ..feature import Feature
from ..objects import Device
from . import resources
from .push import TensorPush

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


class TensorDescriptors(Feature):
    """The extension's descriptor and pipeline hooks: one method per command (HookSet.bind). Its state
    is on the object (what a before-hook hands its after-hook, by the address of the copy it made) and
    on each device (DescriptorState, in the device's tensors state); push.py's TensorPush
    translates push descriptors and templates through this object's `state`, `set_writes`,
    `translate_writes` and `memory_type`."""

    def __init__(self, drv: Driver) -> None:
        self.ffi = drv.ffi
        self.log = drv.hooks.errors.log
        # address of the create info the driver made -> (its SetLayoutInfo, None for a pool; what it keeps alive)
        self.pending_layouts: dict[int, tuple[SetLayoutInfo | None, list]] = {}
        self.pending_pipelines: dict[int, list] = {}   # address of the create infos -> [lowered modules, keep]
        self.pending_updates: dict[int, list] = {}     # address of the translated writes -> what they keep alive
        # push descriptors and update templates (push.py), translated through this object
        self.push = TensorPush(drv, self, RECORD_BYTES)

    def refuse(self, command: str, message: str) -> None:
        self.log.warning("%s: %s", command, message)
        print(f"tessera: {resources.EXTENSION}: {command}: {message}", file=sys.stderr, flush=True)

    def state(self, dev: Device) -> DescriptorState | None:
        st = dev.tensors
        if st is None:
            return None
        if st.descriptors is None:
            st.descriptors = DescriptorState()
        return st.descriptors

    def _address(self, pointer) -> int:
        return int(self.ffi.cast("uintptr_t", pointer))

    # ---- set layouts --------------------------------------------------------------------
    def before_vkCreateDescriptorSetLayout(self, dev, device, pCreateInfo, pAllocator, pSetLayout):
        if self.state(dev) is None:
            return None
        ffi = self.ffi
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
        self.pending_layouts[self._address(info)] = (SetLayoutInfo(meta, slots), keep)
        return (device, info, pAllocator, pSetLayout)

    def after_vkCreateDescriptorSetLayout(self, dev, result, device, pCreateInfo, pAllocator, pSetLayout):
        entry = self.pending_layouts.pop(self._address(pCreateInfo), None)
        if entry is not None and result == vk.VK_SUCCESS:
            self.state(dev).layouts[int(pSetLayout[0])] = entry[0]

    def before_vkDestroyDescriptorSetLayout(self, dev, device, layout, pAllocator):
        st = self.state(dev)
        if st is not None:
            st.layouts.pop(int(layout), None)

    # ---- pools and sets -------------------------------------------------------------------
    def before_vkCreateDescriptorPool(self, dev, device, pCreateInfo, pAllocator, pPool):
        if self.state(dev) is None:
            return None
        ffi = self.ffi
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
        self.pending_layouts[self._address(info)] = (None, keep)
        return (device, info, pAllocator, pPool)

    def after_vkCreateDescriptorPool(self, dev, result, device, pCreateInfo, pAllocator, pPool):
        self.pending_layouts.pop(self._address(pCreateInfo), None)

    def free_set(self, dev: Device, st: DescriptorState, handle: int) -> None:
        meta = st.sets.pop(handle, None)
        if meta is not None:
            dev.next.vkDestroyBuffer(dev.handle, meta.buffer, self.ffi.NULL)
            dev.next.vkFreeMemory(dev.handle, meta.memory, self.ffi.NULL)
            st.pools.get(meta.pool, set()).discard(handle)

    def before_vkDestroyDescriptorPool(self, dev, device, pool, pAllocator):
        st = self.state(dev)
        if st is not None:
            for handle in list(st.pools.pop(int(pool), ())):
                self.free_set(dev, st, handle)

    def after_vkResetDescriptorPool(self, dev, result, device, pool, flags):
        st = self.state(dev)
        if st is not None:
            for handle in list(st.pools.get(int(pool), ())):
                self.free_set(dev, st, handle)

    def before_vkFreeDescriptorSets(self, dev, device, pool, count, pSets):
        st = self.state(dev)
        if st is not None:
            for i in range(count):
                self.free_set(dev, st, int(pSets[i]))

    def memory_type(self, dev: Device, st: DescriptorState) -> int:
        if st.memory_type is None:
            mem = self.ffi.new("VkPhysicalDeviceMemoryProperties *")
            dev.physical.next.vkGetPhysicalDeviceMemoryProperties(dev.physical.handle, mem)
            want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
            st.memory_type = next(i for i in range(mem.memoryTypeCount)
                                  if mem.memoryTypes[i].propertyFlags & want == want)
        return st.memory_type

    def after_vkAllocateDescriptorSets(self, dev, result, device, pAllocateInfo, pSets):
        st = self.state(dev)
        if st is None or result != vk.VK_SUCCESS:
            return
        ffi = self.ffi
        for i in range(pAllocateInfo.descriptorSetCount):
            layout = st.layouts.get(int(pAllocateInfo.pSetLayouts[i]))
            if layout is None:
                continue
            size = max(1, layout.records) * RECORD_BYTES
            binfo = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                                     "usage": vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT})
            buf = ffi.new("VkBuffer *")
            _check(dev.next.vkCreateBuffer(device, binfo, ffi.NULL, buf), "vkCreateBuffer")
            reqs = ffi.new("VkMemoryRequirements *")
            dev.next.vkGetBufferMemoryRequirements(device, buf[0], reqs)
            ainfo = ffi.new("VkMemoryAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                       "allocationSize": reqs.size,
                                                       "memoryTypeIndex": self.memory_type(dev, st)})
            mem = ffi.new("VkDeviceMemory *")
            _check(dev.next.vkAllocateMemory(device, ainfo, ffi.NULL, mem), "vkAllocateMemory")
            _check(dev.next.vkBindBufferMemory(device, buf[0], mem[0], 0), "vkBindBufferMemory")
            ptr = ffi.new("void **")
            _check(dev.next.vkMapMemory(device, mem[0], 0, vk.VK_WHOLE_SIZE, 0, ptr), "vkMapMemory")
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
    @staticmethod
    def record_bytes(view: resources.TensorView) -> bytes:
        """A tensor view's metadata record: dims, strides in elements, scratch element, rank."""
        t = view.tensor
        element = resources.FORMATS[view.format][0]
        words = [0] * RECORD_WORDS
        for i, (d, s) in enumerate(zip(t.dims, t.strides)):
            words[DIMS_AT + i] = d
            words[STRIDES_AT + i] = s // element
        words[SCRATCH_AT] = t.data_bytes // element
        words[RANK_AT] = t.rank
        return struct.pack(f"<{RECORD_WORDS}I", *words)

    def translate_writes(self, dev: Device, command: str, count: int, pWrites, layout_of, sink, keep: list):
        """The writes for the backend: tensor writes become storage-buffer writes of the tensors'
        buffers (their records go to `sink(record index, bytes)`), writes the emulation cannot
        take are skipped with a message. `layout_of(write)`: the SetLayoutInfo of the written set
        (None: not a set with tensors). Returns (count, writes) or None when nothing changes."""
        ffi = self.ffi
        tensor_writes = [i for i in range(count) if pWrites[i].descriptorType == TENSOR]
        wrong = {i: problem for i in range(count) if pWrites[i].descriptorType != TENSOR
                 and (problem := self.misplaced(layout_of(pWrites[i]), pWrites[i], i)) is not None}
        if not tensor_writes and not wrong:
            return None
        writes = ffi.new("VkWriteDescriptorSet[]", max(1, count))
        keep.append(writes)
        for i in range(count):
            writes[i] = pWrites[i]
        for i, problem in wrong.items():
            self.refuse(command, f"{problem}: the write is skipped")
            writes[i].descriptorCount = 0
        for i in tensor_writes:
            self._tensor_write(dev, command, i, pWrites[i], writes[i], layout_of, sink, keep)
        kept = [i for i in range(count) if writes[i].descriptorCount]
        if len(kept) != count:
            compact = ffi.new("VkWriteDescriptorSet[]", max(1, len(kept)))
            for j, i in enumerate(kept):
                compact[j] = writes[i]
            keep.append(compact)
            writes = compact
        return len(kept), writes

    def _tensor_write(self, dev: Device, command: str, i: int, w, out, layout_of, sink, keep: list) -> None:
        """translate_writes for one tensor write `w` (pDescriptorWrites[i]): `out`, its copy, becomes a
        storage-buffer write of the views' tensors' buffers (descriptorCount 0: skipped)."""
        ffi = self.ffi
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
            # a data-graph pipeline's tensors need DATA_GRAPH usage instead (icd/data_graph/)
            if not view.tensor.usage & (vk.VK_TENSOR_USAGE_SHADER_BIT_ARM | vk.VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM):
                problem = (f"pDescriptorWrites[{i}]: pTensorViews[{k}]'s tensor was not created with "
                           "VK_TENSOR_USAGE_SHADER_BIT_ARM or VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM")
                break
            infos[k] = {"buffer": view.tensor.buffer, "offset": 0, "range": vk.VK_WHOLE_SIZE}
            records.append((first + w.dstArrayElement + k, self.record_bytes(view)))
        if problem is not None:
            self.refuse(command, f"{problem}: the write is skipped")
            out.descriptorCount = 0
        else:
            for index, data in records:
                sink(w, index, data)
        nodes = [n for n in structs.chain(ffi, w.pNext)
                 if n.sType != vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_TENSOR_ARM]
        out.pNext = structs.rebuild_chain(ffi, nodes, keep)
        out.descriptorType = STORAGE
        out.pBufferInfo = infos

    def set_writes(self, dev: Device, st: DescriptorState, command: str, count: int, pWrites, keep: list):
        """translate_writes for descriptor sets: records go to each set's metadata buffer."""
        def layout_of(w):
            meta = st.sets.get(int(w.dstSet))
            return meta.layout if meta is not None else None

        def sink(w, index: int, data: bytes) -> None:
            self.ffi.memmove(st.sets[int(w.dstSet)].mapped + index * RECORD_BYTES, data, len(data))
        return self.translate_writes(dev, command, count, pWrites, layout_of, sink, keep)

    def before_vkUpdateDescriptorSets(self, dev, device, writeCount, pWrites, copyCount, pCopies):
        st = self.state(dev)
        if st is None:
            return None
        for i in range(copyCount):
            self.copy_records(st, pCopies[i])
        keep: list = []
        out = self.set_writes(dev, st, "vkUpdateDescriptorSets", writeCount, pWrites, keep)
        if out is None:
            return None
        self.pending_updates[self._address(out[1])] = keep
        return (device, out[0], out[1], copyCount, pCopies)

    @staticmethod
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

    def after_vkUpdateDescriptorSets(self, dev, result, device, writeCount, pWrites, copyCount, pCopies):
        self.pending_updates.pop(self._address(pWrites), None)

    def copy_records(self, st: DescriptorState, c) -> None:
        src, dst = st.sets.get(int(c.srcSet)), st.sets.get(int(c.dstSet))
        if src is None or dst is None or c.srcBinding not in src.layout.slots or c.dstBinding not in dst.layout.slots:
            return
        s_first, _ = src.layout.slots[c.srcBinding]
        d_first, _ = dst.layout.slots[c.dstBinding]
        n = c.descriptorCount * RECORD_BYTES
        data = bytes(self.ffi.buffer(src.mapped + (s_first + c.srcArrayElement) * RECORD_BYTES, n))
        self.ffi.memmove(dst.mapped + (d_first + c.dstArrayElement) * RECORD_BYTES, data, n)

    # ---- compute pipelines using tensors --------------------------------------------------------
    @staticmethod
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

    def lowered_module(self, dev: Device, st: DescriptorState, code: bytes, layout: int,
                       spec_values: dict[int, bytes] | None = None) -> tuple[bytes, str | None]:
        """The lowered SPIR-V (or EMPTY) and the reason it could not be lowered. Specialization
        constants are frozen first with the stage's values (tensor ranks and coordinate-array lengths
        may be specialization constants, as in Arm's ML emulation layer's shaders): the lowered
        module is the specialized one."""
        from tessera.spirv import SpirvError, parse
        from tessera.spirv.passes.specialize import freeze_spec_constants
        from tessera.spirv.passes.tensors import lower_tensors

        try:
            module = parse(code)
            freeze_spec_constants(module, spec_values)
            lower_tensors(module, self.bindings_for(dev, st, layout))
            return module.to_bytes(), None
        except SpirvError as e:
            return EMPTY, str(e)

    def lower_stage(self, dev: Device, st: DescriptorState, stage, code: bytes, layout: int, where: str,
                    command: str, modules: list, keep: list) -> None:
        """Point `stage` (a copy the driver owns) at a backend module of the lowered shader; a shader
        that cannot be lowered (or a device without shaderTensorAccess) gets an empty one."""
        ffi, refuse = self.ffi, self.refuse
        if not dev.tensors.features.shader_access:
            refuse(command, f"{where} uses tensors in a shader but the shaderTensorAccess feature is not "
                   "enabled: the shader is replaced by an empty one")
            lowered, problem = EMPTY, None
        else:
            from tessera.spirv import SpirvError
            from tessera.vkapi.pipelines import _spec_values

            try:
                spec = _spec_values(ffi, stage.pSpecializationInfo)
            except SpirvError as e:
                lowered, problem = EMPTY, str(e)
            else:
                lowered, problem = self.lowered_module(dev, st, code, layout, spec)
        if problem is not None:
            refuse(command, f"{where}: the tensor shader cannot be lowered ({problem}): it is replaced by an "
                   "empty one")
        empty = lowered is EMPTY
        if empty:
            lowered = EMPTY_SHADERS.get(stage.stage)
            if lowered is None:
                refuse(command, f"{where}: no empty stand-in for stage 0x{stage.stage:x}: left as it is")
                return
        result, module = shader_modules.create(ffi, dev, lowered)
        if result != vk.VK_SUCCESS:
            refuse(command, f"{where}: the backend refused the lowered tensor shader")
            return
        dev.res.shaders[int(module)] = lowered
        modules.append(int(module))
        stage.module = module
        nodes = [n for n in structs.chain(ffi, stage.pNext)
                 if n.sType != vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO]
        stage.pNext = structs.rebuild_chain(ffi, nodes, keep)
        # the lowered module is specialized already (lowered_module), the empty one has nothing to specialize
        stage.pSpecializationInfo = ffi.NULL
        if empty:
            name = ffi.new("char[]", b"main")
            keep.append(name)
            stage.pName = name

    def before_vkCreateComputePipelines(self, dev, device, cache, count, pInfos, pAllocator, pPipelines):
        from tessera.spirv.passes.tensors import uses_tensors
        from tessera.vkapi.pipelines import _stage_code

        st = self.state(dev)
        if st is None:
            return None
        ffi = self.ffi
        codes = [_stage_code(ffi, dev, pInfos[i].stage) for i in range(count)]
        wanted = [i for i, code in enumerate(codes) if code is not None and uses_tensors(code)]
        if not wanted:
            return None
        infos = ffi.new("VkComputePipelineCreateInfo[]", count)
        ffi.memmove(infos, pInfos, ffi.sizeof("VkComputePipelineCreateInfo") * count)
        keep: list = [infos]
        modules: list = []
        for i in wanted:
            self.lower_stage(dev, st, infos[i].stage, codes[i], int(pInfos[i].layout), f"pCreateInfos[{i}]",
                             "vkCreateComputePipelines", modules, keep)
        self.pending_pipelines[self._address(infos)] = [modules, keep]
        return (device, cache, count, infos, pAllocator, pPipelines)

    def before_vkCreateGraphicsPipelines(self, dev, device, cache, count, pInfos, pAllocator, pPipelines):
        """Graphics stages reading or writing tensors (shaderTensorSupportedStages: fragment tested),
        lowered as compute stages are."""
        from tessera.spirv.passes.tensors import uses_tensors
        from tessera.vkapi.pipelines import _stage_code

        st = self.state(dev)
        if st is None:
            return None
        ffi = self.ffi
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
                self.lower_stage(dev, st, array[j], code, int(pInfos[i].layout), f"pCreateInfos[{i}].pStages[{j}]",
                                 "vkCreateGraphicsPipelines", modules, keep)
        self.pending_pipelines[self._address(infos)] = [modules, keep]
        return (device, cache, count, infos, pAllocator, pPipelines)

    def after_vkCreateGraphicsPipelines(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        self._created_pipelines(dev, device, pInfos)

    def after_vkCreateComputePipelines(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        self._created_pipelines(dev, device, pInfos)

    def _created_pipelines(self, dev, device, pInfos) -> None:
        """The lowered modules of the pipelines just created go (the pipelines keep their code)."""
        entry = self.pending_pipelines.pop(self._address(pInfos), None)
        if entry is None:
            return
        for module in entry[0]:
            dev.next.vkDestroyShaderModule(device, module, self.ffi.NULL)
            dev.res.shaders.pop(module, None)

    def destroyed(self, dev: Device) -> None:
        """Before vkDestroyDevice (icd/feature.py): the push metadata chunks, the sets' metadata buffers;
        the tensors go next (resources.py's Tensors, listed before this feature)."""
        if dev.tensors is not None:
            self.push.teardown(dev)
        st = dev.tensors.descriptors if dev.tensors is not None else None
        if st is not None:
            for handle in list(st.sets):
                self.free_set(dev, st, handle)


def _check(result: int, what: str) -> None:
    if result != vk.VK_SUCCESS:
        raise RuntimeError(f"{what} failed ({result})")


def register(drv: Driver) -> TensorDescriptors:
    f = TensorDescriptors(drv)
    drv.hooks.bind(f)
    drv.hooks.bind(f.push)
    drv.features.append(f)
    return f


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

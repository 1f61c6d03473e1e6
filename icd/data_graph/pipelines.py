"""VK_ARM_data_graph's pipelines and sessions in the emulated Mali: the `DataGraph` feature.

Role: the device lifecycle (icd/feature.py: the backend device gets VK_KHR_push_descriptor for the kernels;
DeviceGraphs made when the dataGraph feature is on, its objects destroyed with the device);
vkCreateDataGraphPipelinesARM from a SPIR-V graph module (graph.py) lowered to compute kernels (lowering.py),
with the resources' tensor descriptions and the constants (VkDataGraphPipelineConstantARM with a chained
VkTensorDescriptionARM, strided or packed) checked against the graph; the pipeline cache is accepted and not
used (a pipeline is made from its module at once); vkGetDataGraphPipelineAvailablePropertiesARM /
vkGetDataGraphPipelinePropertiesARM (creation log, identifier); vkDestroyPipeline of one (the backend gets
VK_NULL_HANDLE); sessions: create, bind-point requirements (one TRANSIENT memory object: the intermediate
tensors), memory requirements, bind, destroy; the tensor views written into descriptor sets
(vkUpdateDescriptorSets), which a dispatch looks its tensors up in; each compute pipeline's layout.

Invalid usage is refused validation-style: a message naming the rule on stderr and in the log,
VK_ERROR_VALIDATION_FAILED from commands that return a VkResult. Threads: see __init__.py.
"""
from __future__ import annotations

import hashlib
import itertools
import struct
from typing import Any

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from ..driver import Driver
from ..feature import DeviceRequest, Feature
from ..objects import Device, adopt, release
from ..tensors import resources as tensor_resources
from . import commands, graph, kernels, lowering, physical, quantized
from .objects import (EXTENSION, FORMATS, VALIDATION_FAILED, DataGraphError, DataGraphPipeline, DeviceGraphs, Hooks,
                      Session, format_names, operator_costs)

PUSH_DESCRIPTOR = "VK_KHR_push_descriptor"
_handles = itertools.count(0x7E55_DA7A_0001)


def _params_block(k: lowering.Kernel) -> bytes:
    return struct.pack(f"<{len(k.params)}I", *(w & 0xFFFFFFFF for w in k.params))


def constant_data(ffi, pointer, dims: tuple[int, ...], strides: tuple[int, ...] | None, element: str) -> bytes:
    """A graph constant's data (VkDataGraphPipelineConstantARM::pConstantData, laid out by its description's
    strides when given) as the graph keeps it: packed fp32, or one int32 word per element for an integer
    constant (quantized.py), sign-extended."""
    import numpy as np

    dtype = np.dtype({"float32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32}[element])
    size = dtype.itemsize
    count = 1
    for d in dims:
        count *= d
    if strides is None or strides == tensor_resources.packed_strides(dims, size):
        values = np.frombuffer(bytes(ffi.buffer(pointer, count * size)), dtype=dtype)
    else:
        span = sum((d - 1) * s for d, s in zip(dims, strides)) + size
        raw = np.frombuffer(bytes(ffi.buffer(pointer, span)), dtype=np.uint8)
        values = np.ascontiguousarray(np.lib.stride_tricks.as_strided(
            raw[:span - span % size].view(dtype), shape=dims, strides=strides))
    return values.astype(np.int32 if element != "float32" else np.float32).tobytes()


class DataGraph(Hooks, Feature):
    """Pipelines, sessions and the device lifecycle: one method per command (HookSet.bind)."""

    label = EXTENSION

    def __init__(self, drv: Driver) -> None:
        super().__init__(drv)
        self._graph_modules: dict[int, tuple] = {}   # pShaderModule address -> (graph code, the backend's info)
        self._empty = None                           # (bytes, uint32_t[]) of shaders/empty.comp

    # ---- device lifecycle (icd/feature.py) ---------------------------------------------------
    def wants(self, request: DeviceRequest) -> bool:
        return EXTENSION in request.names

    def enable(self, request: DeviceRequest) -> None:
        """The kernels push their descriptors (kernels.py): the backend device gets VK_KHR_push_descriptor."""
        ffi, info = self.ffi, request.info
        names = structs.strings(ffi, info.ppEnabledExtensionNames, info.enabledExtensionCount)
        if PUSH_DESCRIPTOR not in names and PUSH_DESCRIPTOR in (request.phys.extensions or {}):
            info.ppEnabledExtensionNames = structs.string_array(ffi, [*names, PUSH_DESCRIPTOR], request.keep)
            info.enabledExtensionCount = len(names) + 1

    def created(self, dev: Device, request: DeviceRequest) -> None:
        f = structs.find(self.ffi, request.create_info.pNext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DATA_GRAPH_FEATURES_ARM,
                         "VkPhysicalDeviceDataGraphFeaturesARM *")
        if f is None or not f.dataGraph:
            return   # the extension without its feature: every command is refused (device_state)
        shader_module = bool(f.dataGraphShaderModule)
        dev.slot(DeviceGraphs, lambda: DeviceGraphs(kernels.setup(self.ffi, dev), shader_module=shader_module))

    def destroyed(self, dev: Device) -> None:
        st = dev.drop(DeviceGraphs) if dev.peek(DeviceGraphs) is not None else None
        if st is None:
            return
        ffi = self.ffi
        for s in st.sessions.values():
            dev.next.vkDestroyBuffer(dev.handle, s.buffer, ffi.NULL)
        for p in st.pipelines.values():
            kernels.free_host_buffer(ffi, dev, p.constants)
        kernels.destroy(ffi, dev, st.kernels)

    # ---- pipelines -----------------------------------------------------------------------------
    def replace_vkCreateDataGraphPipelinesARM(self, device, deferredOperation, pipelineCache, count, pCreateInfos,
                                              pAllocator, pPipelines):
        dev = self.objects.get(device, Device)
        result = vk.VK_SUCCESS
        for i in range(count):
            pPipelines[i] = 0
        for i in range(count):
            try:
                st = self.device_state(dev)
                if deferredOperation:
                    raise DataGraphError("deferredOperation must be VK_NULL_HANDLE (VUID-vkCreateDataGraphPipelinesARM-"
                                         "deferredOperation-09761): this driver creates data-graph pipelines at once")
                p = self._pipeline(dev, st, pCreateInfos[i], i)
            except (DataGraphError, graph.GraphError, lowering.LoweringError, kernels.KernelError) as e:
                self.refuse("vkCreateDataGraphPipelinesARM", f"pCreateInfos[{i}]: {e}")
                result = VALIDATION_FAILED
                continue
            st.pipelines[p.handle] = p
            adopt(dev, p)
            pPipelines[i] = p.handle
        return result

    def _module(self, dev: Device, info, i: int) -> tuple[bytes, str, Any]:
        ffi = self.ffi
        sm = structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SHADER_MODULE_CREATE_INFO_ARM,
                          "VkDataGraphPipelineShaderModuleCreateInfoARM *")
        if sm is None:
            if structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_IDENTIFIER_CREATE_INFO_ARM,
                            "VkDataGraphPipelineIdentifierCreateInfoARM *") is not None:
                raise DataGraphError("creating a pipeline from VkDataGraphPipelineIdentifierCreateInfoARM is not "
                                     "supported (this driver keeps no pipeline binaries)")
            raise DataGraphError("its pNext has no VkDataGraphPipelineShaderModuleCreateInfoARM")
        if not self.device_state(dev).shader_module:
            raise DataGraphError("VkDataGraphPipelineShaderModuleCreateInfoARM needs the dataGraphShaderModule feature "
                                 "(VkPhysicalDeviceDataGraphFeaturesARM::dataGraphShaderModule), not enabled")
        if sm.pName == ffi.NULL:
            raise DataGraphError("VkDataGraphPipelineShaderModuleCreateInfoARM::pName is NULL")
        entry = ffi.string(sm.pName).decode()
        if sm.module:
            code = dev.res.shaders.get(int(sm.module))
            if code is None:
                raise DataGraphError("VkDataGraphPipelineShaderModuleCreateInfoARM::module is not a shader module "
                                     "of this device")
        else:   # maintenance5: the module's create info chained instead
            ci = structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                              "VkShaderModuleCreateInfo *")
            if ci is None:
                raise DataGraphError("VkDataGraphPipelineShaderModuleCreateInfoARM::module is VK_NULL_HANDLE and no "
                                     "VkShaderModuleCreateInfo is chained")
            code = bytes(ffi.buffer(ci.pCode, ci.codeSize))
        spec = sm.pSpecializationInfo
        if spec != ffi.NULL and spec.mapEntryCount:
            raise DataGraphError("pSpecializationInfo has entries but the dataGraphSpecializationConstants feature "
                                 "is not supported")
        return code, entry, sm

    def _described(self, desc, what: str) -> tuple[tuple[int, ...], tuple[int, ...] | None, int]:
        """(dims, strides or None, format) of a chained VkTensorDescriptionARM."""
        ffi = self.ffi
        dims = tuple(int(desc.pDimensions[k]) for k in range(desc.dimensionCount)) if desc.pDimensions != ffi.NULL \
            else ()
        strides = tuple(int(desc.pStrides[k]) for k in range(desc.dimensionCount)) if desc.pStrides != ffi.NULL \
            else None
        return dims, strides, int(desc.format)

    def _pipeline(self, dev: Device, st: DeviceGraphs, info, i: int) -> DataGraphPipeline:
        ffi = self.ffi
        if info.sType != vk.VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_CREATE_INFO_ARM:
            raise DataGraphError(f"sType is {info.sType}, not VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_CREATE_INFO_ARM")
        if not info.layout:
            raise DataGraphError("layout is VK_NULL_HANDLE")
        engines = structs.find(ffi, info.pNext, vk.VK_STRUCTURE_TYPE_DATA_GRAPH_PROCESSING_ENGINE_CREATE_INFO_ARM,
                               "VkDataGraphProcessingEngineCreateInfoARM *")
        if engines is not None:
            for k in range(engines.processingEngineCount):
                e = engines.pProcessingEngines[k]
                if e.type != vk.VK_PHYSICAL_DEVICE_DATA_GRAPH_PROCESSING_ENGINE_TYPE_DEFAULT_ARM or e.isForeign:
                    raise DataGraphError(f"pProcessingEngines[{k}] is not an engine of this device (it has one: "
                                         "DEFAULT, not foreign)")
        code, entry, sm = self._module(dev, info, i)
        g = graph.read(code, entry)
        plan = lowering.plan(g)
        # resources: each interface variable of the graph needs its tensor description, equal to the graph's
        described = {}
        for r in range(info.resourceInfoCount):
            ri = info.pResourceInfos[r]
            desc = structs.find(ffi, ri.pNext, vk.VK_STRUCTURE_TYPE_TENSOR_DESCRIPTION_ARM, "VkTensorDescriptionARM *")
            if desc is None:
                raise DataGraphError(f"pResourceInfos[{r}] (set {ri.descriptorSet}, binding {ri.binding}) has no "
                                     "VkTensorDescriptionARM in its pNext chain")
            described[(ri.descriptorSet, ri.binding, ri.arrayElement)] = self._described(desc, f"pResourceInfos[{r}]")
        for kind, interfaces in (("input", g.inputs), ("output", g.outputs)):
            for itf in interfaces:
                d = described.get((itf.set, itf.binding, 0))
                if d is None:
                    raise DataGraphError(f"the graph's {kind} {itf.index} (set {itf.set}, binding {itf.binding}) has "
                                         "no VkDataGraphPipelineResourceInfoARM")
                if d[0] != itf.type.shape:
                    raise DataGraphError(f"pResourceInfos for set {itf.set}, binding {itf.binding}: dimensions "
                                         f"{list(d[0])} differ from the graph's {kind} {itf.index} "
                                         f"({list(itf.type.shape)})")
                if d[2] not in FORMATS[itf.type.element]:
                    raise DataGraphError(f"pResourceInfos for set {itf.set}, binding {itf.binding}: format {d[2]} is "
                                         f"not {format_names(itf.type.element)} (the graph's {kind} {itf.index} is "
                                         f"{itf.type})")
        # constants: literal ones from the module, graph constants from pConstants
        data = bytearray(plan.constant_bytes)
        for v, blob in plan.constants.items():
            at = plan.places[v].where
            data[at:at + len(blob)] = blob
        given = {int(sm.pConstants[k].id): sm.pConstants[k] for k in range(sm.constantCount)} \
            if sm.pConstants != ffi.NULL else {}
        for v, cid in plan.graph_constants.items():
            t = g.graph_constants[v][0]
            c = given.get(cid)
            if c is None:
                raise DataGraphError(f"the graph uses constant id {cid} ({t}) but "
                                     "VkDataGraphPipelineShaderModuleCreateInfoARM::pConstants has none with that id")
            desc = structs.find(ffi, c.pNext, vk.VK_STRUCTURE_TYPE_TENSOR_DESCRIPTION_ARM, "VkTensorDescriptionARM *")
            if desc is None:
                raise DataGraphError(f"constant id {cid} has no VkTensorDescriptionARM in its pNext chain")
            dims, strides, fmt = self._described(desc, f"constant {cid}")
            if dims != t.shape or fmt not in FORMATS[t.element]:
                raise DataGraphError(f"constant id {cid}: description {list(dims)} format {fmt} differs from the "
                                     f"graph's {t} ({format_names(t.element)})")
            if c.pConstantData == ffi.NULL:
                raise DataGraphError(f"constant id {cid}: pConstantData is NULL")
            blob = constant_data(ffi, c.pConstantData, dims, strides, t.element)
            at = plan.places[v].where
            data[at:at + len(blob)] = blob
        quantized.check_constants(plan, bytes(data))   # RESCALE scales from graph constants, now known
        params_at, params = [], bytearray()
        base = len(data)
        for k in plan.kernels:
            params_at.append(base + len(params))
            block = _params_block(k)
            params += block.ljust((len(block) + lowering.ALIGN - 1) // lowering.ALIGN * lowering.ALIGN, b"\0")
        buffer = kernels.host_buffer(ffi, dev, st.kernels, bytes(data) + bytes(params))
        costs = operator_costs(plan, self.drv.profile)
        log = "\n".join([f"Tessera emulated Mali: graph '{entry}', {len(costs)} operators as {len(plan.kernels)} "
                         "compute kernels"]
                        + [f"{c['operator']} {c['shape']}: {c['ops']} ops, {c['bytes']} bytes, {c['ns']} ns"
                           for c in costs])
        ident = hashlib.sha256(code + entry.encode()).digest()[:16]
        return DataGraphPipeline(next(_handles), g, plan, int(info.layout), buffer, params_at, log, ident)

    def before_vkDestroyPipeline(self, dev, device, pipeline, pAllocator):
        """A data-graph pipeline is the driver's: destroyed here, and the backend gets VK_NULL_HANDLE."""
        st = dev.peek(DeviceGraphs)
        p = st.pipelines.get(int(pipeline)) if st is not None and pipeline else None
        if p is None:
            return None
        if p.sessions:
            self.refuse("vkDestroyPipeline", f"the data-graph pipeline still has {p.sessions} session(s); they keep "
                        "working until destroyed")
        st.pipelines.pop(p.handle)
        release(dev, p.handle)
        if not p.sessions:
            kernels.free_host_buffer(self.ffi, dev, p.constants)
        return (device, 0, pAllocator)

    def after_vkCreateComputePipelines(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        """Each compute pipeline's layout (set layouts, push ranges): what a dispatch must leave undisturbed."""
        st = dev.peek(DeviceGraphs)
        if st is None:
            return
        for i in range(count):
            if pPipelines[i]:
                layout = dev.pipeline_layouts.get(int(pInfos[i].layout))
                if layout is not None:
                    st.compute_layouts[int(pPipelines[i])] = layout

    def replace_vkGetDataGraphPipelineAvailablePropertiesARM(self, device, pPipelineInfo, pCount, pProperties):
        dev = self.objects.get(device, Device)
        try:
            self.graph_pipeline(self.device_state(dev), pPipelineInfo.dataGraphPipeline, "dataGraphPipeline")
        except DataGraphError as e:
            self.refuse("vkGetDataGraphPipelineAvailablePropertiesARM", str(e))
            return VALIDATION_FAILED
        available = (vk.VK_DATA_GRAPH_PIPELINE_PROPERTY_CREATION_LOG_ARM, vk.VK_DATA_GRAPH_PIPELINE_PROPERTY_IDENTIFIER_ARM)
        if pProperties == self.ffi.NULL:
            pCount[0] = len(available)
            return vk.VK_SUCCESS
        n = min(pCount[0], len(available))
        for k in range(n):
            pProperties[k] = available[k]
        pCount[0] = n
        return vk.VK_INCOMPLETE if n < len(available) else vk.VK_SUCCESS

    def replace_vkGetDataGraphPipelinePropertiesARM(self, device, pPipelineInfo, count, pProperties):
        ffi = self.ffi
        dev = self.objects.get(device, Device)
        try:
            p = self.graph_pipeline(self.device_state(dev), pPipelineInfo.dataGraphPipeline, "dataGraphPipeline")
        except DataGraphError as e:
            self.refuse("vkGetDataGraphPipelinePropertiesARM", str(e))
            return VALIDATION_FAILED
        result = vk.VK_SUCCESS
        for k in range(count):
            q = pProperties[k]
            if q.property == vk.VK_DATA_GRAPH_PIPELINE_PROPERTY_CREATION_LOG_ARM:
                data, text = p.log.encode() + b"\0", True
            elif q.property == vk.VK_DATA_GRAPH_PIPELINE_PROPERTY_IDENTIFIER_ARM:
                data, text = p.identifier, False
            else:
                self.refuse("vkGetDataGraphPipelinePropertiesARM", f"pProperties[{k}].property {q.property} is not "
                            "available (vkGetDataGraphPipelineAvailablePropertiesARM)")
                return VALIDATION_FAILED
            q.isText = vk.VK_TRUE if text else vk.VK_FALSE
            if q.pData == ffi.NULL:
                q.dataSize = len(data)
                continue
            n = min(int(q.dataSize), len(data))
            ffi.memmove(q.pData, data, n)
            if n < len(data):
                if text and n:
                    ffi.cast("char *", q.pData)[n - 1] = b"\0"
                result = vk.VK_INCOMPLETE
            q.dataSize = n
        return result

    # ---- sessions ------------------------------------------------------------------------------
    def replace_vkCreateDataGraphPipelineSessionARM(self, device, pCreateInfo, pAllocator, pSession):
        dev = self.objects.get(device, Device)
        try:
            st = self.device_state(dev)
            if pCreateInfo.sType != vk.VK_STRUCTURE_TYPE_DATA_GRAPH_PIPELINE_SESSION_CREATE_INFO_ARM:
                raise DataGraphError("pCreateInfo is not a VkDataGraphPipelineSessionCreateInfoARM")
            if pCreateInfo.flags & vk.VK_DATA_GRAPH_PIPELINE_SESSION_CREATE_PROTECTED_BIT_ARM:
                raise DataGraphError("VK_DATA_GRAPH_PIPELINE_SESSION_CREATE_PROTECTED_BIT_ARM: the device has no "
                                     "protected memory")
            p = self.graph_pipeline(st, pCreateInfo.dataGraphPipeline, "pCreateInfo->dataGraphPipeline")
            buffer = kernels.storage_buffer(self.ffi, dev, p.plan.transient_bytes)
        except (DataGraphError, kernels.KernelError) as e:
            self.refuse("vkCreateDataGraphPipelineSessionARM", str(e))
            return VALIDATION_FAILED
        s = Session(next(_handles), p, buffer)
        p.sessions += 1
        st.sessions[s.handle] = s
        adopt(dev, s)
        pSession[0] = s.handle
        return vk.VK_SUCCESS

    def replace_vkGetDataGraphPipelineSessionBindPointRequirementsARM(self, device, pInfo, pCount, pRequirements):
        dev = self.objects.get(device, Device)
        try:
            self.session(self.device_state(dev), pInfo.session, "pInfo->session")
        except DataGraphError as e:
            self.refuse("vkGetDataGraphPipelineSessionBindPointRequirementsARM", str(e))
            return VALIDATION_FAILED
        if pRequirements == self.ffi.NULL:
            pCount[0] = 1
            return vk.VK_SUCCESS
        if pCount[0] == 0:
            return vk.VK_INCOMPLETE
        r = pRequirements[0]
        r.bindPoint = vk.VK_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_TRANSIENT_ARM
        r.bindPointType = vk.VK_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_TYPE_MEMORY_ARM
        r.numObjects = 1
        pCount[0] = 1
        return vk.VK_SUCCESS

    def _bind_point(self, info, command: str) -> None:
        if info.bindPoint != vk.VK_DATA_GRAPH_PIPELINE_SESSION_BIND_POINT_TRANSIENT_ARM:
            raise DataGraphError(f"bindPoint {info.bindPoint} is not one of the session's bind points (TRANSIENT)")
        if info.objectIndex != 0:
            raise DataGraphError(f"objectIndex {info.objectIndex} is not below the bind point's numObjects (1)")

    def replace_vkGetDataGraphPipelineSessionMemoryRequirementsARM(self, device, pInfo, pMemoryRequirements):
        dev = self.objects.get(device, Device)
        try:
            s = self.session(self.device_state(dev), pInfo.session, "pInfo->session")
            self._bind_point(pInfo, "vkGetDataGraphPipelineSessionMemoryRequirementsARM")
        except DataGraphError as e:
            self.refuse("vkGetDataGraphPipelineSessionMemoryRequirementsARM", str(e))
            pMemoryRequirements.memoryRequirements.size = 0
            return
        reqs = self.ffi.new("VkMemoryRequirements *")
        dev.next.vkGetBufferMemoryRequirements(dev.handle, s.buffer, reqs)
        pMemoryRequirements.memoryRequirements = reqs[0]

    def replace_vkBindDataGraphPipelineSessionMemoryARM(self, device, count, pBindInfos):
        dev = self.objects.get(device, Device)
        for i in range(count):
            b = pBindInfos[i]
            try:
                s = self.session(self.device_state(dev), b.session, f"pBindInfos[{i}].session")
                self._bind_point(b, "vkBindDataGraphPipelineSessionMemoryARM")
                if s.memory:
                    raise DataGraphError(f"pBindInfos[{i}]: the session's TRANSIENT memory is already bound")
            except DataGraphError as e:
                self.refuse("vkBindDataGraphPipelineSessionMemoryARM", str(e))
                return VALIDATION_FAILED
            result = dev.next.vkBindBufferMemory(dev.handle, s.buffer, b.memory, b.memoryOffset)
            if result != vk.VK_SUCCESS:
                return result
            s.memory = int(b.memory)
        return vk.VK_SUCCESS

    def replace_vkDestroyDataGraphPipelineSessionARM(self, device, session, pAllocator):
        dev = self.objects.get(device, Device)
        st = dev.peek(DeviceGraphs)
        s = st.sessions.pop(int(session), None) if st is not None and session else None
        if s is None:
            return
        release(dev, s.handle)
        dev.next.vkDestroyBuffer(dev.handle, s.buffer, self.ffi.NULL)
        s.pipeline.sessions -= 1
        if s.pipeline.sessions == 0 and s.pipeline.handle not in st.pipelines:
            kernels.free_host_buffer(self.ffi, dev, s.pipeline.constants)

    # ---- graph modules: the driver's alone ----------------------------------------------------
    def before_vkCreateShaderModule(self, dev, device, pCreateInfo, pAllocator, pShaderModule):
        """A module declaring GraphARM (a data graph, OpCapability 4191) reaches the backend as an empty compute
        shader; the graph's code is kept for the driver (after_vkCreateShaderModule)."""
        if dev.peek(DeviceGraphs) is None or pCreateInfo.codeSize < 24:
            return None
        ffi = self.ffi
        code = bytes(ffi.buffer(pCreateInfo.pCode, pCreateInfo.codeSize))
        if not graph.declares_graph(code):
            return None
        keep = self._stand_in(ffi)
        info = ffi.new("VkShaderModuleCreateInfo *", pCreateInfo[0])
        info.codeSize, info.pCode = len(keep[1]) * 4, keep[1]
        self._graph_modules[int(ffi.cast("uintptr_t", pShaderModule))] = (code, info)
        return (device, info, pAllocator, pShaderModule)

    def after_vkCreateShaderModule(self, dev, result, device, pCreateInfo, pAllocator, pShaderModule):
        pending = self._graph_modules.pop(int(self.ffi.cast("uintptr_t", pShaderModule)), None)
        if pending is not None and result == vk.VK_SUCCESS:
            dev.res.shaders[int(pShaderModule[0])] = pending[0]   # what vkapi.pipelines keeps: the graph

    def _stand_in(self, ffi):
        if self._empty is None:
            code = kernels.shader_code("empty")
            words = ffi.new("uint32_t[]", len(code) // 4)
            ffi.memmove(words, code, len(code))
            self._empty = (code, words)
        return self._empty

    # ---- descriptors: which tensor each set holds --------------------------------------------
    def before_vkUpdateDescriptorSets(self, dev, device, writeCount, pWrites, copyCount, pCopies):
        st = dev.peek(DeviceGraphs)
        if st is None:
            return None
        ffi = self.ffi
        for i in range(writeCount):
            w = pWrites[i]
            if w.descriptorType != vk.VK_DESCRIPTOR_TYPE_TENSOR_ARM:
                continue
            views = structs.find(ffi, w.pNext, vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET_TENSOR_ARM,
                                 "VkWriteDescriptorSetTensorARM *")
            if views is None:
                continue
            for k in range(min(views.tensorViewCount, w.descriptorCount)):
                st.views[(int(w.dstSet), w.dstBinding, w.dstArrayElement + k)] = int(views.pTensorViews[k])
        for i in range(copyCount):
            c = pCopies[i]
            for k in range(c.descriptorCount):
                v = st.views.get((int(c.srcSet), c.srcBinding, c.srcArrayElement + k))
                if v is not None:
                    st.views[(int(c.dstSet), c.dstBinding, c.dstArrayElement + k)] = v
        return None


def register(drv: Driver) -> DataGraph:
    """The three hook classes; the feature joins the devices' lifecycle (drv.features)."""
    drv.hooks.bind(physical.PhysicalQueries(drv))
    drv.hooks.bind(commands.Commands(drv))
    feature = drv.hooks.bind(DataGraph(drv))
    drv.features.append(feature)
    return feature

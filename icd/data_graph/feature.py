"""VK_ARM_data_graph (and VK_ARM_data_graph_instruction_set_tosa) in the emulated Mali: the `DataGraph` feature.

Role: every command of the two extensions (vk.xml 1.4.366: VK_ARM_data_graph 508, spec version 1;
VK_ARM_data_graph_instruction_set_tosa 509, spec version 1), and the parts of core commands they extend:

- physical device: VkPhysicalDeviceDataGraphFeaturesARM (dataGraph, dataGraphShaderModule on; update after
  bind, specialization constants, descriptor buffers off); VK_QUEUE_DATA_GRAPH_BIT_ARM on every family with
  compute (a Mali runs graphs on its shader cores, so compute queues take them); one engine per such family
  (DEFAULT, not foreign) running the TOSA.001000.1 instruction set (vkGetPhysicalDeviceQueueFamilyDataGraph*,
  its TOSA properties: profile PRO-FP, level 8K); VK_FORMAT_FEATURE_2_TENSOR_DATA_GRAPH_BIT_ARM for the
  tensor format the graphs run on (R32_SFLOAT);
- pipelines: vkCreateDataGraphPipelinesARM from a SPIR-V graph module (graph.py) lowered to compute kernels
  (lowering.py), with the resources' tensor descriptions and the constants checked against the graph;
  vkGetDataGraphPipelineAvailablePropertiesARM / vkGetDataGraphPipelinePropertiesARM (creation log,
  identifier); vkDestroyPipeline of one (never passed to the backend);
- sessions: create, bind-point requirements (one TRANSIENT memory object: the intermediate tensors), memory
  requirements, bind, destroy;
- commands: vkCmdBindPipeline and vkCmdBindDescriptorSets at VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM (kept
  here, not passed down), vkCmdDispatchDataGraphARM (recorded as backend compute kernels, kernels.py).

Invalid usage is refused validation-style: a message naming the rule on stderr and in the log,
VK_ERROR_VALIDATION_FAILED from commands that return a VkResult; a dispatch that cannot run records
nothing. Threads: see __init__.py.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import struct
import sys
from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from .. import timing
from ..driver import Driver
from ..feature import DeviceRequest, Feature
from ..objects import CommandBuffer, Device, EmulatedObject, PhysicalDevice, adopt, release
from ..recording import Work
from ..tensors import resources as tensor_resources
from . import graph, kernels, lowering

EXTENSION = "VK_ARM_data_graph"
TOSA_EXTENSION = "VK_ARM_data_graph_instruction_set_tosa"
SPEC_VERSIONS = {EXTENSION: 1, TOSA_EXTENSION: 1}
BIND_POINT = vk.VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM
QUEUE_BIT = vk.VK_QUEUE_DATA_GRAPH_BIT_ARM
VALIDATION_FAILED = vk.VK_ERROR_VALIDATION_FAILED
TOSA_SET_NAME = "TOSA.001000.1"
TOSA_VERSION = 0x01000001            # (1 << 24) | 1: TOSA 1.0, SPIR-V extended instruction set version 1
TOSA_PROFILE = "PRO-FP"              # TOSA 1.0's floating-point profile (this driver runs fp32 graphs)
STAGE = "compute"                    # the render stage of a data-graph workload (see docs/ml.md)
COMMAND = "vkCmdDispatchDataGraphARM"
PUSH_DESCRIPTOR = "VK_KHR_push_descriptor"
_handles = itertools.count(0x7E55_DA7A_0001)


class DataGraphError(Exception):
    """Invalid usage of the extension: the message says which rule."""


@dataclass(eq=False)
class DataGraphPipeline(EmulatedObject):
    OBJECT_TYPE = vk.VK_OBJECT_TYPE_PIPELINE
    handle: int
    graph: graph.Graph
    plan: lowering.Plan
    layout: int                                  # the application's pipeline layout
    constants: kernels.HostBuffer                # literal and graph constants, then every kernel's parameters
    params_at: list[int]                         # byte offset of each kernel's parameters in `constants`
    log: str                                     # VK_DATA_GRAPH_PIPELINE_PROPERTY_CREATION_LOG_ARM
    identifier: bytes                            # VK_DATA_GRAPH_PIPELINE_PROPERTY_IDENTIFIER_ARM
    sessions: int = 0


@dataclass(eq=False)
class Session(EmulatedObject):
    OBJECT_TYPE = vk.VK_OBJECT_TYPE_DATA_GRAPH_PIPELINE_SESSION_ARM
    handle: int
    pipeline: DataGraphPipeline
    buffer: int                                  # backend buffer of the TRANSIENT bind point
    memory: int = 0


@dataclass
class DeviceGraphs:
    """Per device that enabled VK_ARM_data_graph with the dataGraph feature."""
    kernels: kernels.Kernels
    pipelines: dict[int, DataGraphPipeline] = field(default_factory=dict)
    sessions: dict[int, Session] = field(default_factory=dict)
    # (descriptor set, binding, array element) -> tensor view handle written there (vkUpdateDescriptorSets)
    views: dict[tuple[int, int, int], int] = field(default_factory=dict)
    compute_layouts: dict[int, tuple] = field(default_factory=dict)   # compute pipeline -> (set layouts, ranges)


@dataclass
class Bound:
    """A command buffer's data-graph binding state, and its last bound compute pipeline (to restore)."""
    pipeline: DataGraphPipeline | None = None
    sets: dict[int, int] = field(default_factory=dict)               # set index -> VkDescriptorSet
    compute: int = 0                                                 # backend compute pipeline bound by the app
    keep: list = field(default_factory=list)                         # structs of recorded pushes


def fma_per_ns(profile) -> float:
    """fp32 FMAs per ns of the profile's GPU: fmaRate per core per clock × cores × clock."""
    return profile.fma_rate * profile.shader_cores * profile.clock_mhz / 1000.0


def operator_costs(plan: lowering.Plan, profile) -> list[dict]:
    """Each kernel's cost on the profile's GPU: {operator, shape, ops, bytes, ns}."""
    rate = fma_per_ns(profile)
    return [{"operator": k.operator, "shape": "x".join(map(str, k.shape)), "ops": k.ops, "bytes": k.bytes,
             "ns": round(k.time_ns(rate, timing.MEMORY_BYTES_PER_NS), 1)} for k in plan.kernels]


def _params_block(k: lowering.Kernel) -> bytes:
    return struct.pack(f"<{len(k.params)}I", *(w & 0xFFFFFFFF for w in k.params))


class DataGraph(Feature):
    """The extension: one method per command (HookSet.bind). State: DeviceGraphs (device slot), Bound
    (command buffer slot)."""

    label = EXTENSION

    def __init__(self, drv: Driver) -> None:
        self.drv = drv
        self.ffi, self.objects = drv.ffi, drv.objects
        self.log = drv.hooks.errors.log

    def refuse(self, command: str, message: str) -> None:
        self.log.warning("%s: %s", command, message)
        print(f"tessera: {EXTENSION}: {command}: {message}", file=sys.stderr, flush=True)

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
        dev.slot(DeviceGraphs, lambda: DeviceGraphs(kernels.setup(self.ffi, dev)))

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

    def device_state(self, dev: Device) -> DeviceGraphs:
        st = dev.peek(DeviceGraphs)
        if st is None:
            raise DataGraphError("the device was created without VK_ARM_data_graph and the dataGraph feature "
                                 "(VkPhysicalDeviceDataGraphFeaturesARM::dataGraph)")
        return st

    # ---- physical device -----------------------------------------------------------------------
    def after_vkGetPhysicalDeviceFeatures2(self, phys, result, physicalDevice, pFeatures):
        f = structs.find(self.ffi, pFeatures.pNext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DATA_GRAPH_FEATURES_ARM,
                         "VkPhysicalDeviceDataGraphFeaturesARM *")
        if f is not None:
            f.dataGraph = f.dataGraphShaderModule = vk.VK_TRUE
            f.dataGraphUpdateAfterBind = f.dataGraphSpecializationConstants = vk.VK_FALSE
            f.dataGraphDescriptorBuffer = vk.VK_FALSE

    def after_vkGetPhysicalDeviceQueueFamilyProperties(self, phys, result, physicalDevice, pCount, pProperties):
        if pProperties != self.ffi.NULL:
            for i in range(pCount[0]):
                if pProperties[i].queueFlags & vk.VK_QUEUE_COMPUTE_BIT:
                    pProperties[i].queueFlags |= QUEUE_BIT

    def after_vkGetPhysicalDeviceQueueFamilyProperties2(self, phys, result, physicalDevice, pCount, pProperties):
        if pProperties != self.ffi.NULL:
            for i in range(pCount[0]):
                p = pProperties[i].queueFamilyProperties
                if p.queueFlags & vk.VK_QUEUE_COMPUTE_BIT:
                    p.queueFlags |= QUEUE_BIT

    def after_vkGetPhysicalDeviceFormatProperties2(self, phys, result, physicalDevice, fmt, pProperties):
        p = structs.find(self.ffi, pProperties.pNext, vk.VK_STRUCTURE_TYPE_TENSOR_FORMAT_PROPERTIES_ARM,
                         "VkTensorFormatPropertiesARM *")
        if p is not None and fmt == vk.VK_FORMAT_R32_SFLOAT:
            p.optimalTilingTensorFeatures |= vk.VK_FORMAT_FEATURE_2_TENSOR_DATA_GRAPH_BIT_ARM
            p.linearTilingTensorFeatures |= vk.VK_FORMAT_FEATURE_2_TENSOR_DATA_GRAPH_BIT_ARM

    def _family_flags(self, phys: PhysicalDevice, index: int) -> int | None:
        ffi = self.ffi
        count = ffi.new("uint32_t *")
        phys.next.vkGetPhysicalDeviceQueueFamilyProperties(phys.handle, count, ffi.NULL)
        if index >= count[0]:
            return None
        props = ffi.new("VkQueueFamilyProperties[]", count[0])
        phys.next.vkGetPhysicalDeviceQueueFamilyProperties(phys.handle, count, props)
        return int(props[index].queueFlags)

    def _graph_family(self, phys: PhysicalDevice, index: int) -> bool:
        flags = self._family_flags(phys, index)
        return flags is not None and bool(flags & vk.VK_QUEUE_COMPUTE_BIT)

    def replace_vkGetPhysicalDeviceQueueFamilyDataGraphPropertiesARM(self, physicalDevice, queueFamilyIndex, pCount,
                                                                     pProperties):
        phys = self.objects.get(physicalDevice, PhysicalDevice)
        if self._family_flags(phys, queueFamilyIndex) is None:
            self.refuse("vkGetPhysicalDeviceQueueFamilyDataGraphPropertiesARM",
                        f"queueFamilyIndex {queueFamilyIndex} is not a queue family of the physical device")
            return VALIDATION_FAILED
        available = 1 if self._graph_family(phys, queueFamilyIndex) else 0
        if pProperties == self.ffi.NULL:
            pCount[0] = available
            return vk.VK_SUCCESS
        n = min(pCount[0], available)
        for i in range(n):
            p = pProperties[i]
            p.engine.type = vk.VK_PHYSICAL_DEVICE_DATA_GRAPH_PROCESSING_ENGINE_TYPE_DEFAULT_ARM
            p.engine.isForeign = vk.VK_FALSE
            p.operation.operationType = vk.VK_PHYSICAL_DEVICE_DATA_GRAPH_OPERATION_TYPE_SPIRV_EXTENDED_INSTRUCTION_SET_ARM
            name = TOSA_SET_NAME.encode() + b"\0"
            self.ffi.memmove(p.operation.name, name, len(name))
            p.operation.version = TOSA_VERSION
        pCount[0] = n
        return vk.VK_INCOMPLETE if n < available else vk.VK_SUCCESS

    def replace_vkGetPhysicalDeviceQueueFamilyDataGraphProcessingEnginePropertiesARM(self, physicalDevice, pInfo,
                                                                                     pProperties):
        """The DEFAULT engine shares memory and semaphores with the device itself: no foreign handle types."""
        pProperties.foreignSemaphoreHandleTypes = 0
        pProperties.foreignMemoryHandleTypes = 0

    def replace_vkGetPhysicalDeviceQueueFamilyDataGraphEngineOperationPropertiesARM(
            self, physicalDevice, queueFamilyIndex, pQueueFamilyDataGraphProperties, pProperties):
        """VK_ARM_data_graph_instruction_set_tosa: the TOSA profile and level of the engine's TOSA operation."""
        ffi = self.ffi
        props = pQueueFamilyDataGraphProperties
        if props == ffi.NULL or ffi.string(props.operation.name).decode(errors="replace") != TOSA_SET_NAME:
            self.refuse("vkGetPhysicalDeviceQueueFamilyDataGraphEngineOperationPropertiesARM",
                        f"pQueueFamilyDataGraphProperties names no {TOSA_SET_NAME} operation of this device")
            return VALIDATION_FAILED
        if pProperties == ffi.NULL or pProperties.sType != vk.VK_STRUCTURE_TYPE_QUEUE_FAMILY_DATA_GRAPH_TOSA_PROPERTIES_ARM:
            self.refuse("vkGetPhysicalDeviceQueueFamilyDataGraphEngineOperationPropertiesARM",
                        "pProperties is not a VkQueueFamilyDataGraphTOSAPropertiesARM")
            return VALIDATION_FAILED
        t = ffi.cast("VkQueueFamilyDataGraphTOSAPropertiesARM *", pProperties)
        profiles = self._tosa_names
        t.profileCount = 1
        t.pProfiles = profiles
        t.extensionCount = 0
        t.pExtensions = ffi.NULL
        t.level = vk.VK_DATA_GRAPH_TOSA_LEVEL_8K_ARM
        return vk.VK_SUCCESS

    @property
    def _tosa_names(self):
        names = getattr(self, "_tosa_profiles", None)
        if names is None:
            names = self.ffi.new("VkDataGraphTOSANameQualityARM[1]")
            data = TOSA_PROFILE.encode() + b"\0"
            self.ffi.memmove(names[0].name, data, len(data))
            names[0].qualityFlags = vk.VK_DATA_GRAPH_TOSA_QUALITY_CONFORMANT_ARM
            self._tosa_profiles = names
        return names

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
                if d[2] != vk.VK_FORMAT_R32_SFLOAT:
                    raise DataGraphError(f"pResourceInfos for set {itf.set}, binding {itf.binding}: format {d[2]} is "
                                         "not VK_FORMAT_R32_SFLOAT (the graph's tensors are float32)")
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
            if dims != t.shape or fmt != vk.VK_FORMAT_R32_SFLOAT:
                raise DataGraphError(f"constant id {cid}: description {list(dims)} format {fmt} differs from the "
                                     f"graph's {t} (VK_FORMAT_R32_SFLOAT)")
            if c.pConstantData == ffi.NULL:
                raise DataGraphError(f"constant id {cid}: pConstantData is NULL")
            blob = self._packed(c.pConstantData, dims, strides)
            at = plan.places[v].where
            data[at:at + len(blob)] = blob
        params_at, params = [], bytearray()
        base = len(data)
        for k in plan.kernels:
            params_at.append(base + len(params))
            block = _params_block(k)
            params += block.ljust((len(block) + lowering.ALIGN - 1) // lowering.ALIGN * lowering.ALIGN, b"\0")
        buffer = kernels.host_buffer(ffi, dev, st.kernels, bytes(data) + bytes(params))
        costs = operator_costs(plan, self.drv.profile)
        log = "\n".join([f"Tessera emulated Mali: graph '{entry}', {len(plan.kernels)} operators as compute kernels"]
                        + [f"{c['operator']} {c['shape']}: {c['ops']} ops, {c['bytes']} bytes, {c['ns']} ns"
                           for c in costs])
        ident = hashlib.sha256(code + entry.encode()).digest()[:16]
        return DataGraphPipeline(next(_handles), g, plan, int(info.layout), buffer, params_at, log, ident)

    def _packed(self, pointer, dims: tuple[int, ...], strides: tuple[int, ...] | None) -> bytes:
        """fp32 data of a constant as packed bytes (from its strides when given)."""
        import numpy as np

        count = 1
        for d in dims:
            count *= d
        if strides is None or strides == tensor_resources.packed_strides(dims, 4):
            return bytes(self.ffi.buffer(pointer, count * 4))
        span = sum((d - 1) * s for d, s in zip(dims, strides)) + 4
        raw = np.frombuffer(bytes(self.ffi.buffer(pointer, span)), dtype=np.uint8)
        view = np.lib.stride_tricks.as_strided(raw.view(np.float32) if span % 4 == 0 else raw[:span - span % 4]
                                               .view(np.float32), shape=dims, strides=strides)
        return np.ascontiguousarray(view).tobytes()

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

    def _graph_pipeline(self, st: DeviceGraphs, handle, what: str) -> DataGraphPipeline:
        p = st.pipelines.get(int(handle))
        if p is None:
            raise DataGraphError(f"{what} (0x{int(handle):x}) is not a data-graph pipeline of this device")
        return p

    def replace_vkGetDataGraphPipelineAvailablePropertiesARM(self, device, pPipelineInfo, pCount, pProperties):
        dev = self.objects.get(device, Device)
        try:
            self._graph_pipeline(self.device_state(dev), pPipelineInfo.dataGraphPipeline, "dataGraphPipeline")
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
            p = self._graph_pipeline(self.device_state(dev), pPipelineInfo.dataGraphPipeline, "dataGraphPipeline")
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
            p = self._graph_pipeline(st, pCreateInfo.dataGraphPipeline, "pCreateInfo->dataGraphPipeline")
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

    def _session(self, st: DeviceGraphs, handle, what: str) -> Session:
        s = st.sessions.get(int(handle))
        if s is None:
            raise DataGraphError(f"{what} (0x{int(handle):x}) is not a data-graph pipeline session of this device")
        return s

    def replace_vkGetDataGraphPipelineSessionBindPointRequirementsARM(self, device, pInfo, pCount, pRequirements):
        dev = self.objects.get(device, Device)
        try:
            self._session(self.device_state(dev), pInfo.session, "pInfo->session")
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
            s = self._session(self.device_state(dev), pInfo.session, "pInfo->session")
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
                s = self._session(self.device_state(dev), b.session, f"pBindInfos[{i}].session")
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

    # ---- commands ------------------------------------------------------------------------------
    def before_vkCmdBindPipeline(self, cb, commandBuffer, bindPoint, pipeline):
        """At the data-graph bind point: kept here; the backend gets a re-bind of the compute pipeline the
        application has bound (no change), since the call cannot be dropped. Compute binds are remembered
        so a data-graph dispatch can restore them."""
        if bindPoint == vk.VK_PIPELINE_BIND_POINT_COMPUTE:
            cb.slot(Bound).compute = int(pipeline)
            return None
        if bindPoint != BIND_POINT:
            return None
        st = cb.device.peek(DeviceGraphs)
        bound = cb.slot(Bound)
        try:
            if st is None:
                raise DataGraphError("the device has no VK_ARM_data_graph with the dataGraph feature")
            bound.pipeline = self._graph_pipeline(st, pipeline, "pipeline")
        except DataGraphError as e:
            self.refuse("vkCmdBindPipeline", f"VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM: {e}")
        return self._noop_bind(cb, commandBuffer)

    def apply_vkCmdBindPipeline(self, cb, commandBuffer, bindPoint, pipeline):
        if bindPoint == vk.VK_PIPELINE_BIND_POINT_COMPUTE:
            cb.slot(Bound).compute = int(pipeline)

    def _noop_bind(self, cb: CommandBuffer, commandBuffer):
        compute = cb.slot(Bound).compute
        if not compute:   # nothing bound for compute yet: the backend binds a kernel, which nothing reads
            compute, _, _ = kernels.pipeline_for(self.ffi, cb.device, self.device_state(cb.device).kernels, None,
                                                 "eltwise")
        return (commandBuffer, vk.VK_PIPELINE_BIND_POINT_COMPUTE, compute)

    def replace_vkCmdBindDescriptorSets(self, commandBuffer, bindPoint, layout, firstSet, count, pSets, dynamicCount,
                                        pDynamicOffsets):
        """Only the data-graph bind point reaches Python (the table's python_if): the sets are kept here."""
        cb = self.objects.get(commandBuffer, CommandBuffer)
        if bindPoint != BIND_POINT:
            cb.device.next.vkCmdBindDescriptorSets(commandBuffer, bindPoint, layout, firstSet, count, pSets,
                                                   dynamicCount, pDynamicOffsets)
            return
        bound = cb.slot(Bound)
        for i in range(count):
            bound.sets[firstSet + i] = int(pSets[i])

    def _tensor_at(self, dev: Device, st: DeviceGraphs, bound: Bound, itf: graph.Interface, kind: str):
        if itf.set not in bound.sets:
            raise DataGraphError(f"no descriptor set is bound at set {itf.set} of VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM "
                                 f"(the graph's {kind} {itf.index})")
        view_handle = st.views.get((bound.sets[itf.set], itf.binding, 0))
        view = dev.tensors.views.get(view_handle) if dev.tensors is not None and view_handle else None
        if view is None:
            raise DataGraphError(f"set {itf.set}, binding {itf.binding} (the graph's {kind} {itf.index}) holds no "
                                 "tensor view of this device")
        t = view.tensor
        if t.dims != itf.type.shape or t.element != 4 or view.format != vk.VK_FORMAT_R32_SFLOAT:
            raise DataGraphError(f"the tensor at set {itf.set}, binding {itf.binding} is {list(t.dims)} with format "
                                 f"{view.format}; the graph's {kind} {itf.index} is {itf.type} (VK_FORMAT_R32_SFLOAT)")
        if t.strides != tensor_resources.packed_strides(t.dims, 4):
            raise DataGraphError(f"the tensor at set {itf.set}, binding {itf.binding} is not packed (strides "
                                 f"{list(t.strides)}): data-graph operators read packed tensors only")
        if not t.memory:
            raise DataGraphError(f"the tensor at set {itf.set}, binding {itf.binding} is not bound to memory")
        if not t.usage & vk.VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM:
            raise DataGraphError(f"the tensor at set {itf.set}, binding {itf.binding} was not created with "
                                 "VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM")
        return t

    def replace_vkCmdDispatchDataGraphARM(self, commandBuffer, session, pInfo):
        cb = self.objects.get(commandBuffer, CommandBuffer)
        dev = cb.device
        bound = cb.slot(Bound)
        try:
            st = self.device_state(dev)
            s = self._session(st, session, "session")
            p = s.pipeline
            if bound.pipeline is None:
                raise DataGraphError("no data-graph pipeline is bound (vkCmdBindPipeline with "
                                     "VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM)")
            if bound.pipeline is not p:
                raise DataGraphError("the session was created for another data-graph pipeline than the one bound "
                                     "(VUID-vkCmdDispatchDataGraphARM-session-09796)")
            if not s.memory:
                raise DataGraphError("the session's TRANSIENT bind point is not bound to memory "
                                     "(vkBindDataGraphPipelineSessionMemoryARM)")
            if pInfo != self.ffi.NULL and pInfo.flags:
                raise DataGraphError(f"pInfo->flags (0x{int(pInfo.flags):x}) must be 0")
            ins = [self._tensor_at(dev, st, bound, itf, "input") for itf in p.graph.inputs]
            outs = [self._tensor_at(dev, st, bound, itf, "output") for itf in p.graph.outputs]
            app = st.compute_layouts.get(bound.compute) if bound.compute else None
            if bound.compute and app is None:
                raise DataGraphError("the bound compute pipeline's layout is unknown to the driver, so its bindings "
                                     "could not be kept")
            self._record(cb, commandBuffer, st, p, s, ins, outs, app, bound)
        except (DataGraphError, kernels.KernelError) as e:
            self.refuse(COMMAND, f"{e}; the dispatch is not recorded")
            return

    def _record(self, cb: CommandBuffer, commandBuffer, st: DeviceGraphs, p: DataGraphPipeline, s: Session,
                ins: list, outs: list, app, bound: Bound) -> None:
        ffi, dev = self.ffi, cb.device
        nxt = dev.next

        def location(v: int) -> tuple[int, int, int]:
            place = p.plan.places[v]
            nbytes = place.type.count * 4
            if place.kind == "input":
                return ins[place.where].buffer, 0, nbytes
            if place.kind == "output":
                return outs[place.where].buffer, 0, nbytes
            if place.kind == "const":
                return p.constants.buffer, place.where, nbytes
            return s.buffer, place.where, nbytes

        barrier = ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                                "srcAccessMask": vk.VK_ACCESS_SHADER_WRITE_BIT,
                                                "dstAccessMask": vk.VK_ACCESS_SHADER_READ_BIT
                                                | vk.VK_ACCESS_SHADER_WRITE_BIT})
        keep = []
        for n, k in enumerate(p.plan.kernels):
            pipeline, layout, set_index = kernels.pipeline_for(ffi, dev, st.kernels, app, k.shader)
            infos = ffi.new("VkDescriptorBufferInfo[]", kernels.BINDINGS)
            infos[0] = {"buffer": p.constants.buffer, "offset": p.params_at[n], "range": len(k.params) * 4}
            for b, v in enumerate(k.operands):
                buf, off, size = location(v)
                infos[1 + b] = {"buffer": buf, "offset": off, "range": size}
            buf, off, size = location(k.result)
            infos[4] = {"buffer": buf, "offset": off, "range": size}
            writes = ffi.new("VkWriteDescriptorSet[]", kernels.BINDINGS)
            for b in range(kernels.BINDINGS):
                writes[b] = {"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstBinding": b, "descriptorCount": 1,
                             "descriptorType": kernels.STORAGE, "pBufferInfo": ffi.addressof(infos[b])}
            keep += [infos, writes]
            if n:
                nxt.vkCmdPipelineBarrier(commandBuffer, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                         vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, barrier, 0, ffi.NULL, 0,
                                         ffi.NULL)
            nxt.vkCmdBindPipeline(commandBuffer, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
            nxt.vkCmdPushDescriptorSet(commandBuffer, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, set_index,
                                       kernels.BINDINGS, writes)
            groups = (k.items + 63) // 64
            gx = min(groups, 65535)
            nxt.vkCmdDispatch(commandBuffer, gx, (groups + gx - 1) // gx, 1)
        if bound.compute:   # the application's compute pipeline again; its sets and push constants were kept
            nxt.vkCmdBindPipeline(commandBuffer, vk.VK_PIPELINE_BIND_POINT_COMPUTE, bound.compute)
        bound.keep = keep
        costs = operator_costs(p.plan, self.drv.profile)
        total_ns = sum(c["ns"] for c in costs)
        # the per-operator costs as one JSON arg (hostd/summary.py's operator breakdown reads it)
        info = {"graph": p.graph.name, "ops": sum(c["ops"] for c in costs), "bytes": sum(c["bytes"] for c in costs),
                "modelled_ns": round(total_ns, 1), "operators": json.dumps(costs, separators=(",", ":"))}
        # one compute job on the non-fragment queue lasting the operators' modelled time (timing.data_graph)
        cb.ops.append(Work("data_graph", STAGE, COMMAND, info, cycles=total_ns, nbytes=info["bytes"]))


def register(drv: Driver) -> DataGraph:
    feature = drv.hooks.bind(DataGraph(drv))
    drv.features.append(feature)
    return feature

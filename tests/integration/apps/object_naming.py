"""Commands that name an object by (type, handle), called on every kind of object the emulated Mali
makes itself, and on a backend object (issue #23, deliverable 1).

Run: .venv/bin/python tests/integration/apps/object_naming.py COMMANDS OBJECT_TYPES  (under
`tessera run`, or with the tessera_env of the tests): comma-separated command names and VkObjectType
values; tests/integration/test_object_naming.py passes every command vk.xml marks as naming an object
and every object type the driver emulates. A command or type this program cannot make fails it.

A public test program for VK_ARM_shader_instrumentation crashed (SIGSEGV) at its first
vkSetDebugUtilsObjectNameEXT(VK_OBJECT_TYPE_SHADER_INSTRUMENTATION_ARM, ...): the driver passed
its own handle to the backend, which dereferenced it. Here each command is called once per object
(with the object's VkObjectType; debug markers with its VkDebugReportObjectTypeEXT, UNKNOWN for the
types that enum lacks, which Vulkan does not allow but which must not crash either), private data
is set and read back, and a VkBuffer (the backend's) goes through the same calls. A data-graph
pipeline (VK_ARM_data_graph: a VkPipeline of the driver's own, VK_OBJECT_TYPE_PIPELINE) and its
session are made from a one-operator graph (SIGMOID, examples/vkgraphs.py).
Prints one JSON line: {"calls": {"<command> <type>": VkResult or 0}, "private_data": {"<type>":
[set, read, read of a second slot never set]}, "types": [made]}.

The `vulkan` package predates the Arm extensions: their structs are ctypes (vk.xml 1.4.366), and
every command here is called through vkGet*ProcAddr with ctypes.
"""
from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import vulkan as vk

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2] / "examples")]
import instrumentation_api as instr  # noqa: E402
import vkapp  # noqa: E402
import vkgraphs as vg  # noqa: E402
import vktensors as vt  # noqa: E402

c_ptr, u32, u64, i32, size_t = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_size_t
TENSOR, TENSOR_VIEW, INSTRUMENTATION, TEMPLATE, BUFFER = 1000460000, 1000460001, 1000607000, 1000085000, 9
GRAPH_PIPELINE, GRAPH_SESSION = 19, 1000507000   # VK_OBJECT_TYPE_PIPELINE, ..._DATA_GRAPH_PIPELINE_SESSION_ARM
# VkObjectType -> VkDebugReportObjectTypeEXT (0: UNKNOWN, the enum has no value for it)
REPORT_TYPES = {TENSOR: 0, TENSOR_VIEW: 0, INSTRUMENTATION: 0, TEMPLATE: 1000085000, BUFFER: 9, GRAPH_PIPELINE: 19,
                GRAPH_SESSION: 0}
PRIVATE_DATA_FEATURES = 1000295000   # VkPhysicalDevicePrivateDataFeatures


class S(vt.Struct):
    pass


class ObjectNameInfo(S):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("objectType", i32), ("objectHandle", u64), ("pObjectName", c_ptr)]


class ObjectTagInfo(S):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("objectType", i32), ("objectHandle", u64), ("tagName", u64),
                ("tagSize", size_t), ("pTag", c_ptr)]


class MarkerNameInfo(S):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("objectType", i32), ("object", u64), ("pObjectName", c_ptr)]


class MarkerTagInfo(S):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("objectType", i32), ("object", u64), ("tagName", u64),
                ("tagSize", size_t), ("pTag", c_ptr)]


class CallbackData(S):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u32), ("pMessageIdName", c_ptr), ("messageIdNumber", i32),
                ("pMessage", c_ptr), ("queueLabelCount", u32), ("pQueueLabels", c_ptr), ("cmdBufLabelCount", u32),
                ("pCmdBufLabels", c_ptr), ("objectCount", u32), ("pObjects", c_ptr)]


class PrivateDataFeatures(S):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("privateData", u32)]


class PrivateDataSlotCreateInfo(S):
    _fields_ = [("sType", u32), ("pNext", c_ptr), ("flags", u32)]


def handle(cdata) -> int:
    return int(vk.ffi.cast("uintptr_t", cdata))


class Commands:
    """The object-naming commands and what makes the objects, through the loader."""

    def __init__(self, ctx) -> None:
        loader = ctypes.CDLL("libvulkan.so.1")
        gipa, gdpa = loader.vkGetInstanceProcAddr, loader.vkGetDeviceProcAddr
        gipa.restype = gdpa.restype = c_ptr
        gipa.argtypes = gdpa.argtypes = [c_ptr, ctypes.c_char_p]
        self.device, self.instance = handle(ctx.device), handle(ctx.instance)

        def fn(get, owner, name, restype, *args):
            address = get(owner, name.encode())
            if not address:
                raise SystemExit(f"{name}: not exposed")
            return ctypes.CFUNCTYPE(restype, *args)(address)

        d, i = self.device, self.instance
        self.fns = {
            "vkSetDebugUtilsObjectNameEXT": fn(gdpa, d, "vkSetDebugUtilsObjectNameEXT", i32, c_ptr, c_ptr),
            "vkSetDebugUtilsObjectTagEXT": fn(gdpa, d, "vkSetDebugUtilsObjectTagEXT", i32, c_ptr, c_ptr),
            "vkDebugMarkerSetObjectNameEXT": fn(gdpa, d, "vkDebugMarkerSetObjectNameEXT", i32, c_ptr, c_ptr),
            "vkDebugMarkerSetObjectTagEXT": fn(gdpa, d, "vkDebugMarkerSetObjectTagEXT", i32, c_ptr, c_ptr),
            "vkSetPrivateData": fn(gdpa, d, "vkSetPrivateData", i32, c_ptr, i32, u64, u64, u64),
            "vkGetPrivateData": fn(gdpa, d, "vkGetPrivateData", None, c_ptr, i32, u64, u64, ctypes.POINTER(u64)),
            "vkDebugReportMessageEXT": fn(gipa, i, "vkDebugReportMessageEXT", None, c_ptr, u32, i32, u64, size_t,
                                          i32, ctypes.c_char_p, ctypes.c_char_p),
            "vkSubmitDebugUtilsMessageEXT": fn(gipa, i, "vkSubmitDebugUtilsMessageEXT", None, c_ptr, u32, u32, c_ptr),
        }
        self.create_slot = fn(gdpa, d, "vkCreatePrivateDataSlot", i32, c_ptr, c_ptr, c_ptr, ctypes.POINTER(u64))
        self.destroy_slot = fn(gdpa, d, "vkDestroyPrivateDataSlot", None, c_ptr, u64, c_ptr)
        self.instrumentation = instr.Extension(ctx)

    def slot(self) -> int:
        info = PrivateDataSlotCreateInfo(sType=1000295002)
        out = u64(0)
        assert self.create_slot(self.device, info.ptr(), None, ctypes.byref(out)) == 0
        return out.value

    def call(self, command: str, object_type: int, obj: int, slot: int) -> int:
        """One call of `command` naming (object_type, obj); its VkResult (0 for void commands)."""
        f, d = self.fns[command], self.device
        name = ctypes.create_string_buffer(f"{command} of {object_type}".encode())
        tag = ctypes.create_string_buffer(b"tag bytes")
        if command == "vkSetDebugUtilsObjectNameEXT":
            return f(d, ObjectNameInfo(1000128000, None, object_type, obj, ctypes.addressof(name)).ptr())
        if command == "vkSetDebugUtilsObjectTagEXT":
            return f(d, ObjectTagInfo(1000128001, None, object_type, obj, 7, 9, ctypes.addressof(tag)).ptr())
        if command == "vkDebugMarkerSetObjectNameEXT":
            return f(d, MarkerNameInfo(1000022000, None, REPORT_TYPES[object_type], obj, ctypes.addressof(name)).ptr())
        if command == "vkDebugMarkerSetObjectTagEXT":
            return f(d, MarkerTagInfo(1000022001, None, REPORT_TYPES[object_type], obj, 7, 9,
                                      ctypes.addressof(tag)).ptr())
        if command == "vkSetPrivateData":
            return f(d, object_type, obj, slot, 0x5EED0000 + object_type % 1000)
        if command == "vkGetPrivateData":
            out = u64(0xFFFF)
            f(d, object_type, obj, slot, ctypes.byref(out))
            return 0
        if command == "vkDebugReportMessageEXT":   # VK_DEBUG_REPORT_INFORMATION_BIT_EXT: not a failure for vkapp
            f(self.instance, 1, REPORT_TYPES[object_type], obj, 0, 0, b"object_naming", b"an object, named")
            return 0
        if command == "vkSubmitDebugUtilsMessageEXT":   # INFO severity, GENERAL type: not a failure for vkapp
            names = ObjectNameInfo(1000128000, None, object_type, obj, ctypes.addressof(name))
            data = CallbackData(sType=1000128003, pMessage=ctypes.addressof(name), objectCount=1,
                                pObjects=names.ptr())
            f(self.instance, 0x10, 0x1, data.ptr())
            return 0
        raise SystemExit(f"object_naming.py cannot call {command}: add it (the registry names it as naming objects)")

    def get(self, object_type: int, obj: int, slot: int) -> int:
        out = u64(0xFFFF)
        self.fns["vkGetPrivateData"](self.device, object_type, obj, slot, ctypes.byref(out))
        return out.value


def make_objects(ctx, cmds: Commands, tensors: vt.Tensors, graphs: vg.DataGraphs,
                 types: list[int]) -> dict[int, tuple[int, object]]:
    """One object of each type: type -> (handle, what must stay alive / be destroyed)."""
    out: dict[int, tuple[int, object]] = {}
    tensor = tensors.tensor(vk.VK_FORMAT_R32_SFLOAT, (4, 4))
    made_graph: list[int] = []    # the data-graph pipeline, made once for itself and its session

    def graph_pipeline() -> int:
        if not made_graph:
            made_graph.append(_graph_pipeline(ctx, tensors, graphs))
        return made_graph[0]

    makers = {
        TENSOR: lambda: (tensor.handle, None),
        TENSOR_VIEW: lambda: (tensor.view, None),
        INSTRUMENTATION: lambda: _instrumentation(cmds),
        TEMPLATE: lambda: _template(tensors),
        GRAPH_PIPELINE: lambda: (graph_pipeline(), None),          # destroyed by graphs.close()
        GRAPH_SESSION: lambda: (graphs.session(graph_pipeline()), None),
        BUFFER: lambda: (handle(ctx.buffer(64, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT).handle), None),
    }
    for t in (*types, BUFFER):
        if t not in makers:
            raise SystemExit(f"object_naming.py cannot make an object of type {t}: add it (the driver emulates it)")
        out[t] = makers[t]()
    return out


def _instrumentation(cmds: Commands) -> tuple[int, object]:
    info = ctypes.create_string_buffer(16)
    ctypes.c_uint32.from_buffer(info).value = instr.CREATE_INFO_STYPE
    obj = u64(0)
    assert cmds.instrumentation.create(cmds.device, ctypes.addressof(info), None, ctypes.byref(obj)) == 0
    return obj.value, ("instrumentation", obj.value)


def _graph_pipeline(ctx, tensors: vt.Tensors, graphs: vg.DataGraphs) -> int:
    """A data-graph pipeline of one operator: sigmoid of a 1x4 tensor (set 0: binding 0 in, 1 out)."""
    g = vg.GraphAsm()
    g.output(g.op("SIGMOID", (1, 4), g.input((1, 4))), (1, 4))
    set_layout = tensors.set_layout([(0, vt.DESCRIPTOR_TYPE_TENSOR, 1), (1, vt.DESCRIPTOR_TYPE_TENSOR, 1)],
                                    stages=vk.VK_SHADER_STAGE_ALL)
    return graphs.pipeline(g.assemble(), ctx.pipeline_layout([set_layout]), [(0, 0, (1, 4)), (0, 1, (1, 4))])


def _template(tensors: vt.Tensors) -> tuple[int, object]:
    vp = ctypes.c_void_p
    get = lambda name, restype, *args: ctypes.CFUNCTYPE(restype, *args)(tensors._gdpa(tensors.device, name.encode()))
    tensors.create_template = get("vkCreateDescriptorUpdateTemplate", i32, vp, vp, vp, ctypes.POINTER(u64))
    tensors.destroy_template = get("vkDestroyDescriptorUpdateTemplate", None, vp, u64, vp)
    layout = tensors.set_layout([(0, vt.DESCRIPTOR_TYPE_TENSOR, 1)])
    return tensors.tensor_template([0], push=False, set_layout=layout), ("template", None)


def body(ctx: vkapp.Context, commands: list[str], types: list[int]) -> str:
    cmds = Commands(ctx)
    tensors = vt.Tensors(ctx)
    graphs = vg.DataGraphs(ctx, tensors)
    objects = make_objects(ctx, cmds, tensors, graphs, types)
    slot, unused_slot = cmds.slot(), cmds.slot()
    calls, private = {}, {}
    for command in commands:
        for object_type, (obj, _) in objects.items():
            calls[f"{command} {object_type}"] = cmds.call(command, object_type, obj, slot)
    for object_type, (obj, _) in objects.items():
        value = 0xDA7A0000 + object_type % 1000
        assert cmds.fns["vkSetPrivateData"](cmds.device, object_type, obj, slot, value) == 0
        private[str(object_type)] = [value, cmds.get(object_type, obj, slot), cmds.get(object_type, obj, unused_slot)]
    # A named tensor copied into another: the trace's tensor copy names both (driver's extra_data).
    source, destination = tensors.tensor(vk.VK_FORMAT_R32_SFLOAT, (4, 4)), objects[TENSOR][0]
    for obj, name in ((source.handle, b"source weights"), (destination, b"destination weights")):
        text = ctypes.create_string_buffer(name)
        cmds.fns["vkSetDebugUtilsObjectNameEXT"](cmds.device, ObjectNameInfo(1000128000, None, TENSOR, obj,
                                                                             ctypes.addressof(text)).ptr())
    cmd = ctx.command_buffer()
    keep = tensors.cmd_copy(cmd, source, vt.Tensor(destination, 0, vk.VK_FORMAT_R32_SFLOAT, (4, 4), (16, 4),
                                                   None, None, 64))
    ctx.submit([cmd])
    del keep
    cmds.destroy_slot(cmds.device, slot, None)
    cmds.destroy_slot(cmds.device, unused_slot, None)
    for _, (obj, what) in objects.items():
        if what and what[0] == "instrumentation":
            cmds.instrumentation.destroy(cmds.device, obj, None)
        elif what and what[0] == "template":
            tensors.destroy_template(cmds.device, obj, None)
    graphs.close()   # the data-graph session, then its pipeline
    print(json.dumps({"calls": calls, "private_data": private, "types": sorted(objects)}))
    return "object naming: done"


def main() -> None:
    commands = [c for c in sys.argv[1].split(",") if c]
    types = [int(t) for t in sys.argv[2].split(",") if t]
    tensor_features, keep = vg.device_features()   # tensors -> data graph
    private_features = PrivateDataFeatures(sType=PRIVATE_DATA_FEATURES, privateData=1)
    instrumentation_features, keep13 = instr.raw_features()   # -> Vulkan 1.3 features (dynamicRendering)
    # tensors -> data graph -> private data -> instrumentation -> Vulkan 1.3 features
    keep[-1].pNext = private_features.ptr()
    private_features.pNext = handle(instrumentation_features)
    ctx = vkapp.Context(vkapp.Settings.from_env(), "object_naming",
                        optional_instance_extensions=["VK_EXT_debug_report"],
                        optional_device_extensions=[*vg.EXTENSIONS, "VK_ARM_shader_instrumentation",
                                                    "VK_EXT_debug_marker"],
                        device_features=tensor_features)
    try:
        print(body(ctx, commands, types))
    finally:
        ctx.close()
    del keep, keep13


if __name__ == "__main__":
    main()

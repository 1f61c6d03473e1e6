"""The data-graph objects of the emulated Mali and what the extension's hook classes share.

Role: the state (DeviceGraphs in a slot of the device: pipelines, sessions, the tensor views written into
descriptor sets, the compute layouts a dispatch must keep; Bound in a slot of a command buffer: what is
bound at VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM), the emulated
objects (DataGraphPipeline, Session: handles of this driver's own, never passed to the backend), the
operators' modelled costs, and `Hooks`, the base of the three hook classes (physical.py, pipelines.py,
commands.py): their refusals and the look-ups that refuse. Threads: see __init__.py.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from tessera.vkapi.vkconst import vk

from .. import timing
from ..driver import Driver
from ..objects import Device, EmulatedObject
from . import kernels, lowering
from .graph import Graph

EXTENSION = "VK_ARM_data_graph"
TOSA_EXTENSION = "VK_ARM_data_graph_instruction_set_tosa"
SPEC_VERSIONS = {EXTENSION: 1, TOSA_EXTENSION: 1}   # vk.xml 1.4.366 (identity.py lists them)
BIND_POINT = vk.VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM
VALIDATION_FAILED = vk.VK_ERROR_VALIDATION_FAILED
# The tensor formats a graph tensor of each element type may have (int8 / int16 read as TOSA reads them: signed,
# unless a RESCALE says input_unsigned / output_unsigned; the UINT formats carry those bytes).
FORMATS = {"float32": (vk.VK_FORMAT_R32_SFLOAT,),
           "int8": (vk.VK_FORMAT_R8_SINT, vk.VK_FORMAT_R8_UINT),
           "int16": (vk.VK_FORMAT_R16_SINT, vk.VK_FORMAT_R16_UINT),
           "int32": (vk.VK_FORMAT_R32_SINT, vk.VK_FORMAT_R32_UINT)}
GRAPH_FORMATS = frozenset(f for formats in FORMATS.values() for f in formats)


def format_names(element: str) -> str:
    return " or ".join(f"VK_FORMAT_{n}" for f in FORMATS.get(element, ()) for n in [_FORMAT_NAMES.get(f, str(f))])


_FORMAT_NAMES = {vk.VK_FORMAT_R32_SFLOAT: "R32_SFLOAT", vk.VK_FORMAT_R8_SINT: "R8_SINT",
                 vk.VK_FORMAT_R8_UINT: "R8_UINT", vk.VK_FORMAT_R16_SINT: "R16_SINT", vk.VK_FORMAT_R16_UINT: "R16_UINT",
                 vk.VK_FORMAT_R32_SINT: "R32_SINT", vk.VK_FORMAT_R32_UINT: "R32_UINT"}


class DataGraphError(Exception):
    """Invalid usage of the extension: the message says which rule."""


@dataclass(eq=False)
class DataGraphPipeline(EmulatedObject):
    OBJECT_TYPE = vk.VK_OBJECT_TYPE_PIPELINE
    handle: int
    graph: Graph
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
    shader_module: bool = False                  # dataGraphShaderModule enabled: pipelines from SPIR-V modules
    pipelines: dict[int, DataGraphPipeline] = field(default_factory=dict)
    sessions: dict[int, Session] = field(default_factory=dict)
    # (descriptor set, binding, array element) -> tensor view handle written there (vkUpdateDescriptorSets)
    views: dict[tuple[int, int, int], int] = field(default_factory=dict)
    compute_layouts: dict[int, tuple] = field(default_factory=dict)   # compute pipeline -> (set layouts, ranges)


@dataclass
class Bound:
    """A command buffer's data-graph binding state (what is bound at VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM)."""
    pipeline: DataGraphPipeline | None = None
    sets: dict[int, int] = field(default_factory=dict)               # set index -> VkDescriptorSet
    keep: list = field(default_factory=list)                         # structs of recorded pushes


def fma_per_ns(profile) -> float:
    """fp32 FMAs per ns of the profile's GPU: fmaRate per core per clock × cores × clock."""
    return profile.fma_rate * profile.shader_cores * profile.clock_mhz / 1000.0


def operator_costs(plan: lowering.Plan, profile) -> list[dict]:
    """Each operator's cost on the profile's GPU: {operator, shape, ops, bytes, ns} (an operator of several
    kernels, such as CONCAT, is one entry: their sums)."""
    rate = fma_per_ns(profile)
    out: list[dict] = []
    for k in plan.kernels:
        ns = k.time_ns(rate, timing.MEMORY_BYTES_PER_NS)
        if k.part and out:
            last = out[-1]
            last["ops"] += k.ops
            last["bytes"] += k.bytes
            last["ns"] = round(last["ns"] + ns, 1)
            continue
        out.append({"operator": k.operator, "shape": "x".join(map(str, k.shape)), "ops": k.ops, "bytes": k.bytes,
                    "ns": round(ns, 1)})
    return out


class Hooks:
    """What the extension's hook classes share: the driver, refusals, look-ups that refuse."""

    def __init__(self, drv: Driver) -> None:
        self.drv = drv
        self.ffi, self.objects = drv.ffi, drv.objects
        self.log = drv.hooks.errors.log

    def refuse(self, command: str, message: str) -> None:
        self.log.warning("%s: %s", command, message)
        print(f"tessera: {EXTENSION}: {command}: {message}", file=sys.stderr, flush=True)

    @staticmethod
    def device_state(dev: Device) -> DeviceGraphs:
        st = dev.peek(DeviceGraphs)
        if st is None:
            raise DataGraphError("the device was created without VK_ARM_data_graph and the dataGraph feature "
                                 "(VkPhysicalDeviceDataGraphFeaturesARM::dataGraph)")
        return st

    @staticmethod
    def graph_pipeline(st: DeviceGraphs, handle, what: str) -> DataGraphPipeline:
        return _member(st.pipelines, handle, what, "data-graph pipeline")

    @staticmethod
    def session(st: DeviceGraphs, handle, what: str) -> Session:
        return _member(st.sessions, handle, what, "data-graph pipeline session")


def _member(table: dict, handle, what: str, kind: str):
    """The object `handle` names in one of the device's tables; a DataGraphError naming the parameter
    (`what`) when it is not one of them."""
    found = table.get(int(handle))
    if found is None:
        raise DataGraphError(f"{what} (0x{int(handle):x}) is not a {kind} of this device")
    return found

"""VK_ARM_shader_instrumentation in the emulated Mali: real per-basic-block counts, Mali pipe costs.

Role: the whole extension (vk.xml 1.4.366: extension 608, bit 39 of VkPipelineCreateFlags2 in
VkPipelineCreateFlags2CreateInfoKHR). Pipelines created with the bit, on a device that enabled
the `shaderInstrumentation` feature, get every stage (vertex, fragment, compute) rewritten by the
SPIR-V toolkit's block-counter pass: each basic block atomically counts its thread executions
into a driver-owned storage buffer, bound as an extra descriptor set (index = the application's
set count, a dynamic storage buffer) in a pipeline layout the driver makes from the
application's. Every draw, dispatch and trace-rays recorded while an instrumentation object is
active takes the object's next resultIndex; for an instrumented pipeline it also gets its own
region of the object's memory, bound (dynamic offset) just before the command. Uninstrumented
pipelines consume an index and produce nothing (vk.xml). The GPU accumulates into the regions,
so results add up across submissions until vkClearShaderInstrumentationMetricsARM.

Values: for block b of a stage, `threads` = the block's thread executions (measured), and each
pipe metric = executions × the compiler model's thread-operations of that pipe for one
execution of the block (tessera.compiler BlockCost.ops): thread-operations, the unit of the
Mali Offline Compiler's per-pipe counts before division by the pipe's width. Block indices are
the toolkit's global SPIR-V numbering (docs/spirv.md), so tools map them to SPIR-V and source.
Helper invocations do not count (their atomics have no effect); a discarded fragment counts the
blocks it ran before OpKill / OpTerminateInvocation.

Shader objects (VK_EXT_shader_object): VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM (bit 11) on a
compute, vertex or fragment shader object rewrites it the same way; the counters' sets go after
its set layouts (vertex and fragment: two, one per stage, so separately bound stages share one
region per draw).

Recording: every command buffer of a device with the feature takes its Python hooks
(recorder.python_path, from vkBeginCommandBuffer) so each action can be numbered and bound when
recorded; an instrumented action with no object active binds the discard region, never read.
Threads: object state is touched by the threads recording command buffers (Vulkan requires
external synchronisation of an object's command buffers) and by vkGetShaderInstrumentationValues
on the host after the GPU work completed, as the extension requires.
"""
from __future__ import annotations

import functools
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from tessera.vkapi import structs
from tessera.vkapi.commands import DISPATCHES, DRAWS, TRACE_RAYS
from tessera.vkapi.vkconst import vk

from . import counter_memory
from .counter_memory import Chunk
from .driver import Driver
from .objects import CommandBuffer, Device, PhysicalDevice

EXTENSION = "VK_ARM_shader_instrumentation"
SPEC_VERSION = 1   # VK_ARM_SHADER_INSTRUMENTATION_SPEC_VERSION in vk.xml 1.4.366

# (name, description), in the order values are returned. The six pipes of the compiler model
# (compiler/pipes.py) and the measured executions.
METRICS = (
    ("fma", "Fused multiply-accumulate pipe: thread-operations of arithmetic (FMA unit) executed"),
    ("cvt", "Convert pipe: thread-operations of conversions, integer and simple arithmetic executed"),
    ("sfu", "Special function unit: thread-operations of transcendental and reciprocal functions executed"),
    ("ls", "Load/store pipe: thread-operations of buffer, image and atomic memory accesses executed"),
    ("tex", "Texture pipe: thread-operations of texture sampling and filtering executed"),
    ("var", "Varying pipe: thread-operations of varying interpolation executed"),
    ("threads", "Thread executions of the basic block"),
)
# Index of each pipe metric in compiler BlockCost.ops (FMA, CVT, SFU, LS, V, T).
_OPS_INDEX = {"fma": 0, "cvt": 1, "sfu": 2, "ls": 3, "var": 4, "tex": 5}

INSTRUMENT_SHADERS_BIT = vk.VK_PIPELINE_CREATE_2_INSTRUMENT_SHADERS_BIT_ARM
SHADER_INSTRUMENT_BIT = vk.VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM    # bit 11 of VkShaderCreateFlagsEXT
STAGE_BITS = {"vertex": vk.VK_SHADER_STAGE_VERTEX_BIT, "fragment": vk.VK_SHADER_STAGE_FRAGMENT_BIT,
              "compute": vk.VK_SHADER_STAGE_COMPUTE_BIT}
CHUNK_BYTES = 1 << 20          # one buffer of an object's memory; regions never span two
REGION_MAX_BYTES = 1 << 16     # the largest pipeline: 16,384 blocks over its stages
_handles = itertools.count(0x7E55_0000_0001)   # non-dispatchable handles this driver allocates


class InstrumentError(Exception):
    """A pipeline this driver cannot instrument (it is created uninstrumented)."""


@dataclass
class InstrumentedStage:
    name: str                  # vertex, fragment, compute
    bit: int                   # VkShaderStageFlagBits
    base: int                  # first counter of the stage in the pipeline's region
    blocks: int
    ops: list[tuple[float, ...]]   # per block: thread-operations per execution, by pipe


@dataclass
class InstrumentedPipeline:
    bind_point: int
    layout: int                # the driver's pipeline layout (the application's sets + the counters)
    set_index: int
    stages: list[InstrumentedStage]
    # (set index, byte offset in the action's region) of each counters' set an action binds; empty:
    # one, at set_index, offset 0. Graphics shader objects bind two (vertex, fragment).
    bindings: tuple[tuple[int, int], ...] = ()

    @functools.cached_property
    def counters(self) -> int:
        """Counters of one action's region (the stages' spans; a stage may start aligned)."""
        return max((s.base + s.blocks for s in self.stages), default=0)

    @functools.cached_property
    def entries(self) -> int:
        """Entries one action's values have: one per block of each stage."""
        return sum(s.blocks for s in self.stages)

    @functools.cached_property
    def sets(self) -> tuple[tuple[int, int], ...]:
        return self.bindings or ((self.set_index, 0),)


@dataclass
class Region:
    chunk: Chunk
    offset: int
    pipeline: InstrumentedPipeline


@dataclass
class InstrumentationObject:
    handle: int
    device: Device
    next_index: int = 0
    regions: dict[int, Region] = field(default_factory=dict)      # resultIndex -> its counters
    chunks: list[Chunk] = field(default_factory=list)
    # run by vkClearShaderInstrumentationMetricsARM before it zeroes the values and by
    # vkDestroyShaderInstrumentationARM before it frees them (measured_timing.py banks the executions
    # the timeline has not read yet)
    before_clear: list = field(default_factory=list)


@dataclass
class DeviceInstrumentation:
    """Per device that enabled the feature."""
    limits: counter_memory.Limits
    objects: dict[int, InstrumentationObject] = field(default_factory=dict)
    own_layouts: list[int] = field(default_factory=list)   # pipeline layouts the driver made, destroyed with it
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Where instrumented shaders count when their action belongs to no object (recorded with none
    # active): one region every such action shares, never read. Made on first use.
    discard: Chunk | None = None
    shader_layouts: dict[tuple, tuple[int, int]] = field(default_factory=dict)   # shader objects' layouts
    shader_pairs: dict[tuple, InstrumentedPipeline | None] = field(default_factory=dict)   # (vertex, fragment)


def wants_instrumentation(ffi, pnext) -> bool:
    """A device create chain asking for the shaderInstrumentation feature."""
    f = structs.find(ffi, pnext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INSTRUMENTATION_FEATURES_ARM,
                     "VkPhysicalDeviceShaderInstrumentationFeaturesARM *")
    return f is not None and bool(f.shaderInstrumentation)


def enable_store_features(ffi, info, keep) -> None:
    """Instrumented vertex and fragment stages write to storage buffers: turn on the two core
    features that allow it in the create info going to the backend (`info` is the driver's copy)."""
    for node in structs.chain(ffi, info.pNext):
        if node.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2:   # a copy (strip_chain rebuilt it)
            f2 = ffi.cast("VkPhysicalDeviceFeatures2 *", node)
            f2.features.vertexPipelineStoresAndAtomics = vk.VK_TRUE
            f2.features.fragmentStoresAndAtomics = vk.VK_TRUE
            return
    features = ffi.new("VkPhysicalDeviceFeatures *")
    keep.append(features)
    if info.pEnabledFeatures != ffi.NULL:
        ffi.memmove(features, info.pEnabledFeatures, ffi.sizeof("VkPhysicalDeviceFeatures"))
    features.vertexPipelineStoresAndAtomics = vk.VK_TRUE
    features.fragmentStoresAndAtomics = vk.VK_TRUE
    info.pEnabledFeatures = features


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects
    log = hooks.errors.log
    warned: set[str] = set()

    def warn_once(key: str, message: str) -> None:
        if key not in warned:
            warned.add(key)
            log.warning("%s", message)
            import sys
            print(f"tessera: shader instrumentation: {message}", file=sys.stderr)

    # ---- device -------------------------------------------------------------------------
    def device_state(dev: Device) -> DeviceInstrumentation | None:
        return dev.instrumentation

    def setup_device(dev: Device) -> DeviceInstrumentation:
        """The counters' descriptor set layout and the limits the regions obey."""
        return DeviceInstrumentation(counter_memory.setup(ffi, dev, vk.VK_SHADER_STAGE_ALL))

    def check(result: int, what: str) -> None:
        if result != vk.VK_SUCCESS:
            raise InstrumentError(f"{what} failed ({result})")

    drv.instrumentation_setup = setup_device   # device.py calls it for devices that enabled the feature

    def teardown(dev: Device) -> None:
        state = device_state(dev)
        if state is None:
            return
        for obj in list(state.objects.values()):
            destroy_object(dev.handle, obj.handle, ffi.NULL)
        for layout in state.own_layouts:
            dev.next.vkDestroyPipelineLayout(dev.handle, layout, ffi.NULL)
        if state.discard is not None:
            counter_memory.destroy_chunk(ffi, dev, state.discard)
        dev.next.vkDestroyDescriptorSetLayout(dev.handle, state.limits.set_layout, ffi.NULL)
    drv.instrumentation_teardown = teardown

    def extended_layout(dev: Device, state: DeviceInstrumentation, app_layout: int) -> tuple[int, int]:
        """(the driver's pipeline layout, the counters' set index) for an application layout."""
        layout, set_index = counter_memory.counters_layout(ffi, dev, state.limits, app_layout)
        state.own_layouts.append(layout)
        return layout, set_index

    # ---- instrumented pipelines -----------------------------------------------------------------
    def instrument_flags(pnext) -> Any:
        """The VkPipelineCreateFlags2CreateInfoKHR of a create info when it asks for instrumentation."""
        f = structs.find(ffi, pnext, vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO,
                         "VkPipelineCreateFlags2CreateInfo *")
        return f if f is not None and f.flags & INSTRUMENT_SHADERS_BIT else None

    def without_bit(pnext, keep) -> Any:
        """The chain without the instrumentation bit, which the backend does not know: the flags
        struct copied with the bit cleared, or left out when no other flag remains."""
        nodes = []
        for node in structs.chain(ffi, pnext):
            if node.sType == vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO:
                flags = ffi.cast("VkPipelineCreateFlags2CreateInfo *", node).flags & ~INSTRUMENT_SHADERS_BIT
                if not flags:
                    continue
            nodes.append(node)
        head = structs.rebuild_chain(ffi, nodes, keep)
        for node in structs.chain(ffi, head):
            if node.sType == vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO:
                ffi.cast("VkPipelineCreateFlags2CreateInfo *", node).flags &= ~INSTRUMENT_SHADERS_BIT
        return head

    def rewrite_code(name: str, code: bytes, entry: str, spec, set_index: int, base: int
                     ) -> tuple[bytes, InstrumentedStage]:
        """The counting version of one stage's SPIR-V, and what its counters mean."""
        from tessera.compiler import api
        from tessera.spirv import parse
        from tessera.spirv.passes.block_counters import add_block_counters

        cost = api.shader_cost(code, entry, drv.profile.key, spec)
        module = parse(code)
        layout = add_block_counters(module, set_index, 0, base=base)
        ops = [tuple(b.ops) for b in cost.blocks]
        if len(ops) != layout.count:
            raise InstrumentError("the compiler model and the counter pass disagree on the block count")
        return module.to_bytes(), InstrumentedStage(name, STAGE_BITS[name], base, layout.count, ops)

    def rewrite_stage(dev: Device, state: DeviceInstrumentation, stage, set_index: int, base: int, keep
                      ) -> InstrumentedStage:
        """Replace `stage.module` (a copy the caller owns) with the counting version."""
        from tessera.vkapi.pipelines import STAGE_NAMES, _spec_values, _stage_code

        name = STAGE_NAMES.get(stage.stage)
        if name not in STAGE_BITS:
            raise InstrumentError(f"stage 0x{stage.stage:x} is not instrumented (vertex, fragment, compute are)")
        code = _stage_code(ffi, dev, stage)
        if code is None:
            raise InstrumentError(f"the {name} stage's SPIR-V is unknown to the driver")
        rewritten, done = rewrite_code(name, code, structs.string(ffi, stage.pName), code_spec(stage), set_index,
                                       base)
        words = ffi.new("uint32_t[]", len(rewritten) // 4)
        ffi.memmove(words, rewritten, len(rewritten))
        info = ffi.new("VkShaderModuleCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                      "codeSize": len(rewritten), "pCode": words})
        out = ffi.new("VkShaderModule *")
        check(dev.next.vkCreateShaderModule(dev.handle, info, ffi.NULL, out), "vkCreateShaderModule")
        dev.res.shaders[int(out[0])] = code     # reflection and costs see the application's SPIR-V
        keep.append(("module", int(out[0])))
        stage.module = out[0]
        return done

    def code_spec(info):
        from tessera.vkapi.pipelines import _spec_values
        return _spec_values(ffi, info.pSpecializationInfo)

    def instrument(dev, state, info, stages, keep) -> InstrumentedPipeline:
        app_layout = int(info.layout)
        layout, set_index = extended_layout(dev, state, app_layout)
        done, base = [], 0
        for stage in stages:
            s = rewrite_stage(dev, state, stage, set_index, base, keep)
            done.append(s)
            base += s.blocks
        if base * 4 > REGION_MAX_BYTES:
            raise InstrumentError(f"{base} blocks: more than the {REGION_MAX_BYTES // 4} one draw can count")
        info.layout = layout
        return InstrumentedPipeline(0, layout, set_index, done)

    pending: dict[int, list] = {}   # address of the driver's create-info array -> per pipeline: plan or None

    def before_create(kind: str, ctype: str, bind_point: int, stages_of):
        def before(dev, device, cache, count, pInfos, pAllocator, pPipelines):
            wanted = [i for i in range(count) if instrument_flags(pInfos[i].pNext) is not None]
            if not wanted:
                return None
            state = device_state(dev)
            infos = ffi.new(f"{ctype}[]", count)
            ffi.memmove(infos, pInfos, ffi.sizeof(ctype) * count)
            keep: list = [infos]
            plans: list = [None] * count
            for i in wanted:
                infos[i].pNext = without_bit(pInfos[i].pNext, keep)
                if state is None:
                    warn_once("feature", "a pipeline asks for instrumentation on a device that did not enable "
                              "the shaderInstrumentation feature: created uninstrumented")
                    continue
                saved = ffi.new(f"{ctype} *")
                ffi.memmove(saved, ffi.addressof(infos, i), ffi.sizeof(ctype))
                try:
                    stages = stages_of(infos[i], keep)
                    plan = instrument(dev, state, infos[i], stages, keep)
                    plan.bind_point = bind_point
                    plans[i] = plan
                except Exception as e:   # never fake zeros: created uninstrumented, said once
                    ffi.memmove(ffi.addressof(infos, i), saved, ffi.sizeof(ctype))
                    infos[i].pNext = without_bit(pInfos[i].pNext, keep)
                    warn_once(f"{kind}:{e}", f"a {kind} pipeline cannot be instrumented ({e}); "
                              "created uninstrumented: its draws and dispatches produce no entries")
            pending[int(ffi.cast("uintptr_t", infos))] = [plans, keep]
            return (device, cache, count, infos, pAllocator, pPipelines)
        return before

    def after_create(dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        entry = pending.pop(int(ffi.cast("uintptr_t", pInfos)), None)
        if entry is None:
            return
        plans, keep = entry
        for i, plan in enumerate(plans):
            handle = int(pPipelines[i])
            pipeline = dev.res.pipelines.get(handle)
            if plan is not None and handle and pipeline is not None:
                dev.res.pipelines[handle] = _with_instrumentation(pipeline, plan)
        for kind, handle in (k for k in keep if isinstance(k, tuple)):
            if kind == "module":   # the pipeline keeps its code; the module can go
                dev.next.vkDestroyShaderModule(device, handle, ffi.NULL)
                dev.res.shaders.pop(handle, None)

    def compute_stages(info, keep):
        return [ffi.addressof(info, "stage")]

    def graphics_stages(info, keep):
        stages = ffi.new("VkPipelineShaderStageCreateInfo[]", info.stageCount)
        ffi.memmove(stages, info.pStages, ffi.sizeof("VkPipelineShaderStageCreateInfo") * info.stageCount)
        keep.append(stages)
        info.pStages = stages
        return [stages[i] for i in range(info.stageCount)]

    hooks.also_before("vkCreateComputePipelines")(before_create(
        "compute", "VkComputePipelineCreateInfo", vk.VK_PIPELINE_BIND_POINT_COMPUTE, compute_stages))
    hooks.also_before("vkCreateGraphicsPipelines")(before_create(
        "graphics", "VkGraphicsPipelineCreateInfo", vk.VK_PIPELINE_BIND_POINT_GRAPHICS, graphics_stages))
    hooks.also_after("vkCreateComputePipelines")(after_create)
    hooks.also_after("vkCreateGraphicsPipelines")(after_create)

    # ---- instrumented shader objects (VK_EXT_shader_object) --------------------------------------
    # VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM (bit 11): a compute, vertex or fragment shader object
    # is rewritten like a pipeline's stage. Its counters' set goes after the application's set
    # layouts, bound through a pipeline layout the driver makes from them and the push-constant
    # ranges. Vertex and fragment shader objects are bound separately yet a draw has one region:
    # both get two counters' sets after the application's (N, N+1; the vertex stage counts through
    # set N, the fragment stage through N+1), and a draw binds its region's vertex part at N and its
    # fragment part at N+1 (docs/instrumentation.md).
    shader_pending: dict[int, list] = {}

    @hooks.also_before("vkCreateShadersEXT")
    def before_create_shaders(dev, device, count, pInfos, pAllocator, pShaders):
        wanted = [i for i in range(count) if pInfos[i].flags & SHADER_INSTRUMENT_BIT]
        if not wanted:
            return None
        state = device_state(dev)
        infos = ffi.new("VkShaderCreateInfoEXT[]", count)
        ffi.memmove(infos, pInfos, ffi.sizeof("VkShaderCreateInfoEXT") * count)
        keep: list = [infos]
        plans: list = [None] * count
        for i in wanted:
            info = infos[i]
            info.flags &= ~SHADER_INSTRUMENT_BIT     # the backend does not know the bit
            if state is None:
                warn_once("feature", "a pipeline asks for instrumentation on a device that did not enable "
                          "the shaderInstrumentation feature: created uninstrumented")
                continue
            try:
                plans[i] = (instrument_shader(dev, state, info, keep), bytes(ffi.buffer(pInfos[i].pCode,
                                                                                        pInfos[i].codeSize)))
            except Exception as e:   # never fake zeros: created uninstrumented, said once
                ffi.memmove(ffi.addressof(infos, i), ffi.addressof(pInfos, i), ffi.sizeof("VkShaderCreateInfoEXT"))
                infos[i].flags &= ~SHADER_INSTRUMENT_BIT
                warn_once(f"shader:{e}", f"a shader object cannot be instrumented ({e}); created uninstrumented: "
                          "its draws and dispatches produce no entries")
        shader_pending[int(ffi.cast("uintptr_t", infos))] = [plans, keep]
        return (device, count, infos, pAllocator, pShaders)

    def instrument_shader(dev: Device, state: DeviceInstrumentation, info, keep) -> InstrumentedPipeline:
        """Rewrite `info` (the driver's copy) to count; the plan its dispatches bind."""
        from tessera.vkapi.pipelines import STAGE_NAMES

        name = STAGE_NAMES.get(info.stage)
        if name not in STAGE_BITS:
            raise InstrumentError(f"stage 0x{info.stage:x} is not instrumented (vertex, fragment, compute are)")
        if info.codeType != vk.VK_SHADER_CODE_TYPE_SPIRV_EXT:
            raise InstrumentError("it is a binary shader, not SPIR-V")
        sets = [int(info.pSetLayouts[j]) for j in range(info.setLayoutCount)]
        ranges = [(r.stageFlags, r.offset, r.size) for r in
                  (info.pPushConstantRanges[j] for j in range(info.pushConstantRangeCount))]
        code = bytes(ffi.buffer(info.pCode, info.codeSize))
        counters = 1 if name == "compute" else 2          # graphics: the vertex set, then the fragment set
        set_index = len(sets) + (1 if name == "fragment" else 0)
        key = (counters, tuple(sets), tuple(ranges))
        if key not in state.shader_layouts:
            own = [*sets, *[state.limits.set_layout] * (counters - 1)]
            layout, _ = counter_memory.layout_with_counters(ffi, dev, state.limits, own, ranges)
            state.own_layouts.append(layout)
            state.shader_layouts[key] = layout
        rewritten, stage = rewrite_code(name, code, structs.string(ffi, info.pName), code_spec(info), set_index, 0)
        if stage.blocks * 4 > REGION_MAX_BYTES // 2:
            raise InstrumentError(f"{stage.blocks} blocks: more than the {REGION_MAX_BYTES // 8} a shader object "
                                  "can count")
        words = ffi.new("char[]", rewritten)
        set_layouts = ffi.new("VkDescriptorSetLayout[]", [*sets, *[state.limits.set_layout] * counters])
        keep += [words, set_layouts]
        info.pCode, info.codeSize = words, len(rewritten)
        info.pSetLayouts, info.setLayoutCount = set_layouts, len(sets) + counters
        point = vk.VK_PIPELINE_BIND_POINT_COMPUTE if name == "compute" else vk.VK_PIPELINE_BIND_POINT_GRAPHICS
        return InstrumentedPipeline(point, state.shader_layouts[key], set_index, [stage])

    @hooks.also_after("vkCreateShadersEXT")
    def after_create_shaders(dev, result, device, count, pInfos, pAllocator, pShaders):
        entry = shader_pending.pop(int(ffi.cast("uintptr_t", pInfos)), None)
        if entry is None or result not in (vk.VK_SUCCESS, vk.VK_INCOMPATIBLE_SHADER_BINARY_EXT):
            return
        from . import shader_costs
        for i, done in enumerate(entry[0]):
            known = dev.res.shader_objects.get(int(pShaders[i]))
            if done is None or known is None:
                continue
            plan, original = done
            info = pInfos[i]
            # Costs of the application's SPIR-V, not of the counting version the backend got.
            cycles = shader_costs.of_stages(drv.profile.key, [(plan.stages[0].name, original,
                                                               structs.string(ffi, info.pName), code_spec(info))],
                                            log)
            dev.res.shader_objects[int(pShaders[i])] = (known[0], _with_instrumentation(known[1], plan, cycles))

    @hooks.also_before("vkCmdBindShadersEXT")
    def bind_shaders(cb: CommandBuffer, commandBuffer, count, pStages, pShaders):
        """After recording.py bound the stages: the plan of the graphics shader objects now bound
        (vertex and fragment as one region per draw), kept with the record it made for them."""
        state = device_state(cb.device)
        if state is None or not any(pStages[i] != vk.VK_SHADER_STAGE_COMPUTE_BIT for i in range(count)):
            return None
        bound = cb.__dict__.get("shader_objects", {})
        v = getattr(bound.get(vk.VK_SHADER_STAGE_VERTEX_BIT), "instrumented", None)
        f = getattr(bound.get(vk.VK_SHADER_STAGE_FRAGMENT_BIT), "instrumented", None)
        cb.__dict__["instrumented_shaders"] = (cb.graphics_pipeline, graphics_plan(state, v, f))
        return None

    def graphics_plan(state: DeviceInstrumentation, v, f) -> InstrumentedPipeline | None:
        """One draw's plan for instrumented vertex and/or fragment shader objects (made once per pair)."""
        if v is None and f is None:
            return None
        key = (id(v), id(f))
        if key in state.shader_pairs:
            return state.shader_pairs[key]
        from dataclasses import replace

        if v is not None and f is not None and v.layout != f.layout:
            warn_once("shader-pair", "vertex and fragment shader objects with different set layouts or push-constant "
                      "ranges: their draws are not instrumented (no entries)")
            plan: Any = (v, f)
        else:
            stages, bindings, offset = [], [], 0
            for p in (v, f):
                if p is not None:
                    stages.append(replace(p.stages[0], base=offset // 4))
                    bindings.append((p.set_index, offset))
                    align = state.limits.alignment
                    offset += -(-p.stages[0].blocks * 4 // align) * align
            first = v or f
            plan = InstrumentedPipeline(vk.VK_PIPELINE_BIND_POINT_GRAPHICS, first.layout, first.set_index, stages,
                                        tuple(bindings))
        state.shader_pairs[key] = plan
        return plan

    # ---- objects ------------------------------------------------------------------------------
    def object_of(dev: Device, handle) -> InstrumentationObject | None:
        state = device_state(dev)
        return state.objects.get(int(handle)) if state is not None else None

    @hooks.replace("vkCreateShaderInstrumentationARM")
    def create_object(device, pCreateInfo, pAllocator, pInstrumentation):
        dev = objects.get(device, Device)
        state = device_state(dev)
        if state is None:
            warn_once("create", "vkCreateShaderInstrumentationARM on a device that did not enable the "
                      "shaderInstrumentation feature")
            return vk.VK_ERROR_FEATURE_NOT_PRESENT
        obj = InstrumentationObject(next(_handles), dev)
        state.objects[obj.handle] = obj
        pInstrumentation[0] = obj.handle
        return vk.VK_SUCCESS

    @hooks.replace("vkDestroyShaderInstrumentationARM")
    def destroy_object(device, instrumentation, pAllocator):
        dev = objects.get(device, Device)
        state = device_state(dev)
        obj = state.objects.get(int(instrumentation)) if state is not None else None
        if obj is None:
            return
        for fn in obj.before_clear:   # its values are about to go
            fn()
        del state.objects[int(instrumentation)]
        for chunk in obj.chunks:
            counter_memory.destroy_chunk(ffi, dev, chunk)

    def region_for(obj: InstrumentationObject, pipeline: InstrumentedPipeline) -> Region:
        dev = obj.device
        state = device_state(dev)
        size = pipeline.counters * 4
        with state.lock:
            chunk = obj.chunks[-1] if obj.chunks else None
            if chunk is None or chunk.used + size > CHUNK_BYTES:
                chunk = counter_memory.new_chunk(ffi, dev, state.limits, CHUNK_BYTES, REGION_MAX_BYTES, 0)
                obj.chunks.append(chunk)
            offset = chunk.used
            align = state.limits.alignment
            chunk.used = offset + ((size + align - 1) // align) * align
        return Region(chunk, offset, pipeline)

    # ---- recording -------------------------------------------------------------------------------
    @hooks.also_after("vkBeginCommandBuffer")
    def after_begin_buffer(cb, result, commandBuffer, pBeginInfo):
        """Every command buffer of a device with the feature records through its Python hooks: an
        action with an instrumented pipeline and no active object must still bind somewhere for
        its shaders to count into (the discard region), when it is recorded."""
        if result == vk.VK_SUCCESS and device_state(cb.device) is not None:
            hooks.recorder.python_path(commandBuffer, True)

    @hooks.replace("vkCmdBeginShaderInstrumentationARM")
    def cmd_begin(commandBuffer, instrumentation):
        cb = objects.get(commandBuffer, CommandBuffer)
        obj = object_of(cb.device, instrumentation)
        if obj is None:
            warn_once("begin-unknown", "vkCmdBeginShaderInstrumentationARM with an unknown instrumentation object: "
                      "ignored")
            return
        if cb.instrumentation is not None:
            warn_once("begin-twice", "vkCmdBeginShaderInstrumentationARM while another object is active in the "
                      "command buffer (only one may be active): ignored")
            return
        cb.instrumentation = obj

    @hooks.replace("vkCmdEndShaderInstrumentationARM")
    def cmd_end(commandBuffer):
        cb = objects.get(commandBuffer, CommandBuffer)
        if cb.instrumentation is None:
            warn_once("end-none", "vkCmdEndShaderInstrumentationARM with no active instrumentation object: ignored")
            return
        cb.instrumentation = None

    @hooks.also_before("vkCmdExecuteCommands")
    def before_execute(cb, commandBuffer, count, pCommandBuffers):
        if cb.instrumentation is not None:
            warn_once("execute", "vkCmdExecuteCommands while shader instrumentation is active (not allowed by "
                      "VK_ARM_shader_instrumentation): the secondaries' work is not attributed to it")

    def discard_region(dev: Device) -> Chunk:
        state = device_state(dev)
        with state.lock:
            if state.discard is None:
                state.discard = counter_memory.new_chunk(ffi, dev, state.limits, state.limits.alignment,
                                                         REGION_MAX_BYTES, 0)
            return state.discard

    def bind(cb: CommandBuffer, commandBuffer, bind_point: int, plan: InstrumentedPipeline, chunk: Chunk,
             offset: int) -> None:
        sets = ffi.new("VkDescriptorSet[1]", [chunk.descriptor_set])
        for set_index, part in plan.sets:
            offsets = ffi.new("uint32_t[1]", [offset if chunk is state_discard(cb.device) else offset + part])
            cb.device.next.vkCmdBindDescriptorSets(commandBuffer, bind_point, plan.layout, set_index, 1, sets, 1,
                                                   offsets)

    def state_discard(dev: Device) -> Chunk | None:
        return device_state(dev).discard

    def action(bind_point: int):
        def before(cb: CommandBuffer, commandBuffer, *args):
            obj = cb.instrumentation
            if obj is not None:
                index = obj.next_index    # every action takes an index, instrumented or not (vk.xml)
                obj.next_index += 1
            bound = cb.graphics_pipeline if bind_point == vk.VK_PIPELINE_BIND_POINT_GRAPHICS else cb.compute_pipeline
            plan = getattr(bound, "instrumented", None)
            if plan is None and bind_point == vk.VK_PIPELINE_BIND_POINT_GRAPHICS:
                shaders = cb.__dict__.get("instrumented_shaders")    # graphics shader objects bound
                if shaders is not None and shaders[0] is bound:
                    plan = shaders[1]
            if plan is None:
                return None
            if isinstance(plan, tuple):   # shader objects that cannot share a region: they count, unread
                for p in plan:
                    bind(cb, commandBuffer, bind_point, p, discard_region(cb.device), 0)
                return None
            if obj is None:               # its shaders still count: into the region nobody reads
                chunk, offset = discard_region(cb.device), 0
            else:
                region = region_for(obj, plan)
                obj.regions[index] = region
                chunk, offset = region.chunk, region.offset
            bind(cb, commandBuffer, bind_point, plan, chunk, offset)
            return None
        return before

    for name in DRAWS:
        hooks.also_before(name)(action(vk.VK_PIPELINE_BIND_POINT_GRAPHICS))
    for name in DISPATCHES:
        hooks.also_before(name)(action(vk.VK_PIPELINE_BIND_POINT_COMPUTE))
    for name in TRACE_RAYS:
        hooks.also_before(name)(action(vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR))

    # ---- results ------------------------------------------------------------------------------
    @hooks.replace("vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM")
    def enumerate_metrics(physicalDevice, pCount, pDescriptions):
        objects.get(physicalDevice, PhysicalDevice)
        if pDescriptions == ffi.NULL:
            pCount[0] = len(METRICS)
            return vk.VK_SUCCESS
        n = min(pCount[0], len(METRICS))
        for i in range(n):
            d = pDescriptions[i]
            for field_name, text in (("name", METRICS[i][0]), ("description", METRICS[i][1])):
                data = text.encode()[: ffi.sizeof(getattr(d, field_name)) - 1] + b"\0"
                ffi.memmove(getattr(d, field_name), data, len(data))
        pCount[0] = n
        return vk.VK_INCOMPLETE if n < len(METRICS) else vk.VK_SUCCESS

    @hooks.replace("vkGetShaderInstrumentationValuesARM")
    def get_values(device, instrumentation, pCount, pValues, flags):
        dev = objects.get(device, Device)
        obj = object_of(dev, instrumentation)
        if obj is None:
            warn_once("get-unknown", "vkGetShaderInstrumentationValuesARM with an unknown object")
            pCount[0] = 0
            return vk.VK_SUCCESS
        total = sum(region.pipeline.entries for region in obj.regions.values())
        if pValues == ffi.NULL:
            pCount[0] = total
            return vk.VK_SUCCESS
        n = min(pCount[0], total)
        if n:
            rows = results(obj)[:n]
            ffi.memmove(pValues, rows.tobytes(), rows.nbytes)   # nothing past stride x count
        pCount[0] = n
        return vk.VK_INCOMPLETE if n < total else vk.VK_SUCCESS

    @hooks.replace("vkClearShaderInstrumentationMetricsARM")
    def clear(device, instrumentation):
        dev = objects.get(device, Device)
        obj = object_of(dev, instrumentation)
        if obj is None:
            return
        for fn in obj.before_clear:
            fn()
        for chunk in obj.chunks:
            ffi.memmove(chunk.mapped, bytes(chunk.used), chunk.used)

    def results(obj: InstrumentationObject):
        """Every block's entry (ROW_DTYPE: the packed header + metrics), sorted by resultIndex,
        stage, resultSubIndex, block. Each pipe metric is round(executions x ops), as Python's
        round (half to even, like numpy's rint). Actions of one pipeline are done together: their
        regions' counters gathered into one matrix (one row per action)."""
        import numpy as np

        dtype = row_dtype()
        groups: dict[int, list[tuple[int, Region]]] = {}
        for index, region in obj.regions.items():
            groups.setdefault(id(region.pipeline), []).append((index, region))
        chunks: dict[int, Any] = {}
        parts = []
        for members in groups.values():
            plan = members[0][1].pipeline
            indices = np.array([index for index, _ in members], dtype=np.uint32)
            counts = np.empty((len(members), plan.counters), dtype=np.uint32)
            for row, (_, region) in enumerate(members):
                words = chunks.get(id(region.chunk))
                if words is None:
                    words = chunks[id(region.chunk)] = np.frombuffer(
                        ffi.buffer(region.chunk.mapped, region.chunk.used), dtype=np.uint32)
                counts[row] = words[region.offset // 4:region.offset // 4 + plan.counters]
            for stage in plan.stages:
                executions = counts[:, stage.base:stage.base + stage.blocks]          # actions x blocks
                rows = np.zeros(executions.shape, dtype)
                rows["header"][..., 0] = indices[:, None]
                rows["header"][..., 2] = stage.bit
                rows["header"][..., 3] = np.arange(stage.blocks)
                rows["metrics"][..., :-1] = np.rint(executions[..., None].astype(np.float64) * pipe_table(stage))
                rows["metrics"][..., -1] = executions
                parts.append(rows.reshape(-1))
        if not parts:
            return np.zeros(0, dtype)
        out = np.concatenate(parts)
        header = out["header"]
        return out[np.lexsort((header[:, 3], header[:, 2], header[:, 0]))]   # last key first: index, stage, block


def row_dtype():
    """One entry of vkGetShaderInstrumentationValuesARM: VkShaderInstrumentationMetricDataHeaderARM
    (resultIndex, resultSubIndex, stages, basicBlockIndex: u32) then numMetrics u64."""
    import numpy as np

    return np.dtype([("header", "<u4", (4,)), ("metrics", "<u8", (len(METRICS),))])


def pipe_table(stage: InstrumentedStage):
    """blocks x pipe metrics (METRICS order): thread-operations per execution, made once per stage."""
    table = stage.__dict__.get("_table")
    if table is None:
        import numpy as np

        table = np.array([[ops[_OPS_INDEX[name]] for name, _ in METRICS[:-1]] for ops in stage.ops],
                         dtype=np.float64).reshape(len(stage.ops), len(METRICS) - 1)
        stage.__dict__["_table"] = table
    return table


def _with_instrumentation(pipeline, plan: InstrumentedPipeline, cycles: dict | None = None):
    """The pipeline record (frozen) with its instrumentation plan attached (and, for a shader
    object, the costs of the application's SPIR-V)."""
    from dataclasses import replace

    return replace(pipeline, instrumented=plan, **({"shader_cycles": cycles} if cycles is not None else {}))

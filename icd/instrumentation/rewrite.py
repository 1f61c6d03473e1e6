"""VK_ARM_shader_instrumentation at create time: pipelines and shader objects rewritten to count blocks.

Role: what hooks.py's create hooks do. A compute or graphics pipeline created with
VK_PIPELINE_CREATE_2_INSTRUMENT_SHADERS_BIT_ARM (bit 39, in VkPipelineCreateFlags2CreateInfoKHR),
on a device that enabled the feature, gets every vertex, fragment and compute stage rewritten by
the SPIR-V toolkit's block-counter pass (each basic block atomically counts its thread
executions into the counters' storage buffer), in a pipeline layout the driver makes from the
application's with the counters' set appended (index = the application's set count). A compute,
vertex or fragment shader object created with VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM (bit 11)
is rewritten the same way; its counters' sets go after its set layouts (vertex and fragment: two,
N and N+1, so separately bound stages share one region per draw). The bits are cleared before
the backend, which does not know them. The result is an InstrumentedPipeline attached to the
pipeline's (or shader object's) record. What cannot be instrumented is created uninstrumented
with one warning, never with fake zeros.

State: a Rewriter per driver; its pending dicts carry each create call's plans from the before
hook to the after hook, keyed by the address of the driver's copy of the create infos (one entry
per call in flight, so calls on several threads do not meet). The device's own_layouts and
shader_layouts (DeviceInstrumentation) grow here.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from .. import counter_memory, shader_modules
from ..driver import Driver
from ..objects import Device
from .objects import REGION_MAX_BYTES, DeviceInstrumentation, InstrumentedPipeline, InstrumentedStage

INSTRUMENT_SHADERS_BIT = vk.VK_PIPELINE_CREATE_2_INSTRUMENT_SHADERS_BIT_ARM
SHADER_INSTRUMENT_BIT = vk.VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM    # bit 11 of VkShaderCreateFlagsEXT
STAGE_BITS = {"vertex": vk.VK_SHADER_STAGE_VERTEX_BIT, "fragment": vk.VK_SHADER_STAGE_FRAGMENT_BIT,
              "compute": vk.VK_SHADER_STAGE_COMPUTE_BIT}


class InstrumentError(Exception):
    """A pipeline this driver cannot instrument (it is created uninstrumented)."""


def with_instrumentation(pipeline, plan: InstrumentedPipeline, cycles: dict | None = None):
    """The pipeline record (frozen) with its instrumentation plan attached (and, for a shader
    object, the costs of the application's SPIR-V)."""
    return replace(pipeline, instrumented=plan, **({"shader_cycles": cycles} if cycles is not None else {}))


def compute_stages(ffi, info, keep) -> list:
    return [ffi.addressof(info, "stage")]


def graphics_stages(ffi, info, keep) -> list:
    """The stages of the driver's copy of a graphics create info, made its own (copied) first."""
    stages = ffi.new("VkPipelineShaderStageCreateInfo[]", info.stageCount)
    ffi.memmove(stages, info.pStages, ffi.sizeof("VkPipelineShaderStageCreateInfo") * info.stageCount)
    keep.append(stages)
    info.pStages = stages
    return [stages[i] for i in range(info.stageCount)]


class Rewriter:
    """The create-time half of the extension for one driver."""

    def __init__(self, drv: Driver, warn: Callable[[str, str], None]) -> None:
        self.drv, self.ffi, self.warn, self.log = drv, drv.ffi, warn, drv.hooks.errors.log
        self.pending: dict[int, list] = {}          # pipelines: create-info array -> [plans or None, keep]
        self.shader_pending: dict[int, list] = {}   # shader objects: create-info array -> [(plan, code) or None, keep]

    # ---- pipelines ----------------------------------------------------------------------------------
    def before_pipelines(self, kind: str, ctype: str, stages_of, dev: Device, device, cache, count, pInfos,
                         pAllocator, pPipelines):
        """vkCreate{Compute,Graphics}Pipelines: the arguments with the driver's rewritten copy of
        the create infos, or None when no pipeline asks for instrumentation."""
        ffi, warn = self.ffi, self.warn
        wanted = [i for i in range(count) if self.instrument_flags(pInfos[i].pNext) is not None]
        if not wanted:
            return None
        state = dev.instrumentation
        infos = ffi.new(f"{ctype}[]", count)
        ffi.memmove(infos, pInfos, ffi.sizeof(ctype) * count)
        keep: list = [infos]
        plans: list = [None] * count
        for i in wanted:
            infos[i].pNext = self.without_bit(pInfos[i].pNext, keep)
            if state is None:
                warn("feature", "a pipeline asks for instrumentation on a device that did not enable "
                     "the shaderInstrumentation feature: created uninstrumented")
                continue
            saved = ffi.new(f"{ctype} *")
            ffi.memmove(saved, ffi.addressof(infos, i), ffi.sizeof(ctype))
            try:
                stages = stages_of(ffi, infos[i], keep)
                plans[i] = self.instrument(dev, state, infos[i], stages, keep)
            except Exception as e:   # never fake zeros: created uninstrumented, said once
                ffi.memmove(ffi.addressof(infos, i), saved, ffi.sizeof(ctype))
                infos[i].pNext = self.without_bit(pInfos[i].pNext, keep)
                warn(f"{kind}:{e}", f"a {kind} pipeline cannot be instrumented ({e}); "
                     "created uninstrumented: its draws and dispatches produce no entries")
        self.pending[int(ffi.cast("uintptr_t", infos))] = [plans, keep]
        return (device, cache, count, infos, pAllocator, pPipelines)

    def after_pipelines(self, dev: Device, result, device, cache, count, pInfos, pAllocator, pPipelines) -> None:
        """The plans attached to the pipelines' records; the rewritten modules destroyed."""
        ffi = self.ffi
        entry = self.pending.pop(int(ffi.cast("uintptr_t", pInfos)), None)
        if entry is None:
            return
        plans, keep = entry
        for i, plan in enumerate(plans):
            handle = int(pPipelines[i])
            pipeline = dev.res.pipelines.get(handle)
            if plan is not None and handle and pipeline is not None:
                dev.res.pipelines[handle] = with_instrumentation(pipeline, plan)
        for kind, handle in (k for k in keep if isinstance(k, tuple)):
            if kind == "module":   # the pipeline keeps its code; the module can go
                dev.next.vkDestroyShaderModule(device, handle, ffi.NULL)
                dev.res.shaders.pop(handle, None)

    def instrument_flags(self, pnext) -> Any:
        """The VkPipelineCreateFlags2CreateInfoKHR of a create info when it asks for instrumentation."""
        f = structs.find(self.ffi, pnext, vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO,
                         "VkPipelineCreateFlags2CreateInfo *")
        return f if f is not None and f.flags & INSTRUMENT_SHADERS_BIT else None

    def without_bit(self, pnext, keep) -> Any:
        """The chain without the instrumentation bit, which the backend does not know: the flags
        struct copied with the bit cleared, or left out when no other flag remains."""
        ffi = self.ffi
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

    def instrument(self, dev: Device, state: DeviceInstrumentation, info, stages, keep) -> InstrumentedPipeline:
        """Rewrite the stages and the layout of `info` (the driver's copy) to count."""
        layout, set_index = counter_memory.counters_layout(self.ffi, dev, state.limits, int(info.layout))
        state.own_layouts.append(layout)
        done, base = [], 0
        for stage in stages:
            s = self.rewrite_stage(dev, stage, set_index, base, keep)
            done.append(s)
            base += s.blocks
        if base * 4 > REGION_MAX_BYTES:
            raise InstrumentError(f"{base} blocks: more than the {REGION_MAX_BYTES // 4} one draw can count")
        info.layout = layout
        return InstrumentedPipeline(layout, set_index, done)

    def rewrite_stage(self, dev: Device, stage, set_index: int, base: int, keep) -> InstrumentedStage:
        """Replace `stage.module` (a copy the caller owns) with the counting version."""
        from tessera.vkapi.pipelines import STAGE_NAMES, _stage_code

        ffi = self.ffi
        name = STAGE_NAMES.get(stage.stage)
        if name not in STAGE_BITS:
            raise InstrumentError(f"stage 0x{stage.stage:x} is not instrumented (vertex, fragment, compute are)")
        code = _stage_code(ffi, dev, stage)
        if code is None:
            raise InstrumentError(f"the {name} stage's SPIR-V is unknown to the driver")
        rewritten, done = self.rewrite_code(name, code, structs.string(ffi, stage.pName), self.code_spec(stage),
                                            set_index, base)
        result, module = shader_modules.create(ffi, dev, rewritten)
        if result != vk.VK_SUCCESS:
            raise InstrumentError(f"vkCreateShaderModule failed ({result})")
        dev.res.shaders[int(module)] = code     # reflection and costs see the application's SPIR-V
        keep.append(("module", int(module)))
        stage.module = module
        return done

    def rewrite_code(self, name: str, code: bytes, entry: str, spec, set_index: int, base: int
                     ) -> tuple[bytes, InstrumentedStage]:
        """The counting version of one stage's SPIR-V, and what its counters mean."""
        from tessera.compiler import api
        from tessera.spirv import parse
        from tessera.spirv.passes.block_counters import add_block_counters

        cost = api.shader_cost(code, entry, self.drv.profile.key, spec)
        module = parse(code)
        layout = add_block_counters(module, set_index, 0, base=base)
        ops = [tuple(b.ops) for b in cost.blocks]
        if len(ops) != layout.count:
            raise InstrumentError("the compiler model and the counter pass disagree on the block count")
        return module.to_bytes(), InstrumentedStage(name, STAGE_BITS[name], base, layout.count, ops)

    def code_spec(self, info):
        """The specialization constants of a stage or shader object create info."""
        from tessera.vkapi.pipelines import _spec_values
        return _spec_values(self.ffi, info.pSpecializationInfo)

    # ---- shader objects (VK_EXT_shader_object) ------------------------------------------------------
    def before_shaders(self, dev: Device, device, count, pInfos, pAllocator, pShaders):
        """vkCreateShadersEXT: the arguments with the driver's rewritten copy of the create
        infos, or None when no shader object asks for instrumentation."""
        ffi, warn = self.ffi, self.warn
        wanted = [i for i in range(count) if pInfos[i].flags & SHADER_INSTRUMENT_BIT]
        if not wanted:
            return None
        state = dev.instrumentation
        infos = ffi.new("VkShaderCreateInfoEXT[]", count)
        ffi.memmove(infos, pInfos, ffi.sizeof("VkShaderCreateInfoEXT") * count)
        keep: list = [infos]
        plans: list = [None] * count
        for i in wanted:
            info = infos[i]
            info.flags &= ~SHADER_INSTRUMENT_BIT     # the backend does not know the bit
            if state is None:
                warn("feature", "a pipeline asks for instrumentation on a device that did not enable "
                     "the shaderInstrumentation feature: created uninstrumented")
                continue
            try:
                plans[i] = (self.instrument_shader(dev, state, info, keep),
                            bytes(ffi.buffer(pInfos[i].pCode, pInfos[i].codeSize)))
            except Exception as e:   # never fake zeros: created uninstrumented, said once
                ffi.memmove(ffi.addressof(infos, i), ffi.addressof(pInfos, i), ffi.sizeof("VkShaderCreateInfoEXT"))
                infos[i].flags &= ~SHADER_INSTRUMENT_BIT
                warn(f"shader:{e}", f"a shader object cannot be instrumented ({e}); created uninstrumented: "
                     "its draws and dispatches produce no entries")
        self.shader_pending[int(ffi.cast("uintptr_t", infos))] = [plans, keep]
        return (device, count, infos, pAllocator, pShaders)

    def instrument_shader(self, dev: Device, state: DeviceInstrumentation, info, keep) -> InstrumentedPipeline:
        """Rewrite `info` (the driver's copy) to count; the plan its dispatches bind."""
        from tessera.vkapi.pipelines import STAGE_NAMES

        ffi = self.ffi
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
        rewritten, stage = self.rewrite_code(name, code, structs.string(ffi, info.pName), self.code_spec(info),
                                             set_index, 0)
        if stage.blocks * 4 > REGION_MAX_BYTES // 2:
            raise InstrumentError(f"{stage.blocks} blocks: more than the {REGION_MAX_BYTES // 8} a shader object "
                                  "can count")
        words = ffi.new("char[]", rewritten)
        set_layouts = ffi.new("VkDescriptorSetLayout[]", [*sets, *[state.limits.set_layout] * counters])
        keep += [words, set_layouts]
        info.pCode, info.codeSize = words, len(rewritten)
        info.pSetLayouts, info.setLayoutCount = set_layouts, len(sets) + counters
        return InstrumentedPipeline(state.shader_layouts[key], set_index, [stage])

    def after_shaders(self, dev: Device, result, device, count, pInfos, pAllocator, pShaders) -> None:
        """The plans attached to the shader objects' records, with the costs of the application's SPIR-V."""
        ffi = self.ffi
        entry = self.shader_pending.pop(int(ffi.cast("uintptr_t", pInfos)), None)
        if entry is None or result not in (vk.VK_SUCCESS, vk.VK_INCOMPATIBLE_SHADER_BINARY_EXT):
            return
        from .. import shader_costs
        for i, done in enumerate(entry[0]):
            known = dev.res.shader_objects.get(int(pShaders[i]))
            if done is None or known is None:
                continue
            plan, original = done
            info = pInfos[i]
            # Costs of the application's SPIR-V, not of the counting version the backend got.
            cycles = shader_costs.of_stages(self.drv.profile.key, [(plan.stages[0].name, original,
                                                                    structs.string(ffi, info.pName),
                                                                    self.code_spec(info))],
                                            self.log)
            dev.res.shader_objects[int(pShaders[i])] = (known[0], with_instrumentation(known[1], plan, cycles))

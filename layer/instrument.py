"""`tessera run --instrument`: the layer drives VK_ARM_shader_instrumentation for the application.

Role: as the extension's "Validation and Tools" section describes, the layer hides the extension
from the application, enables it (and its feature) on the devices the application creates, adds
the instrumentation flag (VkPipelineCreateFlags2CreateInfoKHR, bit 39) to every compute and
graphics pipeline, and brackets the recording with begin/end regions. A device whose application
enables the extension itself is left alone.

Regions: one per command buffer, not one per draw (both are exact; this one records two
commands per recording instead of two per action). Each recording of a command buffer gets its
own instrumentation object (a re-recording, or a new buffer at a reused handle, must not clear or
renumber values still to be read); the object's resultIndex advances by one for every draw,
dispatch and trace-rays (vk.xml), so the layer, which sees the same commands in the same order,
numbers them too and keeps resultIndex -> (tag, draw ordinal, command, pipeline). An object is
destroyed once its recording is replaced and every submit of it has been read. A recording
submitted again before its first submit was read shares that read's values. The region is closed
around vkCmdExecuteCommands (no object may be active there) and before vkEndCommandBuffer.
After a submit, values are read when the submit has completed (the indirect-capture fence,
indirect.py), cleared (an object accumulates across submits), and sent as one INSTRUMENTATION
message per tag (sequence = submitID); each instrumented pipeline stage's blocks, with their
SPIR-V disassembly and OpLine source lines, go once as a SHADER message.

Threads: the tracker state is the recording thread's (external synchronisation); readbacks run
where the capturer polls (submits, waits, present, device destruction) on the application's
thread. Objects live until their device is destroyed.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tessera.vkapi import structs
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.vkconst import vk

from . import encoder
from .state import DeviceState, LayerState
from .trackers import Workload

EXTENSION = "VK_ARM_shader_instrumentation"
INSTRUMENT_SHADERS_BIT = vk.VK_PIPELINE_CREATE_2_INSTRUMENT_SHADERS_BIT_ARM
SHADER_INSTRUMENT_BIT = vk.VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM   # bit 11 of VkShaderCreateFlagsEXT
METRICS = ("fma", "cvt", "sfu", "ls", "tex", "var", "threads")   # the emulated Mali's order (enumerated)
STAGE_NAMES = {vk.VK_SHADER_STAGE_VERTEX_BIT: "vertex", vk.VK_SHADER_STAGE_FRAGMENT_BIT: "fragment",
               vk.VK_SHADER_STAGE_COMPUTE_BIT: "compute"}
_ROW = struct.Struct(f"<IIII{len(METRICS)}Q")
GRAPHICS = vk.VK_PIPELINE_BIND_POINT_GRAPHICS
COMPUTE = vk.VK_PIPELINE_BIND_POINT_COMPUTE
RAY_TRACING = vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR
RATE_NAMES = {"fma": "FMA", "cvt": "CVT", "sfu": "SFU", "ls": "LS", "tex": "T", "var": "V"}   # -> compiler PIPES


@dataclass
class Action:
    tag: int | None
    command: str
    draw: int | None            # ordinal of a draw in its render pass
    pipeline: int               # the bound pipeline's handle (0 unknown)


@dataclass
class Recording:
    """One recording's instrumentation object and what its resultIndex values mean."""
    obj: int
    next_index: int = 0                                       # the object's next resultIndex
    actions: dict[int, Action] = field(default_factory=dict)
    bound: dict[int, int] = field(default_factory=dict)      # bind point -> pipeline handle
    shader_objects: dict[int, int] = field(default_factory=dict)   # stage bit -> VkShaderEXT bound (0: none)
    active: bool = False
    unread: int = 0                                           # submits whose values are still to read
    replaced: bool = False                                    # the buffer was recorded again


@dataclass
class PipelineCode:
    stages: list[tuple[str, str, bytes]]   # (stage, entry, SPIR-V)
    sent: bool = False


class Instrumenter:
    def __init__(self, ffi, state: LayerState, send, errors) -> None:
        self.ffi, self.state, self.send, self.errors = ffi, state, send, errors
        self.devices: set[int] = set()               # device addresses instrumented
        self.recordings: dict[int, Recording] = {}   # command buffer address -> its recording
        self.pipelines: dict[int, PipelineCode] = {}
        self.hidden = frozenset({EXTENSION})
        self.pending: dict[int, list] = {}           # create infos' address -> [what they keep alive, stage code]
        self.hooks: HookSet | None = None            # set by register

    # ---- device ------------------------------------------------------------------------------
    def device_info(self, info, app_names: list[str], below: dict[str, int], keep):
        """The create info with the extension and its feature, when the driver has them and the
        application did not ask for the extension itself; (info, instrumented)."""
        ffi = self.ffi
        if EXTENSION in app_names or EXTENSION not in below:
            return info, False
        current = structs.extension_names(ffi, info)   # what goes down (emulated extensions already out)
        info = structs.with_extensions(ffi, "VkDeviceCreateInfo *", info, [*current, EXTENSION], keep)
        feature = ffi.new("VkPhysicalDeviceShaderInstrumentationFeaturesARM *", {
            "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INSTRUMENTATION_FEATURES_ARM,
            "pNext": info.pNext, "shaderInstrumentation": vk.VK_TRUE})
        keep.append(feature)
        info.pNext = feature
        return info, True

    def device_created(self, dev: DeviceState, instrumented: bool) -> None:
        if instrumented:
            self.devices.add(dev.address)

    def instrumented(self, dev: DeviceState) -> bool:
        return dev.address in self.devices

    def pipe_rates(self, dev: DeviceState, device_name: str) -> dict[str, float] | None:
        """For the DEVICE message of an instrumented device: each pipe's thread-operations per core
        per clock, from the compiler model's table of the GPU the device names (the table that
        priced the values: the emulated Mali's metrics are its BlockCost.ops), so hostd can name
        the bound pipe. None for a GPU the compiler model does not know."""
        if not self.instrumented(dev):
            return None
        from tessera.compiler.costs import GPUS

        model = device_name.split(" (", 1)[0]          # "Mali-G720 (emulated)" -> "Mali-G720"
        gpu = next((g for g in GPUS.values() if g.name == model), None)
        if gpu is None:
            return None
        return {ours: gpu.rates[theirs].per_clock for ours, theirs in RATE_NAMES.items()}

    # ---- hooks: one method per command (HookSet.bind) -----------------------------------------
    def register(self, hooks) -> None:
        """Bind the hooks. The apply_ methods number the actions whose records render_passes.py and
        workloads.py apply: the intercept table names those modules first in each row, so HookSet
        runs their appliers first (draws counted, workloads tagged), then these."""
        self.hooks = hooks
        hooks.bind(self)

    # ---- pipelines: the flag on every compute and graphics pipeline ----------------------------
    def flagged(self, ctype: str, count: int, pInfos, keep):
        """Copies of the create infos with the instrumentation bit in their flags2 struct."""
        ffi = self.ffi
        infos = ffi.new(f"{ctype}[]", count)
        ffi.memmove(infos, pInfos, ffi.sizeof(ctype) * count)
        keep.append(infos)
        for i in range(count):
            existing = structs.find(ffi, pInfos[i].pNext, vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO,
                                    "VkPipelineCreateFlags2CreateInfo *")
            if existing is not None:   # the application's flags2: a copy of its chain with the bit added
                nodes = list(structs.chain(ffi, pInfos[i].pNext))
                head = structs.rebuild_chain(ffi, nodes, keep)
                for node in structs.chain(ffi, head):
                    if node.sType == vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO:
                        ffi.cast("VkPipelineCreateFlags2CreateInfo *", node).flags |= INSTRUMENT_SHADERS_BIT
                infos[i].pNext = head
                continue
            flags2 = ffi.new("VkPipelineCreateFlags2CreateInfo *", {
                "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO, "pNext": pInfos[i].pNext,
                "flags": infos[i].flags | INSTRUMENT_SHADERS_BIT})
            keep.append(flags2)
            infos[i].pNext = flags2
        return infos

    def code_of(self, dev, stage) -> tuple[str, str, bytes] | None:
        ffi = self.ffi
        name = STAGE_NAMES.get(stage.stage)
        code = dev.res.shaders.get(int(stage.module)) if int(stage.module) else None
        if code is None:
            inline = structs.find(ffi, stage.pNext, vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  "VkShaderModuleCreateInfo *")
            code = bytes(ffi.buffer(inline.pCode, inline.codeSize)) if inline is not None else None
        return (name, structs.string(ffi, stage.pName), code) if name and code else None

    def _before_create(self, ctype: str, stages_of, dev, device, cache, count, pInfos, pAllocator, pPipelines):
        if not self.instrumented(dev):
            return None
        keep: list = []
        infos = self.flagged(ctype, count, pInfos, keep)
        code = [[c for s in stages_of(pInfos[i]) if (c := self.code_of(dev, s))] for i in range(count)]
        self.pending[int(self.ffi.cast("uintptr_t", infos))] = [keep, code]
        return device, cache, count, infos, pAllocator, pPipelines

    def _after_create(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines) -> None:
        entry = self.pending.pop(int(self.ffi.cast("uintptr_t", pInfos)), None)
        if entry is None:
            return
        for i, stages in enumerate(entry[1]):
            if int(pPipelines[i]) and stages:
                self.pipelines[int(pPipelines[i])] = PipelineCode(stages)

    def before_vkCreateComputePipelines(self, dev, device, cache, count, pInfos, pAllocator, pPipelines):
        return self._before_create("VkComputePipelineCreateInfo", lambda info: [info.stage],
                                   dev, device, cache, count, pInfos, pAllocator, pPipelines)

    def before_vkCreateGraphicsPipelines(self, dev, device, cache, count, pInfos, pAllocator, pPipelines):
        return self._before_create("VkGraphicsPipelineCreateInfo",
                                   lambda info: [info.pStages[s] for s in range(info.stageCount)],
                                   dev, device, cache, count, pInfos, pAllocator, pPipelines)

    def after_vkCreateComputePipelines(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        self._after_create(dev, result, device, cache, count, pInfos, pAllocator, pPipelines)

    def after_vkCreateGraphicsPipelines(self, dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
        self._after_create(dev, result, device, cache, count, pInfos, pAllocator, pPipelines)

    # ---- shader objects: the flag on every SPIR-V shader (the driver says which it cannot do)
    def before_vkCreateShadersEXT(self, dev, device, count, pInfos, pAllocator, pShaders):
        if not self.instrumented(dev):
            return None
        ffi = self.ffi
        infos = ffi.new("VkShaderCreateInfoEXT[]", count)
        ffi.memmove(infos, pInfos, ffi.sizeof("VkShaderCreateInfoEXT") * count)
        code = []
        for i in range(count):
            info = infos[i]
            name = STAGE_NAMES.get(info.stage)
            if info.codeType != vk.VK_SHADER_CODE_TYPE_SPIRV_EXT:
                code.append(None)
                continue
            info.flags |= SHADER_INSTRUMENT_BIT
            code.append((name, structs.string(ffi, info.pName), bytes(ffi.buffer(info.pCode, info.codeSize)))
                        if name else None)
        self.pending[int(ffi.cast("uintptr_t", infos))] = [[infos], code]
        return device, count, infos, pAllocator, pShaders

    def after_vkCreateShadersEXT(self, dev, result, device, count, pInfos, pAllocator, pShaders):
        entry = self.pending.pop(int(self.ffi.cast("uintptr_t", pInfos)), None)
        if entry is None or result != vk.VK_SUCCESS:
            return
        for i, stage in enumerate(entry[1]):
            if int(pShaders[i]) and stage is not None:
                self.pipelines[int(pShaders[i])] = PipelineCode([stage])

    # ---- regions ---------------------------------------------------------------------
    def recording(self, dev, commandBuffer) -> Recording | None:
        return self.recordings.get(self.state.address(commandBuffer)) if self.instrumented(dev) else None

    def after_vkBeginCommandBuffer(self, dev, result, commandBuffer, pBeginInfo):
        if result != vk.VK_SUCCESS or not self.instrumented(dev):
            return
        ffi = self.ffi
        address = self.state.address(commandBuffer)
        old = self.recordings.pop(address, None)
        if old is not None:
            old.replaced = True
            self._release(dev, old)
        out = ffi.new("VkShaderInstrumentationARM *")
        info = ffi.new("VkShaderInstrumentationCreateInfoARM *",
                       {"sType": vk.VK_STRUCTURE_TYPE_SHADER_INSTRUMENTATION_CREATE_INFO_ARM})
        if dev.next.vkCreateShaderInstrumentationARM(dev.handle, info, ffi.NULL, out) != vk.VK_SUCCESS:
            return
        rec = self.recordings[address] = Recording(int(out[0]))
        dev.next.vkCmdBeginShaderInstrumentationARM(commandBuffer, rec.obj)
        rec.active = True

    def at_record_vkCmdExecuteCommands(self, dev, commandBuffer, *args):
        """Around vkCmdExecuteCommands: the buffer's earlier records are applied (at_record), so
        every action before it is numbered already."""
        rec = self.recording(dev, commandBuffer)
        if rec is not None and rec.active:
            dev.next.vkCmdEndShaderInstrumentationARM(commandBuffer)
            rec.active = False

    def after_vkCmdExecuteCommands(self, dev, result, commandBuffer, *args):
        rec = self.recording(dev, commandBuffer)
        if rec is not None and not rec.active:
            dev.next.vkCmdBeginShaderInstrumentationARM(commandBuffer, rec.obj)
            rec.active = True

    def at_record_vkEndCommandBuffer(self, dev, commandBuffer):
        """Before vkEndCommandBuffer: the region ends now, but the actions recorded in C are
        numbered when the worker applies them, after this; the region counts as open for them
        until the end hooks run there (after_vkEndCommandBuffer)."""
        rec = self.recording(dev, commandBuffer)
        if rec is not None and rec.active:
            dev.next.vkCmdEndShaderInstrumentationARM(commandBuffer)

    def after_vkEndCommandBuffer(self, dev, result, commandBuffer):
        rec = self.recording(dev, commandBuffer)
        if rec is not None:
            rec.active = False

    # ---- what is bound ---------------------------------------------------------------
    def before_vkCmdBindPipeline(self, dev, commandBuffer, bindPoint, pipeline):
        rec = self.recording(dev, commandBuffer)
        if rec is not None:
            rec.bound[bindPoint] = int(pipeline)

    def apply_vkCmdBindPipeline(self, dev, commandBuffer, *args, **kwargs):
        self.before_vkCmdBindPipeline(dev, commandBuffer, *args)

    def before_vkCmdBindShadersEXT(self, dev, commandBuffer, count, pStages, pShaders):
        """Shader objects stand for the bound pipeline: a compute shader object names its
        dispatches; for draws, the fragment shader object (else the vertex one) names them, so
        only that stage's SHADER goes with them (each shader object's SHADER is its own stage)."""
        rec = self.recording(dev, commandBuffer)
        if rec is None:
            return
        stages = rec.shader_objects
        for i in range(count):
            stages[pStages[i]] = int(pShaders[i]) if pShaders != self.ffi.NULL else 0
        rec.bound[vk.VK_PIPELINE_BIND_POINT_COMPUTE] = stages.get(vk.VK_SHADER_STAGE_COMPUTE_BIT, 0)
        if any(pStages[i] != vk.VK_SHADER_STAGE_COMPUTE_BIT for i in range(count)):
            rec.bound[vk.VK_PIPELINE_BIND_POINT_GRAPHICS] = (stages.get(vk.VK_SHADER_STAGE_FRAGMENT_BIT)
                                                             or stages.get(vk.VK_SHADER_STAGE_VERTEX_BIT, 0))

    def _number(self, dev, commandBuffer, command: str, bind_point: int, n: int = 1) -> None:
        rec = self.recording(dev, commandBuffer)
        if rec is None or not rec.active:
            return
        t = self.state.command_buffer(dev, commandBuffer)
        if bind_point == GRAPHICS:
            part = t.part
            tag = part.workload.tag if part is not None and part.workload is not None else None
            first = (part.draws if part is not None else t.continued_draws) - n
            for i in range(n):
                rec.actions[rec.next_index] = Action(tag, command, first + i, rec.bound.get(bind_point, 0))
                rec.next_index += 1
        else:
            workload = next((op for op in reversed(t.ops) if type(op) is Workload), None)
            rec.actions[rec.next_index] = Action(workload.tag if workload else None, command, None,
                                                 rec.bound.get(bind_point, 0))
            rec.next_index += 1

    # ---- numbering the actions: a before-hook per action command, and an applier extending the
    # command's own where it is recorded in C -----------------------------------------------
    def before_vkCmdDraw(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDraw", GRAPHICS)

    def apply_vkCmdDraw(self, dev, commandBuffer, *args, **kwargs):
        self._number(dev, commandBuffer, "vkCmdDraw", GRAPHICS, folded(*args))

    def before_vkCmdDrawIndexed(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawIndexed", GRAPHICS)

    def apply_vkCmdDrawIndexed(self, dev, commandBuffer, *args, **kwargs):
        self._number(dev, commandBuffer, "vkCmdDrawIndexed", GRAPHICS, folded(*args))

    def before_vkCmdDrawIndirect(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawIndirect", GRAPHICS)

    def before_vkCmdDrawIndexedIndirect(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawIndexedIndirect", GRAPHICS)

    def before_vkCmdDrawIndirectCount(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawIndirectCount", GRAPHICS)

    def before_vkCmdDrawIndexedIndirectCount(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawIndexedIndirectCount", GRAPHICS)

    def before_vkCmdDrawMultiEXT(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawMultiEXT", GRAPHICS)

    def before_vkCmdDrawMultiIndexedEXT(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawMultiIndexedEXT", GRAPHICS)

    def before_vkCmdDrawIndirectByteCountEXT(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawIndirectByteCountEXT", GRAPHICS)

    def before_vkCmdDrawMeshTasksEXT(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawMeshTasksEXT", GRAPHICS)

    def apply_vkCmdDrawMeshTasksEXT(self, dev, commandBuffer, *args, **kwargs):
        self._number(dev, commandBuffer, "vkCmdDrawMeshTasksEXT", GRAPHICS, folded(*args))

    def before_vkCmdDrawMeshTasksIndirectEXT(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawMeshTasksIndirectEXT", GRAPHICS)

    def before_vkCmdDrawMeshTasksIndirectCountEXT(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDrawMeshTasksIndirectCountEXT", GRAPHICS)

    def before_vkCmdDispatch(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDispatch", COMPUTE)

    def apply_vkCmdDispatch(self, dev, commandBuffer, *args, **kwargs):
        self._number(dev, commandBuffer, "vkCmdDispatch", COMPUTE)

    def before_vkCmdDispatchBase(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDispatchBase", COMPUTE)

    def apply_vkCmdDispatchBase(self, dev, commandBuffer, *args, **kwargs):
        self._number(dev, commandBuffer, "vkCmdDispatchBase", COMPUTE)

    def before_vkCmdDispatchIndirect(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdDispatchIndirect", COMPUTE)

    def apply_vkCmdDispatchIndirect(self, dev, commandBuffer, *args, **kwargs):
        self._number(dev, commandBuffer, "vkCmdDispatchIndirect", COMPUTE)

    def before_vkCmdTraceRaysKHR(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdTraceRaysKHR", RAY_TRACING)

    def apply_vkCmdTraceRaysKHR(self, dev, commandBuffer, *args, **kwargs):
        self._number(dev, commandBuffer, "vkCmdTraceRaysKHR", RAY_TRACING)

    def before_vkCmdTraceRaysIndirectKHR(self, dev, commandBuffer, *args):
        self._number(dev, commandBuffer, "vkCmdTraceRaysIndirectKHR", RAY_TRACING)

    def apply_vkCmdTraceRaysIndirectKHR(self, dev, commandBuffer, *args, **kwargs):
        self._number(dev, commandBuffer, "vkCmdTraceRaysIndirectKHR", RAY_TRACING)

    # ---- results -----------------------------------------------------------------------------
    def readers(self, dev: DeviceState, submit_id: int, trackers) -> list:
        """What to read once the submit has completed: one reader per instrumented buffer."""
        if not self.instrumented(dev):
            return []
        out = []
        for t in trackers:
            rec = self.recordings.get(t.address)
            if rec is not None and rec.actions:
                rec.unread += 1
                out.append(lambda rec=rec: self._read_then_release(dev, submit_id, rec))
        return out

    def _read_then_release(self, dev: DeviceState, submit_id: int, rec: Recording) -> None:
        try:
            self.read(dev, submit_id, rec)
        finally:
            rec.unread -= 1
            self._release(dev, rec)

    def _release(self, dev: DeviceState, rec: Recording) -> None:
        """Destroy a replaced recording's object once nothing is left to read from it."""
        if rec.replaced and rec.unread == 0 and rec.obj:
            dev.next.vkDestroyShaderInstrumentationARM(dev.handle, rec.obj, self.ffi.NULL)
            rec.obj = 0

    def read(self, dev: DeviceState, submit_id: int, rec: Recording) -> None:
        ffi = self.ffi
        count = ffi.new("uint32_t *")
        dev.next.vkGetShaderInstrumentationValuesARM(dev.handle, rec.obj, count, ffi.NULL, 0)
        data = ffi.new("char[]", _ROW.size * count[0]) if count[0] else ffi.NULL
        if count[0]:
            dev.next.vkGetShaderInstrumentationValuesARM(dev.handle, rec.obj, count, data, 0)
        dev.next.vkClearShaderInstrumentationMetricsARM(dev.handle, rec.obj)   # per-submit values
        if not count[0]:
            return
        import numpy as np

        rows = np.frombuffer(ffi.buffer(data, _ROW.size * count[0]),
                             np.dtype([("header", "<u4", (4,)), ("metrics", "<u8", (len(METRICS),))]))
        header, metrics = rows["header"], rows["metrics"]
        # Entries come sorted by resultIndex then stage: one run of rows per (action, stage).
        key = header[:, 0].astype(np.uint64) << np.uint64(32) | header[:, 2].astype(np.uint64)
        starts = [0, *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(), len(rows)]
        sums = np.add.reduceat(metrics, starts[:-1], axis=0, dtype=np.uint64).tolist()   # per run
        table = np.column_stack((header[:, 3].astype(np.uint64), metrics[:, -1], metrics[:, :-1])).tolist()
        ran = (metrics[:, -1] != 0).tolist()      # blocks that executed: [block, executions, pipes...]
        per_tag: dict[int, dict[int, dict]] = {}
        for run, (s, e) in enumerate(zip(starts, starts[1:])):
            index, stage_bit = int(header[s, 0]), int(header[s, 2])
            action = rec.actions.get(index)
            if action is None or action.tag is None:
                continue
            entry = per_tag.setdefault(action.tag, {}).setdefault(index, {
                "result_index": index, "command": action.command, "stages": {},
                **({"draw": action.draw} if action.draw is not None else {}),
                **({"pipeline": encoder.hex_handle(action.pipeline)} if action.pipeline else {})})
            name = STAGE_NAMES.get(stage_bit, "compute")
            stage = entry["stages"].setdefault(name, {"stage": name, "totals": dict.fromkeys(METRICS, 0),
                                                      "blocks": []})
            for k, value in zip(METRICS, sums[run]):
                stage["totals"][k] += value
            stage["blocks"] += [table[i] for i in range(s, e) if ran[i]]
        for tag, actions in per_tag.items():
            for a in actions.values():
                a["stages"] = list(a["stages"].values())
                self._send_shaders(dev, a.get("pipeline"))
            self.send(encoder.instrumentation, submit_id, tag, dev.address, list(actions.values()))

    def _send_shaders(self, dev: DeviceState, pipeline_hex: str | None) -> None:
        if pipeline_hex is None:
            return
        code = self.pipelines.get(int(pipeline_hex, 16))
        if code is None or code.sent:
            return
        code.sent = True
        for stage, entry, spirv in code.stages:
            try:
                blocks = shader_blocks(spirv)
            except Exception:   # the report then shows block numbers without their code
                self.errors.report("vkGetShaderInstrumentationValuesARM", "disassembling an instrumented shader")
                continue
            self.send(encoder.shader, dev.address, int(pipeline_hex, 16), stage, entry, blocks)


def folded(count: int = 1, *args) -> int:
    """The draw calls an applied draw record stands for: folded draws (recorder.py) arrive as
    (count,), one action per draw call."""
    return count


def shader_blocks(spirv: bytes) -> list[dict]:
    """Per basic block (tessera.spirv's global numbering): its function, disassembly and the
    source lines its OpLine instructions name."""
    from tessera.spirv import parse
    from tessera.spirv.cfg import names
    from tessera.spirv.disasm import instruction_text

    module = parse(spirv)
    files = {i.result_id: _string(i.words[1:]) for i in module.instructions() if i.opcode == 7}   # OpString
    table = names(module)
    out = []
    for function in module.functions:
        fname = table.get(function.id)
        for block in function.blocks:
            lines, source = [], []
            for inst in block.instructions:
                if inst.opcode == 8 and len(inst.words) >= 2:                   # OpLine: file, line
                    source.append(f"{files.get(inst.words[0], '?')}:{inst.words[1]}")
                lines.append(instruction_text(module, inst)[:4096])
            entry = {"index": len(out), "lines": lines[:4096]}
            if fname:
                entry["function"] = fname[:1024]
            if source:
                entry["source"] = sorted(set(source))[:4096]
            out.append(entry)
    return out


def _string(words: list[int]) -> str:
    data = b"".join(w.to_bytes(4, "little") for w in words)
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")

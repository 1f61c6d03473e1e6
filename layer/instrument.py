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
from tessera.vkapi.commands import DISPATCHES, DRAWS, TRACE_RAYS
from tessera.vkapi.vkconst import vk

from . import encoder
from .state import DeviceState, LayerState

EXTENSION = "VK_ARM_shader_instrumentation"
INSTRUMENT_SHADERS_BIT = vk.VK_PIPELINE_CREATE_2_INSTRUMENT_SHADERS_BIT_ARM
SHADER_INSTRUMENT_BIT = vk.VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM   # bit 11 of VkShaderCreateFlagsEXT
METRICS = ("fma", "cvt", "sfu", "ls", "tex", "var", "threads")   # the emulated Mali's order (enumerated)
STAGE_NAMES = {vk.VK_SHADER_STAGE_VERTEX_BIT: "vertex", vk.VK_SHADER_STAGE_FRAGMENT_BIT: "fragment",
               vk.VK_SHADER_STAGE_COMPUTE_BIT: "compute"}
_ROW = struct.Struct(f"<IIII{len(METRICS)}Q")
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

    # ---- hooks -------------------------------------------------------------------------------
    def register(self, hooks) -> None:
        ffi, state = self.ffi, self.state
        pending: dict[int, list] = {}

        def flagged(ctype: str, count: int, pInfos, keep):
            """Copies of the create infos with the instrumentation bit in their flags2 struct."""
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

        def code_of(dev, stage) -> tuple[str, str, bytes] | None:
            name = STAGE_NAMES.get(stage.stage)
            code = dev.res.shaders.get(int(stage.module)) if int(stage.module) else None
            if code is None:
                inline = structs.find(ffi, stage.pNext, vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                      "VkShaderModuleCreateInfo *")
                code = bytes(ffi.buffer(inline.pCode, inline.codeSize)) if inline is not None else None
            return (name, structs.string(ffi, stage.pName), code) if name and code else None

        def before_create(ctype: str, stages_of):
            def before(dev, device, cache, count, pInfos, pAllocator, pPipelines):
                if not self.instrumented(dev):
                    return None
                keep: list = []
                infos = flagged(ctype, count, pInfos, keep)
                code = [[c for s in stages_of(pInfos[i]) if (c := code_of(dev, s))] for i in range(count)]
                pending[int(ffi.cast("uintptr_t", infos))] = [keep, code]
                return device, cache, count, infos, pAllocator, pPipelines
            return before

        def after_create(dev, result, device, cache, count, pInfos, pAllocator, pPipelines):
            entry = pending.pop(int(ffi.cast("uintptr_t", pInfos)), None)
            if entry is None:
                return
            for i, stages in enumerate(entry[1]):
                if int(pPipelines[i]) and stages:
                    self.pipelines[int(pPipelines[i])] = PipelineCode(stages)

        hooks.before("vkCreateComputePipelines")(
            before_create("VkComputePipelineCreateInfo", lambda info: [info.stage]))
        hooks.before("vkCreateGraphicsPipelines")(
            before_create("VkGraphicsPipelineCreateInfo", lambda info: [info.pStages[s] for s in range(info.stageCount)]))
        hooks.after("vkCreateComputePipelines")(after_create)
        hooks.after("vkCreateGraphicsPipelines")(after_create)

        # ---- shader objects: the flag on every SPIR-V shader (the driver says which it cannot do)
        @hooks.before("vkCreateShadersEXT")
        def before_create_shaders(dev, device, count, pInfos, pAllocator, pShaders):
            if not self.instrumented(dev):
                return None
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
            pending[int(ffi.cast("uintptr_t", infos))] = [[infos], code]
            return device, count, infos, pAllocator, pShaders

        @hooks.after("vkCreateShadersEXT")
        def after_create_shaders(dev, result, device, count, pInfos, pAllocator, pShaders):
            entry = pending.pop(int(ffi.cast("uintptr_t", pInfos)), None)
            if entry is None or result != vk.VK_SUCCESS:
                return
            for i, stage in enumerate(entry[1]):
                if int(pShaders[i]) and stage is not None:
                    self.pipelines[int(pShaders[i])] = PipelineCode([stage])

        # ---- regions ---------------------------------------------------------------------
        def recording(dev, commandBuffer) -> Recording | None:
            return self.recordings.get(state.address(commandBuffer)) if self.instrumented(dev) else None

        @hooks.after("vkBeginCommandBuffer")
        def after_begin(dev, result, commandBuffer, pBeginInfo):
            if result != vk.VK_SUCCESS or not self.instrumented(dev):
                return
            address = state.address(commandBuffer)
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

        def close(dev, commandBuffer) -> None:
            """Around vkCmdExecuteCommands: the buffer's earlier records are applied (at_record), so
            every action before it is numbered already."""
            rec = recording(dev, commandBuffer)
            if rec is not None and rec.active:
                dev.next.vkCmdEndShaderInstrumentationARM(commandBuffer)
                rec.active = False

        def close_at_end(dev, commandBuffer) -> None:
            """Before vkEndCommandBuffer: the region ends now, but the actions recorded in C are
            numbered when the worker applies them, after this; the region counts as open for them
            until the end hooks run there (after_end)."""
            rec = recording(dev, commandBuffer)
            if rec is not None and rec.active:
                dev.next.vkCmdEndShaderInstrumentationARM(commandBuffer)

        @hooks.after("vkEndCommandBuffer")
        def after_end(dev, result, commandBuffer):
            rec = recording(dev, commandBuffer)
            if rec is not None:
                rec.active = False

        def reopen(dev, commandBuffer) -> None:
            rec = recording(dev, commandBuffer)
            if rec is not None and not rec.active:
                dev.next.vkCmdBeginShaderInstrumentationARM(commandBuffer, rec.obj)
                rec.active = True

        hooks.at_record("vkEndCommandBuffer")(close_at_end)
        hooks.at_record("vkCmdExecuteCommands")(lambda dev, commandBuffer, *a: close(dev, commandBuffer))
        hooks.after("vkCmdExecuteCommands")(lambda dev, result, commandBuffer, *a: reopen(dev, commandBuffer))

        # ---- numbering the actions -----------------------------------------------------
        def bind(dev, commandBuffer, bindPoint, pipeline):
            rec = recording(dev, commandBuffer)
            if rec is not None:
                rec.bound[bindPoint] = int(pipeline)

        def number(dev, commandBuffer, command: str, bind_point: int, n: int = 1) -> None:
            rec = recording(dev, commandBuffer)
            if rec is None or not rec.active:
                return
            t = state.command_buffer(dev, commandBuffer)
            if bind_point == vk.VK_PIPELINE_BIND_POINT_GRAPHICS:
                part = t.part
                tag = part.workload.tag if part is not None and part.workload is not None else None
                first = (part.draws if part is not None else t.continued_draws) - n
                for i in range(n):
                    rec.actions[rec.next_index] = Action(tag, command, first + i, rec.bound.get(bind_point, 0))
                    rec.next_index += 1
            else:
                workload = next((v for op, v in reversed(t.ops) if op == "workload"), None)
                rec.actions[rec.next_index] = Action(workload.tag if workload else None, command, None,
                                                     rec.bound.get(bind_point, 0))
                rec.next_index += 1

        def chain_applier(name: str, after) -> None:
            """Run `after` once the command's own applier (records made in C) has run."""
            original = hooks.appliers.get(name)
            if original is None:
                return

            def applier(dev, commandBuffer, *args, **kwargs):
                original(dev, commandBuffer, *args, **kwargs)
                after(dev, commandBuffer, *args)
            hooks.appliers[name] = applier

        hooks.before("vkCmdBindPipeline")(bind)

        @hooks.before("vkCmdBindShadersEXT")
        def bind_shaders(dev, commandBuffer, count, pStages, pShaders):
            """Shader objects stand for the bound pipeline: a compute shader object names its
            dispatches; for draws, the fragment shader object (else the vertex one) names them, so
            only that stage's SHADER goes with them (each shader object's SHADER is its own stage)."""
            rec = recording(dev, commandBuffer)
            if rec is None:
                return
            stages = rec.shader_objects
            for i in range(count):
                stages[pStages[i]] = int(pShaders[i]) if pShaders != ffi.NULL else 0
            rec.bound[vk.VK_PIPELINE_BIND_POINT_COMPUTE] = stages.get(vk.VK_SHADER_STAGE_COMPUTE_BIT, 0)
            if any(pStages[i] != vk.VK_SHADER_STAGE_COMPUTE_BIT for i in range(count)):
                rec.bound[vk.VK_PIPELINE_BIND_POINT_GRAPHICS] = (stages.get(vk.VK_SHADER_STAGE_FRAGMENT_BIT)
                                                                 or stages.get(vk.VK_SHADER_STAGE_VERTEX_BIT, 0))
        chain_applier("vkCmdBindPipeline", bind)
        for name in DRAWS:
            point = vk.VK_PIPELINE_BIND_POINT_GRAPHICS
            hooks.before(name)(lambda dev, cb, *a, _n=name, _p=point: number(dev, cb, _n, _p))
            # Folded draws (recorder.py) arrive as (count,): one action per draw call.
            chain_applier(name, lambda dev, cb, count=1, *a, _n=name, _p=point: number(dev, cb, _n, _p, count))
        for names, point in ((DISPATCHES, vk.VK_PIPELINE_BIND_POINT_COMPUTE),
                             (TRACE_RAYS, vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR)):
            for name in names:
                hooks.before(name)(lambda dev, cb, *a, _n=name, _p=point: number(dev, cb, _n, _p))
                chain_applier(name, lambda dev, cb, *a, _n=name, _p=point: number(dev, cb, _n, _p))

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

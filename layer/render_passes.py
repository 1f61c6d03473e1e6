"""Render passes: one tag around the whole pass, and its metadata.

Classic render passes (1 and 2) and dynamic rendering get a `t<tagID>`
label pushed before the begin and popped after the end. A dynamic render
pass suspended and resumed keeps one tag: the label is pushed on the first
begin (not on resume) and popped on the final end (not on suspend), even
when that is in another command buffer. Parts within one command buffer
merge as they are recorded; parts across command buffers are joined at
submit (queues.py), which sends the whole pass's draw count as an ANNEX.
Draw counts include draws recorded in secondaries that continue the pass.
Under --content (`descriptors`) each pass also names the images its draws read through descriptor
sets (descriptors.py), secondaries executed in it included; a pass suspended into another command
buffer names none (its later parts' draws are not seen where it is described): it stays opaque.
"""
from __future__ import annotations

from tessera.schemas.labels import tag_label
from tessera.vkapi.ops import PASS_END, PASS_SUSPEND, Execute, PassBegin
from tessera.vkapi.render_passes import PassInfo, describe_begin, describe_rendering
from tessera.vkapi.vkconst import vk

from .descriptions import describe
from .descriptors import PassReads, note_draw
from .tagging import Labeller
from .trackers import Capture, CommandBufferTracker, PassPart, Workload


def _meta(info: PassInfo) -> dict:
    return {"command": info.command, "width": info.width, "height": info.height, "render_area": info.render_area,
            "layers": info.layers, "subpass_count": info.subpasses, "dynamic": info.dynamic,
            "attachments": info.attachments, "attachment_usage": info.usage, "draw_call_count": 0,
            "resources": {"attachments": [f"0x{i:x}" for i in info.images]}}     # 0x0: unknown


class RenderPasses:
    """The render-pass hooks: one method per command (HookSet.bind); per-buffer state is on each
    command buffer's tracker (its open `part`, deferred indirect captures, continued draws)."""

    def __init__(self, state, labeller: Labeller, capture, descriptors: bool = False) -> None:
        self.state = state
        self.labeller = labeller
        self.capture = capture   # indirect.Capturer: indirect draws' parameters
        self.descriptors = descriptors   # --content: each pass names the images its draws read

    def _start(self, dev, t: CommandBufferTracker, commandBuffer, info: PassInfo, tag: int | None = None) -> None:
        """`tag`: the pass was begun in C, which took that tag and opened its label."""
        w = Workload(self.labeller.next_tag() if tag is None else tag, tuple(t.labels), t.pops_below_start)
        if tag is None:
            self.labeller.push(dev, commandBuffer, tag_label(w.tag))
        t.part = PassPart(w, _meta(info), suspends=info.suspending)
        if self.descriptors:
            t.part.descriptor_reads = PassReads(ops_start=len(t.ops))

    def _finish(self, dev, t: CommandBufferTracker, commandBuffer, suspended: bool, in_c: bool = False) -> None:
        """The pass (or this command buffer's part of it) is recorded. `in_c`: it ended in C, which
        closed its label; no Python hook ran inside it, so it has no indirect draw to capture."""
        part, t.part = t.part, None
        part.suspends = suspended
        if not suspended and not in_c:
            self.labeller.pop(dev, commandBuffer)
            # Indirect draws: their parameters are copied once the pass is over (no copies inside one).
            part.captures += [c for c in (pending(commandBuffer) for pending in t.deferred_captures) if c]
            t.deferred_captures.clear()
        reads = part.descriptor_reads
        if reads is not None and part.workload is not None and not suspended and not part.resumes:
            for op in t.ops[reads.ops_start:]:         # secondaries executed inside the pass
                if type(op) is Execute:
                    for s in op.secondaries:
                        if s.descriptors is not None and s.descriptors.continued is not None:
                            reads.join(s.descriptors.continued)
            read = reads.to_json()
            if read is not None:
                part.meta["resources"].update(read)
        t.ops += (PassBegin(part, part.resumes), PASS_SUSPEND if suspended else PASS_END)
        if part.workload is not None:
            part.meta["draw_call_count"] = part.draws
            describe(self.state, dev, t, part.workload, "render_pass", part.meta, suspended or bool(part.captures))
            part.meta = None

    # ---- begin / end ---------------------------------------------------------
    def before_vkCmdBeginRenderPass(self, dev, commandBuffer, pBegin, contents):
        self._start(dev, self.state.command_buffer(dev, commandBuffer), commandBuffer,
                    describe_begin(dev.res, pBegin, "vkCmdBeginRenderPass"))

    def before_vkCmdBeginRenderPass2(self, dev, commandBuffer, pBegin, pSubpassBegin):
        self._start(dev, self.state.command_buffer(dev, commandBuffer), commandBuffer,
                    describe_begin(dev.res, pBegin, "vkCmdBeginRenderPass2"))

    def after_vkCmdEndRenderPass(self, dev, result, commandBuffer):
        t = self.state.command_buffer(dev, commandBuffer)
        if t.part is not None:
            self._finish(dev, t, commandBuffer, suspended=False)

    def after_vkCmdEndRenderPass2(self, dev, result, commandBuffer, pSubpassEnd):
        self.after_vkCmdEndRenderPass(dev, result, commandBuffer)

    def before_vkCmdBeginRendering(self, dev, commandBuffer, pRenderingInfo):
        t = self.state.command_buffer(dev, commandBuffer)
        info = describe_rendering(self.state.ffi, dev.res, pRenderingInfo)
        self._begin_rendering(dev, t, commandBuffer, info)

    def _begin_rendering(self, dev, t: CommandBufferTracker, commandBuffer, info: PassInfo) -> None:
        if info.resuming and t.part is not None:          # resumed in the same command buffer: same part
            t.part.suspends = info.suspending
        elif info.resuming:                               # resumes a pass begun in an earlier command buffer
            t.part = PassPart(None, suspends=info.suspending, resumes=True)
        else:
            self._start(dev, t, commandBuffer, info)

    def after_vkCmdEndRendering(self, dev, result, commandBuffer):
        t = self.state.command_buffer(dev, commandBuffer)
        if t.part is not None and not t.part.suspends:
            self._finish(dev, t, commandBuffer, suspended=False)
        # suspended: the part stays open; a resume in this buffer continues it, else vkEndCommandBuffer ends it

    # Recorded in C (intercepts.TAGGED_PASS_BEGIN, TAGGED_RENDERING_BEGIN, PASS_END) when no hook must act
    # at record time (no pNext, no suspending or resuming): C took the tag and opened the pass's label at
    # the begin and closed it at the end; the records are applied here, in order.
    def _begun_in_c(self, command: str, dev, commandBuffer, pBegin, tag: int) -> None:
        self._start(dev, self.state.command_buffer(dev, commandBuffer), commandBuffer,
                    describe_begin(dev.res, pBegin, command), tag)

    def apply_vkCmdBeginRenderPass(self, dev, commandBuffer, pBegin, contents, tag: int):
        self._begun_in_c("vkCmdBeginRenderPass", dev, commandBuffer, pBegin, tag)

    def apply_vkCmdBeginRenderPass2(self, dev, commandBuffer, pBegin, pSubpassBegin, tag: int):
        self._begun_in_c("vkCmdBeginRenderPass2", dev, commandBuffer, pBegin, tag)

    def apply_vkCmdBeginRendering(self, dev, commandBuffer, pRenderingInfo, tag: int):
        self._start(dev, self.state.command_buffer(dev, commandBuffer), commandBuffer,
                    describe_rendering(self.state.ffi, dev.res, pRenderingInfo), tag)

    def _ended_in_c(self, dev, commandBuffer) -> None:
        t = self.state.command_buffer(dev, commandBuffer)
        if t.part is not None:
            self._finish(dev, t, commandBuffer, suspended=False, in_c=True)

    def apply_vkCmdEndRenderPass(self, dev, commandBuffer, *end_info):
        self._ended_in_c(dev, commandBuffer)

    def apply_vkCmdEndRenderPass2(self, dev, commandBuffer, *end_info):
        self._ended_in_c(dev, commandBuffer)

    def apply_vkCmdEndRendering(self, dev, commandBuffer, *end_info):
        self._ended_in_c(dev, commandBuffer)

    def before_vkEndCommandBuffer(self, dev, commandBuffer):
        t = self.state.command_buffer(dev, commandBuffer)
        if t.part is not None:   # suspended at the end of this buffer: resumed in a later one
            t.deferred_captures.clear()   # no copy can go between suspended parts: sizes stay unknown
            self._finish(dev, t, commandBuffer, suspended=True)

    # ---- draws ------------------------------------------------------------------
    def count(self, dev, commandBuffer, n: int = 1) -> CommandBufferTracker:
        t = self.state.command_buffer(dev, commandBuffer)
        if t.part is not None:
            t.part.draws += n
        elif t.level == vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY:
            t.continued_draws += n
        if self.descriptors:
            note_draw(t)
        return t

    # Recorded in C (shim_spec.RECORDED), consecutive draws folded into one count; the before-hooks
    # serve command buffers the C side does not know.
    def apply_vkCmdDraw(self, dev, commandBuffer, n: int) -> None:
        self.count(dev, commandBuffer, n)

    def apply_vkCmdDrawIndexed(self, dev, commandBuffer, n: int) -> None:
        self.count(dev, commandBuffer, n)

    def apply_vkCmdDrawMeshTasksEXT(self, dev, commandBuffer, n: int) -> None:
        self.count(dev, commandBuffer, n)

    def before_vkCmdDraw(self, dev, commandBuffer, vertexCount, instanceCount, firstVertex, firstInstance):
        self.count(dev, commandBuffer)

    def before_vkCmdDrawIndexed(self, dev, commandBuffer, indexCount, instanceCount, firstIndex, vertexOffset,
                                firstInstance):
        self.count(dev, commandBuffer)

    def _indirect(self, dev, commandBuffer, buffer, offset, drawCount, stride, kind: str) -> None:
        t = self.count(dev, commandBuffer, drawCount)
        if t.part is not None and drawCount:
            capture, first = self.capture, t.part.draws - drawCount    # the draw numbers of its records

            def copy(cb):
                cap = capture.draws(dev, cb, buffer, offset, drawCount, stride, kind)
                if isinstance(cap, Capture):
                    cap.first_draw = first
                return cap
            t.deferred_captures.append(copy)

    def before_vkCmdDrawIndirect(self, dev, commandBuffer, buffer, offset, drawCount, stride):
        self._indirect(dev, commandBuffer, buffer, offset, drawCount, stride, "draw")

    def before_vkCmdDrawIndexedIndirect(self, dev, commandBuffer, buffer, offset, drawCount, stride):
        self._indirect(dev, commandBuffer, buffer, offset, drawCount, stride, "draw_indexed")

    def before_vkCmdDrawIndirectCount(self, dev, commandBuffer, buffer, offset, countBuffer, countOffset,
                                      maxDrawCount, stride):
        self.count(dev, commandBuffer)   # the real count is in a buffer: counted as one draw call

    def before_vkCmdDrawIndexedIndirectCount(self, dev, commandBuffer, buffer, offset, countBuffer, countOffset,
                                             maxDrawCount, stride):
        self.count(dev, commandBuffer)

    def before_vkCmdDrawMultiEXT(self, dev, commandBuffer, drawCount, pVertexInfo, instanceCount, firstInstance,
                                 stride):
        self.count(dev, commandBuffer, drawCount)

    def before_vkCmdDrawMultiIndexedEXT(self, dev, commandBuffer, drawCount, pIndexInfo, instanceCount,
                                        firstInstance, stride, pVertexOffset):
        self.count(dev, commandBuffer, drawCount)

    def before_vkCmdDrawIndirectByteCountEXT(self, dev, commandBuffer, instanceCount, firstInstance, counterBuffer,
                                             counterBufferOffset, counterOffset, vertexStride):
        self.count(dev, commandBuffer)

    def before_vkCmdDrawMeshTasksEXT(self, dev, commandBuffer, groupCountX, groupCountY, groupCountZ):
        self.count(dev, commandBuffer)

    def before_vkCmdDrawMeshTasksIndirectEXT(self, dev, commandBuffer, buffer, offset, drawCount, stride):
        self.count(dev, commandBuffer, drawCount)

    def before_vkCmdDrawMeshTasksIndirectCountEXT(self, dev, commandBuffer, buffer, offset, countBuffer,
                                                  countOffset, maxDrawCount, stride):
        self.count(dev, commandBuffer)   # the real count is in a buffer: counted as one draw call


def register(hooks, state, labeller: Labeller, capture, descriptors: bool = False) -> None:
    """`descriptors`: --content, each pass names the images its draws read (descriptors.py)."""
    hooks.bind(RenderPasses(state, labeller, capture, descriptors))

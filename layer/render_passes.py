"""Render passes: one tag around the whole pass, and its metadata.

Classic render passes (1 and 2) and dynamic rendering get a `t<tagID>`
label pushed before the begin and popped after the end. A dynamic render
pass suspended and resumed keeps one tag: the label is pushed on the first
begin (not on resume) and popped on the final end (not on suspend), even
when that is in another command buffer. Parts within one command buffer
merge as they are recorded; parts across command buffers are joined at
submit (queues.py), which sends the whole pass's draw count as an ANNEX.
Draw counts include draws recorded in secondaries that continue the pass.
"""
from __future__ import annotations

from tessera.schemas.labels import tag_label
from tessera.vkapi.render_passes import PassInfo, describe_begin, describe_rendering
from tessera.vkapi.vkconst import vk

from .descriptions import describe
from .tagging import Labeller
from .trackers import CommandBufferTracker, PassPart, Workload



def _meta(info: PassInfo) -> dict:
    return {"command": info.command, "width": info.width, "height": info.height, "render_area": info.render_area,
            "subpass_count": info.subpasses, "dynamic": info.dynamic, "attachments": info.attachments,
            "draw_call_count": 0}


def register(hooks, state, labeller: Labeller, capture) -> None:
    def start(dev, t: CommandBufferTracker, commandBuffer, info: PassInfo, tag: int | None = None) -> None:
        """`tag`: the pass was begun in C, which took that tag and opened its label."""
        w = Workload(labeller.next_tag() if tag is None else tag, tuple(t.labels), t.pops_below_start)
        if tag is None:
            labeller.push(dev, commandBuffer, tag_label(w.tag))
        t.part = PassPart(w, _meta(info), suspends=info.suspending)

    def finish(dev, t: CommandBufferTracker, commandBuffer, suspended: bool, in_c: bool = False) -> None:
        """The pass (or this command buffer's part of it) is recorded. `in_c`: it ended in C, which
        closed its label; no Python hook ran inside it, so it has no indirect draw to capture."""
        part, t.part = t.part, None
        part.suspends = suspended
        if not suspended and not in_c:
            labeller.pop(dev, commandBuffer)
            # Indirect draws: their parameters are copied once the pass is over (no copies inside one).
            part.captures += [c for c in (pending(commandBuffer) for pending in t.deferred_captures) if c]
            t.deferred_captures.clear()
        t.ops.append(("pass", part))
        if part.workload is not None:
            part.meta["draw_call_count"] = part.draws
            describe(state, dev, t, part.workload, "render_pass", part.meta, suspended or bool(part.captures))
            part.meta = None

    # ---- begin / end ---------------------------------------------------------
    @hooks.before("vkCmdBeginRenderPass")
    def begin1(dev, commandBuffer, pBegin, contents):
        start(dev, state.command_buffer(dev, commandBuffer), commandBuffer,
              describe_begin(dev.res, pBegin, "vkCmdBeginRenderPass"))

    @hooks.before("vkCmdBeginRenderPass2")
    def begin2(dev, commandBuffer, pBegin, pSubpassBegin):
        start(dev, state.command_buffer(dev, commandBuffer), commandBuffer,
              describe_begin(dev.res, pBegin, "vkCmdBeginRenderPass2"))

    @hooks.after("vkCmdEndRenderPass")
    def end1(dev, result, commandBuffer):
        t = state.command_buffer(dev, commandBuffer)
        if t.part is not None:
            finish(dev, t, commandBuffer, suspended=False)

    @hooks.after("vkCmdEndRenderPass2")
    def end2(dev, result, commandBuffer, pSubpassEnd):
        end1(dev, result, commandBuffer)

    @hooks.before("vkCmdBeginRendering")
    def begin_rendering(dev, commandBuffer, pRenderingInfo):
        t = state.command_buffer(dev, commandBuffer)
        info = describe_rendering(state.ffi, dev.res, pRenderingInfo)
        if info.resuming and t.part is not None:          # resumed in the same command buffer: same part
            t.part.suspends = info.suspending
        elif info.resuming:                               # resumes a pass begun in an earlier command buffer
            t.part = PassPart(None, suspends=info.suspending, resumes=True)
        else:
            start(dev, t, commandBuffer, info)

    @hooks.after("vkCmdEndRendering")
    def end_rendering(dev, result, commandBuffer):
        t = state.command_buffer(dev, commandBuffer)
        if t.part is not None and not t.part.suspends:
            finish(dev, t, commandBuffer, suspended=False)
        # suspended: the part stays open; a resume in this buffer continues it, else vkEndCommandBuffer ends it

    # Recorded in C (intercepts.TAGGED_PASS_BEGIN, TAGGED_RENDERING_BEGIN, PASS_END) when no hook must act
    # at record time (no pNext, no suspending or resuming): C took the tag and opened the pass's label at
    # the begin and closed it at the end; the records are applied here, in order.
    def begun_in_c(command: str):
        def apply(dev, commandBuffer, pBegin, contents_or_subpass_begin, tag: int):
            start(dev, state.command_buffer(dev, commandBuffer), commandBuffer,
                  describe_begin(dev.res, pBegin, command), tag)
        return apply

    for name in ("vkCmdBeginRenderPass", "vkCmdBeginRenderPass2"):
        hooks.applies(name)(begun_in_c(name))

    @hooks.applies("vkCmdBeginRendering")
    def rendering_begun_in_c(dev, commandBuffer, pRenderingInfo, tag: int):
        start(dev, state.command_buffer(dev, commandBuffer), commandBuffer,
              describe_rendering(state.ffi, dev.res, pRenderingInfo), tag)

    @hooks.applies("vkCmdEndRenderPass")
    @hooks.applies("vkCmdEndRenderPass2")
    @hooks.applies("vkCmdEndRendering")
    def ended_in_c(dev, commandBuffer, *end_info):
        t = state.command_buffer(dev, commandBuffer)
        if t.part is not None:
            finish(dev, t, commandBuffer, suspended=False, in_c=True)

    @hooks.before("vkEndCommandBuffer")
    def before_end_command_buffer(dev, commandBuffer):
        t = state.command_buffer(dev, commandBuffer)
        if t.part is not None:   # suspended at the end of this buffer: resumed in a later one
            t.deferred_captures.clear()   # no copy can go between suspended parts: sizes stay unknown
            finish(dev, t, commandBuffer, suspended=True)

    # ---- draws ------------------------------------------------------------------
    def count(dev, commandBuffer, n: int = 1) -> CommandBufferTracker:
        t = state.command_buffer(dev, commandBuffer)
        if t.part is not None:
            t.part.draws += n
        elif t.level == vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY:
            t.continued_draws += n
        return t

    # Recorded in C (shim_spec.RECORDED), consecutive draws folded into one count; the hooks
    # below serve command buffers the C side does not know.
    @hooks.applies("vkCmdDraw")
    @hooks.applies("vkCmdDrawIndexed")
    @hooks.applies("vkCmdDrawMeshTasksEXT")
    def folded_draws(dev, commandBuffer, n: int) -> None:
        count(dev, commandBuffer, n)

    @hooks.before("vkCmdDraw")
    def draw(dev, commandBuffer, vertexCount, instanceCount, firstVertex, firstInstance):
        count(dev, commandBuffer)

    @hooks.before("vkCmdDrawIndexed")
    def draw_indexed(dev, commandBuffer, indexCount, instanceCount, firstIndex, vertexOffset, firstInstance):
        count(dev, commandBuffer)

    def indirect(dev, commandBuffer, buffer, offset, drawCount, stride, kind: str) -> None:
        t = count(dev, commandBuffer, drawCount)
        if t.part is not None and drawCount:
            t.deferred_captures.append(
                lambda cb: capture.draws(dev, cb, buffer, offset, drawCount, stride, kind))

    @hooks.before("vkCmdDrawIndirect")
    def draw_indirect(dev, commandBuffer, buffer, offset, drawCount, stride):
        indirect(dev, commandBuffer, buffer, offset, drawCount, stride, "draw")

    @hooks.before("vkCmdDrawIndexedIndirect")
    def draw_indexed_indirect(dev, commandBuffer, buffer, offset, drawCount, stride):
        indirect(dev, commandBuffer, buffer, offset, drawCount, stride, "draw_indexed")

    @hooks.before("vkCmdDrawIndirectCount")
    def draw_indirect_count(dev, commandBuffer, buffer, offset, countBuffer, countOffset, maxDrawCount, stride):
        count(dev, commandBuffer)   # the real count is in a buffer: counted as one draw call

    @hooks.before("vkCmdDrawIndexedIndirectCount")
    def draw_indexed_indirect_count(dev, commandBuffer, buffer, offset, countBuffer, countOffset, maxDrawCount,
                                    stride):
        count(dev, commandBuffer)

    @hooks.before("vkCmdDrawMultiEXT")
    def draw_multi(dev, commandBuffer, drawCount, pVertexInfo, instanceCount, firstInstance, stride):
        count(dev, commandBuffer, drawCount)

    @hooks.before("vkCmdDrawMultiIndexedEXT")
    def draw_multi_indexed(dev, commandBuffer, drawCount, pIndexInfo, instanceCount, firstInstance, stride,
                           pVertexOffset):
        count(dev, commandBuffer, drawCount)

    @hooks.before("vkCmdDrawIndirectByteCountEXT")
    def draw_indirect_byte_count(dev, commandBuffer, instanceCount, firstInstance, counterBuffer,
                                 counterBufferOffset, counterOffset, vertexStride):
        count(dev, commandBuffer)

    @hooks.before("vkCmdDrawMeshTasksEXT")
    def draw_mesh_tasks(dev, commandBuffer, groupCountX, groupCountY, groupCountZ):
        count(dev, commandBuffer)

    @hooks.before("vkCmdDrawMeshTasksIndirectEXT")
    def draw_mesh_tasks_indirect(dev, commandBuffer, buffer, offset, drawCount, stride):
        count(dev, commandBuffer, drawCount)

    @hooks.before("vkCmdDrawMeshTasksIndirectCountEXT")
    def draw_mesh_tasks_indirect_count(dev, commandBuffer, buffer, offset, countBuffer, countOffset,
                                       maxDrawCount, stride):
        count(dev, commandBuffer)   # the real count is in a buffer: counted as one draw call

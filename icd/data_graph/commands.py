"""VK_ARM_data_graph's commands in the emulated Mali: binding at the data-graph bind point and the dispatch.

Role: vkCmdBindPipeline and vkCmdBindDescriptorSets at VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM (kept in the
command buffer's Bound slot, not passed down: the backend has no such bind point; the intercept table sends
only those calls to Python), and
vkCmdDispatchDataGraphARM: the graph's tensors looked up in the bound descriptor sets, checked against the
graph, and one backend compute dispatch recorded per kernel (kernels.py) with a compute-to-compute barrier
between them, into the application's command buffer, so ordering with the queue's other work is Vulkan's
own; then the application's compute pipeline is bound again (its sets and push constants were never
disturbed: the operator set sits after its layout's sets; its handle is found from icd/recording.py's
cb.compute_pipeline, so no compute bind costs anything more). On the timeline the dispatch is one `data_graph`
workload (icd/timing.py data_graph) whose args give each operator's modelled cost. A dispatch that cannot
run is refused with a message and records nothing. Threads: a command buffer's recording thread.
"""
from __future__ import annotations

import json

from tessera.vkapi.vkconst import vk

from ..objects import CommandBuffer, Device
from ..recording import Work
from ..tensors import resources as tensor_resources
from . import graph, kernels, quantized
from .objects import (BIND_POINT, FORMATS, Bound, DataGraphError, DataGraphPipeline, DeviceGraphs, Hooks, Session,
                      format_names, operator_costs)

STAGE = "compute"                    # the render stage of a data-graph workload (docs/ml.md says why)
COMMAND = "vkCmdDispatchDataGraphARM"


class Commands(Hooks):
    """The command-buffer hooks: one method per command (HookSet.bind)."""

    def before_vkCmdBindPipeline(self, cb, commandBuffer, bindPoint, pipeline):
        """At the data-graph bind point (only those calls take Python): kept here; the backend gets a re-bind of
        the compute pipeline the application has bound (no change), since the call cannot be dropped."""
        if bindPoint != BIND_POINT:
            return None
        st = cb.device.peek(DeviceGraphs)
        bound = cb.slot(Bound)
        try:
            if st is None:
                raise DataGraphError("the device has no VK_ARM_data_graph with the dataGraph feature")
            bound.pipeline = self.graph_pipeline(st, pipeline, "pipeline")
        except DataGraphError as e:
            self.refuse("vkCmdBindPipeline", f"VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM: {e}")
        return self._noop_bind(cb, commandBuffer)

    @staticmethod
    def compute_pipeline(cb: CommandBuffer) -> int:
        """The backend handle of the compute pipeline the application has bound (icd/recording.py keeps its
        description in cb.compute_pipeline, one object per created pipeline), 0 if none (or a shader object)."""
        bound = cb.compute_pipeline
        if bound is None:
            return 0
        return next((h for h, p in list(cb.device.res.pipelines.items()) if p is bound), 0)

    def _noop_bind(self, cb: CommandBuffer, commandBuffer):
        compute = self.compute_pipeline(cb)
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
        if t.dims != itf.type.shape or view.format not in FORMATS[itf.type.element] \
                or t.element != quantized.element_bytes(itf.type):
            raise DataGraphError(f"the tensor at set {itf.set}, binding {itf.binding} is {list(t.dims)} with format "
                                 f"{view.format}; the graph's {kind} {itf.index} is {itf.type} "
                                 f"({format_names(itf.type.element)})")
        if t.strides != tensor_resources.packed_strides(t.dims, t.element):
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
            s = self.session(st, session, "session")
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
            compute = self.compute_pipeline(cb)
            app = st.compute_layouts.get(compute) if compute else None
            if compute and app is None:
                raise DataGraphError("the bound compute pipeline's layout is unknown to the driver, so its bindings "
                                     "could not be kept")
            self._record(cb, commandBuffer, st, p, s, ins, outs, app, bound, compute)
        except (DataGraphError, kernels.KernelError) as e:
            self.refuse(COMMAND, f"{e}; the dispatch is not recorded")
            return

    def _record(self, cb: CommandBuffer, commandBuffer, st: DeviceGraphs, p: DataGraphPipeline, s: Session,
                ins: list, outs: list, app, bound: Bound, compute: int) -> None:
        ffi, dev = self.ffi, cb.device
        nxt = dev.next

        def location(v: int) -> tuple[int, int, int]:
            place = p.plan.places[v]
            nbytes = place.type.count * 4   # inside the graph: fp32 or int32 words
            # the graph's own tensors keep their format's width; a narrow one's range is whole words (its
            # last word may reach into the tensor's scratch bytes, icd/tensors/resources.py SCRATCH_BYTES)
            interface = (place.type.count * quantized.element_bytes(place.type) + 3) // 4 * 4
            if place.kind == "input":
                return ins[place.where].buffer, 0, interface
            if place.kind == "output":
                return outs[place.where].buffer, 0, interface
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
        if compute:   # the application's compute pipeline again; its sets and push constants were kept
            nxt.vkCmdBindPipeline(commandBuffer, vk.VK_PIPELINE_BIND_POINT_COMPUTE, compute)
        bound.keep = keep
        costs = operator_costs(p.plan, self.drv.profile)
        total_ns = sum(c["ns"] for c in costs)
        # the per-operator costs as one JSON arg (hostd/summary.py's operator breakdown reads it)
        info = {"graph": p.graph.name, "ops": sum(c["ops"] for c in costs), "bytes": sum(c["bytes"] for c in costs),
                "modelled_ns": round(total_ns, 1), "operators": json.dumps(costs, separators=(",", ":"))}
        # one compute job on the non-fragment queue lasting the operators' modelled time (timing.data_graph)
        cb.ops.append(Work("data_graph", STAGE, COMMAND, info, cycles=total_ns, nbytes=info["bytes"]))

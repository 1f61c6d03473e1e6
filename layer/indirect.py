"""Indirect parameters: copied into a layer-owned buffer, read after the submit completes.

Buffers created with INDIRECT_BUFFER usage get TRANSFER_SRC added, so they
can be copied from. For an indirect dispatch (and the indirect draws of a render pass, copied
after the pass ends, since copies cannot go inside one) the layer records a
vkCmdCopyBuffer of the arguments into a region of its own host-visible
buffer, unique to that tag, between two memory barriers (indirect reads ->
the copy -> host reads), scoped so that no other work waits for them. After a submit that carries captures, the layer
submits an empty batch with its own fence (vkQueueSubmit with no batches
signals once all earlier work on the queue is done), which leaves the
application's synchronization untouched. Completed fences are read back
when the application next submits, waits, or destroys the device, and each
capture becomes an ANNEX `submitID.tagID` with the real sizes.
Re-submitting a command buffer whose captures are still in flight first
waits for them (the regions would be overwritten otherwise).
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

from tessera.schemas.labels import tag_label
from tessera.vkapi.accel import buffer_at
from tessera.vkapi.fences import Fences
from tessera.vkapi.ops import PassBegin
from tessera.vkapi.vkconst import vk

from . import encoder
from .content import CONTENT_KIND, decode as content_of
from .descriptions import describe
from .trackers import Capture, CommandBufferTracker, Workload

CAPTURE_BUFFER_BYTES = 1 << 20
RECORD_BYTES = {"dispatch": 12, "draw": 16, "draw_indexed": 20,
                "trace_rays": 12}   # VkTraceRaysIndirectCommandKHR: width, height, depth
ALIGN = 16
# The layer's own copies are named so a trace shows what they are.
CAPTURE_LABEL = "tessera: indirect capture"
UINT64_MAX = 0xFFFFFFFFFFFFFFFF


class CaptureBuffer:
    """A host-visible, coherent buffer with a first-fit allocator of regions."""

    def __init__(self, ffi, dev) -> None:
        self.ffi, self.dev = ffi, dev
        nxt = dev.next
        info = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                                "size": CAPTURE_BUFFER_BYTES,
                                                "usage": vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT})
        out = ffi.new("VkBuffer *")
        _check(nxt.vkCreateBuffer(dev.handle, info, ffi.NULL, out), "vkCreateBuffer")
        self.buffer = out[0]
        reqs = ffi.new("VkMemoryRequirements *")
        nxt.vkGetBufferMemoryRequirements(dev.handle, self.buffer, reqs)
        props = ffi.new("VkPhysicalDeviceMemoryProperties *")
        dev.instance.next.vkGetPhysicalDeviceMemoryProperties(dev.physical, props)
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        index = next(i for i in range(props.memoryTypeCount)
                     if reqs.memoryTypeBits & (1 << i) and props.memoryTypes[i].propertyFlags & want == want)
        alloc = ffi.new("VkMemoryAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                   "allocationSize": reqs.size, "memoryTypeIndex": index})
        mem = ffi.new("VkDeviceMemory *")
        _check(nxt.vkAllocateMemory(dev.handle, alloc, ffi.NULL, mem), "vkAllocateMemory")
        self.memory = mem[0]
        _check(nxt.vkBindBufferMemory(dev.handle, self.buffer, self.memory, 0), "vkBindBufferMemory")
        ptr = ffi.new("void **")
        _check(nxt.vkMapMemory(dev.handle, self.memory, 0, vk.VK_WHOLE_SIZE, 0, ptr), "vkMapMemory")
        self.view = ffi.buffer(ptr[0], CAPTURE_BUFFER_BYTES)
        self.free = [(0, CAPTURE_BUFFER_BYTES)]   # (offset, size), sorted

    def alloc(self, size: int) -> int | None:
        size = -(-size // ALIGN) * ALIGN
        for i, (off, avail) in enumerate(self.free):
            if avail >= size:
                self.free[i:i + 1] = [(off + size, avail - size)] if avail > size else []
                return off
        return None

    def release(self, offset: int, size: int) -> None:
        size = -(-size // ALIGN) * ALIGN
        self.free.append((offset, size))
        self.free.sort()
        merged = []
        for off, n in self.free:
            if merged and merged[-1][0] + merged[-1][1] == off:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((off, n))
        self.free = merged

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self.view[offset:offset + size])

    def destroy(self) -> None:
        nxt, dev = self.dev.next, self.dev
        nxt.vkUnmapMemory(dev.handle, self.memory)
        nxt.vkDestroyBuffer(dev.handle, self.buffer, self.ffi.NULL)
        nxt.vkFreeMemory(dev.handle, self.memory, self.ffi.NULL)


def _check(result: int, what: str) -> None:
    if result != vk.VK_SUCCESS:
        raise RuntimeError(f"{what} failed with VkResult {result}")


@dataclass
class Pending:
    fence: object
    submit_id: int
    captures: list[tuple[int, Capture]]   # (tag, capture)
    trackers: list[CommandBufferTracker]
    readers: list = field(default_factory=list)   # callables run once the submit completed (instrument.py)


class Capturer:
    def __init__(self, ffi, state, labeller, log, content: bool = False) -> None:
        self.ffi, self.state, self.labeller, self.log = ffi, state, labeller, log
        # content mode (content.py): index buffers are copy sources too
        self.sources = vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT | (vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT if content else 0)
        self.send = state.session.transport.send
        self.pending: dict[int, list[Pending]] = {}   # device address -> in flight

    def register(self, hooks) -> None:
        hooks.bind(self)

    def before_vkCreateBuffer(self, dev, device, pCreateInfo, pAllocator, pBuffer):
        """Indirect buffers (and, in content mode, index buffers) are also copy sources, so their
        arguments (indices) can be captured."""
        if pCreateInfo.usage & self.sources and \
                not pCreateInfo.usage & vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT:
            info = self.ffi.new("VkBufferCreateInfo *", pCreateInfo[0])
            info.usage |= vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
            return device, info, pAllocator, pBuffer
        return None

    def _buffer(self, dev) -> CaptureBuffer:
        if dev.capture is None:
            dev.capture = CaptureBuffer(self.ffi, dev)
        return dev.capture

    # ---- recording --------------------------------------------------------------
    def _copy(self, dev, cb, src, offset: int, kind: str, count: int, stride: int,
              group_size=None) -> Capture | None:
        rec = RECORD_BYTES[kind]
        size = rec * count
        buf = self._buffer(dev)
        dst = buf.alloc(size)
        if dst is None:
            self.log.warning("indirect capture buffer full: sizes of this workload stay unknown")
            return None
        ffi, nxt = self.ffi, dev.next
        # The copy is a workload of its own on the GPU: tag it, so every GPU slice has metadata.
        tag = self.labeller.next_tag()
        describe(self.state, dev, self.state.command_buffer(dev, cb), Workload(tag, (CAPTURE_LABEL,), 0),
                 "buffer_transfer", {"command": "vkCmdCopyBuffer", "subtype": "copy buffer", "bytes": size,
                                     "regions": count, "internal": CAPTURE_LABEL}, False)
        labelled = self.labeller.push(dev, cb, tag_label(tag))
        # The application already made the arguments visible to indirect reads (it must, for its
        # own command); chaining on that stage makes them visible to the copy without waiting
        # for unrelated earlier work (spec 7.6: execution dependency chains, visibility).
        self._barrier(nxt, cb, vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, 0,
                      vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
        regions = ffi.new("VkBufferCopy[]", [{"srcOffset": offset + i * stride, "dstOffset": dst + i * rec,
                                              "size": rec} for i in range(count)])
        nxt.vkCmdCopyBuffer(cb, src, buf.buffer, count, regions)
        self._barrier(nxt, cb, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                      vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        if labelled:
            self.labeller.pop(dev, cb)
        return Capture(dst, size, kind, count, tuple(group_size) if group_size else None, tag)

    def _barrier(self, nxt, cb, src_stage, src_access, dst_stage, dst_access) -> None:
        barrier = self.ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                                     "srcAccessMask": src_access, "dstAccessMask": dst_access})
        nxt.vkCmdPipelineBarrier(cb, src_stage, dst_stage, 0, 1, barrier, 0, self.ffi.NULL, 0, self.ffi.NULL)

    def dispatch(self, dev, cb, buffer, offset, group_size) -> Capture | None:
        return self._copy(dev, cb, buffer, offset, "dispatch", 1, RECORD_BYTES["dispatch"], group_size)

    def trace_rays(self, dev, cb, address: int) -> Capture | None:
        """vkCmdTraceRaysIndirectKHR: its parameters are at a device address. The buffer holding it
        is found among the buffers whose address the application asked for (the only way it can
        know one: vkGetBufferDeviceAddress, vkapi/accel.py); the spec requires that buffer to have
        INDIRECT_BUFFER usage, so it is a copy source too (before_create_buffer)."""
        found = buffer_at(dev.res, address)
        if found is None:
            self.log.info("trace rays indirect: no tracked buffer holds address %#x; sizes stay unknown", address)
            return None
        buffer, offset = found
        return self._copy(dev, cb, buffer, offset, "trace_rays", 1, RECORD_BYTES["trace_rays"])

    def draws(self, dev, cb, buffer, offset, count: int, stride: int, kind: str) -> Capture | None:
        return self._copy(dev, cb, buffer, offset, kind, count, stride or RECORD_BYTES[kind])

    def release(self, dev, tracker: CommandBufferTracker) -> None:
        """Free the regions of a command buffer being reset or freed, once what its last submit
        captured is read: the application waited for that submit, but the capture fence signals on
        the empty batch after it, and a region freed unread could be filled by the next recording's
        copy before the read (seen as wrong index data under load)."""
        if dev.capture is None:
            return
        if tracker.pending_fence is not None:
            arr = self.ffi.new("VkFence[]", [tracker.pending_fence])
            dev.next.vkWaitForFences(dev.handle, 1, arr, vk.VK_TRUE, UINT64_MAX)
            self.poll(dev)
            if tracker.pending_fence is not None:   # behind an unfinished submit of another queue
                self.poll(dev, wait=True)
        for op in tracker.ops:
            kind = type(op)
            caps = [op.capture] if kind is Workload and op.capture else (op.info.captures if kind is PassBegin else [])
            for c in caps:
                if c.size:          # a content capture of non-indexed draws copies nothing
                    dev.capture.release(c.offset, c.size)

    # ---- submission ------------------------------------------------------------------
    def before_submit(self, dev, trackers: list[CommandBufferTracker]) -> None:
        """Serialize: wait for earlier submits of these buffers whose captures are unread."""
        fences = [t.pending_fence for t in trackers if t.pending_fence is not None]
        if fences:
            arr = self.ffi.new("VkFence[]", fences)
            dev.next.vkWaitForFences(dev.handle, len(fences), arr, vk.VK_TRUE, UINT64_MAX)
        self.poll(dev)

    def after_submit(self, dev, queue, submit_id: int, captures: list[tuple[int, Capture]],
                     trackers: list[CommandBufferTracker], readers: list | None = None) -> None:
        if dev.fences is None:
            dev.fences = Fences(self.ffi, dev)
        fence = dev.fences.signal_after(queue)   # signals when all work submitted earlier to the queue completes
        if fence is None:
            raise RuntimeError("the capture fence could not be created or submitted")
        holders = [t for t in trackers if t.has_captures()]
        for t in holders:
            t.pending_fence = fence
        self.pending.setdefault(dev.address, []).append(Pending(fence, submit_id, captures, holders, readers or []))

    def poll(self, dev, wait: bool = False) -> int:
        """Read back every completed capture (all of them when `wait`) and send their annexes; how
        many submits' captures were read back."""
        queue = self.pending.get(dev.address, [])
        nxt = dev.next
        read = 0
        while queue:
            p = queue[0]
            if wait:
                arr = self.ffi.new("VkFence[]", [p.fence])
                nxt.vkWaitForFences(dev.handle, 1, arr, vk.VK_TRUE, UINT64_MAX)
            elif nxt.vkGetFenceStatus(dev.handle, p.fence) != vk.VK_SUCCESS:
                return read   # fences on one queue signal in order
            queue.pop(0)
            read += 1
            per_tag: dict[int, dict] = {}
            for tag, cap in p.captures:   # a pass with several indirect draws: one annex, all draws
                fields = self._decode(dev, cap)
                merged = per_tag.setdefault(tag, {})
                for listed in ("draws", "content"):     # several captures of one tag: their lists joined
                    merged[listed] = merged.get(listed, []) + fields.pop(listed, [])
                merged.update(fields)
            for tag, fields in per_tag.items():
                for listed in ("draws", "content"):
                    if not fields[listed]:
                        del fields[listed]
                self.send(encoder.annex, p.submit_id, tag, fields)
            for read in p.readers:
                read()
            for t in p.trackers:
                if t.pending_fence == p.fence:
                    t.pending_fence = None
            dev.fences.give_back(p.fence, signaled=True)
        return read

    def _decode(self, dev, cap: Capture) -> dict:
        if cap.kind == CONTENT_KIND:
            return {"content": content_of(dev.capture.read(cap.offset, cap.size) if cap.size else b"", list(cap.draws))}
        data = dev.capture.read(cap.offset, cap.size)
        if cap.kind == "dispatch":
            groups = list(struct.unpack_from("<3I", data))
            out = {"groups": groups}
            if cap.group_size:
                out["items"] = math.prod(groups) * math.prod(cap.group_size)
            return out
        if cap.kind == "trace_rays":
            width, height, depth = struct.unpack_from("<3I", data)
            return {"width": width, "height": height, "depth": depth, "items": width * height * depth}
        rec = RECORD_BYTES[cap.kind]
        if cap.kind == "draw":
            fields = ("vertex_count", "instance_count", "first_vertex", "first_instance")
            draws = [dict(zip(fields, struct.unpack_from("<4I", data, i * rec))) for i in range(cap.count)]
        else:
            fields = ("index_count", "instance_count", "first_index", "vertex_offset", "first_instance")
            draws = [dict(zip(fields, struct.unpack_from("<3IiI", data, i * rec))) for i in range(cap.count)]
        if cap.first_draw >= 0:      # its number among the pass's draws (render_passes.py), for content metrics
            for i, d in enumerate(draws):
                d["draw"] = cap.first_draw + i
        return {"draws": draws}

    def destroy(self, dev) -> None:
        self.poll(dev, wait=True)
        if dev.fences is not None:
            dev.fences.destroy()
            dev.fences = None
        if dev.capture is not None:
            dev.capture.destroy()
            dev.capture = None

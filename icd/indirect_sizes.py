"""Indirect sizes the emulated GPU reads when it runs a command, for its timing.

Role: a real GPU knows an indirect command's sizes when it executes it, so the
emulated Mali times the command with them too (docs/timing.md, "Indirect
sizes"). When an application records vkCmdDispatchIndirect,
vkCmdDrawIndirect, vkCmdDrawIndexedIndirect, vkCmdDraw(Indexed)IndirectCount
or vkCmdTraceRaysIndirectKHR, the driver records on the backend, beside the
application's command, a copy of the arguments into driver-owned
host-visible memory (a *snapshot*) between two barriers: the first chains on
the indirect-read stage (DRAW_INDIRECT, the stage whose visibility the
application already had to provide for its own command: spec 7.6, execution
and memory dependency chains) and makes the arguments visible to the copy;
the second makes the copy visible to the host. A dispatch's or trace-rays'
copy goes just before the command; a draw's after the render pass ends
(copies are not allowed inside a pass, and the arguments cannot change
inside it). The recorded Work / Draw gets an `at_completion`
(recording.py): on the timeline's worker, once the submit's GPU work has
completed (vkapi/fences.py), it reads the snapshot and sets the real sizes in
place, `estimated` cleared.

Why a copy and not a read of the application's buffer through a mapping at
completion: the copy holds the arguments as the command read them, even
when later work of the same submit rewrites the buffer (GPU-driven
pipelines do); and mapping the application's memory from the driver's
worker would collide with the application's own vkMapMemory (a memory
object is mapped at most once at a time). The backend's buffers need
TRANSFER_SRC for the copy: buffers created with INDIRECT_BUFFER usage get it
added (as the layer does); a buffer whose usage comes from
VkBufferUsageFlags2CreateInfo is left alone and copied only if it already
has it.

Limits (the estimate of timing.py stays, marked `Estimated`): indirect draws
of a render pass suspended at the end of its command buffer, or recorded in a
secondary command buffer inside a pass (no copy can follow them in that
buffer); a trace-rays address in no buffer whose device address the
application queried (vkapi/accel.buffer_at); a command buffer re-submitted
before its earlier submit completed is timed, for each submit, with the
snapshot as it is when that submit's timing reads it; an IndirectCount
draw beyond its first MAX_COUNT_RECORDS records takes their mean size.
vkCmdDrawIndirectByteCountEXT and mesh-task draws keep their estimates.

Threads: snapshots are allocated by the threads recording command buffers,
read by the timeline's worker, and released when the item holding them is
garbage (any thread): each device's SnapshotMemory has one lock. A
buffer's copyability is tracked per device under the same lock.

State: the device's SnapshotMemory and a command buffer's IndirectPending, each
in this module's slot on its object (vkapi/slots.py).
"""
from __future__ import annotations

import collections
import struct
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from tessera.vkapi.ops import PASS_SUSPEND
from tessera.vkapi.vkconst import vk

from .driver import Driver
from .feature import Feature
from .objects import CommandBuffer, Device
from .recording import Draw, Work

CHUNK_BYTES = 1 << 16           # one backend buffer of snapshots
MAX_CHUNKS = 256                # 16 MiB per device at most; beyond, sizes stay estimated
ALIGN = 16
MAX_COUNT_RECORDS = 1024        # IndirectCount: records copied at most (the rest take their mean)
DISPATCH = struct.Struct("<3I")         # VkDispatchIndirectCommand
TRACE_RAYS = struct.Struct("<3I")       # VkTraceRaysIndirectCommandKHR: width, height, depth
DRAW = struct.Struct("<4I")             # VkDrawIndirectCommand: vertexCount, instanceCount, ...
DRAW_INDEXED = struct.Struct("<3IiI")   # VkDrawIndexedIndirectCommand: indexCount, instanceCount, ...
HOST_COHERENT = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
USAGE_FLAGS_2 = vk.VK_STRUCTURE_TYPE_BUFFER_USAGE_FLAGS_2_CREATE_INFO

def then(item: Any, fn: Callable[[], None], first: bool = False, *,
         report: Callable[[str, str], None] | None = None) -> None:
    """Add `fn` to a Work's or Draw's at_completion, after (or, `first`, before) what it already runs:
    sizes are set before anything that uses them (measured_timing.py). A failure of `fn` goes to
    `report` (the driver's HookErrors.report) and costs only its own update (the item keeps what it had)."""
    def guarded() -> None:
        try:
            fn()
        except Exception:
            if report is not None:
                report("vkQueueSubmit", "completing a workload's sizes or costs after execution")
    prev = item.at_completion
    if prev is None:
        item.at_completion = guarded
    elif first:
        item.at_completion = lambda: (guarded(), prev())
    else:
        item.at_completion = lambda: (prev(), guarded())


@dataclass(eq=False)
class Snapshot:
    """`size` bytes at `offset` of one chunk; given back when nothing refers to it any more."""
    memory: "SnapshotMemory"
    chunk: int
    offset: int
    size: int
    buffer: Any

    def read(self) -> bytes:
        return self.memory.read(self)


@dataclass
class _Chunk:
    buffer: Any
    memory: Any
    mapped: Any
    free: list[tuple[int, int]] = field(default_factory=lambda: [(0, CHUNK_BYTES)])   # (offset, size), sorted


class SnapshotMemory:
    """Host-visible, coherent backend buffers (TRANSFER_DST) with a first-fit allocator, per device.

    A snapshot's space comes back when the Snapshot is collected (weakref.finalize), which the garbage collector
    may do on any thread at any allocation, also one made while this thread holds `lock` (a frame loop of indirect
    dispatches deadlocked so after a few hundred frames): the release only queues it (`_released`, a deque whose
    append needs no lock) and the next `alloc` takes the queue into the free lists under the lock."""

    def __init__(self, ffi, dev: Device) -> None:
        self.ffi, self.dev = ffi, dev
        self.lock = threading.Lock()
        self._released: collections.deque[tuple[int, int, int]] = collections.deque()   # (chunk, offset, size)
        self.chunks: list[_Chunk] = []
        self.copyable: set[int] = set()     # buffers with TRANSFER_SRC usage
        self.destroyed = False
        self._memory_type: int | None = None

    def alloc(self, size: int) -> Snapshot | None:
        size = -(-size // ALIGN) * ALIGN
        if size > CHUNK_BYTES:
            return None
        with self.lock:
            if self.destroyed:
                return None
            self._take_released()
            for i, chunk in enumerate(self.chunks):
                got = _first_fit(chunk.free, size)
                if got is not None:
                    break
            else:
                if len(self.chunks) >= MAX_CHUNKS:
                    return None
                chunk = self._new_chunk()
                if chunk is None:
                    return None
                self.chunks.append(chunk)
                i, got = len(self.chunks) - 1, _first_fit(chunk.free, size)
        snap = Snapshot(self, i, got, size, chunk.buffer)
        weakref.finalize(snap, self._release, i, got, size)
        return snap

    def _release(self, chunk: int, offset: int, size: int) -> None:
        """(a finalizer: any thread, any moment, `lock` perhaps held by this thread) Queue the space for `alloc`."""
        self._released.append((chunk, offset, size))

    def _take_released(self) -> None:
        """(`lock` held) The queued space back into its chunks' free lists, neighbours merged."""
        touched = set()
        while self._released:
            chunk, offset, size = self._released.popleft()
            self.chunks[chunk].free.append((offset, size))
            touched.add(chunk)
        for chunk in touched:
            free = self.chunks[chunk].free
            free.sort()
            merged: list[tuple[int, int]] = []
            for off, n in free:
                if merged and merged[-1][0] + merged[-1][1] == off:
                    merged[-1] = (merged[-1][0], merged[-1][1] + n)
                else:
                    merged.append((off, n))
            free[:] = merged

    def read(self, snap: Snapshot) -> bytes:
        if self.destroyed:
            return b""
        return bytes(self.ffi.buffer(self.chunks[snap.chunk].mapped + snap.offset, snap.size))

    def _new_chunk(self) -> _Chunk | None:
        ffi, dev = self.ffi, self.dev
        nxt = dev.next
        info = ffi.new("VkBufferCreateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                                "size": CHUNK_BYTES, "usage": vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT})
        out = ffi.new("VkBuffer *")
        if nxt.vkCreateBuffer(dev.handle, info, ffi.NULL, out) != vk.VK_SUCCESS:
            return None
        buffer = out[0]
        reqs = ffi.new("VkMemoryRequirements *")
        nxt.vkGetBufferMemoryRequirements(dev.handle, buffer, reqs)
        props = ffi.new("VkPhysicalDeviceMemoryProperties *")
        dev.physical.next.vkGetPhysicalDeviceMemoryProperties(dev.physical.handle, props)
        index = next((i for i in range(props.memoryTypeCount) if reqs.memoryTypeBits & (1 << i)
                      and props.memoryTypes[i].propertyFlags & HOST_COHERENT == HOST_COHERENT), None)
        mem = ffi.new("VkDeviceMemory *")
        ptr = ffi.new("void **")
        alloc = ffi.new("VkMemoryAllocateInfo *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                   "allocationSize": reqs.size, "memoryTypeIndex": index or 0})
        if index is None or nxt.vkAllocateMemory(dev.handle, alloc, ffi.NULL, mem) != vk.VK_SUCCESS:
            nxt.vkDestroyBuffer(dev.handle, buffer, ffi.NULL)
            return None
        if nxt.vkBindBufferMemory(dev.handle, buffer, mem[0], 0) != vk.VK_SUCCESS or \
                nxt.vkMapMemory(dev.handle, mem[0], 0, vk.VK_WHOLE_SIZE, 0, ptr) != vk.VK_SUCCESS:
            nxt.vkDestroyBuffer(dev.handle, buffer, ffi.NULL)
            nxt.vkFreeMemory(dev.handle, mem[0], ffi.NULL)
            return None
        return _Chunk(buffer, mem[0], ffi.cast("char *", ptr[0]))

    def destroy(self) -> None:
        """At vkDestroyDevice, once the timeline has settled (nothing reads a snapshot any more)."""
        with self.lock:
            self.destroyed = True
            chunks, self.chunks = self.chunks, []
        dev, ffi = self.dev, self.ffi
        for chunk in chunks:
            dev.next.vkDestroyBuffer(dev.handle, chunk.buffer, ffi.NULL)
            dev.next.vkFreeMemory(dev.handle, chunk.memory, ffi.NULL)   # unmaps it (spec 11.2.11)


def _first_fit(free: list[tuple[int, int]], size: int) -> int | None:
    for i, (off, avail) in enumerate(free):
        if avail >= size:
            free[i:i + 1] = [(off + size, avail - size)] if avail > size else []
            return off
    return None


def memory_of(ffi, dev: Device) -> SnapshotMemory:
    """This module's state on the device (its slot). Threads racing to make it may each build one
    (nothing is allocated until used); the slot keeps the first (Slots.slot: dict.setdefault)."""
    return dev.slot(SnapshotMemory, lambda: SnapshotMemory(ffi, dev))


def teardown(dev: Device) -> None:
    mem = dev.drop(SnapshotMemory)
    if mem is not None:
        mem.destroy()


@dataclass
class PendingCopy:
    """One indirect draw command's copy, recorded once its render pass ends."""
    sources: list[list[tuple[Any, int, int]]]     # per snapshot: (source buffer, offset, size) regions
    items: list                                   # the Draws the command made (recording.py)
    decode: Callable[[list], None]                # sets the items' sizes from the snapshots


@dataclass
class IndirectPending:
    """This module's state on a command buffer (its slot, dropped at reset): the indirect draws of
    the render pass being recorded, copied once it ends."""
    copies: list[PendingCopy] = field(default_factory=list)


def last_items(cb: CommandBuffer, kind: type, n: int) -> list:
    """The last `n` ops, if they are all of type `kind` (what recording.py just appended)."""
    tail = cb.ops[-n:] if n else []
    return tail if len(tail) == n and all(type(op) is kind for op in tail) else []


def buffer_copies(regions: list[tuple[Any, int, int]], dst: int, key: Callable[[Any], int]) -> list[tuple[Any, list]]:
    """One snapshot's copy commands: its (source buffer, offset, size) regions packed from `dst` on, as
    (source buffer, VkBufferCopy members) per source (`key`: a source's handle as an int), in order."""
    by_source: dict[int, list] = {}
    for src, offset, size in regions:
        by_source.setdefault(key(src), [src, []])[1].append({"srcOffset": offset, "dstOffset": dst, "size": size})
        dst += size
    return [(src, rs) for src, rs in by_source.values()]


class IndirectSizes(Feature):
    """Snapshots of indirect arguments, recorded beside the application's commands and read at completion;
    one method per command (HookSet.bind). Its state is on the objects: the device's SnapshotMemory and
    a command buffer's IndirectPending."""

    def __init__(self, drv: Driver) -> None:
        self.ffi = drv.ffi
        self.report = drv.hooks.errors.report

    def _handle(self, buffer) -> int:
        return int(self.ffi.cast("uintptr_t", buffer))

    def destroyed(self, dev: Device) -> None:   # device lifecycle (icd/feature.py): the snapshot memory
        teardown(dev)

    # ---- buffers: indirect buffers are copy sources too ------------------------------------
    def before_vkCreateBuffer(self, dev, device, pCreateInfo, pAllocator, pBuffer):
        ffi, usage = self.ffi, pCreateInfo.usage
        if usage & vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT and not usage & vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT \
                and not _has_usage2(ffi, pCreateInfo.pNext):
            info = ffi.new("VkBufferCreateInfo *", pCreateInfo[0])
            info.usage |= vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
            return device, info, pAllocator, pBuffer
        return None

    def after_vkCreateBuffer(self, dev, result, device, pCreateInfo, pAllocator, pBuffer):
        if result != vk.VK_SUCCESS:
            return
        usage2 = _usage2(self.ffi, pCreateInfo.pNext)
        usage = usage2 if usage2 is not None else pCreateInfo.usage
        if usage & vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT:
            mem = memory_of(self.ffi, dev)
            with mem.lock:
                mem.copyable.add(self._handle(pBuffer[0]))

    def before_vkDestroyBuffer(self, dev, device, buffer, pAllocator):
        mem = dev.peek(SnapshotMemory)
        if mem is not None:
            with mem.lock:
                mem.copyable.discard(self._handle(buffer))

    # ---- recording the copies ---------------------------------------------------------------
    def _barrier(self, nxt, commandBuffer, src_stage, src_access, dst_stage, dst_access) -> None:
        ffi = self.ffi
        b = ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                          "srcAccessMask": src_access, "dstAccessMask": dst_access})
        nxt.vkCmdPipelineBarrier(commandBuffer, src_stage, dst_stage, 0, 1, b, 0, ffi.NULL, 0, ffi.NULL)

    def snapshot(self, cb: CommandBuffer, commandBuffer, copies: list[list[tuple[Any, int, int]]]) -> list | None:
        """Record, now, one copy per list of (source buffer, offset, size) regions into one snapshot
        each; None (nothing recorded) if a source is not copyable or no memory is left."""
        dev = cb.device
        mem = memory_of(self.ffi, dev)
        with mem.lock:
            if any(self._handle(src) not in mem.copyable for regions in copies for src, _, _ in regions):
                return None
        snaps = []
        for regions in copies:
            snap = mem.alloc(sum(size for _, _, size in regions))
            if snap is None:
                return None
            snaps.append(snap)
        nxt = dev.next
        self._barrier(nxt, commandBuffer, vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, 0,
                      vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
        for regions, snap in zip(copies, snaps):
            for src, rs in buffer_copies(regions, snap.offset, self._handle):
                nxt.vkCmdCopyBuffer(commandBuffer, src, snap.buffer, len(rs), self.ffi.new("VkBufferCopy[]", rs))
        # Host reads of the snapshot see the copy; and the copy's read of the arguments is ordered before
        # any later write to them: the application's own barrier before such a write waits for the
        # indirect-read stage, which this barrier's second scope chains into (a write-after-read hazard
        # needs only an execution dependency, spec 7.1).
        self._barrier(nxt, commandBuffer, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                      vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        return snaps

    # dispatches and trace rays: copied right before the command (outside any render pass)
    def before_vkCmdDispatchIndirect(self, cb, commandBuffer, buffer, offset):
        (work,) = last_items(cb, Work, 1) or (None,)
        if work is None or work.command != "vkCmdDispatchIndirect":
            return
        snaps = self.snapshot(cb, commandBuffer, [[(buffer, offset, DISPATCH.size)]])
        if snaps is not None:
            size = work.info.get("group_size") or [-1, -1, -1]
            per_group = size[0] * size[1] * size[2] if min(size) > 0 else 1
            then(work, lambda: _dispatch_sizes(work, snaps[0], per_group), first=True, report=self.report)
            cb.needs_completion = True

    def before_vkCmdTraceRaysIndirectKHR(self, cb, commandBuffer, raygen, miss, hit, callable_, address):
        from tessera.vkapi.accel import buffer_at

        (work,) = last_items(cb, Work, 1) or (None,)
        if work is None or work.command != "vkCmdTraceRaysIndirectKHR":
            return
        found = buffer_at(cb.device.res, int(address))
        if found is None:
            return
        src, offset = found
        snaps = self.snapshot(cb, commandBuffer, [[(self.ffi.cast("VkBuffer", src), offset, TRACE_RAYS.size)]])
        if snaps is not None:
            then(work, lambda: _trace_rays_sizes(work, snaps[0]), first=True, report=self.report)
            cb.needs_completion = True

    # draws: copied once their render pass ends
    def _draws_indirect(self, cb, buffer, offset, count: int, stride: int, record: struct.Struct):
        items = last_items(cb, Draw, count)
        if not items:
            return
        stride = stride or record.size
        regions = [(buffer, offset + i * stride, record.size) for i in range(count)]
        cb.slot(IndirectPending).copies.append(
            PendingCopy([regions], items, lambda snaps: _draw_sizes(items, snaps[0], record)))

    def before_vkCmdDrawIndirect(self, cb, commandBuffer, buffer, offset, drawCount, stride):
        self._draws_indirect(cb, buffer, offset, drawCount, stride, DRAW)

    def before_vkCmdDrawIndexedIndirect(self, cb, commandBuffer, buffer, offset, drawCount, stride):
        self._draws_indirect(cb, buffer, offset, drawCount, stride, DRAW_INDEXED)

    def _draws_indirect_count(self, cb, buffer, offset, count_buffer, count_offset, max_draws: int, stride: int,
                              record: struct.Struct):
        items = last_items(cb, Draw, 1)
        if not items or max_draws == 0:
            return
        n = min(max_draws, MAX_COUNT_RECORDS)
        stride = stride or record.size
        regions = [(buffer, offset + i * stride, record.size) for i in range(n)]
        cb.slot(IndirectPending).copies.append(PendingCopy(
            [[(count_buffer, count_offset, 4)], regions], items,
            lambda snaps: _draw_count_sizes(items[0], snaps[0], snaps[1], record, max_draws)))

    def before_vkCmdDrawIndirectCount(self, cb, commandBuffer, buffer, offset, countBuffer, countOffset,
                                      maxDrawCount, stride):
        self._draws_indirect_count(cb, buffer, offset, countBuffer, countOffset, maxDrawCount, stride, DRAW)

    def before_vkCmdDrawIndexedIndirectCount(self, cb, commandBuffer, buffer, offset, countBuffer, countOffset,
                                             maxDrawCount, stride):
        self._draws_indirect_count(cb, buffer, offset, countBuffer, countOffset, maxDrawCount, stride, DRAW_INDEXED)

    def _pass_ended(self, cb: CommandBuffer, commandBuffer) -> None:
        p = cb.peek(IndirectPending)
        if p is None or not p.copies:
            return
        if cb.ops and cb.ops[-1] is PASS_SUSPEND:   # suspended: copied when it ends in this buffer
            return
        copies, p.copies = p.copies, []
        for copy in copies:
            snaps = self.snapshot(cb, commandBuffer, copy.sources)
            if snaps is None:
                continue
            # one reading per command sets every draw it made
            then(copy.items[0], lambda snaps=snaps, decode=copy.decode: decode(snaps), first=True,
                 report=self.report)
            cb.needs_completion = True

    def after_vkCmdEndRenderPass(self, cb, result, commandBuffer):
        self._pass_ended(cb, commandBuffer)

    def after_vkCmdEndRenderPass2(self, cb, result, commandBuffer, pSubpassEndInfo):
        self._pass_ended(cb, commandBuffer)

    def after_vkCmdEndRendering(self, cb, result, commandBuffer):
        self._pass_ended(cb, commandBuffer)


def register(drv: Driver) -> IndirectSizes:
    feature = drv.hooks.bind(IndirectSizes(drv))
    drv.features.append(feature)
    return feature


def _usage2(ffi, pnext) -> int | None:
    from tessera.vkapi import structs

    f = structs.find(ffi, pnext, USAGE_FLAGS_2, "VkBufferUsageFlags2CreateInfo *")
    return None if f is None else int(f.usage)


def _has_usage2(ffi, pnext) -> bool:
    return _usage2(ffi, pnext) is not None


# ---- at completion, on the timeline's worker: the snapshot -> the item's sizes -----------------
def _dispatch_sizes(work, snap: Snapshot, per_group: int) -> None:
    data = snap.read()
    if len(data) < DISPATCH.size:
        return
    groups = list(DISPATCH.unpack_from(data))
    work.info["groups"] = groups
    work.invocations = groups[0] * groups[1] * groups[2] * per_group
    work.estimated = False


def _trace_rays_sizes(work, snap: Snapshot) -> None:
    data = snap.read()
    if len(data) < TRACE_RAYS.size:
        return
    width, height, depth = TRACE_RAYS.unpack_from(data)
    work.info.update({"width": width, "height": height, "depth": depth})
    work.invocations = width * height * depth
    work.estimated = False


def _vertices(data: bytes, index: int, record: struct.Struct) -> int:
    fields = record.unpack_from(data, index * record.size)
    return fields[0] * fields[1]     # vertex (index) count x instance count


def _draw_sizes(items: list, snap: Snapshot, record: struct.Struct) -> None:
    """vkCmdDraw(Indexed)Indirect: one Draw per drawn record (recording.py), in order."""
    data = snap.read()
    if len(data) < record.size * len(items):
        return
    for i, draw in enumerate(items):
        draw.vertices = _vertices(data, i, record)
        draw.primitives = draw.vertices // 3     # recording._primitives
        draw.estimated = False


def _draw_count_sizes(draw, count_snap: Snapshot, snap: Snapshot, record: struct.Struct, max_draws: int) -> None:
    """vkCmdDraw(Indexed)IndirectCount: one Draw standing for min(count, maxDrawCount) draws."""
    count_data, data = count_snap.read(), snap.read()
    if len(count_data) < 4:
        return
    n = min(struct.unpack_from("<I", count_data)[0], max_draws)
    copied = min(n, len(data) // record.size)
    sizes = [_vertices(data, i, record) for i in range(copied)]
    vertices = sum(sizes)
    primitives = sum(v // 3 for v in sizes)
    if n > copied and copied:      # beyond the copied records: their mean
        vertices += (n - copied) * vertices // copied
        primitives += (n - copied) * primitives // copied
    draw.count, draw.vertices, draw.primitives, draw.estimated = n, vertices, primitives, False

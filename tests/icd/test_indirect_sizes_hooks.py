"""icd/indirect_sizes.py IndirectSizes, called as HookSet.bind registers it: no Vulkan, no shim.

The device is an objects.Device whose `next` records the commands the feature adds to the backend's
command buffer; its SnapshotMemory holds one chunk of plain host memory (a cffi array standing for
the mapped backend buffer), so what a hook records, and what its at_completion reads back once the
"GPU" has written the snapshot, are both visible. The recording's ops come from recording.Shadow,
as the driver's hooks make them just before these run.
"""
from __future__ import annotations

import logging
import struct
from types import SimpleNamespace as NS

import cffi
import pytest

from tessera.icd import indirect_sizes as isz
from tessera.icd.indirect_sizes import IndirectPending, IndirectSizes, SnapshotMemory, buffer_copies, last_items
from tessera.icd.objects import CommandBuffer, Device
from tessera.icd.recording import Draw, Shadow, Work
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.ops import PASS_END, PASS_SUSPEND
from tessera.vkapi.resources import Pipeline, Resources
from tessera.vkapi.vkconst import vk

CDEF = """
typedef uint64_t VkBuffer;
typedef struct VkMemoryBarrier { int sType; const void *pNext; uint32_t srcAccessMask; uint32_t dstAccessMask; }
    VkMemoryBarrier;
typedef struct VkBufferCopy { uint64_t srcOffset; uint64_t dstOffset; uint64_t size; } VkBufferCopy;
"""
SNAPSHOTS = 0x5A   # the chunk's backend buffer
INDIRECT, COUNTS = 0x1B, 0x2B


@pytest.fixture(scope="module")
def ffi():
    f = cffi.FFI()
    f.cdef(CDEF)
    return f


class Backend:
    """The backend's command-buffer functions the feature calls: what it recorded, in order."""

    def __init__(self, ffi) -> None:
        self.ffi = ffi
        self.recorded: list = []

    def vkCmdPipelineBarrier(self, cb, src_stage, dst_stage, flags, n, barrier, *rest):
        self.recorded.append(("barrier", src_stage, dst_stage, barrier.srcAccessMask, barrier.dstAccessMask))

    def vkCmdCopyBuffer(self, cb, src, dst, n, regions):
        self.recorded.append(("copy", src, dst, [(r.srcOffset, r.dstOffset, r.size) for r in regions[0:n]]))


def setup(ffi, copyable=(INDIRECT, COUNTS)):
    """The feature, a command buffer on a device with one chunk of snapshot memory, the chunk's bytes,
    and the errors reported."""
    reported = []
    hooks = HookSet(HookErrors(logging.getLogger("test")))
    hooks.errors.report = lambda name, what: reported.append(name)
    feature = IndirectSizes(NS(ffi=ffi, hooks=hooks))
    dev = Device(handle=0xD0, next=Backend(ffi), physical=None, enabled_extensions=frozenset(),
                 emulated_extensions=frozenset())
    dev.res = Resources()
    mem = isz.memory_of(ffi, dev)
    mapped = ffi.new("char[]", isz.CHUNK_BYTES)
    mem.chunks.append(isz._Chunk(SNAPSHOTS, None, mapped))
    mem.copyable.update(copyable)
    cb = CommandBuffer(handle=0xC0, device=dev, pool=1, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, address=0xC0)
    return feature, cb, mapped, reported


def gpu_writes(ffi, mapped, offset: int, data: bytes) -> None:
    ffi.memmove(mapped + offset, data, len(data))


# ---- the module's small functions ------------------------------------------------------------------
def test_last_items_are_the_values_of_the_last_ops_only_if_all_of_that_kind():
    work = Work("dispatch", "compute", "vkCmdDispatch", {})
    two, three = Draw(2, 0, False, None, None), Draw(3, 1, False, None, None)
    cb = NS(ops=[work, two, three])
    assert last_items(cb, Draw, 2) == [two, three]
    assert last_items(cb, Draw, 3) == []                  # one of them is work
    assert last_items(cb, Draw, 4) == []                  # fewer ops than asked
    assert last_items(cb, Draw, 0) == []


def test_buffer_copies_pack_the_regions_from_the_snapshot_offset_one_copy_per_source():
    regions = [(INDIRECT, 0, 16), (COUNTS, 8, 4), (INDIRECT, 64, 16)]
    assert buffer_copies(regions, 32, int) == [
        (INDIRECT, [{"srcOffset": 0, "dstOffset": 32, "size": 16}, {"srcOffset": 64, "dstOffset": 52, "size": 16}]),
        (COUNTS, [{"srcOffset": 8, "dstOffset": 48, "size": 4}])]


# ---- draws: copied once their render pass ends -------------------------------------------------------
def test_indirect_draws_are_copied_when_their_pass_ends_and_read_at_completion(ffi):
    feature, cb, mapped, reported = setup(ffi)
    shadow = Shadow()
    shadow.estimated_draws(cb, 2)
    feature.before_vkCmdDrawIndirect(cb, cb.handle, INDIRECT, 256, 2, 32)
    assert cb.peek(IndirectPending).copies and cb.device.next.recorded == []      # nothing inside the pass
    cb.ops.append(PASS_END)
    feature.after_vkCmdEndRenderPass(cb, None, cb.handle)
    assert cb.device.next.recorded == [
        ("barrier", vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
         0, vk.VK_ACCESS_TRANSFER_READ_BIT),
        ("copy", INDIRECT, SNAPSHOTS, [(256, 0, 16), (288, 16, 16)]),
        ("barrier", vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
         vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
         vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)]
    assert cb.needs_completion and cb.peek(IndirectPending).copies == []
    gpu_writes(ffi, mapped, 0, struct.pack("<4I", 6, 2, 0, 0) + struct.pack("<4I", 30, 1, 0, 0))
    first, second = cb.ops[:2]
    first.at_completion()                                # one reading sets every draw of the command
    assert [(d.vertices, d.primitives, d.estimated) for d in (first, second)] == [(12, 4, False), (30, 10, False)]
    assert second.at_completion is None and reported == []


def test_a_suspended_pass_keeps_its_draws_for_the_end_that_resumes_it(ffi):
    feature, cb, _, _ = setup(ffi)
    Shadow().estimated_draws(cb, 1)
    feature.before_vkCmdDrawIndexedIndirect(cb, cb.handle, INDIRECT, 0, 1, 0)
    cb.ops.append(PASS_SUSPEND)
    feature.after_vkCmdEndRendering(cb, None, cb.handle)
    assert cb.device.next.recorded == [] and len(cb.peek(IndirectPending).copies) == 1
    cb.ops.append(PASS_END)
    feature.after_vkCmdEndRendering(cb, None, cb.handle)
    [_, (_, src, _, regions), _] = cb.device.next.recorded
    assert (src, regions) == (INDIRECT, [(0, 0, isz.DRAW_INDEXED.size)])   # stride 0: tightly packed


def test_an_indirect_count_draw_copies_its_count_and_at_most_max_draws_records(ffi):
    feature, cb, mapped, _ = setup(ffi)
    Shadow().estimated_draws(cb)
    feature.before_vkCmdDrawIndirectCount(cb, cb.handle, INDIRECT, 0, COUNTS, 4, 3, 16)
    cb.ops.append(PASS_END)
    feature.after_vkCmdEndRenderPass2(cb, None, cb.handle, None)
    copies = [(call[1], call[3]) for call in cb.device.next.recorded if call[0] == "copy"]
    assert copies == [(COUNTS, [(4, 0, 4)]), (INDIRECT, [(0, 16, 16), (16, 32, 16), (32, 48, 16)])]
    gpu_writes(ffi, mapped, 0, struct.pack("<I", 2))
    gpu_writes(ffi, mapped, 16, struct.pack("<4I", 3, 1, 0, 0) + struct.pack("<4I", 6, 1, 0, 0))
    [draw, _] = cb.ops
    draw.at_completion()
    assert (draw.count, draw.vertices, draw.primitives, draw.estimated) == (2, 9, 3, False)


def test_a_source_the_driver_cannot_copy_leaves_the_estimate(ffi):
    feature, cb, _, _ = setup(ffi, copyable=())
    Shadow().estimated_draws(cb, 1)
    feature.before_vkCmdDrawIndirect(cb, cb.handle, INDIRECT, 0, 1, 16)
    cb.ops.append(PASS_END)
    feature.after_vkCmdEndRenderPass(cb, None, cb.handle)
    [draw, _] = cb.ops
    assert cb.device.next.recorded == [] and not cb.needs_completion
    assert draw.at_completion is None and draw.estimated


def test_a_draw_hook_without_the_draws_recording_made_records_nothing(ffi):
    feature, cb, _, _ = setup(ffi)
    feature.before_vkCmdDrawIndirect(cb, cb.handle, INDIRECT, 0, 2, 16)       # no draw ops before it
    feature.before_vkCmdDrawIndexedIndirectCount(cb, cb.handle, INDIRECT, 0, COUNTS, 0, 0, 20)
    assert cb.peek(IndirectPending) is None


# ---- dispatches and trace rays: copied right before the command ----------------------------------------
def test_an_indirect_dispatch_is_copied_at_once_and_takes_its_groups_at_completion(ffi):
    feature, cb, mapped, _ = setup(ffi)
    cb.device.res.pipelines[0x70] = Pipeline(vk.VK_PIPELINE_BIND_POINT_COMPUTE, (8, 2, 1))
    shadow = Shadow()
    shadow.bind_pipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, 0x70)
    shadow.dispatch(cb, "vkCmdDispatchIndirect", None)
    feature.before_vkCmdDispatchIndirect(cb, cb.handle, INDIRECT, 48)
    [_, (_, src, _, regions), _] = cb.device.next.recorded
    assert (src, regions, cb.needs_completion) == (INDIRECT, [(48, 0, 12)], True)
    gpu_writes(ffi, mapped, 0, struct.pack("<3I", 4, 3, 1))
    [work] = cb.ops
    work.at_completion()
    assert (work.info["groups"], work.invocations, work.estimated) == ([4, 3, 1], 4 * 3 * 16, False)


def test_a_trace_rays_address_in_no_known_buffer_keeps_the_estimate(ffi):
    feature, cb, _, _ = setup(ffi)
    Shadow().trace_rays_indirect(cb)
    feature.before_vkCmdTraceRaysIndirectKHR(cb, cb.handle, None, None, None, None, 0x10000)
    assert cb.device.next.recorded == [] and cb.ops[0].at_completion is None


def test_snapshot_memory_is_given_back_when_the_items_holding_it_are_gone(ffi):
    feature, cb, _, _ = setup(ffi)
    mem = cb.device.peek(SnapshotMemory)
    snaps = feature.snapshot(cb, cb.handle, [[(INDIRECT, 0, 12)], [(COUNTS, 0, 4)]])
    assert [(s.offset, s.size) for s in snaps] == [(0, 16), (16, 16)]     # aligned to 16 bytes
    assert mem.chunks[0].free == [(32, isz.CHUNK_BYTES - 32)]
    del snaps
    again = mem.alloc(16)   # the space comes back at the next allocation
    assert again.offset == 0 and mem.chunks[0].free == [(16, isz.CHUNK_BYTES - 16)]


def test_a_snapshot_collected_while_its_memory_is_locked_does_not_deadlock(ffi):
    """The garbage collector may collect a Snapshot (its finalizer gives its space back) during any allocation,
    also one its thread makes while it holds the memory's lock (as `snapshot` does): the release must not wait for
    that lock (a frame loop of indirect dispatches hung so after a few hundred frames)."""
    import threading
    feature, cb, _, _ = setup(ffi)
    mem = cb.device.peek(SnapshotMemory)
    snaps = feature.snapshot(cb, cb.handle, [[(INDIRECT, 0, 12)]])

    def collect_while_locked():
        with mem.lock:
            snaps.clear()   # the Snapshot's finalizer runs here, on this thread, the lock held
    worker = threading.Thread(target=collect_while_locked, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the release waited for the lock its own thread holds"
    assert mem.alloc(16).offset == 0


def test_binding_hooks_the_commands_of_its_rows():
    hooks = HookSet(HookErrors(logging.getLogger("test")))
    hooks.bind(IndirectSizes(NS(ffi=None, hooks=hooks)))
    assert {name for name, modules in hooks.modules().items() if "tessera.icd.indirect_sizes" in modules} == {
        "vkCreateBuffer", "vkDestroyBuffer", "vkCmdDispatchIndirect", "vkCmdTraceRaysIndirectKHR",
        "vkCmdDrawIndirect", "vkCmdDrawIndexedIndirect", "vkCmdDrawIndirectCount", "vkCmdDrawIndexedIndirectCount",
        "vkCmdEndRenderPass", "vkCmdEndRenderPass2", "vkCmdEndRendering"}

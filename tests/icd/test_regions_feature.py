"""VK_ARM_performance_counters_by_region without Vulkan (issue #24): the capture plan (icd/regions/capture.py's plan,
render_pass_geometry) and the `Regions` feature object's hooks, called directly with stand-ins for the
driver, its ffi and its objects. The hooks are bound by HookSet.bind from their names, so the commands
the intercept table gives icd.regions.hooks and the object's methods must agree one for one."""
from __future__ import annotations

import logging
import struct
from types import SimpleNamespace as NS

import pytest

from tessera.icd.counter_memory import Chunk, Limits
from tessera.icd.objects import CommandBuffer
from tessera.icd.regions import hooks as regions_hooks
from tessera.icd.regions.capture import plan, render_pass_geometry
from tessera.icd.regions.hooks import Regions
from tessera.icd.regions.props import REGION_ALIGNMENT, REGION_SIZE, align, row_bytes
from tessera.icd.regions.state import Capture, CommandBufferRegions, DeviceRegions, Variant
from tessera.spirv.passes.region_counters import HEADER_WORDS, NONE, RAW_COUNTERS
from tessera.vkapi import intercepts
from tessera.vkapi.commands import DRAWS
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.resources import Attachment, Framebuffer, RenderPass, Resources
from tessera.vkapi.vkconst import vk

THREADS, SAMPLES, WRITEBACK = 0x1001, 0x1002, 0x100A
ALIGNMENT = 64
BUFFER, BUFFER_ADDRESS, BUFFER_SIZE = 0xB0, 0x10000, 1 << 16
CHUNK_SIZE = 8 << 20


class Ffi:
    """What plan uses of cffi: NULL, and memmove into the chunk's mapped memory (an offset here)."""
    NULL = None

    def __init__(self) -> None:
        self.memory = bytearray(CHUNK_SIZE)

    def memmove(self, dst: int, src: bytes, n: int) -> None:
        self.memory[dst:dst + n] = src[:n]


def state() -> DeviceRegions:
    s = DeviceRegions(Limits(set_layout=1, alignment=ALIGNMENT, max_sets=8, memory_type=0))
    s.free.append(Chunk(buffer=0xC4, memory=0, mapped=0, descriptor_set=0xD5, pool=0))   # no memory to make
    return s


def command_buffer(address: int = 0xC0, pool: int = 1) -> CommandBuffer:
    res = Resources()
    res.buffers[BUFFER] = BUFFER_SIZE
    res.buffer_addresses[BUFFER] = BUFFER_ADDRESS
    return CommandBuffer(handle=address, device=NS(res=res, handle=0xDE), pool=pool,
                         level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, address=address)


def request(ids, addresses=(BUFFER_ADDRESS,)):
    return NS(counterIndexCount=len(ids), pCounterIndices=list(ids) if ids is not None else None,
              counterAddressCount=len(addresses), pCounterAddresses=list(addresses))


def planned(ids, area=(0, 0, 64, 40), arrays=(1,), writeback=None, addresses=(BUFFER_ADDRESS,)):
    ffi, warnings, cb, s = Ffi(), [], command_buffer(), state()
    writeback = writeback or [[0.0] * n for n in arrays]
    capture = plan(ffi, lambda key, message: warnings.append(key), cb, s, request(ids, addresses), area,
                   list(arrays), writeback, "vkCmdBeginRendering")
    return capture, warnings, ffi, s


# ---- the plan: what a request may ask -------------------------------------------------------------
@pytest.mark.parametrize("ids, key", [([THREADS] * 11, "too-many:11"), ([0x9999], "unknown:[39321]"),
                                      ([THREADS, THREADS], "duplicate")])
def test_a_request_the_driver_cannot_honour_captures_nothing_and_says_why_once(ids, key):
    capture, warnings, _, s = planned(ids)
    assert capture is None and warnings == [key]
    assert s.buffers == {}   # no memory reserved


def test_no_counters_or_an_empty_area_captures_nothing_in_silence():
    assert planned([])[:2] == (None, [])
    assert planned([THREADS], area=(0, 0, 0, 16))[:2] == (None, [])


def test_null_counter_indices_capture_nothing():
    ffi, warnings = Ffi(), []
    req = NS(counterIndexCount=2, pCounterIndices=None, counterAddressCount=1, pCounterAddresses=[BUFFER_ADDRESS])
    assert plan(ffi, lambda k, m: warnings.append(k), command_buffer(), state(), req, (0, 0, 8, 8), [1], [[0.0]],
                "vkCmdBeginRenderPass") is None
    assert warnings == ["no-indices"]


# ---- the plan: the template the shader reads and the copies out ------------------------------------
def test_the_template_header_names_the_area_the_strides_and_each_raw_counters_slot():
    capture, warnings, ffi, _ = planned([SAMPLES, THREADS])
    assert warnings == []
    cols, rows = 2, 2   # 64x40 in 32x32 regions
    row_stride, region_stride = row_bytes(64, 2), align(2 * 4, REGION_ALIGNMENT)
    header = struct.unpack_from(f"<9I{len(RAW_COUNTERS)}I", ffi.memory, 0)
    assert header[:9] == (0, 0, cols, rows, 1, row_stride // 4, region_stride // 4, row_stride * rows // 4, 0)
    slots = dict(zip(RAW_COUNTERS, header[9:]))
    assert (slots["samples"], slots["threads"]) == (0, 1)
    assert all(v == NONE for k, v in slots.items() if k not in ("samples", "threads"))
    # The template comes first, then the working slice the draws bind.
    assert capture.section == align(HEADER_WORDS * 4 + row_stride * rows, ALIGNMENT)
    assert capture.work == capture.section and capture.chunk.descriptor_set == 0xD5


def test_tile_write_back_bytes_are_computed_per_region_into_the_template():
    capture, _, ffi, _ = planned([WRITEBACK, THREADS], area=(0, 0, 40, 33), writeback=[[4.0]])
    row_stride, region_stride = row_bytes(40, 2), align(8, REGION_ALIGNMENT)
    data = HEADER_WORDS * 4
    value = lambda rx, ry: struct.unpack_from("<I", ffi.memory, data + ry * row_stride + rx * region_stride)[0]
    rw, rh = REGION_SIZE
    assert (value(0, 0), value(1, 0), value(0, 1), value(1, 1)) == (rw * rh * 4, 8 * rh * 4, rw * 1 * 4, 8 * 1 * 4)


def test_each_array_is_copied_in_runs_of_counters_so_alignment_padding_is_never_written():
    capture, _, _, _ = planned([THREADS, SAMPLES], addresses=(BUFFER_ADDRESS + 0x100,))
    (copy,) = capture.copies
    row_stride, region_stride = row_bytes(64, 2), align(8, REGION_ALIGNMENT)
    src0 = capture.work + HEADER_WORDS * 4
    assert copy.buffer == BUFFER
    assert copy.regions == [(src0 + ry * row_stride + rx * region_stride, 0x100 + ry * row_stride + rx * region_stride,
                             8) for ry in range(2) for rx in range(2)]


def test_whole_rows_of_counters_without_padding_are_copied_as_one_run():
    ids = [THREADS, SAMPLES, 0x1003, 0x1004]   # 16 bytes a region: no padding between regions
    capture, _, _, _ = planned(ids, area=(0, 0, 64, 32))
    (copy,) = capture.copies
    assert [n for _, _, n in copy.regions] == [2 * 16]


def test_arrays_without_an_address_or_outside_a_tracked_buffer_are_not_written():
    capture, warnings, _, _ = planned([THREADS], arrays=(3,), addresses=(BUFFER_ADDRESS, 0x999))
    assert warnings == ["addresses:2:3", "address:0x999"]
    assert len(capture.copies) == 1


def test_an_array_that_would_run_past_its_buffer_is_not_written():
    capture, warnings, _, _ = planned([THREADS], addresses=(BUFFER_ADDRESS + BUFFER_SIZE - 16,))
    assert capture.copies == [] and warnings[0].startswith("small:")


def test_each_subpass_has_its_own_section_with_as_many_arrays_as_it_has_layers_or_views():
    capture, _, ffi, _ = planned([THREADS], arrays=(1, 2), addresses=[BUFFER_ADDRESS + i * 0x1000 for i in range(3)])
    assert len(capture.copies) == 3
    layer_bytes = row_bytes(64, 1) * 2
    sources = [copy.regions[0][0] for copy in capture.copies]
    first = capture.work + HEADER_WORDS * 4
    assert sources == [first, first + capture.section, first + capture.section + layer_bytes]
    assert struct.unpack_from("<5I", ffi.memory, capture.section)[4] == 2   # layers allocated: the most of any subpass


def test_render_pass_geometry_counts_views_per_subpass_and_puts_write_back_in_the_last():
    cb, s = command_buffer(), state()
    stored = Attachment(vk.VK_FORMAT_R8G8B8A8_UNORM, 4, 0, vk.VK_ATTACHMENT_STORE_OP_STORE, 0, 0)
    cb.device.res.render_passes[7] = RenderPass((stored,), 2, ())
    cb.device.res.framebuffers[8] = Framebuffer(64, 64, 3, ())
    s.view_masks[7] = (0b101, 0)
    arrays, wb = render_pass_geometry(cb, s, NS(renderPass=7, framebuffer=8))
    assert arrays == [2, 3]
    assert wb == [[0.0, 0.0], [16.0, 16.0, 16.0]]   # 4 bytes x 4 samples, once, at the end


# ---- the feature object -------------------------------------------------------------------------------
class Objects:
    def address(self, handle) -> int:
        return int(handle)


def feature() -> tuple[Regions, list]:
    python_path: list = []
    hooks = HookSet(HookErrors(logging.getLogger("test_regions_feature")))
    hooks.recorder = NS(python_path=lambda handle, on: python_path.append((handle, on)))
    drv = NS(ffi=Ffi(), hooks=hooks, objects=Objects(), profile=NS(key="g310"))
    return Regions(drv), python_path


def capturing(f: Regions, cb: CommandBuffer, variants=None) -> Capture:
    s = f.states.setdefault(cb.device.handle, state())
    s.variants.update(variants or {})
    capture = Capture(s.free[0], work=0, section=256, copies=[])
    s.buffers[cb.address] = CommandBufferRegions(capture=capture, pool=cb.pool)
    return capture


def test_every_command_the_intercept_table_gives_icd_regions_is_a_method_and_no_other():
    hooks = HookSet(HookErrors(logging.getLogger("test_regions_feature")))
    hooks.bind(feature()[0])
    named = {name for name, modules in intercepts.owners(intercepts.ICD).items()
             if "tessera.icd.regions.hooks" in modules}
    assert set(hooks.modules()) == named
    assert set(DRAWS) <= set(hooks.befores)


def test_registering_binds_the_object_and_gives_the_device_its_setup_and_teardown():
    hooks = HookSet(HookErrors(logging.getLogger("test_regions_feature")))
    drv = NS(ffi=Ffi(), hooks=hooks, objects=Objects(), profile=None, features=[])
    f = regions_hooks.register(drv)
    assert drv.features == [f]   # its device lifecycle (icd/feature.py)
    assert hooks.replacements["vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM"] == \
        f.replace_vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM


def test_a_warning_is_given_once_per_key(capsys, caplog):
    f, _ = feature()
    for _ in range(2):
        f.warn("secondary", "not captured")
    f.warn("other", "also")
    assert capsys.readouterr().err.count("tessera: performance counters by region: not captured") == 1
    assert [r.getMessage() for r in caplog.records] == ["not captured", "also"]


def test_inside_a_captured_pass_a_graphics_bind_takes_the_counting_variant():
    f, _ = feature()
    cb = command_buffer()
    capture = capturing(f, cb, {0x51: Variant(pipeline=0x52, layout=3, set_index=1)})
    assert f.before_vkCmdBindPipeline(cb, cb.handle, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, 0x51) == \
        (cb.handle, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, 0x52)
    assert (capture.app_pipeline, capture.variant.pipeline) == (0x51, 0x52)
    # A pipeline without a variant is bound as it is; compute binds are not the capture's.
    assert f.before_vkCmdBindPipeline(cb, cb.handle, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, 0x60) is None
    assert capture.variant is None
    assert f.before_vkCmdBindPipeline(cb, cb.handle, vk.VK_PIPELINE_BIND_POINT_COMPUTE, 0x51) is None


def test_outside_a_captured_pass_the_hooks_do_nothing():
    f, python_path = feature()
    cb = command_buffer()
    assert f.before_vkCmdBindPipeline(cb, cb.handle, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, 0x51) is None
    f.before_vkCmdDraw(cb, cb.handle, 3, 1, 0, 0)
    f.after_vkCmdNextSubpass(cb, None, cb.handle, 0)
    f.after_vkCmdEndRendering(cb, None, cb.handle)
    assert python_path == []


def test_next_subpass_moves_the_capture_to_the_next_section():
    f, _ = feature()
    cb = command_buffer()
    capture = capturing(f, cb)
    f.after_vkCmdNextSubpass(cb, None, cb.handle, 0)
    f.after_vkCmdNextSubpass2(cb, None, cb.handle, None, None)
    assert capture.subpass == 2


def test_the_end_of_a_captured_pass_records_the_copies_and_leaves_the_python_path(monkeypatch):
    f, python_path = feature()
    ended = []
    monkeypatch.setattr(regions_hooks, "end_commands", lambda ffi, cb, handle, capture: ended.append(capture))
    cb = command_buffer()
    capture = capturing(f, cb)
    f.after_vkCmdEndRenderPass2(cb, None, cb.handle, None)
    assert ended == [capture] and python_path == [(cb.handle, False)]
    assert f.states[cb.device.handle].buffers[cb.address].capture is None
    # A command buffer that shader instrumentation keeps on the Python path stays there.
    cb.instrumentation = object()
    capturing(f, cb)
    f.after_vkCmdEndRendering(cb, None, cb.handle)
    assert python_path == [(cb.handle, False)]


def test_a_pools_reset_or_destruction_returns_its_command_buffers_chunks_to_the_free_list():
    f, _ = feature()
    dev = command_buffer().device
    s = f.states.setdefault(dev.handle, DeviceRegions(Limits(1, ALIGNMENT, 8, 0)))
    mine, other = Chunk(1, 0, 0, 0, 0), Chunk(2, 0, 0, 0, 0)
    s.buffers = {0xA: CommandBufferRegions(chunks=[mine], pool=5), 0xB: CommandBufferRegions(chunks=[other], pool=6)}
    f.before_vkResetCommandPool(dev, dev.handle, 5, 0)
    assert list(s.buffers) == [0xB] and s.free == [mine]
    f.before_vkDestroyCommandPool(dev, dev.handle, 6, None)
    assert s.buffers == {} and s.free == [mine, other]

"""icd/regions/capture.py's plan, step by step (issue #24), without Vulkan: the request's counter IDs,
the layout of a capture, where each array goes, the copy runs and the template's write-back bytes.
plan itself is covered end to end in test_regions_feature.py."""
from __future__ import annotations

import struct
from types import SimpleNamespace as NS

from tessera.icd.regions.capture import (Layout, array_targets, copy_runs, counter_ids, layout, pack_writeback,
                                         template_and_copies)
from tessera.icd.regions.props import MAX_COUNTERS, REGION_ALIGNMENT, REGION_SIZE, align, row_bytes
from tessera.icd.regions.state import ArrayCopy
from tessera.spirv.passes.region_counters import HEADER_WORDS, NONE, RAW_COUNTERS
from tessera.vkapi.resources import Resources

THREADS, SAMPLES, WRITEBACK = 0x1001, 0x1002, 0x100A
FFI = NS(NULL=None)


def ids_of(ids, count=None):
    warnings: list = []
    got = counter_ids(FFI, lambda key, message: warnings.append(key),
                      NS(counterIndexCount=len(ids) if count is None else count, pCounterIndices=ids), "cmd")
    return got, warnings


def test_counter_ids_are_validated_and_a_request_of_none_is_silent():
    assert ids_of([THREADS, WRITEBACK]) == ([THREADS, WRITEBACK], [])
    assert ids_of([]) == (None, [])
    assert ids_of(None, count=2) == (None, ["no-indices"])
    assert ids_of([THREADS] * (MAX_COUNTERS + 1)) == (None, [f"too-many:{MAX_COUNTERS + 1}"])
    assert ids_of([THREADS, 0xDEAD]) == (None, ["unknown:[57005]"])
    assert ids_of([THREADS, THREADS]) == (None, ["duplicate"])


def test_the_layout_follows_the_extensions_array_formula():
    lay = layout((4, 8, 70, 33), 3, [1, 2], 64)
    rw, rh = REGION_SIZE
    assert (lay.x, lay.y, lay.w, lay.h, lay.counters) == (4, 8, 70, 33, 3)
    assert (lay.cols, lay.rows) == (-(-70 // rw), -(-33 // rh)) == (3, 2)
    assert lay.region_stride == align(12, REGION_ALIGNMENT)
    assert lay.row_stride == row_bytes(70, 3) and lay.layer_bytes == lay.row_stride * 2
    assert (lay.header_bytes, lay.layers) == (HEADER_WORDS * 4, 2)
    assert lay.section == align(HEADER_WORDS * 4 + 2 * lay.layer_bytes, 64) and lay.section % 64 == 0


def test_an_array_goes_to_a_buffer_that_holds_all_of_it_or_nowhere():
    res = Resources()
    res.buffers[0xB0] = 1024
    res.buffer_addresses[0xB0] = 0x10000
    warnings: list = []
    request = NS(pCounterAddresses=[0x10000, 0x10000 + 1024 - 100, 0x5000])
    got = array_targets(lambda key, message: warnings.append(key), res, request, 4, 3, 128, "cmd")
    assert got == [ArrayCopy(0xB0, [(0, 0, 0)]), None, None, None]   # the fourth has no address
    assert warnings == [f"small:{0x10000 + 924:#x}:128", f"address:{0x5000:#x}"]


def lay_of(w, h, counters) -> Layout:
    return layout((0, 0, w, h), counters, [1], 64)


def test_copy_runs_merge_regions_contiguous_in_both_and_skip_the_padding():
    lay = lay_of(64, 64, 4)           # 2x2 regions of 16 bytes: a row's two regions are contiguous
    assert lay.region_stride == 16 and lay.row_stride == 64
    assert copy_runs(lay, 1000, 0) == [(1000, 0, 32), (1064, 64, 32)]
    lay = lay_of(64, 32, 3)           # 12 bytes of counters in 16-byte regions: one run per region
    assert copy_runs(lay, 0, 500) == [(0, 500, 12), (16, 516, 12)]


def test_write_back_bytes_are_per_region_pixels_and_saturate():
    lay = lay_of(40, 32, 2)            # regions 32x32 and 8x32
    image = bytearray(lay.layer_bytes)
    pack_writeback(image, 0, lay, 1, 2.0)
    assert struct.unpack_from("<I", image, 4)[0] == 32 * 32 * 2
    assert struct.unpack_from("<I", image, lay.region_stride + 4)[0] == 8 * 32 * 2
    pack_writeback(image, 0, lay, 1, 1e12)
    assert struct.unpack_from("<I", image, 4)[0] == 0xFFFFFFFF


def test_the_template_holds_each_subpasses_header_and_copies_for_arrays_with_a_target():
    ids = [THREADS, WRITEBACK]
    lay = layout((2, 3, 64, 32), 2, [1, 2], 64)
    targets = [ArrayCopy(0xB0, [(0, 256, 0)]), None, ArrayCopy(0xB1, [(0, 0, 0)])]
    image, out = template_and_copies(lay, ids, [1, 2], [[0.0], [5.0, 0.0]], targets, 4096)
    assert len(image) == 2 * lay.section
    slots = [NONE] * len(RAW_COUNTERS)
    slots[RAW_COUNTERS.index("threads")] = 0
    for s in range(2):
        header = struct.unpack_from(f"<9I{len(slots)}I", image, s * lay.section)
        assert header == (2, 3, lay.cols, lay.rows, 2, lay.row_stride // 4, lay.region_stride // 4,
                          lay.layer_bytes // 4, 0, *slots)
    first = lay.section + lay.header_bytes    # subpass 1, array 0: write-back in counter 1
    assert struct.unpack_from("<I", image, first + 4)[0] == 32 * 32 * 5
    assert struct.unpack_from("<I", image, lay.header_bytes + 4)[0] == 0
    assert [c.buffer for c in out] == [0xB0, 0xB1]
    assert out[0].regions == copy_runs(lay, 4096 + lay.header_bytes, 256)
    assert out[1].regions == copy_runs(lay, 4096 + lay.section + lay.header_bytes + lay.layer_bytes, 0)

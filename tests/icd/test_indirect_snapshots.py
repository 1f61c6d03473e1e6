"""icd/indirect_sizes.py without a GPU: what a snapshot of indirect arguments sets on a Work or Draw,
and the order of at_completion steps (sizes before what uses them)."""
from __future__ import annotations

import struct

from tessera.icd import indirect_sizes as isz
from tessera.icd.recording import Draw, Work


class FakeSnapshot:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data


def test_a_dispatch_takes_its_groups_and_items():
    w = Work("dispatch", "compute", "vkCmdDispatchIndirect", {"groups": [-1, -1, -1], "group_size": [16, 1, 1]},
             invocations=64 * 16, estimated=True)
    isz._dispatch_sizes(w, FakeSnapshot(struct.pack("<3I", 20, 15, 1)), 16)
    assert (w.info["groups"], w.invocations, w.estimated) == ([20, 15, 1], 20 * 15 * 16, False)


def test_trace_rays_take_width_height_depth():
    w = Work("trace_rays", "trace_rays", "vkCmdTraceRaysIndirectKHR", {"width": -1}, invocations=4096, estimated=True)
    isz._trace_rays_sizes(w, FakeSnapshot(struct.pack("<3I", 640, 480, 2)))
    assert (w.info, w.invocations, w.estimated) == ({"width": 640, "height": 480, "depth": 2}, 640 * 480 * 2, False)


def test_each_draw_of_a_multi_draw_takes_its_record():
    draws = [Draw(3072, 1024, True, None, None) for _ in range(2)]
    data = struct.pack("<4I", 6, 2, 0, 0) + struct.pack("<4I", 30, 1, 6, 0)
    isz._draw_sizes(draws, FakeSnapshot(data), isz.DRAW)
    assert [(d.vertices, d.primitives, d.estimated) for d in draws] == [(12, 4, False), (30, 10, False)]


def test_indirect_count_draws_min_of_count_and_max_and_extrapolates_past_the_copied_records():
    d = Draw(3072, 1024, True, None, None)
    records = struct.pack("<3IiI", 6, 1, 0, 8, 0) + struct.pack("<3IiI", 9, 2, 0, 0, 0)
    isz._draw_count_sizes(d, FakeSnapshot(struct.pack("<I", 1)), FakeSnapshot(records), isz.DRAW_INDEXED, 2)
    assert (d.count, d.vertices, d.primitives, d.estimated) == (1, 6, 2, False)
    d = Draw(3072, 1024, True, None, None)
    isz._draw_count_sizes(d, FakeSnapshot(struct.pack("<I", 7)), FakeSnapshot(records), isz.DRAW_INDEXED, 5)
    # 5 draws (maxDrawCount), 2 copied (6 and 18 vertices): 3 more at their mean, 12
    assert (d.count, d.vertices, d.primitives) == (5, 6 + 18 + 3 * 12, 2 + 6 + 3 * 4)


def test_sizes_come_first_and_a_failing_step_costs_only_itself():
    w = Work("dispatch", "compute", "vkCmdDispatchIndirect")
    seen = []
    isz.then(w, lambda: seen.append("cost"))
    isz.then(w, lambda: seen.append("sizes"), first=True)
    isz.then(w, lambda: 1 / 0)
    isz.then(w, lambda: seen.append("last"))
    w.at_completion()
    assert seen == ["sizes", "cost", "last"]

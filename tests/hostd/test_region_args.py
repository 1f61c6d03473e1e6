"""hostd/region_args.py: the per-counter summary args of a render pass's REGIONS (no GPU)."""
from __future__ import annotations

import json

from tessera.hostd import region_args

PAYLOAD = {
    "device": "0x1", "render_area": [0, 0, 70, 40], "region_size": [32, 32],
    "counters": [{"id": 0x1001, "name": "Fragment threads"}, {"id": 0x1003, "name": "Killed fragments"}],
    "arrays": [
        {"subpass": 0, "layer": 0, "values": [[[1, 9, 3], [0, 2, 1]], [[0, 0, 0], [0, 0, 0]]]},
        {"subpass": 1, "layer": 0, "values": [[[4, 4, 4], [9, 4, 9]], [[0, 0, 0], [0, 0, 7]]]},
    ],
}


def test_summary_per_counter_over_every_array():
    got = dict(region_args.summarize(PAYLOAD))
    # threads: 12 regions, total 16 + 34 = 50; the first 9 is subpass 0, column 1, row 0
    assert got["Fragment threads"] == {"max": 9, "mean": round(50 / 12, 2), "hottest": [1, 0], "subpass": 0,
                                       "layer": 0}
    assert got["Killed fragments"] == {"max": 7, "mean": round(7 / 12, 2), "hottest": [2, 1], "subpass": 1,
                                       "layer": 0}


def test_slice_args_by_submit_and_tag_and_hostile_payloads():
    regions = {(3, 5): json.dumps(PAYLOAD).encode()}
    args = dict(region_args.slice_args(regions, 5, 3))
    assert json.loads(args["Regions Fragment threads"])["max"] == 9
    assert args["Regions heatmaps"] == "regions/t5-s3-*.png"
    assert dict(region_args.slice_args(regions, 5, None)) == args       # the tag's only REGIONS
    assert region_args.slice_args(regions, 5, 4) == []                  # another submit
    assert region_args.slice_args(regions, 6, 3) == []
    for bad in (b"{", b"[]", json.dumps({**PAYLOAD, "arrays": [{"subpass": 0, "layer": 0, "values": []}]}).encode()):
        assert region_args.slice_args({(3, 5): bad}, 5, 3) == []

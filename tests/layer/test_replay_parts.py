"""A render pass part made again for a reused recording (trackers.PassPart.again, layer/replay.py)
carries every field of the original but its workload and captures."""
from __future__ import annotations

import dataclasses

from tessera.layer.trackers import Capture, PassPart, Workload


def test_again_keeps_every_other_field_and_takes_the_new_workload():
    values = {f.name: object() for f in dataclasses.fields(PassPart)}
    values["captures"] = [Capture(0, 12, "draw", 1, tag=3)]
    original = PassPart(**values)
    new = Workload(9, ("frame",), 0)
    again = original.again(new)
    assert again.workload is new and again.captures == [] and again.captures is not original.captures
    for name, value in values.items():
        if name not in ("workload", "captures"):
            assert getattr(again, name) is value, name

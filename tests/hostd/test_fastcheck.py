"""hostd/fastcheck.py: its fast "certainly valid" answer never disagrees with jsonschema."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.hostd import fastcheck
from tessera.schemas import messages
from tessera.schemas.frames import FrameDecoder, MessageType

sys.path.insert(0, str(Path(__file__).parent))
import hostd_builders as b  # noqa: E402

SAMPLES = [b.hello(), b.device(), b.workload(3, "render_pass", width=1920, height=1080, render_area=[0, 0, 1920, 1080],
                                              draw_call_count=12, labels=["Frame", "Scene"], dynamic=False,
                                              attachments=[{"aspect": "color", "format": "R8", "samples": 1}]),
           b.workload(4, "dispatch", groups=[-1, -1, -1], items=-1, indirect=True, group_size=[8, 8, 1]),
           b.workload(5, "buffer_transfer", subtype="copy buffer", bytes=65536, regions=1),
           b.workload(6, "acceleration_structure_build", subtype="acceleration structure 'fast trace' build",
                      primitives=5, instances=0, indirect=False,
                      structures=[{"type": "bottom_level", "mode": "build", "stage": "acceleration structure "
                                   "'fast trace' build", "geometries": [{"type": "triangles", "primitives": 3},
                                                                        {"type": "triangles", "primitives": 2}]}]),
           b.workload(7, "acceleration_structure_copy", subtype="acceleration structure copy to memory",
                      copy_mode="serialize", bytes=4096),
           b.submit(1, 10, [3, 4], duration_ns=5, frame=0, annexed=True), b.annex(1, 4, groups=[3, 2, 1], items=96),
           b.frame(0, 20)]


def _payloads():
    frames = FrameDecoder().feed(b"".join(SAMPLES))
    return [(f.type, f.payload()) for f in frames]


def test_every_schema_is_compiled():
    assert fastcheck.compiled() == set(MessageType)


def test_valid_samples_take_the_fast_path():
    for t, payload in _payloads():
        assert not messages.problems(t, payload)
        assert fastcheck.valid(t, payload), (MessageType(t).name, payload)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 5) | st.sampled_from([2**70, 3.0, -1.5, float("nan")])
    | st.sampled_from(["", "render_pass", "dispatch", "color", "x"]),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.sampled_from(["aspect", "format", "a"]), inner,
                                                                max_size=3),
    max_leaves=12)


@st.composite
def mutated(draw):
    t, payload = draw(st.sampled_from(_payloads()))
    payload = json.loads(json.dumps(payload))
    for _ in range(draw(st.integers(1, 3))):
        target = payload
        path = draw(st.lists(st.integers(0, 20), max_size=2))
        for step in path:     # walk into a nested dict or list, if any
            if isinstance(target, dict) and target:
                key = sorted(target)[step % len(target)]
                if isinstance(target[key], (dict, list)) and target[key]:
                    target = target[key]
            elif isinstance(target, list) and target and isinstance(target[step % len(target)], (dict, list)):
                target = target[step % len(target)]
        if isinstance(target, dict):
            keys = sorted(target) + ["kind", "groups", "attachments", "pid", "time_ns", "new"]
            key = draw(st.sampled_from(keys))
            if draw(st.booleans()) and key in target:
                del target[key]
            else:
                target[key] = draw(json_values)
        elif isinstance(target, list) and target:
            i = draw(st.integers(0, len(target) - 1))
            if draw(st.booleans()):
                target[i] = draw(json_values)
            else:
                target.append(draw(json_values))
    return t, payload


@settings(max_examples=3000, deadline=None)
@given(mutated())
def test_fast_valid_implies_jsonschema_valid(case):
    t, payload = case
    if fastcheck.valid(t, payload):
        assert messages.problems(t, payload) == [], (MessageType(t).name, payload)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(list(MessageType)), json_values)
def test_arbitrary_values(t, payload):
    if fastcheck.valid(t, payload):
        assert messages.problems(t, payload) == []

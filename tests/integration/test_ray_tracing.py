"""Ray tracing and ray queries on the emulated Mali (Mesa 25 lavapipe backend), through the real loader.

examples/ray_tracing.py and examples/ray_query.py check their own pixels against one numpy
reference (examples/rt_scene.py); tests/examples/test_examples_lavapipe.py runs them on plain
lavapipe (with and without validation). Here they run under `tessera run`, and the merged trace
must show every workload with Arm's stage names and the sizes computed by hand from the scene:

  ray_tracing.py  t  stage                                        sizes
  build A         acceleration structure 'fast build' build    3 primitives, geometries [3]
  build B         acceleration structure 'fast trace' build    3 primitives, geometries [2, 1]
  update A        acceleration structure update                3 primitives
  clone A         acceleration structure copy to memory        bytes = A's created size (app prints it)
  serialize B     acceleration structure copy to memory        bytes = B's created size
  deserialize B   acceleration structure copy from memory      bytes = B's created size
  top level       acceleration structure 'fast trace' build    3 instances
  trace rays      trace_rays (direct, and indirect: size from the layer's capture at the device address)
                                                               64 x 64 x 1 = 4096 rays

  ray_query.py: one command building A and B (2 structures, 6 primitives, 'fast trace'), a top level
  of 3 instances ('fast build'), a compute dispatch of 8 x 8 groups of 8 x 8 = 4096 items.
Skipped when the default backend lacks ray tracing (Mesa 22.3).
"""
from __future__ import annotations

import json
import re

import pytest
from integration_support import PYTHON, REPO, run

from tessera.schemas import perfetto as pf

TESSERA = REPO / ".venv" / "bin" / "tessera"
FAST_BUILD = "acceleration structure 'fast build' build"
FAST_TRACE = "acceleration structure 'fast trace' build"
UPDATE = "acceleration structure update"
TO_MEMORY = "acceleration structure copy to memory"
FROM_MEMORY = "acceleration structure copy from memory"


def _events(trace) -> list[tuple[str, dict[str, str]]]:
    """(stage name, extra_data) of every render-stage event; the trace imports cleanly."""
    packets = list(pf.read_packets(trace))
    check = pf.check_render_stages(packets)
    assert check.problems == []
    specs = {iid: name for (_, iid), name in check.specs.items()}
    return [(specs[p.gpu_render_stage_event.stage_iid], {d.name: d.value for d in p.gpu_render_stage_event.extra_data})
            for p in packets if p.HasField("gpu_render_stage_event")]


def _run(example: str, tmp_path):
    session = tmp_path / example
    out = run([TESSERA, "run", "--out", session, "--", PYTHON, REPO / "examples" / f"{example}.py"], None)
    if "lacks VK_KHR" in out.stdout + out.stderr:
        pytest.skip("the default backend has no ray tracing (Mesa 25 lavapipe has)")
    assert out.returncode == 0, out.stdout + out.stderr
    ok = re.search(rf"^{example}: OK on Mali-G720 \(emulated\): 64x64 pixels equal the CPU reference.*$",
                   out.stdout, re.M)
    assert ok, out.stdout + out.stderr
    return ok.group(0), _events(session / "merged.perfetto-trace")


def _geometries(extra) -> list[list[int]]:
    return [[g["primitives"] for g in s["geometries"]] for s in json.loads(extra["structures"])]


def test_ray_tracing_pipeline_workloads_in_merged_trace(shims, tmp_path):
    line, events = _run("ray_tracing", tmp_path)
    a_size, b_size = re.search(r"AS sizes A=(\d+) B=(\d+)", line).groups()
    sizes = {"A": a_size, "B": b_size}      # created sizes (the serialized size, also printed, is a query's)
    builds = [(s, e) for s, e in events if e.get("kind") == "acceleration_structure_build"]
    # layer metadata (lower case) and the driver's own args (capitalised) agree on every size: the
    # merged slice shows each once, as the layer's (a disagreement would keep `Primitives (driver)`)
    assert [(s, e["primitives"], e["instances"], _geometries(e)) for s, e in builds] == [
        (FAST_BUILD, "3", "0", [[3]]),
        (FAST_TRACE, "3", "0", [[2, 1]]),
        (UPDATE, "3", "0", [[3]]),
        (FAST_TRACE, "0", "3", [[3]]),
    ]
    assert not any(k.startswith(("Primitives", "Instances")) for _, e in builds for k in e)
    assert [json.loads(e["structures"])[0]["type"] for _, e in builds] == ["bottom_level"] * 3 + ["top_level"]
    copies = [(s, e["command"], e["copy_mode"], e["bytes"], e.get("Bytes"), e.get("Bytes (driver)")) for s, e in events
              if e.get("kind") == "acceleration_structure_copy"]
    assert copies == [          # the driver's equal Bytes is shown once, as the layer's bytes
        (TO_MEMORY, "vkCmdCopyAccelerationStructureKHR", "clone", sizes["A"], None, None),
        (TO_MEMORY, "vkCmdCopyAccelerationStructureToMemoryKHR", "serialize", sizes["B"], None, None),
        (FROM_MEMORY, "vkCmdCopyMemoryToAccelerationStructureKHR", "deserialize", sizes["B"], None, None),
    ]
    rays = [(s, e["command"], e["width"], e["height"], e["depth"], e["items"]) for s, e in events
            if e.get("kind") == "trace_rays"]
    assert rays == [("trace_rays", "vkCmdTraceRaysKHR", "64", "64", "1", "4096"),
                    ("trace_rays", "vkCmdTraceRaysIndirectKHR", "64", "64", "1", "4096")]
    indirect = next(e for s, e in events if e.get("command") == "vkCmdTraceRaysIndirectKHR")
    # the layer captured the size, and the driver read it itself at execution (icd/indirect_sizes.py)
    assert indirect["annex"] == "true" and "Estimated" not in indirect
    capture = [e for _, e in events if e.get("internal") == "tessera: indirect capture"]
    assert len(capture) == 1 and capture[0]["bytes"] == "12"       # VkTraceRaysIndirectCommandKHR copied
    assert all("tag" in e for _, e in events)      # every GPU event joined the layer's metadata


def test_ray_query_workloads_in_merged_trace(shims, tmp_path):
    _, events = _run("ray_query", tmp_path)
    builds = [(s, e["primitives"], e["instances"], _geometries(e)) for s, e in events
              if e.get("kind") == "acceleration_structure_build"]
    assert builds == [(FAST_TRACE, "6", "0", [[3], [2, 1]]), (FAST_BUILD, "0", "3", [[3]])]
    dispatches = [(s, e["groups"], e["group_size"], e["items"]) for s, e in events if e.get("kind") == "dispatch"]
    assert dispatches == [("compute", "[8,8,1]", "[8,8,1]", "4096")]

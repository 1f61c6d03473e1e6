"""End to end through the real loader: `tessera run` (embedded hostd, layer, emulated
driver) on each example yields a merged trace whose every GPU slice has its
workload metadata and the expected name.

Expected names are written by hand from each example's own parameters (see
the comments); the trace is parsed with the Perfetto protos and checked
against the trace processor's import rules.
"""
from __future__ import annotations

from collections import Counter

import pytest
from integration_support import PYTHON, REPO, run

from tessera.schemas import frames as fr
from tessera.schemas import workloads as batch
from tessera.schemas import perfetto as pf

TESSERA = REPO / ".venv" / "bin" / "tessera"

EXPECTED = {
    # compute_collatz: 1000 elements, local size 32: direct groups [0,10), indirect 12 groups
    # (args in the buffer), base groups [10,20); the indirect args are captured by one layer copy.
    "compute_collatz": {"Dispatch 10×1×1 groups (320 items)": 2, "Dispatch 12×1×1 groups (384 items)": 1,
                        "tessera: indirect capture": 1},
    # transfers: BUF_SIZE 4096; fill from 64 to the end = 4032; copy 512 + 100; fill 256; update 128;
    # clears of A, B (32×32), C (64×64), M (32×32, 4 samples); buffer->image 16×8 + 8×8; copy 16×16;
    # blit to 32×32; resolve 32×32; reads back A, B, C, R.
    "transfers": {"Fill buffer, 4032 bytes": 1, "Copy buffer, 612 bytes": 1, "Fill buffer, 256 bytes": 1,
                  "Update buffer, 128 bytes": 1, "Clear image, 1024 pixels": 3, "Clear image, 4096 pixels": 1,
                  "Copy buffer to image, 192 pixels": 1, "Copy image, 256 pixels": 1, "Blit image, 1024 pixels": 1,
                  "Resolve image, 1024 pixels": 1, "Copy image to buffer, 1024 pixels": 3,
                  "Copy image to buffer, 4096 pixels": 1},
    # render_passes: 64×64; classic pass with 4 draws (draw, indexed, indirect; subpass 1 draw),
    # dynamic rendering with 2 (indexed indirect, draw), a pass suspended/resumed across 2 command
    # buffers with 1 draw in each; each pass = binning + main; 4 readbacks; 2 indirect captures.
    "render_passes": {"Render pass 64×64, 4 draws": 2, "Render pass 64×64, 2 draws": 4,
                      "Copy image to buffer, 4096 pixels": 4, "tessera: indirect capture": 2},
    # debug_labels: the innermost application label of each workload names it.
    "debug_labels": {"collatz 0..255": 1, "collatz 256..511": 1, "transfers": 2},
}


def merged_events(session) -> list:
    packets = list(pf.read_packets(session / "merged.perfetto-trace"))
    check = pf.check_render_stages(packets)
    assert check.problems == []
    return [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")]


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_example_merged_trace(example, shims, tmp_path):
    session = tmp_path / example
    out = run([TESSERA, "run", "--out", session, "--", PYTHON, REPO / "examples" / f"{example}.py"], None)
    assert out.returncode == 0, out.stdout + out.stderr
    events = merged_events(session)
    assert all(pf.extra(e, "metadata") != "missing" for e in events)
    assert all(pf.extra(e, "tag") is not None for e in events)
    assert Counter(e.name for e in events) == EXPECTED[example]
    assert "GPU events without metadata" not in out.stdout
    # The layer's whole stream validates against the JSON Schemas, and every tag it
    # described reached the driver as a label (each WORKLOAD tag is on some GPU event).
    logs = list(session.rglob("*.tessera-log")) + list(session.rglob("*.spool"))
    stream = [f for log in logs for f in fr.iter_file(log)]
    assert stream and stream[0].type == fr.MessageType.HELLO
    assert [(f.type, p) for f in stream for p in batch.all_problems(f.type, f.payload())] == []
    assert set(batch.described(stream)) == {int(pf.extra(e, "tag")) for e in events}


def test_vkcube_frames(shims, tmp_path, xvfb_display):
    """vkcube --c 20: 20 frames, each one render pass with a binning and a main phase."""
    session = tmp_path / "vkcube"
    out = run([TESSERA, "run", "--out", session, "--", "vkcube", "--c", "20"],
              dict(__import__("os").environ, DISPLAY=xvfb_display, XDG_RUNTIME_DIR="/tmp"), timeout=300)
    assert out.returncode == 0, out.stderr
    events = merged_events(session)
    binning = [e for e in events if e.name.startswith("Render pass") and pf.extra(e, "metadata") != "missing"]
    by_instance = Counter(e.render_pass_instance_id for e in binning)
    assert len(by_instance) == 20 and set(by_instance.values()) == {2}
    packets = list(pf.read_packets(session / "merged.perfetto-trace"))
    frames = [p for p in packets if p.HasField("track_event") and p.track_event.name.startswith("Frame")]
    assert len(frames) == 20

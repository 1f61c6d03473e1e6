"""The layer's own indirect-capture copies are the tool's work, not the application's (issue #15 item 5).

`tessera run` on examples/compute_collatz.py (three dispatches, one indirect: the layer copies its 12
bytes of arguments) and examples/render_passes.py (two indirect draws, each captured by a copy after
its pass): the merged slice of each copy is named and marked as the tool's, and `tessera report
--json` counts the application's workloads without them and the copies apart.
"""
from __future__ import annotations

import json

import pytest
from integration_support import PYTHON, REPO, run

from tessera.schemas import perfetto as pf

TESSERA = REPO / ".venv" / "bin" / "tessera"
CAPTURE = "tessera: indirect capture"
# example -> (application GPU events, application workloads by type, the layer's copies)
EXPECTED = {
    "compute_collatz": (3, {"dispatch": 3}, 1),
    # 3 passes (binning + main each) and 4 image readbacks; 2 indirect draws captured
    "render_passes": (3 * 2 + 4, {"render pass": 3, "image transfer": 4}, 2),
}


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_capture_copies_are_counted_apart(example, shims, tmp_path):
    events, workloads, copies = EXPECTED[example]
    session = tmp_path / example
    out = run([TESSERA, "run", "--out", session, "--", PYTHON, REPO / "examples" / f"{example}.py"], None)
    assert out.returncode == 0, out.stdout + out.stderr
    merged = [p.gpu_render_stage_event for p in pf.read_packets(session / "merged.perfetto-trace")
              if p.HasField("gpu_render_stage_event")]
    tools = [e for e in merged if pf.extra(e, "internal") is not None]
    assert [(e.name, pf.extra(e, "internal")) for e in tools] == [(CAPTURE, CAPTURE)] * copies
    assert len(merged) == events + copies
    report = run([TESSERA, "report", session, "--json"], None)
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)
    assert (summary["gpu_events"], summary["workloads"]) == (events, workloads)
    assert (summary["internal_events"], summary["internal_workloads"]) == (copies, {CAPTURE: copies})
    assert sum(summary["internal_time_ns"].values()) == sum(e.duration for e in tools)
    assert "tool (internal) events" in out.stdout     # the `tessera run` table says so too

"""A third-party application stack (wgpu-py: wgpu-native in Rust, naga-generated SPIR-V)
under `tessera run`: its own result checks pass on the emulated Mali, and every GPU slice
of the merged trace has metadata, with the work-group size naga chose (64) in the name."""
from __future__ import annotations

from collections import Counter

from integration_support import PYTHON, REPO, run

from tessera.schemas import perfetto as pf

APP = REPO / "tests" / "integration" / "apps" / "wgpu_app.py"


def test_wgpu_compute_and_render(shims, tmp_path):
    session = tmp_path / "wgpu"
    out = run([REPO / ".venv/bin/tessera", "run", "--out", session, "--", PYTHON, APP], None)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "wgpu_app: OK 1000 compute results and 2 pixels checked on Mali-G720 (emulated)" in out.stdout
    packets = list(pf.read_packets(session / "merged.perfetto-trace"))
    assert pf.check_render_stages(packets).problems == []
    events = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")]
    assert all(pf.extra(e, "metadata") != "missing" for e in events)
    names = Counter(e.name for e in events)
    assert names["Dispatch 16×1×1 groups (1024 items)"] == 1        # ceil(1000 / 64) groups of 64
    assert names["Render pass 64×64, 1 draw"] == 2                   # binning and main

"""A timeline semaphore's wait follows the signal that reaches its value, through both submit paths.

tests/integration/apps/timeline_waits.py submits F1 (a fill signalling 1), then one vkQueueSubmit of D (a
dispatch signalling 2), F2 (a fill waiting for 1) and F3 (a fill waiting for 2), and waits with
vkWaitSemaphores. On the emulated timeline F2 starts with D (its wait is met by F1, long done; a wait for the
semaphore's last signal would put it after D) and F3 starts when D ends. The values reach the driver from
VkTimelineSemaphoreSubmitInfo through the C path's submit ledger (default) and through its Python path
(TESSERA_C_SUBMITS=0): both must place the same.
"""
from __future__ import annotations

import pytest
from integration_support import REPO, run_submit_path

from tessera.schemas import perfetto as pf

APP = REPO / "tests" / "integration" / "apps" / "timeline_waits.py"


@pytest.mark.parametrize("c_submits", [True, False])
def test_a_wait_follows_the_signal_that_reaches_its_value(shims, tmp_path, c_submits):
    session = tmp_path / "session"
    _, paths = run_submit_path(session, APP, "timeline_waits: OK", c_submits)
    assert paths["icd"] == ((2, 0) if c_submits else (0, 2))

    packets = list(pf.read_packets(session / "gpu.perfetto-trace"))
    check = pf.check_render_stages(packets)
    assert check.problems == []
    specs = {iid: name for (_, iid), name in check.specs.items()}
    events = [(specs[p.gpu_render_stage_event.stage_iid], p.timestamp, p.timestamp + p.gpu_render_stage_event.duration)
              for p in packets if p.HasField("gpu_render_stage_event")]
    stages = [stage for stage, _, _ in events]
    assert stages == ["fill buffer", "compute", "fill buffer", "fill buffer"], stages   # placed in submit order
    (_, _, f1_end), (_, d_start, d_end), (_, f2_start, f2_end), (_, f3_start, _) = events
    assert f1_end < d_start < d_end
    assert f2_start == d_start and f2_end < d_end   # with D: F1 met its wait long before
    assert f3_start == d_end                          # D's signal of 2 met it

"""Shader objects (VK_EXT_shader_object, issue #17 item 3): a dispatch of a bound compute shader
object is sized and costed like one of a pipeline, by the layer and by the driver."""
from __future__ import annotations

import pytest
from integration_support import PYTHON, REPO, run

from tessera.hostd.embedded import merge_session
from tessera.schemas import frames as fr
from tessera.schemas import perfetto as pf
from tessera.schemas.workloads import described

APP = REPO / "tests" / "integration" / "apps" / "shader_object.py"


def test_shader_object_dispatch_has_its_work_group_size(tessera_env, tmp_path):
    # No shipped Mali profile has VK_EXT_shader_object: mali-g78 has no profile and reports what the
    # backend has (icd/profiles.py).
    out = run([PYTHON, APP], dict(tessera_env, TESSERA_GPU="mali-g78"))
    if "has no VK_EXT_shader_object" in out.stdout:
        pytest.skip("the backend has no VK_EXT_shader_object (Mesa 22.3)")
    assert out.returncode == 0, out.stdout + out.stderr
    session = tmp_path / "session"
    workloads = [w for p in sorted(session.rglob("*.spool")) + sorted(session.rglob("*.tessera-log"))
                 for w in described(fr.iter_file(p)).values()]
    [dispatch] = [w for w in workloads if w["kind"] == "dispatch"]
    assert dispatch["group_size"] == [64, 1, 1] and dispatch["items"] == 4 * 64      # layer
    events = [p.gpu_render_stage_event for p in pf.read_packets(session / "gpu.perfetto-trace")
              if p.HasField("gpu_render_stage_event")]
    [event] = events
    assert pf.extra(event, "Group size") == "[64, 1, 1]" and pf.extra(event, "Items") == "256"   # driver
    result = merge_session(session)
    assert result.events_without_metadata == 0

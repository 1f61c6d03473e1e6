"""Commands recorded in C by both shims (vkapi/recorder.py): nothing lost or mixed up across a
command buffer's life (issue #11): an arena far past its first size, a pool reset and a new
recording, a freed buffer whose handle comes back, four threads at once (test_threads.py)."""
from __future__ import annotations

import re

from integration_support import PYTHON, REPO, run

from tessera.hostd.embedded import merge_session
from tessera.schemas import perfetto as pf
from tessera.schemas.frames import MessageType, iter_file
from tessera.schemas.workloads import BATCH

APP = REPO / "tests" / "integration" / "apps" / "recording_lifecycle.py"


def test_every_recorded_workload_reaches_the_trace_once_with_its_metadata(tessera_env, tmp_path):
    out = run([PYTHON, APP], tessera_env)
    assert out.returncode == 0, out.stderr
    counts = [int(n) for n in re.search(r"workloads per submit \[([\d, ]+)\]", out.stdout).group(1).split(",")]
    assert counts == [3000 + 29, 700 + 6, 50]     # dispatches + a fill every 100 (hand-counted)
    session = tmp_path / "session"
    result = merge_session(session)
    assert result.gpu_events == sum(counts)
    assert result.events_without_metadata == 0 and result.metadata_without_events == 0, result.examples
    labels = [d.value for p in pf.read_packets(result.output) if p.HasField("gpu_render_stage_event")
              for d in p.gpu_render_stage_event.extra_data if d.name == "Labels"]
    assert len(labels) == sum(counts) and len(set(labels)) == len(labels)   # one tag per workload, none reused
    names = [p.gpu_render_stage_event for p in pf.read_packets(result.output) if p.HasField("gpu_render_stage_event")]
    assert sum(1 for e in names if e.name.startswith("Dispatch 1×1×1 groups")) == 3000 + 700 + 50
    assert "exception" not in out.stderr


def test_workloads_are_described_in_batches_per_command_buffer(tessera_env, tmp_path):
    """WORKLOADS frames (schemas/workloads.py): each holds one command buffer's workloads, at most
    BATCH of them, and every workload is described exactly once; so a buffer of 3,029 workloads
    takes ceil(3029 / BATCH) frames, not 3,029."""
    out = run([PYTHON, APP], tessera_env)
    assert out.returncode == 0, out.stderr
    stream = [f for p in sorted((tmp_path / "session").rglob("*.spool")) for f in iter_file(p)]
    batches = [f.payload() for f in stream if f.type == MessageType.WORKLOADS]
    assert not [f for f in stream if f.type == MessageType.WORKLOAD]
    assert all(1 <= len(b["workloads"]) <= BATCH for b in batches)
    tags = [e["tag"] for b in batches for e in b["workloads"]]
    assert len(tags) == len(set(tags)) == 3000 + 29 + 700 + 6 + 50
    # the recordings, in order (the app reuses one handle): full batches, then the rest at the end
    assert [len(b["workloads"]) for b in batches] == [
        size for n in (3000 + 29, 700 + 6, 50) for size in [BATCH] * (n // BATCH) + [n % BATCH] * bool(n % BATCH)]

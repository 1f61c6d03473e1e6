"""Command buffers recorded on four threads at once: unique tags, consistent metadata, no crash."""
from __future__ import annotations

from collections import Counter

from integration_support import PYTHON, REPO, run

from tessera.schemas import frames as fr
from tessera.schemas import perfetto as pf
from tessera.schemas.workloads import expand

APP = REPO / "tests" / "integration" / "apps" / "threads.py"
THREADS, ROUNDS, SLICE = 4, 25, 256


def test_four_recording_threads(tessera_env, tmp_path):
    out = run([PYTHON, APP], tessera_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "threads: OK 100 command buffers" in out.stdout
    assert "exception in" not in out.stderr
    session = tmp_path / "session"
    stream = [f for p in session.glob("layer-*.spool") for f in fr.iter_file(p)]
    workloads = [w for f in stream if f.type == fr.MessageType.WORKLOADS for w in expand(f.payload())]
    tags = [tag for tag, _ in workloads]
    assert len(tags) == len(set(tags)) == THREADS * ROUNDS * 2          # a fill and a copy per buffer
    by_buffer = Counter(w["command_buffer"] for _, w in workloads)
    assert len(by_buffer) == THREADS * ROUNDS and set(by_buffer.values()) == {2}
    for _, w in workloads:                                              # sizes recorded per thread intact
        assert w["bytes"] == SLICE
    (submit,) = [f for f in stream if f.type == fr.MessageType.SUBMIT]
    assert sorted(submit.payload()["tags"]) == sorted(tags)
    packets = list(pf.read_packets(session / "gpu.perfetto-trace"))
    gpu_tags = [pf.extra(p.gpu_render_stage_event, "Labels") for p in packets if p.HasField("gpu_render_stage_event")]
    assert sorted(gpu_tags) == sorted(f"t{t}" for t in tags)

"""`tessera export SESSION --format arm` on example sessions made with `tessera run`: the files Arm's GPU
Timeline viewer opens, checked against the published format (u32 length + JSON frames with Arm's keys per
workload type; a Perfetto trace per process whose stage and queue names Arm's reader knows and whose every
`Labels` tag has its workload in the metadata). Runs the real loader and the emulated driver."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from integration_support import PYTHON, REPO

sys.path.insert(0, str(REPO / "tests" / "hostd"))
import arm_fixtures as af  # noqa: E402

from tessera.schemas.perfetto import CLOCK_BOOTTIME, CLOCK_MONOTONIC_RAW, read_packets  # noqa: E402
from tessera.schemas.logfile import read_frames  # noqa: E402
from tessera.schemas.frames import MessageType  # noqa: E402
from tessera.tools.demo import EXAMPLES  # noqa: E402

TESSERA = REPO / ".venv" / "bin" / "tessera"
# Arm's .metadata keys per workload type (lglpy service_gpu_timeline / raw_trace; FACTS.md)
KEYS = {
    "renderpass": {"type", "tid", "width", "height", "drawCallCount", "subpassCount", "label", "attachments"},
    "dispatch": {"type", "tid", "xGroups", "yGroups", "zGroups", "label"},
    "tracerays": {"type", "tid", "xItems", "yItems", "zItems", "label"},
    "imagetransfer": {"type", "tid", "subtype", "pixelCount", "label"},
    "buffertransfer": {"type", "tid", "subtype", "byteCount", "label"},
    "asbuild": {"type", "tid", "subtype", "primitiveCount", "label"},
    "astransfer": {"type", "tid", "subtype", "byteCount", "label"},
    "datagraph": {"type", "tid", "label"},            # Arm's DispatchDataGraph (examples/conv_net_graph.py)
}
ARM_STAGES = {"clear image", "copy image", "blit image", "resolve image", "generate mipmap", "copy buffer",
              "fill buffer", "copy query", "compute", "trace_rays", "non-fragment", "advanced geometry", "vertex",
              "binning", "fragment", "main", "acceleration structure 'fast build' build",
              "acceleration structure 'fast trace' build", "acceleration structure copy to memory",
              "acceleration structure copy from memory", "acceleration structure update"}
ARM_STREAMS = {"compute", "non-fragment", "fragment", "binning", "main", "transfer"}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_frames(frames: list[dict]) -> set[int]:
    tids = set()
    for f in frames:
        assert set(f) == {"device", "frame", "presentTimestamp", "submits"}
        assert _is_int(f["device"]) and _is_int(f["frame"]) and _is_int(f["presentTimestamp"])
        for s in f["submits"]:
            assert set(s) == {"device", "queue", "timestamp", "workloads"}
            assert all(_is_int(s[k]) for k in ("device", "queue", "timestamp")) and s["timestamp"] > 0
            for w in s["workloads"]:
                assert set(w) == KEYS[w["type"]], w
                assert isinstance(w["label"], list) and all(isinstance(x, str) for x in w["label"])
                assert all(_is_int(w[k]) for k in KEYS[w["type"]] - {"type", "label", "subtype", "attachments"}), w
                for a in w.get("attachments", []):
                    assert set(a) == {"binding", "load", "store", "resolve"} and a["binding"][:1] in "CDSU"
                tids.add(w["tid"])
    return tids


@pytest.mark.parametrize("name", EXAMPLES)
def test_export_arm_of_an_example_session(shims, tmp_path, name):
    session = tmp_path / "session"
    run = subprocess.run([str(TESSERA), "run", "--out", str(session), "--no-merge", "--", PYTHON,
                          str(REPO / "examples" / f"{name}.py")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    out = subprocess.run([str(TESSERA), "export", str(session), "--format", "arm", "-o", str(tmp_path / "arm")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    metadata = sorted((tmp_path / "arm").glob("*.metadata"))
    assert metadata, out.stdout
    submitted = {}
    for log in session.rglob("*.tessera-log"):
        pid = None
        for fr in read_frames(log):
            if fr.type == MessageType.HELLO:
                pid = fr.payload()["pid"]
            elif fr.type == MessageType.SUBMIT:
                submitted.setdefault(pid, []).extend(fr.payload().get("tags", []))
    for path in metadata:
        pid = int(path.stem.rsplit("-", 1)[1])
        data = path.read_bytes()
        frames = af.read_metadata_bytes(data)
        assert sum(4 + int.from_bytes(data[p:p + 4], "little") for p in _offsets(data)) == len(data)   # whole file
        tids = _check_frames(frames)
        workloads = [w["tid"] for f in frames for s in f["submits"] for w in s["workloads"]]
        assert sorted(workloads) == sorted(submitted.get(pid, []))      # every submitted workload, once per submit
        trace = path.with_suffix(".perfetto-trace")
        names, labels, clocks = {}, set(), None
        for p in read_packets(trace):
            if p.HasField("clock_snapshot") and clocks is None:
                clocks = {c.clock_id for c in p.clock_snapshot.clocks}
            for spec in p.interned_data.gpu_specifications:
                names[spec.iid] = spec.name
            if p.HasField("gpu_render_stage_event"):
                assert clocks and {CLOCK_BOOTTIME, CLOCK_MONOTONIC_RAW} <= clocks
                e = p.gpu_render_stage_event
                assert names[e.stage_iid] in ARM_STAGES and names[e.hw_queue_iid] in ARM_STREAMS
                label = next((d.value for d in e.extra_data if d.name == "Labels"), None)
                if label is not None:
                    labels.add(int(label[1:]))
        assert labels and labels <= tids, (labels - tids)
        if not any(f["presentTimestamp"] for f in frames):     # never presented: one frame flushed at the end
            assert len(frames) == 1 and frames[0]["submits"]


def _offsets(data: bytes):
    pos = 0
    while pos < len(data):
        yield pos
        pos += 4 + int.from_bytes(data[pos:pos + 4], "little")

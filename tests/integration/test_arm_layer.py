"""Arm's GPU Timeline layer protocol against a running `tessera hostd --arm-listen`, then `tessera merge`.

A client speaking Arm's wire protocol byte for byte (tests/hostd/arm_fixtures.py: registry lookup,
Header, DeviceMetadata, Frame, Submit, every workload type) streams into hostd over the abstract
socket and over TCP; a malformed connection is closed while the daemon and the other clients carry
on; the merge with a render-stage trace as Arm's driver writes it (`Labels` = t<tagID>) gives the
slices the expected names, args and tags, and the Arm process its submit and frame tracks.
No GPU driver needed.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

from hostd_process import Lines
from integration_support import PYTHON

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hostd"))
import arm_fixtures as af  # noqa: E402
from hostd_builders import BOOT0, RAW0, GpuTrace  # noqa: E402

from tessera.schemas.perfetto import read_packets  # noqa: E402

DEV, PID = 0xD00D, 4242
CLOCK = BOOT0 - RAW0          # the GPU trace's clock snapshot: BOOTTIME - MONOTONIC_RAW


def _records() -> list[bytes]:
    t = RAW0 + 1_000_000
    return [
        af.header(), af.device(DEV, PID, 51, 0, 3, "Mali-G720"),
        af.submit(t, DEV, 0x51),
        af.renderpass(1, 1920, 1080, 12, 1, labels=["Shadow pass"], attachments=[af.attachment(1), af.attachment(2)]),
        af.continue_renderpass(1, 3),
        af.dispatch(2, 64, 1, 1, labels=["Cull"]), af.dispatch(3, -1, -1, -1),
        af.trace_rays(4, 64, 32, 1), af.image_transfer(5, 4096, 3), af.buffer_transfer(6, 65536, 2),
        af.as_build(7, 100, 1), af.as_transfer(8, 2048, 2), af.data_graph(9),
        af.frame(1, DEV, t + 500_000),
        af.submit(t + 600_000, DEV, 0x51), af.dispatch(10, 8, 8, 1),
    ]


def _start(tmp_path: Path, abstract: str) -> tuple[subprocess.Popen, Lines, int]:
    proc = subprocess.Popen([PYTHON, "-m", "tessera.tools.cli", "hostd", "--listen", f"unix:{tmp_path / 'h.sock'}",
                             "--out", str(tmp_path / "session"), "--arm-listen", f"abstract:{abstract}",
                             "--arm-listen", "tcp:127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    err = Lines(proc.stderr)
    err.wait_for(f"Arm GPU Timeline layer on abstract:{abstract}")
    port = int(err.wait_for("Arm GPU Timeline layer on tcp:").rsplit(":", 1)[1])
    return proc, err, port


def _until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_arm_layer_streams_into_hostd_and_merges(tmp_path):
    abstract = f"tessera-test-{uuid.uuid4().hex[:12]}"
    proc, err, port = _start(tmp_path, abstract)
    try:
        # 1. Arm's layer over the abstract socket: registry lookup, then every record kind.
        good = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        good.connect("\0" + abstract)
        client = af.ArmClient(good)
        services = client.lookup()
        assert set(services) == {"registry", "GPUTimeline", "GPUProfile"} and services["registry"] == 0
        for i, payload in enumerate(_records()):
            client.send(services["GPUTimeline"], payload, af.TX if i % 2 else af.TX_ASYNC)

        # 2. A malformed TimelineRecord over TCP: that connection is closed, nothing else changes.
        bad = socket.create_connection(("127.0.0.1", port))
        bad_client = af.ArmClient(bad)
        endpoint = bad_client.lookup()["GPUTimeline"]
        bad_client.send(endpoint, af.header())
        bad_client.send(endpoint, b"\x3a\xff\xff\xff\x0f")          # length-delimited member past the end
        assert _until_closed(bad) == b""
        bad.close()
        err.wait_for("is not a TimelineRecord")

        # 3. The daemon carries on: a new TCP client still gets the registry, the first client too.
        again = socket.create_connection(("127.0.0.1", port))
        assert af.ArmClient(again).lookup()["GPUTimeline"] == endpoint
        again.close()
        assert client.lookup() == services
        good.close()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, err.text()

    session = tmp_path / "session"
    records = {p.parent.name: json.loads(p.read_text()) for p in session.rglob("session.json")}
    arm = [r for r in records.values() if r.get("protocol") == "arm-gpu-timeline"]
    assert len(arm) == 3
    ok = next(r for r in arm if r["pid"] == PID)
    assert ok["clean"] and ok["records"]["dispatch"] == 3 and ok["devices"][0]["name"] == "Mali-G720"
    assert any("not a TimelineRecord" in r["end"] for r in arm)
    assert any(name.startswith(f"arm-gpu-timeline-{PID}-") for name in records)

    # 4. The device's render stages, as Arm's driver writes them, then tessera merge.
    gpu = GpuTrace(session / "gpu.perfetto-trace", pid=PID)
    t0 = BOOT0 + 1_000_000
    gpu.event(t0, 1000, "non-fragment", "binning", labels="t1", rp=1)
    gpu.event(t0 + 1000, 3000, "fragment", "main", labels="t1", rp=1)
    for k, (tag, queue, stage) in enumerate([(2, "non-fragment", "compute"), (3, "non-fragment", "compute"),
                                             (4, "non-fragment", "trace_rays"), (5, "transfer", "copy image"),
                                             (6, "transfer", "copy buffer"), (10, "non-fragment", "compute")]):
        gpu.event(t0 + 10_000 * (k + 1), 500, queue, stage, labels=f"t{tag}")
    gpu.close()
    out = subprocess.run([PYTHON, "-m", "tessera.tools.cli", "merge", str(session)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "8 with metadata, 0 without" in out.stdout, out.stdout

    slices, tracks, events = {}, {}, []
    for p in read_packets(session / "merged.perfetto-trace"):
        if p.HasField("gpu_render_stage_event"):
            e = p.gpu_render_stage_event
            args = {d.name: d.value for d in e.extra_data}
            slices.setdefault(args["Labels"], []).append((e.name, args))
        elif p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
        elif p.HasField("track_event"):
            events.append((p.timestamp, p.track_event.name))
    names = {label: {n for n, _ in v} for label, v in slices.items()}
    assert names == {"t1": {"Shadow pass"}, "t2": {"Cull"}, "t3": {"Dispatch (indirect)"},
                     "t4": {"Trace rays 64×32"}, "t5": {"Copy buffer to image, 4096 pixels"},
                     "t6": {"Copy buffer, 65536 bytes"}, "t10": {"Dispatch 8×8×1 groups"}}
    rp = slices["t1"][0][1]
    assert (rp["tag"], rp["kind"], rp["draw_call_count"], rp["width"], rp["height"]) == ("1", "render_pass", "15",
                                                                                         "1920", "1080")
    assert json.loads(rp["attachments"]) == [{"binding": "C0", "load": True, "store": True, "resolve": False},
                                             {"binding": "D", "load": True, "store": True, "resolve": False}]
    assert rp["source"] == "Arm GPU Timeline layer" and rp["labels"] == '["Shadow pass"]'
    assert slices["t3"][0][1]["groups"] == "[-1,-1,-1]" and slices["t5"][0][1]["subtype"] == "copy buffer to image"
    process = next(t for t in tracks.values() if t.HasField("process"))
    assert (process.process.pid, process.process.process_name) == (PID, "Arm GPU Timeline layer (Mali-G720)")
    submits = sorted(ts for ts, name in events if name == "vkQueueSubmit")
    assert submits == [RAW0 + 1_000_000 + CLOCK, RAW0 + 1_600_000 + CLOCK]     # MONOTONIC_RAW -> BOOTTIME
    assert (RAW0 + 1_500_000 + CLOCK, "Frame 0") in events
    children = [name for _, name in events]
    assert children.index("Shadow pass") < children.index("Cull") < children.index("Dispatch 8×8×1 groups")


def test_arm_listen_refuses_a_non_loopback_address(tmp_path):
    out = subprocess.run([PYTHON, "-m", "tessera.tools.cli", "hostd", "--listen", f"unix:{tmp_path / 'h.sock'}",
                          "--arm-listen", "tcp:8.8.8.8:1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "non-loopback" in out.stderr and not os.path.exists(tmp_path / "h.sock")

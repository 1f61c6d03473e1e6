"""Merge time and peak memory for a synthetic session of N render-stage events (default 1,000,000).

Generated into a temp dir (not timed), following docs/formats.md:
  - gpu.perfetto-trace, written with tessera.schemas.perfetto.PacketWriter as
    the emulated driver writes it: a first packet with the clock snapshot and
    interned queues/stages/graphics context, then one packet per workload
    phase. Per submit: two render passes (binning on non-fragment + main on
    fragment, sharing a render_pass_instance_id), one dispatch (compute) and
    one buffer copy (transfer): 6 events, 4 workloads; each event carries
    `Labels` t<N>, `Label stack` and the driver's own extra_data.
  - a session log (HELLO, DEVICE, then per submit 4 WORKLOADs and a SUBMIT,
    a FRAME every 10 submits) encoded with tessera.schemas.frames.encode, as
    hostd writes it (OUT/<process>-<pid>-<n>/session.tessera-log).
Every workload is recorded once (a fresh tagID each; when N is not a
multiple of 6 the last submit's remaining workloads have no event), so the metadata index
holds N * 2/3 WORKLOADs: the merge's memory is bounded by the metadata, not
by the trace, and this is the realistic worst case for that.

Measured: `merge_session()` in a child process (`python -c`, the same
interpreter): wall time of the call, reported by the child, and peak RSS of
the child from resource usage (os.wait4 ru_maxrss: the whole process,
interpreter and imports included). The merge's result is checked: N events,
all with metadata, no metadata without events.

Run: .venv/bin/python bench/bench_merge.py [--events N] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb  # noqa: E402

from tessera.schemas.frames import MessageType, encode  # noqa: E402
from tessera.schemas.perfetto import (CLOCK_BOOTTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW,  # noqa: E402
                                      CLOCK_REALTIME, LABEL_STACK_KEY, LABELS_KEY, SEQ_INCREMENTAL_STATE_CLEARED,
                                      SEQ_NEEDS_INCREMENTAL_STATE, PacketWriter, TracePacket)

TARGET_S = 30.0
TARGET_BYTES = 1 << 30
PID = 4242
SEQ = 0x7E550000 + PID
RAW0, BOOT0 = 1_000_000_000, 5_000_000_000
QUEUES = {"non-fragment": 1, "fragment": 2, "transfer": 3}
STAGES = {"binning": 10, "main": 11, "compute": 12, "trace_rays": 13, "fill buffer": 14, "update buffer": 15,
          "copy buffer": 16}
EVENTS_PER_SUBMIT = 6


def first_packet() -> TracePacket:
    p = TracePacket()
    p.timestamp = BOOT0
    p.trusted_packet_sequence_id = SEQ
    p.first_packet_on_sequence = True
    p.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED
    snap = p.clock_snapshot
    snap.primary_trace_clock = CLOCK_BOOTTIME
    for cid, t in ((CLOCK_BOOTTIME, BOOT0), (CLOCK_MONOTONIC_RAW, RAW0), (CLOCK_MONOTONIC, RAW0),
                   (CLOCK_REALTIME, 1_700_000_000_000_000_000)):
        snap.clocks.add(clock_id=cid, timestamp=t)
    for name, iid in (*QUEUES.items(), *STAGES.items()):
        p.interned_data.gpu_specifications.add(iid=iid, name=name)
    gc = p.interned_data.graphics_contexts.add(iid=1, pid=PID)
    gc.api = pb.InternedGraphicsContext.VULKAN
    return p


def generate(session: Path, events: int) -> dict:
    """Write gpu.perfetto-trace and a session log; returns what was written."""
    trace = PacketWriter(session / "gpu.perfetto-trace")
    trace.write(first_packet())
    log_dir = session / f"bench-{PID}-1"
    log_dir.mkdir()
    log = open(log_dir / "session.tessera-log", "wb")
    log.write(encode(MessageType.HELLO, {"protocol": 1, "pid": PID, "process": "bench", "layer": "0.1",
                                         "clock_sync": {"monotonic_raw_ns": RAW0, "boottime_ns": BOOT0}}))
    log.write(encode(MessageType.DEVICE, {"device": "0xd1", "name": "Mali-G720 (emulated)", "vendor_id": 0x13B5,
                                          "api_version": "1.3.0"}))
    event_id = tag = rp = sid = 0
    written = workloads = with_events = 0
    last_tag = None
    t_gpu = BOOT0 + 1_000_000
    while written < events:
        sid += 1
        cb = 0xCB000 + sid % 64
        frame_no = sid // 10
        submit_raw = t_gpu - (BOOT0 - RAW0) - 50_000
        tags = []
        phases = []   # (queue, stage, tag, rp, extra)
        for k in range(2):
            tag += 1
            rp += 1
            tags.append(tag)
            draws = 8 + (tag % 40)
            log.write(encode(MessageType.WORKLOAD, {
                "kind": "render_pass", "device": "0xd1", "command_buffer": f"0x{cb:x}",
                "command": "vkCmdBeginRenderPass2", "labels": [f"Frame {frame_no}", f"Pass {k}"],
                "width": 1920, "height": 1080, "render_area": [0, 0, 1920, 1080], "subpass_count": 1,
                "dynamic": False, "draw_call_count": draws,
                "attachments": [{"aspect": "color", "format": "VK_FORMAT_R8G8B8A8_UNORM", "samples": 1},
                                {"aspect": "depth", "format": "VK_FORMAT_D32_SFLOAT", "samples": 1}]}, tag=tag))
            extra = {"Workload": "render pass", "Area": "1920x1080", "Draws": str(draws), "Vertices": str(draws * 3000),
                     "Subpasses": "1", "Command": "vkCmdBeginRenderPass2"}
            phases.append(("non-fragment", "binning", tag, rp, extra, [f"Frame {frame_no}", f"Pass {k}"]))
            phases.append(("fragment", "main", tag, rp, extra, [f"Frame {frame_no}", f"Pass {k}"]))
        tag += 1
        tags.append(tag)
        log.write(encode(MessageType.WORKLOAD, {
            "kind": "dispatch", "device": "0xd1", "command_buffer": f"0x{cb:x}", "command": "vkCmdDispatch",
            "groups": [64, 16, 1], "group_size": [8, 8, 1], "items": 65536}, tag=tag))
        phases.append(("non-fragment", "compute", tag, None,
                       {"Workload": "dispatch", "Command": "vkCmdDispatch", "Items": "65536"}, [f"Frame {frame_no}"]))
        tag += 1
        tags.append(tag)
        log.write(encode(MessageType.WORKLOAD, {
            "kind": "buffer_transfer", "device": "0xd1", "command_buffer": f"0x{cb:x}", "command": "vkCmdCopyBuffer",
            "subtype": "copy buffer", "bytes": 65536, "regions": 1}, tag=tag))
        phases.append(("transfer", "copy buffer", tag, None,
                       {"Workload": "transfer", "Command": "vkCmdCopyBuffer", "Bytes": "65536"}, []))
        workloads += len(tags)
        log.write(encode(MessageType.SUBMIT, {"device": "0xd1", "queue": "0xq1", "time_ns": submit_raw,
                                              "duration_ns": 20_000, "command_buffers": [f"0x{cb:x}"],
                                              "tags": tags, "frame": frame_no}, sequence=sid))
        if sid % 10 == 0:
            log.write(encode(MessageType.FRAME, {"frame": frame_no, "time_ns": submit_raw + 30_000,
                                                 "source": "present"}))
        for queue, stage, t, r, extra, labels in phases:
            if written >= events:
                break
            p = TracePacket()
            p.timestamp = t_gpu
            p.trusted_packet_sequence_id = SEQ
            p.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE
            e = p.gpu_render_stage_event
            event_id += 1
            e.event_id = event_id
            e.duration = 40_000
            e.hw_queue_iid = QUEUES[queue]
            e.stage_iid = STAGES[stage]
            e.gpu_id = 0
            e.context = 1
            e.submission_id = sid
            e.command_buffer_handle = cb
            if r is not None:
                e.render_pass_handle = 0x9A55
                e.render_pass_instance_id = r
            e.extra_data.add(name=LABELS_KEY, value=f"t{t}")
            e.extra_data.add(name=LABEL_STACK_KEY, value=" / ".join([*labels, f"t{t}"]))
            for name, value in extra.items():
                e.extra_data.add(name=name, value=value)
            trace.write(p)
            if t != last_tag:
                with_events += 1
                last_tag = t
            t_gpu += 50_000
            written += 1
        if sid % 1000 == 0:
            trace.flush()
    trace.close()
    log.close()
    return {"events": written, "workloads": workloads, "unmatched": workloads - with_events, "submits": sid,
            "gpu_bytes": (session / "gpu.perfetto-trace").stat().st_size,
            "log_bytes": (log_dir / "session.tessera-log").stat().st_size}


CHILD = """
import json, sys, time
from pathlib import Path
from tessera.hostd.merge import merge_session
t = time.perf_counter()
r = merge_session(Path(sys.argv[1]), progress=False)
elapsed = time.perf_counter() - t
print(json.dumps({"seconds": elapsed, "gpu_events": r.gpu_events, "with": r.events_with_metadata,
                  "without": r.events_without_metadata, "unmatched": r.metadata_without_events,
                  "submits": r.submits, "frames": r.frames, "problems": r.problems[:5],
                  "out_bytes": r.output.stat().st_size}))
"""


def measure(session: Path) -> tuple[dict, int, float]:
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(session)], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"merge failed ({proc.returncode})")
    return json.loads(out), usage.ru_maxrss * 1024, wall   # ru_maxrss is KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="render-stage events (default 1000000)")
    ap.add_argument("--keep", type=Path, default=None, help="generate into this folder and keep it")
    args = ap.parse_args()
    tmp = None
    if args.keep:
        session = args.keep
        if session.exists():
            shutil.rmtree(session)
        session.mkdir(parents=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="tessera-bench-merge-")
        session = Path(tmp.name)
    try:
        t = time.perf_counter()
        g = generate(session, args.events)
        print(f"merge: synthetic session of {g['events']:,} render-stage events, {g['workloads']:,} workloads, "
              f"{g['submits']:,} submits (gpu trace {g['gpu_bytes'] / 1e6:.1f} MB, session log "
              f"{g['log_bytes'] / 1e6:.1f} MB; generated in {time.perf_counter() - t:.1f} s, not counted)",
              flush=True)
        r, peak, wall = measure(session)
        assert r["gpu_events"] == g["events"] and r["with"] == g["events"] and r["without"] == 0, r
        assert r["unmatched"] == g["unmatched"] and r["submits"] == g["submits"] and not r["problems"], r
        print(f"  merge_session: {r['seconds']:6.2f} s ({wall:.2f} s with interpreter start)  "
              f"{'meets' if r['seconds'] < TARGET_S else 'above'} {TARGET_S:.0f} s; "
              f"{g['events'] / r['seconds']:,.0f} events/s")
        print(f"  peak RSS of the merging process (ru_maxrss): {peak / 2**20:6.0f} MiB  "
              f"{'meets' if peak < TARGET_BYTES else 'above'} 1 GiB; merged trace {r['out_bytes'] / 1e6:.1f} MB, "
              f"all events matched")
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()

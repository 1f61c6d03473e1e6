"""Sessions built by hand for the CI commands' unit tests (#29): the layer's frames and the driver's
GPU trace of one process, through hostd_builders (docs/formats.md), merged by the real merge.

A session is a list of workloads, each (labels, kind, {queue/stage: duration}, extra WORKLOAD
fields); one submit per frame; tags numbered from `first_tag`, so two sessions can describe the
same work under other tag numbers. Not production code: the layer and driver write these for real.
"""
from __future__ import annotations

from pathlib import Path

from hostd_builders import RAW0, GpuTrace, frame, hello, submit, workload

from tessera.hostd.merge import merge_session

PID = 4242
PHASES = {"render_pass": (("non-fragment", "binning"), ("fragment", "main")),
          "dispatch": (("non-fragment", "compute"),), "buffer_transfer": (("transfer", "copy buffer"),)}


def make_session(root: Path, frames: list[list[tuple]], first_tag: int = 1, pid: int = PID,
                 process: str = "app") -> Path:
    """`frames`: per frame, its workloads (labels, kind, durations per phase, fields): durations a
    tuple with one value per PHASES[kind] entry. Returns the merged trace."""
    root.mkdir(parents=True)
    log = hello(pid=pid, process=process)
    g = GpuTrace(root / "gpu.perfetto-trace", pid=pid)
    tag, ts, rp = first_tag, 6_000_000_000, 0
    for n, items in enumerate(frames):
        tags = []
        for labels, kind, durations, fields in items:
            log += workload(tag, kind, labels=list(labels), **fields)
            rp_id = None
            if kind == "render_pass":
                rp += 1
                rp_id = rp
            for (queue, stage), duration in zip(PHASES[kind], durations):
                g.event(ts, duration, queue, stage, labels=f"t{tag}", stack=[*labels, f"t{tag}"], rp=rp_id)
                ts += duration
            tags.append(tag)
            tag += 1
        log += submit(n + 1, RAW0 + 1000 * (n + 1), tags, frame=n) + frame(n, RAW0 + 1000 * (n + 1) + 500)
    g.close()
    folder = root / f"{process}-{pid}-1"
    folder.mkdir()
    (folder / "session.tessera-log").write_bytes(log)     # a spool-format stream: the merge reads both
    return merge_session(root).output

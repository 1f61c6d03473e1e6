"""Arm's layer_gpu_profile on a device, streamed into hostd: its counters per workload and per frame.

Role: `tessera hostd --arm-listen` hosts Arm's `GPUProfile` service beside `GPUTimeline`
(arm_ingest.py) and keeps its messages byte for byte in the connection's `session.arm-log`. This
module reads them back as Arm's host service reads them (lglpy `comms/service_gpu_profile.py`):
`start_frame` opens a frame, each workload message (`type`, `labels`, `counters`: one-entry
objects, name -> value, in the layer's order) adds a row, `end_frame` closes it; `frame` messages
are per-frame samples. The counters keep the layer's names on the wire and are mapped to Arm's
machine names (schemas/counters.py ARM_PROFILE_COUNTERS) for Tessera's views; `tessera counters`
then shows them and writes the same CSV files Arm's service writes. Arm's messages carry no GPU
timestamps, so they give no counter tracks on the timeline (docs/counters.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tessera.schemas import counters as C

from .arm_ingest import ARM_LOG_NAME, read_profile_log

# Arm's layer name -> machine name
MACHINE = {label: name for name, label in C.ARM_PROFILE_COUNTERS}


def _counters(message: dict[str, Any]) -> list[tuple[str, float]]:
    out = []
    for entry in message.get("counters") or []:
        if isinstance(entry, dict) and len(entry) == 1:
            (name, value), = entry.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append((str(name), value))
    return out


def read_profiles(session_dir: Path, problem: Callable[[str], None] | None = None):
    """SessionCounters of the GPUProfile messages in SESSION_DIR's Arm logs (hostd/counters.py), or
    None when there are none."""
    from .counters import Frame, SessionCounters, Workload

    report = problem or (lambda message: None)
    frames: dict[int, Frame] = {}
    workloads: list[Workload] = []
    order: list[str] = []              # the layer's counter names, in the first message's order
    for log in sorted(Path(session_dir).rglob(ARM_LOG_NAME)):
        frame_id: int | None = None
        for m in read_profile_log(log, lambda offset, text, log=log: report(f"{log}: {text}")):
            kind = m["type"]
            if kind == "start_frame":
                frame_id = m.get("frame") if isinstance(m.get("frame"), int) else None
            elif kind == "end_frame":
                frame_id = None
            elif kind == "frame":
                counters = _counters(m)
                order = order or [n for n, _ in counters]
                n = m.get("frame") if isinstance(m.get("frame"), int) else len(frames)
                f = frames.setdefault(n, Frame(n, []))
                f.counters = {MACHINE.get(k, k): v for k, v in counters}
            else:
                counters = _counters(m)
                order = order or [n for n, _ in counters]
                labels = [str(x) for x in m.get("labels") or []]
                w = Workload(len(workloads), None, None, None, frame_id, kind, labels,
                             counters={MACHINE.get(k, k): v for k, v in counters}, type=kind)
                workloads.append(w)
                frames.setdefault(frame_id if frame_id is not None else 0, Frame(frame_id or 0, [])).workloads.append(w)
    if not workloads and not frames:
        return None
    for f in frames.values():
        if not f.counters:      # no per-frame sample: the frame's workloads added up
            for w in f.workloads:
                for k, v in w.counters.items():
                    f.counters[k] = f.counters.get(k, 0) + v
    columns = [(MACHINE.get(label, label), label) for label in order]
    return SessionCounters(None, workloads, [frames[k] for k in sorted(frames)], source="arm", arm_columns=columns)

"""Arm's GPU Timeline layer data as merge inputs: `*.metadata` files and hostd's `session.arm-log`s.

Role: reads both into the merge's MetadataIndex (metadata.py), through
arm_metadata's translation, so the join, names, args, submit tracks and
summary are the ones our own layer gets (docs/arm.md "Merge").

Which process: a `session.arm-log` names its pid (DeviceMetadata.process_id);
a `.metadata` file named `<process>-<pid>.metadata` (as `tessera export`
writes) names it too. A `.metadata` whose pid is already described by our own
session logs is skipped (the logs hold more; an export left in the session
folder must not count twice). A `.metadata` with no pid in its name (Arm's
own host writes one file per run) is held in `MetadataIndex.unowned` and
given to the first process of the GPU trace that has no metadata of its own
(`adopt`): Arm keys metadata by `t<tagID>` alone.

Clock: Arm's times are CLOCK_MONOTONIC_RAW; the merged trace is BOOTTIME.
The offset is read from the first clock snapshot of the session's GPU traces
that has both clocks (`trace_clock`); without one, times are used as they are
(and the submit tracks may sit off the GPU slices by the difference).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tessera.schemas.perfetto import CLOCK_BOOTTIME, CLOCK_MONOTONIC_RAW, TracePacket, iter_raw

from .arm_ingest import ARM_LOG_NAME, read_arm_log
from .arm_metadata import METADATA_SUFFIX, ArmNester, add_arm_frames, pid_of, read_metadata
from .metadata import MetadataIndex, ProcessMeta

MAX_PROBLEMS = 20
_CLOCK_PACKETS = 64      # packets of each GPU trace looked at for a clock snapshot


def is_arm_input(path: Path) -> bool:
    return path.name == ARM_LOG_NAME or path.name.endswith(METADATA_SUFFIX)


def trace_clock(gpu_traces: Iterable[Path]) -> int | None:
    """BOOTTIME - MONOTONIC_RAW from the first clock snapshot holding both, or None."""
    for path in gpu_traces:
        try:
            for n, (buf, _, body, end, _) in enumerate(iter_raw(path)):
                if n >= _CLOCK_PACKETS:
                    break
                p = TracePacket()
                try:
                    p.ParseFromString(buf[body:end])
                except Exception:  # noqa: BLE001 - damage: the merge reports it
                    continue
                if p.HasField("clock_snapshot"):
                    clocks = {c.clock_id: c.timestamp for c in p.clock_snapshot.clocks}
                    if CLOCK_BOOTTIME in clocks and CLOCK_MONOTONIC_RAW in clocks:
                        return clocks[CLOCK_BOOTTIME] - clocks[CLOCK_MONOTONIC_RAW]
        except OSError:
            continue
    return None


def load_arm_file(index: MetadataIndex, path: Path, clock: int | None) -> None:
    index.files.append(path)
    listed = 0

    def problem(offset: int, message: str) -> None:
        nonlocal listed
        listed += 1
        if listed <= MAX_PROBLEMS:
            index.problems.append(f"{path}: at byte {offset}: {message}")

    def note(message: str) -> None:
        problem(-1, message)

    try:
        if path.name == ARM_LOG_NAME:
            nester = ArmNester()
            frames = []
            for record in read_arm_log(path, problem):
                index.frames_read += 1
                try:
                    frames.extend(nester.feed(record))
                except ValueError as e:
                    problem(-1, f"{e}; record skipped")
            frames.extend(nester.finish())
            if nester.orphans:
                note(f"{nester.orphans} workload record(s) before any Submit (or continuations of no "
                     f"render pass); skipped")
            pid = nester.pid
            if pid is None:
                note("no DeviceMetadata names the process; its workloads join GPU events of any process")
                proc = ProcessMeta(-1, "Arm GPU Timeline layer")
                index.unowned.append(proc)
            else:
                proc = index.process(pid)
                names = [d["name"] for d in nester.devices.values() if d.get("name")]
                if not proc.process:
                    proc.process = f"Arm GPU Timeline layer ({names[0]})" if names else "Arm GPU Timeline layer"
            add_arm_frames(proc, frames, clock, note)
        else:
            pid = pid_of(path)
            if pid is not None and pid in index.processes and index.processes[pid].hello is not None:
                note(f"pid {pid} is described by the session's own logs; this Arm metadata is not used")
                return
            frames = list(read_metadata(path, problem))
            index.frames_read += len(frames)
            if pid is None:
                proc = ProcessMeta(-1, f"Arm metadata {path.name}")
                index.unowned.append(proc)
            else:
                proc = index.process(pid)
                proc.process = proc.process or path.name[:-len(METADATA_SUFFIX)].rsplit("-", 1)[0]
            add_arm_frames(proc, frames, clock, note)
    except OSError as e:
        index.problems.append(f"{path}: cannot read ({e})")
    if listed > MAX_PROBLEMS:
        index.problems.append(f"{path}: {listed - MAX_PROBLEMS} more problem(s) not listed")


def adopt(index: MetadataIndex, pid: int | None) -> ProcessMeta | None:
    """The first unowned Arm metadata, now the metadata of process `pid` (kept unowned when the
    event has no pid: it joins, but draws no process track)."""
    if not index.unowned:
        return None
    if pid is None:
        return index.unowned[0]
    proc = index.unowned.pop(0)
    proc.pid = pid
    index.processes[pid] = proc
    return proc

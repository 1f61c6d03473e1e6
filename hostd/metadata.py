"""The metadata index: every session log and spool file of a session, read into memory.

Role: the merge's in-memory side (the GPU trace is streamed, the layer's
metadata is indexed). Keyed by process id, because tagIDs and submitIDs
come from per-process counters and several processes share one session.

Reading is forgiving: a frame the daemon rejected in strict mode (listed in
`session.rejected.jsonl`) is skipped, invalid JSON is counted and skipped,
a file that ends inside a frame or has an undecodable length keeps every
frame before the problem. Each problem becomes one line in `problems`.
A log's frames before its first HELLO belong to no process and are
skipped, except in a spool named `layer-<pid>.spool`, whose pid is known.

Times of SUBMIT and FRAME (CLOCK_MONOTONIC_RAW) are converted to BOOTTIME
with the clock_sync reading of the HELLO that precedes them.

Memory: WORKLOADs are by far the most numerous messages (one per recorded
workload: millions in a long session), so they are kept as their JSON bytes
(checked at load to be a JSON object) and decoded again when `workload()`
asks for one. Bytes are one object, not traced by the garbage collector; the
decoded dict of a render pass is ~10x larger and a dozen tracked objects.
Payloads are decoded by `loads`: json.loads's result and errors, ~25% faster for
JSON without surrounding whitespace (one scan_once call, no whitespace passes).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tessera.schemas.frames import DEFAULT_MAX_JSON, FrameDecoder, FrameError, MessageType

from .storage import rejected_offsets

_SPOOL_PID = re.compile(r"layer-(\d+)\.spool$")
_SCAN = json.JSONDecoder().scan_once      # what json.loads runs after skipping leading whitespace


def loads(text: str) -> Any:
    """json.loads(text), faster for a JSON value with no whitespace around it (what the layer
    writes): one scan, no whitespace passes. Anything else goes to json.loads itself, so the
    value, and the error of invalid JSON, are json.loads's."""
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _payload(frame) -> Any:
    """frame.payload() (FrameError for invalid UTF-8 or JSON), with the fast `loads`."""
    try:
        return loads(frame.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return frame.payload()      # raises its FrameError


@dataclass
class ProcessMeta:
    pid: int
    process: str = ""
    hello: dict[str, Any] | None = None
    workloads: dict[int, bytes] = field(default_factory=dict)                          # tagID -> WORKLOAD JSON
    annexes: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)       # (submitID, tagID) -> ANNEX
    submits: dict[int, dict[str, Any]] = field(default_factory=dict)                   # submitID -> SUBMIT (+ boot_ns)
    frames: dict[int, dict[str, Any]] = field(default_factory=dict)                    # frame -> FRAME (+ boot_ns)
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)

    def workload(self, tag: int, submit: int | None) -> dict[str, Any] | None:
        """The workload's metadata: WORKLOAD with the ANNEX of submit.tag merged over it (a new dict)."""
        raw = self.workloads.get(tag)
        base = loads(raw.decode("utf-8")) if raw is not None else None
        annex = self.annexes.get((submit, tag)) if submit is not None else None
        if annex is None:
            return base
        merged = base or {}
        merged.update(annex)
        return merged


@dataclass
class MetadataIndex:
    processes: dict[int, ProcessMeta] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    frames_read: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)

    def process(self, pid: int) -> ProcessMeta:
        p = self.processes.get(pid)
        if p is None:
            p = self.processes[pid] = ProcessMeta(pid)
        return p

    def workload_count(self) -> int:
        return sum(len(p.workloads) for p in self.processes.values())


def _boot(payload: dict[str, Any], offset: int | None) -> None:
    t = payload.get("time_ns")
    if isinstance(t, int) and not isinstance(t, bool):
        payload["boot_ns"] = t + offset if offset is not None else t


def load_file(index: MetadataIndex, path: Path, max_json: int = DEFAULT_MAX_JSON, chunk: int = 1 << 20) -> None:
    """Add the frames of one session log or spool file to `index`."""
    index.files.append(path)
    rejected = rejected_offsets(path)
    m = _SPOOL_PID.search(path.name)
    proc = index.process(int(m.group(1))) if m else None
    clock: int | None = None
    orphans = 0
    decoder = FrameDecoder(max_json)

    def handle(frame) -> None:
        nonlocal proc, clock, orphans
        index.frames_read += 1
        if frame.offset in rejected or frame.type not in MessageType._value2member_map_:
            index.skipped += 1
            return
        try:
            payload = _payload(frame)
        except FrameError as e:
            index.skipped += 1
            index.problems.append(f"{path}: {e}; frame skipped")
            return
        if not isinstance(payload, dict):
            index.skipped += 1
            index.problems.append(f"{path}: at byte {frame.offset}: payload is not a JSON object; frame skipped")
            return
        t = frame.type
        if t == MessageType.HELLO:
            pid = payload.get("pid")
            if not isinstance(pid, int):
                index.problems.append(f"{path}: at byte {frame.offset}: HELLO without a pid")
                return
            proc = index.process(pid)
            proc.hello = proc.hello or payload
            proc.process = str(payload.get("process", proc.process))
            sync = payload.get("clock_sync") or {}
            raw, boot = sync.get("monotonic_raw_ns"), sync.get("boottime_ns")
            clock = boot - raw if isinstance(raw, int) and isinstance(boot, int) else None
            return
        if proc is None:
            orphans += 1
            index.skipped += 1
            return
        if t == MessageType.WORKLOAD:
            proc.workloads[frame.tag] = frame.body     # its JSON, decoded again on use (see above)
        elif t == MessageType.ANNEX:
            # Several annexes may describe one submitID.tagID (labels at submit, indirect sizes
            # after completion): their fields add up. A frame seen twice (resent after a lost
            # acknowledgement) changes nothing.
            proc.annexes.setdefault((frame.sequence, frame.tag), {}).update(payload)
        elif t == MessageType.SUBMIT:
            _boot(payload, clock)
            proc.submits[frame.sequence] = payload
        elif t == MessageType.FRAME:
            _boot(payload, clock)
            n = payload.get("frame")
            proc.frames[n if isinstance(n, int) else -len(proc.frames) - 1] = payload
        elif t == MessageType.DEVICE:
            proc.devices[str(payload.get("device"))] = payload

    try:
        with open(path, "rb") as f:
            while data := f.read(chunk):
                try:
                    frames = decoder.feed(data)
                except FrameError as e:
                    for frame in e.frames:
                        handle(frame)
                    raise
                for frame in frames:
                    handle(frame)
        decoder.finish()
    except FrameError as e:
        index.problems.append(f"{path}: {e}; the frames before it are used")
    except OSError as e:
        index.problems.append(f"{path}: cannot read ({e})")
    if orphans:
        index.problems.append(f"{path}: {orphans} frame(s) before any HELLO belong to no process; skipped")


def load(paths) -> MetadataIndex:
    index = MetadataIndex()
    for path in paths:
        load_file(index, Path(path))
    return index

"""The metadata index: every session log and spool file of a session, read into memory.

Role: the merge's in-memory side (the GPU trace is streamed, the layer's
metadata is indexed). Keyed by process id, because tagIDs and submitIDs
come from per-process counters and several processes share one session.

Reading is forgiving: one frame never costs more than itself. A frame the
daemon rejected in strict mode (listed in `session.rejected.jsonl`) is
skipped; so is one the merge cannot use: invalid UTF-8 or JSON, nested too
deeply, a lone surrogate, not an object, against its schema (fields the
schema does not declare allowed: fastcheck.usable, then jsonschema), or a
time outside the trace once converted. A damaged log loses only its damaged
records (schemas/logfile.py); a version-1 log or spool that ends inside a
frame or has an undecodable length keeps every frame before the problem.
Each problem becomes one line in `problems` (MAX_FILE_PROBLEMS per file, the
rest counted). Frames before a log's first HELLO (a damaged HELLO) belong to
the process named by the spool's name (`layer-<pid>.spool`), else by the
session.json hostd wrote beside the log (its HELLO, clock included), else by
the folder's name (`<process>-<pid>-<n>`); otherwise they are skipped.

Times of SUBMIT and FRAME (CLOCK_MONOTONIC_RAW) are converted to BOOTTIME
with the clock_sync reading of the HELLO that precedes them.

Memory: WORKLOADs are by far the most numerous messages (one per recorded
workload: millions in a long session), so they are kept as their JSON bytes
(checked at load to be a JSON object) and decoded again when `workload()`
asks for one. Bytes are one object, not traced by the garbage collector; the
decoded dict of a render pass is ~10x larger and a dozen tracked objects.
A WORKLOADS batch (protocol 3, schemas/workloads.py) is expanded at load into
the WORKLOADs it stands for, each checked on its own and kept the same way, so
a bad entry loses only itself. A RECORDED_AGAIN pair (protocol 5) gives its tag
the very bytes its earlier tag has (one object for both); pairs whose earlier
tag comes from a file read later are resolved by `MetadataIndex.finish`.
INSTRUMENTATION (per submitID.tagID, like ANNEX) and SHADER (per device,
pipeline, stage) payloads are kept the same way, as their distinct JSON
bytes with their load order; shaders.py decodes them.
Payloads are decoded by `loads`: json.loads's result and errors, ~25% faster for
JSON without surrounding whitespace (one scan_once call, no whitespace passes).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tessera.schemas import messages
from tessera.schemas import workloads as batch
from tessera.schemas.frames import (DEFAULT_MAX_JSON, LONE_SURROGATE, FrameError, MessageType, json_body,
                                    lone_surrogate)
from tessera.schemas.logfile import read_frames

from . import fastcheck
from .storage import RECORD_NAME, rejected_offsets

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
    """frame.payload() (FrameError for invalid UTF-8 or JSON, nesting too deep, a lone
    surrogate), with the fast `loads`."""
    try:
        value = loads(frame.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return frame.payload()      # raises its FrameError
    if lone_surrogate(frame.body, value):
        raise FrameError(frame.offset, LONE_SURROGATE, fatal=False)
    return value


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
    # Shader instrumentation (protocol 2), kept as JSON bytes like WORKLOADs and decoded on use
    # (shaders.py). Each entry is (load order, JSON); distinct payloads only, so a copy resent
    # after a lost acknowledgement counts once. (submitID, tagID) -> INSTRUMENTATION payloads:
    # two when a workload's actions were read from two command buffers of one submit.
    instrumentation: dict[tuple[int, int], list[tuple[int, bytes]]] = field(default_factory=dict)
    instrumented: dict[int, list[int]] = field(default_factory=dict)                   # tagID -> submitIDs
    # (device, pipeline, stage) -> SHADER payloads, one per pipeline created at that address
    shaders: dict[tuple[str, str, str], list[tuple[int, bytes]]] = field(default_factory=dict)
    # Per-region counters (--regions): (submitID, tagID) -> REGIONS JSON, decoded on use (region_args.py)
    regions: dict[tuple[int, int], bytes] = field(default_factory=dict)
    loaded: int = 0                                                                    # frames loaded (order)
    repeats: batch.Repeats = field(init=False, repr=False, compare=False)              # RECORDED_AGAIN pairs
    _first_submits: tuple[int, dict[int, int]] = field(default_factory=lambda: (-1, {}), repr=False)  # first_submit

    def __post_init__(self) -> None:
        self.repeats = batch.Repeats(self.workloads)

    def first_submit(self, tag: int) -> int | None:
        """The lowest submitID whose SUBMIT lists `tag`: the submit of a workload whose GPU events carry no
        s<submitID> label (a command buffer's first submit is not wrapped in one)."""
        if self._first_submits[0] != len(self.submits):   # (re)built once the submits are loaded
            firsts: dict[int, int] = {}
            for sid in sorted(self.submits):
                tags = self.submits[sid].get("tags")
                for t in tags if isinstance(tags, list) else ():
                    if isinstance(t, int):
                        firsts.setdefault(t, sid)
            self._first_submits = (len(self.submits), firsts)
        return self._first_submits[1].get(tag)

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
    # Arm GPU Timeline metadata that names no process (a .metadata from Arm's host): given to the
    # first GPU process without metadata of its own (arm_inputs.adopt)
    unowned: list[ProcessMeta] = field(default_factory=list)

    def process(self, pid: int) -> ProcessMeta:
        p = self.processes.get(pid)
        if p is None:
            p = self.processes[pid] = ProcessMeta(pid)
        return p

    def workload_count(self) -> int:
        return sum(len(p.workloads) for p in self.processes.values())

    def finish(self) -> None:
        """Once every file is loaded: resolve the RECORDED_AGAIN pairs whose earlier tag a later file
        described; a workload recorded again as a tag no file describes stays undescribed (one problem line
        per process)."""
        for proc in self.processes.values():
            left = proc.repeats.finish()
            if left:
                tag, earlier = left[0]
                self.problems.append(f"{proc.process or '?'}[{proc.pid}]: {len(left)} workload(s) recorded again "
                                     f"as workloads never described (t{tag} as t{earlier}"
                                     f"{', …' if len(left) > 1 else ''}); left undescribed")


_MAX_NS = (1 << 63) - 1         # timestamps the merged trace can hold (int64 ns, as the schemas bound them)
_MAX_PID = (1 << 31) - 1        # Perfetto's pid is an int32
_FOLDER = re.compile(r"^(.*)-(\d+)-\d+(?:\.\d+)?$")     # <process>-<pid>-<n>[.k] (hostd/storage.py)
MAX_FILE_PROBLEMS = 20          # problem lines per file; the rest are counted in one line


def _boot(payload: dict[str, Any], offset: int | None) -> bool:
    """Add `boot_ns` (BOOTTIME) to a SUBMIT or FRAME; False when it falls outside the trace's range."""
    t = payload.get("time_ns")
    if isinstance(t, int) and not isinstance(t, bool):
        boot = t + offset if offset is not None else t
        if not 0 <= boot <= _MAX_NS:
            return False
        payload["boot_ns"] = boot
    return True


def _clock(hello: dict[str, Any]) -> int | None:
    """BOOTTIME - MONOTONIC_RAW from a HELLO's clock_sync reading."""
    sync = hello.get("clock_sync")
    if not isinstance(sync, dict):
        return None
    raw, boot = sync.get("monotonic_raw_ns"), sync.get("boottime_ns")
    return boot - raw if isinstance(raw, int) and isinstance(boot, int) else None


def _unusable(frame_type: int, payload: Any) -> str | None:
    """Why the merge cannot use a payload (its schema, fields it does not know allowed), or None."""
    if fastcheck.usable(frame_type, payload):
        return None
    errors = messages.problems(frame_type, payload, unknown_ok=True, limit=3)
    return "; ".join(errors) if errors else None


def owner_of(path: Path) -> tuple[int, str, dict[str, Any] | None] | None:
    """Who wrote a log whose HELLO is lost: (pid, process, HELLO or None) from, in order, a spool's
    name (layer-<pid>.spool), the session.json hostd wrote beside it (its HELLO, clock included)
    and the folder's name (<process>-<pid>-<n>)."""
    m = _SPOOL_PID.search(path.name)
    if m and int(m.group(1)) <= _MAX_PID:
        return int(m.group(1)), "", None
    record = path.with_name(RECORD_NAME)
    try:
        hello = json.loads(record.read_text(encoding="utf-8")).get("hello")
    except (OSError, ValueError, RecursionError, AttributeError):
        hello = None
    if isinstance(hello, dict) and not lone_surrogate(json.dumps(hello).encode(), hello) \
            and _unusable(MessageType.HELLO, hello) is None:
        return hello["pid"], hello["process"], hello
    m = _FOLDER.match(path.parent.name)
    if m and int(m.group(2)) <= _MAX_PID:
        return int(m.group(2)), m.group(1), None
    return None


def load_file(index: MetadataIndex, path: Path, max_json: int = DEFAULT_MAX_JSON, chunk: int = 1 << 20) -> None:
    """Add the frames of one session log or spool file to `index`. A frame the merge cannot use
    (undecodable, not an object, against its schema, a time outside the trace) is skipped and
    listed; every other frame is used."""
    index.files.append(path)
    rejected = rejected_offsets(path)
    proc: ProcessMeta | None = None
    clock: int | None = None
    orphans = 0
    listed = 0
    fallback_tried = False
    m = _SPOOL_PID.search(path.name)
    if m and int(m.group(1)) <= _MAX_PID:
        proc = index.process(int(m.group(1)))

    def problem(offset: int, message: str) -> None:
        nonlocal listed
        listed += 1
        if listed <= MAX_FILE_PROBLEMS:
            where = "at the end" if offset < 0 else f"at byte {offset}"
            index.problems.append(f"{path}: {where}: {message}")

    def skip(frame, why: str) -> None:
        index.skipped += 1
        problem(frame.offset, f"{MessageType(frame.type).name}: {why}; frame skipped")

    def handle(frame) -> None:
        nonlocal proc, clock, orphans, fallback_tried
        index.frames_read += 1
        if frame.offset in rejected or frame.type not in MessageType._value2member_map_:
            index.skipped += 1
            return
        try:
            payload = _payload(frame)
        except FrameError as e:
            skip(frame, e.message.split(": ", 1)[-1])
            return
        if not isinstance(payload, dict):
            skip(frame, "payload is not a JSON object")
            return
        t = frame.type
        why = _unusable(t, payload)
        if why is not None:
            skip(frame, f"unusable ({why})")
            return
        if t == MessageType.HELLO:
            proc = index.process(payload["pid"])
            proc.hello = proc.hello or payload
            proc.process = payload["process"]
            clock = _clock(payload)
            return
        if proc is None and not fallback_tried:
            fallback_tried = True       # the HELLO is lost (damaged): who wrote the log is known elsewhere
            owner = owner_of(path)
            if owner is not None:
                pid, name, hello = owner
                proc = index.process(pid)
                proc.process = proc.process or name
                if hello is not None:
                    proc.hello = proc.hello or hello
                    clock = _clock(hello)
                problem(frame.offset, f"frames before any HELLO: attributed to {name or '?'}[{pid}] "
                                      f"({'session.json' if hello else 'the file or folder name'})")
        if proc is None:
            orphans += 1
            index.skipped += 1
            return
        if t == MessageType.WORKLOAD:
            proc.workloads[frame.tag] = frame.body     # its JSON, decoded again on use (see above)
        elif t == MessageType.WORKLOADS:
            for tag, workload in batch.expand(payload):   # each entry kept as the WORKLOAD it stands for
                why = _unusable(MessageType.WORKLOAD, workload)
                if why is None:
                    proc.workloads[tag] = json_body(workload)
                else:
                    index.skipped += 1
                    problem(frame.offset, f"WORKLOADS: the entry of t{tag}: unusable ({why}); entry skipped")
        elif t == MessageType.RECORDED_AGAIN:
            proc.repeats.add(batch.again(payload))
        elif t == MessageType.ANNEX:
            # Several annexes may describe one submitID.tagID (labels at submit, indirect sizes
            # after completion): their fields add up. A frame seen twice (resent after a lost
            # acknowledgement) changes nothing.
            proc.annexes.setdefault((frame.sequence, frame.tag), {}).update(payload)
        elif t == MessageType.SUBMIT:
            if not _boot(payload, clock):
                skip(frame, "its time, converted to BOOTTIME, falls outside the trace")
                return
            proc.submits[frame.sequence] = payload
        elif t == MessageType.FRAME:
            if not _boot(payload, clock):
                skip(frame, "its time, converted to BOOTTIME, falls outside the trace")
                return
            proc.frames[payload["frame"]] = payload
        elif t == MessageType.DEVICE:
            proc.devices[payload["device"]] = payload
        elif t == MessageType.INSTRUMENTATION:
            key = (frame.sequence, frame.tag)
            got = proc.instrumentation.get(key)
            if got is None:
                proc.instrumentation[key] = [(proc.loaded, frame.body)]
                proc.instrumented.setdefault(frame.tag, []).append(frame.sequence)
            elif all(body != frame.body for _, body in got):
                got.append((proc.loaded, frame.body))
        elif t == MessageType.REGIONS:
            proc.regions[(frame.sequence, frame.tag)] = frame.body
        elif t == MessageType.SHADER:
            versions = proc.shaders.setdefault((payload["device"], payload["pipeline"], payload["stage"]), [])
            if all(body != frame.body for _, body in versions):
                versions.append((proc.loaded, frame.body))
        proc.loaded += 1

    before = index.frames_read
    try:
        for frame in read_frames(path, max_json, chunk, problem):
            handle(frame)
        if index.frames_read == before and not listed:     # an empty log says nothing: say so
            size = path.stat().st_size
            index.problems.append(f"{path}: " + ("empty (0 bytes)" if not size else f"no frame in its {size} bytes")
                                  + "; nothing in it to merge")
    except OSError as e:
        index.problems.append(f"{path}: cannot read ({e})")
    if listed > MAX_FILE_PROBLEMS:
        index.problems.append(f"{path}: {listed - MAX_FILE_PROBLEMS} more problem(s) not listed")
    if orphans:
        index.problems.append(f"{path}: {orphans} frame(s) before any HELLO belong to no process; skipped")


def load(paths) -> MetadataIndex:
    index = MetadataIndex()
    for path in paths:
        load_file(index, Path(path))
    index.finish()
    return index

"""Arm's GPU Timeline `.metadata` files and the translation between Arm's workloads and Tessera's.

Role: everything that knows Arm's host-side JSON (what lglpy's
service_gpu_timeline writes and raw_trace reads), with no I/O beyond files:

  - the file framing: per frame a little-endian u32 length, then UTF-8 JSON
    `{"device", "frame", "presentTimestamp", "submits": [{"device", "queue",
    "timestamp", "workloads": [...]}]}` (`write_metadata`, `read_metadata`);
  - `ArmNester`: Arm's TimelineRecord stream (arm_timeline.py) folded into
    those frames exactly as Arm's service does (a Frame record flushes the
    frame in progress with its present time; ContinueRenderpass adds its draws
    to the BeginRenderpass of its tag in the same submit);
  - Tessera -> Arm (`arm_workload`, `arm_frames`: `tessera export --format arm`)
    and Arm -> Tessera (`tessera_workload`, `add_arm_frames`: the merge reads
    Arm's layer through the same MetadataIndex as our own).

Arm's workload keys (type: keys): renderpass: tid, label, width, height,
drawCallCount, subpassCount, attachments [{binding U|C<n>|D|S, load, store,
resolve}]; dispatch: xGroups, yGroups, zGroups (-1: unknown); tracerays:
xItems, yItems, zItems; imagetransfer: subtype, pixelCount; buffertransfer:
subtype, byteCount; asbuild: subtype, primitiveCount; astransfer: subtype,
byteCount. What Arm's format cannot carry is left out: docs/arm.md.

Times in Arm's JSON are CLOCK_MONOTONIC_RAW ns, as in Tessera's SUBMIT/FRAME.
Pure data in and out; no state outside one call (ArmNester: one stream).
"""
from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tessera.schemas.files import AtomicOutput
from tessera.schemas.labels import is_layer_label

LENGTH = struct.Struct("<I")
METADATA_SUFFIX = ".metadata"
_PID_NAME = re.compile(r"-(\d+)\.metadata$")
_QUEUE = re.compile(r"^queue (\d+)\.(\d+)$")
_MAX_PID = (1 << 31) - 1

# Tessera transfer subtypes -> Arm's subtype strings (service_gpu_timeline's names where Arm has the
# kind; Arm's form, capitalised, where it does not).
_SUBTYPES = {"clear image": "Clear image", "copy image": "Copy image", "copy buffer to image": "Copy buffer to image",
             "copy image to buffer": "Copy image to buffer", "blit image": "Blit image",
             "resolve image": "Resolve image", "fill buffer": "Fill buffer", "copy buffer": "Copy buffer",
             "update buffer": "Update buffer"}
_IMAGE_TYPES = {1: "Clear image", 2: "Copy image", 3: "Copy buffer to image", 4: "Copy image to buffer"}
_BUFFER_TYPES = {1: "Fill buffer", 2: "Copy buffer"}
_AS_BUILD = {1: "'fast build' build", 2: "'fast trace' build"}
_AS_TRANSFER = {1: "copy", 2: "copy to memory", 3: "copy from memory"}
_BINDINGS = {0: "U", 2: "D", 3: "S"}


# -- the file --------------------------------------------------------------------------------
def encode_frame(frame: dict[str, Any]) -> bytes:
    data = json.dumps(frame, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return LENGTH.pack(len(data)) + data


def write_metadata(path: Path, frames) -> int:
    """Write frames to `path` (replaced atomically); returns how many."""
    n = 0
    with AtomicOutput(path) as f:      # an exclusive 0600 temporary, renamed (schemas/files.py)
        for frame in frames:
            f.write(encode_frame(frame))
            n += 1
    return n


def read_metadata(path: Path, problem: Callable[[int, str], None] | None = None) -> Iterator[dict[str, Any]]:
    """The frames of a `.metadata` file. A frame that is not a JSON object is reported and
    skipped; a length running past the end of the file ends reading (a file cut by a crash),
    as Arm's reader does."""
    data = Path(path).read_bytes()
    pos = 0
    while pos < len(data):
        if pos + LENGTH.size > len(data):
            if problem:
                problem(pos, "file ends inside a frame length; the rest is ignored")
            return
        (size,) = LENGTH.unpack_from(data, pos)
        if pos + LENGTH.size + size > len(data):
            if problem:
                problem(pos, f"frame of {size} bytes runs past the end of the file; the rest is ignored")
            return
        body = data[pos + LENGTH.size:pos + LENGTH.size + size]
        try:
            frame = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            frame = e
        if isinstance(frame, dict) and isinstance(frame.get("submits", []), list):
            yield frame
        elif problem:
            problem(pos, f"frame is not a JSON object with a submits list ({frame if isinstance(frame, Exception) else type(frame).__name__}); skipped")
        pos += LENGTH.size + size


def pid_of(path: Path) -> int | None:
    """The pid a `.metadata` file's name carries (`<process>-<pid>.metadata`, as export names them)."""
    m = _PID_NAME.search(Path(path).name)
    return int(m.group(1)) if m and int(m.group(1)) <= _MAX_PID else None


# -- Arm's record stream -> frames -----------------------------------------------------------
class ArmNester:
    """Fold TimelineRecords into Arm's frames. `feed(record)` returns the frames it completes."""

    def __init__(self) -> None:
        self.frame: dict[str, Any] = {"device": 0, "frame": 0, "presentTimestamp": 0, "submits": []}
        self.devices: dict[int, dict[str, Any]] = {}     # VkDevice -> DeviceMetadata as a dict
        self.version: int | None = None                  # Header.version_no
        self.pid: int | None = None
        self.orphans = 0                                 # workloads before any Submit (skipped)

    def feed(self, record) -> list[dict[str, Any]]:
        which = [f.name for f, _ in record.ListFields()]
        if not which:           # an empty record: nothing to place
            return []
        if len(which) > 1:
            raise ValueError(f"record sets {len(which)} members ({', '.join(which)}); exactly one expected")
        kind = which[0]
        if kind == "header":
            self.version = record.header.version_no
            return []
        if kind == "metadata":
            m = record.metadata
            self.devices[m.id] = {"device": m.id, "pid": m.process_id, "name": m.name,
                                  "driver": f"r{m.major_version}p{m.minor_version} ({m.patch_version})"}
            self.pid = self.pid if self.pid is not None else m.process_id
            return []
        if kind == "frame":
            f = record.frame
            self.frame["presentTimestamp"] = f.timestamp
            done = self.frame
            self.frame = {"device": f.device, "frame": f.id, "presentTimestamp": 0, "submits": []}
            return [done]
        if kind == "submit":
            s = record.submit
            self.frame["submits"].append({"device": s.device, "queue": s.queue, "timestamp": s.timestamp,
                                          "workloads": []})
            return []
        if not self.frame["submits"]:
            self.orphans += 1
            return []
        workloads = self.frame["submits"][-1]["workloads"]
        msg = getattr(record, kind)
        labels = [str(x) for x in msg.debug_label]
        if kind == "continue_renderpass":
            for w in reversed(workloads):
                if w.get("type") == "renderpass" and w.get("tid") == msg.tag_id:
                    if w["drawCallCount"] >= 0:
                        w["drawCallCount"] += msg.draw_call_count
                    break
            else:
                self.orphans += 1
            return []
        w: dict[str, Any]
        if kind == "renderpass":
            w = {"type": "renderpass", "tid": msg.tag_id, "width": msg.width, "height": msg.height,
                 "drawCallCount": msg.draw_call_count, "subpassCount": msg.subpass_count, "label": labels,
                 "attachments": [{"binding": f"C{a.index}" if a.type == 1 else _BINDINGS.get(a.type, "U"),
                                  "load": not a.not_loaded, "store": not a.not_stored, "resolve": bool(a.resolved)}
                                 for a in msg.attachments]}
        elif kind == "dispatch":
            w = {"type": "dispatch", "tid": msg.tag_id, "xGroups": msg.x_groups, "yGroups": msg.y_groups,
                 "zGroups": msg.z_groups, "label": labels}
        elif kind == "trace_rays":
            w = {"type": "tracerays", "tid": msg.tag_id, "xItems": msg.x_items, "yItems": msg.y_items,
                 "zItems": msg.z_items, "label": labels}
        elif kind == "image_transfer":
            w = {"type": "imagetransfer", "tid": msg.tag_id, "subtype": _IMAGE_TYPES.get(msg.transfer_type, "Unknown"),
                 "pixelCount": msg.pixel_count, "label": labels}
        elif kind == "buffer_transfer":
            w = {"type": "buffertransfer", "tid": msg.tag_id,
                 "subtype": _BUFFER_TYPES.get(msg.transfer_type, "Unknown"), "byteCount": msg.byte_count,
                 "label": labels}
        elif kind == "acceleration_structure_build":
            w = {"type": "asbuild", "tid": msg.tag_id, "subtype": _AS_BUILD.get(msg.build_type, "Unknown"),
                 "primitiveCount": msg.primitive_count, "label": labels}
        elif kind == "acceleration_structure_transfer":
            w = {"type": "astransfer", "tid": msg.tag_id, "subtype": _AS_TRANSFER.get(msg.transfer_type, "Unknown"),
                 "byteCount": msg.byte_count, "label": labels}
        else:   # dispatch_data_graph
            w = {"type": "datagraph", "tid": msg.tag_id, "label": labels}
        workloads.append(w)
        return []

    def finish(self) -> list[dict[str, Any]]:
        """The frame in progress at the end of the stream, when it holds any submit."""
        return [self.frame] if self.frame["submits"] else []


# -- Arm -> Tessera (merge) ------------------------------------------------------------------
def tessera_workload(w: dict[str, Any]) -> dict[str, Any]:
    """A Tessera-style workload (naming.py's vocabulary) from one of Arm's."""
    t = w.get("type")
    labels = w.get("label")
    out: dict[str, Any] = {}
    if t == "renderpass":
        out = {"kind": "render_pass", "width": w.get("width"), "height": w.get("height"),
               "draw_call_count": w.get("drawCallCount"), "subpass_count": w.get("subpassCount"),
               "attachments": w.get("attachments", [])}
    elif t == "dispatch":
        groups = [w.get("xGroups"), w.get("yGroups"), w.get("zGroups")]
        out = {"kind": "dispatch", "groups": groups}
        if any(isinstance(g, int) and g < 0 for g in groups):
            out["indirect"] = True
    elif t == "tracerays":
        out = {"kind": "trace_rays", "width": w.get("xItems"), "height": w.get("yItems"), "depth": w.get("zItems")}
    elif t == "imagetransfer":
        out = {"kind": "image_transfer", "subtype": str(w.get("subtype", "")).lower(), "pixels": w.get("pixelCount")}
    elif t == "buffertransfer":
        out = {"kind": "buffer_transfer", "subtype": str(w.get("subtype", "")).lower(), "bytes": w.get("byteCount")}
    elif t == "asbuild":
        out = {"kind": "acceleration_structure_build", "subtype": w.get("subtype"),
               "primitives": w.get("primitiveCount")}
    elif t == "astransfer":
        out = {"kind": "acceleration_structure_copy", "subtype": w.get("subtype"), "bytes": w.get("byteCount")}
    else:
        out = {"kind": str(t)}
        out.update({k: v for k, v in w.items() if k not in ("type", "tid", "label")})
    out = {k: v for k, v in out.items() if v is not None}
    if isinstance(labels, list) and labels:
        out["labels"] = [str(x) for x in labels]
    out["source"] = "Arm GPU Timeline layer"
    return out


def add_arm_frames(proc, frames, clock: int | None, problem: Callable[[str], None]) -> None:
    """Add Arm frames to a ProcessMeta (hostd.metadata): each workload becomes the WORKLOAD of its
    tag (Arm keys metadata by tag alone; the last one seen wins), each submit a SUBMIT with a
    submitID of its own (Arm has none: 1, 2, … in order), each presented frame a FRAME. `clock`:
    BOOTTIME - MONOTONIC_RAW, to place submits and frames on the GPU trace's clock (None: as is)."""
    offset = clock or 0
    sid = max(proc.submits, default=0)
    for frame in frames:
        number = frame.get("frame")
        for s in frame.get("submits") or []:
            if not isinstance(s, dict):
                problem("a submit that is not a JSON object; skipped")
                continue
            sid += 1
            tags = []
            for w in s.get("workloads") or []:
                tag = w.get("tid") if isinstance(w, dict) else None
                if not isinstance(tag, int) or isinstance(tag, bool) or tag < 0:
                    problem(f"a workload without an integer tid in frame {number}; skipped")
                    continue
                proc.workloads[tag] = json.dumps(tessera_workload(w), separators=(",", ":")).encode("utf-8")
                tags.append(tag)
            ts = s.get("timestamp")
            submit = {"device": _hex(s.get("device")), "queue": _hex(s.get("queue")), "tags": tags,
                      "command_buffers": []}
            if isinstance(number, int):
                submit["frame"] = number
            if isinstance(ts, int) and ts > 0:
                submit["time_ns"] = ts
                submit["boot_ns"] = ts + offset
            proc.submits[sid] = submit
        present = frame.get("presentTimestamp")
        if isinstance(number, int) and isinstance(present, int) and present > 0:
            proc.frames[number] = {"frame": number, "time_ns": present, "boot_ns": present + offset,
                                   "device": _hex(frame.get("device")), "source": "present"}


def _hex(value: Any) -> str:
    return hex(value) if isinstance(value, int) and not isinstance(value, bool) else str(value or "")


# -- Tessera -> Arm (export) -----------------------------------------------------------------
def _int(value: Any, default: int = -1) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _handle(text: Any) -> int:
    """A Tessera handle ("0x…") as Arm's integer; a queue name "queue F.I" as F << 16 | I."""
    if isinstance(text, int):
        return text
    if isinstance(text, str):
        m = _QUEUE.match(text)
        if m:
            return int(m.group(1)) << 16 | int(m.group(2))
        try:
            return int(text, 16) if text.startswith("0x") else int(text)
        except ValueError:
            return 0
    return 0


def _labels(meta: dict[str, Any]) -> list[str]:
    labels = meta.get("labels")
    if not isinstance(labels, list):
        return []
    return [str(x) for x in labels if not is_layer_label(str(x))]


def _attachments(meta: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    colors = 0
    resolves = 0
    for a in meta.get("attachments") or []:
        if not isinstance(a, dict):
            continue
        aspect = a.get("aspect")
        load = a.get("load_op") == "load"
        store = a.get("store_op") == "store"
        if aspect == "resolve":     # Arm marks the color attachment it resolves
            color = [x for x in out if x["binding"] == f"C{resolves}"]
            if color:
                color[0]["resolve"] = True
            resolves += 1
            continue
        if aspect == "color":
            out.append({"binding": f"C{colors}", "load": load, "store": store, "resolve": bool(a.get("resolve"))})
            colors += 1
        elif aspect in ("depth", "depth_stencil"):
            out.append({"binding": "D", "load": load, "store": store, "resolve": False})
            if aspect == "depth_stencil":
                out.append({"binding": "S", "load": load, "store": store, "resolve": False})
        elif aspect == "stencil":
            out.append({"binding": "S", "load": load, "store": store, "resolve": False})
    return out


def arm_workload(tag: int, meta: dict[str, Any]) -> dict[str, Any]:
    """Arm's workload JSON for a Tessera workload (WORKLOAD with its ANNEX merged over it)."""
    kind = meta.get("kind")
    labels = _labels(meta)
    if kind == "render_pass":
        width, height = _int(meta.get("width")), _int(meta.get("height"))
        area = meta.get("render_area")
        if (width < 0 or height < 0) and isinstance(area, list) and len(area) == 4:
            width, height = _int(area[2]), _int(area[3])
        return {"type": "renderpass", "tid": tag, "width": width, "height": height,
                "drawCallCount": _int(meta.get("draw_call_count")), "subpassCount": _int(meta.get("subpass_count"), 1),
                "label": labels, "attachments": _attachments(meta)}
    if kind == "dispatch":
        groups = meta.get("groups") if isinstance(meta.get("groups"), list) and len(meta["groups"]) == 3 else [-1] * 3
        x, y, z = (_int(g) for g in groups)
        return {"type": "dispatch", "tid": tag, "xGroups": x, "yGroups": y, "zGroups": z, "label": labels}
    if kind == "trace_rays":
        return {"type": "tracerays", "tid": tag, "xItems": _int(meta.get("width")), "yItems": _int(meta.get("height")),
                "zItems": _int(meta.get("depth"), 1), "label": labels}
    if kind == "image_transfer":
        sub = str(meta.get("subtype", ""))
        return {"type": "imagetransfer", "tid": tag, "subtype": _SUBTYPES.get(sub, sub.capitalize() or "Unknown"),
                "pixelCount": _int(meta.get("pixels")), "label": labels}
    if kind in ("buffer_transfer", "tensor_copy"):
        sub = "tensor copy" if kind == "tensor_copy" else str(meta.get("subtype", ""))
        return {"type": "buffertransfer", "tid": tag, "subtype": _SUBTYPES.get(sub, sub.capitalize() or "Unknown"),
                "byteCount": _int(meta.get("bytes")), "label": labels}
    if kind == "acceleration_structure_build":
        return {"type": "asbuild", "tid": tag, "subtype": str(meta.get("subtype", "Unknown")),
                "primitiveCount": _int(meta.get("primitives")), "label": labels}
    if kind == "acceleration_structure_copy":
        return {"type": "astransfer", "tid": tag, "subtype": str(meta.get("subtype", "Unknown")),
                "byteCount": _int(meta.get("bytes")), "label": labels}
    if kind == "data_graph":   # Arm's DispatchDataGraph record (timeline.proto: tag and labels only)
        return {"type": "datagraph", "tid": tag, "label": labels}
    return {"type": str(kind or "unknown").replace("_", ""), "tid": tag, "label": labels}


def arm_frames(proc) -> Iterator[dict[str, Any]]:
    """A Tessera process's metadata (hostd.metadata.ProcessMeta) as Arm's frames, in time order.

    A frame is flushed at each FRAME (present or VK_EXT_frame_boundary; presentTimestamp = its
    time) and once at the end for submits no FRAME closed (presentTimestamp 0), so a compute-only
    application that never presents still has its workloads. Each submit's workloads are its
    `tags` in order, with the ANNEX of that submitID.tagID merged (draw counts of split passes,
    indirect sizes, labels known at submit)."""
    frames = sorted(proc.frames.items(), key=lambda kv: (kv[1].get("time_ns", 0), kv[0]))
    ended = {n: f for n, f in frames}
    submits = sorted(proc.submits.items(), key=lambda kv: (kv[1].get("time_ns", 0), kv[0]))
    by_frame: dict[int | None, list[tuple[int, dict[str, Any]]]] = {}
    for sid, s in submits:
        n = s.get("frame")
        by_frame.setdefault(n if isinstance(n, int) and n in ended else None, []).append((sid, s))
    device = next(iter(proc.devices), None)

    def record(number: int, present: int, items) -> dict[str, Any]:
        out_submits = []
        dev = device
        for sid, s in items:
            dev = s.get("device", dev)
            workloads = []
            for tag in s.get("tags") or []:
                meta = proc.workload(tag, sid)
                if meta is not None:
                    workloads.append(arm_workload(tag, meta))
            out_submits.append({"device": _handle(s.get("device")), "queue": _handle(s.get("queue")),
                                "timestamp": _int(s.get("time_ns"), 0), "workloads": workloads})
        return {"device": _handle(dev), "frame": number, "presentTimestamp": present, "submits": out_submits}

    for n, f in frames:
        yield record(n, _int(f.get("time_ns"), 0), by_frame.get(n, []))
    rest = by_frame.get(None, [])
    if rest:
        numbers = [s.get("frame") for _, s in rest if isinstance(s.get("frame"), int)]
        yield record(max(numbers) if numbers else (max(ended, default=-1) + 1), 0, rest)

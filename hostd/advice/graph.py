"""The render graph of a session: passes, dispatches and transfers as nodes, images and buffers as edges.

Role: `works_from_run(run)` turns a session read by hostd/ci/runs.py (the merged trace: each
workload's layer metadata as slice args, its GPU phases) into plain `Work` records; `build(works)`
links them. Pure data in, pure data out: unit tests build `Work`s by hand, no GPU needed.

What a node reads and writes (the layer's WORKLOAD `attachments` and `resources`, docs/advice.md):
  - a render-pass attachment reads its image when its load op is `load` (tile read-in), writes it when
    its store op is `store` (write-back; for a resolve attachment, the resolve's write); `clear` and
    `dont_care` loads overwrite the whole image without reading it; `none` keeps it (a read for
    liveness, no bandwidth);
  - a transfer reads its `src` and writes its `dst`; a clear image transfer overwrites the whole image,
    every other transfer write is partial (what it does not cover survives: counted as a read too);
  - dispatches, trace rays and the draws of render passes read images through descriptors: under
    `tessera run --content` the layer names them (`resources` `reads`: sampled, combined and input
    attachment images, read; `storage`: storage images, read and perhaps written: a write never called
    unread), and such a workload is linked like a transfer. Without them (another run, descriptor
    buffers, a pass suspended across command buffers) it may read and write anything: it is
    **opaque**. A store followed by an opaque workload before the image's next overwrite is never
    called unread — unless the image's usage (the layer's `attachment_usage`) has none of SAMPLED,
    STORAGE and INPUT_ATTACHMENT: no descriptor can read it.

Edges go from the last writer of a resource to each reader (None: nothing in the session wrote it).
Presents (the layer's FRAME `images`, protocol 4: the swapchain image each vkQueuePresentKHR
showed) read the last write of each image shown before the frame's end (`Present`, `presented`
on the write). Each write has a fate: `read` (someone read or presented it), `overwritten` (the next
access overwrote it with nobody opaque in between), `end` (no later access). Bandwidth per attachment uses the one formula
shared with the driver's timing (tessera.vkapi.render_passes.attachment_bytes).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

RENDER_PASS = "render_pass"
OPAQUE_KINDS = frozenset({"dispatch", "trace_rays", "acceleration_structure_build"})
FULL_OVERWRITE_TRANSFERS = frozenset({"clear image"})
DEPTH_ASPECTS = frozenset({"depth", "stencil", "depth_stencil"})
DEPTH_PREFIXES = ("D16", "D24", "D32", "X8_D24", "S8")
NULL_HANDLE = "0x0"          # the layer's `resources` entry of an attachment whose image it does not know


@dataclass
class Phase:
    stage: str
    queue: str
    start_ns: int          # trace time (BOOTTIME ns)
    duration_ns: int

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass
class Work:
    """One workload as the advisor sees it: its layer metadata (decoded args), its resources and phases."""
    index: int                          # order in the session, as the GPU ran them
    kind: str
    name: str
    frame: int | None = None
    labels: tuple[str, ...] = ()
    tag: int | None = None
    submit: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)       # WORKLOAD fields (schemas/json/workload.schema.json)
    resources: dict[str, Any] = field(default_factory=dict)  # WORKLOAD `resources`: handles
    phases: list[Phase] = field(default_factory=list)
    process: str = ""                   # the process's name (hostd.ci.runs: `name#2` for a second one)

    @property
    def label_path(self) -> str:
        return " / ".join(self.labels)

    @property
    def duration_ns(self) -> int:
        return sum(p.duration_ns for p in self.phases)

    @property
    def draws(self) -> int:
        return int(self.meta.get("draw_call_count") or 0)

    @property
    def opaque(self) -> bool:
        """May read or write anything through descriptors: the layer did not name what it reads."""
        if "reads" in self.resources:
            return False
        return self.kind in OPAQUE_KINDS or (self.kind == RENDER_PASS and self.draws > 0)

    def where(self) -> str:
        frame = f"frame {self.frame}" if self.frame is not None else "no frame"
        tag = f" t{self.tag}" if self.tag is not None else ""
        return f"{self.label_path or self.name} [{self.kind.replace('_', ' ')}{tag}, {frame}]"


@dataclass
class Access:
    """One use of a resource by a node: an attachment of a render pass or a transfer's end."""
    resource: str | None               # handle (hex); None: unknown
    role: str                          # "attachment", "src", "dst", "descriptor" (read), "storage" (read, maybe written)
    index: int = 0                     # attachment index
    aspect: str = ""
    format: str = ""
    samples: int = 1
    load_op: str = ""
    store_op: str = ""
    reads: bool = False
    writes: bool = False
    overwrites: bool = False           # the whole image replaced without being read
    keeps: bool = False                # contents survive (load op none, a partial transfer write)
    read_bytes: int = 0                # tile read-in (LOAD)
    write_bytes: int = 0               # tile write-back (STORE)
    resolve_bytes: int = 0             # a resolve attachment's write
    usage: int = -1                    # attachments: the image's VkImageUsageFlags (-1: unknown)
    writer: int | None = None          # reads: the node that last wrote it (None: nothing did)
    readers: list[int] = field(default_factory=list)     # writes: nodes that read this write
    fate: str = ""                     # writes: read, overwritten, end
    overwritten_by: int | None = None
    opaque_between: bool = False       # writes: an opaque workload ran before its fate was decided
    presented: list[int] = field(default_factory=list)   # writes: the frames whose present showed it

    @property
    def depth_stencil(self) -> bool:
        return self.aspect in DEPTH_ASPECTS or (self.aspect != "resolve" and self.format.startswith(DEPTH_PREFIXES))

    def to_json(self) -> dict[str, Any]:
        out = {"resource": self.resource, "role": self.role, "reads": self.reads, "writes": self.writes}
        if self.role == "attachment":
            out.update(index=self.index, aspect=self.aspect, format=self.format, samples=self.samples,
                       load_op=self.load_op, store_op=self.store_op, read_bytes=self.read_bytes,
                       write_bytes=self.write_bytes, resolve_bytes=self.resolve_bytes)
        if self.reads:
            out["writer"] = self.writer
        if self.writes:
            out.update(readers=self.readers, fate=self.fate, overwritten_by=self.overwritten_by,
                       presented=self.presented)
        return out


@functools.cache
def _usage_bits() -> tuple[int, int, int]:
    """(usages a descriptor can read through, STORAGE, TRANSIENT_ATTACHMENT) of VkImageUsageFlagBits."""
    from tessera.vkapi.vkconst import vk

    return (vk.VK_IMAGE_USAGE_SAMPLED_BIT | vk.VK_IMAGE_USAGE_STORAGE_BIT | vk.VK_IMAGE_USAGE_INPUT_ATTACHMENT_BIT,
            vk.VK_IMAGE_USAGE_STORAGE_BIT, vk.VK_IMAGE_USAGE_TRANSIENT_ATTACHMENT_BIT)


def descriptor_readable(usage: int) -> bool:
    """Whether a shader may read an image of this usage through a descriptor (unknown: yes)."""
    return usage < 0 or bool(usage & _usage_bits()[0])


def descriptor_writable(usage: int) -> bool:
    """Whether a shader may write an image of this usage through a descriptor (unknown: yes)."""
    return usage < 0 or bool(usage & _usage_bits()[1])


def transient(usage: int) -> bool:
    return usage >= 0 and bool(usage & _usage_bits()[2])


@dataclass
class Node:
    id: int
    work: Work
    accesses: list[Access] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        w = self.work
        return {"id": self.id, "kind": w.kind, "name": w.name, "frame": w.frame, "labels": list(w.labels),
                "tag": w.tag, "submit": w.submit, "duration_ns": w.duration_ns,
                "stages": {p.stage: p.duration_ns for p in w.phases}, "draws": w.meta.get("draw_call_count"),
                "accesses": [a.to_json() for a in self.accesses], "flags": self.flags,
                **({"content": self.content().to_json()} if w.kind == RENDER_PASS else {})}

    def content(self):
        """Its content metrics (content.py): a render pass's draws, vertex shading and overdraw."""
        from .content import of

        return of(self.work.meta)


@dataclass
class Edge:
    src: int | None                    # the writer (None: nothing in the session wrote it)
    dst: int                           # the reader
    resource: str
    access: int                        # index into the reader's accesses

    def to_json(self) -> dict[str, Any]:
        return {"from": self.src, "to": self.dst, "resource": self.resource, "access": self.access}


@dataclass
class Present:
    """One swapchain image shown by a frame's present, and the node whose write it showed."""
    frame: int
    image: str
    writer: int | None                 # None: nothing in the session wrote it

    def to_json(self) -> dict[str, Any]:
        return {"frame": self.frame, "image": self.image, "from": self.writer}


@dataclass
class RenderGraph:
    nodes: list[Node]
    edges: list[Edge]
    presents: list[Present] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)      # image -> VkImageUsageFlags, where known
    # (device name, its DEVICE `allocations`: layer/allocations.py) of the session's destroyed devices
    allocations: list[tuple[str, dict]] = field(default_factory=list)

    def frames(self) -> list[int | None]:
        return sorted({n.work.frame for n in self.nodes}, key=lambda f: -1 if f is None else f)

    def to_json(self) -> dict[str, Any]:
        return {"nodes": [n.to_json() for n in self.nodes], "edges": [e.to_json() for e in self.edges],
                "presents": [p.to_json() for p in self.presents]}

    @property
    def presents_known(self) -> bool:
        """Whether the session's presents name their images: then a colour image's last write that
        nobody read or presented is dead."""
        return bool(self.presents)


# ---- bandwidth: the driver's formula ---------------------------------------------------------

@functools.cache
def _texel_bytes_by_name() -> dict[str, float]:
    from tessera.vkapi.resources import texel_bytes
    from tessera.vkapi.vkconst import vk

    return {entry[0]: texel_bytes(code) for code, entry in vk.FORMATS.items()}


def texel_bytes(format_name: str) -> float:
    """Bytes per texel of a format as the layer names it (vkapi.resources.format_name), by the
    driver's own table; a name it does not know (`format N`) gets what the driver gives N."""
    known = _texel_bytes_by_name().get(format_name)
    if known is not None:
        return known
    from tessera.vkapi.resources import texel_bytes as by_code

    code = format_name.removeprefix("format ").strip()
    return by_code(int(code) if code.isdigit() else -1)


def attachment_bytes(meta: dict[str, Any], attachment: dict[str, Any]) -> int:
    """Bytes one load or store of `attachment` moves in a pass described by `meta`."""
    from tessera.vkapi.render_passes import attachment_bytes as formula

    area = int(meta.get("width") or 0) * int(meta.get("height") or 0)
    layers = max(1, int(meta.get("layers") or 1))
    return formula(area, layers, texel_bytes(str(attachment.get("format", ""))), int(attachment.get("samples") or 1))


# ---- building ----------------------------------------------------------------------------------

def _accesses(w: Work) -> list[Access]:
    out: list[Access] = []
    if w.kind == RENDER_PASS:
        images = w.resources.get("attachments") or []
        usage = w.meta.get("attachment_usage") or []
        for i, a in enumerate(w.meta.get("attachments") or []):
            load, store = str(a.get("load_op", "")), str(a.get("store_op", ""))
            resolve = bool(a.get("resolve")) or a.get("aspect") == "resolve"
            size = attachment_bytes(w.meta, a)
            image = images[i] if i < len(images) and images[i] != NULL_HANDLE else None
            acc = Access(image, "attachment", i, str(a.get("aspect", "")),
                         str(a.get("format", "")), int(a.get("samples") or 1), load, store)
            acc.usage = int(usage[i]) if i < len(usage) and isinstance(usage[i], int) else -1
            acc.reads = load == "load"
            acc.keeps = load == "none"
            acc.overwrites = load in ("clear", "dont_care") and not resolve
            acc.writes = store == "store"
            acc.read_bytes = size if acc.reads else 0
            if acc.writes:
                if resolve:
                    acc.resolve_bytes = size
                else:
                    acc.write_bytes = size
            if resolve:             # a resolve target is written whole by the resolve
                acc.overwrites = acc.writes
            out.append(acc)
    own = {a.resource for a in out}
    for image in w.resources.get("reads") or []:            # through descriptors (--content)
        if image not in own and image != NULL_HANDLE:
            out.append(Access(image, "descriptor", reads=True))
            own.add(image)
    for image in w.resources.get("storage") or []:
        if image not in own and image != NULL_HANDLE:
            out.append(Access(image, "storage", reads=True, writes=True, keeps=True))
            own.add(image)
    if w.kind in ("buffer_transfer", "image_transfer", "tensor_copy"):
        src, dst = w.resources.get("src"), w.resources.get("dst")
        if src:
            out.append(Access(src, "src", reads=True))
        if dst:
            full = w.meta.get("subtype") in FULL_OVERWRITE_TRANSFERS
            out.append(Access(dst, "dst", writes=True, overwrites=full, keeps=not full))
    return out


def build(works: list[Work], presents: list[tuple[int, list[str]]] | None = None) -> RenderGraph:
    """Link `works` (in GPU order) into a render graph: each read to its writer, each write's fate.
    `presents`: (frame, the images its present showed), the FRAME messages' `images`; a present
    reads what the works of frames up to its own wrote last."""
    nodes = [Node(i, w, _accesses(w)) for i, w in enumerate(sorted(works, key=lambda w: w.index))]
    usage = {a.resource: a.usage for n in nodes for a in n.accesses if a.resource and a.usage >= 0}
    edges: list[Edge] = []
    shown: list[Present] = []
    pending = sorted((f, image) for f, images in (presents or []) for image in images if image != NULL_HANDLE)
    last_write: dict[str, tuple[int, Access]] = {}      # resource -> (node, its write access)

    def present_until(frame: int | None) -> None:
        while pending and (frame is None or pending[0][0] < frame):
            f, image = pending.pop(0)
            prev = last_write.get(image)
            shown.append(Present(f, image, prev[0] if prev is not None else None))
            if prev is not None:
                prev[1].presented.append(f)
                prev[1].fate = prev[1].fate or "read"

    for node in nodes:
        if node.work.frame is not None:
            present_until(node.work.frame)
        if node.work.opaque:        # its draws may sample anything but its own attachments
            own = {a.resource for a in node.accesses}
            for r, (_, acc) in last_write.items():
                if r not in own and descriptor_readable(usage.get(r, -1)):
                    acc.opaque_between = True
        for k, acc in enumerate(node.accesses):
            r = acc.resource
            if r is None:
                continue
            prev = last_write.get(r)
            if acc.reads or acc.keeps:
                if prev is not None and prev[0] != node.id:
                    prev[1].readers.append(node.id)
                    prev[1].fate = "read"
                if acc.reads:
                    acc.writer = prev[0] if prev is not None else None
                    edges.append(Edge(acc.writer, node.id, r, k))
        for acc in node.accesses:
            r = acc.resource
            if r is not None and acc.role == "attachment" and acc.store_op == "dont_care":
                last_write.pop(r, None)     # STORE_OP_DONT_CARE: the contents are undefined after the pass
            if r is None or not (acc.writes or acc.overwrites):
                continue
            prev = last_write.get(r)
            if prev is not None and prev[0] != node.id and not prev[1].fate and acc.overwrites:
                prev[1].fate = "overwritten"
                prev[1].overwritten_by = node.id
            if acc.writes:
                last_write[r] = (node.id, acc)
            elif acc.overwrites:        # cleared or don't-care, not stored: the old contents are gone
                last_write.pop(r, None)
    present_until(None)
    for node in nodes:
        for acc in node.accesses:
            if acc.writes and not acc.fate:
                acc.fate = "end"
    _flag(nodes, bool(shown))
    return RenderGraph(nodes, edges, shown, usage)


def dead(acc: Access, presents_known: bool = False) -> bool:
    """A write nobody can have read: overwritten, or never accessed again, with no opaque workload in
    between — for a depth/stencil attachment (the host does not read it back) always, for a colour
    attachment when the session's presents name their images (`presents_known`) and none showed it;
    without them a colour image's last write is taken as read by the host or the display."""
    if not acc.writes or acc.readers or acc.presented or acc.opaque_between or acc.role == "storage":
        return False
    return acc.fate == "overwritten" or (acc.fate == "end" and acc.role == "attachment"
                                         and (acc.depth_stencil or presents_known))


def _flag(nodes: list[Node], presents_known: bool = False) -> None:
    for node in nodes:
        w = node.work
        writes = [a for a in node.accesses if a.writes]
        if w.kind == RENDER_PASS and all(dead(a, presents_known) for a in writes) and not any(
                a.writes and a.resource is None for a in node.accesses):
            node.flags.append("outputs-unread")
        for a in writes:
            if dead(a, presents_known):
                node.flags.append(f"stored-unread:{a.index if a.role == 'attachment' else a.role}")
        for a in node.accesses:
            if a.reads and a.writer is None and a.resource is not None and a.role not in ("descriptor", "storage"):
                node.flags.append(f"loaded-unwritten:{a.index if a.role == 'attachment' else a.role}")


# ---- from a session -----------------------------------------------------------------------------

_NUMBERS = ("width", "height", "depth", "layers", "draw_call_count", "bytes", "pixels", "items", "subpass_count")
_JSON = ("attachments", "attachment_usage", "groups", "group_size", "render_area", "labels", "content")


def decode_args(args: dict[str, str]) -> dict[str, Any]:
    """The layer's WORKLOAD fields back from a slice's args (numbers and JSON as the merge wrote them)."""
    meta: dict[str, Any] = {}
    for k, v in args.items():
        if k in _NUMBERS:
            try:
                meta[k] = int(v)
            except (TypeError, ValueError):
                continue
        elif k in _JSON:
            try:
                meta[k] = json.loads(v)
            except (TypeError, ValueError):
                continue
        else:
            meta[k] = v
    return meta


def works_from_run(run) -> list[Work]:
    """The application's workloads of a hostd.ci.runs.Run (the tool's own work left out), with the
    resources the merge wrote under `handles.resources` and each GPU phase's start and duration."""
    from tessera.schemas import slice_args as table
    from tessera.schemas.perfetto import read_packets

    resources_arg = table.HANDLES.label.format(field="resources")
    per_event: list[dict[str, Any]] = []
    for p in read_packets(run.source, problem=lambda off, msg: None):
        if p.HasField("gpu_render_stage_event"):
            value = next((d.value for d in p.gpu_render_stage_event.extra_data if d.name == resources_arg), None)
            try:
                per_event.append(json.loads(value) if value else {})
            except ValueError:
                per_event.append({})
    works: dict[int, Work] = {}
    for i, ((_, ts, wl), ev) in enumerate(zip(run.placed, run.events)):
        if wl.internal:
            continue
        w = works.get(id(wl))
        if w is None:
            meta = decode_args(wl.args)
            for stage_args in wl.stage_args.values():   # what only a later phase carries (the main phase's counters)
                meta.update({k: v for k, v in decode_args(stage_args).items() if k not in meta})
            w = works[id(wl)] = Work(len(works), wl.kind, wl.name, wl.frame, wl.labels, wl.tag, wl.submit,
                                     meta, per_event[i] if i < len(per_event) else {}, process=wl.process)
        w.phases.append(Phase(ev["stage"], ev["queue"], ts, ev["duration_ns"]))
    return list(works.values())      # in trace order: each process's submits as recorded

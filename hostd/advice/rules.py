"""The advice rules: what a Mali expert would change in a frame, and what each change saves.

Role: every rule is a function of the render graph (graph.py) and the emulated GPU (gpu.py)
returning `Finding`s; `RULES` lists them in one table (id, title, what to do, the Khronos validation
layer's Arm checks it stands for). A finding says what is wrong, where (frame, workload, tag, label
path, attachment), what it costs on the emulated Mali — bytes moved, shader-core cycles, ns — computed
from the timing model's own functions and the trace's durations, never estimated here — and what to
do. `advise` runs them all and sorts the findings by the time they save.

Costs, per rule, are documented in docs/advice.md with the formula; bytes are converted to time with
the model's memory bandwidth (gpu.memory_ns), cycles with its clock. Thresholds are named constants.

Counter-based rules (#27: measured bandwidth, overdraw, per-region counters) plug in through
`advise(..., counters=...)`: a rule in `COUNTER_RULES` receives the session's counters; none exists yet.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .gpu import Gpu
from .graph import RENDER_PASS, Access, Node, RenderGraph, dead, descriptor_readable, descriptor_writable, transient

# 4: content `regions`, `draw_overdraw`, indirect draws in `draws`; 3: render_graph `presents`, writes'
# `presented`; 2: render passes' `content`, findings' `where.draw` (#28)
SCHEMA_VERSION = 4
# Severities, least first: `warning` for work or traffic the frame does for nothing, `info` for what a
# threshold calls too much (the budget file's `[advice] max_severity`, docs/ci.md, compares by this order).
SEVERITIES = ("info", "warning")
# A buffer transfer this small is dominated by its job's fixed cost (JOB_SETUP_CYCLES): batch them.
SMALL_TRANSFER_BYTES = 4096
# More render passes than this in one frame: each extra pass pays two jobs' fixed cost and a tile
# write-back of what it shares with its neighbours (Arm's guidance: as few passes as the frame needs).
MAX_PASSES_PER_FRAME = 8
# An indexed draw whose post-transform cache hit rate (distinct vertices / vertices shaded, layer/content.py's
# LRU model) is at or under this thrashes the cache: the Khronos validation layer's threshold for its Arm check
# vkCmdDrawIndexed-post-transform-cache-thrashing (`cache_hit_rate <= 0.5f`).
MIN_CACHE_HIT_RATE = 0.5
# A render pass with more fragment threads per covered pixel than this overdraws (each pixel shaded more
# than twice over: Arm's guidance is to draw opaque geometry front to back and keep overdraw low).
MAX_OVERDRAW = 2.0
# A device that made at least this many allocations under the validation layer's small-allocation threshold
# (256 KiB, layer/allocations.py) could have sub-allocated them from one block.
MIN_SMALL_ALLOCATIONS = 2
TRANSFER_KINDS = ("buffer_transfer", "image_transfer")
SMALL_TRANSFER_SUBTYPES = frozenset({"fill buffer", "update buffer", "copy buffer"})
ROUND_TRIP_TRANSFERS = {"copy image": "copyimage", "blit image": "blitimage", "resolve image": "resolveimage"}


@dataclass
class Finding:
    rule: str
    title: str
    what: str                       # this instance, in words
    fix: str
    frame: int | None
    workload: str                   # how a person finds it (label path or name, kind, tag, frame)
    label_path: str
    kind: str
    tag: int | None
    node: int | None                # the render graph node
    attachment: int | None = None
    resource: str | None = None
    saves_bytes: int = 0
    saves_cycles: int = 0
    saves_ns: int = 0
    vvl: tuple[str, ...] = ()
    severity: str = "warning"
    draw: int | None = None         # the draw's number in its render pass (content rules)

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "title": self.title, "what": self.what, "fix": self.fix,
                "where": {"frame": self.frame, "workload": self.workload, "label_path": self.label_path,
                          "kind": self.kind, "tag": self.tag, "node": self.node, "attachment": self.attachment,
                          "resource": self.resource, "draw": self.draw},
                "saves": {"bytes": self.saves_bytes, "cycles": self.saves_cycles, "ns": self.saves_ns},
                "vvl": list(self.vvl)}


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    fix: str
    check: Callable[[RenderGraph, Gpu], list[Finding]]
    vvl: tuple[str, ...] = ()       # the Khronos validation layer's Best Practices (Arm) checks it covers
    severity: str = "warning"       # SEVERITIES


def _finding(rule: Rule, node: Node | None, what: str, gpu: Gpu, *, nbytes: int = 0, ns: int | None = None,
             acc: Access | None = None, frame: int | None = None, memory_bytes: int = 0) -> Finding:
    """`nbytes` moved needlessly (their time: the model's memory bandwidth) plus `ns` of GPU time;
    `memory_bytes`: memory held for nothing (no time)."""
    time = (gpu.memory_ns(nbytes) if nbytes else 0) + (ns or 0)
    w = node.work if node else None
    return Finding(rule.id, rule.title, what, rule.fix, w.frame if w else frame, w.where() if w else f"frame {frame}",
                   w.label_path if w else "", w.kind if w else "frame", w.tag if w else None,
                   node.id if node else None, acc.index if acc is not None and acc.role == "attachment" else None,
                   acc.resource if acc is not None else None, nbytes or memory_bytes, gpu.ns_cycles(time), time,
                   rule.vvl, rule.severity)


def _att(acc: Access) -> str:
    return f"attachment {acc.index} ({acc.aspect}, {acc.format}{f', {acc.samples}x' if acc.samples > 1 else ''})"


def _node(graph: RenderGraph, i: int | None) -> Node | None:
    return graph.nodes[i] if i is not None else None


def _next_access(graph: RenderGraph, node: Node, resource: str) -> tuple[Node, Access] | None:
    """The first later node that uses `resource`, and how."""
    for later in graph.nodes[node.id + 1:]:
        for acc in later.accesses:
            if acc.resource == resource:
                return later, acc
    return None


def _opaque_between(graph: RenderGraph, a: Node, b: Node, resource: str) -> bool:
    """An opaque workload (draws, dispatches) that could read `resource` between nodes a and b."""
    if not descriptor_readable(graph.usage.get(resource, -1)):
        return False
    return any(n.work.opaque and all(x.resource != resource for x in n.accesses) for n in graph.nodes[a.id + 1:b.id])


# ---- attachments and their bandwidth ------------------------------------------------------------

def load_undefined(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """LOAD of an image nothing in the session wrote (no earlier opaque workload could have: none ran,
    or the image has no STORAGE usage)."""
    out = []
    first_opaque = next((n.id for n in graph.nodes if n.work.opaque), len(graph.nodes))
    for node in graph.nodes:
        if node.work.kind != RENDER_PASS:
            continue
        opaque_before = first_opaque < node.id
        for acc in node.accesses:
            if acc.role == "attachment" and acc.reads and acc.resource and acc.writer is None and not (
                    opaque_before and descriptor_writable(acc.usage)):
                out.append(_finding(RULES_BY_ID["load-undefined"], node,
                                    f"{_att(acc)} is loaded (LOAD_OP_LOAD) but nothing earlier in the session "
                                    f"wrote it: {acc.read_bytes} bytes read into tile memory for nothing",
                                    gpu, nbytes=acc.read_bytes, acc=acc))
    return out


def _clear_transfers(graph: RenderGraph) -> list[tuple[Node, Access, Node, Access]]:
    """(clear transfer, its dst, the next node using that image, how) with nobody opaque in between."""
    out = []
    for node in graph.nodes:
        if node.work.meta.get("subtype") != "clear image":
            continue
        for acc in node.accesses:
            if acc.role == "dst" and acc.resource:
                nxt = _next_access(graph, node, acc.resource)
                if (nxt and nxt[0].work.kind == RENDER_PASS and nxt[1].role == "attachment"
                        and not _opaque_between(graph, node, nxt[0], acc.resource)):
                    out.append((node, acc, *nxt))
    return out


def clear_then_load(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for clear, _, node, acc in _clear_transfers(graph):
        if acc.reads:
            out.append(_finding(RULES_BY_ID["clear-then-load"], node,
                                f"{_att(acc)} is cleared by a vkCmdClear*Image ({clear.work.where()}, "
                                f"{clear.work.duration_ns} ns) and then loaded: LOAD_OP_CLEAR does both for free "
                                f"({acc.read_bytes} bytes of read-in and the transfer saved)",
                                gpu, nbytes=acc.read_bytes, ns=clear.work.duration_ns, acc=acc))
    return out


def redundant_clear(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for clear, cacc, node, acc in _clear_transfers(graph):
        if acc.overwrites and not acc.reads:
            out.append(_finding(RULES_BY_ID["redundant-clear"], clear,
                                f"the image cleared here is next used by {node.work.where()} {_att(acc)} with "
                                f"LOAD_OP_{acc.load_op.upper()}: the clear ({clear.work.duration_ns} ns) is lost",
                                gpu, ns=clear.work.duration_ns, acc=cacc))
    return out


def store_overwritten(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for node in graph.nodes:
        for acc in node.accesses:
            if (acc.role == "attachment" and acc.write_bytes and not acc.depth_stencil and dead(acc)
                    and acc.fate == "overwritten"):
                by = graph.nodes[acc.overwritten_by]
                out.append(_finding(RULES_BY_ID["store-overwritten"], node,
                                    f"{_att(acc)} is stored ({acc.write_bytes} bytes written back) and then "
                                    f"overwritten by {by.work.where()} before anything reads it",
                                    gpu, nbytes=acc.write_bytes, acc=acc))
    return out


def store_unpresented(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """A single-sampled colour store nothing reads or presents before the session ends, in a session whose
    presents name their images (FRAME `images`): without them a colour image's last write is taken as
    shown. A multisampled one is msaa-stored's finding (its bytes are counted once)."""
    out = []
    if not graph.presents_known:
        return out
    for node in graph.nodes:
        for acc in node.accesses:
            if (acc.role == "attachment" and acc.write_bytes and not acc.depth_stencil and acc.samples == 1
                    and acc.fate == "end" and dead(acc, True)):     # a multisampled store: msaa-stored's
                out.append(_finding(RULES_BY_ID["store-unpresented"], node,
                                    f"{_att(acc)} is stored ({acc.write_bytes} bytes written back) and then neither "
                                    f"read nor presented", gpu, nbytes=acc.write_bytes, acc=acc))
    return out


def depth_store_unread(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for node in graph.nodes:
        for acc in node.accesses:
            if acc.role == "attachment" and acc.write_bytes and acc.depth_stencil and dead(acc):
                after = ("overwritten by " + graph.nodes[acc.overwritten_by].work.where()
                         if acc.fate == "overwritten" else "never used again")
                out.append(_finding(RULES_BY_ID["depth-store-unread"], node,
                                    f"{_att(acc)} is stored ({acc.write_bytes} bytes written back) and {after}, "
                                    f"read by nothing", gpu, nbytes=acc.write_bytes, acc=acc))
    return out


def msaa_stored(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for node in graph.nodes:
        for acc in node.accesses:
            if acc.role == "attachment" and acc.samples > 1 and acc.write_bytes:
                out.append(_finding(RULES_BY_ID["msaa-stored"], node,
                                    f"{_att(acc)} is multisampled and stored: {acc.write_bytes} bytes "
                                    f"({acc.samples} samples per pixel) written back", gpu,
                                    nbytes=acc.write_bytes, acc=acc))
    return out


def resolve_transfer(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """vkCmdResolveImage: the samples went to memory to be read back by a transfer."""
    out = []
    for node in graph.nodes:
        if node.work.meta.get("subtype") != "resolve image":
            continue
        src = next((a for a in node.accesses if a.role == "src"), None)
        writer = _node(graph, src.writer) if src else None
        stored = next((a.write_bytes for a in writer.accesses if a.resource == src.resource), 0) if writer else 0
        extra = (f" and the {stored} bytes of samples {writer.work.where()} stored for it" if stored else "")
        out.append(_finding(RULES_BY_ID["resolve-transfer"], node,
                            f"a multisampled image is resolved by vkCmdResolveImage ({node.work.duration_ns} ns)"
                            f"{extra}: a resolve attachment does it on tile", gpu, nbytes=stored,
                            ns=node.work.duration_ns, acc=src))
    return out


def transfer_then_load(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for node in graph.nodes:
        if node.work.kind != RENDER_PASS:
            continue
        for acc in node.accesses:
            writer = _node(graph, acc.writer) if acc.reads and acc.role == "attachment" else None
            if writer is not None and writer.work.meta.get("subtype") in ROUND_TRIP_TRANSFERS:
                out.append(_finding(RULES_BY_ID["transfer-then-load"], node,
                                    f"{_att(acc)} is loaded right after a {writer.work.meta['subtype']} wrote it "
                                    f"({writer.work.where()}): {acc.read_bytes} bytes read back into tile memory",
                                    gpu, nbytes=acc.read_bytes, acc=acc))
    return out


def non_transient(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """A multisampled or depth/stencil image that lives in tile memory only (never loaded, stored or
    used by a transfer in the session) but is not a TRANSIENT_ATTACHMENT image: memory that lazily
    allocated memory would never back."""
    used: dict[str, list[tuple[Node, Access]]] = {}
    for node in graph.nodes:
        for acc in node.accesses:
            if acc.resource:
                used.setdefault(acc.resource, []).append((node, acc))
    out = []
    for resource, uses in used.items():
        node, first = uses[0]
        if not (first.role == "attachment" and (first.samples > 1 or first.depth_stencil)):
            continue
        if first.usage < 0 or transient(first.usage):
            continue
        if any(a.role != "attachment" or a.reads or a.writes or a.keeps for _, a in uses):
            continue
        size = _footprint(node, first)
        out.append(_finding(RULES_BY_ID["non-transient-attachment"], node,
                            f"{_att(first)} lives in tile memory only ({len(uses)} pass(es), never loaded or "
                            f"stored) but its image is not TRANSIENT_ATTACHMENT: {size} bytes of memory backed "
                            f"for nothing", gpu, acc=first, memory_bytes=size))
    return out


def _footprint(node: Node, acc: Access) -> int:
    from .graph import attachment_bytes

    return attachment_bytes(node.work.meta, {"format": acc.format, "samples": acc.samples})


# ---- passes ---------------------------------------------------------------------------------------

def outputs_unread(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for node in graph.nodes:
        if "outputs-unread" in node.flags:
            out.append(_finding(RULES_BY_ID["outputs-unread"], node,
                                f"nothing reads what this render pass writes ({node.work.duration_ns} ns of "
                                f"binning and main phases)", gpu, ns=node.work.duration_ns))
    return out


def empty_pass(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for node in graph.nodes:
        if node.work.kind == RENDER_PASS and node.work.meta.get("draw_call_count") == 0:
            out.append(_finding(RULES_BY_ID["empty-pass"], node,
                                f"a render pass with no draw ({node.work.duration_ns} ns of binning and main "
                                f"phases, {sum(a.read_bytes + a.write_bytes + a.resolve_bytes for a in node.accesses)}"
                                f" bytes of attachment traffic)", gpu, ns=node.work.duration_ns))
    return out


def pass_round_trip(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """Two consecutive render passes of the same size, the second loading what the first stored."""
    out = []
    for node in graph.nodes[1:]:
        prev = graph.nodes[node.id - 1]
        if node.work.kind != RENDER_PASS or prev.work.kind != RENDER_PASS:
            continue
        size = lambda w: (w.meta.get("width"), w.meta.get("height"), w.meta.get("layers", 1))
        if size(node.work) != size(prev.work):
            continue
        for acc in node.accesses:
            if acc.role == "attachment" and acc.reads and acc.writer == prev.id:
                stored = next((a.write_bytes for a in prev.accesses if a.resource == acc.resource and a.writes), 0)
                out.append(_finding(RULES_BY_ID["pass-round-trip"], node,
                                    f"{_att(acc)} is stored by the render pass just before "
                                    f"({prev.work.where()}, {stored} bytes) and loaded back here "
                                    f"({acc.read_bytes} bytes)", gpu, nbytes=stored + acc.read_bytes, acc=acc))
    return out


def too_many_passes(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for frame, passes in _by_frame(graph, lambda n: n.work.kind == RENDER_PASS).items():
        if len(passes) > MAX_PASSES_PER_FRAME:
            extra = len(passes) - MAX_PASSES_PER_FRAME
            out.append(_finding(RULES_BY_ID["too-many-passes"], None,
                                f"{len(passes)} render passes in one frame (over {MAX_PASSES_PER_FRAME}): each "
                                f"extra pass pays two jobs' fixed cost ({gpu.job_setup_ns} ns each)", gpu,
                                ns=extra * 2 * gpu.job_setup_ns, frame=frame))
    return out


def binning_serialised(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """A pass's binning phase waited for an earlier pass's main phase (a barrier or an external subpass
    dependency), though the non-fragment queue was free: the tiler could have run under the fragment work."""
    out = []
    main_ends: dict[Any, set[int]] = {}           # per submit: when the main phases so far ended
    queue_free: dict[tuple[Any, str], int] = {}   # per (submit, queue): the end of its last phase so far
    for node in graph.nodes:
        submit = node.work.submit
        binning = next((p for p in node.work.phases if p.stage == "binning"), None)
        if binning is not None and binning.start_ns in main_ends.get(submit, ()):
            free = queue_free.get((submit, binning.queue))
            if free is not None and free < binning.start_ns:
                wait = binning.start_ns - free
                out.append(_finding(RULES_BY_ID["binning-serialised"], node,
                                    f"binning starts only when the previous render pass's fragment work ends, "
                                    f"{wait} ns after the non-fragment queue was free", gpu, ns=wait))
        for p in node.work.phases:
            if p.stage == "main":
                main_ends.setdefault(submit, set()).add(p.end_ns)
            key = (submit, p.queue)
            queue_free[key] = max(queue_free.get(key, p.end_ns), p.end_ns)
    return out


def _by_frame(graph: RenderGraph, keep: Callable[[Node], bool]) -> dict[Any, list[Node]]:
    out: dict[Any, list[Node]] = {}
    for n in graph.nodes:
        if keep(n):
            out.setdefault(n.work.frame, []).append(n)
    return out


# ---- compute and transfers ----------------------------------------------------------------------------

def workgroup_warp_waste(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for node in graph.nodes:
        w = node.work
        size, groups = w.meta.get("group_size"), w.meta.get("groups")
        if w.kind != "dispatch" or not size or not groups or -1 in size or -1 in groups:
            continue
        threads = size[0] * size[1] * size[2]
        if threads <= 0 or threads % gpu.warp_width == 0:
            continue
        n_groups = groups[0] * groups[1] * groups[2]
        padded = math.ceil(threads / gpu.warp_width) * gpu.warp_width
        idle = n_groups * (padded - threads)
        shader_ns = max(0, w.duration_ns - gpu.job_setup_ns)
        ns = math.ceil(shader_ns * idle / (n_groups * threads)) if n_groups else 0
        out.append(_finding(RULES_BY_ID["workgroup-warp-waste"], node,
                            f"work groups of {size[0]}x{size[1]}x{size[2]} = {threads} threads fill "
                            f"{padded // gpu.warp_width} warps of {gpu.warp_width}: {idle} idle lanes over "
                            f"{n_groups} groups", gpu, ns=ns))
    return out


def small_transfers(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    out = []
    for small in _by_frame(graph, lambda n: n.work.meta.get("subtype") in SMALL_TRANSFER_SUBTYPES
                           and 0 <= int(n.work.meta.get("bytes", -1)) < SMALL_TRANSFER_BYTES).values():
        if len(small) >= 2:
            out.append(_finding(RULES_BY_ID["small-transfers"], small[0],
                                f"{len(small)} buffer transfers under {SMALL_TRANSFER_BYTES} bytes in one frame, "
                                f"each a job of its own ({gpu.job_setup_ns} ns fixed cost)", gpu,
                                ns=(len(small) - 1) * gpu.job_setup_ns))
    return out


# ---- content (content.py: the layer's per-draw metrics, the driver's counters) --------------------------

def vertex_reuse(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """An indexed draw whose index order makes the post-transform cache model shade each vertex more than
    twice on average: the extra invocations at the pass's vertex cycles, spread over the shader cores as
    the binning phase's shading term is (icd/timing.py render_pass)."""
    out = []
    for node in graph.nodes:
        if node.work.kind != RENDER_PASS:
            continue
        c = node.content()
        for d in c.draws:
            rate = d.hit_rate
            if rate is None or rate > MIN_CACHE_HIT_RATE or d.extra <= 0:
                continue
            cycles = d.extra * (c.vertex_cycles or 0.0) / gpu.shader_cores
            f = _finding(RULES_BY_ID["vertex-reuse"], node,
                         f"draw {d.draw}: {d.count} indices x {d.instances} instance(s) reference {d.unique} distinct "
                         f"vertices but the {d.cache_entries or '?'}-entry post-transform cache model shades "
                         f"{d.shaded} (hit rate {rate:.0%}, mean "
                         f"index step {d.mean_delta}): {d.extra} extra vertex shader invocations x "
                         f"{c.vertex_cycles} cycles / {gpu.shader_cores} cores", gpu,
                         ns=gpu.cycles_ns(cycles) if cycles > 0 else 0)
            f.draw = d.draw
            out.append(f)
    return out


def high_overdraw(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """A render pass whose fragment threads (the main phase's MaliFragThread) exceed MAX_OVERDRAW per
    covered pixel: the threads beyond one per pixel, each at the main phase's per-fragment cost — the
    larger of the pass's fragment cycles and 1 / the pixel rate, over the shader cores, as the main
    phase's max(shader-bound, pixel-bound) term is (icd/timing.py render_pass)."""
    out = []
    for node in graph.nodes:
        if node.work.kind != RENDER_PASS:
            continue
        c = node.content()
        overdraw = c.overdraw
        if overdraw is None or overdraw <= MAX_OVERDRAW:
            continue
        out.append(_overdraw_finding("high-overdraw", node, c, gpu, c.fragment_threads - c.covered_pixels,
                                     f"{c.fragment_threads} fragment threads over {c.covered_pixels} covered "
                                     f"pixels (overdraw {overdraw:.2f}, over {MAX_OVERDRAW})"))
    return out


def _overdraw_finding(rule_id: str, node, c, gpu: Gpu, beyond: int, found: str) -> Finding:
    """high-overdraw's and overdraw-hotspot's finding: `found` (the overdraw seen), then its cost: the `beyond`
    threads beyond one per pixel at the pass's per-fragment cost, max(fragment cycles, 1 / pixel rate), over
    the shader cores; at the pass's heaviest instrumented draw, if known."""
    cycles = beyond * max(c.fragment_cycles or 0.0, 1.0 / gpu.pixel_rate) / gpu.shader_cores
    draw, named = _heaviest_draw(c)
    f = _finding(RULES_BY_ID[rule_id], node,
                 f"{found}: {beyond} threads beyond one per pixel x max({c.fragment_cycles} fragment cycles, "
                 f"1 / {gpu.pixel_rate} pixels per cycle) / {gpu.shader_cores} cores{named}", gpu,
                 ns=gpu.cycles_ns(cycles) if cycles > 0 else 0)
    f.draw = draw
    return f


def _heaviest_draw(c) -> tuple[int | None, str]:
    """The instrumented draw with the most fragment threads (--instrument), and a phrase naming it."""
    draws = c.draw_overdraw()
    if not draws:
        return None, ""
    d = draws[0]
    return d["draw"], (f"; draw {d['draw']} runs the most fragment threads ({d['fragment_threads']}, "
                       f"{d['overdraw_share']} per covered pixel)")


def overdraw_hotspot(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """With --regions: regions whose fragment threads (the backend's count) exceed MAX_OVERDRAW per pixel,
    in a render pass high-overdraw does not flag (its model-wide overdraw is under the limit: the overdraw is
    local). Saves the threads beyond one per pixel in those regions at the pass's per-fragment cost (as
    high_overdraw: max(fragment cycles, 1 / pixel rate) / cores)."""
    out = []
    for node in graph.nodes:
        if node.work.kind != RENDER_PASS:
            continue
        c = node.content()
        if c.regions is None or (c.overdraw is not None and c.overdraw > MAX_OVERDRAW):
            continue
        hot = c.regions.over(MAX_OVERDRAW)
        if not hot:
            continue
        top = c.regions.hottest(1)[0]
        out.append(_overdraw_finding(
            "overdraw-hotspot", node, c, gpu, sum(r.threads - r.pixels for r in hot),
            f"{len(hot)} of {len(c.regions.regions)} regions of {c.regions.size[0]}x{c.regions.size[1]} pixels "
            f"shade each pixel more than {MAX_OVERDRAW} times (the hottest, column {top.column} row {top.row} layer "
            f"{top.layer}: {top.threads} fragment threads over {top.pixels} pixels, overdraw {top.overdraw:.2f})"))
    return out


# ---- memory ---------------------------------------------------------------------------------------------

def small_allocations(graph: RenderGraph, gpu: Gpu) -> list[Finding]:
    """A device whose application made MIN_SMALL_ALLOCATIONS or more small VkDeviceMemory allocations
    (the layer's counts, as the validation layer's rules count them): memory, not time — the bytes the
    small allocations leave unused in their last 4 KiB page (each VkDeviceMemory is whole pages to the
    kernel driver; sub-allocated from one block they would not each round up)."""
    rule = RULES_BY_ID["small-allocations"]
    out = []
    for name, a in graph.allocations:
        small = int(a.get("small", 0))
        if small < MIN_SMALL_ALLOCATIONS:
            continue
        waste = int(a.get("page_waste_bytes", 0))
        out.append(Finding(rule.id, rule.title,
                           f"{small} of the {a.get('made')} VkDeviceMemory allocations are under 256 KiB "
                           f"({a.get('small_bytes')} bytes in all), {a.get('small_dedicated')} binds give a buffer or "
                           f"image a whole block under 1 MiB: each allocation is a kernel call, counts against "
                           f"maxMemoryAllocationCount and rounds up to whole 4 KiB pages ({waste} bytes unused)",
                           rule.fix, None, f"device {name}", "", "device", None, None, saves_bytes=waste,
                           vvl=rule.vvl, severity=rule.severity))
    return out


def _rule(id: str, title: str, fix: str, check, vvl: tuple[str, ...] = (), severity: str = "warning") -> Rule:
    return Rule(id, title, fix, check, tuple(f"UNASSIGNED-BestPractices-{v}" for v in vvl), severity)


RULES: tuple[Rule, ...] = (
    _rule("load-undefined", "Attachment loaded that nothing wrote",
          "Use LOAD_OP_CLEAR, or LOAD_OP_DONT_CARE if every pixel is drawn: the old contents are undefined.",
          load_undefined, ("vkCmdBeginRenderPass-attachment-needs-readback",
                           "vkCmdBeginRenderPass-StoreOpDontCareThenLoadOpLoad")),
    _rule("clear-then-load", "vkCmdClear*Image followed by LOAD_OP_LOAD",
          "Drop the clear transfer and use LOAD_OP_CLEAR with the clear value in the render pass.",
          clear_then_load, ("RenderPass-inefficient-clear",)),
    _rule("redundant-clear", "vkCmdClear*Image whose result the next render pass discards",
          "Remove the clear transfer: the next pass clears (or ignores) the attachment itself.",
          redundant_clear, ("RenderPass-redundant-clear",)),
    _rule("store-overwritten", "Colour attachment stored, then overwritten unread",
          "Use STORE_OP_DONT_CARE: nothing reads what this pass writes back.",
          store_overwritten, ("RenderPass-redundant-store",)),
    _rule("store-unpresented", "Colour attachment stored, then neither read nor presented",
          "Use STORE_OP_DONT_CARE (or drop the pass): no later pass, transfer or present uses what it writes back.",
          store_unpresented),
    _rule("depth-store-unread", "Depth/stencil attachment stored but never read",
          "Use STORE_OP_DONT_CARE for depth/stencil, and a TRANSIENT_ATTACHMENT image in lazily allocated memory.",
          depth_store_unread, ("vkCreateFramebuffer-attachment-should-be-transient",)),
    _rule("msaa-stored", "Multisampled attachment written back to memory",
          "Resolve on tile (a resolve attachment), STORE_OP_DONT_CARE the samples, make the image TRANSIENT_ATTACHMENT"
          " in lazily allocated memory.",
          msaa_stored, ("vkCreateImage-non-transient-ms-image", "vkCreateRenderPass-image-requires-memory",
                        "vkBindImageMemory-non-lazy-transient-image")),
    _rule("non-transient-attachment", "Tile-only attachment not in transient memory",
          "Create the image with VK_IMAGE_USAGE_TRANSIENT_ATTACHMENT_BIT in LAZILY_ALLOCATED memory: it never "
          "leaves tile memory.", non_transient,
          ("vkCreateFramebuffer-attachment-should-be-transient", "vkCreateImage-non-transient-ms-image",
           "vkBindImageMemory-non-lazy-transient-image")),
    _rule("resolve-transfer", "MSAA resolved outside the render pass (vkCmdResolveImage)",
          "Add a resolve attachment (pResolveAttachments or VkRenderingAttachmentInfo::resolveImageView) and do not"
          " store the samples.",
          resolve_transfer, ("vkCmdResolveImage-resolving-image",)),
    _rule("transfer-then-load", "Image copied, blitted or resolved, then loaded by a render pass",
          "Draw the source in this render pass (a fragment shader reading it) instead of a transfer then a LOAD.",
          transfer_then_load, ("RenderPass-copyimage-loadopload", "RenderPass-blitimage-loadopload",
                               "RenderPass-resolveimage-loadopload")),
    _rule("outputs-unread", "Render pass whose outputs nobody reads",
          "Remove the pass, or store only what a later pass, transfer or present uses.", outputs_unread),
    _rule("empty-pass", "Render pass with no draw",
          "Fold its clears into the next pass's LOAD_OP_CLEAR; drop it if it only stores what it loaded.",
          empty_pass, ("vkCmdEndRenderPass-redundant-attachment-on-tile",)),
    _rule("pass-round-trip", "Consecutive render passes round-trip an attachment through memory",
          "Merge the two passes (subpasses, or one dynamic-rendering pass) so the attachment stays in tile memory.",
          pass_round_trip),
    _rule("too-many-passes", "Too many render passes in a frame",
          f"Merge passes that render to the same targets; keep a frame under {MAX_PASSES_PER_FRAME} passes.",
          too_many_passes, severity="info"),
    _rule("binning-serialised", "Barrier serialises binning behind fragment work",
          "Narrow the barrier: wait at FRAGMENT_SHADER (not VERTEX_SHADER/ALL_COMMANDS) so the next pass's "
          "binning overlaps this pass's fragment work.", binning_serialised),
    _rule("workgroup-warp-waste", "Compute work-group size not a multiple of the warp width",
          "Make the work-group size a multiple of the warp width (and of 4 in each dimension for 2D work).",
          workgroup_warp_waste, ("vkCreateComputePipelines-compute-thread-group-alignment",)),
    _rule("small-transfers", "Many small buffer transfers in a frame",
          "Batch the updates into one buffer and one copy (or write through a persistently mapped buffer).",
          small_transfers, severity="info"),
    _rule("vertex-reuse", "Poor index locality: vertices shaded more than once",
          "Reorder the indices for vertex-cache locality (e.g. meshoptimizer's optimizeVertexCache, Forsyth's "
          "algorithm), then the vertices in first-use order (optimizeVertexFetch).",
          vertex_reuse, ("vkCmdDrawIndexed-post-transform-cache-thrashing",)),
    _rule("high-overdraw", "High overdraw: pixels shaded many times over",
          "Draw opaque geometry front to back (or with a depth pre-pass only where the fragment shader is heavy), "
          "cull hidden geometry, and keep blended layers small.", high_overdraw, severity="info"),
    _rule("overdraw-hotspot", "Overdraw hot spot: some regions shaded many times over",
          "Find what stacks up in the hot regions (the region heatmaps, the heaviest draw): draw opaque geometry "
          "front to back, cull or clip hidden layers, shrink blended quads (particles, UI) to their visible area.",
          overdraw_hotspot, severity="info"),
    _rule("small-allocations", "Many small device memory allocations",
          "Allocate large VkDeviceMemory blocks (e.g. 64 MiB) and sub-allocate buffers and images from them "
          "(Vulkan Memory Allocator does this); keep dedicated allocations for large resources.",
          small_allocations, ("vkAllocateMemory-small-allocation", "vkBindMemory-small-dedicated-allocation"),
          severity="info"),
)
RULES_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
# Rules on GPU counters (#27's hostd/counters.py): each takes (graph, gpu, counters). None yet.
COUNTER_RULES: tuple[Callable[..., list[Finding]], ...] = ()


def advise(graph: RenderGraph, gpu: Gpu, counters: Any = None, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """Every finding of `rules` (and, given counters, of COUNTER_RULES), the largest saving first."""
    found = [f for rule in rules for f in rule.check(graph, gpu)]
    if counters is not None:
        found += [f for rule in COUNTER_RULES for f in rule(graph, gpu, counters)]
    return sorted(found, key=lambda f: (-f.saves_ns, -f.saves_bytes, f.node if f.node is not None else -1, f.rule))

"""Content metrics per draw (#28, `tessera run --content`): primitives, vertex reuse, index locality.

Role: with TESSERA_CONTENT=1 (LayerSettings.content) the layer describes every draw of a render
pass — its vertex or index count, instances and, for an indexed draw, what its index data does to
vertex shading — in the pass's ANNEX field `content` (schemas/json/annex.schema.json), one entry
per direct draw (vkCmdDraw, vkCmdDrawIndexed) in recording order, `draw` its number among all the
pass's draws. hostd's advisor (hostd/advice/content.py) sums them per pass and its
rules cost them.

Which side reads the indices: the layer. It is the side that describes draws to hostd (the driver
knows sizes and times them, the layer knows which draw is which), and it already copies indirect
arguments after a pass and reads them once the submit completed (indirect.py): the index data of a
pass's indexed draws is copied the same way, one region per draw (the range each draw reads:
firstIndex .. firstIndex + indexCount of the index buffer bound at the draw), into the layer's
capture buffer, by one copy workload of its own (internal, CAPTURE_LABEL) after the pass ends,
between barriers chained on VERTEX_INPUT (the stage whose index reads the application already made
the data visible to). Index buffers get TRANSFER_SRC usage added at vkCreateBuffer (indirect.py).
Metrics are computed when the capture is read back (Capturer.poll), with numpy, and cached by the
index data's digest: a steady frame loop computes each distinct index range once.

The model (`index_metrics`, pure: unit-tested on hand-built index buffers):
  - primitives: index count // 3 (triangle lists, as the driver's timing counts them);
  - unique vertices: len(np.unique(indices)) — the fewest vertex shader invocations possible;
  - shaded vertices: misses of a post-transform vertex cache of CACHE_ENTRIES entries, least
    recently used first out. The model choice is the Khronos validation layer's (its Arm best
    practice vkCmdDrawIndexed-post-transform-cache-thrashing simulates an LRU of 32 entries,
    citing Forsyth, "Linear-speed vertex cache optimisation", 2006: a larger model cache gives
    diminishing returns). Arm does not publish the Mali IDVS cache size.
  - cache hit rate = unique / shaded (the validation layer's `cache_hit_rate`: 1.0 when every vertex
    is shaded once), vertex-shading efficiency = unique / indices;
  - locality: index span (max − min + 1), utilisation = unique / span (the validation layer's
    sparse-index-buffer measure), mean |index delta| between consecutive indices.
A non-indexed draw shades every vertex: shaded = unique = vertex count, span = vertex count.
Primitive restart and topologies other than triangle lists are not modelled (Limits in docs/advice.md).

Limits: draws recorded in secondary command buffers, in a render pass suspended at the end of its
command buffer and draws whose index data is over MAX_DRAW_INDEX_BYTES are described without index
metrics (`indexed` true, no `shaded`). Indirect draws are not entries of `content`: their arguments come
back in the ANNEX `draws` (indirect.py, numbered among the pass's draws by render_passes.py), which
hostd's advisor lists beside them; an indexed one's index range was in GPU memory when the pass ended,
so it gets no index metrics.

Threads: the hooks run on the application's recording thread (in content mode the draws and the index
binds take the Python path while the rest stays recorded in C: the shim's switch tessera_layer_content,
entry.py; vkapi/intercepts.py CONTENT_DRAWS, CONTENT_FORWARDED; a Python hook inside a pass sends its end
to Python too, where the copy is recorded); the metrics are computed by the thread that polls the captures
(a submit, a wait, vkDestroyDevice). The digest cache has its own lock.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tessera.schemas.labels import tag_label
from tessera.vkapi.vkconst import vk

from .descriptions import describe
from .trackers import Capture, Workload

if TYPE_CHECKING:
    import numpy as np

CACHE_ENTRIES = 32                 # the post-transform cache model's size (see the module docstring)
MAX_DRAW_INDEX_BYTES = 1 << 18     # a draw's index data copied at most (256 KiB); beyond: no index metrics
DIGEST_CACHE = 1024                # distinct index ranges whose metrics are kept
CONTENT_KIND = "content"           # Capture.kind of a pass's draws
INDEX_BYTES = {vk.VK_INDEX_TYPE_UINT16: 2, vk.VK_INDEX_TYPE_UINT32: 4, vk.VK_INDEX_TYPE_UINT8_KHR: 1}
DTYPES = {1: "<u1", 2: "<u2", 4: "<u4"}   # little-endian index types, as numpy names them


def shaded_vertices(indices: np.ndarray, entries: int = CACHE_ENTRIES) -> int:
    """Vertex shader invocations of `indices` through an LRU post-transform cache of `entries`."""
    cache: OrderedDict[int, None] = OrderedDict()
    misses = 0
    for i in indices.tolist():
        if i in cache:
            cache.move_to_end(i)
            continue
        misses += 1
        cache[i] = None
        if len(cache) > entries:
            cache.popitem(last=False)
    return misses


def index_metrics(indices: np.ndarray, entries: int = CACHE_ENTRIES) -> dict:
    """The content metrics of one instance of an indexed draw (see the module docstring)."""
    import numpy as np   # here: only --content reads indices, and numpy takes ~35 ms to import at start-up
    n = int(indices.size)
    if n == 0:
        return {"indices": 0, "primitives": 0, "unique_vertices": 0, "shaded_vertices": 0, "index_span": 0,
                "mean_index_delta": 0.0}
    wide = indices.astype(np.int64)
    lo, hi = int(wide.min()), int(wide.max())
    return {"indices": n, "primitives": n // 3, "unique_vertices": int(np.unique(wide).size),
            "shaded_vertices": shaded_vertices(wide, entries), "index_span": hi - lo + 1,
            "mean_index_delta": round(float(np.abs(np.diff(wide)).mean()) if n > 1 else 0.0, 3)}


_cache: OrderedDict[tuple[bytes, int], dict] = OrderedDict()
_cache_lock = threading.Lock()


def metrics_of(data: bytes, index_bytes: int) -> dict:
    """index_metrics of raw little-endian index data, cached by its digest."""
    key = (hashlib.blake2b(data, digest_size=16).digest(), index_bytes)
    with _cache_lock:
        got = _cache.get(key)
        if got is not None:
            _cache.move_to_end(key)
            return got
    import numpy as np
    got = index_metrics(np.frombuffer(data, dtype=DTYPES[index_bytes]))
    with _cache_lock:
        _cache[key] = got
        while len(_cache) > DIGEST_CACHE:
            _cache.popitem(last=False)
    return got


@dataclass
class DrawRecord:
    """One draw of a pass, as recorded: its sizes and (indexed) where its index data is."""
    draw: int                       # its number among the pass's draws (every kind counted), from 0
    indexed: bool
    count: int                      # vertex or index count
    instances: int
    buffer: object = None           # indexed: the index buffer bound (None: unknown)
    offset: int = 0                 # its byte offset of firstIndex
    index_bytes: int = 0
    copied: int = -1                # offset of its indices in the capture region (-1: not copied)


@dataclass
class ContentPart:
    """This module's state on a command buffer's open render pass part: its draws so far."""
    draws: list[DrawRecord] = field(default_factory=list)


def decode(data: bytes, draws: list[DrawRecord]) -> list[dict]:
    """The `content` annex field of a pass from its copied index data (Capturer.poll)."""
    out = []
    for d in draws:
        entry = {"draw": d.draw, "indexed": d.indexed, "count": d.count, "instances": d.instances}
        if not d.indexed:
            entry.update(primitives=d.count // 3, unique_vertices=d.count, shaded_vertices=d.count,
                         index_span=d.count)
        elif d.copied >= 0:
            m = metrics_of(data[d.copied:d.copied + d.count * d.index_bytes], d.index_bytes)
            entry.update({k: v for k, v in m.items() if k != "indices"}, cache_entries=CACHE_ENTRIES)
        out.append(entry)
    return out


class IndexBindings:
    """The index buffer bound in each command buffer (always registered: vkCmdBindIndexBuffer is a row
    of the layer's). Outside content mode C only forwards the binds (intercepts.py FORWARDED): nothing
    reads them, and they cost the application nothing; content mode takes the Python path, where these
    hooks run."""

    def __init__(self, state) -> None:
        self.state = state

    def before_vkCmdBindIndexBuffer(self, dev, commandBuffer, buffer, offset, indexType):
        self.state.command_buffer(dev, commandBuffer).index_binding = (buffer, int(offset), int(indexType))

    def before_vkCmdBindIndexBuffer2(self, dev, commandBuffer, buffer, offset, size, indexType):
        self.before_vkCmdBindIndexBuffer(dev, commandBuffer, buffer, offset, indexType)



class ContentMetrics:
    """Content mode's draw hooks (run after layer.render_passes' of the same command) and the copy
    of a pass's index data, recorded when the pass ends (render_passes.py runs the deferred captures)."""

    def __init__(self, state, labeller, capturer) -> None:
        self.state, self.labeller, self.capturer = state, labeller, capturer

    def _part(self, dev, commandBuffer):
        t = self.state.command_buffer(dev, commandBuffer)
        if t.part is None or t.part.workload is None:
            return t, None
        part = t.part.content
        if part is None:
            part = t.part.content = ContentPart()
            t.deferred_captures.append(lambda cb, dev=dev, part=part, t=t: self._copy(dev, t, cb, part))
        return t, part

    def before_vkCmdDraw(self, dev, commandBuffer, vertexCount, instanceCount, firstVertex, firstInstance):
        t, part = self._part(dev, commandBuffer)
        if part is not None:
            part.draws.append(DrawRecord(t.part.draws - 1, False, int(vertexCount), int(instanceCount)))

    def before_vkCmdDrawIndexed(self, dev, commandBuffer, indexCount, instanceCount, firstIndex, vertexOffset,
                                firstInstance):
        t, part = self._part(dev, commandBuffer)
        if part is None:
            return
        rec = DrawRecord(t.part.draws - 1, True, int(indexCount), int(instanceCount))   # render_passes counted it
        binding = t.index_binding
        if binding is not None and binding[2] in INDEX_BYTES:
            buffer, offset, kind = binding
            rec.buffer, rec.index_bytes = buffer, INDEX_BYTES[kind]
            rec.offset = offset + int(firstIndex) * rec.index_bytes
        part.draws.append(rec)

    def _copy(self, dev, t, cb, part: ContentPart) -> Capture | None:
        """At the pass's end: one copy of every indexed draw's index data; the Capture carries the draws."""
        regions, size = [], 0
        for d in part.draws:
            nbytes = d.count * d.index_bytes
            if d.indexed and d.buffer is not None and 0 < nbytes <= MAX_DRAW_INDEX_BYTES:
                d.copied = size
                regions.append((d.buffer, d.offset, size, nbytes))
                size += -(-nbytes // 4) * 4          # vkCmdCopyBuffer regions: keep 4-byte alignment
        if not regions:
            return Capture(-1, 0, CONTENT_KIND, len(part.draws), draws=tuple(part.draws))
        buf = self.capturer._buffer(dev)
        base = buf.alloc(size)
        if base is None:
            self.capturer.log.warning("capture buffer full: this pass's draws get no index metrics")
            for d in part.draws:
                d.copied = -1
            return Capture(-1, 0, CONTENT_KIND, len(part.draws), draws=tuple(part.draws))
        ffi, nxt = self.state.ffi, dev.next
        tag = self.labeller.next_tag()
        from .indirect import CAPTURE_LABEL
        describe(self.state, dev, t, Workload(tag, (CAPTURE_LABEL,), 0), "buffer_transfer",
                 {"command": "vkCmdCopyBuffer", "subtype": "copy buffer", "bytes": size, "regions": len(regions),
                  "internal": CAPTURE_LABEL}, False)
        labelled = self.labeller.push(dev, cb, tag_label(tag))
        # The application made the indices visible to index reads (VERTEX_INPUT); chaining on that stage
        # makes them visible to the copy (spec 7.6, execution and memory dependency chains).
        self.capturer._barrier(nxt, cb, vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT, 0,
                               vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
        by_buffer: dict[int, list] = {}
        for src, offset, dst, nbytes in regions:
            key = int(ffi.cast("uintptr_t", src))
            by_buffer.setdefault(key, [src, []])[1].append({"srcOffset": offset, "dstOffset": base + dst,
                                                             "size": nbytes})
        for src, rs in by_buffer.values():
            nxt.vkCmdCopyBuffer(cb, src, buf.buffer, len(rs), ffi.new("VkBufferCopy[]", rs))
        # Host reads see the copy; a later write to the indices, ordered after VERTEX_INPUT by the
        # application's own barrier, is ordered after the copy too (write-after-read: execution only).
        self.capturer._barrier(nxt, cb, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                               vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_VERTEX_INPUT_BIT,
                               vk.VK_ACCESS_HOST_READ_BIT)
        if labelled:
            self.labeller.pop(dev, cb)
        return Capture(base, size, CONTENT_KIND, len(part.draws), tag=tag, draws=tuple(part.draws))


def register(hooks, state, labeller, capturer, content: bool) -> None:
    hooks.bind(IndexBindings(state))
    if content:
        hooks.bind(ContentMetrics(state, labeller, capturer))

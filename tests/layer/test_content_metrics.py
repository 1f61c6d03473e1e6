"""layer/content.py's index metrics on hand-built index buffers, against hand counts and an independent
reference: a quad strip (known reuse), the Khronos validation layer's best and worst cases for its
post-transform-cache-thrashing check, a randomly shuffled grid mesh; and `decode`, which turns a pass's
copied index data into its annex `content` field. No GPU.
"""
from __future__ import annotations

import numpy as np

from tessera.layer.content import CACHE_ENTRIES, DrawRecord, decode, index_metrics, metrics_of, shaded_vertices


def reference_lru(indices, entries: int) -> int:
    """Misses of an LRU cache of `entries`, the plain way: a list, most recent last."""
    cache: list[int] = []
    misses = 0
    for i in indices:
        if i in cache:
            cache.remove(i)
        else:
            misses += 1
            if len(cache) == entries:
                cache.pop(0)
        cache.append(i)
    return misses


def quad_strip(quads: int) -> np.ndarray:
    """A strip of `quads` quads as a triangle list: vertex 2i on top, 2i + 1 below, two triangles per quad."""
    out = []
    for i in range(quads):
        a, b, c, d = 2 * i, 2 * i + 1, 2 * i + 2, 2 * i + 3
        out += [a, b, c, c, b, d]
    return np.array(out, dtype=np.uint16)


def grid(n: int) -> np.ndarray:
    """An n x n vertex grid's (n-1)^2 quads as triangles, row by row, as (triangles, 3)."""
    tris = []
    for y in range(n - 1):
        for x in range(n - 1):
            v = y * n + x
            tris += [(v, v + n, v + 1), (v + 1, v + n, v + n + 1)]
    return np.array(tris, dtype=np.uint32)


def test_the_model_is_the_validation_layers() -> None:
    assert CACHE_ENTRIES == 32


def test_quad_strip_shades_each_vertex_once() -> None:
    m = index_metrics(quad_strip(100))
    # 600 indices, 200 triangles, vertices 0..201; each vertex is used within two adjacent quads, well
    # inside 32 entries: shaded once. Consecutive steps: per quad 1,1,0,1,2 and 1 to the next quad.
    assert m == {"indices": 600, "primitives": 200, "unique_vertices": 202, "shaded_vertices": 202,
                 "index_span": 202, "mean_index_delta": 1.0}


def test_validation_layer_cases() -> None:
    # its worst case: 0..127 again and again (every index evicted before it comes back); its best: each
    # index 16 times in a row
    worst = np.tile(np.arange(128, dtype=np.uint16), 15)
    m = index_metrics(worst)
    assert (m["indices"], m["unique_vertices"], m["shaded_vertices"], m["index_span"]) == (1920, 128, 1920, 128)
    assert m["unique_vertices"] / m["shaded_vertices"] <= 0.5            # the layer's thrashing threshold
    best = np.repeat(np.arange(128, dtype=np.uint16), 16)
    m = index_metrics(best)
    assert (m["unique_vertices"], m["shaded_vertices"]) == (128, 128)
    # a cycle that fits the cache: only the first pass misses
    assert shaded_vertices(np.tile(np.arange(32), 10)) == 32 and shaded_vertices(np.tile(np.arange(33), 10)) == 330


def test_shuffled_mesh_against_the_reference() -> None:
    tris = grid(24)                                    # 576 vertices, 1058 triangles
    ordered = tris.reshape(-1)
    rng = np.random.default_rng(28)
    shuffled = tris[rng.permutation(len(tris))].reshape(-1)
    for indices in (ordered, shuffled):
        m = index_metrics(indices)
        assert m["unique_vertices"] == 576 == len(set(indices.tolist()))
        assert m["shaded_vertices"] == reference_lru(indices.tolist(), CACHE_ENTRIES)
        assert m["primitives"] == 1058 and m["index_span"] == 576
    hit_ordered = 576 / index_metrics(ordered)["shaded_vertices"]
    hit_shuffled = 576 / index_metrics(shuffled)["shaded_vertices"]
    # row by row, the two rows a strip of quads touches (48 vertices) do not quite fit 32 entries: some
    # re-shading; shuffled, most triangles miss on every corner
    assert hit_ordered > 0.5 >= hit_shuffled
    # consecutive indices jump a row (24) inside each triangle when ordered, anywhere when shuffled
    assert index_metrics(shuffled)["mean_index_delta"] > 4 * index_metrics(ordered)["mean_index_delta"]


def test_bytes_and_decode() -> None:
    strip = quad_strip(10)
    worst = np.tile(np.arange(128, dtype=np.uint32), 3)
    assert metrics_of(strip.tobytes(), 2) == index_metrics(strip)
    assert metrics_of(worst.tobytes(), 4) == index_metrics(worst)
    assert metrics_of(worst.tobytes(), 4) is metrics_of(worst.tobytes(), 4)     # cached by digest
    data = strip.tobytes() + worst.tobytes()
    draws = [DrawRecord(0, False, 3, 2), DrawRecord(1, True, strip.size, 1, index_bytes=2, copied=0),
             DrawRecord(2, True, worst.size, 4, index_bytes=4, copied=strip.nbytes),
             DrawRecord(3, True, 6, 1)]      # not copied (e.g. no index buffer known): no metrics
    got = decode(data, draws)
    assert got[0] == {"draw": 0, "indexed": False, "count": 3, "instances": 2, "primitives": 1,
                      "unique_vertices": 3, "shaded_vertices": 3, "index_span": 3}
    assert got[1]["unique_vertices"] == 22 and got[1]["shaded_vertices"] == 22 and got[1]["draw"] == 1
    assert got[1]["cache_entries"] == CACHE_ENTRIES and "cache_entries" not in got[0]
    assert (got[2]["instances"], got[2]["unique_vertices"], got[2]["shaded_vertices"]) == (4, 128, 384)
    assert got[3] == {"draw": 3, "indexed": True, "count": 6, "instances": 1}


def test_indirect_draws_are_numbered_among_the_pass_draws() -> None:
    """render_passes.py gives an indirect draw's capture the pass's number of its first record (two direct
    draws before it: 2), and indirect.py's read-back numbers each record from there (ANNEX `draws` `draw`),
    so hostd's content metrics place them among the direct draws."""
    import struct
    from types import SimpleNamespace as NS

    from tessera.layer.indirect import Capturer
    from tessera.layer.render_passes import RenderPasses
    from tessera.layer.trackers import Capture, CommandBufferTracker
    from tessera.schemas.messages import problems
    from tessera.schemas.frames import MessageType
    from tessera.vkapi.render_passes import PassInfo
    from tessera.vkapi.vkconst import vk

    t = CommandBufferTracker(1, 1, vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1)
    state = NS(command_buffer=lambda dev, cb: t)
    labeller = NS(next_tag=iter(range(1, 9)).__next__, push=lambda *a: True, pop=lambda *a: None)
    made = []
    capture = NS(draws=lambda dev, cb, buf, off, n, stride, kind: made.append(Capture(0, 16 * n, kind, n)) or made[-1])
    passes = RenderPasses(state, labeller, capture)
    dev = NS(address=0xD0)
    passes._start(dev, t, 1, PassInfo("vkCmdBeginRendering", 0, 64, 64, 1, 1, [], 0, 0, True))
    passes.before_vkCmdDraw(dev, 1, 3, 1, 0, 0)
    passes.before_vkCmdDrawIndexed(dev, 1, 6, 1, 0, 0, 0)
    passes.before_vkCmdDrawIndirect(dev, 1, 0xB, 0, 2, 16)
    passes.after_vkCmdEndRendering(dev, None, 1)
    [cap] = made
    assert (cap.first_draw, cap.count) == (2, 2)
    data = struct.pack("<8I", 6, 2, 0, 0, 3, 1, 0, 0)
    capturer = Capturer.__new__(Capturer)
    got = capturer._decode(NS(capture=NS(read=lambda offset, size: data[offset:offset + size])), cap)
    assert got == {"draws": [{"vertex_count": 6, "instance_count": 2, "first_vertex": 0, "first_instance": 0, "draw": 2},
                             {"vertex_count": 3, "instance_count": 1, "first_vertex": 0, "first_instance": 0, "draw": 3}]}
    assert problems(MessageType.ANNEX, got) == []

"""The render graph (hostd/advice/graph.py) on hand-built workloads: edges from each reader to the last
writer, each write's fate, the flags, and bandwidth per attachment by the driver's own formula."""
from __future__ import annotations

from test_advice_rules import att, dispatch, rp, xfer

from tessera.hostd.advice.graph import attachment_bytes, build, decode_args, texel_bytes
from tessera.vkapi.render_passes import attachment_bytes as driver_formula
from tessera.vkapi.resources import texel_bytes as driver_texel
from tessera.vkapi.transfers import ENDPOINTS, TRANSFERS
from tessera.vkapi.vkconst import vk


def _graph(*works):
    for i, w in enumerate(works):
        w.index = i
    return build(list(works))


def test_edges_and_fates() -> None:
    g = _graph(rp([att("clear", "store"), att("clear", "store", fmt="D24_UNORM_S8_UINT", aspect="depth_stencil")],
                  ["0xc", "0xd"]),
               rp([att("load", "store")], ["0xc"], draws=0),
               xfer("copy image to buffer", "0xc", "0xbuf"),
               rp([att("clear", "dont_care")], ["0xc"], draws=0))
    first, second, copy, last = g.nodes
    assert [(e.src, e.dst, e.resource) for e in g.edges] == [(0, 1, "0xc"), (1, 2, "0xc")]
    assert first.accesses[0].readers == [1] and first.accesses[0].fate == "read"
    assert first.accesses[1].fate == "end" and "stored-unread:1" in first.flags        # depth: no reader
    assert second.accesses[0].readers == [2]
    assert "outputs-unread" in last.flags                                              # stores nothing
    assert "outputs-unread" not in first.flags and "outputs-unread" not in second.flags
    assert copy.accesses[0].writer == 1


def test_loaded_unwritten_flag() -> None:
    g = _graph(rp([att("load", "store")], ["0xa"]))
    assert g.nodes[0].flags == ["loaded-unwritten:0"]
    assert [(e.src, e.dst) for e in g.edges] == [(None, 0)]


def test_bandwidth_is_the_drivers_formula() -> None:
    """Per attachment: the read-in (LOAD), write-back (STORE) and resolve bytes; each equals the
    driver's attachment_bytes of (area, layers, texel bytes of the format, samples)."""
    g = _graph(rp([att("load", "store", fmt="R16G16B16A16_SFLOAT", samples=4),
                   att("dont_care", "store", aspect="resolve", resolve=True)], ["0xm", "0xr"], size=(100, 30)))
    ms, res = g.nodes[0].accesses
    assert ms.read_bytes == ms.write_bytes == 100 * 30 * 8 * 4 and ms.resolve_bytes == 0
    assert res.resolve_bytes == 100 * 30 * 4 and res.read_bytes == res.write_bytes == 0
    fmt = vk.VK_FORMAT_R16G16B16A16_SFLOAT
    assert ms.read_bytes == driver_formula(3000, 1, driver_texel(fmt), 4)
    assert texel_bytes("R16G16B16A16_SFLOAT") == driver_texel(fmt) == 8
    assert texel_bytes("format 999999") == driver_texel(999999)          # unknown: the driver's default
    assert attachment_bytes({"width": 8, "height": 8, "layers": 6}, att(fmt="D32_SFLOAT")) == 8 * 8 * 6 * 4


def test_args_decoded() -> None:
    meta = decode_args({"width": "64", "attachments": '[{"aspect":"color","format":"R8_UNORM"}]', "kind": "render_pass",
                        "groups": "[1,2,3]", "draw_call_count": "x"})
    assert meta == {"width": 64, "attachments": [{"aspect": "color", "format": "R8_UNORM"}], "kind": "render_pass",
                    "groups": [1, 2, 3]}


def test_every_transfer_names_its_endpoints() -> None:
    """The layer describes each transfer's source and destination (vkapi/transfers.py ENDPOINTS)."""
    assert set(ENDPOINTS) == set(TRANSFERS)
    assert ENDPOINTS["vkCmdCopyImageToBuffer"](5, 0, 7, 1, None) == (5, 7)
    assert ENDPOINTS["vkCmdClearColorImage"](9, 0, None, 1, None) == (0, 9)

    class Info:
        srcImage, dstImage = 3, 4
    assert ENDPOINTS["vkCmdBlitImage2"](Info()) == (3, 4)


COLOUR_ONLY = 0x10                           # VkImageUsageFlagBits: COLOR_ATTACHMENT (no descriptor can read it)


def _presented(presents, *works):
    for i, w in enumerate(works):
        w.index = i
    return build(list(works), presents)


def test_a_present_reads_the_last_write_of_the_image_it_shows() -> None:
    """Frame 0 renders an offscreen image and the swapchain image 0xs; its present shows 0xs. Frame 1
    writes 0xs again. The present reads pass 1's write only: pass 0 wrote what nobody read or showed."""
    g = _presented([(0, ["0xs"]), (1, ["0xs"])],
                   rp([att("clear", "store")], ["0xoff"], usage=[COLOUR_ONLY]),
                   rp([att("clear", "store")], ["0xs"], usage=[COLOUR_ONLY]),
                   rp([att("clear", "store")], ["0xs"], usage=[COLOUR_ONLY], frame=1))
    off, first, second = g.nodes
    assert [(p.frame, p.image, p.writer) for p in g.presents] == [(0, "0xs", 1), (1, "0xs", 2)]
    assert first.accesses[0].presented == [0] and first.accesses[0].fate == "read"
    assert second.accesses[0].presented == [1]
    assert off.accesses[0].fate == "end" and off.flags == ["outputs-unread", "stored-unread:0"]
    assert first.flags == second.flags == []
    assert g.to_json()["presents"][0] == {"frame": 0, "image": "0xs", "from": 1}


def test_without_presents_a_colour_images_last_write_is_taken_as_shown() -> None:
    g = _presented(None, rp([att("clear", "store")], ["0xoff"], usage=[COLOUR_ONLY]),
                   rp([att("clear", "store")], ["0xs"], usage=[COLOUR_ONLY]))
    assert g.presents == [] and [n.flags for n in g.nodes] == [[], []]
    # a present that shows another image changes that: both writes are now unread
    g = _presented([(0, ["0xother"])], rp([att("clear", "store")], ["0xoff"], usage=[COLOUR_ONLY]))
    assert g.nodes[0].flags == ["outputs-unread", "stored-unread:0"] and g.presents[0].writer is None


def test_a_present_of_a_later_frame_does_not_read_an_earlier_frames_overwritten_write() -> None:
    """Frame 0 writes 0xs twice (the first overwritten by a clear before the present), frame 1's present
    shows it unchanged: the second write is read (by both presents), the first is overwritten."""
    g = _presented([(0, ["0xs"]), (1, ["0xs"])],
                   rp([att("clear", "store")], ["0xs"], usage=[COLOUR_ONLY], draws=0),
                   rp([att("clear", "store")], ["0xs"], usage=[COLOUR_ONLY]))
    a, b = g.nodes
    assert a.accesses[0].fate == "overwritten" and a.accesses[0].presented == []
    assert b.accesses[0].presented == [0, 1] and b.flags == []
    assert "outputs-unread" in a.flags


SAMPLED_COLOUR = 0x14                        # COLOR_ATTACHMENT | SAMPLED: a descriptor may read it


def _reading(work, reads=(), storage=()):
    """`work` with the images the layer saw its draws or dispatch read through descriptors (--content)."""
    work.resources = {**work.resources, "reads": list(reads), "storage": list(storage)}
    return work


def test_a_shadow_map_sampled_by_a_later_pass_is_an_edge() -> None:
    """Pass 0 stores a depth map; pass 1 (tracked draws) samples it: an edge 0 -> 1, the store is read,
    nothing is flagged. Without the layer's reads the same pass is opaque: no edge, nothing flagged either."""
    shadow = att("clear", "store", fmt="D32_SFLOAT", aspect="depth")
    g = _graph(rp([shadow], ["0xsh"], usage=[0x24]),
               _reading(rp([att("clear", "store")], ["0xs"]), reads=["0xsh"]))
    first, second = g.nodes
    assert [(e.src, e.dst, e.resource, e.access) for e in g.edges] == [(0, 1, "0xsh", 1)]
    assert second.accesses[1].role == "descriptor" and second.accesses[1].writer == 0
    assert first.accesses[0].readers == [1] and first.flags == [] and not second.work.opaque
    g = _graph(rp([shadow], ["0xsh"], usage=[0x24]), rp([att("clear", "store")], ["0xs"]))
    assert g.edges == [] and g.nodes[1].work.opaque and g.nodes[0].flags == []


def test_with_tracked_reads_a_sampleable_store_nobody_samples_is_unread() -> None:
    """A sampleable depth store, then passes whose draws the layer tracked (they sample something else):
    the store is dead (stored-unread); an untracked pass in between keeps it (opaque)."""
    shadow = att("clear", "store", fmt="D32_SFLOAT", aspect="depth")
    g = _graph(rp([shadow], ["0xsh"], usage=[0x24]),
               _reading(rp([att("clear", "store")], ["0xs"]), reads=["0xtex"]))
    assert g.nodes[0].flags == ["outputs-unread", "stored-unread:0"]
    assert g.nodes[1].flags == []                    # a read with no writer (an uploaded texture) is not flagged
    g = _graph(rp([shadow], ["0xsh"], usage=[0x24]), rp([att("clear", "store")], ["0xs"]))
    assert g.nodes[0].flags == []


def test_a_storage_image_is_read_and_maybe_written_never_unread() -> None:
    """A dispatch with a storage image: it reads what the pass before stored and writes it (a later LOAD
    reads the dispatch's write, not 'unwritten'); its own write is never called unread."""
    g = _graph(rp([att("clear", "store")], ["0xi"], usage=[0x18]),
               _reading(dispatch((4, 4, 1), (16, 1, 1), 3000), storage=["0xi"]),
               rp([att("load", "store")], ["0xi"], draws=0),
               xfer("clear image", dst="0xi"))
    p0, d, p2, _ = g.nodes
    assert [(e.src, e.dst) for e in g.edges] == [(0, 1), (1, 2)]
    assert d.accesses[0].role == "storage" and d.accesses[0].fate == "read" and d.flags == []
    assert p2.flags == ["outputs-unread", "stored-unread:0"]          # not loaded-unwritten: the dispatch wrote it

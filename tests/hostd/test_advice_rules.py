"""The advice rules (hostd/advice/rules.py) on hand-built render graphs: each rule fires where it should,
with the cost computed by hand from the emulated Mali-G720's figures (10 cores, 16-wide warps,
1000 MHz, JOB_SETUP_CYCLES 2000 = 2000 ns, 32 bytes/ns of memory), and stays quiet where it should not.

A 64x64 R8G8B8A8 attachment moves 64*64*4 = 16384 bytes per load or store: 16384/32 = 512 ns = 512 cycles.
"""
from __future__ import annotations

import pytest

from tessera.hostd.advice.gpu import emulated
from tessera.hostd.advice.graph import Phase, Work, build
from tessera.hostd.advice.rules import RULES, RULES_BY_ID, SEVERITIES, advise

GPU = emulated("Mali-G720 (emulated)")
RGBA = "R8G8B8A8_UNORM"
PASS_BYTES = 64 * 64 * 4
DEPTH_USAGE, SAMPLED, TRANSIENT = 0x20, 0x4, 0x40      # VkImageUsageFlagBits: DEPTH_STENCIL_ATTACHMENT, SAMPLED, TRANSIENT


def att(load="clear", store="store", fmt=RGBA, aspect="color", samples=1, resolve=False) -> dict:
    return {"aspect": aspect, "format": fmt, "samples": samples, "load_op": load, "store_op": store,
            "resolve": resolve}


def rp(atts, images, draws=1, size=(64, 64), labels=("scene",), submit=1, binning=(0, 1000), main=(1000, 3000),
       frame=0, usage=None) -> Work:
    w, h = size
    return Work(0, "render_pass", "Render pass", frame, labels, None, submit,
                {"width": w, "height": h, "layers": 1, "draw_call_count": draws, "attachments": atts,
                 "attachment_usage": usage if usage is not None else [-1] * len(atts)},
                {"attachments": list(images)},
                [Phase("binning", "non-fragment", binning[0], binning[1] - binning[0]),
                 Phase("main", "fragment", main[0], main[1] - main[0])])


def xfer(subtype, src=None, dst=None, duration=3000, nbytes=16384, kind="image_transfer", frame=0) -> Work:
    res = {k: v for k, v in (("src", src), ("dst", dst)) if v}
    return Work(0, kind, subtype, frame, (), None, 1, {"subtype": subtype, "bytes": nbytes}, res,
                [Phase(subtype, "transfer", 0, duration)])


def dispatch(groups, size, duration) -> Work:
    return Work(0, "dispatch", "Dispatch", 0, ("compute",), None, 1, {"groups": list(groups), "group_size": list(size)},
                {}, [Phase("compute", "non-fragment", 0, duration)])


def findings(*works, rule: str):
    for i, w in enumerate(works):
        w.index = i
    return [f for f in advise(build(list(works)), GPU) if f.rule == rule]


def test_the_table() -> None:
    assert len(RULES) >= 15 and len(RULES_BY_ID) == len(RULES)
    assert {r.id for r in RULES if r.severity == "info"} == {"too-many-passes", "small-transfers", "high-overdraw",
                                                                  "overdraw-hotspot",
                                                                  "small-allocations"}
    assert all(r.severity in SEVERITIES for r in RULES)
    assert GPU.warp_width == 16 and GPU.job_setup_ns == 2000 and GPU.memory_ns(PASS_BYTES) == 512


def test_load_undefined() -> None:
    [f] = findings(rp([att("load")], ["0xa"]), xfer("copy image to buffer", "0xa", "0xb"), rule="load-undefined")
    assert (f.saves_bytes, f.saves_ns, f.saves_cycles, f.attachment, f.frame) == (PASS_BYTES, 512, 512, 0, 0)
    assert f.label_path == "scene" and "UNASSIGNED-BestPractices-vkCmdBeginRenderPass-attachment-needs-readback" in f.vvl
    # written earlier (by a transfer) or by an opaque dispatch before: quiet
    assert findings(xfer("copy buffer to image", "0xbuf", "0xa"), rp([att("load")], ["0xa"]), rule="load-undefined") == []
    assert findings(dispatch((1, 1, 1), (16, 1, 1), 3000), rp([att("load")], ["0xa"]), rule="load-undefined") == []
    # a pass that stored DONT_CARE left it undefined (the validation layer's StoreOpDontCareThenLoadOpLoad)
    [f] = findings(rp([att("clear", "store")], ["0xa"], draws=0), rp([att("load", "dont_care")], ["0xa"], draws=0),
                   rp([att("load")], ["0xa"], draws=0), rule="load-undefined")
    assert (f.node, f.saves_bytes) == (2, PASS_BYTES)


def test_clear_then_load() -> None:
    [f] = findings(xfer("clear image", dst="0xa", duration=2500), rp([att("load")], ["0xa"]), rule="clear-then-load")
    assert (f.saves_bytes, f.saves_ns) == (PASS_BYTES, 2500 + 512)
    assert findings(xfer("clear image", dst="0xa"), rp([att("clear")], ["0xa"]), rule="clear-then-load") == []


def test_redundant_clear() -> None:
    [f] = findings(xfer("clear image", dst="0xa", duration=2500), rp([att("dont_care")], ["0xa"]), rule="redundant-clear")
    assert (f.saves_bytes, f.saves_ns, f.kind) == (0, 2500, "image_transfer")
    # a draw in between may sample the cleared image: quiet
    assert findings(xfer("clear image", dst="0xa"), rp([att("clear")], ["0xb"], draws=2), rp([att("clear")], ["0xa"]),
                    rule="redundant-clear") == []


def test_store_overwritten() -> None:
    [f] = findings(rp([att("clear", "store")], ["0xa"]), rp([att("clear", "store")], ["0xa"]),
                   xfer("copy image to buffer", "0xa", "0xb"), rule="store-overwritten")
    assert (f.saves_bytes, f.saves_ns, f.node) == (PASS_BYTES, 512, 0)
    # read in between by a transfer: quiet
    assert findings(rp([att("clear", "store")], ["0xa"]), xfer("copy image to buffer", "0xa", "0xb"),
                    rp([att("clear", "store")], ["0xa"]), rule="store-overwritten") == []


def test_depth_store_unread() -> None:
    depth = att("clear", "store", fmt="D32_SFLOAT", aspect="depth_stencil")
    [f] = findings(rp([att(), depth], ["0xc", "0xd"]), xfer("copy image to buffer", "0xc", "0xb"),
                   rule="depth-store-unread")
    assert (f.saves_bytes, f.saves_ns, f.attachment) == (PASS_BYTES, 512, 1)      # D32: 4 bytes per texel
    # a later pass with draws may sample the depth image (a shadow map): quiet
    assert findings(rp([att(), depth], ["0xc", "0xd"]), rp([att()], ["0xe"], draws=1), rule="depth-store-unread") == []
    # ... unless the image cannot be sampled (no SAMPLED, STORAGE or INPUT_ATTACHMENT usage)
    [f] = findings(rp([att(), depth], ["0xc", "0xd"], usage=[-1, DEPTH_USAGE]), rp([att()], ["0xe"], draws=1),
                   rule="depth-store-unread")
    assert f.saves_bytes == PASS_BYTES
    assert findings(rp([att(), depth], ["0xc", "0xd"], usage=[-1, DEPTH_USAGE | SAMPLED]), rp([att()], ["0xe"]),
                    rule="depth-store-unread") == []


def test_non_transient_attachment() -> None:
    depth = att("clear", "dont_care", fmt="D32_SFLOAT", aspect="depth_stencil")
    [f] = findings(rp([att(), depth], ["0xc", "0xd"], usage=[-1, DEPTH_USAGE]),
                   rp([att("load"), depth], ["0xc", "0xd"], usage=[-1, DEPTH_USAGE]), rule="non-transient-attachment")
    assert (f.saves_bytes, f.saves_ns, f.attachment, f.node) == (PASS_BYTES, 0, 1, 0)      # memory, not time
    # transient, stored, or its usage unknown: quiet
    assert findings(rp([att(), depth], ["0xc", "0xd"], usage=[-1, DEPTH_USAGE | TRANSIENT]),
                    rule="non-transient-attachment") == []
    assert findings(rp([att(), {**depth, "store_op": "store"}], ["0xc", "0xd"], usage=[-1, DEPTH_USAGE]),
                    rule="non-transient-attachment") == []
    assert findings(rp([att(), depth], ["0xc", "0xd"]), rule="non-transient-attachment") == []


def test_msaa_stored() -> None:
    [f] = findings(rp([att(samples=4), att("dont_care", aspect="resolve", resolve=True)], ["0xm", "0xr"]),
                   rule="msaa-stored")
    assert (f.saves_bytes, f.saves_ns) == (4 * PASS_BYTES, 2048)
    assert findings(rp([att(samples=4, store="dont_care"), att("dont_care", aspect="resolve", resolve=True)],
                       ["0xm", "0xr"]), rule="msaa-stored") == []


def test_resolve_transfer() -> None:
    [f] = findings(rp([att(samples=4)], ["0xm"]), xfer("resolve image", "0xm", "0xr", duration=4000),
                   rule="resolve-transfer")
    assert (f.saves_bytes, f.saves_ns) == (4 * PASS_BYTES, 4000 + 2048)
    assert findings(rp([att(samples=4)], ["0xm"]), xfer("copy image", "0xm", "0xr"), rule="resolve-transfer") == []


def test_transfer_then_load() -> None:
    [f] = findings(xfer("blit image", "0xs", "0xa"), rp([att("load")], ["0xa"]), rule="transfer-then-load")
    assert (f.saves_bytes, f.saves_ns) == (PASS_BYTES, 512)
    assert findings(xfer("copy buffer to image", "0xs", "0xa"), rp([att("load")], ["0xa"]),
                    rule="transfer-then-load") == []


def test_outputs_unread() -> None:
    [f] = findings(rp([att("clear", "dont_care")], ["0xa"], main=(1000, 4500)), rule="outputs-unread")
    assert (f.saves_ns, f.node) == (1000 + 3500, 0)
    assert findings(rp([att("clear", "store")], ["0xa"]), xfer("copy image to buffer", "0xa", "0xb"),
                    rule="outputs-unread") == []


def test_empty_pass() -> None:
    [f] = findings(rp([att()], ["0xa"], draws=0, main=(1000, 2600)), xfer("copy image to buffer", "0xa", "0xb"),
                   rule="empty-pass")
    assert f.saves_ns == 1000 + 1600
    assert findings(rp([att()], ["0xa"], draws=1), rule="empty-pass") == []


def test_pass_round_trip() -> None:
    [f] = findings(rp([att()], ["0xa"]), rp([att("load")], ["0xa"]), rule="pass-round-trip")
    assert (f.saves_bytes, f.saves_ns, f.node) == (2 * PASS_BYTES, 1024, 1)
    # another size, or something in between: quiet
    assert findings(rp([att()], ["0xa"]), rp([att("load")], ["0xa"], size=(32, 32)), rule="pass-round-trip") == []
    assert findings(rp([att()], ["0xa"]), xfer("fill buffer", dst="0xq", kind="buffer_transfer"),
                    rp([att("load")], ["0xa"]), rule="pass-round-trip") == []


def test_too_many_passes() -> None:
    [f] = findings(*[rp([att()], [f"0x{i}"]) for i in range(11)], rule="too-many-passes")
    assert (f.saves_ns, f.frame, f.node) == ((11 - 8) * 2 * 2000, 0, None)
    assert findings(*[rp([att()], [f"0x{i}"]) for i in range(8)], rule="too-many-passes") == []


def test_binning_serialised() -> None:
    # pass 1: binning 0-1000, main 1000-3000; pass 2's binning waits until 3000 though the tiler was free at 1000
    [f] = findings(rp([att()], ["0xa"]), rp([att()], ["0xb"], binning=(3000, 4000), main=(4000, 6000)),
                   rule="binning-serialised")
    assert (f.saves_ns, f.saves_cycles, f.node) == (2000, 2000, 1)
    # overlapped (binning of pass 2 right after pass 1's binning): quiet
    assert findings(rp([att()], ["0xa"]), rp([att()], ["0xb"], binning=(1000, 2000), main=(3000, 5000)),
                    rule="binning-serialised") == []


def test_workgroup_warp_waste() -> None:
    # 10x10x1 groups of 12x1x1: 12 threads fill one 16-wide warp, 4 idle lanes each: 400 of 1200 threads;
    # the shader time 12000 - 2000 ns, the idle lanes' share 10000 * 400 / 1200 = 3333.3 -> 3334 ns
    [f] = findings(dispatch((10, 10, 1), (12, 1, 1), 12000), rule="workgroup-warp-waste")
    assert (f.saves_ns, f.saves_cycles) == (3334, 3334) and "400 idle lanes" in f.what
    assert findings(dispatch((10, 10, 1), (8, 8, 1), 12000), rule="workgroup-warp-waste") == []


def test_small_transfers() -> None:
    small = [xfer("update buffer", dst="0xu", nbytes=128, kind="buffer_transfer") for _ in range(3)]
    [f] = findings(*small, rule="small-transfers")
    assert f.saves_ns == 2 * 2000 and f.severity == "info" and f.to_json()["severity"] == "info"
    assert findings(xfer("update buffer", dst="0xu", nbytes=128, kind="buffer_transfer"),
                    xfer("copy buffer", "0xs", "0xu", nbytes=65536, kind="buffer_transfer"),
                    rule="small-transfers") == []


def test_small_allocations() -> None:
    graph = build([rp([att()], ["0xa"])])
    # 24 small allocations (the planted app's), 3 of 1000 bytes among them: each leaves 4096 - 1000 bytes
    # of its page; the others page-sized
    counts = {"made": 25, "small": 24, "small_bytes": 3 * 1000 + 21 * 4096, "page_waste_bytes": 3 * 3096,
              "small_dedicated": 25, "small_dedicated_bytes": 730880}
    graph.allocations = [("Mali-G720 (emulated)", counts)]
    [f] = [f for f in advise(graph, GPU) if f.rule == "small-allocations"]
    assert (f.saves_bytes, f.saves_ns, f.severity, f.kind, f.frame, f.node) == (9288, 0, "info", "device", None, None)
    assert f.workload == "device Mali-G720 (emulated)" and "24 of the 25" in f.what
    assert "UNASSIGNED-BestPractices-vkAllocateMemory-small-allocation" in f.vvl
    # one small allocation cannot be merged with anything: quiet; no counts (a merged trace alone): quiet
    graph.allocations = [("Mali-G720 (emulated)", dict(counts, small=1))]
    assert [f for f in advise(graph, GPU) if f.rule == "small-allocations"] == []
    graph.allocations = []
    assert [f for f in advise(graph, GPU) if f.rule == "small-allocations"] == []


@pytest.mark.parametrize("rule", [r.id for r in RULES])
def test_every_rule_is_tested(rule) -> None:
    import test_advice_content     # the content rules' tests (it imports this module's builders)

    names = set(globals()) | set(vars(test_advice_content))
    name = rule.replace("-", "_")
    assert f"test_{name}" in names or f"test_{name}_fires_with_its_cost" in names


def test_sorted_by_saving() -> None:
    works = [xfer("clear image", dst="0xa", duration=2500), rp([att("load")], ["0xa"]),
             dispatch((10, 10, 1), (12, 1, 1), 12000)]
    for i, w in enumerate(works):
        w.index = i
    found = advise(build(works), GPU)
    assert [f.saves_ns for f in found] == sorted((f.saves_ns for f in found), reverse=True)


def test_store_unpresented() -> None:
    """A colour store that no pass, transfer or present uses, in a session whose presents name their
    images: its write-back, 16384 bytes = 512 ns. Quiet when presented, read, or with no presents known."""
    def run(presents, *works):
        for i, w in enumerate(works):
            w.index = i
        return [f for f in advise(build(list(works), presents), GPU) if f.rule == "store-unpresented"]

    colour = [0x10]
    [f] = run([(0, ["0xs"])], rp([att("clear", "store")], ["0xoff"], usage=colour),
              rp([att("clear", "store")], ["0xs"], usage=colour))
    assert (f.node, f.attachment, f.resource, f.saves_bytes, f.saves_ns, f.saves_cycles) == (0, 0, "0xoff", PASS_BYTES,
                                                                                          512, 512)
    assert run([(0, ["0xs", "0xoff"])], rp([att("clear", "store")], ["0xoff"], usage=colour)) == []
    assert run(None, rp([att("clear", "store")], ["0xoff"], usage=colour)) == []
    assert run([(0, ["0xs"])], rp([att("clear", "store")], ["0xoff"], usage=colour),
               xfer("copy image to buffer", "0xoff", "0xbuf")) == []
    # an opaque draw after it that may sample it (usage unknown): not called unread
    assert run([(0, ["0xs"])], rp([att("clear", "store")], ["0xoff"]), rp([att("clear", "store")], ["0xs"])) == []
    # a multisampled store is msaa-stored's finding, not this one's
    assert run([(0, ["0xs"])], rp([att("clear", "store", samples=4)], ["0xms"], usage=colour)) == []


def _tracked(work, reads=()):
    work.resources = {**work.resources, "reads": list(reads), "storage": []}
    return work


def test_store_overwritten_of_a_sampleable_image_when_the_draws_between_are_tracked() -> None:
    """A sampleable colour store overwritten by the next pass: with the draws in between tracked (--content)
    and not sampling it, store-overwritten fires (16384 bytes = 512 ns); sampled, or untracked, it does not."""
    sampled = [0x14]
    [f] = findings(rp([att("clear", "store")], ["0xa"], usage=sampled),
                   _tracked(rp([att("clear", "store")], ["0xb"]), reads=["0xt"]),
                   _tracked(rp([att("clear", "store")], ["0xa"], usage=sampled)), rule="store-overwritten")
    assert (f.node, f.resource, f.saves_bytes, f.saves_ns) == (0, "0xa", PASS_BYTES, 512)
    assert findings(rp([att("clear", "store")], ["0xa"], usage=sampled),
                    _tracked(rp([att("clear", "store")], ["0xb"]), reads=["0xa"]),
                    _tracked(rp([att("clear", "store")], ["0xa"], usage=sampled)), rule="store-overwritten") == []
    assert findings(rp([att("clear", "store")], ["0xa"], usage=sampled), rp([att("clear", "store")], ["0xb"]),
                    _tracked(rp([att("clear", "store")], ["0xa"], usage=sampled)), rule="store-overwritten") == []


def test_descriptor_reads_are_not_loads() -> None:
    """Sampling what a copy or the previous pass of the same size wrote is no LOAD: neither transfer-then-load
    nor pass-round-trip nor load-undefined (a sampled texture nothing wrote) fire."""
    for rule in ("transfer-then-load", "pass-round-trip", "load-undefined", "clear-then-load"):
        assert findings(xfer("copy image", "0xsrc", "0xa"), rp([att("clear", "store")], ["0xa"]),
                        _tracked(rp([att("clear", "store")], ["0xb"]), reads=["0xa", "0xnew"]),
                        xfer("clear image", dst="0xc"), _tracked(rp([att("clear", "store")], ["0xd"]), reads=["0xc"]),
                        rule=rule) == [], rule

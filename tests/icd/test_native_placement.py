"""Placement plans in C (vkapi/runtime/event_packets.c, icd/placement_plans.NativePlacer) write exactly what
the same plans placed in Python write: every event packet byte for byte (times, ids, labels, render pass
instances, args), and the same scheduler state after, over frames of labelled passes, dispatches,
transfers and scoped and full barriers, with the queue's labels open on entry and tags of every length.
The C function is called in the built driver shim (make shims), loaded here with cffi's ABI mode."""
from __future__ import annotations

from types import SimpleNamespace

import cffi
import pytest

from tessera.icd import shim_spec
from tessera.icd import timeline as timeline_module
from tessera.icd.placement_plans import NativePlacer
from tessera.icd.profiles import DEFAULT_PROFILE, PROFILES
from tessera.icd.recording import Draw, Work
from tessera.icd.replay import ProductOps, ReplayedOps
from tessera.icd.timeline import Timeline, batch
from tessera.schemas.labels import tag_label
from tessera.schemas.perfetto import read_packets
from tessera.vkapi import paths
from tessera.vkapi.ops import FULL_BARRIER, LABEL_END, PASS_END, Barrier, LabelBegin, LabelInsert, PassBegin
from tessera.vkapi.render_passes import PassInfo


@pytest.fixture(scope="module")
def native(shims):
    ffi = cffi.FFI()
    ffi.cdef(shim_spec.PLACEMENT_CDEF)
    return ffi, ffi.dlopen(str(paths.BUILD_DIR / shim_spec.LIBRARY))


def _pass(width: int) -> PassInfo:
    return PassInfo("vkCmdBeginRendering", 0, width, 64, 1, 1, [], width * 64 * 4, width * 64 * 4, True)


def _product() -> SimpleNamespace:
    """One recording's ops: a frame label around labelled passes (their draws), dispatches, a transfer,
    barriers and a marker; each workload in its own t<tag> label, as the layer records them."""
    ops, tag_ops = [LabelBegin("frame ü")], []

    def tagged(*inner) -> None:
        tag_ops.append((len(ops), LabelBegin, len(tag_ops)))
        ops.extend([LabelBegin("t0"), *inner, LABEL_END])

    for i in range(3):
        ops.append(LabelBegin(f"pass {i}"))
        tagged(PassBegin(_pass(64 + 32 * i)), Draw(3 * (i + 1), i + 1, False, 2.0, 5.5, count=i + 1), PASS_END)
        ops.append(LABEL_END)
    ops.append(Barrier((frozenset({"fragment"}), frozenset({"compute"}))))
    for i in range(2):
        tagged(Work("dispatch", "compute", "vkCmdDispatch", {"groups": (i + 1, 1, 1)}, invocations=64 * (i + 1)))
    ops.append(LabelInsert("marker"))
    ops.append(FULL_BARRIER)
    tagged(Work("transfer", "fill buffer", "vkCmdFillBuffer", {"note": "long " * 4000}, nbytes=4096))   # 20 KB args
    ops.append(LabelBegin("t99"))   # an application label that looks like a tag, left open
    return SimpleNamespace(ops=tuple(ops), tag_ops=tuple(tag_ops))


def _frames(product, count: int) -> list[ReplayedOps]:
    out, n = [], len(product.tag_ops)
    for f in range(count):
        tags = [(10 ** (f % 20)) + k for k in range(n)]   # tag texts from 1 to 20 digits long
        ops = ReplayedOps(product.ops)
        for i, kind, k in product.tag_ops:
            ops[i] = kind(tag_label(tags[k]))
        ops.product, ops.tags = product, tags
        out.append(ops)
    return out


class _Counting(NativePlacer):
    placed = 0

    def place_all(self, *args) -> int:
        done = super().place_all(*args)
        self.placed += done
        return done


def _run(tmp_path, how: str, native, monkeypatch, frames: list, entries,
         one_batch: bool = False) -> tuple[list[bytes], tuple, tuple]:
    """Place `frames` (one recording each) after the queue labels entries(f); `how`: "walk" (no plans),
    "python" (plans placed in Python) or "c". `one_batch`: every frame's recording in one batch of one submit
    (each its own command buffer), after entries(0)."""
    clock = iter(range(10 ** 15, 2 * 10 ** 15, 7_777_777))   # each submit's host time, the same in every run
    monkeypatch.setattr(timeline_module, "boottime_ns", lambda: next(clock))
    timeline = Timeline(PROFILES[DEFAULT_PROFILE], tmp_path / how)
    if how == "c":
        timeline.native = _Counting(*native)
    if how == "walk":
        timeline.plans.of = lambda placer, ops, entry: (None, [])
    queue = SimpleNamespace(device=SimpleNamespace(physical=object()), labels=[])
    if one_batch:
        queue.labels[:] = entries(0)
        timeline.submit(queue, [batch([SimpleNamespace(ops=ops, address=0xC0FFEE + f) for f, ops in enumerate(frames)],
                                      [], [])])
        timeline.settle(block=True)
    for f, ops in enumerate([] if one_batch else frames):
        queue.labels[:] = entries(f)
        timeline.submit(queue, [batch([SimpleNamespace(ops=ops, address=0xC0FFEE)], [], [])])
        timeline.settle(block=True)
    timeline.trace.flush()
    events = [p.SerializeToString() for p in read_packets(timeline.trace.path) if p.HasField("gpu_render_stage_event")]
    (gpu_id, gpu), = timeline._gpus.values()
    (order,) = timeline._orders.values()
    state = (dict(gpu.free_at), dict(order.floors), dict(order.ends), timeline._render_pass_instances,
             timeline.trace._next_event, tuple(queue.labels))
    placed = (timeline.plans.placed, timeline.native.placed if how == "c" else None)
    return events, state, placed


def _three_ways(tmp_path, native, monkeypatch, frames, entries, one_batch: bool = False) -> tuple:
    runs = {how: _run(tmp_path, how, native, monkeypatch, frames, entries, one_batch)
            for how in ("walk", "python", "c")}
    assert runs["c"][0] == runs["python"][0] == runs["walk"][0]   # every packet, byte for byte
    assert runs["c"][1] == runs["python"][1] == runs["walk"][1]   # the scheduler and the queue's labels after
    return runs


def test_c_places_and_encodes_every_event_as_python_and_the_walk_do(tmp_path, native, monkeypatch):
    """A recording made again 24 times with new tags (ReplayedOps), after a constant queue label."""
    runs = _three_ways(tmp_path, native, monkeypatch, _frames(_product(), 24), lambda f: ["queue label"])
    events, state, _ = runs["c"]
    assert len(events) == 24 * 9   # 3 passes x 2 phases, 2 dispatches, 1 fill per frame
    assert state[-1][-2:] == ("frame ü", "t99")   # the queue's labels left open, as the walk leaves them
    assert runs["c"][2] == (24, 24) and runs["python"][2] == (24, None) and runs["walk"][2] == (0, None)


def test_a_batch_of_recordings_is_placed_in_one_call_and_what_c_refuses_in_python(tmp_path, native, monkeypatch):
    """ProductOps of 14 recordings in one batch (as a frame of many command buffers submits them): one stretch
    for C (tessera_place_all). Each leaves two labels open, so the label stack grows; after a queue label of
    3,900 bytes the later ones pass C's 4 KiB stack and C refuses them, one by one, in the middle of the
    stretch: Python places those, and everything comes out as the walk writes it."""
    product = _product()
    lazy = [ProductOps(product, ops.tags) for ops in _frames(product, 14)]
    runs = _three_ways(tmp_path, native, monkeypatch, lazy, lambda f: ["q" * 3900], one_batch=True)
    events, state, (planned, in_c) = runs["c"]
    assert len(events) == 14 * 9 and len(state[-1]) == 1 + 14 * 2
    assert planned == 14 and 0 < in_c < 14   # some placed in C, the rest refused there and placed in Python
    (tmp_path / "short").mkdir()
    short = _three_ways(tmp_path / "short", native, monkeypatch, lazy, lambda f: ["queue label"], one_batch=True)
    assert short["c"][2] == (14, 14)
    (tmp_path / "long").mkdir()   # slots beyond C's 8 KiB scratch (allocated), a stack beyond its 4 KiB: Python
    long = _three_ways(tmp_path / "long", native, monkeypatch, lazy, lambda f: ["q" * 9000], one_batch=True)
    assert long["c"][2] == (14, 0)


def test_a_recording_read_without_its_hooks_places_as_one_made_again(tmp_path, native, monkeypatch):
    """ProductOps (icd/submit.py: a submit read from the kept product, its op list not made) place the events
    the ReplayedOps of the same product and tags place: from the plan, and walked (its list made then)."""
    product = _product()
    made = _frames(product, 12)
    lazy = [ProductOps(product, ops.tags) for ops in made]
    for how in ("walk", "c"):
        (tmp_path / "lazy").mkdir(exist_ok=True)
        (tmp_path / "made").mkdir(exist_ok=True)
        read = _run(tmp_path / "lazy", how, native, monkeypatch, lazy, lambda f: ["queue label"])
        again = _run(tmp_path / "made", how, native, monkeypatch, made, lambda f: ["queue label"])
        assert read[0] and read == again, how


def test_a_buffer_submitted_again_is_planned_from_its_second_placement(tmp_path, native, monkeypatch):
    """One op list submitted 24 times unchanged (a pre-recorded buffer), after queue labels that change each
    time, as the layer's s<submitID> wrapping makes them, some looking like t<tag> labels."""
    ops = list(_frames(_product(), 1)[0])   # a plain list: the buffer's own recording, not one made again
    runs = _three_ways(tmp_path, native, monkeypatch, [ops] * 24,
                       lambda f: [f"s{f + 1}"] + (["t500"] if f % 3 == 0 else []) + (["x"] * (f % 2)))
    assert runs["c"][2] == (23, 23)   # the first placement walks (seen once), the other 23 from plans


def test_a_damaged_plan_is_refused_and_changes_nothing(native):
    ffi, lib = native
    state = ffi.new("int64_t[16]", list(range(16)))
    out = ffi.new("uint8_t[]", 64)
    for plan in (b"", b"\x01\x00\x00\x00", b"\x01\x00\x00\x00" + b"\x00\x00" * 10 + b"\x07"):
        assert lib.tessera_place_events(plan, len(plan), b"", 0, state, out, 64) == -2
    assert list(state) == list(range(16))


def _a_native_plan(tmp_path) -> tuple[bytes, int, int]:
    """_native_plan of _product's recording, planned the first time it is placed (as the timeline makes it)."""
    from tessera.icd.placement_plans import _native_plan

    timeline = Timeline(PROFILES[DEFAULT_PROFILE], tmp_path)
    queue = SimpleNamespace(device=SimpleNamespace(physical=object()), labels=[])
    (ops,) = _frames(_product(), 1)
    timeline.submit(queue, [batch([SimpleNamespace(ops=ops, address=0xC0FFEE)], [], [])])
    timeline.settle(block=True)
    (plan,) = [p for p, _ in timeline.plans._made.values()]
    return _native_plan(plan, SimpleNamespace(tl=timeline, gpu_id=0), 0xC0FFEE)


def test_plans_with_any_byte_changed_are_placed_or_refused_never_overrun(tmp_path, native):
    """Every byte of a real plan changed in turn (and the plan cut short at every length): C places it or
    refuses it (-1, -2), writing nothing beyond `out` (a guard after it stays intact)."""
    ffi, lib = native
    blob, fixed, slot_tokens = _a_native_plan(tmp_path)
    texts = b"".join(len(t).to_bytes(2, "little") + t for t in (tag_label(k).encode() for k in range(1, 12)))
    bound = fixed + 2 * slot_tokens * 3
    guard = b"\xAB" * 64
    out = ffi.new("uint8_t[]", bound + len(guard))
    variants = [(blob[:n], texts) for n in range(0, len(blob), 7)]
    variants += [(blob[:i] + bytes([blob[i] ^ 0xFF]) + blob[i + 1:], texts) for i in range(0, len(blob), 3)]
    variants += [(blob, texts[:n]) for n in range(len(texts))]   # slot texts cut short, or missing
    for plan_bytes, slot_bytes in variants:
        ffi.memmove(out + bound, guard, len(guard))
        state = ffi.new("int64_t[16]")
        n = lib.tessera_place_events(plan_bytes, len(plan_bytes), slot_bytes, len(slot_bytes), state, out, bound)
        assert n in (-1, -2) or 0 <= n <= bound
        assert ffi.buffer(out + bound, len(guard))[:] == guard


def test_tessera_place_all_places_until_a_damaged_part_and_never_overruns(tmp_path, native):
    """tessera_place_all's texts (each recording's labels on entry, then its tags, which C labels) cut short at
    every length, or with a tag count over the slots' limit: C places the recordings before the damage (`placed`
    and the bytes returned agree with placing them one by one) and writes nothing beyond `out`."""
    from tessera.icd.placement_plans import _TAG_LAYOUTS

    ffi, lib = native
    blob, fixed, slot_tokens = _a_native_plan(tmp_path)
    n_tags = len(_product().tag_ops)
    part = (0).to_bytes(4, "little") + _TAG_LAYOUTS[n_tags].pack(n_tags, *[2 ** 64 - 1 - k for k in range(n_tags)])
    bound = 3 * (fixed + 2 * slot_tokens * 21)
    guard = b"\xAB" * 64
    out = ffi.new("uint8_t[]", bound + len(guard))
    plans = [ffi.from_buffer("uint8_t[]", blob)] * 3
    placed = ffi.new("size_t *")

    def place_all(texts: bytes) -> tuple[int, int]:
        ffi.memmove(out + bound, guard, len(guard))
        n = lib.tessera_place_all(plans, [len(blob)] * 3, 3, texts, len(texts), ffi.new("int64_t[16]"), out, bound,
                                  placed)
        assert ffi.buffer(out + bound, len(guard))[:] == guard
        return n, placed[0]

    whole = [place_all(part * k)[0] for k in range(4)]   # 0 to 3 recordings' parts whole
    assert whole[0] == 0 < whole[1] < whole[2] < whole[3]
    for cut in range(len(part) * 3):
        n, done = place_all((part * 3)[:cut])
        assert done == cut // len(part) and n == whole[done], cut
    too_many = (0).to_bytes(4, "little") + (257).to_bytes(4, "little") + bytes(8 * 257)
    assert place_all(part + too_many + part) == (whole[1], 1)

"""icd/counters.py: the Mali counters the timeline writes on each GPU event, against hand computations."""
from __future__ import annotations

import math

from tessera.icd import timing
from tessera.icd.profiles import PROFILES
from tessera.icd.recording import Draw, Work
from tessera.icd.timeline import PassRun
from tessera.vkapi.render_passes import PassInfo

from placing import placed_packets


def _events(tmp_path, key: str, works=(), passes=()):
    profile = PROFILES[key]
    packets = placed_packets(tmp_path, profile, works, passes)
    events = [(p.gpu_render_stage_event.duration,
               {d.name: float(d.value) for d in p.gpu_render_stage_event.extra_data if d.name.startswith("Mali")})
              for p in packets if p.HasField("gpu_render_stage_event")]
    descriptors = [p.gpu_counter_event.counter_descriptor for p in packets if p.HasField("gpu_counter_event")]
    return profile, events, descriptors


def test_dispatch_counts_its_invocations_warps_and_compute_cycles(tmp_path):
    groups, size = [20, 15, 1], [8, 8, 1]
    work = Work("dispatch", "compute", "vkCmdDispatch", {"groups": groups, "group_size": size},
                invocations=20 * 15 * 64, cycles=12.0)
    profile, [(dur, c)], _ = _events(tmp_path, "mali-g720", works=[work])
    assert c["MaliNonFragThread"] == 19200                              # = the dispatch size
    assert c["MaliNonFragWarp"] == 300 * math.ceil(64 / profile.warp_width)
    assert c["MaliCompQueuedCy"] == round(dur * profile.clock_mhz / 1000)
    assert c["MaliCompQueueAssignStallCy"] == 0
    assert c["MaliCompQueueActiveCy"] == c["MaliCompQueuedCy"]          # Arm's equation: queued - stall
    assert not any(k.startswith("MaliExtBus") for k in c)                # no bytes the model knows: none shown


def test_render_pass_counts_fragments_primitives_and_stored_bytes(tmp_path):
    w, h, draws = 64, 48, 4
    info = PassInfo("vkCmdBeginRendering", 0, w, h, 1, 1, [], 0, w * h * 4, True)   # one RGBA8 store
    run = PassRun(info, ["t2"], 0xCB, [Draw(36, 12, False, None, None, count=draws)])
    profile, [(bdur, b), (mdur, m)], _ = _events(tmp_path, "mali-g720", passes=[run])
    assert b["MaliGeomTotalPrim"] == b["MaliGeomTrianglePrim"] == 12
    assert b["MaliNonFragThread"] == 36
    assert b["MaliBinningQueueActiveCy"] == round(bdur * profile.clock_mhz / 1000)
    assert m["MaliFragThread"] == w * h * draws * timing.DRAW_COVERAGE     # the timing model's fragments
    assert m["MaliExtBusWrBy"] == w * h * 4                               # the stored attachment
    assert "MaliExtBusRdBy" not in m                                      # nothing loaded
    assert m["MaliMainQueueActiveCy"] == round(mdur * profile.clock_mhz / 1000)


def test_mali_g78_uses_its_job_slot_queues(tmp_path):
    info = PassInfo("vkCmdBeginRendering", 0, 32, 32, 1, 1, [], 32 * 32 * 4, 0, True)
    run = PassRun(info, ["t2"], 0xCB, [Draw(3, 1, False, None, None)])
    work = Work("transfer", "fill buffer", "vkCmdFillBuffer", {"bytes": 256}, nbytes=256)
    profile, [(tdur, t), (bdur, b), (mdur, m)], [desc] = _events(tmp_path, "mali-g78", works=[work], passes=[run])
    assert t["MaliNonFragQueueActiveCy"] == round(tdur * profile.clock_mhz / 1000)
    assert t["MaliExtBusWrBy"] == 256 and "MaliExtBusRdBy" not in t        # a fill writes only
    assert b["MaliNonFragQueueActiveCy"] == round(bdur * profile.clock_mhz / 1000)
    assert m["MaliFragQueueActiveCy"] == round(mdur * profile.clock_mhz / 1000)
    assert m["MaliExtBusRdBy"] == 32 * 32 * 4                             # the loaded attachment
    assert not any(k.startswith(("MaliMainQueue", "MaliBinningQueue", "MaliCompQueue")) for k in t | b | m)
    assert desc.blocks[0].name == "Mali-G78"
    assert {s.name for s in desc.specs} >= {"MaliFragQueueActiveCy", "MaliFragThread", "MaliExtBusWrBy"}


def test_estimated_sizes_give_no_thread_counts(tmp_path):
    work = Work("dispatch", "compute", "vkCmdDispatchIndirect", {"groups": [-1, -1, -1]}, invocations=4096,
                estimated=True)
    _, [(_, c)], _ = _events(tmp_path, "mali-g720", works=[work])
    assert "MaliNonFragThread" not in c and "MaliNonFragWarp" not in c and "MaliCompQueuedCy" in c

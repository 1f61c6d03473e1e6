"""icd/measured_counters.py and the timeline: a pass's readings summed over its parts, the measured
values replacing the model's in the events written, and what keeps the model (no Vulkan: the readings
are set as vkGetQueryPoolResults would leave them)."""
from __future__ import annotations


from tessera.icd import timing
from tessera.icd.measured_counters import Reading, Stats, pass_stats
from tessera.icd.profiles import PROFILES
from tessera.icd.recording import Draw, Work
from tessera.icd.timeline import PassRun
from tessera.vkapi.render_passes import PassInfo

from placing import placed_events


def _reading(stats: Stats | None) -> Reading:
    r = Reading(None, None)   # no slot: never read here
    r.stats = stats
    return r


def _stats(prims: int, verts: int, frags: int, compute: int = 0) -> Stats:
    return Stats(verts, prims, verts, prims, 0, frags, compute)


def _draw(reading: Reading | None) -> Draw:
    d = Draw(6, 2, False, None, None)
    d.measured = reading
    return d


def test_parts_sum_and_anything_unmeasured_keeps_the_model():
    a, b = _reading(_stats(2, 6, 4096)), _reading(_stats(4, 12, 100))
    assert pass_stats([_draw(a), _draw(a), _draw(b)]) == _stats(6, 18, 4196)   # a reading counts once
    assert pass_stats([_draw(a), _draw(None)]) is None          # one draw outside any bracket
    assert pass_stats([_draw(a), _draw(_reading(None))]) is None   # a query not available
    assert pass_stats([]) is None


def _events(tmp_path, passes=(), works=()):
    return [{d.name: d.value for d in e.extra_data}
            for e in placed_events(tmp_path, PROFILES["mali-g720"], works, passes, passes_first=True)]


def test_measured_pass_and_dispatch_replace_the_model(tmp_path):
    info = PassInfo("vkCmdBeginRendering", 0, 64, 64, 1, 1, [], 0, 0, True)
    measured = _reading(_stats(prims=5, verts=15, frags=3000))
    runs = [PassRun(info, ["m"], 0xCB, [_draw(measured)]), PassRun(info, ["e"], 0xCB, [_draw(None)])]
    work = Work("dispatch", "compute", "vkCmdDispatch", {"group_size": (32, 1, 1)}, invocations=320,
                measured=_stats(0, 0, 0, compute=320))
    binning, main, est_binning, est_main, dispatch = _events(tmp_path, runs, [work])
    assert binning["MaliGeomTotalPrim"] == "5" and binning["MaliNonFragThread"] == "15"
    assert main["MaliFragThread"] == "3000" and main["MaliFragWarp"] == str(-(-3000 // 16))
    assert "Measured" in binning and "MaliFragThread" in main["Measured"]
    # the same pass unmeasured: the model's counts (2 primitives, 6 vertices, a quarter of the area)
    assert est_binning["MaliGeomTotalPrim"] == "2" and est_binning["MaliNonFragThread"] == "6"
    assert est_main["MaliFragThread"] == str(int(64 * 64 * timing.DRAW_COVERAGE))
    assert "Measured" not in est_binning and "Measured" not in est_main
    assert dispatch["Measured"] == "MaliNonFragThread, MaliNonFragWarp" and dispatch["MaliNonFragThread"] == "320"


def test_a_pass_with_mesh_draws_measures_only_its_fragments(tmp_path):
    """Mesh shading (Draw.estimated: no vertex count) goes through no input assembly or vertex shader:
    the backend's counts of those are no measure of its geometry, which stays modelled."""
    info = PassInfo("vkCmdBeginRendering", 0, 32, 32, 1, 1, [], 0, 0, True)
    mesh = Draw(timing.INDIRECT_DRAW_VERTICES, timing.INDIRECT_DRAW_VERTICES // 3, True, None, None)
    mesh.measured = _reading(_stats(prims=0, verts=0, frags=528))
    binning, main = _events(tmp_path, [PassRun(info, ["mesh"], 0xCB, [mesh])])
    assert binning["MaliGeomTotalPrim"] == str(timing.INDIRECT_DRAW_VERTICES // 3)   # the model's
    assert binning["MaliNonFragThread"] == str(timing.INDIRECT_DRAW_VERTICES)
    assert main["MaliFragThread"] == "528" and main["Measured"] == "MaliFragThread, MaliFragWarp"

"""Counters that are only measured (schemas/counters.py MEASURED_ONLY: MaliGeomVisiblePrim) are summed only
where every phase that could have them has them: a workload set, a frame or a counter-track interval holding a
render pass without visible primitives (not captured) gives none, not a partial sum (docs/counters.md)."""
from __future__ import annotations

import math

from tessera.hostd.counters import Phase, aggregate, samples
from tessera.schemas import counters as C

G720 = C.for_gpu("Mali-G720")
CONFIG = G720.config(10)


def binning(start: int, total: int, visible: int | None) -> Phase:
    counters = {"MaliGeomTotalPrim": total}
    if visible is not None:
        counters["MaliGeomVisiblePrim"] = visible
    return Phase(start, 100, "binning", counters)


def test_sums_only_complete_sets():
    both = [binning(0, 6, 4), binning(200, 4, 2)]
    assert aggregate(G720, both, CONFIG)["MaliGeomVisiblePrim"] == 6
    partial = [binning(0, 6, 4), binning(200, 4, None)]
    out = aggregate(G720, partial, CONFIG)
    assert out["MaliGeomTotalPrim"] == 10 and "MaliGeomVisiblePrim" not in out
    # a phase that has no primitives at all (a dispatch) does not make the sum partial
    compute = Phase(400, 100, "compute", {"MaliNonFragThread": 64})
    assert aggregate(G720, [binning(0, 6, 4), compute], CONFIG)["MaliGeomVisiblePrim"] == 4


def test_track_has_no_sample_while_an_uncaptured_pass_runs():
    bounds, values = samples(G720, [binning(0, 6, 4), binning(200, 4, None)], CONFIG)
    visible = dict(zip(bounds.tolist(), values["MaliGeomVisiblePrim"].tolist()))
    assert visible[100] == 4                      # the interval [0, 100): the captured pass's 4
    assert math.isnan(visible[300])              # [200, 300): a pass without them: no value
    assert values["MaliGeomTotalPrim"][list(bounds).index(300)] == 4

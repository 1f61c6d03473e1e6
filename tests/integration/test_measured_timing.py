"""Instrumented workloads are timed by their measured block executions (issue #12 item 6).

`tessera run --instrument` on examples/shader_costs.py (a Collatz dispatch of 256 invocations, a
64x32 pass with two branchy.frag draws: the whole image, then an 8x8 corner) and, for comparison,
the same run without --instrument. Independent references: the block executions of
tests/shader_references.py (CPU walks of the shaders' control flow), each block's
thread-operations from the compiler model, icd/timing.py's formulas. Measured cycles of a stage =
the bound-pipe cycles (compiler PipeCycles) of Σ executions × block ops; a dispatch lasts
timing.dispatch(items, measured / items); a pass's main phase takes, per instrumented draw, fragment
cycles = measured / (render area × DRAW_COVERAGE), so its shader term is the measured cycles / cores.
Without instrumentation both keep the compiler model's typical-path estimate.
"""
from __future__ import annotations

import sys

import pytest
from integration_support import PYTHON, REPO, run
from shader_references import branchy_blocks, collatz_blocks
from test_indirect_sizes import PROFILE, cycles_typical, driver_events

from tessera.icd import timing

sys.path.insert(0, str(REPO / "examples"))
import shader_costs as app  # noqa: E402

TESSERA = REPO / ".venv" / "bin" / "tessera"


def measured_cycles(shader: str, spec: dict | None, executions: list[int]) -> float:
    import vkapp

    from tessera.compiler import api
    from tessera.compiler.analysis import PipeCycles
    from tessera.compiler.costs import gpu_costs
    from tessera.spirv import spec_values_from_map

    code = vkapp.compile_glsl(vkapp.Settings.from_env(), vkapp.SHADER_DIR / shader)
    values = spec_values_from_map([(k, 4 * i, 4) for i, k in enumerate(spec)],
                                  b"".join(v.to_bytes(4, "little") for v in spec.values())) if spec else None
    blocks = api.shader_cost(code, "main", PROFILE.key, values).blocks
    assert len(blocks) == len(executions)
    ops = [sum(n * b.ops[p] for n, b in zip(executions, blocks)) for p in range(6)]
    return PipeCycles.of(ops, gpu_costs(PROFILE.key)).bound_cycles


@pytest.fixture(scope="module")
def sessions(shims, tmp_path_factory):
    out = {}
    for name, flags in (("instrumented", ["--instrument"]), ("plain", [])):
        session = tmp_path_factory.mktemp(name) / "session"
        result = run([TESSERA, "run", *flags, "--out", session, "--", PYTHON, REPO / "examples" / "shader_costs.py"],
                     None)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "shader_costs: OK" in result.stdout and "Traceback" not in result.stderr, result.stderr
        out[name] = driver_events(session)
    return out


def dispatch(events):
    [(e, x)] = [(e, x) for _, e, x in events if x.get("Workload") == "dispatch"]
    return e, x


def phases(events):
    return {stage: e for stage, e, x in events if x.get("Workload") == "render pass"}


def test_an_instrumented_dispatch_lasts_its_measured_cycles(sessions):
    e, x = dispatch(sessions["instrumented"])
    measured = measured_cycles("collatz.comp", {0: app.LOCAL}, collatz_blocks(app.INPUTS, app.COUNT, app.INVOCATIONS))
    assert e.duration == timing.dispatch(PROFILE, app.INVOCATIONS, measured / app.INVOCATIONS).duration_ns
    assert x["Shader cost"] == "block executions"
    static = timing.dispatch(PROFILE, app.INVOCATIONS, cycles_typical("collatz.comp", {0: app.LOCAL})).duration_ns
    assert static != e.duration
    e, x = dispatch(sessions["plain"])
    assert e.duration == static and "Shader cost" not in x


def test_an_instrumented_pass_shades_its_measured_fragment_cycles(sessions):
    area = app.W * app.H
    full = measured_cycles("branchy.frag", None, branchy_blocks(app.W, app.H))
    small = measured_cycles("branchy.frag", None, branchy_blocks(app.SMALL, app.SMALL))
    per_draw = [m / (area * timing.DRAW_COVERAGE) for m in (full, small)]
    common = dict(width=app.W, height=app.H, layers=1, draws=2, vertices=12, primitives=4, load_bytes=0,
                  store_bytes=area * 4, vertex_cycles=cycles_typical("quad.vert"))
    binning, main = timing.render_pass(PROFILE, **common, fragment_cycles=sum(per_draw) / 2)
    got = phases(sessions["instrumented"])
    assert (got["binning"].duration, got["main"].duration) == (binning.duration_ns, main.duration_ns)
    # without instrumentation: the compiler model's typical path for every fragment
    binning, static = timing.render_pass(PROFILE, **common, fragment_cycles=cycles_typical("branchy.frag"))
    got = phases(sessions["plain"])
    assert (got["binning"].duration, got["main"].duration) == (binning.duration_ns, static.duration_ns)
    assert static.duration_ns != main.duration_ns


def test_each_submit_is_timed_with_its_own_executions(shims, tmp_path):
    """tests/integration/apps/instrumentation_api.py uses the extension itself: one command buffer
    (two instrumented dispatches) submitted twice without a clear in between, so its values add up,
    then a secondary with its own object whose values are read and the object destroyed right
    after the fence wait. Every instrumented dispatch of every submit lasts the measured cycles of
    one execution (128 invocations, count 100); the reserved uninstrumented one the static estimate."""
    from tessera.tools.launch import LaunchConfig, environment

    sys.path.insert(0, str(REPO / "tests" / "integration" / "apps"))
    import instrumentation_api as api_app

    session = tmp_path / "session"
    out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "instrumentation_api.py"],
              environment(LaunchConfig(session)))
    assert out.returncode == 0, out.stdout + out.stderr
    dispatches = [(e.submission_id, e.duration, "Shader cost" in x) for _, e, x in driver_events(session)
                  if x.get("Workload") == "dispatch"]
    executions = collatz_blocks(api_app.INPUTS, api_app.COUNT, api_app.INVOCATIONS)
    measured = timing.dispatch(PROFILE, api_app.INVOCATIONS,
                               measured_cycles("collatz.comp", {0: api_app.LOCAL}, executions)
                               / api_app.INVOCATIONS).duration_ns
    static = timing.dispatch(PROFILE, api_app.INVOCATIONS,
                             cycles_typical("collatz.comp", {0: api_app.LOCAL})).duration_ns
    instrumented = [(s, d) for s, d, m in dispatches if m]
    # submits 1 and 2: the same command buffer's two dispatches; submit 3: the secondary's two
    assert [s for s, _ in instrumented] == [1, 1, 2, 2, 3, 3]
    assert [d for _, d in instrumented] == [measured] * 6
    assert measured != static
    assert [d for _, d, m in dispatches if not m] == [static] * 4    # reserved index; the primary's two

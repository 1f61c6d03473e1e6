"""The emulated Mali times indirect work with the sizes it reads when it runs it (issue #15 item 5).

tests/integration/apps/indirect_sizes_app.py records the same dispatch (20 x 15 x 1 groups) and the same
two draws (18 vertices) directly and indirectly, the indirect arguments written by the GPU in the
submit and rewritten after their use; examples/ray_tracing.py traces 64 x 64 x 1 rays directly and
indirectly. Through the real loader, layer and driver (`tessera run` environment), each indirect
event must carry the real sizes and last exactly what icd/timing.py gives for those sizes, which is
what the direct event lasts; the durations are computed here from timing.py and the compiler model,
not read from the driver.
"""
from __future__ import annotations

import sys

import pytest
from integration_support import PYTHON, REPO, run

from tessera.icd import timing
from tessera.icd.profiles import PROFILES
from tessera.schemas import perfetto as pf

APP = REPO / "tests" / "integration" / "apps" / "indirect_sizes_app.py"
PROFILE = PROFILES["mali-g720"]
LOCAL, GROUPS, SIZE = 16, (20, 15, 1), 64


def cycles_typical(shader: str, spec: dict | None = None) -> float:
    """The compiler model's typical-path cycles per invocation of an example shader."""
    sys.path.insert(0, str(REPO / "examples"))
    import vkapp

    from tessera.compiler import api
    from tessera.spirv import spec_values_from_map

    code = vkapp.compile_glsl(vkapp.Settings.from_env(), vkapp.SHADER_DIR / shader)
    values = spec_values_from_map([(k, 4 * i, 4) for i, k in enumerate(spec)],
                                  b"".join(v.to_bytes(4, "little") for v in spec.values())) if spec else None
    return api.shader_cost(code, "main", PROFILE.key, values).cycles_typical


def driver_events(session) -> list[tuple[str, object, dict]]:
    """(stage, event, extra_data) of the driver's own trace, in order."""
    packets = list(pf.read_packets(session / "gpu.perfetto-trace"))
    check = pf.check_render_stages(packets)
    assert check.problems == []
    specs = {iid: name for (_, iid), name in check.specs.items()}
    return [(specs[p.gpu_render_stage_event.stage_iid], p.gpu_render_stage_event,
             {d.name: d.value for d in p.gpu_render_stage_event.extra_data})
            for p in packets if p.HasField("gpu_render_stage_event")]


@pytest.fixture(scope="module")
def app_events(shims, tmp_path_factory):
    from tessera.tools.launch import LaunchConfig, environment

    session = tmp_path_factory.mktemp("indirect") / "session"
    out = run([PYTHON, APP], environment(LaunchConfig(session)))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "indirect_sizes_app: OK" in out.stdout and "Traceback" not in out.stderr, out.stderr
    return driver_events(session)


def test_indirect_dispatch_is_timed_like_the_direct_one(app_events):
    dispatches = {x["Command"]: (e, x) for _, e, x in app_events if x.get("Workload") == "dispatch"}
    assert sorted(dispatches) == ["vkCmdDispatch", "vkCmdDispatchIndirect"]
    items = GROUPS[0] * GROUPS[1] * GROUPS[2] * LOCAL
    want = timing.dispatch(PROFILE, items, cycles_typical("collatz.comp", {0: LOCAL})).duration_ns
    guess = timing.dispatch(PROFILE, timing.INDIRECT_DISPATCH_GROUPS * LOCAL,
                            cycles_typical("collatz.comp", {0: LOCAL})).duration_ns
    assert want != guess          # the estimate this replaces would be caught
    for command, (e, x) in dispatches.items():
        assert e.duration == want, command
        assert (x["Groups"], x["Items"]) == ("[20, 15, 1]", str(items)), command
        assert "Estimated" not in x, command


def test_indirect_draws_are_timed_like_the_direct_ones(app_events):
    passes = [(stage, e, x) for stage, e, x in app_events if x.get("Workload") == "render pass"]
    assert [stage for stage, _, _ in passes] == ["binning", "main"] * 2
    binning, main = timing.render_pass(
        PROFILE, width=SIZE, height=SIZE, layers=1, draws=2, vertices=2 * 6 + 6, primitives=4 + 2, load_bytes=0,
        store_bytes=SIZE * SIZE * 4, vertex_cycles=cycles_typical("quad.vert"),
        fragment_cycles=cycles_typical("solid.frag"))
    for i, (stage, e, x) in enumerate(passes):
        assert e.duration == (binning if stage == "binning" else main).duration_ns, (i, stage)
        assert (x["Draws"], x["Vertices"]) == ("2", "18"), (i, stage)
        assert "Estimated" not in x, (i, stage)


def test_indirect_trace_rays_is_timed_like_the_direct_one(shims, tmp_path):
    from tessera.tools.launch import LaunchConfig, environment

    session = tmp_path / "session"
    out = run([PYTHON, REPO / "examples" / "ray_tracing.py"], environment(LaunchConfig(session)))
    assert out.returncode == 0, out.stdout + out.stderr
    rays = {x["Command"]: (e, x) for _, e, x in driver_events(session) if x.get("Workload") == "trace rays"}
    assert sorted(rays) == ["vkCmdTraceRaysIndirectKHR", "vkCmdTraceRaysKHR"]
    direct, indirect = rays["vkCmdTraceRaysKHR"], rays["vkCmdTraceRaysIndirectKHR"]
    assert (indirect[1]["Width"], indirect[1]["Height"], indirect[1]["Depth"], indirect[1]["Items"]) == \
        ("64", "64", "1", str(64 * 64))
    assert "Estimated" not in indirect[1]
    assert indirect[0].duration == direct[0].duration

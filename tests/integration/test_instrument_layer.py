"""`tessera run --instrument` (issue #12 item 4): the layer drives VK_ARM_shader_instrumentation for an
unmodified application (examples/shader_costs.py) and streams values that equal CPU references of
the shaders' control flow, per workload and per draw, with each pipeline stage's blocks once."""
from __future__ import annotations

import json
import sys

import pytest
from integration_support import PYTHON, REPO, run
from shader_references import branchy_blocks, collatz_blocks

from tessera.schemas import frames as fr
from tessera.schemas.workloads import described

sys.path.insert(0, str(REPO / "examples"))
import shader_costs as app  # noqa: E402

TESSERA = REPO / ".venv" / "bin" / "tessera"


@pytest.fixture(scope="module")
def session(shims, tmp_path_factory):
    out = tmp_path_factory.mktemp("instrument") / "session"
    result = run([TESSERA, "run", "--instrument", "--out", out, "--", PYTHON, REPO / "examples" / "shader_costs.py"],
                 None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "shader_costs: OK" in result.stdout
    frames = [f for log in sorted(out.rglob("*.tessera-log")) for f in fr.iter_file(log)]
    return {"frames": frames, "stdout": result.stdout, "stderr": result.stderr}


def messages(session, kind):
    return [(f.sequence, f.tag, f.payload()) for f in session["frames"] if f.type == kind]


def executions(stage: dict, blocks: int) -> list[int]:
    out = [0] * blocks
    for index, n, *_ in stage["blocks"]:
        out[index] = n
    return out


def test_dispatch_blocks_equal_the_cpu_reference(session):
    workloads = described(session["frames"])
    dispatch = next(t for t, w in workloads.items() if w["kind"] == "dispatch")
    [(submit, _, payload)] = [m for m in messages(session, fr.MessageType.INSTRUMENTATION) if m[1] == dispatch]
    [action] = payload["actions"]
    assert action["command"] == "vkCmdDispatch" and "draw" not in action
    [stage] = action["stages"]
    assert stage["stage"] == "compute"
    assert executions(stage, 14) == collatz_blocks(app.INPUTS, app.COUNT, app.INVOCATIONS)
    assert stage["totals"]["threads"] == sum(collatz_blocks(app.INPUTS, app.COUNT, app.INVOCATIONS))


def test_each_draw_of_the_pass_has_its_own_values(session):
    workloads = described(session["frames"])
    render_pass = next(t for t, w in workloads.items() if w["kind"] == "render_pass")
    [(_, _, payload)] = [m for m in messages(session, fr.MessageType.INSTRUMENTATION) if m[1] == render_pass]
    draws = {a["draw"]: {s["stage"]: s for s in a["stages"]} for a in payload["actions"]}
    assert sorted(draws) == [0, 1]
    assert executions(draws[0]["fragment"], 11) == branchy_blocks(app.W, app.H)
    assert executions(draws[1]["fragment"], 11) == branchy_blocks(app.SMALL, app.SMALL)
    assert draws[0]["vertex"]["totals"]["threads"] == draws[1]["vertex"]["totals"]["threads"] == 6
    assert draws[0]["fragment"]["totals"]["cvt"] > draws[1]["fragment"]["totals"]["cvt"] > 0


def test_every_instrumented_stage_is_described_once(session):
    shaders = messages(session, fr.MessageType.SHADER)
    stages = sorted((p["pipeline"], p["stage"]) for _, _, p in shaders)
    assert len(stages) == len(set(stages)) == 3                 # compute; vertex + fragment
    frag = next(p for _, _, p in shaders if p["stage"] == "fragment")
    assert [b["index"] for b in frag["blocks"]] == list(range(11))
    assert frag["blocks"][1]["lines"][-1] == "OpKill"            # the discard block


def test_the_application_does_not_see_the_extension(shims, tmp_path):
    from tessera.tools.launch import LaunchConfig, environment

    env = environment(LaunchConfig(tmp_path / "s", instrument=True))
    out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "identity_query.py"], env)
    assert out.returncode == 0, out.stderr
    assert "VK_ARM_shader_instrumentation" not in json.loads(out.stdout.strip().splitlines()[-1])["extensions"]


def test_a_shader_object_gets_the_flag_and_its_dispatch_its_values(shims, tmp_path):
    """`--instrument` adds VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM to every shader object: an
    unmodified application's compute shader object (tests/integration/apps/shader_object.py) gets
    its dispatch's blocks (equal to the reference) and its SHADER description under its handle."""
    out = tmp_path / "session"
    # no shipped Mali profile has shader objects: mali-g78 has no profile and reports the backend's
    result = run([TESSERA, "run", "--instrument", "--gpu", "mali-g78", "--out", out, "--", PYTHON,
                  REPO / "tests" / "integration" / "apps" / "shader_object.py"], None)
    if "has no VK_EXT_shader_object" in result.stdout + result.stderr:
        pytest.skip("the backend has no VK_EXT_shader_object (Mesa 22.3)")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cannot be instrumented" not in result.stderr
    frames = [f for log in sorted(out.rglob("*.tessera-log")) for f in fr.iter_file(log)]
    [payload] = [f.payload() for f in frames if f.type == fr.MessageType.INSTRUMENTATION]
    [action] = payload["actions"]
    [stage] = action["stages"]
    inputs = [(i * 7919 + 13) % 20000 for i in range(256)]
    assert stage["stage"] == "compute" and executions(stage, 14) == collatz_blocks(inputs, 200, 256)
    [shader] = [f.payload() for f in frames if f.type == fr.MessageType.SHADER]
    assert shader["pipeline"] == action["pipeline"] and shader["stage"] == "compute"

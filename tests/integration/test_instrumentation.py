"""VK_ARM_shader_instrumentation in the emulated Mali, through the real loader, driver and backend
(issue #12): the registry's example sequence, values against CPU references of the shaders'
control flow and the compiler model's per-block costs, short reads, accumulation, clear, misuse."""
from __future__ import annotations

import json
import sys

import pytest
from integration_support import PYTHON, REPO, run
from shader_references import branchy_blocks, collatz_blocks

sys.path.insert(0, str(REPO / "tests" / "integration" / "apps"))
import instrumentation_api as app  # noqa: E402

COMPUTE, VERTEX, FRAGMENT = 0x20, 0x1, 0x10
METRICS = ["fma", "cvt", "sfu", "ls", "tex", "var", "threads"]
OPS_INDEX = {"fma": 0, "cvt": 1, "sfu": 2, "ls": 3, "var": 4, "tex": 5}   # compiler BlockCost.ops order
VK_INCOMPLETE = 5


@pytest.fixture(scope="module")
def reads(shims, tmp_path_factory) -> dict:
    from tessera.tools.launch import LaunchConfig, environment

    env = environment(LaunchConfig(tmp_path_factory.mktemp("instr") / "session"))
    out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "instrumentation_api.py"], env)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-2])
    data["stderr"] = out.stderr
    return data


def block_ops(shader: str, spec: dict | None) -> list[tuple]:
    """Thread-operations per execution of each block, from the compiler model."""
    sys.path.insert(0, str(REPO / "examples"))
    import vkapp

    from tessera.compiler import api
    from tessera.spirv import spec_values_from_map

    code = vkapp.compile_glsl(vkapp.Settings.from_env(), vkapp.SHADER_DIR / shader)
    values = spec_values_from_map([(k, 4 * i, 4) for i, k in enumerate(spec)],
                                  b"".join(v.to_bytes(4, "little") for v in spec.values())) if spec else None
    return [tuple(b.ops) for b in api.shader_cost(code, "main", "mali-g720", values).blocks]


def expected_rows(index: int, stage: int, executions: list[int], ops: list[tuple]) -> list[list[int]]:
    return [[index, 0, stage, b, *[round(n * ops[b][OPS_INDEX[m]]) for m in METRICS[:-1]], n]
            for b, n in enumerate(executions)]


def test_metrics_are_the_mali_pipes_and_thread_executions(reads):
    assert reads["metrics"] == METRICS


def test_registry_example_sequence_gives_exactly_those_entries(reads):
    """vk.xml / the proposal's example: indices 0 and 1 (compute), 2 reserved by an uninstrumented
    dispatch, 3 a draw with vertex and fragment entries; sorted by index, stage, sub-index, block."""
    rows = reads["first"]["rows"]
    headers = [(r[0], r[1], r[2]) for r in rows]
    collatz = 14
    vertex = len(block_ops("quad.vert", None))
    fragment = len(block_ops("branchy.frag", None))
    assert headers == ([(0, 0, COMPUTE)] * collatz + [(1, 0, COMPUTE)] * collatz
                       + [(3, 0, VERTEX)] * vertex + [(3, 0, FRAGMENT)] * fragment)
    assert [r[3] for r in rows] == (list(range(collatz)) * 2 + list(range(vertex)) + list(range(fragment)))
    assert reads["first"]["total"] == len(rows) and reads["first"]["result"] == 0


def test_every_block_and_metric_equals_the_cpu_reference(reads):
    rows = reads["first"]["rows"]
    compute = collatz_blocks(app.INPUTS, app.COUNT, app.INVOCATIONS)
    ops = block_ops("collatz.comp", {0: app.LOCAL})
    assert [r for r in rows if r[0] == 0] == expected_rows(0, COMPUTE, compute, ops)
    assert [r for r in rows if r[0] == 1] == expected_rows(1, COMPUTE, compute, ops)
    vertex_ops = block_ops("quad.vert", None)
    assert [r for r in rows if r[2] == VERTEX] == expected_rows(3, VERTEX, [6] + [0] * (len(vertex_ops) - 1),
                                                                vertex_ops)
    assert [r for r in rows if r[2] == FRAGMENT] == expected_rows(3, FRAGMENT, branchy_blocks(app.W, app.H),
                                                                  block_ops("branchy.frag", None))


def test_the_instrumented_shader_still_computes_the_right_answer(reads):
    from shader_references import collatz_blocks  # noqa: F401  (same module as the reference)

    def steps(v: int) -> int:
        n = 0
        while v > 1 and n < 1000:
            v = v >> 1 if v % 2 == 0 else (3 * v + 1) & 0xFFFFFFFF
            n += 1
        return n + 1000 if n > 20 else n
    assert reads["outputs"][:app.COUNT] == [steps(v) for v in app.INPUTS[:app.COUNT]]


def test_short_buffer_is_incomplete_and_not_written_past(reads):
    short = reads["short"]
    assert short["result"] == VK_INCOMPLETE and short["written"] == 3 and short["total"] == reads["first"]["total"]
    assert short["sentinel_intact"]
    assert short["rows"] == reads["first"]["rows"][:3]


def test_results_add_up_across_submissions_until_cleared(reads):
    first, second, cleared = reads["first"]["rows"], reads["second"]["rows"], reads["cleared"]["rows"]
    assert [r[:4] for r in second] == [r[:4] for r in first]
    assert [r[4:] for r in second] == [[2 * v for v in r[4:]] for r in first]
    assert [r[:4] for r in cleared] == [r[:4] for r in first]          # indices stay valid
    assert all(v == 0 for r in cleared for v in r[4:])


def test_misuse_is_reported_and_never_crashes(reads):
    assert "vkCmdEndShaderInstrumentationARM with no active instrumentation object" in reads["stderr"]
    assert "while another object is active in the command buffer" in reads["stderr"]


def test_device_lists_the_extension(tessera_env, lavapipe_env):
    def extensions(env) -> list[str]:
        out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "identity_query.py"], env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])["extensions"]
    assert "VK_ARM_shader_instrumentation" in extensions(tessera_env)
    assert "VK_ARM_shader_instrumentation" not in extensions(lavapipe_env)   # emulated, not the backend's


def test_a_secondary_recorded_with_its_own_object_has_its_results(reads):
    """Its two dispatches are resultIndex 0 and 1 of its own object, each with the reference counts
    once: the primary's later dispatch of the same instrumented pipeline with no object active
    counts into the driver's discard region, not into the last region bound."""
    compute = collatz_blocks(app.INPUTS, app.COUNT, app.INVOCATIONS)
    ops = block_ops("collatz.comp", {0: app.LOCAL})
    assert reads["secondary"]["rows"] == expected_rows(0, COMPUTE, compute, ops) + expected_rows(1, COMPUTE, compute,
                                                                                                   ops)


def test_no_object_is_active_across_execute_commands(reads):
    """Executing secondaries while an object is active is a misuse: reported once, and the object
    gets nothing of the secondaries' work."""
    assert "vkCmdExecuteCommands while shader instrumentation is active" in reads["stderr"]
    assert reads["executed_while_active"]["total"] == 0


def test_a_pipeline_the_rewrite_cannot_instrument_is_created_uninstrumented(reads):
    """A layout using every descriptor set leaves none for the counters: the pipeline still works,
    one clear warning, its dispatch takes resultIndex 0 and produces no entries (never zeros)."""
    warnings = [line for line in reads["stderr"].splitlines() if "cannot be instrumented" in line]
    assert len(warnings) == 1 and "uses all" in warnings[0] and "created uninstrumented" in warnings[0]
    assert reads["uninstrumentable"]["total"] == 0
    assert reads["outputs_after"] == reads["outputs"]   # the same dispatches computed the same answers


def test_instrumented_shader_objects_count_like_pipelines(shims, tmp_path):
    """VK_SHADER_CREATE_INSTRUMENT_SHADER_BIT_ARM (bit 11) on a compute shader object: two dispatches
    (resultIndex 0, 1) equal the reference; a shader object without the bit reserves index 2 and
    produces nothing. On vertex and fragment shader objects bound separately: one draw's vertex and
    fragment entries equal the reference, as for the registry example's pipeline draw."""
    from tessera.tools.launch import LaunchConfig, environment

    env = environment(LaunchConfig(tmp_path / "session", gpu="mali-g78"))   # no Mali profile has shader objects
    out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "instrumented_shader_object.py"], env)
    if "has no VK_EXT_shader_object" in out.stderr + out.stdout:
        pytest.skip("the backend has no VK_EXT_shader_object (Mesa 22.3)")
    assert out.returncode == 0, out.stdout + out.stderr
    values = json.loads(out.stdout.strip().splitlines()[-2])["values"]
    compute = collatz_blocks(app.INPUTS, app.COUNT, app.INVOCATIONS)
    ops = block_ops("collatz.comp", {0: app.LOCAL})
    assert values["rows"] == expected_rows(0, COMPUTE, compute, ops) + expected_rows(1, COMPUTE, compute, ops)
    graphics = json.loads(out.stdout.strip().splitlines()[-2])["graphics"]
    vertex_ops = block_ops("quad.vert", None)
    assert graphics["total"] == graphics["written"] == len(vertex_ops) + len(block_ops("branchy.frag", None))
    assert graphics["rows"] == (expected_rows(0, VERTEX, [6] + [0] * (len(vertex_ops) - 1), vertex_ops)
                                + expected_rows(0, FRAGMENT, branchy_blocks(app.W, app.H),
                                                block_ops("branchy.frag", None)))
    assert "cannot be instrumented" not in out.stderr

"""The compiler model costs ray-tracing stages and ray queries (issue #17 item 3).

Before: a ray-generation shader failed with "unsupported instruction OpTraceRayKHR", a compute
shader with ray queries with "unsupported instruction OpRayQueryInitializeKHR", and hit/miss
shaders were reported with the raw execution-model name ("closesthitkhr"). Now every ray-tracing
execution model has a stage name, and OpTraceRayKHR / OpRayQueryProceedKHR cost
pipes.RAY_TRAVERSAL_LS_OPS on the LS pipe (documented in compiler/pipes.py).
GLSL compiled with glslangValidator --target-env spirv1.4 (GL_EXT_ray_tracing needs SPIR-V 1.4).
"""
from __future__ import annotations

import subprocess

import pytest
from compiler_support import GLSLANG, ROOT

from tessera.compiler import api, pipes

HEADER = "#version 460\n#extension GL_EXT_ray_tracing : require\n"
PAYLOAD_IN = "layout(location = 0) rayPayloadInEXT vec4 payload;\n"
SHADERS = {
    "rgen": HEADER + """
layout(set = 0, binding = 0) uniform accelerationStructureEXT scene;
layout(set = 0, binding = 1, rgba8) uniform writeonly image2D result;
layout(location = 0) rayPayloadEXT vec4 payload;
void main() {
    vec3 origin = vec3(vec2(gl_LaunchIDEXT.xy) + 0.5, -1.0);
    traceRayEXT(scene, gl_RayFlagsOpaqueEXT, 0xFF, 0, 0, 0, origin, 0.0, vec3(0, 0, 1), 100.0, 0);
    imageStore(result, ivec2(gl_LaunchIDEXT.xy), payload);
}""",
    "rmiss": HEADER + PAYLOAD_IN + "void main() { payload = vec4(0.0); }",
    "rchit": HEADER + PAYLOAD_IN + "hitAttributeEXT vec2 bary;\n"
             "void main() { payload = vec4(bary, 1.0 - bary.x - bary.y, gl_HitTEXT); }",
    "rahit": HEADER + "hitAttributeEXT vec2 bary;\nvoid main() { if (bary.x < 0.1) ignoreIntersectionEXT; }",
    "rint": HEADER + "hitAttributeEXT vec2 bary;\n"
            "void main() { bary = vec2(0.5); reportIntersectionEXT(sqrt(gl_RayTminEXT + 1.0), 0u); }",
    "rcall": HEADER + "layout(location = 0) callableDataInEXT vec4 data;\nvoid main() { data = data * 2.0; }",
}
STAGES = {"rgen": "raygen", "rmiss": "miss", "rchit": "closest_hit", "rahit": "any_hit", "rint": "intersection",
          "rcall": "callable"}


def _spirv(tmp_path, suffix: str, source: str) -> bytes:
    if GLSLANG is None:
        pytest.skip("glslangValidator missing")
    src, out = tmp_path / f"s.{suffix}", tmp_path / f"{suffix}.spv"
    src.write_text(source)
    proc = subprocess.run([GLSLANG, "-V", "--target-env", "spirv1.4", str(src), "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out.read_bytes()


@pytest.mark.parametrize("suffix", sorted(SHADERS))
def test_every_ray_tracing_stage_compiles_to_a_report(tmp_path, suffix):
    cost = api.compile_module(_spirv(tmp_path, suffix, SHADERS[suffix]), "main").cost
    assert cost.stage == STAGES[suffix]
    assert cost.cycles_typical > 0 and cost.work_registers >= 0


def test_trace_ray_costs_a_traversal_on_the_ls_pipe(tmp_path):
    cost = api.compile_module(_spirv(tmp_path, "rgen", SHADERS["rgen"]), "main").cost
    ops = [b.ops for b in cost.blocks if b.used]
    ls_ops = sum(o[3] for o in ops)
    # one traversal + the payload (a vec4: one LS op) loaded back + the image store
    assert ls_ops >= pipes.RAY_TRAVERSAL_LS_OPS + 1


def test_ray_query_compute_shader_and_example_shaders(tmp_path):
    """The examples' shaders (examples/shaders/rt_*) compile; the ray query's loop pays a traversal
    per OpRayQueryProceedKHR on the LS pipe."""
    shaders = ROOT / "examples" / "shaders"
    for name, stage in (("rt_scene.rgen", "raygen"), ("rt_scene.rmiss", "miss"), ("rt_scene.rchit", "closest_hit"),
                        ("rt_query.comp", "compute")):
        cost = api.compile_module(_spirv(tmp_path, name.split(".")[1], (shaders / name).read_text()), "main").cost
        assert cost.stage == stage, name
        if name == "rt_query.comp":
            proceed = sum(b.ops[3] for b in cost.blocks if b.used)
            assert proceed >= pipes.RAY_TRAVERSAL_LS_OPS
            assert cost.typical.ls >= pipes.RAY_TRAVERSAL_LS_OPS / 16 * 0.5   # ls cycles per thread, 16-wide warps

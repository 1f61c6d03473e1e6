"""The SPV_ARM_core_builtins lowering: valid SPIR-V for every target version and stage,
no ARM built-in left, constants from the topology (checked in the disassembly)."""
from __future__ import annotations

import subprocess

import pytest
from spirv_corpus import GLSLANG, SPIRV_DIS, SPIRV_VAL

from tessera.spirv import parse
from tessera.spirv.passes.core_builtins import CoreTopology, lower_core_builtins, uses_core_builtins

COMPUTE = """#version 450
#extension GL_ARM_shader_core_builtins : require
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Out { uint v[]; } o;
uint helper() { return gl_CoreIDARM + gl_WarpIDARM; }   // read from a called function too
void main() {
    uint i = gl_GlobalInvocationID.x;
    o.v[i] = gl_CoreCountARM + gl_CoreMaxIDARM + gl_WarpMaxIDARM + helper();
}
"""
FRAGMENT = """#version 450
#extension GL_ARM_shader_core_builtins : require
layout(location = 0) out uvec4 color;
void main() { color = uvec4(gl_CoreIDARM, gl_CoreCountARM, gl_WarpIDARM, gl_WarpMaxIDARM); }
"""
TOPOLOGY = CoreTopology(cores=12, warps_per_core=48, warp_width=16)


def compile_glsl(tmp_path, source: str, stage: str, env: str) -> bytes:
    src, out = tmp_path / f"s.{stage}", tmp_path / f"s-{env}.spv"
    src.write_text(source)
    subprocess.run([GLSLANG, "-V", "--target-env", env, "-o", str(out), str(src)], check=True, capture_output=True)
    return out.read_bytes()


@pytest.mark.parametrize("env", ["vulkan1.0", "vulkan1.1", "vulkan1.2", "vulkan1.3"])
@pytest.mark.parametrize("stage,source", [("comp", COMPUTE), ("frag", FRAGMENT)])
def test_lowered_modules_validate(tmp_path, env, stage, source):
    module = parse(compile_glsl(tmp_path, source, stage, env))
    assert uses_core_builtins(module)
    assert lower_core_builtins(module, TOPOLOGY)
    assert not uses_core_builtins(module)
    lowered = tmp_path / "lowered.spv"
    lowered.write_bytes(module.to_bytes())
    val = subprocess.run([SPIRV_VAL, "--target-env", env, str(lowered)], capture_output=True, text=True)
    assert val.returncode == 0, val.stderr
    text = subprocess.run([SPIRV_DIS, str(lowered)], capture_output=True, text=True, check=True).stdout
    for gone in ("BuiltIn CoreIDARM", "BuiltIn CoreCountARM", "BuiltIn CoreMaxIDARM", "BuiltIn WarpIDARM",
                 "BuiltIn WarpMaxIDARM", "OpCapability CoreBuiltinsARM", '"SPV_ARM_core_builtins"'):
        assert gone not in text
    for name, value in (("CoreCountARM", 12), ("CoreMaxIDARM", 11), ("WarpMaxIDARM", 47)):
        if f"gl_{name}" in source:
            assert f"%gl_{name} = OpVariable %_ptr_Private_uint Private %uint_{value}" in text
    if stage == "comp":   # placement: flat work group mod 12, (local index / 16) mod 48
        assert "OpUMod %uint" in text and "%uint_12" in text and "%uint_16" in text and "%uint_48" in text


def test_a_module_without_core_builtins_is_left_alone(tmp_path):
    data = compile_glsl(tmp_path, "#version 450\nlayout(local_size_x=1) in;\nvoid main() {}\n", "comp", "vulkan1.2")
    module = parse(data)
    assert not lower_core_builtins(module, TOPOLOGY)
    assert module.to_bytes() == data

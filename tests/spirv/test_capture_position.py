"""The position-capturing pass (spirv/passes/capture_position.py): vertex shaders written by glslang
from GLSL (gl_Position a member of gl_PerVertex) and HLSL (SV_Position a variable of its own) come out
valid (spirv-val) with the Xfb execution mode and buffer 0 / stride 16 / offset 0 on their Position
output, and nothing else captured; what the pass refuses raises CaptureError. What the capture
writes on a real backend is checked by tests/integration/test_measured_counters.py."""
from __future__ import annotations

import subprocess

import pytest
from spirv_corpus import GLSLANG, SPIRV_DIS, SPIRV_VAL, needs_spirv_tools

from tessera.spirv import parse
from tessera.spirv.passes.capture_position import CaptureError, capture_position

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
needs_glslang = pytest.mark.skipif(GLSLANG is None, reason="glslangValidator missing")

HLSL = "float4 main(float2 p : POSITION) : SV_Position { return float4(p, 0.0, 1.0); }\n"
CLIP = """#version 450
layout(location = 0) in vec2 p;
void main() { gl_Position = vec4(p, 0.0, 1.0); gl_ClipDistance[0] = p.x; }
"""
OWN_XFB = """#version 450
layout(location = 0) in vec2 p;
layout(location = 0, xfb_buffer = 0, xfb_offset = 0) out vec2 q;
void main() { gl_Position = vec4(p, 0.0, 1.0); q = p; }
"""


def compiled(tmp_path, name: str, text: str | None = None, *args: str) -> bytes:
    src = tmp_path / name
    if text is not None:
        src.write_text(text)
    else:
        src = REPO / name
    out = tmp_path / (src.name + ".spv")
    subprocess.run([GLSLANG, "-V", "--target-env", "vulkan1.2", *args, str(src), "-o", str(out)], check=True,
                   capture_output=True)
    return out.read_bytes()


def validated(tmp_path, code: bytes) -> str:
    module = parse(code)
    capture_position(module, "main")
    out = tmp_path / "captured.spv"
    out.write_bytes(module.to_bytes())
    valid = subprocess.run([SPIRV_VAL, "--target-env", "vulkan1.2", str(out)], capture_output=True, text=True)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    return subprocess.run([SPIRV_DIS, str(out)], capture_output=True, text=True, check=True).stdout


@needs_spirv_tools
@needs_glslang
@pytest.mark.parametrize("shader", ["examples/shaders/quad.vert", "examples/shaders/fullscreen.vert",
                                    "tests/integration/apps/shaders/views.vert"])
def test_glsl_block_member_is_captured(shader, tmp_path):
    text = validated(tmp_path, compiled(tmp_path, shader))
    assert "OpCapability TransformFeedback" in text and "OpExecutionMode %main Xfb" in text
    # the gl_PerVertex variable carries the buffer and stride, its Position member (0) the offset, no other member
    block = next(line.split()[1] for line in text.splitlines() if "OpDecorate" in line and "XfbBuffer 0" in line)
    assert f"OpDecorate {block} XfbStride 16" in text
    offsets = [line.split() for line in text.splitlines() if "OpMemberDecorate" in line and " Offset " in line]
    assert offsets == [["OpMemberDecorate", "%gl_PerVertex", "0", "Offset", "0"]]


@needs_spirv_tools
@needs_glslang
def test_hlsl_position_variable_is_captured(tmp_path):
    text = validated(tmp_path, compiled(tmp_path, "pos.hlsl", HLSL, "-D", "-e", "main", "-S", "vert"))
    for decoration in ("XfbBuffer 0", "XfbStride 16", "Offset 0"):
        assert f"OpDecorate %_entryPointOutput {decoration}" in text


@needs_glslang
@pytest.mark.parametrize("name, text, why", [("clip.vert", CLIP, "ClipDistance"),
                                             ("own.vert", OWN_XFB, "transform feedback itself")])
def test_refused(tmp_path, name, text, why):
    with pytest.raises(CaptureError, match=why):
        capture_position(parse(compiled(tmp_path, name, text)), "main")


@needs_glslang
def test_only_vertex_entry_points(tmp_path):
    with pytest.raises(CaptureError, match="no vertex entry point"):
        capture_position(parse(compiled(tmp_path, "examples/shaders/solid.frag")), "main")

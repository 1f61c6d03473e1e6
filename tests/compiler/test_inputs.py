"""Bad input is reported (one exception type, clear CLI errors); examples and big shaders compile."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tessera.compiler.api import compile_module, shader_cost
from tessera.compiler.check import check_allocation
from tessera.compiler.cli import compile_command
from tessera.compiler.errors import CompileError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SHADERS = sorted((ROOT / "examples" / "shaders").glob("*.*"))

HEADER = """
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "main"
               OpExecutionMode %main LocalSize 1 1 1
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
      %float = OpTypeFloat 32
       %uint = OpTypeInt 32 0
        %one = OpConstant %float 1
"""


def test_garbage_and_truncated_spirv_raise_compile_error(asm):
    with pytest.raises(CompileError, match="invalid SPIR-V"):
        shader_cost(b"not spir-v at all", "main", "mali-g78")
    good = asm(HEADER + "%main = OpFunction %void None %fn\n%b = OpLabel\nOpReturn\nOpFunctionEnd\n")
    with pytest.raises(CompileError):
        shader_cost(good[:-6], "main", "mali-g78")


def test_unknown_entry_point_and_gpu(asm):
    good = asm(HEADER + "%main = OpFunction %void None %fn\n%b = OpLabel\nOpReturn\nOpFunctionEnd\n")
    with pytest.raises(CompileError, match="no entry point named 'nope'"):
        shader_cost(good, "nope", "mali-g78")
    with pytest.raises(CompileError, match="unknown GPU"):
        shader_cost(good, "main", "mali-t880")


def test_unsupported_instruction_names_the_instruction(asm):
    body = """%main = OpFunction %void None %fn
%b = OpLabel
%x = OpReadClockKHR %uint %uint_3
OpReturn
OpFunctionEnd
"""
    text = HEADER.replace("OpCapability Shader", "OpCapability Shader\nOpCapability ShaderClockKHR\n"
                          "OpExtension \"SPV_KHR_shader_clock\"") + "%uint_3 = OpConstant %uint 3\n" + body
    with pytest.raises(CompileError) as info:
        shader_cost(asm(text), "main", "mali-g78")
    assert "unsupported instruction OpReadClockKHR" in str(info.value)
    assert "OpReadClockKHR" in info.value.instruction and info.value.block == 0


def test_unreachable_block_is_reported_not_costed(asm):
    body = """%main = OpFunction %void None %fn
%b0 = OpLabel
OpReturn
%b1 = OpLabel
%y = OpFAdd %float %one %one
OpReturn
OpFunctionEnd
"""
    cost = shader_cost(asm(HEADER + body), "main", "mali-g78")
    assert any("block 1 is unreachable" in d for d in cost.diagnostics)
    assert not cost.blocks[1].reachable and cost.blocks[1].ops == (0.0,) * 6


def test_undefined_id_is_reported(asm):
    body = """%main = OpFunction %void None %fn
%b0 = OpLabel
%y = OpFAdd %float %one %one
OpReturn
OpFunctionEnd
"""
    data = bytearray(asm(HEADER + body))
    # patch the FAdd's second operand to an id that is defined nowhere (bound - 1 is unused? use bound)
    words = memoryview(data).cast("I")
    bound = words[3]
    for i in range(5, len(words)):
        if words[i] & 0xFFFF == 129:                  # OpFAdd
            words[i + 4] = bound + 5
    with pytest.raises(CompileError):
        shader_cost(bytes(data), "main", "mali-g78")


def test_inlining_keeps_block_numbering(compile_glsl):
    src = """#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer B { float v[]; } b;
float twice(float x) { if (x > 1.0) { return x * 2.0; } return x; }
void main() { b.v[0] = twice(b.v[1]) + twice(b.v[2]); }
"""
    data = compile_glsl(src, "comp", optimize=False)
    cost = shader_cost(data, "main", "mali-g78")
    # main is one block (global 0); twice's blocks (1..) are inlined twice: the multiply block is
    # reported once per execution (1 FMA), averaged over its two copies
    assert cost.blocks[0].function == "main"
    fma_blocks = [b for b in cost.blocks if b.function and b.function.startswith("twice") and b.ops[0] == 1.0]
    assert len(fma_blocks) == 1 and fma_blocks[0].copies == 2
    # b.v[1], b.v[2] loads and one store: 3 LS ops, all in main's block
    assert cost.blocks[0].ops[3] == 3.0


@pytest.mark.parametrize("path", EXAMPLE_SHADERS, ids=lambda p: p.name)
def test_example_shaders_compile_through_the_cli(path):
    for fmt in ("text", "json", "shader-db"):
        res = CliRunner().invoke(compile_command, [str(path), "--format", fmt, "--gpu", "mali-g78"])
        assert res.exit_code == 0, res.output
    assert "Work registers:" in CliRunner().invoke(compile_command, [str(path)]).output


def test_shader_db_line_parses_like_report_py(tmp_path):
    res = CliRunner().invoke(compile_command, [str(ROOT / "examples/shaders/collatz.comp"), "--format", "shader-db"])
    line = res.output.strip()
    # shader-db report.py: "(\S+) - (.+) shader: (.*)", stats split on ", " into "<value> <name>"
    m = re.match(r"(\S+) - (.+) shader: (.*)", line)
    assert m and m.group(2) == "MESA_SHADER_COMPUTE"
    stats = {s.split(" ", 1)[1]: s.split(" ", 1)[0] for s in m.group(3).split(", ")}
    assert set(stats) == {"inst", "cycles", "arith", "texture", "vary", "ldst", "regs", "threads", "loops",
                          "spills:fills"}
    assert stats["loops"] == "1" and re.fullmatch(r"\d+:\d+", stats["spills:fills"])


def test_cli_errors_are_clean(tmp_path):
    bad = tmp_path / "bad.spv"
    bad.write_bytes(b"\x03\x02\x23\x07" + b"\x00" * 7)
    res = CliRunner().invoke(compile_command, [str(bad)])
    assert res.exit_code == 1 and "Error:" in res.output and "Traceback" not in res.output
    frag = tmp_path / "broken.frag"
    frag.write_text("#version 450\nvoid main() { nope; }\n")
    res = CliRunner().invoke(compile_command, [str(frag)])
    assert res.exit_code == 1 and "glslangValidator failed" in res.output
    res = CliRunner().invoke(compile_command, [str(ROOT / "examples/shaders/quad.vert"), "--gpu", "mali-x"])
    assert res.exit_code == 2


def test_generated_big_shader(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import shader_gen
    finally:
        sys.path.pop(0)
    data = shader_gen.build(passes=6, octaves=4)
    assert shader_gen.instruction_count(data) >= 10_000
    c = compile_module(data, "main", "mali-g720", "sparse")
    assert c.cost.spills > 0 and c.cost.work_registers <= 64
    assert c.cost.total.t == 6 * 16 / 8               # 6 passes x 16 taps, 8 texels per clock
    assert check_allocation(c.shader, c.allocation.registers) == []


def test_non_utf8_glsl_gets_glslangs_error_not_a_traceback(tmp_path):
    src = tmp_path / "latin1.comp"
    src.write_bytes(b"#version 450\n// caf\xe9\nlayout(local_size_x = 1) in;\nvoid main() { \xff }\n")
    res = CliRunner().invoke(compile_command, [str(src)])
    assert res.exit_code == 1, res.output
    assert "glslangValidator failed on" in res.output
    assert not isinstance(res.exception, UnicodeDecodeError)


def test_cli_refuses_a_device_and_values_its_spec_constant_cannot_hold(tmp_path):
    """Issue 22: `tessera compile /dev/zero` never ended, and --spec wrapped to 32 bits silently."""
    import subprocess

    r = subprocess.run([sys.executable, "-m", "tessera.tools.cli", "compile", "/dev/zero"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and "not a regular file (a character device)" in r.stderr, r.stderr
    collatz = str(ROOT / "examples" / "shaders" / "collatz.comp")      # SpecId 0: a uint32 (local_size_x_id)
    for value, why in (("0=-5", "from 0 to 4294967295"), ("0=99999999999", "from 0 to 4294967295"),
                       ("3=1", "no specialization constant with SpecId 3")):
        res = CliRunner().invoke(compile_command, [collatz, "--spec", value])
        assert res.exit_code == 2 and why in res.output, res.output
    assert CliRunner().invoke(compile_command, [collatz, "--spec", "0=128"]).exit_code == 0

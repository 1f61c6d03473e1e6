"""Freeze specialization constants: apply a pipeline's specialization, as a driver does.

Role: the step before a pass that needs constant values where a module may have specialization
constants (the tensor lowering: tensor ranks and coordinate-array lengths must be known; Arm's ML
emulation layer, VkLayer_Graph, writes its TOSA shaders with the ranks as specialization constants).
Every OpSpecConstantTrue/False, OpSpecConstant, OpSpecConstantComposite and OpSpecConstantOp keeps
its result id and place and becomes the OpConstant* of its value after specialization (the values of
spirv/spec.py's `evaluate_constants`: the VkSpecializationInfo's values, else the defaults); the
SpecId decorations go. The module then means what the specialized pipeline means, so the
VkSpecializationInfo no longer applies to it (the caller drops it).

An OpSpecConstantOp whose value cannot be computed (an opcode outside spirv/spec.py's
SPEC_CONSTANT_OPS, or a composite result that is not built from existing constants) raises
SpirvError naming it; the module is then left unchanged.
Threads: edits one module in place, from one thread.
"""
from __future__ import annotations

from collections.abc import Mapping

from ..errors import SpirvError
from ..grammar import grammar
from ..module import Instruction, Module
from ..spec import (DECORATION_SPEC_ID, OP_DECORATE, OP_SPEC_CONSTANT, OP_SPEC_CONSTANT_COMPOSITE,
                    OP_SPEC_CONSTANT_FALSE, OP_SPEC_CONSTANT_OP, OP_SPEC_CONSTANT_TRUE, SpecValue,
                    evaluate_constants)

_SPEC_OPCODES = frozenset({OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE, OP_SPEC_CONSTANT,
                           OP_SPEC_CONSTANT_COMPOSITE, OP_SPEC_CONSTANT_OP})


def has_spec_constants(module: Module) -> bool:
    """Whether the module declares any specialization constant."""
    return any(i.opcode in _SPEC_OPCODES for i in module.globals)


def freeze_spec_constants(module: Module, spec_values: Mapping[int, SpecValue] | None = None) -> int:
    """Replace every specialization constant of `module` by the constant of its value; the number
    replaced. `spec_values`: SpecId -> value or the bytes of a VkSpecializationMapEntry."""
    g = grammar()
    op = g.opcode
    specs = [i for i in module.globals if i.opcode in _SPEC_OPCODES]
    if not specs:
        return 0
    values = evaluate_constants(module, spec_values)
    replacements: list[tuple[Instruction, int, list[int]]] = []
    for inst in specs:
        value = values.get(inst.result_id)
        type_inst = module.defs.get(inst.type_id)
        type_name = type_inst.opname if type_inst is not None else "?"
        if inst.opcode == OP_SPEC_CONSTANT_COMPOSITE:
            replacements.append((inst, op("OpConstantComposite"), list(inst.words)))
            continue
        if inst.opcode == OP_SPEC_CONSTANT_OP and type_name not in ("OpTypeBool", "OpTypeInt", "OpTypeFloat"):
            raise SpirvError(f"OpSpecConstantOp %{inst.result_id} ({_embedded(inst)}) has a {type_name} result: "
                             "only scalar results are specialized here")
        if value is None or not isinstance(value, int):
            raise SpirvError(f"OpSpecConstantOp %{inst.result_id} ({_embedded(inst)}) cannot be evaluated "
                             "at pipeline creation")
        if type_name == "OpTypeBool":
            replacements.append((inst, op("OpConstantTrue" if value else "OpConstantFalse"), inst.words[:2]))
        else:
            replacements.append((inst, op("OpConstant"), inst.words[:2] + _literal_words(type_inst, value)))
    for inst, opcode, words in replacements:
        inst.opcode, inst.words[:] = opcode, words
    module.globals[:] = [i for i in module.globals
                         if not (i.opcode == OP_DECORATE and len(i.words) >= 3 and i.words[1] == DECORATION_SPEC_ID)]
    return len(replacements)


def _embedded(inst: Instruction) -> str:
    info = grammar().instructions.get(inst.words[2]) if len(inst.words) > 2 else None
    return info.opname if info is not None else f"opcode {inst.words[2] if len(inst.words) > 2 else '?'}"


def _literal_words(type_inst: Instruction, value: int) -> list[int]:
    """The literal words of an OpConstant of this int/float type (SPIR-V 2.2.1: a signed integer
    narrower than 32 bits is sign-extended, anything else zero-extended; 64 bits take two words)."""
    width = type_inst.words[1]
    signed = type_inst.opname == "OpTypeInt" and type_inst.words[2] == 1
    value &= (1 << width) - 1
    if width < 32 and signed and value >> (width - 1):
        value |= 0xFFFFFFFF & ~((1 << width) - 1)
    if width > 32:
        return [value & 0xFFFFFFFF, value >> 32]
    return [value]

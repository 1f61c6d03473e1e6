"""Disassembly in the text form of `spirv-dis --raw-id --no-header --no-indent`.

Role: readable listings for debugging and error messages. Each line is
`%result = OpName %type operands…` with enumerants by name (bit masks joined
with `|`), strings quoted, extended instructions and OpSpecConstantOp opcodes
by name, and constants printed by their type (signed integers, floats with
9 or 17 significant digits as spirv-dis does). Ids are printed raw (`%12`);
`header=True` adds spirv-dis's leading comment lines.
"""

from __future__ import annotations

import math
import struct

from .grammar import Grammar, grammar
from .module import Instruction, Module
from .operands import OP_SWITCH, OP_TYPE_FLOAT, OP_TYPE_INT, Operand, decode_operands

_ID_OPERANDS = frozenset({"IdRef", "IdResultType", "IdScope", "IdMemorySemantics"})


def disassemble(module: Module, header: bool = False) -> str:
    """The whole module as text, one instruction per line."""
    lines: list[str] = []
    if header:
        major, minor = module.version_tuple
        lines += ["; SPIR-V", f"; Version: {major}.{minor}",
                  f"; Generator: {module.generator >> 16}; {module.generator & 0xFFFF}",
                  f"; Bound: {module.bound}", f"; Schema: {module.schema}"]
    lines.extend(instruction_text(module, inst) for inst in module.instructions())
    return "\n".join(lines) + "\n"


def instruction_text(module: Module, inst: Instruction) -> str:
    """One instruction in spirv-dis form."""
    g = grammar()
    operands = decode_operands(inst, module.defs, module.bound)
    parts: list[str] = []
    result = ""
    for index, op in enumerate(operands):
        if op.kind == "IdResult":
            result = f"%{op.value} = "
        else:
            parts.append(_operand_text(g, module, inst, index, op))
    name = g.instructions[inst.opcode].opname
    return result + " ".join([name, *parts])


def _operand_text(g: Grammar, module: Module, inst: Instruction, index: int, op: Operand) -> str:
    kind = op.kind
    if kind in _ID_OPERANDS:
        return f"%{op.value}"
    if kind == "LiteralString":
        return '"' + str(op.value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if kind == "LiteralExtInstInteger":
        einfo = op.ext.instructions.get(int(op.value)) if op.ext is not None else None
        return einfo.opname if einfo else str(op.value)
    if kind == "LiteralSpecConstantOpInteger":
        target = g.instructions.get(int(op.value))
        return target.opname[2:] if target else str(op.value)
    if kind == "LiteralContextDependentNumber":
        return _number(module, inst.type_id, int(op.value), op.words)
    if inst.opcode == OP_SWITCH and kind == "LiteralInteger" and index >= 2:
        selector = module.defs.get(inst.words[0])
        return _number(module, selector.type_id if selector else 0, int(op.value), op.words)
    enums = op.ext.enums if op.ext is not None else g.enums
    enum = enums.get(kind)
    if enum is not None:
        value = int(op.value)
        if not enum.is_bits:
            return enum.names.get(value, str(value))
        if value == 0:
            return enum.names.get(0, "None")
        names = []
        bit = 1
        while bit <= value:
            if value & bit:
                names.append(enum.names.get(bit, f"0x{bit:x}"))
            bit <<= 1
        return "|".join(names)
    return str(op.value)


def _number(module: Module, type_id: int, value: int, words: int) -> str:
    """A literal printed as its type says: signed/unsigned integer or float."""
    type_inst = module.defs.get(type_id)
    if type_inst is not None and type_inst.opcode == OP_TYPE_INT and len(type_inst.words) >= 3:
        width = type_inst.words[1]
        if type_inst.words[2] and 0 < width <= 64 and value >= 1 << (width - 1):
            value -= 1 << width
        return str(value)
    if type_inst is not None and type_inst.opcode == OP_TYPE_FLOAT and type_inst.words[1] in (32, 64):
        if type_inst.words[1] == 32:
            number = struct.unpack("<f", struct.pack("<I", value & 0xFFFFFFFF))[0]
            digits = 9
        else:
            number = struct.unpack("<d", struct.pack("<Q", value & 0xFFFFFFFFFFFFFFFF))[0]
            digits = 17
        if math.isfinite(number):
            return f"{number:.{digits}g}"
        return float.hex(number)
    return str(value) if words <= 2 else hex(value)

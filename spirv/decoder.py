"""Binary reader: bytes or words in, a checked `Module` out.

Role: split the binary into instructions, group them into functions and
blocks (see module.py), and check everything a consumer relies on: the magic
number (either byte order), header length, word counts, known opcodes, operand
layouts against the grammar, and every <id> operand below the bound. Any
failure is a SpirvError naming the word offset and what was expected.

Speed: most opcodes have one-word operands only, so the grammar precomputes
their <id> positions (`InstructionInfo.fast`) and they are checked without
building operand objects; the rest go through the full operand walker.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence

from .errors import SpirvError
from .grammar import grammar
from .module import Block, Function, Instruction, Module
from .operands import decode_operands

MAGIC = 0x07230203
HEADER_WORDS = 5
OP_FUNCTION = 54
OP_FUNCTION_END = 56
OP_LABEL = 248


def to_words(data: bytes | bytearray | memoryview | Sequence[int]) -> tuple[array, bool]:
    """Words in host order and whether the input was big-endian."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if len(raw) % 4:
            raise SpirvError(f"binary is {len(raw)} bytes, not a whole number of words",
                             offset=len(raw) // 4, expected="a length divisible by 4")
        words = array("I")
        words.frombytes(raw)
    else:
        try:
            words = data if isinstance(data, array) and data.typecode == "I" else array("I", data)
        except (OverflowError, TypeError) as exc:
            raise SpirvError(f"words are not 32-bit unsigned integers: {exc}") from None
    if len(words) < HEADER_WORDS:
        raise SpirvError(f"module has {len(words)} words", offset=len(words), expected="a 5-word header")
    host_big = sys.byteorder == "big"
    if words[0] == MAGIC:
        return words, host_big
    swapped = array("I", words)
    swapped.byteswap()
    if swapped[0] == MAGIC:
        return swapped, not host_big
    raise SpirvError(f"bad magic number 0x{words[0]:08x}", offset=0, expected=f"0x{MAGIC:08x}")


def parse(data: bytes | bytearray | memoryview | Sequence[int]) -> Module:
    """Read and check a SPIR-V binary (bytes in either byte order, or words)."""
    words, big_endian = to_words(data)
    bound = words[3]
    module = Module(words[1], words[2], bound, words[4], words[0], big_endian)
    infos = grammar().instructions
    defs = module.defs
    current: list[Instruction] = module.globals
    function: Function | None = None
    n = len(words)
    i = HEADER_WORDS
    while i < n:
        first = words[i]
        count = first >> 16
        opcode = first & 0xFFFF
        if count == 0:
            raise SpirvError("instruction word count is 0", offset=i, expected="a word count of at least 1")
        if i + count > n:
            raise SpirvError(f"instruction needs {count} words but only {n - i} remain", offset=i,
                             expected="a complete instruction")
        info = infos.get(opcode)
        if info is None:
            raise SpirvError(f"unknown opcode {opcode}", offset=i, expected="an opcode in the SPIR-V grammar")
        ops = words[i + 1:i + count].tolist()
        nops = count - 1
        result_id = ops[info.result_index] if 0 <= info.result_index < nops else 0
        type_id = ops[info.type_index] if 0 <= info.type_index < nops else 0
        inst = Instruction(opcode, ops, result_id, type_id)
        if info.fast:
            if nops < info.min_words or 0 <= info.max_words < nops:
                raise SpirvError(f"{info.opname} has {count} words", offset=i,
                                 expected=_expected_count(info.min_words, info.max_words))
            for slot in info.id_slots:
                if slot < nops and not 0 < ops[slot] < bound:
                    raise SpirvError(f"{info.opname} uses id {ops[slot]} outside the bound {bound}",
                                     offset=i + 1 + slot, expected=f"an id in 1..{bound - 1}")
            if info.tail_start >= 0:
                pattern = info.tail_pattern
                span = len(pattern)
                if (nops - info.tail_start) % span:
                    raise SpirvError(f"{info.opname} has an incomplete operand pair", offset=i,
                                     expected=f"operand words in groups of {span}")
                for k in range(info.tail_start, nops):
                    if pattern[(k - info.tail_start) % span] and not 0 < ops[k] < bound:
                        raise SpirvError(f"{info.opname} uses id {ops[k]} outside the bound {bound}",
                                         offset=i + 1 + k, expected=f"an id in 1..{bound - 1}")
        else:
            try:
                decode_operands(inst, defs, bound)
            except SpirvError as exc:
                raise SpirvError(exc.message, offset=i, expected=exc.expected) from None
        if result_id:
            if result_id in defs:
                raise SpirvError(f"id {result_id} is defined twice", offset=i, expected="a fresh result id")
            defs[result_id] = inst
        if opcode == OP_FUNCTION:
            if function is not None and not function.footer:
                raise SpirvError("OpFunction inside a function", offset=i, expected="OpFunctionEnd first")
            function = Function([inst], [], [])
            module.functions.append(function)
            current = function.header
        elif opcode == OP_LABEL:
            if function is None or function.footer:
                raise SpirvError("OpLabel outside a function", offset=i, expected="OpFunction first")
            block = Block([inst])
            function.blocks.append(block)
            current = block.instructions
        elif opcode == OP_FUNCTION_END:
            if function is None or function.footer:
                raise SpirvError("OpFunctionEnd outside a function", offset=i, expected="OpFunction first")
            function.footer.append(inst)
            current = function.footer
        else:
            current.append(inst)
        i += count
    if module.functions and not module.functions[-1].footer:
        raise SpirvError("module ends inside a function", offset=n, expected="OpFunctionEnd")
    return module


OP_CAPABILITY = 17
OP_MEMORY_MODEL = 14
OP_ENTRY_POINT = 15
CAPABILITY_LINKAGE = 5


def check_complete(module: Module) -> None:
    """SpirvError unless the module is whole as the specification requires of a module (section
    2.4, "Logical Layout"): one OpMemoryModel, and every <id> it uses defined somewhere in it
    (a forward reference resolved), and an OpEntryPoint unless it is a library (the Linkage
    capability), as spirv-val requires. `parse` checks each instruction as it comes; a module cut at
    an instruction boundary passes it, and fails here (an OpEntryPoint or OpFunctionCall whose
    function was cut off, a type used before the cut and defined after it)."""
    from .operands import referenced_ids

    ops = {inst.opcode for inst in module.globals}
    if OP_MEMORY_MODEL not in ops:
        raise SpirvError("no OpMemoryModel (a truncated module?)", expected="the module's memory model")
    linkage = any(inst.opcode == OP_CAPABILITY and inst.words[:1] == [CAPABILITY_LINKAGE] for inst in module.globals)
    if OP_ENTRY_POINT not in ops and not linkage:     # as spirv-val: only a library may have none
        raise SpirvError("no OpEntryPoint (a truncated module?)", expected="an entry point, or the Linkage capability")
    defs = module.defs
    for inst in module.instructions():
        for ref in referenced_ids(inst, module):
            if ref not in defs:
                raise SpirvError(f"{inst.opname} uses id {ref}, which the module never defines "
                                 "(a truncated module?)")


def _expected_count(lo: int, hi: int) -> str:
    if hi < 0:
        return f"at least {lo + 1} words"
    if hi == lo:
        return f"{lo + 1} words"
    return f"{lo + 1} to {hi + 1} words"

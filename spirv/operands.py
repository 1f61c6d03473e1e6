"""Grammar-driven operand decoding of one instruction.

Role: turn an instruction's operand words into typed `Operand`s by walking
the grammar's operand list, including optional (`?`) and variadic (`*`)
operands, enumerants with parameters (e.g. `Aligned 4`), literal strings,
multi-word literals whose width comes from a type (OpConstant, OpSwitch),
extended instruction sets (OpExtInst) and OpSpecConstantOp's embedded opcode.
Every malformed case raises SpirvError; nothing here keeps state.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SpirvError
from .grammar import ExtInstSet, Grammar, OperandSpec, grammar
from .module import Instruction, Module

OP_EXT_INST_IMPORT = 11
OP_EXT_INST = 12
OP_TYPE_INT = 21
OP_TYPE_FLOAT = 22
OP_SPEC_CONSTANT_OP = 52
OP_SWITCH = 251

_ID_KINDS = frozenset({"IdRef", "IdResult", "IdResultType", "IdScope", "IdMemorySemantics"})


@dataclass(frozen=True, slots=True)
class Operand:
    """A decoded operand. `value` is an int (ids, enums, literals of any
    width, float bit patterns) or a str (LiteralString); `words` is how many
    words it took; `ext` names the ext-inst set for enum kinds it defines."""

    kind: str
    value: int | str
    words: int = 1
    ext: ExtInstSet | None = None


def decode_string(words: list[int], pos: int) -> tuple[str, int]:
    """The literal string starting at words[pos], and the index after it."""
    raw = bytearray()
    n = len(words)
    while pos < n:
        word = words[pos]
        pos += 1
        chunk = word.to_bytes(4, "little")
        zero = chunk.find(0)
        if zero >= 0:
            raw += chunk[:zero]
            return raw.decode("utf-8", errors="replace"), pos
        raw += chunk
    raise SpirvError("literal string is not nul-terminated", expected="a nul byte before the end of the instruction")


def encode_string(text: str) -> list[int]:
    """The words of a nul-terminated literal string."""
    raw = text.encode("utf-8") + b"\0"
    raw += b"\0" * (-len(raw) % 4)
    return [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 4)]


def type_width(defs: dict[int, Instruction], type_id: int) -> int | None:
    """The bit width of an OpTypeInt/OpTypeFloat id, else None."""
    inst = defs.get(type_id)
    if inst is not None and inst.opcode in (OP_TYPE_INT, OP_TYPE_FLOAT) and inst.words[1:]:
        return inst.words[1]
    return None


def ext_set_of(defs: dict[int, Instruction], set_id: int) -> ExtInstSet | None:
    """The grammar of the OpExtInstImport with id `set_id` (None if unknown)."""
    inst = defs.get(set_id)
    if inst is None or inst.opcode != OP_EXT_INST_IMPORT:
        raise SpirvError(f"OpExtInst set %{set_id} is not an OpExtInstImport")
    name, _ = decode_string(inst.words, 1)
    return grammar().ext_set(name)


class _Walker:
    """Decodes one instruction's words against a list of operand specs."""

    def __init__(self, g: Grammar, inst: Instruction, defs: dict[int, Instruction], bound: int) -> None:
        self.g = g
        self.inst = inst
        self.words = inst.words
        self.defs = defs
        self.bound = bound
        self.pos = 0
        self.out: list[Operand] = []
        self.ext: ExtInstSet | None = None

    def run(self, specs: tuple[OperandSpec, ...]) -> list[Operand]:
        n = len(self.words)
        for spec in specs:
            if spec.quantifier == "":
                if self.pos >= n:
                    raise SpirvError(f"{self._name()} is missing operand {spec.name or spec.kind}",
                                     expected=f"a {spec.kind} operand")
                self.one(spec.kind)
            elif spec.quantifier == "?":
                if self.pos < n:
                    self.one(spec.kind)
            else:
                while self.pos < n:
                    self.one(spec.kind)
        if self.pos != n:
            raise SpirvError(f"{self._name()} has {n - self.pos} word(s) beyond its operands",
                             expected=f"{self.pos + 1} words in all")
        return self.out

    def _name(self) -> str:
        info = self.g.instructions.get(self.inst.opcode)
        return info.opname if info else f"opcode {self.inst.opcode}"

    def _take(self, kind: str) -> int:
        if self.pos >= len(self.words):
            raise SpirvError(f"{self._name()} ends inside operand {kind}", expected=f"a {kind} word")
        word = self.words[self.pos]
        self.pos += 1
        return word

    def one(self, kind: str) -> None:
        g = self.g
        if kind in _ID_KINDS:
            value = self._take(kind)
            if not 0 < value < self.bound:
                raise SpirvError(f"{self._name()} uses id {value} outside the bound {self.bound}",
                                 expected=f"an id in 1..{self.bound - 1}")
            self.out.append(Operand(kind, value))
        elif kind == "LiteralString":
            if self.pos >= len(self.words):
                raise SpirvError(f"{self._name()} is missing a string", expected="a literal string")
            text, end = decode_string(self.words, self.pos)
            self.out.append(Operand(kind, text, end - self.pos))
            self.pos = end
        elif kind == "LiteralContextDependentNumber":
            self._number(kind, self._context_width())
        elif kind == "LiteralExtInstInteger":
            self.out.append(Operand(kind, self._take(kind), 1, self.ext))
        elif kind in self.g.composites:
            for base in g.composites[kind]:
                if base == "LiteralInteger" and self.inst.opcode == OP_SWITCH:
                    self._number(base, self._selector_width())
                else:
                    self.one(base)
        elif kind in g.enums or (self.ext is not None and kind in self.ext.enums):
            self._enum(kind)
        else:  # LiteralInteger, LiteralFloat, LiteralSpecConstantOpInteger and any one-word literal
            self.out.append(Operand(kind, self._take(kind)))

    def _enum(self, kind: str) -> None:
        enum = self.ext.enums.get(kind) if self.ext is not None and kind in self.ext.enums else self.g.enums[kind]
        value = self._take(kind)
        self.out.append(Operand(kind, value, 1, self.ext if enum is not self.g.enums.get(kind) else None))
        if not enum.params:
            return
        if enum.is_bits:
            bit = 1
            while bit <= value:
                if value & bit and bit in enum.params:
                    for param in enum.params[bit]:
                        self.one(param)
                bit <<= 1
        elif value in enum.params:
            for param in enum.params[value]:
                self.one(param)

    def _number(self, kind: str, width: int | None) -> None:
        count = max(1, (width + 31) // 32) if width else len(self.words) - self.pos
        if count <= 0 or self.pos + count > len(self.words):
            raise SpirvError(f"{self._name()} literal needs {max(count, 1)} word(s)",
                             expected=f"a {width}-bit literal")
        value = 0
        for i in range(count):
            value |= self.words[self.pos + i] << (32 * i)
        self.pos += count
        self.out.append(Operand(kind, value, count))

    def _context_width(self) -> int | None:
        return type_width(self.defs, self.inst.type_id)

    def _selector_width(self) -> int | None:
        selector = self.defs.get(self.words[0])
        return type_width(self.defs, selector.type_id) if selector is not None else None


def operand_specs(inst: Instruction, defs: dict[int, Instruction]) -> tuple[tuple[OperandSpec, ...], ExtInstSet | None]:
    """The operand list of this instruction, expanded for OpExtInst and OpSpecConstantOp."""
    g = grammar()
    info = g.instructions.get(inst.opcode)
    if info is None:
        raise SpirvError(f"unknown opcode {inst.opcode}", expected="an opcode in the SPIR-V grammar")
    words = inst.words
    if inst.opcode == OP_EXT_INST and len(words) >= 4:
        ext = ext_set_of(defs, words[2])
        head = info.operands[:4]
        if ext is None:
            return head + (OperandSpec("LiteralInteger", "*", "Operands"),), None
        if ext.all_ids:
            return head + (OperandSpec("IdRef", "*", "Operands"),), ext
        einfo = ext.instructions.get(words[3])
        if einfo is None:
            raise SpirvError(f"unknown instruction {words[3]} of extended set {ext.name}",
                             expected=f"an instruction of {ext.name}")
        return head + einfo.operands, ext
    if inst.opcode == OP_SPEC_CONSTANT_OP and len(words) >= 3:
        target = g.instructions.get(words[2])
        if target is None:
            raise SpirvError(f"OpSpecConstantOp names unknown opcode {words[2]}", expected="a known opcode")
        rest = tuple(s for s in target.operands if s.kind not in ("IdResultType", "IdResult"))
        return info.operands + rest, None
    return info.operands, None


def decode_operands(inst: Instruction, defs: dict[int, Instruction], bound: int) -> list[Operand]:
    """Decode every operand of `inst`; ids are checked against `bound`."""
    specs, ext = operand_specs(inst, defs)
    walker = _Walker(grammar(), inst, defs, bound)
    walker.ext = ext
    return walker.run(specs)


def referenced_ids(inst: Instruction, module: Module) -> list[int]:
    """Every <id> operand of `inst` other than its result id (fast for one-word layouts)."""
    info = grammar().instructions[inst.opcode]
    words = inst.words
    n = len(words)
    if info.fast:
        ids = [words[s] for s in info.id_slots if s < n and s != info.result_index]
        if info.tail_start >= 0:
            pattern = info.tail_pattern
            span = len(pattern)
            ids += [words[k] for k in range(info.tail_start, n) if pattern[(k - info.tail_start) % span]]
        return ids
    return [op.value for op in decode_operands(inst, module.defs, module.bound)
            if op.kind in _ID_KINDS and op.kind != "IdResult"]  # type: ignore[misc]

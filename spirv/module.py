"""The in-memory SPIR-V module: instructions, blocks, functions, and emission.

Role: the data model every other part of tessera.spirv reads and edits.
An `Instruction` keeps its operand words exactly as read (the word count is
implied), so emitting an unedited module reproduces the input byte for byte.
Instructions are grouped only as far as the binary's logical layout fixes:

- `Module.globals`: every instruction before the first OpFunction, in order
  (capabilities, extensions, imports, memory model, entry points, execution
  modes, debug, annotations, types, constants, global variables);
- `Module.functions`: each `Function` holds its `header` (OpFunction,
  OpFunctionParameter, anything before the first OpLabel), its `blocks`
  (each starting with its OpLabel, ending after its terminator and anything
  that follows it before the next OpLabel) and its `footer` (OpFunctionEnd and
  anything up to the next OpFunction).

`Module.defs` maps each result id to its defining instruction; the decoder
fills it and the editor keeps it current. A module is owned by one thread at
a time; nothing here is shared.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator

from .errors import SpirvError
from .grammar import grammar


class Instruction:
    """One instruction: opcode and operand words (without the leading word)."""

    __slots__ = ("opcode", "words", "result_id", "type_id")

    def __init__(self, opcode: int, words: list[int], result_id: int = 0, type_id: int = 0) -> None:
        self.opcode = opcode
        self.words = words
        self.result_id = result_id
        self.type_id = type_id

    @classmethod
    def make(cls, opcode: int, words: list[int]) -> Instruction:
        """An instruction whose result and type ids are found from the grammar."""
        info = grammar().instructions.get(opcode)
        if info is None:
            raise SpirvError(f"unknown opcode {opcode}")
        result_id = words[info.result_index] if 0 <= info.result_index < len(words) else 0
        type_id = words[info.type_index] if 0 <= info.type_index < len(words) else 0
        return cls(opcode, words, result_id, type_id)

    @property
    def opname(self) -> str:
        """The instruction name, e.g. "OpIAdd"."""
        info = grammar().instructions.get(self.opcode)
        return info.opname if info else f"Op{self.opcode}"

    @property
    def word_count(self) -> int:
        return len(self.words) + 1

    def __repr__(self) -> str:
        return f"Instruction({self.opname}, {self.words})"


class Block:
    """A basic block: `instructions[0]` is its OpLabel."""

    __slots__ = ("instructions",)

    def __init__(self, instructions: list[Instruction]) -> None:
        self.instructions = instructions

    @property
    def label(self) -> int:
        """The block's label id."""
        return self.instructions[0].result_id

    @property
    def terminator(self) -> Instruction:
        """The block's last instruction (its terminator in a valid module)."""
        return self.instructions[-1]


class Function:
    """A function: header instructions, basic blocks, footer instructions."""

    __slots__ = ("header", "blocks", "footer")

    def __init__(self, header: list[Instruction], blocks: list[Block], footer: list[Instruction]) -> None:
        self.header = header
        self.blocks = blocks
        self.footer = footer

    @property
    def id(self) -> int:
        """The function's result id."""
        return self.header[0].result_id

    def instructions(self) -> Iterator[Instruction]:
        yield from self.header
        for block in self.blocks:
            yield from block.instructions
        yield from self.footer


class Module:
    """A SPIR-V module: header words, global instructions and functions."""

    def __init__(self, version: int, generator: int, bound: int, schema: int = 0,
                 magic: int = 0x07230203, big_endian: bool = False) -> None:
        self.magic = magic
        self.version = version
        self.generator = generator
        self.bound = bound
        self.schema = schema
        self.big_endian = big_endian
        self.globals: list[Instruction] = []
        self.functions: list[Function] = []
        self.defs: dict[int, Instruction] = {}

    @property
    def version_tuple(self) -> tuple[int, int]:
        """(major, minor) of the module's SPIR-V version."""
        return (self.version >> 16) & 0xFF, (self.version >> 8) & 0xFF

    def instructions(self) -> Iterator[Instruction]:
        """Every instruction in binary order."""
        yield from self.globals
        for function in self.functions:
            yield from function.instructions()

    def function(self, function_id: int) -> Function:
        """The function with result id `function_id`."""
        for function in self.functions:
            if function.id == function_id:
                return function
        raise SpirvError(f"no function with id %{function_id}")

    def to_words(self) -> array:
        """The module as 32-bit words in host order."""
        out = array("I", (self.magic, self.version, self.generator, self.bound, self.schema))
        buf: list[int] = []
        append, extend = buf.append, buf.extend
        for inst in self.instructions():
            words = inst.words
            append(((len(words) + 1) << 16) | inst.opcode)
            extend(words)
        out.extend(buf)
        return out

    def to_bytes(self) -> bytes:
        """The module's binary, in the byte order it was read in."""
        words = self.to_words()
        if self.big_endian != (sys.byteorder == "big"):
            words.byteswap()
        return words.tobytes()

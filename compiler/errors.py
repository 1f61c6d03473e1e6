"""The one exception type of tessera.compiler.

Every failure to model a shader (invalid SPIR-V, an unsupported instruction,
an unknown entry point or GPU, a register file too small for one instruction)
is a `CompileError`. When the problem is an instruction, `instruction` holds
its disassembly and `block` the global block index (tessera.spirv numbering)
it sits in, so the report says what is wrong and where.
"""

from __future__ import annotations


class CompileError(Exception):
    """A shader cannot be modelled; `str()` is a one-line report."""

    def __init__(self, message: str, instruction: str | None = None, block: int | None = None) -> None:
        self.message = message
        self.instruction = instruction
        self.block = block
        text = message
        if block is not None:
            text = f"block {block}: {text}"
        if instruction:
            text = f"{text}: {instruction}"
        super().__init__(text)

"""The one exception type of tessera.spirv.

Every failure to read, decode, edit or reflect a module is a `SpirvError`.
Errors found while reading a binary carry the word offset (counted from the
first header word) and a short statement of what was expected there, so a
truncated or corrupt module is reported at the place it goes wrong rather than
as an IndexError deep inside.
"""

from __future__ import annotations


class SpirvError(Exception):
    """A SPIR-V module is malformed, or an operation on it cannot be done.

    `offset` is the word offset of the offending instruction or word (None
    when the error is not about a position in a binary); `expected` says what
    should have been there.
    """

    def __init__(self, message: str, offset: int | None = None, expected: str | None = None) -> None:
        self.message = message
        self.offset = offset
        self.expected = expected
        text = message
        if offset is not None:
            text = f"word {offset}: {text}"
        if expected:
            text = f"{text} (expected {expected})"
        super().__init__(text)

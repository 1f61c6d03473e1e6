"""A file read ahead in chunks, with a cursor: the reading half of the resynchronising readers.

Role: shared by schemas/logfile.py (hostd's record log) and schemas/perfetto.py
(Trace.packet framing). Both look ahead an arbitrary number of bytes from a
cursor (a record's checksum, the packet after this one) and scan forward
after damage; neither wants the whole file in memory. Bytes before the
cursor are dropped when more are read, so memory is the largest look-ahead,
not the file. `buf` is replaced, never changed in place: a slice a caller
took stays valid.
"""
from __future__ import annotations

from typing import BinaryIO


class ReadAhead:
    def __init__(self, f: BinaryIO, chunk: int = 1 << 20) -> None:
        self.f, self.chunk = f, chunk
        self.buf = b""
        self.base = f.tell()    # file offset of buf[0]
        self.pos = 0            # the cursor, an index into buf
        self.eof = False

    def need(self, n: int) -> bool:
        """At least n bytes after the cursor (False: the file ends first). Moves `buf`
        (and `pos` with it): index positions only after the last call."""
        while len(self.buf) - self.pos < n and not self.eof:
            data = self.f.read(max(self.chunk, n - (len(self.buf) - self.pos)))
            if not data:
                self.eof = True
                break
            self.buf = self.buf[self.pos:] + data
            self.base += self.pos
            self.pos = 0
        return len(self.buf) - self.pos >= n

    def find(self, needle: bytes) -> bool:
        """Move the cursor to the next `needle` (False: none before the end of the file)."""
        while True:
            i = self.buf.find(needle, self.pos)
            if i >= 0:
                self.pos = i
                return True
            self.pos = max(self.pos, len(self.buf) - len(needle) + 1)
            if not self.need(len(self.buf) - self.pos + 1):
                self.pos = len(self.buf)
                return False

    @property
    def at(self) -> int:
        """File offset of the cursor."""
        return self.base + self.pos

    @property
    def left(self) -> int:
        """Bytes read after the cursor."""
        return len(self.buf) - self.pos

"""Perfetto trace files, raw: write packets back unchanged or re-encoded.

Role: the merge's output. Reading is tessera.schemas.perfetto.iter_raw (the one
implementation of the Trace.packet framing): it yields each packet's encoded
field, so an unmodified packet is copied byte for byte, never re-serialised.
`TraceOut` writes to a temporary file renamed into place by `commit()`, so a
failed merge never leaves half a trace under the final name.
"""
from __future__ import annotations

import os
from pathlib import Path

from tessera.schemas.perfetto import TracePacket, frame_packet


class TraceOut:
    def __init__(self, path: Path, buffer: int = 1 << 20) -> None:
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        self._f = open(self.tmp, "wb", buffering=buffer)
        self.packets = 0

    def raw(self, field: bytes) -> None:
        self._f.write(field)
        self.packets += 1

    def packet(self, packet: TracePacket) -> None:
        self._f.write(frame_packet(packet))
        self.packets += 1

    def commit(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self._f.close()
        self.tmp.unlink(missing_ok=True)

"""Perfetto trace files, raw: write packets back unchanged or re-encoded.

Role: the merge's output. Reading is tessera.schemas.perfetto.iter_raw (the one
implementation of the Trace.packet framing): it yields each packet's encoded
field, so an unmodified packet is copied byte for byte, never re-serialised.
`TraceOut` writes through schemas.files.AtomicOutput: a temporary created
exclusively (0600, never through a planted link) beside the target, renamed
into place by `commit()`, so a failed merge never leaves half a trace under the
final name nor a temporary behind. A write that fails (a full disk) raises
schemas.files.OutputError.
"""
from __future__ import annotations

from pathlib import Path

from tessera.schemas.files import AtomicOutput, OutputError
from tessera.schemas.perfetto import TracePacket, frame_packet


class TraceOut:
    def __init__(self, path: Path, buffer: int = 1 << 20) -> None:
        self._out = AtomicOutput(path, buffer)
        self.path = self._out.path
        self.tmp = self._out.tmp
        self._f = self._out.file
        self.packets = 0

    def raw(self, field: bytes) -> None:
        try:                        # (free when nothing is raised: per packet)
            self._f.write(field)
        except OSError as e:
            raise OutputError(self.path, e) from e
        self.packets += 1

    def packet(self, packet: TracePacket) -> None:
        self.raw(frame_packet(packet))

    def commit(self) -> None:
        self._out.commit()

    def abort(self) -> None:
        self._out.abort()

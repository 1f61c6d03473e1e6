"""Perfetto trace files, raw: stream packets with their bytes, write them back unchanged or re-encoded.

Role: the merge's I/O. `iter_raw()` yields each packet's encoded field (so an
unmodified packet is copied byte for byte, never re-serialised) and the file
offset reached, for progress. `TraceOut` writes to a temporary file renamed
into place by `commit()`, so a failed merge never leaves half a trace under
the final name. Uses the framing of tessera.schemas.perfetto (Trace.packet,
field 1).
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from tessera.schemas.perfetto import TraceFormatError, TracePacket, frame_packet


def iter_raw(path: Path, chunk: int = 1 << 20) -> Iterator[tuple[bytes, int, int]]:
    """(field bytes, body start within them, file offset after the packet) per packet.

    Raises TraceFormatError where the file stops being a trace (e.g. a packet cut
    short by a crash); everything before it has been yielded.
    """
    with open(path, "rb") as f:
        buf = b""
        base = 0            # file offset of buf[0]
        while True:
            data = f.read(chunk)
            if data:
                buf = buf + data if buf else data
            pos = 0
            n = len(buf)
            while pos < n:
                if buf[pos] != 0x0A:
                    raise TraceFormatError(base + pos, f"expected a Trace.packet field (0x0a), found 0x{buf[pos]:02x}")
                length = shift = 0
                i = pos + 1
                while i < n:
                    b = buf[i]
                    length |= (b & 0x7F) << shift
                    i += 1
                    if not b & 0x80:
                        break
                    shift += 7
                    if shift > 63:
                        raise TraceFormatError(base + pos, "packet length varint too long")
                else:
                    break
                end = i + length
                if end > n:
                    break
                yield buf[pos:end], i - pos, base + end
                pos = end
            buf = buf[pos:]
            base += pos
            if not data:
                if buf:
                    raise TraceFormatError(base, f"trace ends inside a packet ({len(buf)} bytes)")
                return


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

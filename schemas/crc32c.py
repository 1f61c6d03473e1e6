"""CRC-32C (Castagnoli), the checksum of hostd's session-log records (schemas/logfile.py).

Role: one function, `crc32c(data, crc=0)`, which extends `crc` over `data`.
CRC-32C is what LevelDB, RocksDB and Kafka checksum their log records with
(iSCSI's polynomial, RFC 3720 §12.1: reflected 0x82F63B78, initial value and
final XOR 0xFFFFFFFF; check value of b"123456789" is 0xE3069283).

Speed: the `google-crc32c` package (a project dependency) computes it in C
with the SSE4.2 instruction at ~25 GB/s here, so checksumming every byte hostd
logs costs nothing measurable. Without it this module falls back to a
table-driven pure-Python loop (one table lookup per byte, ~10 MB/s): correct,
fast enough for tests and small logs, far too slow for a busy daemon, which
is why the package is a dependency rather than an option.
"""
from __future__ import annotations

_POLY = 0x82F63B78      # CRC-32C polynomial 0x1EDC6F41, bit-reversed


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c_python(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of `data`, continuing from `crc` (the pure-Python fallback)."""
    table = _TABLE
    c = crc ^ 0xFFFFFFFF
    for b in bytes(data):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


try:
    from google_crc32c import extend as _extend
    from google_crc32c import implementation as _implementation
except ImportError:          # the dependency is missing: correct but slow
    _extend = None
    _implementation = "python"


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of `data`, continuing from `crc` (0 to start)."""
    if _extend is not None:
        return _extend(crc, data if data.__class__ is bytes else bytes(data))
    return crc32c_python(data, crc)


IMPLEMENTATION = "google-crc32c (C)" if _extend is not None and _implementation == "c" else "python"

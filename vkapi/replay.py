"""Re-recordings: a recording equal to the buffer's previous one but for its tags reuses what that one made.

Engines record the same commands into the same command buffers every frame; the layer's tags (and
the driver's t<tag> labels, recorded as numbers: Recorded.tag_labels) are then all that differs. When
a command buffer's whole recording (every command since vkBeginCommandBuffer recorded in C, none
applied yet: tessera_cb_whole) is byte for byte its previous whole recording's except in the tag slots
(tessera_records_same, in C), and nothing the records name has changed since (`Products.generation`:
vkapi/resources.py counts every handle replaced or destroyed), the shim's `Products` restores that
recording's product with the new tags instead of applying the records one by one in Python.

What a product is belongs to each shim (layer/replay.py, icd/replay.py): the fields its appliers set
on the command buffer's state, with every tag-bearing object rebuilt for the new tags. A product is
kept only when the shim can say where every tag went (`snapshot` returns None otherwise).

TESSERA_REPLAY=0 turns reuse off; TESSERA_REPLAY=check applies every recording anyway and reports a
reused product that differs from the applied one (the tests run the examples so).

Memory: one entry per command buffer (its last whole recording's records and product), dropped with
the buffer; recordings over MAX_BYTES of records or MAX_TAGS tags are not kept.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Protocol

SWITCH = "TESSERA_REPLAY"
MAX_TAGS = 4096
MAX_BYTES = 1 << 20


class Products(Protocol):
    """A shim's side: what its appliers make of a recording, and how to make it again."""

    def generation(self, owner) -> int:
        """Changes whenever something a record may name (a pipeline, a buffer, an image...) is replaced
        or destroyed."""

    def snapshot(self, owner, handle, tags: list[int]) -> Any | None:
        """The product of the recording just applied to `handle` (its tags `tags`, in record order),
        or None when it cannot be made again."""

    def fields(self, product, tags: list[int]) -> dict[str, Any]:
        """The state fields `product` sets, rebuilt for `tags` (comparable with ==)."""

    def restore(self, owner, handle, product, tags: list[int]) -> None:
        """Set `handle`'s state as applying the records would have (fields(product, tags))."""


@dataclass
class _Entry:
    records: bytes
    generation: int
    product: Any
    checked: bool = False     # check mode: the next apply compares with this product


class Replays:
    """One shim's previous recordings, by command buffer address."""

    def __init__(self, ffi, lib, products: Products, report) -> None:
        mode = os.environ.get(SWITCH, "1")
        self.enabled = mode != "0"
        self.check = mode == "check"
        self.ffi, self.lib, self.products, self.report = ffi, lib, products, report
        self._entries: dict[int, _Entry] = {}
        self._local = threading.local()
        self.reused = 0          # recordings restored (TESSERA_LOG=info at vkDestroyDevice)
        self.checked = 0         # check mode: recordings that would have been restored, compared instead
        self.mismatches = 0      # ... and found to differ from the applied ones

    def _scratch(self):
        tags = getattr(self._local, "tags", None)
        if tags is None:
            tags = self._local.tags = self.ffi.new("uint64_t[]", MAX_TAGS)
        return tags

    def reuse(self, owner, handle, key: int, base, used: int) -> bool:
        """A whole recording of `handle` (`used` bytes of records at `base`): True when the previous
        one's product was restored for it (the records need not be applied)."""
        entry = self._entries.get(key)
        if entry is None or len(entry.records) != used or entry.generation != self.products.generation(owner):
            return False
        scratch = self._scratch()
        n = self.lib.tessera_records_same(base, entry.records, used, scratch, MAX_TAGS)
        if n < 0:
            return False
        if self.check:
            entry.checked = True
            return False
        self.products.restore(owner, handle, entry.product, self.ffi.unpack(scratch, n))
        self.reused += 1
        return True

    def records(self, base, used: int) -> bytes | None:
        """A whole recording's records as C made them (applying them points their info structs at their
        copies), to keep if its product can be made again; None when too big to keep."""
        return bytes(self.ffi.buffer(base, used)) if used <= MAX_BYTES else None

    def remember(self, owner, handle, key: int, records: bytes | None) -> None:
        """After a whole recording of `handle` was applied: keep it (`records`) and its product for the
        next one."""
        entry = self._entries.pop(key, None)
        if records is None:
            return
        scratch = self._scratch()
        n = self.lib.tessera_records_tags(self.ffi.from_buffer(records), len(records), scratch, MAX_TAGS)
        if n < 0:
            return
        tags = self.ffi.unpack(scratch, n)
        product = self.products.snapshot(owner, handle, tags)
        if entry is not None and entry.checked and product is not None:
            self.checked += 1
            if self.products.fields(entry.product, tags) != self.products.fields(product, tags):
                self.mismatches += 1
                self.report("TESSERA_REPLAY=check: a re-recording's reused product differs from its applied one")
        if product is not None:
            self._entries[key] = _Entry(records, self.products.generation(owner), product)

    def forget(self, key: int) -> None:
        """The command buffer is freed."""
        self._entries.pop(key, None)

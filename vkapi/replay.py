"""Re-recordings: a recording equal to an earlier one but for its tags reuses what that one made.

Engines record the same commands every frame (into the same command buffers, or into new ones they
allocate per frame); the layer's tags (and the driver's t<tag> labels, recorded as numbers:
Recorded.tag_labels) are then all that differs. When a command buffer's whole recording (every
command since vkBeginCommandBuffer recorded in C, none applied yet: tessera_cb_whole) is byte for byte
an earlier whole recording's on the same device except in the tag slots (found by a hash of the
records but their tags, tessera_records_hash, and compared whole, tessera_records_same, in C), and
nothing the records name has changed since (`Products.resources(owner).generation`: vkapi/resources.py
counts every handle replaced or destroyed), the shim's `Products` restores that recording's product
with the new tags instead of applying the records one by one in Python.

What a product is belongs to each shim (layer/replay.py, icd/replay.py): the fields its appliers set
on the command buffer's state, with every tag-bearing object rebuilt for the new tags; nothing in it
names the command buffer, so any buffer of the device may take it. A product is kept only when the
shim can say where every tag went (`snapshot` returns None otherwise).

TESSERA_REPLAY=0 turns reuse off; TESSERA_REPLAY=check applies every recording anyway and reports a
reused product that differs from the applied one (tests/integration/test_replay.py).

Memory: the most recently used KEEP recordings per shim, MAX_BYTES of records each and KEEP_BYTES in
all (least recently used first out); recordings over MAX_TAGS tags are not kept.
"""
from __future__ import annotations

import collections
import os
import threading
from dataclasses import dataclass
from typing import Any, Protocol

SWITCH = "TESSERA_REPLAY"
MAX_TAGS = 4096
MAX_BYTES = 1 << 20
KEEP = 512
KEEP_BYTES = 32 << 20


class Products(Protocol):
    """A shim's side: what its appliers make of a recording, and how to make it again."""

    def resources(self, owner):
        """The device's vkapi.resources.Resources (its `generation` changes whenever something a record
        may name, a pipeline, a buffer, an image..., is replaced or destroyed)."""

    def snapshot(self, owner, handle, tags: list[int]) -> Any | None:
        """The product of the recording just applied to `handle` (its tags `tags`, in record order),
        or None when it cannot be made again."""

    def fields(self, product, tags: list[int]) -> dict[str, Any]:
        """The state fields `product` sets, rebuilt for `tags` (comparable with ==)."""

    def restore(self, owner, handle, product, tags: list[int]) -> None:
        """Set `handle`'s state as applying the records would have (fields(product, tags))."""

    def table(self, owner):
        """The device's C table (vkapi/recorder.py `device_table`), under which C compares the
        recordings it ends itself with the kept ones (vkapi/lifecycle.py)."""

    def deferrable(self, device) -> bool:
        """Whether every begin and end hook of the shim may run later for the device's primary
        buffers (vkapi/lifecycle.py): none inserts commands or routes the buffer's commands at once."""

    def was_read(self, owner, handle, submits: int) -> None:
        """After `restore`, for a recording whose `submits` submits a ledger reader reported from the
        product without running its hooks (Recorder.reading_all): leave the state as those reports would have
        (what they sent is not sent again)."""


@dataclass
class _Entry:
    records: bytes
    resources: Any         # the device's Resources: held, so no later device's takes its id while kept
    generation: int
    product: Any
    table: Any             # the device's C table, under which C keeps a copy of `records` (held: its address too)
    hash: int


def attach(lib, kept: _Entry, key: tuple[int, int], data: bytes) -> bool:
    """Attach `data` under `key` (two u64 of the shim's choosing) to the copy C keeps of `kept`'s records
    (runtime/lifecycle.c tessera_product_attach): it goes with them. False when C keeps none now."""
    return kept.table is not None and bool(lib.tessera_product_attach(
        kept.table, kept.hash, len(kept.records), kept.generation, key[0], key[1], data, len(data)))


class Replays:
    """One shim's recent whole recordings, by (device, hash of the records but their tags, size)."""

    def __init__(self, ffi, lib, products: Products, report) -> None:
        mode = os.environ.get(SWITCH, "1")
        self.enabled = mode != "0"
        self.check = mode == "check"
        self.ffi, self.lib, self.products, self.report = ffi, lib, products, report
        self._entries: collections.OrderedDict[tuple, _Entry] = collections.OrderedDict()   # oldest first
        self._bytes = 0
        self._checking: dict[int, _Entry] = {}   # check mode: command buffer -> the entry its recording matched
        self._lock = threading.Lock()            # buffers are applied on several threads at once
        self._local = threading.local()
        self.reused = 0          # recordings restored (TESSERA_LOG=info at vkDestroyDevice)
        self.checked = 0         # check mode: recordings that would have been restored, compared instead
        self.mismatches = 0      # ... and found to differ from the applied ones

    def _tags(self):
        """This thread's buffer for MAX_TAGS tags (C writes a recording's tags into it)."""
        tags = getattr(self._local, "tags", None)
        if tags is None:
            tags = self._local.tags = self.ffi.new("uint64_t[]", MAX_TAGS)
        return tags

    def match(self, owner, base, used: int) -> tuple[_Entry, list[int]] | None:
        """The kept recording equal but for its tags to a whole recording (`used` bytes of records at `base`)
        on `owner`'s device, with the recording's own tags; None when none is kept."""
        entry = self.kept(owner, self.lib.tessera_records_hash(base, used), used)
        if entry is None:
            return None
        scratch = self._tags()
        n = self.lib.tessera_records_same(base, entry.records, used, scratch, MAX_TAGS)
        if n < 0:   # the same hash, other records
            return None
        return entry, self.ffi.unpack(scratch, n)

    def kept(self, owner, hash_: int, size: int) -> _Entry | None:
        """The recording kept under (`owner`'s device, `hash_`, `size`) while nothing it names changed (its
        `product`); None when none is."""
        return self.kept_all(owner, [hash_, size], [0])[0]

    def kept_all(self, owner, keys: list[int], results: list[int]) -> list[_Entry | None]:
        """`kept` on `owner`'s device of the i-th (hash, size), keys[2i] and keys[2i + 1], where results[i] >= 0
        (tessera_cb_read_products' out-parameters); None for the others."""
        res = self.products.resources(owner)
        rid, generation, entries = id(res), res.generation, self._entries
        get, touch = entries.get, entries.move_to_end
        out = []
        with self._lock:
            for i, n in enumerate(results):
                entry = None
                if n >= 0:
                    found = (rid, keys[2 * i], keys[2 * i + 1])
                    entry = get(found)
                    if entry is not None and entry.generation == generation:
                        touch(found)
                    else:
                        entry = None
                out.append(entry)
        return out

    def reuse(self, owner, handle, key: int, base, used: int) -> bool:
        """A whole recording of `handle` (`used` bytes of records at `base`): True when an earlier one equal
        but for its tags had its product restored for it (the records need not be applied)."""
        found = self.match(owner, base, used)
        if found is None:
            return False
        entry, tags = found
        if self.check:
            self._checking[key] = entry
            return False
        self.products.restore(owner, handle, entry.product, tags)
        self.reused += 1
        return True

    def records(self, base, used: int) -> bytes | None:
        """A whole recording's records as C made them (applying them points their info structs at their
        copies), to keep if its product can be made again; None when too big to keep."""
        return bytes(self.ffi.buffer(base, used)) if used <= MAX_BYTES else None

    def remember(self, owner, handle, key: int, records: bytes | None) -> bool:
        """After a whole recording of `handle` was applied: keep it (`records`) and its product. Whether C keeps a
        copy (the device's buffers begin and end in C)."""
        matched = self._checking.pop(key, None)
        if records is None:
            return False
        scratch = self._tags()
        data = self.ffi.from_buffer(records)
        n = self.lib.tessera_records_tags(data, len(records), scratch, MAX_TAGS)
        if n < 0:
            return False
        tags = self.ffi.unpack(scratch, n)
        product = self.products.snapshot(owner, handle, tags)
        if product is None:
            return False
        if matched is not None:   # check mode: what reuse would have restored, against what was applied
            self.checked += 1
            if self.products.fields(matched.product, tags) != self.products.fields(product, tags):
                self.mismatches += 1
                self.report("TESSERA_REPLAY=check: a re-recording's reused product differs from its applied one")
            return False
        res = self.products.resources(owner)
        table = self.products.table(owner)
        digest = self.lib.tessera_records_hash(data, len(records))
        found = (id(res), digest, len(records))
        with self._lock:
            old = self._entries.pop(found, None)
            if old is not None:
                self._bytes -= len(old.records)
            self._entries[found] = entry = _Entry(records, res, res.generation, product, table, digest)
            self._bytes += len(records)
            in_c = table is not None and table.deferrable   # C may end an equal recording itself (lifecycle.py)
            if in_c:
                in_c = bool(self.lib.tessera_product_keep(handle, data, len(records), digest, entry.generation))
            while len(self._entries) > KEEP or self._bytes > KEEP_BYTES:
                _, out = self._entries.popitem(last=False)
                self._bytes -= len(out.records)
                if out.table is not None:
                    self.lib.tessera_product_drop(out.table, out.hash, len(out.records))
        return in_c

    def forget(self, key: int) -> None:
        """The command buffer is freed."""
        self._checking.pop(key, None)

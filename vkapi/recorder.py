"""Record in C, think in Python: the commands a shim records in a per-command-buffer arena.

Role: the runtime side, and the record layout both sides keep to. The C that writes the
records is made at build time by vkapi/recorder_gen.py (per command, inside each recorded
command's guard, see guards.py) around the static C of vkapi/runtime/recorder.c; this module
holds what a shim needs at run time: the `Recorded` declarations of the intercept table and the
Python that reads the records (`Recorder.apply`). A shim declares its recorded commands in a
table of `Recorded` entries (its shim spec); everything else stays a Python hook.

Hot path (C, on the application's thread, no Python): find the command buffer's
`tessera_cb` in a lock-free hash map, append one record to its arena (reused across
resets: fresh pages cost several times more), for the layer's tagged workloads take a
tag from the process-wide counter and wrap the call in a `t<tag>` label sent down, then
call the next element directly through the device's C table of next functions.

Python later: records are applied in order, by the same hook logic as before, whenever
Python next looks at that command buffer: before any Python hook of a command recorded
into it (so order is kept, on the recording thread), and after vkEndCommandBuffer, where the
rest of the recording and the end hooks become a job (`defer`): the application's thread only
forwards the call (unless the rest is short: INLINE_BYTES). Whatever needs a finished recording
waits for its job (`wait`, before any hook of that buffer) or for every job (`settle`: submits,
frees, pool resets, executing secondaries, device destruction), and runs the jobs queued before
it itself when the worker is not running one: the waiting thread does the work at no thread
switch. The worker takes the jobs when WAKE_BYTES of records wait, or at its next poll (every
WORKER_POLL_S while it finds jobs, backing off to WORKER_IDLE_S while it finds none). A
command buffer the C side does not know (not registered) takes the Python hook, as before.

Record layout (little-endian, 8-byte aligned):
    u32 command index (the shim's guard table index) | u32 record size in bytes
    u64 slot per recorded parameter after the command buffer, in parameter order
        (the tag first for tagged workloads; an array's, string's or info struct's byte length)
    the bytes of each array / string / info parameter, each padded to 8
Formats (`tessera_record_format(index)`), one code per parameter after the command buffer:
    Q unsigned scalar or handle, q signed scalar, A<Struct> array of plain structs,
    S<Struct>.<member> the string `member` of the struct the parameter points to (its slot the byte
        length; with Recorded.tag_labels, TAG_BIT | the tag for a t<tag> label, and no bytes),
    I<Struct>[.<member>:<count> | .<member>]... an info struct (`const VkCopyBufferInfo2 *`,
        `const VkRenderingInfo *`: sType, pNext, scalars, handles and flat structs, and `const`
        pointers to flat structs, each an array counted by another member per the registry's
        `length`, or one optional struct; `info_pointers`): its bytes are the struct, padded to 8,
        then what each pointer points to, in member order, each padded to 8. C copies them as they
        are except that it sets every pNext to NULL (the chains are not copied), a pointer that was
        NULL stays NULL with its count 0, and the others hold TESSERA_COPIED (not the application's
        address, so that equal recordings have equal records: vkapi/replay.py), which Python
        replaces with its copy's address before anything reads them. Python gets a `Struct *` into
        the arena, read exactly as the live struct (valid while the record is applied); NULL when
        the parameter was NULL (slot 0),
    - not recorded (given to Python as None). The first code is R (a record) or T (a record whose
    first slot is a tag), or F (a folded record: one slot of count, then a Q per sum, no parameters),
    or D (a dependency record, `Recorded.dependencies`: three slots, the barriers, the OR of their
    source stage masks and the OR of the destination stage masks that hold no bottom-of-pipe, no
    parameters), or X (vkCmdExecuteCommands, Recorded.executes: the secondaries' count, their tags' total, per
    secondary its handle, the hash and size of the kept recording it equals and its tag count, then the tags,
    which are the record's tag slots: runtime/lifecycle.c tessera_execute_in_c); commands not recorded have an
    empty format.

Threads: a command buffer's arena is written by the thread recording it and read by the
thread applying it (that thread, or the worker after vkEndCommandBuffer); Vulkan's external
synchronisation of command buffers, and `wait` before anything else touches a buffer whose
job is queued, keep them apart. The map is written under a mutex (register / unregister)
and read without locks. The worker is one daemon thread per shim, started with the first job.
"""
from __future__ import annotations

import collections
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tessera.schemas.labels import tag_label

from . import lifecycle, replay


SWITCH = "TESSERA_C_RECORDING"   # "0": nothing is recorded in C (Recorder.enabled)
# A recording whose records take at most this many bytes is applied at vkEndCommandBuffer on the
# application's thread (Recorder.defer): about a dozen commands, each ~3 us to apply.
INLINE_BYTES = 512
# Deferred records: the worker is woken once this many bytes wait (else a waiting thread or the
# worker's poll runs them).
WAKE_BYTES = 64 * 1024
WORKER_POLL_S = 0.02
WORKER_IDLE_S = 0.64
TAG_BIT = 1 << 63   # a string slot holding a t<tag> label's number (runtime/recorder.c TESSERA_TAG_BIT)


@dataclass(frozen=True)
class Recorded:
    """How one command is recorded by a shim."""
    fields: tuple[str, ...] | None = None    # parameters recorded (None: every parameter after the buffer)
    strings: dict[str, str] = field(default_factory=dict)   # parameter -> its struct's string member to copy
    tagged: bool = False                     # layer: a tagged workload, wrapped in a t<tag> label
    forward: bool = True                     # call the next element (False: the shim consumes the command)
    # Consecutive calls fold into one record: a count and these sums (C expressions of the parameters),
    # applied as (owner, command buffer, count, *sums). For draws, whose effect is additive.
    fold: tuple[str, ...] | None = None
    # The layer's application labels: +1 opens one, -1 closes one. The C path's readiness is decided at
    # vkEndCommandBuffer, before the records are applied, so C counts them: a buffer whose labels
    # recorded in C do not balance, or close one opened before the buffer, submits through Python
    # (what it does to the queue's label stack is planned at submit there).
    label_depth: int = 0
    # Synchronization2 (vkCmdPipelineBarrier2, vkCmdWaitEvents2): the VkDependencyInfo parameters are
    # reduced to what the driver's timeline orders by (icd.recording.stage_classes, exactly: the
    # union of each barrier's classes): (barriers, OR of srcStageMask, OR of the dstStageMasks
    # without BOTTOM_OF_PIPE, a destination that orders nothing). A call whose dependencies carry a
    # pNext chain, or an image barrier in one of `python_layouts` (registry names), takes Python.
    dependencies: bool = False
    python_layouts: tuple[str, ...] = ()
    # A C expression of the parameters (registry constants as {VK_NAME}): when true, the call takes
    # its Python hook instead (what C does not record, e.g. a pNext chain a hook must read).
    python_if: str | None = None
    # Render passes: a begin recorded in C marks the buffer's open pass as C's (and, tagged, keeps
    # its t<tag> label open); an end is recorded in C only for such a pass and closes that label.
    # Any Python hook of the buffer in between (an indirect draw, a subpass, secondaries) clears the
    # mark, so the end takes Python too, where the hooks that act at the end of a pass run.
    opens_pass: bool = False
    closes_pass: bool = False
    # The driver's labels: a string that is a t<tag> label (tessera.schemas.labels) is recorded as its
    # number (TAG_BIT | tag in the string's slot, no text), so that two recordings differing only in
    # their tags differ only in tag slots (vkapi/replay.py); Python reads it back as the same text.
    tag_labels: bool = False
    # False: C only forwards the call, records nothing and nothing applies it: the command's Python hooks
    # run only where the buffer takes Python (a hook that matters under an option only, such as the
    # layer's index-buffer binds for --content, which turns the C recording off).
    record: bool = True
    # With record False: forwarded in C only inside a render pass C began (Recorded.opens_pass); in a pass that took
    # Python (a per-region capture, a pNext chain) the hooks run (the driver's vkCmdNextSubpass: only a capture's
    # subpass count follows it).
    in_c_pass: bool = False
    # vkCmdExecuteCommands: recorded in C when every secondary holds a recording equal to a kept one, which C ended
    # or Python applied (runtime/lifecycle.c tessera_execute_in_c: an X record naming them, the kept recordings'
    # keys and their tags), applied as (owner, command buffer, count, secondaries) once each secondary's hooks ran.
    executes: bool = False


# ---- Python: reading the records ------------------------------------------------------------
Applier = Callable[..., None]   # (owner, command buffer handle, *parameters after it [, tag=]) -> None


@dataclass
class _Layout:
    name: str
    tagged: bool
    codes: list[str]           # per parameter after the command buffer, without the tag
    folded: bool = False       # count and sums only
    executes: bool = False     # an X record (Recorded.executes): the secondaries, the kept keys, their tags
    nslots: int = field(init=False)      # slots after the tag: one per recorded parameter
    # Every parameter a recorded scalar: the slots (tag included) read with one unpack.
    scalars: struct.Struct | None = field(init=False)

    def __post_init__(self) -> None:
        self.nslots = sum(1 for c in self.codes if c != "-")
        plain = all(c in ("Q", "q") for c in self.codes)
        self.scalars = struct.Struct("<" + "Q" * self.tagged + "".join(self.codes)) if plain else None


def guard_indices(ffi, lib) -> dict[str, int]:
    """Command name -> its guard's index in the shim (vkapi/guards.py)."""
    return {ffi.string(lib.tessera_guard_name(i)).decode(): i for i in range(lib.tessera_guard_count())}


class Recorder:
    """The Python side of one shim's recording: device tables, registration, applying records.

    Made by the shim's entry before any hook module registers (the modules are handed it); what
    applies each command's records is given once every module has registered (`bind_appliers`,
    from HookSet.install, which composes them in the intercept table's order)."""

    def __init__(self, ffi, lib, report: Callable[[str], None], failed: Callable[[str, str], None]) -> None:
        """`report(message)` logs a problem; `failed(command, where)` reports the exception being
        handled (HookErrors.report: once per command, with its traceback)."""
        guard_names = guard_indices(ffi, lib)
        self.ffi, self.lib, self.report, self.failed = ffi, lib, report, failed
        # TESSERA_C_RECORDING=0: no command buffer is registered, so every command takes its Python
        # hook (and every submit Python): for comparing the two paths.
        self.enabled = os.environ.get(SWITCH) != "0"
        self._jobs: collections.deque = collections.deque()   # (address, done, job), in call order
        self._pending: dict[int, threading.Event] = {}   # command buffer address -> its queued job
        self._backlog = 0                                 # record bytes queued since the worker last ran
        self._running = threading.Lock()   # held by whoever runs jobs: the worker, or a waiting thread
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._out = threading.local()
        self.guards = guard_names
        self.replays = None   # vkapi/replay.Replays, when the shim's products can be made again (reuse_recordings)
        self._deferring = False   # a device's buffers may begin and end in C (defer_lifecycle)
        self._run_deferred: Callable | None = None   # deferred_hooks
        self._reset_buffer: Callable | None = None   # reset_later
        self._read_submits: Callable[[], None] = lambda: None
        self._reads: dict[int, Read] = {}   # address -> the recording a ledger reader read without its hooks
        self.reads = 0                      # recordings so read (TESSERA_LOG=info)
        self.reads_run = 0                  # ... whose hooks ran later all the same (something looked)
        # tessera_cb_read_products' out-parameters (one ledger reader at a time): room for _read_room buffers'
        # keys and results, and their tags
        self._read_room, self._read_keys, self._read_counts = 0, ffi.NULL, ffi.NULL
        self._read_tags, self._read_used = ffi.new("uint64_t[]", replay.MAX_TAGS), ffi.new("size_t *")
        self.layouts: dict[int, _Layout] = {}
        self.appliers: dict[int, Applier] = {}
        # I codes -> (struct pointer type, array member, element pointer type, offset of the elements)
        self._infos: dict[str, tuple[Any, int, list]] = {}   # I code -> (struct type, its padded size, pointers)
        # Records applied so far, by guard index (TESSERA_LOG=info prints them at vkDestroyDevice, `counts`).
        # Increments from threads applying at once may race (the GIL keeps each one whole, not the pair).
        self.applied = [0] * (max(guard_names.values(), default=-1) + 1)
        for name, index in guard_names.items():
            fmt = ffi.string(lib.tessera_record_format(index)).decode()
            if not fmt:
                continue
            codes = fmt.split(",")
            if codes[0] == "X":
                self.layouts[index] = _Layout(name, False, [], executes=True)
            elif codes[0] in ("F", "D"):   # plain slots: the count and the sums, or the dependency's three
                self.layouts[index] = _Layout(name, False, ["Q"] * len(codes), folded=True)
            else:
                self.layouts[index] = _Layout(name, codes[0] == "T", codes[1:])
            for code in codes[1:]:
                if code[0] == "I" and code not in self._infos:
                    struct_name, *members = code[1:].split(".")
                    struct_type = ffi.typeof(f"{struct_name} *")
                    fields = dict(struct_type.item.fields)
                    pointers = []
                    for member in members:      # (member, its count member or None, pointer type, item size)
                        pointer_name, _, count = member.partition(":")
                        pointer = fields[pointer_name].type
                        pointers.append((pointer_name, count or None, pointer, ffi.sizeof(pointer.item)))
                    self._infos[code] = (struct_type, (ffi.sizeof(struct_name) + 7) & ~7, pointers)

    def bind_appliers(self, appliers: dict[str, Applier]) -> None:
        """What applies the records of each command recorded in C: one function per command."""
        for index, layout in self.layouts.items():
            if layout.name not in appliers:
                raise RuntimeError(f"{layout.name} is recorded in C but no module applies its records")
            self.appliers[index] = appliers[layout.name]

    def counts(self) -> str:
        """The records made in C and applied so far, per command (a folded record counts once)."""
        made = sorted((name, self.applied[index]) for name, index in self.guards.items() if self.applied[index])
        text = "records made in C so far: " + (", ".join(f"{name} {n}" for name, n in made) or "none")
        if self.replays is not None:
            text += f"; recordings reused: {self.replays.reused + self.reads}"
            if self.replays.check:
                text += f"; checked instead: {self.replays.checked}, differing: {self.replays.mismatches}"
            text += (f"; of them submitted and read without their hooks: {self.reads} "
                     f"(their hooks run later: {self.reads_run})")
        return text + "; " + lifecycle.counts(self.ffi, self.lib)

    def recorded(self, name: str) -> bool:
        index = self.guards.get(name)
        return index is not None and index in self.layouts

    def device_table(self, next_table, label_source=None):
        """The C table of next functions for one device (keep the returned object alive as long
        as the device). `next_table` is the device's DispatchTable; `label_source` the table whose
        label commands wrap tagged workloads (the layer's device), or None."""
        ffi = self.ffi
        dev = ffi.new("tessera_device *")
        for name, index in self.guards.items():
            fn = getattr(next_table, name, None)
            if fn is not None:
                dev.next[index] = ffi.cast("PFN_vkVoidFunction", fn)
        if label_source is not None:
            for field_name, command in (("label_begin", "vkCmdBeginDebugUtilsLabelEXT"),
                                        ("label_end", "vkCmdEndDebugUtilsLabelEXT"),
                                        ("marker_begin", "vkCmdDebugMarkerBeginEXT"),
                                        ("marker_end", "vkCmdDebugMarkerEndEXT")):
                fn = getattr(label_source, command, None)
                if fn is not None:
                    setattr(dev, field_name, ffi.cast(f"PFN_{command}", fn))
            for field_name, command in (("queue_label_begin", "vkQueueBeginDebugUtilsLabelEXT"),
                                        ("queue_label_end", "vkQueueEndDebugUtilsLabelEXT")):
                fn = getattr(label_source, command, None)
                if fn is not None:
                    setattr(dev, field_name, ffi.cast("PFN_vkVoidFunction", fn))
        return dev

    def register(self, handle, device_table, primary: bool, pool: int) -> None:
        if self.enabled and not self.lib.tessera_cb_register(handle, device_table, 1 if primary else 0, pool):
            self.report("out of memory registering a command buffer: its commands take the Python path")

    # ---- begins and ends made in C (vkapi/lifecycle.py) ----------------------------------------
    def defer_lifecycle(self, device_table, device, resources) -> None:
        """Let the buffers of `device` (its C table `device_table`) begin and end in C when the shim's
        `Products.deferrable(device)` says so and recordings are reused unchecked; C compares their
        recordings with the kept ones while `resources` (the device's) keeps the generation they were
        kept under."""
        replays = self.replays
        on = replays is not None and not replays.check and replays.products.deferrable(device)
        device_table.deferrable = 1 if on else 0
        if on:
            self._deferring = True
            resources.on_generation(lambda value: setattr(device_table, "generation", value))

    def deferred_hooks(self, run: Callable) -> None:
        """`run(handle, bits, flags, end_result)` runs the hooks of the begin and end C made (HookSet.install)."""
        self._run_deferred = run

    def reset_later(self, reset: Callable) -> None:
        """`reset(handle)`: the shim's reset of one buffer of a pool reset (what its vkResetCommandPool hooks do
        for each buffer), run for a pool reset C made (lifecycle.py)."""
        self._reset_buffer = reset

    def submits_reader(self, read: Callable[[], None]) -> None:
        """`read()` reads the shim's ledger of submits made in C (where a thread may be running the hooks
        of a buffer's begin and end made in C: the shim's entry)."""
        self._read_submits = read

    def _catch_up(self, handle, reading: bool) -> None:
        """Run what C made of the buffer that Python has yet to run (lifecycle.py), once."""
        if not self._deferring:   # no device's buffers begin in C: nothing to ask C on every hook
            return
        if type(handle) is int:   # an address read from a ledger
            handle = self.ffi.cast("void *", handle)
        deferred = self.lib.tessera_cb_deferred(handle)
        if not deferred or self._run_deferred is None:
            return
        if deferred & lifecycle.UNREAD and not reading:   # the thread reading that ledger runs them
            self._read_submits()
        out = self._out_params()
        bits = self.lib.tessera_cb_take_deferred(handle, out[3], out[4])
        read = self._reads.pop(self._key(handle), None)   # one kept from an earlier recording is stale
        if not bits & lifecycle.READ:
            read = None
        if bits & lifecycle.RESET and self._reset_buffer is not None:
            with self.keeping_records(handle, bits & lifecycle.BEGUN):
                try:
                    self._reset_buffer(handle)
                except Exception:
                    self.failed("vkResetCommandPool", "resetting a buffer of a pool reset made in C")
        if bits & (lifecycle.BEGUN | lifecycle.ENDED):
            self._run_deferred(handle, bits, out[3][0], out[4][0], read)

    def run_executed(self, handle) -> None:
        """Run the hooks of the begins and ends C made of the secondaries the buffer's records executed in C
        (`_execute`), on this thread: before its records are applied by a job, which must not run them (their
        resets and begins read the shim's ledger, whose reader may be waiting for that very job)."""
        if not self._deferring:
            return
        out = getattr(self._out, "executed", None)   # per thread: buffers are ended on several at once
        if out is None:
            out = self._out.executed = self.ffi.new("uint64_t[]", 64)
        count = self.lib.tessera_cb_executed(handle, out, len(out))
        if count > len(out):
            out = self._out.executed = self.ffi.new("uint64_t[]", count)
            count = self.lib.tessera_cb_executed(handle, out, count)
        for address in self.ffi.unpack(out, count):
            self.wait(address)

    def keeping_records(self, handle, keep=True) -> "_Keeping":
        """While the hooks of calls C made run (a begin, or a pool reset before one): their resets of the
        buffer keep the records made since (a context manager)."""
        return _Keeping(self._out, self._key(handle) if keep else None)

    def unregister(self, handle) -> None:
        self.lib.tessera_cb_unregister(handle)
        self._reads.pop(self._key(handle), None)
        if self.replays is not None:
            self.replays.forget(self._key(handle))

    # ---- submits read without running the hooks of their recordings (lifecycle.py) -------------
    def reading_all(self, owner, addresses: list[int]) -> list["Read | None"]:
        """While reading the shim's ledger: for each buffer of one submit (at `addresses`; `owner` their records'
        owner), what a submit of it may be reported from without running its recording's deferred hooks: the
        kept recording that one equals, begun and ended in C (`Read`); None when the hooks must run first
        (`wait`). One call of C for them all as far as their tags fit. Changes nothing (`read_all` takes
        them); a buffer read again before C begins it anew gives the same Read, and so does a buffer the
        submit names twice."""
        replays = self.replays
        if not self._deferring or replays is None:
            return [None] * len(addresses)
        ffi, reads = self.ffi, self._reads
        out: list = []
        while len(out) < len(addresses):   # one call of C reads as many as their tags fit
            rest = addresses[len(out):] if out else addresses
            count = len(rest)
            if count > self._read_room:
                self._read_room = count
                self._read_keys, self._read_counts = ffi.new("uint64_t[]", 2 * count), ffi.new("long[]", count)
            done = self.lib.tessera_cb_read_products(rest, count, self._read_keys, self._read_tags, replay.MAX_TAGS,
                                                     self._read_counts, self._read_used)
            results = ffi.unpack(self._read_counts, done)
            # none equal to a kept one (a buffer recorded once and submitted again): no lookup
            kept = replays.kept_all(owner, ffi.unpack(self._read_keys, 2 * done), results) if max(results) >= 0 \
                else ()
            tags, at = ffi.unpack(self._read_tags, self._read_used[0]), 0
            for i, n in enumerate(results):
                if n >= 0:
                    entry = kept[i]
                    out.append(None if entry is None else Read(entry.product, tags[at:at + n], entry))
                    at += n
                else:
                    out.append(reads.get(rest[i]) if n == -2 else None)
        if len(set(addresses)) < len(addresses):   # a buffer named twice: one Read for it
            first: dict = {}
            out = [first.setdefault(a, r) if r is not None else None for a, r in zip(addresses, out)]
        return out

    def ended_in_c(self, addresses: list[int]) -> list[int]:
        """Those of the buffers at `addresses` holding a recording C ended whose hooks have yet to run."""
        ffi, deferred = self.ffi, self.lib.tessera_cb_deferred
        return [a for a in addresses if deferred(ffi.cast("void *", a)) & lifecycle.ENDED]

    def read_all(self, addresses: list[int], reads: list["Read | None"]) -> list[bool]:
        """Submits of the buffers at `addresses` were reported from their `reads` (`reading_all`'s, on the same
        thread, while reading the same ledger; None: not read so): their hooks run only if something looks at
        a buffer before C begins it again (`_catch_up`). For each: True the first time its recording is read."""
        first, fresh = [], []
        for address, read in zip(addresses, reads):
            if read is None:
                first.append(False)
                continue
            read.submits += 1
            if read.submits == 1:
                fresh.append(address)
                self._reads[address] = read
            first.append(read.submits == 1)
        if fresh:
            self.lib.tessera_cb_read_in_python_all(fresh, len(fresh))
            self.reads += len(fresh)
        return first

    def apply_reported(self, owner, handle) -> None:
        """The deferred end of a recording whose submits the shim's C reported itself (layer/reported_submits.py:
        REPORTED, no Read of Python's), now that its hooks run: restored from its kept product with its tags, as a
        Read made now would; when that is no longer kept (a resource it names changed since), its records applied,
        and its state left as those reports left it (what they sent is not sent again, its submits counted)."""
        ffi = self.ffi
        key, tags, reported = ffi.new("uint64_t[2]"), ffi.new("uint64_t[]", replay.MAX_TAGS), ffi.new("uint64_t *")
        n = self.lib.tessera_cb_reported_product(handle, key, tags, replay.MAX_TAGS, reported)
        entry = self.replays.kept_all(owner, [key[0], key[1]], [n])[0] if n >= 0 and self.replays else None
        if entry is not None:
            self.restore_read(owner, handle, Read(entry.product, ffi.unpack(tags, n), entry, reported[0]))
            return
        self.apply(owner, handle, ended=True)
        if reported[0] and self.replays is not None:
            self.replays.products.was_read(owner, handle, reported[0])

    def restore_read(self, owner, handle, read: "Read") -> None:
        """The deferred end of a recording read without its hooks, now run: its state is the kept product
        with its tags (as `apply` would restore it), and what its reading did is said to the shim
        (`Products.was_read`)."""
        products = self.replays.products
        self.reads_run += 1
        try:
            products.restore(owner, handle, read.product, read.tags)
            products.was_read(owner, handle, read.submits)
        finally:
            self.lib.tessera_cb_clear(handle)

    def reuse_recordings(self, products) -> None:
        """Let whole re-recordings reuse an earlier equal recording's product (vkapi/replay.py)."""
        replays = replay.Replays(self.ffi, self.lib, products, self.report)
        self.replays = replays if replays.enabled else None

    def reset(self, handle) -> None:
        """The buffer was reset or begun again: its records, Python path and submit state go (but not
        in `keeping_records`: C reset the buffer at its begin, and the records since are the recording's)."""
        if getattr(self._out, "keeping", None) is not None and self._out.keeping == self._key(handle):
            return
        self.lib.tessera_cb_reset(handle)

    def set_submit_ok(self, handle, ok: bool) -> None:
        """Whether a submit of the buffer may take the C path (submits.py); reset with the buffer."""
        self.lib.tessera_cb_set_submit_ok(handle, 1 if ok else 0)

    def count_submit(self, handle) -> None:
        """A submit of the buffer took the Python path: count it as the C path would."""
        self.lib.tessera_cb_count_submit(handle)

    def python_path(self, handle, on: bool) -> None:
        """Route the buffer's recorded commands to their Python hooks (True) or back to C."""
        self.lib.tessera_cb_set_python(handle, 1 if on else 0)

    def python_brackets(self, handle, on: bool, draws: bool = False) -> None:
        """Route the buffer's render pass begins and dispatches (recorder_gen.BRACKETED) to their Python
        hooks (True), the rest staying in C; reset with the buffer. `draws`: its draws too, and the
        commands whose `python_if` reads bit 2 of the flag (icd/visible_prims.py, intercepts.py)."""
        self.lib.tessera_cb_set_python_brackets(handle, (3 if draws else 1) if on else 0)

    # ---- deferred work: vkEndCommandBuffer's application on the worker -------------------------
    def _key(self, handle) -> int:
        return int(self.ffi.cast("uintptr_t", handle))

    def defer(self, handle, job: Callable[[], None]) -> None:
        """Run `job` (apply the buffer's records and its end hooks) later, in order, before anything
        looks at the buffer; a buffer with few records (INLINE_BYTES) is applied now, on the calling
        thread. The worker is woken only once WAKE_BYTES of records wait (a big recording is then
        decoded while the application goes on); smaller ones are run by the thread that next waits
        for them (`wait`, `settle`: a submit, the next begin), which costs no thread switch, or by
        the worker within WORKER_POLL_S."""
        pending = self._pending_bytes(handle)
        if pending <= INLINE_BYTES:
            job()
            return
        done = threading.Event()
        self._pending[self._key(handle)] = done
        if self._worker is None:
            with self._start_lock:
                if self._worker is None:
                    self._worker = threading.Thread(target=self._run, name="tessera-recorder", daemon=True)
                    self._worker.start()
        self._jobs.append((self._key(handle), done, job))
        self._backlog += pending
        if self._backlog >= WAKE_BYTES:
            self._wake.set()

    def _run(self) -> None:
        """Every WORKER_POLL_S while it finds jobs, backing off to WORKER_IDLE_S while it finds none (the
        waiting threads ran them, or nothing is recorded): an idle program pays a few wake-ups a second."""
        poll_s = WORKER_POLL_S
        while True:
            self._wake.wait(poll_s)
            self._wake.clear()
            if self._jobs:
                with self._running:
                    self._drain(None)
                poll_s = WORKER_POLL_S
            else:
                poll_s = min(poll_s * 2, WORKER_IDLE_S)

    def _drain(self, until: threading.Event | None) -> None:
        """(`_running` held) Run the queued jobs in order, until `until` is set or none is left."""
        jobs = self._jobs
        while jobs and (until is None or not until.is_set()):
            key, done, job = jobs.popleft()
            try:
                job()
            except Exception:   # the job reports its own failures; this is the last net
                self.failed("vkEndCommandBuffer", "applying a command buffer's records later")
            finally:
                done.set()
                if self._pending.get(key) is done:
                    del self._pending[key]
        if not jobs:
            self._backlog = 0

    def _out_params(self) -> tuple:
        """tessera_cb_records' out-parameters, then tessera_cb_take_deferred's, per thread (buffers are
        applied on several threads at once; every Python hook of a command buffer reads them, so they are
        not allocated per call)."""
        out = getattr(self._out, "params", None)
        if out is None:
            ffi = self.ffi
            out = self._out.params = (ffi.new("uint8_t **"), ffi.new("size_t *"), ffi.new("uint64_t *"),
                                      ffi.new("uint32_t *"), ffi.new("int32_t *"))
        return out

    def _pending_bytes(self, handle) -> int:
        out = self._out_params()
        return out[1][0] if self.lib.tessera_cb_records(handle, *out[:3]) else 0

    def wait(self, handle, reading: bool = False) -> None:
        """Return once the job queued for `handle`, if any, has run (running it, and those queued
        before it, on this thread when the worker is not running one), and the hooks of a begin and end
        C made of it (lifecycle.py). `reading`: called while reading the shim's ledger."""
        done = self._pending.get(self._key(handle))
        if done is not None:
            self._help(done)
            done.wait()
        self._catch_up(handle, reading)

    def settle(self) -> None:
        """Return once every job queued so far has run."""
        if self._pending:
            self._help(None)
            for done in list(self._pending.values()):
                done.wait()

    def _help(self, until: threading.Event | None) -> None:
        if self._running.acquire(blocking=False):
            try:
                self._drain(until)
            finally:
                self._running.release()

    def apply(self, owner, handle, ended: bool = False) -> None:
        """Apply the records of `handle` so far, in order, then empty its arena. `ended`: the recording
        has ended (vkEndCommandBuffer's job): a whole recording may reuse an earlier equal one's product
        (vkapi/replay.py)."""
        lib = self.lib
        pdata, pused, pdropped = self._out_params()[:3]
        if not lib.tessera_cb_records(handle, pdata, pused, pdropped):
            return
        used, dropped = pused[0], pdropped[0]
        if used == 0 and dropped == 0:
            return
        base = pdata[0]
        replays = self.replays if ended and lib.tessera_cb_whole(handle) else None
        kept = False   # C keeps a copy of a recording equal to this one: a secondary's records stay (tessera_cb_applied)
        try:
            if replays is not None:
                key = self._key(handle)
                if replays.reuse(owner, handle, key, base, used):
                    kept = True
                    return
                records = replays.records(base, used)
            if used:
                self._apply(owner, handle, base, used)
            if replays is not None:
                kept = replays.remember(owner, handle, key, records)
        finally:
            lib.tessera_cb_applied(handle, 1 if kept else 0)
        if dropped:
            self.report(f"{dropped} command(s) of a command buffer were not recorded (out of memory); "
                        "their workloads are missing from the timeline")

    def _apply(self, owner, handle, base, used: int) -> None:
        ffi = self.ffi
        buf = ffi.buffer(base, used)
        unpack = struct.unpack_from
        layouts = self.layouts
        offset = 0
        while offset + 8 <= used:
            index, size = unpack("<II", buf, offset)
            layout = layouts.get(index)
            if layout is None or size < 8 or offset + size > used:   # cannot happen unless memory is damaged
                self.report(f"damaged command-buffer record at byte {offset} (command {index}, {size} bytes); "
                            "the rest of this command buffer's records are skipped")
                return
            slots_at = offset + 8
            if layout.executes:
                self._execute(layout, index, owner, handle, buf, slots_at)
                offset += size
                continue
            if layout.scalars is not None:   # the common case (draws, dispatches, barriers): one unpack
                values = layout.scalars.unpack_from(buf, slots_at)
                tag = values[0] if layout.tagged else None
                self._call(layout, index, owner, handle, values[1:] if layout.tagged else values, tag)
                offset += size
                continue
            codes = layout.codes
            values: list[Any] = []
            pos = slots_at
            tag = None
            if layout.tagged:
                (tag,) = unpack("<Q", buf, pos)
                pos += 8
            extra = pos + layout.nslots * 8
            for code in codes:
                if code == "-":
                    values.append(None)
                    continue
                if code == "q":
                    (v,) = unpack("<q", buf, pos)
                    values.append(v)
                elif code == "Q":
                    (v,) = unpack("<Q", buf, pos)
                    values.append(v)
                else:
                    (n,) = unpack("<Q", buf, pos)
                    if code[0] == "A":
                        values.append(ffi.cast(f"{code[1:]} *", base + extra))
                    elif code[0] == "I":   # an info struct: its pointers set to the copies that follow it
                        if n:
                            struct_type, at, pointers = self._infos[code]
                            info = ffi.cast(struct_type, base + extra)
                            for member, count, pointer, item in pointers:
                                k = getattr(info, count) if count else int(getattr(info, member) != ffi.NULL)
                                if k:
                                    setattr(info, member, ffi.cast(pointer, base + extra + at))
                                    at += (k * item + 7) & ~7
                            values.append(info)
                        else:
                            values.append(ffi.NULL)
                    elif n & TAG_BIT:   # S: a t<tag> label recorded as its number (Recorded.tag_labels)
                        values.append(tag_label(n & ~TAG_BIT))
                        n = 0
                    else:   # S: a string
                        values.append(bytes(buf[extra:extra + n]).decode("utf-8", "replace"))
                    extra += (n + 7) & ~7
                pos += 8
            self._call(layout, index, owner, handle, values, tag)
            offset += size

    def _execute(self, layout: _Layout, index: int, owner, handle, buf, at: int) -> None:
        """An X record (runtime/lifecycle.c tessera_execute_in_c): the hooks of each secondary's begin and end C
        made run first (`wait`: its kept product restored, or already read), then the appliers see the
        secondaries as the command's hooks would."""
        (count,) = struct.unpack_from("<Q", buf, at)
        addresses = struct.unpack_from(f"<{4 * count}Q", buf, at + 16)[::4]
        for address in addresses:   # nothing left to run in a job (run_executed); as a ledger's reader would
            self.wait(address, reading=True)
        self._call(layout, index, owner, handle, (count, self.ffi.new("VkCommandBuffer[]", [
            self.ffi.cast("VkCommandBuffer", a) for a in addresses])), None)

    def _call(self, layout: _Layout, index: int, owner, handle, values, tag) -> None:
        self.applied[index] += 1
        try:
            if layout.tagged:
                self.appliers[index](owner, handle, *values, tag=tag)
            else:
                self.appliers[index](owner, handle, *values)
        except Exception:   # one bad record costs that record only
            self.failed(layout.name, "applying its record made in C; the call was forwarded")


class _Keeping:
    """Recorder.keeping_records: a plain class, as it is entered at every begin C made (a generator's
    context manager costs more)."""
    __slots__ = ("local", "key")

    def __init__(self, local: threading.local, key: int | None) -> None:
        self.local, self.key = local, key

    def __enter__(self) -> None:
        self.local.keeping = self.key

    def __exit__(self, *exc) -> None:
        self.local.keeping = None


@dataclass(slots=True, eq=False)   # a record of one recording's reads: compared by identity
class Read:
    """A recording begun and ended in C whose submits a ledger reader reported without running its hooks
    (Recorder.reading_all): the kept product it equals and its own tags."""
    product: Any
    tags: list[int]
    kept: Any = None   # the vkapi/replay entry keeping the product, in C too (replay.attach)
    submits: int = 0   # its submits read so far

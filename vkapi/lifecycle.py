"""Recordings begun and ended in C: an engine re-recording the same commands costs no Python per recording.

The recorder (recorder.py) records each command in C; vkBeginCommandBuffer and vkEndCommandBuffer still
ran every Python begin and end hook of both shims, and the end applied the records (or restored the
product of an equal earlier recording: replay.py). Here C makes the two calls itself when Python need
not act at once, and Python runs their hooks only when something looks at the buffer:

- Begin (`tessera_begin_in_c`, runtime/lifecycle.c): a buffer (primary or secondary) of a device whose every begin hook
  may run later (`Products.deferrable`: nothing of the shim inserts commands or routes the buffer's
  commands to Python at its begin; re-recordings are on and not checked), a begin with no chained
  structure, no records left for Python to apply (but those of a recording ended in C that nobody
  submitted, which are dropped) and no submit of the buffer in a ledger Python has yet to read
  (submits.py: the serials of `tessera_ledger_read`). C forwards the call and resets the buffer's
  records; the begin is deferred.
- End (`tessera_end_in_c`): a buffer begun in C whose whole recording C made (any Python hook in between
  runs the deferred begin first, which ends C's hold) and equals, but for its tags, a recording whose
  product Python keeps on that device (the copy `Replays.remember` hands to `tessera_product_keep`,
  with the Resources generation it was made under and the submit decision its end hooks took). C
  forwards the call and sets that decision; the end is deferred too, its records kept.
- Secondaries executed (`tessera_execute_in_c`): vkCmdExecuteCommands into a primary whose recording C has made
  whole so far, of secondaries each holding a recording equal to a kept one, which C ended or Python applied
  (`tessera_cb_applied` keeps a secondary's records then: one recorded once and executed every frame), is recorded in C:
  its record names each secondary, the key of the kept recording it equals and its tags, which count among the
  primary's (in command order), so that the primary's recording equals an earlier one when its secondaries'
  do, and its product (layer/replay.py, icd/replay.py) holds what they held. A secondary is not begun again in C
  while a submit of a primary executing it waits in a ledger (`tessera_cb_submitted`); the layer reads the
  secondaries with their primary's submit (their descriptions are theirs). Their hooks run before anything
  applies the primary's records (`Recorder.run_executed` at the primary's end, on the application's thread: a
  job must not run them, as their resets and begins read the ledger, whose reader may wait for that job).
- Pool reset (`tessera_pool_reset_in_c`): when C may reset every buffer of the pool it knows (as it may
  begin one: a buffer of such a device, no records left for Python, no submit unread), C forwards
  the call, drops their records and defers the pool's reset of each (Python's per-buffer reset:
  `Recorder.reset_later`).
- Python runs what was deferred (`Recorder.wait`, which every Python hook of a buffer and every reading of
  a submit calls first): the pool's reset of the buffer, the begin hooks with the begin's flags, then, for
  a deferred end, the end's record-time hooks, the records applied (which restores the kept product:
  replay.py) and the end hooks, in the order the calls would have run them; their resets of the buffer
  keep the records made since (`Recorder.keeping_records`). A buffer with a submit in a ledger another
  thread is reading waits for that reading, which runs them.
- Submits read without the hooks: a ledger reader (either shim) reading a submit of a buffer whose recording C
  began and ended (successfully) reports it from the kept product that recording equals, with the recording's own
  tags (`Recorder.reading_all`, `Recorder.read_all`, for all of a submit's buffers at once;
  `tessera_cb_read_products` finds them in C, `tessera_cb_read_in_python_all` marks the recordings read): the driver's
  timeline places the product's plan (icd/submit.py), the layer sends the product's descriptions with those tags
  the first time and plans the product's tags, when every buffer of the submit reads so and plans to its tags
  alone, on a queue with no labels and no pass open (layer/queues.py `_read_without_hooks`; otherwise the hooks
  run as above). The hooks
  run only if something looks at the buffer before C begins it again: the product is restored as the reads saw
  it (`Recorder.restore_read`) and the shim told what they did (`Products.was_read`: the layer's descriptions
  are not sent again). A steady frame loop never runs them.
- A recording ended in C and begun again, reset or freed before anything looked at it never runs its
  hooks (a buffer's deferred pool reset and begin run once, whatever came before them): nothing submitted it, so no GPU work and no trace event comes of it. The layer then sends no
  description of its workloads (their tags appear nowhere else).

Threads: the owner thread (Vulkan's external synchronisation) makes the calls; Python runs the deferred
hooks once (`tessera_cb_take_deferred` exchanges them atomically) on the owner thread or on a thread
reading a ledger that holds the buffer's submit, which the owner never begins again in C before that
reading ends.
"""
from __future__ import annotations

from pathlib import Path

RUNTIME_C = Path(__file__).with_name("runtime") / "lifecycle.c"

# tessera_cb_deferred's bits (runtime/recorder.c, lifecycle.c)
BEGUN, ENDED, RESET, UNREAD, READ, REPORTED = 1, 2, 4, 8, 16, 32

CDEF = """
int tessera_product_keep(void *handle, const uint8_t *data, size_t size, uint64_t hash, uint64_t generation);
void tessera_product_drop(const tessera_device *dev, uint64_t hash, size_t size);
int tessera_product_attach(const tessera_device *dev, uint64_t hash, size_t size, uint64_t generation,
                           uint64_t key0, uint64_t key1, const uint8_t *data, size_t n);
int tessera_cb_deferred(void *handle);
int tessera_cb_take_deferred(void *handle, uint32_t *flags, int32_t *end_result);
size_t tessera_cb_read_products(const uint64_t *handles, size_t count, uint64_t *keys, uint64_t *tags, size_t max,
                                long *counts, size_t *used);
void tessera_cb_read_in_python_all(const uint64_t *handles, size_t count);
long tessera_cb_reported_product(void *handle, uint64_t *key, uint64_t *tags, size_t max, uint64_t *reported);
int tessera_cb_attach(void *handle, uint64_t serial, uint64_t key, const uint8_t *data, size_t n);
void tessera_lifecycle_counts(uint64_t *counts);
size_t tessera_cb_executed(void *handle, uint64_t *out, size_t max);
"""


def support_c() -> str:
    """The static C (runtime/lifecycle.c), after recorder.c and submits.c."""
    return RUNTIME_C.read_text()


def fast_path(name: str, index: int) -> str:
    """C statements making `name` (vkBeginCommandBuffer or vkEndCommandBuffer) in C when they can; they return then."""
    if name == "vkBeginCommandBuffer":
        call = f"tessera_begin_in_c(commandBuffer, pBeginInfo, {index}, &made)"
    elif name == "vkEndCommandBuffer":
        call = f"tessera_end_in_c(commandBuffer, {index}, &made)"
    elif name == "vkResetCommandPool":
        call = f"tessera_pool_reset_in_c(device, commandPool, flags, {index}, &made)"
    else:
        raise ValueError(f"{name} is not made in C")
    return f"    {{\n        VkResult made;\n        if ({call}) return made;\n    }}\n"


COMMANDS = ("vkBeginCommandBuffer", "vkEndCommandBuffer", "vkResetCommandPool")


def counts(ffi, lib) -> str:
    """For TESSERA_LOG=info."""
    out = ffi.new("uint64_t[3]")
    lib.tessera_lifecycle_counts(out)
    return f"command buffers begun in C: {out[0]}, ended in C: {out[1]}; command pools reset in C: {out[2]}"

"""Submits recorded in C: a vkQueueSubmit that needs no Python now costs no Python.

Role: the C fast path of vkQueueSubmit / vkQueueSubmit2 (generated into a shim's guards,
like recorder_gen.py's command recording, around the static C of vkapi/runtime/submits.c) and
the Python that reads what it wrote. When every
command buffer of a submit is registered with the C recorder and marked ready
(`Recorder.set_submit_ok`, which a shim decides once per recording, at vkEndCommandBuffer),
and nothing process-wide asks for Python (`python_reasons`), the guard forwards the submit in
C and appends one record to a process-wide ledger: the queue, the host times, the command
buffers and semaphores of each batch, and, for the layer, the submitID it took and whether it
wrapped the submit in an `s<submitID>` queue label. Anything else takes the Python hook.

Python reads the ledger in order (`SubmitLedger.take`) before it looks at anything a submit
could have changed (the shim calls it first in its submit, reset, free, label and wait hooks)
and from a worker; a shim keeps the reading and its own hand-over under one lock so records
and Python-path submits stay in call order.

With `queue_labels` (the driver, which consumes queue labels), vkQueueBeginDebugUtilsLabelEXT
and vkQueueEndDebugUtilsLabelEXT are recorded in the same ledger, so they keep their order with
the submits around them without Python.

Record layout (u64 slots, little-endian):
    u32 record size in bytes | u16 batch count | u16 kind (SUBMIT, LABEL_BEGIN, LABEL_END)
    a submit (`HEADER` names its slots):
        queue | CLOCK_MONOTONIC_RAW at the call | ... at the return | CLOCK_BOOTTIME at the call
        submitID (0 unless the shim numbers submits) | frame | flags (bit 0: wrapped)
        per batch: counts (command buffers | waits << 21 | signals << 42), then the handles of
        the command buffers, the serials of their recordings (runtime/recorder.c tessera_cb.serial),
        the wait semaphores, their values, the signal semaphores and their values (a timeline
        semaphore's: VkTimelineSemaphoreSubmitInfo's, or VkSemaphoreSubmitInfo's `value`; 0 where
        the submit gives none).
    a queue label: queue | name length in bytes (0 for an end), then the name, padded to 8.

`tessera_set_c_submits(0)` (TESSERA_C_SUBMITS=0, read by each shim at load) turns both C paths
off: every submit and queue label then takes the Python hooks, for comparing the two.

Threads: the ledger is appended under a mutex by any thread submitting; a taken ledger
belongs to the taker until it gives it back.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import registry, structs
from .vkconst import vk

HEADER = ("size_kind", "queue", "called_ns", "returned_ns", "boottime_ns", "submit_id", "frame", "flags")
SUBMIT, LABEL_BEGIN, LABEL_END = 0, 1, 2   # record kinds
WRAPPED = 1
COUNT_BITS = 21   # per batch, each count below 2**21 (more takes the Python path)
IN_C_MAX = 64     # command buffers of a submit handled whole in C, at most (SubmitPath.in_c)
IN_C_SEMAPHORES = 16   # and wait or signal semaphores of the submit the driver's C places, at most
IN_C_BATCHES = 16       # and its batches (VkSubmitInfo), at most


@dataclass(frozen=True)
class SubmitPath:
    """What a shim's C submit does besides forwarding and recording."""
    number: bool = False            # take a submitID from the shared counter (the layer's SUBMIT messages)
    wrap: bool = False              # a buffer submitted before: wrap the submit in an s<submitID> queue label
    frame_boundary: bool = False    # a VkFrameBoundaryEXT in a submit's chain takes the Python path
    queue_labels: bool = False      # queue label begin/end recorded in the ledger, not forwarded (both shims)
    # The driver: a submit C may place on the emulated timeline itself is placed, not recorded (runtime/
    # placed_submits.c), and the waits skip Python while its timeline holds nothing (icd/placed_submits.py).
    place: bool = False
    # The layer: a submit C may report itself is reported, not recorded (runtime/reported_submits.c), and the
    # waits skip Python while nothing waits to be sent (layer/reported_submits.py).
    report: bool = False

    @property
    def in_c(self) -> bool:
        """A submit may be handled whole in C under a licence Python grants (tessera_placing, runtime/submits.c)."""
        return self.place or self.report


@dataclass(slots=True)
class QueueLabel:
    queue: int
    name: str | None   # None: the end of the innermost label


@dataclass(slots=True)
class Submission:
    queue: int
    called_ns: int
    returned_ns: int
    boottime_ns: int
    submit_id: int
    frame: int
    wrapped: bool
    batches: list[tuple[list[int], list[int], list[int]]]   # (command buffers, waits, signals)
    serials: list[int] = field(default_factory=list)   # each buffer's recording (tessera_cb.serial), in order


RUNTIME_C = Path(__file__).with_name("runtime") / "submits.c"   # the static C of the ledger

CDEF = """
typedef struct { uint8_t *data; size_t used, cap; uint64_t dropped; uint64_t serial; } tessera_ledger;
tessera_ledger *tessera_ledger_take(void);
void tessera_ledger_give_back(tessera_ledger *l);
void tessera_ledger_read(uint64_t serial);
uint64_t tessera_next_submit(void);
void tessera_set_frame(uint64_t frame);
uint64_t tessera_get_frame(void);
void tessera_python_reason(int64_t delta);
void tessera_set_c_submits(int on);
void tessera_cb_set_submit_ok(void *handle, int ok);
void tessera_cb_count_submit(void *handle);
"""

# Per command: the submit-info type, and how a batch names its command buffers and semaphores.
_SHAPES = {
    "vkQueueSubmit": ("VkSubmitInfo", "commandBufferCount", "pCommandBuffers[%s]",
                      "waitSemaphoreCount", "pWaitSemaphores[%s]", "signalSemaphoreCount", "pSignalSemaphores[%s]"),
    "vkQueueSubmit2": ("VkSubmitInfo2", "commandBufferInfoCount", "pCommandBufferInfos[%s].commandBuffer",
                       "waitSemaphoreInfoCount", "pWaitSemaphoreInfos[%s].semaphore",
                       "signalSemaphoreInfoCount", "pSignalSemaphoreInfos[%s].semaphore"),
}
# vkQueueSubmit2: each wait and signal semaphore's value, a member of its VkSemaphoreSubmitInfo (vkQueueSubmit's
# come from a VkTimelineSemaphoreSubmitInfo in the submit info's chain instead).
_VALUE_ITEMS = {"vkQueueSubmit2": ("pWaitSemaphoreInfos[%s].value", "pSignalSemaphoreInfos[%s].value")}
# Per command: the j-th wait and signal semaphore's value of a submit info `s` (`tv` its chain's values), in C.
_C_VALUES = {
    "vkQueueSubmit": ("tessera_semaphore_value(tv ? tv->pWaitSemaphoreValues : NULL, "
                      "tv ? tv->waitSemaphoreValueCount : 0, %s)",
                      "tessera_semaphore_value(tv ? tv->pSignalSemaphoreValues : NULL, "
                      "tv ? tv->signalSemaphoreValueCount : 0, %s)"),
    **{name: tuple(f"s->{item}" for item in items) for name, items in _VALUE_ITEMS.items()},
}
COMMANDS = tuple(_SHAPES)
LABEL_COMMANDS = ("vkQueueBeginDebugUtilsLabelEXT", "vkQueueEndDebugUtilsLabelEXT")
# Where the application observes completion, waits and polls: with SubmitPath.in_c, forwarded in C while the
# shim's licence holds (nothing handed over waits to be placed or sent: the Python hooks would find nothing to do).
WAIT_COMMANDS = ("vkDeviceWaitIdle", "vkQueueWaitIdle", "vkWaitForFences", "vkWaitSemaphores", "vkGetFenceStatus",
                 "vkGetSemaphoreCounterValue")
PRESENT = "vkQueuePresentKHR"   # with SubmitPath.report, its FRAME is written in C while the licence holds
# in runtime/, after submits.c and lifecycle.c: SubmitPath.place's C, and SubmitPath.report's
PLACEMENT_C = ("reader.c", "staged_appends.c", "event_packets.c", "placed_submits.c")
REPORT_C = ("reader.c", "staged_appends.c", "reported_submits.c")
# What the shims' Python calls of runtime/staged_appends.c (tessera.schemas.staged), with either licence's C.
STAGE_CDEF = """
int tessera_stage_open(int target, const char *path);
void tessera_stage_close(void);
"""


def open_stage(lib, fd: int, target) -> str | None:
    """Stage what the shim's C appends to `target` (open at `fd`: tessera.schemas.staged); None, or why C writes
    each append at once instead."""
    from tessera.schemas import staged

    error = lib.tessera_stage_open(fd, os.fsencode(staged.stage_path(target)))
    return f"{Path(target).name}: appends are not staged ({os.strerror(error)}): each is written at once" \
        if error else None


def _items(count: str, item: str) -> Callable[[Any], list]:
    """A reader of one submit info's items, from a _SHAPES pair ("pCommandBufferInfos[%s].commandBuffer")."""
    array, _, member = item.replace("[%s]", "").partition(".")

    def read(info) -> list:
        items = getattr(info, array)
        n = getattr(info, count)
        return [getattr(items[j], member) for j in range(n)] if member else [items[j] for j in range(n)]
    return read


# Per command: (command buffers, wait semaphores, signal semaphores) of one submit info, read in Python
# from the same shapes the C path is generated from.
_READERS = {name: tuple(_items(shape[k], shape[k + 1]) for k in (1, 3, 5)) for name, shape in _SHAPES.items()}
# Per command with values in its submit info: readers of its wait and signal semaphore values.
_VALUE_READERS = {name: (_items(_SHAPES[name][3], waits), _items(_SHAPES[name][5], signals))
                  for name, (waits, signals) in _VALUE_ITEMS.items()}


def batches(name: str, count: int, pSubmits, ffi) -> list[tuple[list, list, list]]:
    """vkQueueSubmit / vkQueueSubmit2's batches: per submit info, its command-buffer handles and its
    wait and signal semaphores as (handle, value) pairs (the value as the C path records it)."""
    buffers, waits, signals = _READERS[name]
    out = []
    for s in (pSubmits[i] for i in range(count)):
        wait_values, signal_values = _values(ffi, name, s)
        out.append((buffers(s), list(zip(waits(s), wait_values)), list(zip(signals(s), signal_values))))
    return out


def _values(ffi, name: str, s) -> tuple[list[int], list[int]]:
    """A submit info's wait and signal semaphore values: VkSemaphoreSubmitInfo's `value` (vkQueueSubmit2), or
    VkTimelineSemaphoreSubmitInfo's arrays in its chain (vkQueueSubmit), 0 where there is none."""
    readers = _VALUE_READERS.get(name)
    if readers is not None:
        return readers[0](s), readers[1](s)
    tv = structs.find(ffi, s.pNext, vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                      "VkTimelineSemaphoreSubmitInfo *")
    if tv is None:
        return [0] * s.waitSemaphoreCount, [0] * s.signalSemaphoreCount
    return (_given(ffi, tv.pWaitSemaphoreValues, tv.waitSemaphoreValueCount, s.waitSemaphoreCount),
            _given(ffi, tv.pSignalSemaphoreValues, tv.signalSemaphoreValueCount, s.signalSemaphoreCount))


def _given(ffi, values, count: int, total: int) -> list[int]:
    """`total` values: the j-th of `values` (`count` of them, may be NULL), 0 past them."""
    n = count if values != ffi.NULL else 0
    return [values[j] if j < n else 0 for j in range(total)]


def batch_buffers(name: str, count: int, pSubmits) -> list[list]:
    """Per submit info of a vkQueueSubmit / vkQueueSubmit2, its command-buffer handles."""
    buffers = _READERS[name][0]
    return [buffers(pSubmits[i]) for i in range(count)]


def command_buffers(name: str, count: int, pSubmits) -> list:
    """Every command-buffer handle a vkQueueSubmit / vkQueueSubmit2 submits, in order."""
    return [h for buffers in batch_buffers(name, count, pSubmits) for h in buffers]


def c_defines() -> str:
    """The #defines vkapi/runtime/submits.c and what follows it need: the s<submitID> label format
    (tessera.schemas.labels), the sTypes it looks for, the most command buffers of a submit handled whole in C
    (SubmitPath.in_c), the ledger's label-begin kind (the licences write the labels they kept), the message types
    reported_submits.c writes (tessera.schemas.frames), the text around a RECORDED_AGAIN's pairs
    (tessera.schemas.workloads) and around an ANNEX's labels, and the stages' layout (tessera.schemas.staged)."""
    import json

    from tessera.schemas import staged
    from tessera.schemas.frames import MessageType, json_body
    from tessera.schemas.labels import C_SUBMIT_FORMAT
    from tessera.schemas.workloads import again_c_text

    # an ANNEX of labels alone (layer/encoder.annexes), around its labels' JSON strings
    annex_head, annex_tail = json_body({"labels": ["x"]}).decode().split('"x"')

    from .vkconst import vk
    return (f'#define TESSERA_SUBMIT_FORMAT "{C_SUBMIT_FORMAT}"\n'
            f"#define TESSERA_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT {vk.VK_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT}\n"
            "#define TESSERA_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO "
            f"{vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO}\n"
            f"#define TESSERA_IN_C_MAX {IN_C_MAX}\n"
            f"#define TESSERA_IN_C_SEMAPHORES {IN_C_SEMAPHORES}\n"
            f"#define TESSERA_IN_C_BATCHES {IN_C_BATCHES}\n"
            f"#define TESSERA_LEDGER_LABEL_BEGIN {LABEL_BEGIN}\n"
            f"#define TESSERA_FRAME_WORKLOADS {int(MessageType.WORKLOADS)}\n"
            f"#define TESSERA_FRAME_RECORDED_AGAIN {int(MessageType.RECORDED_AGAIN)}\n"
            f"#define TESSERA_AGAIN_HEAD {json.dumps(again_c_text()[0])}\n"
            f"#define TESSERA_AGAIN_TAIL {json.dumps(again_c_text()[1])}\n"
            f"#define TESSERA_FRAME_ANNEX {int(MessageType.ANNEX)}\n"
            f"#define TESSERA_ANNEX_LABELS_HEAD {json.dumps(annex_head)}\n"
            f"#define TESSERA_ANNEX_LABELS_TAIL {json.dumps(annex_tail)}\n"
            f"#define TESSERA_FRAME_SUBMIT {int(MessageType.SUBMIT)}\n"
            f"#define TESSERA_FRAME_FRAME {int(MessageType.FRAME)}\n"
            + staged.c_defines())


def support_c() -> str:
    """The submit support C (vkapi/runtime/submits.c), as it is."""
    return RUNTIME_C.read_text()


def in_c_support(spec: SubmitPath) -> str:
    """The C that handles submits whole under a licence (SubmitPath.place, .report), as it is."""
    names = PLACEMENT_C if spec.place else REPORT_C if spec.report else ()
    return "".join((RUNTIME_C.parent / name).read_text() for name in names)


def present_fast_path(name: str, index: int) -> str:
    """C statements presenting and reporting the present's FRAME in C while the layer's licence holds
    (runtime/reported_submits.c tessera_present_begin, tessera_present_end)."""
    return (f"    if (tessera_present_begin(queue, pPresentInfo)) {{\n"
            f"        PFN_{name} next = (PFN_{name})tessera_next_of({index});\n"
            f"        VkResult result = next ? next(queue, pPresentInfo) : VK_ERROR_INITIALIZATION_FAILED;\n"
            f"        tessera_present_end(queue, pPresentInfo);\n"
            f"        return result;\n"
            "    }\n")


def wait_fast_path(name: str, index: int) -> str:
    """C statements forwarding a wait without Python while the shim's licence holds (SubmitPath.in_c)."""
    cmd = registry.load().commands[name]
    args = ", ".join(p.name for p in cmd.params)
    return (f"    if (__atomic_load_n(&tessera_placing, __ATOMIC_ACQUIRE)) {{\n"
            f"        PFN_{name} next = (PFN_{name})tessera_next_of({index});\n"
            f"        return next ? next({args}) : VK_ERROR_INITIALIZATION_FAILED;\n"
            "    }\n")


def fast_path(name: str, index: int, spec: SubmitPath) -> str:
    """C statements submitting `name` without Python when they can; they return when they do."""
    cmd = registry.load().commands[name]
    info, ncb, cb, nwait, wait, nsignal, signal = _SHAPES[name]
    count, submits = cmd.params[1].name, cmd.params[2].name
    args = ", ".join(p.name for p in cmd.params)
    j = "j"
    # a buffer submitted before; with the queue's labels in the ledger, also a submit inside them (its ANNEX)
    wrap_if = "(reused || tessera_queue_labelled(queue))" if spec.queue_labels else "reused"
    lines = [
        f"    if ({count} > 0 && {count} < 65536 && {submits} && __atomic_load_n(&tessera_c_submits, __ATOMIC_RELAXED)"
        f" && !__atomic_load_n(&tessera_python_reasons, __ATOMIC_RELAXED)) {{",
        "        tessera_cb *first = NULL;",
        *(["        tessera_cb *placing[TESSERA_IN_C_MAX];", "        uint32_t nplacing = 0;"] if spec.in_c else []),
        "        int ok = 1, reused = 0;",
        f"        size_t slots = {len(HEADER)};",
        f"        for (uint32_t i = 0; ok && i < {count}; i++) {{",
        f"            const {info} *s = &{submits}[i];",
        f"            if (s->{ncb} >> {COUNT_BITS} || s->{nwait} >> {COUNT_BITS} || s->{nsignal} >> {COUNT_BITS}) {{ ok = 0; break; }}",
    ]
    if spec.frame_boundary:
        lines.append("            if (tessera_has_frame_boundary(s->pNext)) { ok = 0; break; }")
    lines += [
        f"            for (uint32_t {j} = 0; {j} < s->{ncb}; {j}++) {{",
        f"                tessera_cb *c = tessera_cb_find((void *)s->{cb % j});",
        "                if (!c || !c->submit_ok) { ok = 0; break; }",
        "                if (!first) first = c;",
        "                reused |= c->submits != 0;",
        *(["                for (uint32_t k = 0; k < nplacing && k < TESSERA_IN_C_MAX; k++)",
           "                    if (placing[k] == c) nplacing = TESSERA_IN_C_MAX;   /* named twice: Python's */",
           "                if (nplacing < TESSERA_IN_C_MAX) placing[nplacing] = c;",
           "                nplacing++;"] if spec.in_c else []),
        "            }",
        f"            slots += 1 + 2 * (size_t)s->{ncb} + 2 * (size_t)s->{nwait} + 2 * (size_t)s->{nsignal};",
        "        }",
        "        if (ok && first) {",
        "            uint64_t boottime = tessera_clock(CLOCK_BOOTTIME), called = tessera_clock(CLOCK_MONOTONIC_RAW);",
        f"            uint64_t submit_id = {'tessera_next_submit()' if spec.number else '0'};",
        f"            int wrapped = {wrap_if + ' ? tessera_queue_push(queue, first->dev, submit_id) : 0' if spec.wrap else '0'};",
        f"            PFN_{name} next = (PFN_{name})first->dev->next[{index}];",
        f"            VkResult result = next ? next({args}) : VK_ERROR_INITIALIZATION_FAILED;",
        "            uint64_t returned = tessera_clock(CLOCK_MONOTONIC_RAW);",
        "            if (wrapped) ((PFN_vkQueueEndDebugUtilsLabelEXT)first->dev->queue_label_end)(queue);",
        "            if (result != 0) return result;",
        "            pthread_mutex_lock(&tessera_ledger_lock);",
    ]
    if spec.place:   # the driver places the batches, their semaphores' times in C too (and a timeline one's values)
        wait_value, signal_value = _C_VALUES[name]
        lines += [
            "            tessera_batches b;",
            f"            b.count = {count};",
            "            b.waits = b.signals = 0;",
            "            int in_c = b.count <= TESSERA_IN_C_BATCHES;",
            f"            for (uint32_t i = 0; in_c && i < {count}; i++) {{",
            f"                const {info} *s = &{submits}[i];",
            *(["                const VkTimelineSemaphoreSubmitInfo *tv = tessera_chain_find(s->pNext, "
               "TESSERA_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO);"] if name == "vkQueueSubmit" else []),
            f"                in_c = b.waits + s->{nwait} <= TESSERA_IN_C_SEMAPHORES"
            f" && b.signals + s->{nsignal} <= TESSERA_IN_C_SEMAPHORES;",
            f"                for (uint32_t {j} = 0; in_c && {j} < s->{nwait}; {j}++, b.waits++) {{",
            f"                    b.wait[b.waits] = (uint64_t)s->{wait % j};",
            f"                    b.wait_value[b.waits] = {wait_value % j};",
            "                }",
            f"                for (uint32_t {j} = 0; in_c && {j} < s->{nsignal}; {j}++, b.signals++) {{",
            f"                    b.signal[b.signals] = (uint64_t)s->{signal % j};",
            f"                    b.signal_value[b.signals] = {signal_value % j};",
            "                }",
            f"                b.buffers[i] = s->{ncb};",
            f"                b.nwait[i] = s->{nwait};",
            f"                b.nsignal[i] = s->{nsignal};",
            "            }",
            "            if (in_c && tessera_place_submit(queue, boottime, placing, nplacing, &b)) {",
        ]
    elif spec.report:   # the layer reports the batches' buffers, one after another, as one submit
        lines += [
            "            if (tessera_report_submit(queue, submit_id, wrapped, "
            "__atomic_load_n(&tessera_frame, __ATOMIC_RELAXED), called, returned, placing, nplacing)) {",
        ]
    if spec.in_c:
        lines += [
            "                pthread_mutex_unlock(&tessera_ledger_lock);",
            "                for (uint32_t k = 0; k < nplacing; k++) placing[k]->submits++;",
            "                return result;",
            "            }",
        ]
    lines += [
        "            uint64_t serial = tessera_ledger_active->serial;",
        "            uint64_t *r = tessera_ledger_record(slots);",
        "            if (r) {",
        f"                r[0] = (uint64_t)(slots * 8) | ((uint64_t){count} << 32);   /* kind SUBMIT */",
        "                r[1] = (uint64_t)(uintptr_t)queue; r[2] = called; r[3] = returned; r[4] = boottime;",
        "                r[5] = submit_id; r[6] = __atomic_load_n(&tessera_frame, __ATOMIC_RELAXED);",
        f"                r[7] = wrapped ? {WRAPPED} : 0;",
        f"                uint64_t *p = r + {len(HEADER)};",
        f"                for (uint32_t i = 0; i < {count}; i++) {{",
        f"                    const {info} *s = &{submits}[i];",
    ]
    if name == "vkQueueSubmit":
        lines.append("                    const VkTimelineSemaphoreSubmitInfo *tv = tessera_chain_find(s->pNext, "
                     "TESSERA_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO);")
    wait_value, signal_value = _C_VALUES[name]
    lines += [
        f"                    *p++ = (uint64_t)s->{ncb} | ((uint64_t)s->{nwait} << {COUNT_BITS})"
        f" | ((uint64_t)s->{nsignal} << {2 * COUNT_BITS});",
        f"                    for (uint32_t {j} = 0; {j} < s->{ncb}; {j}++) *p++ = (uint64_t)(uintptr_t)s->{cb % j};",
        f"                    for (uint32_t {j} = 0; {j} < s->{ncb}; {j}++)"
        f" *p++ = tessera_cb_find((void *)s->{cb % j})->serial;   /* found above */",
        f"                    for (uint32_t {j} = 0; {j} < s->{nwait}; {j}++) *p++ = (uint64_t)s->{wait % j};",
        f"                    for (uint32_t {j} = 0; {j} < s->{nwait}; {j}++) *p++ = {wait_value % j};",
        f"                    for (uint32_t {j} = 0; {j} < s->{nsignal}; {j}++) *p++ = (uint64_t)s->{signal % j};",
        f"                    for (uint32_t {j} = 0; {j} < s->{nsignal}; {j}++) *p++ = {signal_value % j};",
        "                }",
        "            }",
        "            pthread_mutex_unlock(&tessera_ledger_lock);",
        f"            for (uint32_t i = 0; i < {count}; i++)",
        f"                for (uint32_t {j} = 0; {j} < {submits}[i].{ncb}; {j}++) {{",
        f"                    tessera_cb *c = tessera_cb_find((void *){submits}[i].{cb % j});",
        "                    if (c) tessera_cb_submitted(c, serial);",
        "                }",
        "            return result;",
        "        }",
        "    }",
    ]
    return "\n".join(lines) + "\n"


def label_fast_path(name: str, spec: SubmitPath) -> str:
    """C statements recording a queue label in the ledger (not forwarded: the shim consumes it); with
    SubmitPath.place or .report, kept in C first where it can be (runtime/placed_submits.c tessera_label_in_c,
    runtime/reported_submits.c tessera_report_label_in_c)."""
    begin = name == "vkQueueBeginDebugUtilsLabelEXT"
    text = "pLabelInfo && pLabelInfo->pLabelName ? pLabelInfo->pLabelName : \"\"" if begin else "NULL"
    record = f"tessera_ledger_label(queue, {LABEL_BEGIN if begin else LABEL_END}, {text});"
    if spec.place:
        record = f"if (!tessera_label_in_c(queue, {text})) {record}"
    elif spec.report:
        record = f"if (!tessera_report_label_in_c(queue, {text})) {record}"
    return (f"    if (__atomic_load_n(&tessera_c_submits, __ATOMIC_RELAXED)) {{ {record} return; }}\n")


class Licence:
    """What both shims' licences to handle submits whole in C share (SubmitPath.in_c; icd/placed_submits.py,
    layer/reported_submits.py): a grant that handled nothing before it ended makes the next grants wait, 1, 2,
    4 ... up to SKIP_MAX attempts skipped (a loop C cannot handle pays no grant per frame), and the counts of
    what C handled (`counts_fn` fills two u64: submits, and their command buffers)."""
    SKIP_MAX = 64

    def __init__(self, ffi, counts_fn, what: str) -> None:
        self._ffi, self._counts_fn, self._what = ffi, counts_fn, what
        self._skip = 0           # grant attempts to skip before the next
        self._unproductive = 0   # grants that handled nothing, in a row

    def skip(self) -> bool:
        """Whether this grant attempt is skipped."""
        if self._skip:
            self._skip -= 1
            return True
        return False

    def ended(self, handled: int) -> None:
        """A grant ended, C having handled `handled` submits under it."""
        self._unproductive = 0 if handled else self._unproductive + 1
        self._skip = min(2 ** min(self._unproductive, 7) // 2, self.SKIP_MAX)

    def counts(self) -> str:
        submits, buffers = self._read()
        return f"submits {self._what} in C: {submits} (command buffers: {buffers})"

    def handled(self) -> int:
        """The submits C handled whole so far."""
        return self._read()[0]

    def _read(self) -> tuple[int, int]:
        counts = self._ffi.new("uint64_t[2]")
        self._counts_fn(counts)
        return counts[0], counts[1]


class ReadingLedger(threading.local):
    """`on` while this thread reads a shim's ledger. The hooks of a buffer's begin made in C (vkapi/lifecycle.py)
    run then, and they read the ledger first, as every begin hook does: the thread reading it already skips that."""
    on = False


class SubmitLedger:
    """The Python side: takes the records the C path wrote, in order."""

    def __init__(self, ffi, lib, report) -> None:
        """`report(message)` logs a problem (records lost to memory exhaustion)."""
        self.ffi, self.lib, self.report = ffi, lib, report
        self.made_in_c = 0       # submits read from the ledger so far
        self.made_in_python = 0  # submits the shim's Python path made (counted by the shim)
        self._serial = 0         # the serial of the ledger taken last (runtime/submits.c)

    def counts(self, whole_in_c: int = 0) -> str:
        """`whole_in_c`: the submits the C path made and handled whole, never recorded here (Licence.handled)."""
        return f"submits so far: {self.made_in_c + whole_in_c} made in C, {self.made_in_python} through Python"

    def python_reason(self, on: bool) -> None:
        """A reason for every submit to take the Python path begins (True) or ends (False)."""
        self.lib.tessera_python_reason(1 if on else -1)

    def read(self) -> None:
        """Every submit `take` returned last is read: C may begin its buffers again (vkapi/lifecycle.py)."""
        if self._serial:
            self.lib.tessera_ledger_read(self._serial)

    def take(self) -> list[Submission | QueueLabel]:
        """Every submit (and queue label) recorded in C since the last call, in call order (an empty
        list costs one C call)."""
        ledger = self.lib.tessera_ledger_take()
        if ledger == self.ffi.NULL:
            return []
        self._serial = ledger.serial
        try:
            if ledger.dropped:
                self.report(f"{ledger.dropped} submit(s) made in C were not recorded (out of memory); "
                            "their metadata and GPU events are missing")
            taken, submits = _decode(self.ffi.buffer(ledger.data, ledger.used)[:])
            self.made_in_c += submits
            return taken
        finally:
            self.lib.tessera_ledger_give_back(ledger)


def _decode(data: bytes) -> tuple[list[Submission | QueueLabel], int]:
    """The records of a ledger's bytes, in order, and how many are submits. Every record is whole u64 words
    in the machine's order, as runtime/submits.c writes them: read as such, into one list (a frame's ledger
    holds one submit or a few, read by index and slice)."""
    words = memoryview(data).cast("Q").tolist()
    out = []
    mask = (1 << COUNT_BITS) - 1
    header = len(HEADER)
    at, submits, end = 0, 0, len(words)
    while at < end:
        first = words[at]
        size, kind = (first & 0xFFFFFFFF) >> 3, first >> 48
        if kind != SUBMIT:
            name = None
            if kind == LABEL_BEGIN:
                start = 8 * (at + 3)
                name = data[start:start + words[at + 2]].decode("utf-8", "replace")
            out.append(QueueLabel(words[at + 1], name))
            at += size
            continue
        _, queue, called, returned, boottime, submit_id, frame, flags = words[at:at + header]
        pos = at + header
        batches, serials = [], []
        for _ in range((first >> 32) & 0xFFFF):
            counts = words[pos]
            cbs = pos + 1
            ncb = counts & mask
            serials += words[cbs + ncb:cbs + 2 * ncb]
            waits = cbs + 2 * ncb
            nwait, nsignal = (counts >> COUNT_BITS) & mask, counts >> (2 * COUNT_BITS)
            signals = waits + 2 * nwait
            pos = signals + 2 * nsignal
            # most batches have no semaphores: no zip for them (a third of a record's decoding)
            batches.append((words[cbs:cbs + ncb],
                            list(zip(words[waits:waits + nwait], words[waits + nwait:signals])) if nwait else [],
                            list(zip(words[signals:signals + nsignal], words[signals + nsignal:pos])) if nsignal
                            else []))
        out.append(Submission(queue, called, returned, boottime, submit_id, frame, bool(flags & WRAPPED), batches,
                              serials))
        submits += 1
        at += size
    return out, submits

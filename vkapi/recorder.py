"""Record in C, think in Python: the commands a shim records in a per-command-buffer arena.

Role: one place defines the record layout, both the C that writes it (generated into the
shim, inside each recorded command's guard, see guards.py) and the Python that reads it
(`Recorder.drain`). A shim declares its recorded commands in a table of `Recorded`
entries (its shim spec); everything else stays a Python hook.

Hot path (C, on the application's thread, no Python): find the command buffer's
`tessera_cb` in a lock-free hash map, append one record to its arena (reused across
resets: fresh pages cost several times more), for the layer's tagged workloads take a
tag from the process-wide counter and wrap the call in a `t<tag>` label sent down, then
call the next element directly through the device's C table of next functions.

Python later: records are applied in order, by the same hook logic as before, whenever
Python next looks at that command buffer: before any Python hook of a command recorded
into it (so order is kept, on the recording thread), and at vkEndCommandBuffer, where the
rest of the recording and the end hooks are applied by a worker thread (`defer`): the
application's thread only forwards the call (unless the rest is short: INLINE_BYTES). Whatever
needs a finished recording waits for its job (`wait`, before any hook of that buffer) or for
every job (`settle`: submits, frees, pool resets, executing secondaries, device destruction). A
command buffer the C side does not know (not registered) takes the Python hook, as before.

Record layout (little-endian, 8-byte aligned):
    u32 command index (the shim's guard table index) | u32 record size in bytes
    u64 slot per recorded parameter after the command buffer, in parameter order
        (the tag first for tagged workloads; an array's, string's or info struct's byte length)
    the bytes of each array / string / info parameter, each padded to 8
Formats (`tessera_record_format(index)`), one code per parameter after the command buffer:
    Q unsigned scalar or handle, q signed scalar, A<Struct> array of plain structs,
    S<Struct>.<member> the string `member` of the struct the parameter points to,
    I<Struct>[.<member>:<count> | .<member>]... an info struct (`const VkCopyBufferInfo2 *`,
        `const VkRenderingInfo *`: sType, pNext, scalars, handles and flat structs, and `const`
        pointers to flat structs, each an array counted by another member per the registry's
        `length`, or one optional struct; `info_pointers`): its bytes are the struct, padded to 8,
        then what each pointer points to, in member order, each padded to 8. C copies them as they
        are except that it sets every pNext to NULL (the chains are not copied), a pointer that was
        NULL stays NULL with its count 0, and the others keep the application's address, which
        Python replaces with its copy's before anything reads them. Python gets a `Struct *` into
        the arena, read exactly as the live struct (valid while the record is applied); NULL when
        the parameter was NULL (slot 0),
    - not recorded (given to Python as None). The first code is R (a record) or T (a record whose
    first slot is a tag), or F (a folded record: one slot of count, then a Q per sum, no parameters),
    or D (a dependency record, `Recorded.dependencies`: three slots, the barriers, the OR of their
    source stage masks and the OR of the destination stage masks that hold no bottom-of-pipe, no
    parameters); commands not recorded have an empty format.

Threads: a command buffer's arena is written by the thread recording it and read by the
thread applying it (that thread, or the worker after vkEndCommandBuffer); Vulkan's external
synchronisation of command buffers, and `wait` before anything else touches a buffer whose
job is queued, keep them apart. The map is written under a mutex (register / unregister)
and read without locks. The worker is one daemon thread per shim, started with the first job.
"""
from __future__ import annotations

import os
import queue
import re
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import registry


SWITCH = "TESSERA_C_RECORDING"   # "0": nothing is recorded in C (Recorder.enabled)
# A recording whose records take at most this many bytes is applied at vkEndCommandBuffer on the
# application's thread (Recorder.defer): about a dozen commands, each ~3 us to apply.
INLINE_BYTES = 512


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
    # A record of it sends the buffer's submits through Python until the buffer is reset: what it
    # changes is planned at submit in Python, and the C path's readiness is decided at
    # vkEndCommandBuffer, before the records are applied (the layer's application labels).
    python_submits: bool = False
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


_SCALAR_TYPES_SIGNED = {"int32_t", "int64_t", "int16_t", "int8_t"}


def _plain(struct_name: str) -> bool:
    """A struct copyable byte for byte: no pointers, no pNext."""
    vk = registry.load()
    s = vk.structs.get(struct_name)
    return s is not None and not s.sType and all(not m.pointer for m in s.members)


def _flat(struct_name: str, chained: bool) -> bool:
    """A struct with no pointers in it (by-value struct members included), except, when `chained`,
    its own pNext (next to an sType)."""
    vk = registry.load()
    s = vk.structs.get(struct_name)
    if s is None or (bool(s.sType) and not chained):
        return False
    for m in s.members:
        if m.pointer:
            if not (chained and m.name == "pNext" and s.sType):
                return False
        elif m.type in vk.structs and not _flat(m.type, False):
            return False
    return True


def info_pointers(struct_name: str) -> list | None:
    """The pointer members the I code copies with an info struct, in member order, or None when
    `struct_name` is not one: a struct with sType and pNext whose other members are scalars,
    handles or pointer-free structs, or `const` pointers to structs (themselves pointer-free but for
    their own pNext), each either an array counted by another member (its registry `length`) or
    one optional struct (no `length`)."""
    vk = registry.load()
    s = vk.structs.get(struct_name)
    if s is None or not s.sType or not s.members or s.members[1].name != "pNext":
        return None
    names = {m.name for m in s.members}
    pointers = [m for m in s.members[2:] if m.pointer]
    for m in pointers:
        if (not m.fullType.startswith("const ") or m.fullType.count("*") != 1 or not _flat(m.type, True)
                or (m.length and m.length not in names)):
            return None
        if m.length:
            count = next(c for c in s.members if c.name == m.length)
            if count.pointer or count.type not in ("uint32_t", "uint64_t", "size_t"):
                return None
    if any(m.type in vk.structs and not _flat(m.type, False) for m in s.members[2:] if not m.pointer):
        return None
    return pointers


def info_code(struct_name: str, pointers) -> str:
    """I<Struct>, then .<member>:<count> per array and .<member> per single struct pointer."""
    return "I" + struct_name + "".join(f".{m.name}:{m.length}" if m.length else f".{m.name}" for m in pointers)


def formats(name: str, spec: Recorded) -> list[str]:
    """The format code of each parameter after the command buffer (see the module docstring)."""
    vk = registry.load()
    cmd = vk.commands[name]
    if cmd.params[0].type != "VkCommandBuffer" or cmd.returnType != "void":
        raise ValueError(f"{name}: only void vkCmd* commands can be recorded")
    if spec.fold is not None:
        if (spec.tagged or spec.fields or spec.strings or spec.python_submits or spec.dependencies
                or spec.python_if or spec.opens_pass or spec.closes_pass):
            raise ValueError(f"{name}: a folded record has only its count and sums")
        return ["F"] + ["Q"] * len(spec.fold)
    if spec.dependencies:
        if spec.tagged or spec.fields or spec.strings or spec.python_if or spec.opens_pass or spec.closes_pass \
                or not _dependency_params(cmd):
            raise ValueError(f"{name}: a dependency record reduces VkDependencyInfo parameters, nothing else")
        return ["D", "Q", "Q"]
    codes = []
    for p in cmd.params[1:]:
        if spec.fields is not None and p.name not in spec.fields and p.name not in spec.strings:
            codes.append("-")
        elif p.name in spec.strings:
            codes.append(f"S{p.type}.{spec.strings[p.name]}")
        elif p.pointer:
            pointers = None if p.length else info_pointers(p.type)
            if pointers is not None and p.fullType == f"const {p.type}*":
                codes.append(info_code(p.type, pointers))
                continue
            if not (p.length and _plain(p.type) and p.fullType.startswith("const ")):
                raise ValueError(f"{name}.{p.name}: pointer parameters are recorded only as arrays of plain "
                                 "structs or info structs (info_pointers)")
            codes.append(f"A{p.type}")
        elif p.type in _SCALAR_TYPES_SIGNED:
            codes.append("q")
        elif p.type in ("float", "double"):
            raise ValueError(f"{name}.{p.name}: floating-point parameters are not recorded")
        else:
            codes.append("Q")
    return ["T" if spec.tagged else "R"] + codes


SUPPORT_C = r"""
/* ---- command-buffer arenas (tessera.vkapi.recorder) ---- */
#define TESSERA_TAG_FORMAT "%(tag_format)s"        /* tessera.schemas.labels */
#define TESSERA_SUBMIT_FORMAT "%(submit_format)s"
typedef struct tessera_device {
    PFN_vkVoidFunction next[TESSERA_GUARD_COUNT];   /* next element's function per guarded command */
    PFN_vkCmdBeginDebugUtilsLabelEXT label_begin;   /* t<tag> labels (layer): debug utils, or else markers */
    PFN_vkCmdEndDebugUtilsLabelEXT label_end;
    PFN_vkCmdDebugMarkerBeginEXT marker_begin;
    PFN_vkCmdDebugMarkerEndEXT marker_end;
    PFN_vkVoidFunction queue_label_begin;            /* s<submitID> queue labels (layer, submits.py) */
    PFN_vkVoidFunction queue_label_end;
} tessera_device;

typedef struct tessera_cb {
    void *handle;
    tessera_device *dev;
    uint8_t *data;
    size_t used, cap;
    uint64_t dropped;            /* records lost to a failed allocation, reported by Python */
    int python_path;             /* set by Python: this buffer's commands take their Python hooks */
    int submit_ok;               /* set by Python: a submit of this buffer may take the C path (submits.py) */
    int python_submits;          /* a record of a Recorded(python_submits=True) command: submits take Python */
    int pass_in_c;               /* the open render pass was begun in C and no Python hook ran since */
    int pass_label;              /* ... and C opened its t<tag> label (the layer) */
    uint64_t submits;            /* times submitted since recorded (submits.py) */
    size_t last;                 /* offset of the last record, for folding */
    uint32_t last_index;         /* its command index; UINT32_MAX when the arena is empty */
} tessera_cb;

typedef struct { void *key; tessera_cb *cb; } tessera_slot;
typedef struct { size_t mask; tessera_slot slots[]; } tessera_table;

#define TESSERA_TOMBSTONE ((void *)(uintptr_t)1)
static tessera_table *tessera_cbs;          /* read lock-free; replaced (never freed) when it grows */
static size_t tessera_cb_used;              /* live + tombstones, under tessera_cb_lock */
static pthread_mutex_t tessera_cb_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tessera_tag;

static inline size_t tessera_hash(void *key, size_t mask)
{
    return (size_t)((((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

static inline tessera_cb *tessera_cb_find(void *key)
{
    tessera_table *t = __atomic_load_n(&tessera_cbs, __ATOMIC_ACQUIRE);
    if (!t) return NULL;
    for (size_t i = tessera_hash(key, t->mask);; i = (i + 1) & t->mask) {
        void *k = __atomic_load_n(&t->slots[i].key, __ATOMIC_ACQUIRE);
        if (k == key) return t->slots[i].cb;
        if (k == NULL) return NULL;
    }
}

static tessera_table *tessera_table_new(size_t slots)
{
    tessera_table *t = calloc(1, sizeof(tessera_table) + slots * sizeof(tessera_slot));
    if (t) t->mask = slots - 1;
    return t;
}

static void tessera_table_put(tessera_table *t, void *key, tessera_cb *cb)
{
    size_t i = tessera_hash(key, t->mask);
    while (t->slots[i].key != NULL && t->slots[i].key != TESSERA_TOMBSTONE && t->slots[i].key != key)
        i = (i + 1) & t->mask;
    t->slots[i].cb = cb;
    __atomic_store_n(&t->slots[i].key, key, __ATOMIC_RELEASE);
}

/* Python: the command buffer `handle` of a device records in C from now on. 0 on failure. */
int tessera_cb_register(void *handle, tessera_device *dev)
{
    tessera_cb *cb = calloc(1, sizeof(tessera_cb));
    if (!cb) return 0;
    cb->handle = handle;
    cb->dev = dev;
    cb->last_index = UINT32_MAX;
    pthread_mutex_lock(&tessera_cb_lock);
    tessera_table *t = tessera_cbs;
    if (!t || (tessera_cb_used + 1) * 2 > t->mask + 1) {
        size_t live = 0;
        if (t) for (size_t i = 0; i <= t->mask; i++)
            live += t->slots[i].key != NULL && t->slots[i].key != TESSERA_TOMBSTONE;
        size_t slots = 1024;
        while ((live + 1) * 4 > slots) slots *= 2;
        tessera_table *grown = tessera_table_new(slots);
        if (!grown) { pthread_mutex_unlock(&tessera_cb_lock); free(cb); return 0; }
        if (t) for (size_t i = 0; i <= t->mask; i++)
            if (t->slots[i].key != NULL && t->slots[i].key != TESSERA_TOMBSTONE)
                tessera_table_put(grown, t->slots[i].key, t->slots[i].cb);
        /* The old table stays allocated: a reader may still be probing it. */
        __atomic_store_n(&tessera_cbs, grown, __ATOMIC_RELEASE);
        tessera_cb_used = live;
        t = grown;
    }
    tessera_cb *old = tessera_cb_find(handle);
    if (old) {   /* a handle the backend reused without our seeing it freed: replace */
        for (size_t i = tessera_hash(handle, t->mask);; i = (i + 1) & t->mask)
            if (t->slots[i].key == handle) { __atomic_store_n(&t->slots[i].cb, cb, __ATOMIC_RELEASE); break; }
        free(old->data);
        free(old);
    } else {
        tessera_table_put(t, handle, cb);
        tessera_cb_used++;
    }
    pthread_mutex_unlock(&tessera_cb_lock);
    return 1;
}

/* Python: the command buffer is freed (its records were applied first). */
void tessera_cb_unregister(void *handle)
{
    pthread_mutex_lock(&tessera_cb_lock);
    tessera_table *t = tessera_cbs;
    if (t) for (size_t i = tessera_hash(handle, t->mask);; i = (i + 1) & t->mask) {
        void *k = t->slots[i].key;
        if (k == NULL) break;
        if (k == handle) {
            tessera_cb *cb = t->slots[i].cb;
            __atomic_store_n(&t->slots[i].key, TESSERA_TOMBSTONE, __ATOMIC_RELEASE);
            /* Only the (externally synchronised) owner of `handle` ever reads its cb. */
            free(cb->data);
            free(cb);
            break;
        }
    }
    pthread_mutex_unlock(&tessera_cb_lock);
}

static int tessera_arena_grow(tessera_cb *cb, size_t need)
{
    size_t cap = cb->cap ? cb->cap : 4096;
    while (cap < cb->used + need) cap *= 2;
    uint8_t *data = realloc(cb->data, cap);
    if (!data) return 0;
    cb->data = data;
    cb->cap = cap;
    return 1;
}

/* Room for one record: its slots, then `extra` bytes; NULL (and counted) when memory ran out. */
static inline uint64_t *tessera_record(tessera_cb *cb, uint32_t index, size_t slots, size_t extra)
{
    size_t size = 8 + slots * 8 + ((extra + 7) & ~(size_t)7);
    if (cb->used + size > cb->cap && !tessera_arena_grow(cb, size)) {
        cb->dropped++;
        return NULL;
    }
    uint8_t *p = cb->data + cb->used;
    cb->last = cb->used;
    cb->last_index = index;
    cb->used += size;
    ((uint32_t *)p)[0] = index;
    ((uint32_t *)p)[1] = (uint32_t)size;
    return (uint64_t *)(p + 8);
}

/* Python: the records so far (pointer, byte count, records dropped); then tessera_cb_clear. */
int tessera_cb_records(void *handle, uint8_t **data, size_t *used, uint64_t *dropped)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return 0;
    *data = cb->data;
    *used = cb->used;
    *dropped = cb->dropped;
    return 1;
}

/* Python: the records were applied; the arena is empty again. */
void tessera_cb_clear(void *handle)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (cb) { cb->used = 0; cb->dropped = 0; cb->last_index = UINT32_MAX; }
}

/* Python: the buffer was reset (or begun again): no records, Python path off, nothing submitted. */
void tessera_cb_reset(void *handle)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (cb) {
        cb->used = 0; cb->dropped = 0; cb->last_index = UINT32_MAX; cb->python_path = 0;
        cb->submit_ok = 0; cb->submits = 0; cb->python_submits = 0; cb->pass_in_c = 0; cb->pass_label = 0;
    }
}

/* Before any Python hook of a command-buffer command (guards.py): a render pass begun in C
   must end in Python, where the hooks acting at the end of a pass run (Recorded.closes_pass). */
static inline void tessera_cb_python_seen(void *handle)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (cb) cb->pass_in_c = 0;
}

/* Python: while on, the buffer's recorded commands take their Python hooks instead (a driver
   feature that must act at record time, such as shader instrumentation regions). */
void tessera_cb_set_python(void *handle, int on)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (cb) cb->python_path = on;
}

uint64_t tessera_next_tag(void)
{
    return __atomic_add_fetch(&tessera_tag, 1, __ATOMIC_RELAXED);
}

/* The layer's t<tag> label around a workload recorded in C (tagging.py's Labeller in C). */
static int tessera_push_tag(VkCommandBuffer commandBuffer, tessera_device *dev, uint64_t tag)
{
    char name[24];
    snprintf(name, sizeof name, TESSERA_TAG_FORMAT, (unsigned long long)tag);
    if (dev->label_begin) {
        VkDebugUtilsLabelEXT label = {0};
        label.sType = 1000128002;   /* VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT */
        label.pLabelName = name;
        dev->label_begin(commandBuffer, &label);
        return 1;
    }
    if (dev->marker_begin) {
        VkDebugMarkerMarkerInfoEXT marker = {0};
        marker.sType = 1000022002;  /* VK_STRUCTURE_TYPE_DEBUG_MARKER_MARKER_INFO_EXT */
        marker.pMarkerName = name;
        dev->marker_begin(commandBuffer, &marker);
        return 1;
    }
    return 0;
}

static void tessera_pop_tag(VkCommandBuffer commandBuffer, tessera_device *dev)
{
    if (dev->label_end) dev->label_end(commandBuffer);
    else if (dev->marker_end) dev->marker_end(commandBuffer);
}

const char *tessera_record_format(int index)
{
    return index >= 0 && index < TESSERA_GUARD_COUNT ? tessera_record_formats[index] : NULL;
}
"""

def support_c() -> str:
    """The recording support C, with the label protocol's formats (tessera.schemas.labels)."""
    from tessera.schemas.labels import C_SUBMIT_FORMAT, C_TAG_FORMAT
    return SUPPORT_C % {"tag_format": C_TAG_FORMAT, "submit_format": C_SUBMIT_FORMAT}


CDEF = """
typedef struct tessera_device {
    PFN_vkVoidFunction next[%d];
    PFN_vkCmdBeginDebugUtilsLabelEXT label_begin;
    PFN_vkCmdEndDebugUtilsLabelEXT label_end;
    PFN_vkCmdDebugMarkerBeginEXT marker_begin;
    PFN_vkCmdDebugMarkerEndEXT marker_end;
    PFN_vkVoidFunction queue_label_begin;            /* s<submitID> queue labels (layer, submits.py) */
    PFN_vkVoidFunction queue_label_end;
} tessera_device;
int tessera_cb_register(void *handle, tessera_device *dev);
void tessera_cb_unregister(void *handle);
int tessera_cb_records(void *handle, uint8_t **data, size_t *used, uint64_t *dropped);
void tessera_cb_clear(void *handle);
void tessera_cb_reset(void *handle);
void tessera_cb_set_python(void *handle, int on);
uint64_t tessera_next_tag(void);
const char *tessera_record_format(int index);
"""

# Types the recording C needs declared even when a shim hooks no label command.
LABEL_COMMANDS = ("vkCmdBeginDebugUtilsLabelEXT", "vkCmdEndDebugUtilsLabelEXT",
                  "vkCmdDebugMarkerBeginEXT", "vkCmdDebugMarkerEndEXT")


def fast_path(name: str, index: int, spec: Recorded) -> str:
    """C statements recording `name` when its command buffer is registered; they return."""
    vk = registry.load()
    cmd = vk.commands[name]
    codes = formats(name, spec)
    if spec.fold is not None:
        return _fold_path(name, index, spec)
    if spec.dependencies:
        return _dependency_path(name, index, spec)
    tagged = spec.tagged
    params = cmd.params[1:]
    slot_codes = codes[1:]
    recorded = [(p, c) for p, c in zip(params, slot_codes) if c != "-"]
    when = "rec && !rec->python_path"
    if spec.closes_pass:
        when += " && rec->pass_in_c"
    if spec.python_if:
        when += f" && !({c_constants(spec.python_if)})"
    lines = ["    tessera_cb *rec = tessera_cb_find((void *)commandBuffer);",
             f"    if ({when}) {{"]
    if spec.python_submits:
        lines.append("        rec->python_submits = 1;")
    sizes = []
    for p, c in recorded:
        if c.startswith("A"):
            lines.append(f"        size_t n_{p.name} = {p.name} ? (size_t)({p.length}) * sizeof({p.type}) : 0;")
            sizes.append(f"((n_{p.name} + 7) & ~(size_t)7)")
        elif c.startswith("S"):
            member = c.split(".", 1)[1]
            lines.append(f"        const char *s_{p.name} = {p.name} && {p.name}->{member} ? {p.name}->{member} : \"\";")
            lines.append(f"        size_t n_{p.name} = strlen(s_{p.name});")
            sizes.append(f"((n_{p.name} + 7) & ~(size_t)7)")
        elif c.startswith("I"):
            parts = [f"((sizeof({p.type}) + 7) & ~(size_t)7)"]
            for k, m in enumerate(info_pointers(p.type)):
                n = f"(size_t){p.name}->{m.length}" if m.length else "1"
                lines.append(f"        size_t c{k}_{p.name} = {p.name} && {p.name}->{m.name} ? {n} : 0;")
                parts.append(f"((c{k}_{p.name} * sizeof({m.type}) + 7) & ~(size_t)7)")
            lines.append(f"        size_t n_{p.name} = {p.name} ? {' + '.join(parts)} : 0;")
            sizes.append(f"n_{p.name}")
    nslots = len(recorded) + (1 if tagged else 0)
    extra = " + ".join(sizes) or "0"
    if tagged:
        lines.append("        uint64_t tag = tessera_next_tag();")
        lines.append("        int pushed = tessera_push_tag(commandBuffer, rec->dev, tag);")
    lines.append(f"        uint64_t *slot = tessera_record(rec, {index}, {nslots}, {extra});")
    lines.append("        if (slot) {")
    i = 0
    if tagged:
        lines.append("            slot[0] = tag;")
        i = 1
    for p, c in recorded:
        if c == "Q":
            lines.append(f"            slot[{i}] = (uint64_t)(uintptr_t){p.name};" if p.type in vk.handles
                         and vk.handles[p.type].dispatchable else f"            slot[{i}] = (uint64_t){p.name};")
        elif c == "q":
            lines.append(f"            slot[{i}] = (uint64_t)(int64_t){p.name};")
        else:
            lines.append(f"            slot[{i}] = n_{p.name};")
        i += 1
    if sizes:
        lines.append(f"            uint8_t *extra = (uint8_t *)(slot + {nslots});")
        for p, c in recorded:
            if c.startswith("A"):
                lines.append(f"            if (n_{p.name}) memcpy(extra, {p.name}, n_{p.name});")
                lines.append(f"            extra += (n_{p.name} + 7) & ~(size_t)7;")
            elif c.startswith("S"):
                lines.append(f"            memcpy(extra, s_{p.name}, n_{p.name});")
                lines.append(f"            extra += (n_{p.name} + 7) & ~(size_t)7;")
            elif c.startswith("I"):
                lines += _info_copy(p)
    lines.append("        }")
    args = ", ".join(p.name for p in cmd.params)
    if spec.forward:
        lines.append(f"        PFN_{name} next = (PFN_{name})rec->dev->next[{index}];")
        lines.append(f"        if (next) next({args});")
    if spec.opens_pass:   # the pass's t<tag> label, if any, stays open until its end
        lines.append("        rec->pass_in_c = 1;")
        lines.append(f"        rec->pass_label = {'pushed' if tagged else '0'};")
    elif tagged:
        lines.append("        if (pushed) tessera_pop_tag(commandBuffer, rec->dev);")
    if spec.closes_pass:
        lines.append("        if (rec->pass_label) tessera_pop_tag(commandBuffer, rec->dev);")
        lines.append("        rec->pass_in_c = 0;")
        lines.append("        rec->pass_label = 0;")
    lines.append("        return;")
    lines.append("    }")
    return "\n".join(lines) + "\n"


def _info_copy(p) -> list[str]:
    """C copying an info struct parameter and what its pointers point to into the record (the I code)."""
    vk = registry.load()
    v = f"i_{p.name}"
    pointers = info_pointers(p.type)
    lines = [f"            if (n_{p.name}) {{",
             f"                {p.type} *{v} = ({p.type} *)extra;",
             f"                memcpy({v}, {p.name}, sizeof({p.type}));",
             f"                {v}->pNext = NULL;"]
    if pointers:
        lines.append(f"                uint8_t *at = extra + ((sizeof({p.type}) + 7) & ~(size_t)7);")
    for k, m in enumerate(pointers):
        c = f"c{k}_{p.name}"
        lines.append(f"                if (!{c}) {v}->{m.name} = NULL;   /* else Python points it at the copy */")
        if m.length:
            lines.append(f"                {v}->{m.length} = {c};")
        lines.append(f"                if ({c}) memcpy(at, {p.name}->{m.name}, {c} * sizeof({m.type}));")
        if vk.structs[m.type].sType:
            lines.append(f"                for (size_t k = 0; k < {c}; k++) (({m.type} *)at)[k].pNext = NULL;")
        lines.append(f"                at += ({c} * sizeof({m.type}) + 7) & ~(size_t)7;")
    lines += ["            }",
              f"            extra += n_{p.name};"]
    return lines


def _fold_path(name: str, index: int, spec: Recorded) -> str:
    """Fast path of a folded command: add to the last record when it is the same command."""
    cmd = registry.load().commands[name]
    n = 1 + len(spec.fold)
    lines = ["    tessera_cb *rec = tessera_cb_find((void *)commandBuffer);",
             "    if (rec && !rec->python_path) {",
             "        uint64_t *slot;",
             f"        if (rec->last_index == {index} && rec->used)",
             "            slot = (uint64_t *)(rec->data + rec->last + 8);",
             f"        else if ((slot = tessera_record(rec, {index}, {n}, 0)) != NULL)",
             f"            memset(slot, 0, {n} * sizeof(uint64_t));",
             "        if (slot) {",
             "            slot[0] += 1;"]
    for i, expr in enumerate(spec.fold, start=1):
        lines.append(f"            slot[{i}] += (uint64_t)({expr});")
    lines.append("        }")
    args = ", ".join(p.name for p in cmd.params)
    if spec.forward:
        lines.append(f"        PFN_{name} next = (PFN_{name})rec->dev->next[{index}];")
        lines.append(f"        if (next) next({args});")
    lines += ["        return;", "    }"]
    return "\n".join(lines) + "\n"


def c_constants(expr: str) -> str:
    """`expr` with each {VK_NAME} replaced by that registry enum value or flag bit."""
    vk = registry.load()

    def value(m: re.Match) -> str:
        for group in (*vk.enums.values(), *vk.bitmasks.values()):
            for f in getattr(group, "fields", None) or getattr(group, "flags", ()):
                if f.name == m.group(1):
                    return f"{f.value:#x}" if f.value >= 0 else str(f.value)
        raise ValueError(f"{m.group(1)} is not a registry enum value or flag")
    return re.sub(r"\{(VK_[A-Z0-9_]+)\}", value, expr)


def _dependency_params(cmd) -> list:
    return [p for p in cmd.params[1:] if p.type == "VkDependencyInfo" and p.pointer]


# The barrier arrays of a VkDependencyInfo: (count member, array member, whether image layouts apply).
_BARRIER_ARRAYS = (("memoryBarrierCount", "pMemoryBarriers", False),
                   ("bufferMemoryBarrierCount", "pBufferMemoryBarriers", False),
                   ("imageMemoryBarrierCount", "pImageMemoryBarriers", True))


def _dependency_path(name: str, index: int, spec: Recorded) -> str:
    """Fast path of a synchronization2 command: one D record (Recorded.dependencies), or Python."""
    vk = registry.load()
    cmd = vk.commands[name]
    bottom = next(f.value for f in vk.bitmasks["VkPipelineStageFlagBits2"].flags
                  if f.name == "VK_PIPELINE_STAGE_2_BOTTOM_OF_PIPE_BIT")
    values = {f.name: f.value for f in vk.enums["VkImageLayout"].fields}
    layouts = [values[n] for n in spec.python_layouts]
    lines = ["    tessera_cb *rec = tessera_cb_find((void *)commandBuffer);",
             "    if (rec && !rec->python_path) {",
             "        uint64_t barriers = 0, src = 0, dst = 0;",
             "        int python = 0;"]
    for p in _dependency_params(cmd):
        count = f"(size_t)({p.length})" if p.length else "1"
        lines += [f"        for (size_t d = 0; {p.name} && d < {count}; d++) {{",
                  f"            const VkDependencyInfo *info = &{p.name}[d];",
                  "            python |= info->pNext != NULL;"]
        for n, array, images in _BARRIER_ARRAYS:
            lines += [f"            for (uint32_t k = 0; info->{array} && k < info->{n}; k++) {{",
                      f"                python |= info->{array}[k].pNext != NULL;",
                      f"                src |= info->{array}[k].srcStageMask;",
                      f"                if (!(info->{array}[k].dstStageMask & {bottom:#x}ull))"
                      f" dst |= info->{array}[k].dstStageMask;"]
            for value in layouts if images else ():
                lines.append(f"                python |= info->{array}[k].oldLayout == {value} || "
                             f"info->{array}[k].newLayout == {value};")
            lines += ["                barriers++;", "            }"]
        lines.append("        }")
    args = ", ".join(p.name for p in cmd.params)
    lines += ["        if (!python) {",
              f"            uint64_t *slot = tessera_record(rec, {index}, 3, 0);",
              "            if (slot) { slot[0] = barriers; slot[1] = src; slot[2] = dst; }",
              f"            PFN_{name} next = (PFN_{name})rec->dev->next[{index}];",
              f"            if (next) next({args});",
              "            return;",
              "        }",
              "    }"]
    return "\n".join(lines) + "\n"


def formats_table(names: Iterable[str], recorded: dict[str, Recorded]) -> str:
    """C array of the format strings, by guard index ("" for commands not recorded)."""
    entries = []
    for name in names:
        spec = recorded.get(name)
        entries.append('"' + (",".join(formats(name, spec)) if spec else "") + '"')
    return "static const char *const tessera_record_formats[] = {\n    " + ",\n    ".join(entries) + "\n};\n"


# ---- Python: reading the records ------------------------------------------------------------
Applier = Callable[..., None]   # (owner, command buffer handle, *parameters after it [, tag=]) -> None


@dataclass
class _Layout:
    name: str
    tagged: bool
    codes: list[str]           # per parameter after the command buffer, without the tag
    folded: bool = False       # count and sums only
    nslots: int = field(init=False)      # slots after the tag: one per recorded parameter
    # Every parameter a recorded scalar: the slots (tag included) read with one unpack.
    scalars: struct.Struct | None = field(init=False)

    def __post_init__(self) -> None:
        self.nslots = sum(1 for c in self.codes if c != "-")
        plain = all(c in ("Q", "q") for c in self.codes)
        self.scalars = struct.Struct("<" + "Q" * self.tagged + "".join(self.codes)) if plain else None


class Recorder:
    """The Python side of one shim's recording: device tables, registration, applying records."""

    def __init__(self, ffi, lib, guard_names: dict[str, int], appliers: dict[str, Applier],
                 report: Callable[[str], None], failed: Callable[[str, str], None]) -> None:
        """`report(message)` logs a problem; `failed(command, where)` reports the exception being
        handled (HookErrors.report: once per command, with its traceback)."""
        self.ffi, self.lib, self.report, self.failed = ffi, lib, report, failed
        # TESSERA_C_RECORDING=0: no command buffer is registered, so every command takes its Python
        # hook (and every submit Python): for comparing the two paths.
        self.enabled = os.environ.get(SWITCH) != "0"
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: dict[int, threading.Event] = {}   # command buffer address -> its queued job
        self._worker: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._out = threading.local()
        self.guards = guard_names
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
            if codes[0] in ("F", "D"):   # plain slots: the count and the sums, or the dependency's three
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
            if name not in appliers:
                raise RuntimeError(f"{name} is recorded in C but no module applies its records")
            self.appliers[index] = appliers[name]

    def counts(self) -> str:
        """The records made in C and applied so far, per command (a folded record counts once)."""
        made = sorted((name, self.applied[index]) for name, index in self.guards.items() if self.applied[index])
        return "records made in C so far: " + (", ".join(f"{name} {n}" for name, n in made) or "none")

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

    def register(self, handle, device_table) -> None:
        if self.enabled and not self.lib.tessera_cb_register(handle, device_table):
            self.report("out of memory registering a command buffer: its commands take the Python path")

    def unregister(self, handle) -> None:
        self.lib.tessera_cb_unregister(handle)

    def reset(self, handle) -> None:
        """The buffer was reset or begun again: its records, Python path and submit state go."""
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

    # ---- deferred work: vkEndCommandBuffer's application on the worker -------------------------
    def _key(self, handle) -> int:
        return int(self.ffi.cast("uintptr_t", handle))

    def defer(self, handle, job: Callable[[], None]) -> None:
        """Run `job` (apply the buffer's records and its end hooks) on the worker, in order; a buffer
        with few records (INLINE_BYTES) is applied now, on the calling thread: handing it to the
        worker costs more than applying it (an event, a queue, a thread switch; and a begin of the
        same buffer waits for the worker)."""
        if self._pending_bytes(handle) <= INLINE_BYTES:
            job()
            return
        done = threading.Event()
        self._pending[self._key(handle)] = done
        if self._worker is None:
            with self._start_lock:
                if self._worker is None:
                    self._worker = threading.Thread(target=self._run, name="tessera-recorder", daemon=True)
                    self._worker.start()
        self._jobs.put((self._key(handle), done, job))

    def _run(self) -> None:
        while True:
            key, done, job = self._jobs.get()
            try:
                job()
            except Exception:   # the job reports its own failures; this is the last net
                self.failed("vkEndCommandBuffer", "applying a command buffer's records on the worker")
            finally:
                done.set()
                if self._pending.get(key) is done:
                    del self._pending[key]

    def _out_params(self) -> tuple:
        """tessera_cb_records' out-parameters, per thread (buffers are applied on several threads at
        once; every Python hook of a command buffer reads them, so they are not allocated per call)."""
        out = self._out.__dict__.get("params")
        if out is None:
            ffi = self.ffi
            out = self._out.params = (ffi.new("uint8_t **"), ffi.new("size_t *"), ffi.new("uint64_t *"))
        return out

    def _pending_bytes(self, handle) -> int:
        out = self._out_params()
        return out[1][0] if self.lib.tessera_cb_records(handle, *out) else 0

    def wait(self, handle) -> None:
        """Return once the job queued for `handle`, if any, has run."""
        done = self._pending.get(self._key(handle))
        if done is not None:
            done.wait()

    def settle(self) -> None:
        """Return once every job queued so far has run."""
        for done in list(self._pending.values()):
            done.wait()

    def apply(self, owner, handle) -> None:
        """Apply the records of `handle` so far, in order, then empty its arena."""
        lib = self.lib
        pdata, pused, pdropped = self._out_params()
        if not lib.tessera_cb_records(handle, pdata, pused, pdropped):
            return
        used, dropped = pused[0], pdropped[0]
        if used == 0 and dropped == 0:
            return
        base = pdata[0]
        try:
            if used:
                self._apply(owner, handle, base, used)
        finally:
            lib.tessera_cb_clear(handle)
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
                    else:   # S: a string
                        values.append(bytes(buf[extra:extra + n]).decode("utf-8", "replace"))
                    extra += (n + 7) & ~7
                pos += 8
            self._call(layout, index, owner, handle, values, tag)
            offset += size

    def _call(self, layout: _Layout, index: int, owner, handle, values, tag) -> None:
        self.applied[index] += 1
        try:
            if layout.tagged:
                self.appliers[index](owner, handle, *values, tag=tag)
            else:
                self.appliers[index](owner, handle, *values)
        except Exception:   # one bad record costs that record only
            self.failed(layout.name, "applying its record made in C; the call was forwarded")

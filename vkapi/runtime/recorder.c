/* ---- command-buffer arenas (tessera.vkapi.recorder; the record layout is its docstring) ----
   Static C: a lock-free hash map from command buffer to its arena and device table, the arenas, and
   the layer's t<tag> labels. The generated recording fast paths (vkapi/recorder_gen.py) call it. The
   generator #defines TESSERA_GUARD_COUNT and TESSERA_TAG_PREFIX (tessera.schemas.labels)
   before it and emits tessera_record_formats[] and tessera_tag_slots[]. Helpers that only one shim calls
   are marked unused (tests/vkapi/test_runtime_c.py compiles both shims with -Wall -Wextra -Werror). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef struct tessera_device {
    PFN_vkVoidFunction next[TESSERA_GUARD_COUNT];   /* next element's function per guarded command */
    PFN_vkCmdBeginDebugUtilsLabelEXT label_begin;   /* t<tag> labels (layer): debug utils, or else markers */
    PFN_vkCmdEndDebugUtilsLabelEXT label_end;
    PFN_vkCmdDebugMarkerBeginEXT marker_begin;
    PFN_vkCmdDebugMarkerEndEXT marker_end;
    PFN_vkVoidFunction queue_label_begin;            /* s<submitID> queue labels (layer, submits.py) */
    PFN_vkVoidFunction queue_label_end;
    int deferrable;                                  /* set by Python: buffers may begin and end in C (lifecycle.c) */
    uint64_t generation;                             /* set by Python: the device's Resources generation */
} tessera_device;

typedef struct tessera_cb {
    void *handle;
    tessera_device *dev;
    uint8_t *data;
    size_t used, cap;
    uint64_t dropped;            /* records lost to a failed allocation, reported by Python */
    int python_path;             /* set by Python: this buffer's commands take their Python hooks */
    int python_brackets;         /* set by Python: render pass begins and dispatches take their Python hooks */
    int submit_ok;               /* set by Python: a submit of this buffer may take the C path (submits.py) */
    int python_submits;          /* a label end recorded in C closed one opened before the buffer: submits take Python */
    int label_depth;             /* application labels opened minus closed in C (Recorded.label_depth) */
    int pass_in_c;               /* the open render pass was begun in C and no Python hook ran since */
    int pass_label;              /* ... and C opened its t<tag> label (the layer) */
    uint64_t submits;            /* times submitted since recorded (submits.py) */
    size_t last;                 /* offset of the last record, for folding */
    uint32_t last_index;         /* its command index; UINT32_MAX when the arena is empty */
    int whole;                   /* the arena holds every record since vkBeginCommandBuffer (none applied yet) */
    int primary;                 /* a primary command buffer (set at registration) */
    uint64_t pool;               /* its VkCommandPool (set at registration) */
    int deferred;                /* begin and end made in C that Python has yet to run (lifecycle.c) */
    uint32_t begin_flags;        /* ... the deferred begin's VkCommandBufferUsageFlags */
    int32_t end_result;          /* ... the deferred end's VkResult */
    uint64_t in_ledger;          /* the serial of the last ledger a submit of the buffer went into (submits.c) */
    uint64_t end_hash;           /* the hash of the recording an end made in C found kept (lifecycle.c) */
    uint64_t reported;           /* submits of the recording reported in C (the layer: reported_submits.c) */
    uint64_t serial;             /* the recording's: unique in the process, a new one at every begin and reset */
    struct tessera_attachment *attached;   /* bytes attached to this recording (lifecycle.c tessera_cb_attach) */
    int applied;                 /* Python applied the records, which stay: a secondary's, equal to a kept one */
    void **executed;             /* the handles of the secondaries the recording executes in records C made */
    uint32_t executed_count, executed_cap;   /* (lifecycle.c tessera_execute_in_c): its submits' readers read them */
} tessera_cb;

typedef struct { void *key; tessera_cb *cb; } tessera_slot;
typedef struct { size_t mask; tessera_slot slots[]; } tessera_table;

#define TESSERA_TOMBSTONE ((void *)(uintptr_t)1)
/* tessera_cb.deferred (lifecycle.c): a begin C made whose Python hooks have yet to run; the end that
   followed it, made in C too; a reset of the buffer's pool made in C before them. */
#define TESSERA_BEGUN_IN_C 1
#define TESSERA_ENDED_IN_C 2
#define TESSERA_RESET_IN_C 4
/* A submit of the recording C ended was read in Python without running its hooks (vkapi/lifecycle.py): they
   run only if something looks at the buffer before C begins it again. */
#define TESSERA_READ_IN_PYTHON 16
/* ... reported in C (the layer, reported_submits.c): Python keeps no Read of it; its hooks make one (Python's
   Recorder.reported_read). */
#define TESSERA_REPORTED_IN_C 32
/* An info struct's pointer to a copy in the record (the I code): set by Python before anything reads it. */
#define TESSERA_COPIED 8
static tessera_table *tessera_cbs;          /* read lock-free; replaced (never freed) when it grows */
static size_t tessera_cb_used;              /* live + tombstones, under tessera_cb_lock */
static uint64_t tessera_cb_version;         /* moved on by every registration and unregistration (lifecycle.c) */
static pthread_mutex_t tessera_cb_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tessera_tag;                /* the last tag of the last block handed to a thread */

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
int tessera_cb_register(void *handle, tessera_device *dev, int primary, uint64_t pool)
{
    /* on cache lines of its own: buffers recorded on different threads at once share none */
    tessera_cb *cb = aligned_alloc(64, (sizeof(tessera_cb) + 63) & ~(size_t)63);
    if (!cb) return 0;
    memset(cb, 0, sizeof(tessera_cb));
    cb->handle = handle;
    cb->dev = dev;
    cb->primary = primary;
    cb->pool = pool;
    cb->last_index = UINT32_MAX;
    static uint64_t registered;   /* the serials' high half: each tessera_cb's own */
    cb->serial = __atomic_add_fetch(&registered, 1, __ATOMIC_RELAXED) << 32;
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
        free(old->attached);
        free(old->executed);
        free(old);
    } else {
        tessera_table_put(t, handle, cb);
        tessera_cb_used++;
    }
    __atomic_add_fetch(&tessera_cb_version, 1, __ATOMIC_RELEASE);
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
            free(cb->attached);
            free(cb->executed);
            free(cb);
            __atomic_add_fetch(&tessera_cb_version, 1, __ATOMIC_RELEASE);
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

/* Room for one record: its slots, then `extra` bytes, zeroed (padding included: equal recordings have
   equal records, vkapi/replay.py); NULL (and counted) when memory ran out. */
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
    if (extra) memset(p + 8 + slots * 8, 0, size - 8 - slots * 8);
    return (uint64_t *)(p + 8);
}

/* Python: the records so far, none applied (pointer, byte count, records dropped); then tessera_cb_clear or
   tessera_cb_applied. */
int tessera_cb_records(void *handle, uint8_t **data, size_t *used, uint64_t *dropped)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return 0;
    *data = cb->data;
    *used = cb->applied ? 0 : cb->used;
    *dropped = cb->dropped;
    return 1;
}

/* Python: the records were applied; the arena is empty again. */
void tessera_cb_clear(void *handle)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (cb) { cb->used = 0; cb->dropped = 0; cb->last_index = UINT32_MAX; cb->whole = 0; cb->applied = 0; }
}

/* Python: the records were applied (tessera_cb_clear), but a secondary's whole recording that equals one whose copy C
   keeps (`kept`) keeps them, as what a vkCmdExecuteCommands recorded in C reads of it (its key, its tags:
   lifecycle.c tessera_execute_in_c), until the buffer is begun or reset again. */
uint64_t tessera_records_hash(const uint8_t *a, size_t n);
void tessera_cb_applied(void *handle, int kept)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return;
    if (kept && !cb->primary && cb->whole && !cb->dropped && cb->used) {
        cb->end_hash = tessera_records_hash(cb->data, cb->used);
        cb->applied = 1;
        return;
    }
    tessera_cb_clear(handle);
}

/* Python: whether the arena holds the whole recording since the buffer was begun (nothing of it
   applied yet, nothing dropped): a recording vkapi/replay.py may match against an earlier one. */
int tessera_cb_whole(void *handle)
{
    tessera_cb *cb = tessera_cb_find(handle);
    return cb && cb->whole && !cb->dropped && !cb->applied;
}

static void tessera_cb_begin(tessera_cb *cb)
{
    /* a new recording: a serial of its own (the high half says which tessera_cb), what was attached goes */
    cb->serial = (cb->serial & ~(uint64_t)0xFFFFFFFF) | ((cb->serial + 1) & 0xFFFFFFFF);
    free(__atomic_exchange_n(&cb->attached, NULL, __ATOMIC_ACQ_REL));
    cb->used = 0; cb->dropped = 0; cb->last_index = UINT32_MAX; cb->python_path = 0; cb->python_brackets = 0;
    cb->submit_ok = 0; cb->submits = 0; cb->python_submits = 0; cb->label_depth = 0; cb->pass_in_c = 0;
    cb->pass_label = 0; cb->reported = 0; cb->executed_count = 0; cb->applied = 0;
    cb->whole = 1;
}

/* Python: the buffer was reset (or begun again): no records, Python path off, nothing submitted, and
   nothing made in C left for Python to run (lifecycle.c). */
void tessera_cb_reset(void *handle)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return;
    tessera_cb_begin(cb);
    __atomic_store_n(&cb->deferred, 0, __ATOMIC_RELEASE);
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

/* Python: while on, the buffer's render pass begins and dispatches take their Python hooks (and so
   the ends of those passes); its draws and the rest stay in C (the driver's measured counters, which
   put a query around each pass and dispatch: icd/measured_counters.py). */
void tessera_cb_set_python_brackets(void *handle, int on)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (cb) cb->python_brackets = on;
}

/* Tags come from one process-wide counter starting at 1, handed to each thread in blocks: threads
   recording at once would otherwise write the counter's cache line once per workload. A thread's tags
   increase; in a program whose workloads are all tagged on one thread they are 1, 2, 3, ... */
#define TESSERA_TAG_BLOCK 64
static __thread uint64_t tessera_tag_next, tessera_tag_end;   /* the thread's block: [next, end) */

uint64_t tessera_next_tag(void)
{
    if (tessera_tag_next == tessera_tag_end) {
        tessera_tag_next = __atomic_fetch_add(&tessera_tag, TESSERA_TAG_BLOCK, __ATOMIC_RELAXED) + 1;
        tessera_tag_end = tessera_tag_next + TESSERA_TAG_BLOCK;
    }
    return tessera_tag_next++;
}

/* A tag's t<tag> label (tessera.schemas.labels.tag_label: the prefix, then the number in decimal) into `out`,
   which has room for TESSERA_TAG_TEXT bytes; its length, the NUL not counted. Written out by hand: snprintf
   cost ~750 instructions per label, and each workload gets one label in each shim. */
#define TESSERA_TAG_TEXT (sizeof TESSERA_TAG_PREFIX + 20)
static inline size_t tessera_tag_text(char *out, uint64_t tag)
{
    char digits[20];
    size_t n = 0, prefix = sizeof TESSERA_TAG_PREFIX - 1;
    do {
        digits[n++] = (char)('0' + tag % 10);
        tag /= 10;
    } while (tag);
    memcpy(out, TESSERA_TAG_PREFIX, prefix);
    for (size_t i = 0; i < n; i++) out[prefix + i] = digits[n - 1 - i];
    out[prefix + n] = '\0';
    return prefix + n;
}

/* The layer's t<tag> label around a workload recorded in C (tagging.py's Labeller in C). */
__attribute__((unused)) static int tessera_push_tag(VkCommandBuffer commandBuffer, tessera_device *dev, uint64_t tag)
{
    char name[TESSERA_TAG_TEXT];
    tessera_tag_text(name, tag);
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

/* A string recorded as a tag (Recorded.tag_labels): TESSERA_TAG_BIT | its number when `s` is a
   t<tag> label exactly as tessera_tag_text writes it (no sign, no leading zero, below 2^63),
   else 0 (recorded as text). */
#define TESSERA_TAG_BIT (1ull << 63)
__attribute__((unused)) static uint64_t tessera_tag_label(const char *s)
{
    size_t prefix = sizeof TESSERA_TAG_PREFIX - 1;
    if (strncmp(s, TESSERA_TAG_PREFIX, prefix) != 0) return 0;
    const char *d = s + prefix;
    if (*d < '0' || *d > '9' || (d[0] == '0' && d[1] != '\0')) return 0;
    uint64_t value = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || value > (TESSERA_TAG_BIT - 1 - (uint64_t)(*d - '0')) / 10) return 0;
        value = value * 10 + (uint64_t)(*d - '0');
    }
    return TESSERA_TAG_BIT | value;
}

/* The tag slots of a record, masked out of comparisons: `*first` and how many (0: none). A tagged record's first slot
   (tessera_tag_slots), a label's string slot when it holds a tag (TESSERA_TAG_BIT), and an execute record's
   secondaries' tags, after their entries (lifecycle.c tessera_execute_in_c: count, total, then per secondary its
   handle, kept product's hash and size and tag count, then the tags). */
#define TESSERA_EXECUTE_ENTRY 4   /* slots per secondary of an execute record */
static inline size_t tessera_tag_span(const uint8_t *record, size_t *first)
{
    uint32_t index = ((const uint32_t *)record)[0];
    if (index >= TESSERA_GUARD_COUNT) return 0;
    const uint64_t *slots = (const uint64_t *)(record + 8);
    char code = tessera_record_formats[index][0];
    if (code == 'X') {
        uint64_t room = (((const uint32_t *)record)[1] - 8) / 8;   /* the caller checked the size is at least 8 */
        if (room < 2 || slots[0] > room || slots[1] > room || 2 + TESSERA_EXECUTE_ENTRY * slots[0] + slots[1] > room)
            return 0;
        *first = 2 + TESSERA_EXECUTE_ENTRY * (size_t)slots[0];
        return (size_t)slots[1];
    }
    int slot = tessera_tag_slots[index];
    if (slot < 0 || (code != 'T' && !(slots[slot] & TESSERA_TAG_BIT))) return 0;
    *first = (size_t)slot;
    return 1;
}

/* A record's `span` tags from slot `first` into `out` (a label's without TESSERA_TAG_BIT). */
static inline void tessera_span_tags(const uint8_t *record, size_t first, size_t span, uint64_t *out)
{
    for (size_t k = 0; k < span; k++) out[k] = ((const uint64_t *)(record + 8))[first + k] & ~TESSERA_TAG_BIT;
}

/* Python (vkapi/replay.py): the tags of the records `a` (`n` bytes), in record order, into `tags`
   (room for `max`). Returns how many, or -1 when there are more than `max` or a record is damaged. */
long tessera_records_tags(const uint8_t *a, size_t n, uint64_t *tags, size_t max)
{
    size_t count = 0;
    for (size_t at = 0; at + 8 <= n;) {
        uint32_t size = ((const uint32_t *)(a + at))[1];
        if (size < 8 || at + size > n) return -1;
        size_t first = 0, span = tessera_tag_span(a + at, &first);
        if (span > max - count) return -1;
        tessera_span_tags(a + at, first, span, tags + count);
        count += span;
        at += size;
    }
    return (long)count;
}

/* Python (vkapi/replay.py): a 64-bit hash of records `a` (`n` bytes) but their tags, so that recordings equal
   but for their tags hash alike (a tag's word counts as 0); 0 when a record is damaged. FNV-1a's step over
   8-byte words, in four lanes taking every fourth word: one chain of multiplies would wait on each. */
uint64_t tessera_records_hash(const uint8_t *a, size_t n)
{
    uint64_t h[4] = { 0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9ce484222325cbf2ull, 0x2325cbf29ce48422ull };
    size_t word = 0;
    for (size_t at = 0; at + 8 <= n;) {
        uint32_t size = ((const uint32_t *)(a + at))[1];
        if (size < 8 || at + size > n || size % 8) return 0;
        size_t first = 0, span = tessera_tag_span(a + at, &first);
        size_t skip_from = span ? 8 + 8 * first : SIZE_MAX, skip_to = span ? skip_from + 8 * span : 0;
        for (size_t w = 0; w < size; w += 8, word++) {
            uint64_t value = 0;
            if (w < skip_from || w >= skip_to) memcpy(&value, a + at + w, 8);
            h[word & 3] = (h[word & 3] ^ value) * 0x100000001b3ull;
        }
        at += size;
    }
    return (h[0] ^ (h[1] * 0x9e3779b97f4a7c15ull)) ^ ((h[2] ^ (h[3] * 0x9e3779b97f4a7c15ull)) * 0x100000001b3ull);
}

/* Python (vkapi/replay.py): whether records `a` equal records `b` (`n` bytes each) but for their tags;
   if so, `a`'s tags into `tags` as tessera_records_tags does and their count, else -1. `tags` NULL: the
   count only (lifecycle.c). */
long tessera_records_same(const uint8_t *a, const uint8_t *b, size_t n, uint64_t *tags, size_t max)
{
    size_t count = 0;
    for (size_t at = 0; at + 8 <= n;) {
        uint32_t size = ((const uint32_t *)(a + at))[1];
        if (size < 8 || at + size > n || memcmp(a + at, b + at, 8) != 0) return -1;
        size_t first = 0, other = 0, span = tessera_tag_span(a + at, &first);
        if (span) {
            size_t from = 8 + 8 * first, to = from + 8 * span;
            if (tessera_tag_span(b + at, &other) != span || other != first || (tags && span > max - count)
                    || memcmp(a + at + 8, b + at + 8, from - 8) != 0 || memcmp(a + at + to, b + at + to, size - to) != 0)
                return -1;
            if (tags) tessera_span_tags(a + at, first, span, tags + count);
            count += span;
        } else if (memcmp(a + at, b + at, size) != 0) {
            return -1;
        }
        at += size;
    }
    return (long)count;
}

const char *tessera_record_format(int index)
{
    return index >= 0 && index < TESSERA_GUARD_COUNT ? tessera_record_formats[index] : NULL;
}

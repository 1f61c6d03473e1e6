/* ---- submits recorded in C (tessera.vkapi.submits; the ledger's layout is its docstring) ----
   Static C: the process-wide ledger, submitIDs, frames, queue labels in the ledger, and the s<submitID>
   queue label of a wrapped submit. The generated submit fast paths (vkapi/submits.py) call it. After
   recorder.c; the generator #defines TESSERA_SUBMIT_FORMAT and TESSERA_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT
   before it. Helpers that only one shim calls
   are marked unused (tests/vkapi/test_runtime_c.py compiles both shims with -Wall -Wextra -Werror). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef struct { uint8_t *data; size_t used, cap; uint64_t dropped; uint64_t serial; } tessera_ledger;
static tessera_ledger tessera_ledger_a = {.serial = 1}, tessera_ledger_b;
/* Ledgers taken so far, and the serial of the last one Python has finished reading (tessera_ledger_read):
   a command buffer with a submit in a ledger after it is not begun in C (lifecycle.c). */
static uint64_t tessera_ledgers_taken, tessera_ledger_read_up_to;
static tessera_ledger *tessera_ledger_active = &tessera_ledger_a, *tessera_ledger_spare = &tessera_ledger_b;
static pthread_mutex_t tessera_ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tessera_submit_id;     /* submitIDs, shared with Python (tessera_next_submit) */
static uint64_t tessera_frame;         /* the frame a submit belongs to, set by Python */
static int64_t tessera_python_reasons; /* > 0: every submit takes the Python path */
static int tessera_c_submits = 1;      /* 0 (TESSERA_C_SUBMITS=0): submits and queue labels take Python */
/* The driver's licence to place submits in C (placed_submits.c): granted by Python while its timeline has no
   job queued or running and the ledger is empty, given up by any record appended here (Python has a job
   then). Written under the ledger lock; read without it by the wait guards. */
static int tessera_placing;
/* Called first by every record appended (under the lock): the driver writes the queue labels it kept in C
   (placed_submits.c) before the record, so the ledger keeps call order. NULL: nothing kept. */
static void (*tessera_ledger_before)(void);

static inline uint64_t tessera_clock(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Append one record of `slots` u64; NULL (and counted) when memory ran out. Under the lock. */
static uint64_t *tessera_ledger_record(size_t slots)
{
    __atomic_store_n(&tessera_placing, 0, __ATOMIC_RELEASE);   /* Python has a job: the licence ends */
    if (tessera_ledger_before) tessera_ledger_before();
    tessera_ledger *l = tessera_ledger_active;
    size_t size = slots * 8;
    if (l->used + size > l->cap) {
        size_t cap = l->cap ? l->cap : 16384;
        while (cap < l->used + size) cap *= 2;
        uint8_t *data = realloc(l->data, cap);
        if (!data) { l->dropped++; return NULL; }
        l->data = data;
        l->cap = cap;
    }
    uint64_t *p = (uint64_t *)(l->data + l->used);
    l->used += size;
    return p;
}

/* Python: the records so far, or NULL when there are none; give it back with tessera_ledger_give_back. */
tessera_ledger *tessera_ledger_take(void)
{
    pthread_mutex_lock(&tessera_ledger_lock);
    tessera_ledger *l = tessera_ledger_active;
    if ((l->used == 0 && l->dropped == 0) || tessera_ledger_spare == NULL) {
        pthread_mutex_unlock(&tessera_ledger_lock);
        return NULL;
    }
    tessera_ledger_active = tessera_ledger_spare;
    tessera_ledger_spare = NULL;
    tessera_ledgers_taken++;
    tessera_ledger_active->serial = tessera_ledgers_taken + 1;
    pthread_mutex_unlock(&tessera_ledger_lock);
    return l;
}

/* Python: every submit of the ledger with this serial is read (and its buffers' deferred hooks run). */
void tessera_ledger_read(uint64_t serial)
{
    uint64_t read = __atomic_load_n(&tessera_ledger_read_up_to, __ATOMIC_RELAXED);
    while (serial > read && !__atomic_compare_exchange_n(&tessera_ledger_read_up_to, &read, serial, 0,
                                                         __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
}

void tessera_ledger_give_back(tessera_ledger *l)
{
    l->used = 0;
    l->dropped = 0;
    pthread_mutex_lock(&tessera_ledger_lock);
    tessera_ledger_spare = l;
    pthread_mutex_unlock(&tessera_ledger_lock);
}

uint64_t tessera_next_submit(void) { return __atomic_add_fetch(&tessera_submit_id, 1, __ATOMIC_RELAXED); }
void tessera_set_frame(uint64_t frame) { __atomic_store_n(&tessera_frame, frame, __ATOMIC_RELAXED); }
uint64_t tessera_get_frame(void) { return __atomic_load_n(&tessera_frame, __ATOMIC_RELAXED); }
void tessera_python_reason(int64_t delta) { __atomic_add_fetch(&tessera_python_reasons, delta, __ATOMIC_RELAXED); }
void tessera_set_c_submits(int on) { __atomic_store_n(&tessera_c_submits, on, __ATOMIC_RELAXED); }

/* Each queue's depth of the labels its ledger records hold, and the layer's C keeps (vkQueueBeginDebugUtilsLabelEXT
   less ...End), under the ledger lock: the layer wraps a submit on a queue inside labels in s<submitID> (its
   ANNEX frames say each workload's label stack, and the merge finds them by that label). Past
   TESSERA_LABELLED_QUEUES queues, every queue it does not know counts as labelled. */
#define TESSERA_LABELLED_QUEUES 64
static struct { uint64_t queue; uint64_t depth; } tessera_labelled[TESSERA_LABELLED_QUEUES];
static size_t tessera_labelled_queues;
static int tessera_labelled_full;

/* (the ledger locked) How deep `queue` is in the labels the ledger recorded (and those the layer's C keeps);
   UINT64_MAX when it is not known (past TESSERA_LABELLED_QUEUES queues). */
__attribute__((unused)) static uint64_t tessera_queue_depth_locked(uint64_t queue)
{
    for (size_t i = 0; i < tessera_labelled_queues; i++)
        if (tessera_labelled[i].queue == queue) return tessera_labelled[i].depth;
    return tessera_labelled_full ? UINT64_MAX : 0;
}

__attribute__((unused)) static int tessera_queue_labelled_locked(uint64_t queue)
{
    return tessera_queue_depth_locked(queue) > 0;
}

/* The submit guard's question, before it takes the ledger: without the lock while no label was ever recorded (the
   count only grows, under the lock; the application orders its queue's labels before its submits). */
__attribute__((unused)) static int tessera_queue_labelled(VkQueue queue)
{
    if (!__atomic_load_n(&tessera_labelled_queues, __ATOMIC_ACQUIRE) && !__atomic_load_n(&tessera_labelled_full,
                                                                                          __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&tessera_ledger_lock);
    int labelled = tessera_queue_labelled_locked((uint64_t)(uintptr_t)queue);
    pthread_mutex_unlock(&tessera_ledger_lock);
    return labelled;
}

/* (the ledger locked) A label's begin (`begin`) or end recorded on `queue`. */
static void tessera_queue_label_depth(uint64_t queue, int begin)
{
    size_t i = 0;
    while (i < tessera_labelled_queues && tessera_labelled[i].queue != queue) i++;
    if (i == tessera_labelled_queues) {
        if (!begin) return;   /* an end without a begin: tolerated, as by the layer's Python */
        if (i == TESSERA_LABELLED_QUEUES) { __atomic_store_n(&tessera_labelled_full, 1, __ATOMIC_RELEASE); return; }
        tessera_labelled[i].queue = queue;
        tessera_labelled[i].depth = 0;
        __atomic_store_n(&tessera_labelled_queues, tessera_labelled_queues + 1, __ATOMIC_RELEASE);
    }
    if (begin) tessera_labelled[i].depth++;
    else if (tessera_labelled[i].depth) tessera_labelled[i].depth--;
}

/* (the ledger locked) One queue label record: its kind (LABEL_BEGIN, LABEL_END), the queue, the name's `n` bytes. */
static void tessera_ledger_label_record(uint64_t queue, uint64_t kind, const char *name, size_t n)
{
    size_t slots = 3 + (n + 7) / 8;
    uint64_t *r = tessera_ledger_record(slots);
    if (r) {
        r[0] = (uint64_t)(slots * 8) | (kind << 48);
        r[1] = queue;
        r[2] = n;
        if (n) memcpy(r + 3, name, n);
    }
}

/* A queue label in the ledger (kind LABEL_BEGIN with its name, or LABEL_END), counted in its queue's depth. */
__attribute__((unused)) static void tessera_ledger_label(VkQueue queue, uint64_t kind, const char *name)
{
    pthread_mutex_lock(&tessera_ledger_lock);
    tessera_queue_label_depth((uint64_t)(uintptr_t)queue, name != NULL);
    tessera_ledger_label_record((uint64_t)(uintptr_t)queue, kind, name, name ? strlen(name) : 0);
    pthread_mutex_unlock(&tessera_ledger_lock);
}

/* Python: whether the buffer's submit may take the C path (decided at vkEndCommandBuffer). */
void tessera_cb_set_submit_ok(void *handle, int ok)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (cb) cb->submit_ok = ok && !cb->python_submits && cb->label_depth == 0;
}

/* Python (the Python path): count a submit of the buffer, as the C path does. */
void tessera_cb_count_submit(void *handle)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (cb) cb->submits++;
}

typedef struct tessera_chain_node { int32_t sType; const struct tessera_chain_node *pNext; } tessera_chain_node;

/* The first struct of `chain` with this sType, or NULL. */
static const void *tessera_chain_find(const void *chain, int32_t stype)
{
    for (const tessera_chain_node *s = chain; s; s = s->pNext)
        if (s->sType == stype) return s;
    return NULL;
}

__attribute__((unused)) static int tessera_has_frame_boundary(const void *chain)
{
    return tessera_chain_find(chain, TESSERA_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT) != NULL;
}

/* A vkQueueSubmit batch's semaphore value (VkTimelineSemaphoreSubmitInfo in its chain, `values` its wait or
   signal array of `count`): the j-th, or 0 where the chain gives none (a binary semaphore's is ignored). */
__attribute__((unused)) static uint64_t tessera_semaphore_value(const uint64_t *values, uint32_t count, uint32_t j)
{
    return values && j < count ? values[j] : 0;
}

/* The s<submitID> queue label of a wrapped submit, through the device's next functions. */
__attribute__((unused)) static int tessera_queue_push(VkQueue queue, tessera_device *dev, uint64_t submit_id)
{
    PFN_vkQueueBeginDebugUtilsLabelEXT begin = (PFN_vkQueueBeginDebugUtilsLabelEXT)dev->queue_label_begin;
    if (!begin || !dev->queue_label_end) return 0;
    char name[24];
    snprintf(name, sizeof name, TESSERA_SUBMIT_FORMAT, (unsigned long long)submit_id);
    VkDebugUtilsLabelEXT label = {0};
    label.sType = 1000128002;   /* VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT */
    label.pLabelName = name;
    begin(queue, &label);
    return 1;
}

/* ---- recordings begun and ended in C (tessera.vkapi.lifecycle: the design is its docstring) ----
   Static C, after recorder.c and submits.c: the products Python keeps (a copy of each whole recording
   whose product vkapi/replay.py can restore), vkBeginCommandBuffer and vkEndCommandBuffer made without
   Python, and what Python reads of them. The generated guards of the two commands call
   tessera_begin_in_c and tessera_end_in_c first (vkapi/lifecycle.py). */

/* Bytes a shim attaches to a kept product under a key of its own (the driver: a native placement plan per
   command buffer and GPU, placed_submits.c); they go with the product. */
typedef struct tessera_attachment {
    struct tessera_attachment *next;
    uint64_t key[2];
    size_t size;
    /* (the layer, reported_submits.c) the licence under which this report template's WORKLOADS last went out in
       full, and those workloads' tags: a recording of it submitted for the first time under that licence is
       described as them again (RECORDED_AGAIN). Written with the ledger locked; only on a product's attachments
       (a buffer's own, recorder.c, never has them: it frees them with free()). */
    uint64_t sent_in;
    uint32_t sent_count;
    uint64_t *sent_tags;
    uint8_t data[];                    /* 8-byte aligned */
} tessera_attachment;
/* Per product, the newest kept: one per buffer of a submit C handles (equal recordings in several buffers share
   a product, and each buffer has its own). */
#define TESSERA_ATTACHMENTS TESSERA_IN_C_MAX
/* One kept recording: the records as C made them, on one device, while its Resources generation holds. */
typedef struct tessera_product {
    struct tessera_product *next;      /* in its bucket */
    const tessera_device *dev;
    uint64_t hash, generation;
    size_t size;
    uint64_t submit_ok;                /* what Python decided for its submits at its end (submits.py) */
    tessera_attachment *attached;      /* newest first, at most TESSERA_ATTACHMENTS */
    uint8_t data[];                    /* 8-byte aligned, as the records' slots are read */
} tessera_product;
_Static_assert(offsetof(tessera_attachment, data) % 8 == 0, "attachments are read as 8-byte words");
_Static_assert(offsetof(tessera_product, data) % 8 == 0, "records are read as 8-byte slots");

#define TESSERA_PRODUCT_BUCKETS 1024   /* a power of two */
static tessera_product *tessera_products[TESSERA_PRODUCT_BUCKETS];

/* What recording threads write, striped: each thread takes one stripe (a cache line) so that threads
   recording at once share no line. A thread reading the kept products locks its stripe's mutex; Python,
   changing them, locks every stripe. The counts (for TESSERA_LOG=info) are the stripes' sums. */
#define TESSERA_STRIPES 16
typedef struct {
    pthread_mutex_t products;
    uint64_t begun_in_c, ended_in_c, pools_reset_in_c;
} __attribute__((aligned(64))) tessera_stripe;
static tessera_stripe tessera_stripes[TESSERA_STRIPES] = {
    [0 ... TESSERA_STRIPES - 1] = {.products = PTHREAD_MUTEX_INITIALIZER}};
static unsigned tessera_stripes_taken;
static __thread tessera_stripe *tessera_my_stripe_cache;

static tessera_stripe *tessera_my_stripe(void)
{
    if (!tessera_my_stripe_cache)
        tessera_my_stripe_cache =
            &tessera_stripes[__atomic_fetch_add(&tessera_stripes_taken, 1, __ATOMIC_RELAXED) % TESSERA_STRIPES];
    return tessera_my_stripe_cache;
}

static void tessera_products_lock_all(void)
{
    for (int i = 0; i < TESSERA_STRIPES; i++) pthread_mutex_lock(&tessera_stripes[i].products);
}

static void tessera_products_unlock_all(void)
{
    for (int i = TESSERA_STRIPES - 1; i >= 0; i--) pthread_mutex_unlock(&tessera_stripes[i].products);
}

static tessera_product **tessera_product_bucket(const tessera_device *dev, uint64_t hash, size_t size)
{
    uint64_t key = hash ^ ((uint64_t)(uintptr_t)dev * 0x9E3779B97F4A7C15ull) ^ size;
    return &tessera_products[(key >> 20) & (TESSERA_PRODUCT_BUCKETS - 1)];
}
static tessera_attachment *tessera_attachment_new(uint64_t key0, uint64_t key1, const uint8_t *data, size_t n)
{
    tessera_attachment *a = malloc(sizeof(tessera_attachment) + n);
    if (!a) return NULL;
    a->next = NULL;
    a->key[0] = key0;
    a->key[1] = key1;
    a->size = n;
    a->sent_in = 0;
    a->sent_count = 0;
    a->sent_tags = NULL;
    memcpy(a->data, data, n);
    return a;
}

static void tessera_attachment_free(tessera_attachment *a)
{
    if (!a) return;
    free(a->sent_tags);
    free(a);
}

static void tessera_product_free(tessera_product *p)
{
    for (tessera_attachment *a = p->attached, *next; a; a = next) {
        next = a->next;
        tessera_attachment_free(a);
    }
    free(p);
}

/* Python (vkapi/replay.py): keep the records `data` (`size` bytes, hashed `hash`) of the whole recording
   just applied to the buffer `handle`, whose product Python keeps, until tessera_product_drop; with the
   buffer's device and its submit decision. 0 when not kept (out of memory). */
int tessera_product_keep(void *handle, const uint8_t *data, size_t size, uint64_t hash, uint64_t generation)
{
    const tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return 0;
    const tessera_device *dev = cb->dev;
    tessera_product *p = malloc(sizeof(tessera_product) + size);
    if (!p) return 0;
    p->dev = dev;
    p->hash = hash;
    p->generation = generation;
    p->size = size;
    p->submit_ok = cb->submit_ok;
    p->attached = NULL;
    memcpy(p->data, data, size);
    tessera_products_lock_all();
    tessera_product **bucket = tessera_product_bucket(dev, hash, size);
    for (tessera_product **link = bucket; *link; link = &(*link)->next)
        if ((*link)->dev == dev && (*link)->hash == hash && (*link)->size == size) {
            tessera_product *old = *link;   /* the same key kept again: replaced */
            *link = old->next;
            tessera_product_free(old);
            break;
        }
    p->next = *bucket;
    *bucket = p;
    tessera_products_unlock_all();
    return 1;
}

/* Python: Python no longer keeps the product of the recording kept under this key. */
void tessera_product_drop(const tessera_device *dev, uint64_t hash, size_t size)
{
    tessera_products_lock_all();
    for (tessera_product **link = tessera_product_bucket(dev, hash, size); *link; link = &(*link)->next)
        if ((*link)->dev == dev && (*link)->hash == hash && (*link)->size == size) {
            tessera_product *p = *link;
            *link = p->next;
            tessera_product_free(p);
            break;
        }
    tessera_products_unlock_all();
}
/* Python: attach `size` bytes under (key0, key1) to the product kept under this key and `generation` (one
   attached under the same key before is replaced; past TESSERA_ATTACHMENTS the oldest goes). 0 when no such
   product is kept (Python dropped it, or kept another since) or memory ran out. */
int tessera_product_attach(const tessera_device *dev, uint64_t hash, size_t size, uint64_t generation,
                           uint64_t key0, uint64_t key1, const uint8_t *data, size_t n)
{
    tessera_attachment *a = tessera_attachment_new(key0, key1, data, n);
    if (!a) return 0;
    int kept = 0;
    tessera_products_lock_all();
    for (tessera_product *p = *tessera_product_bucket(dev, hash, size); p; p = p->next) {
        if (p->dev != dev || p->hash != hash || p->size != size || p->generation != generation) continue;
        a->next = p->attached;
        p->attached = a;
        kept = 1;
        size_t count = 1;
        for (tessera_attachment **link = &a->next; *link;) {
            tessera_attachment *old = *link;
            if ((old->key[0] == key0 && old->key[1] == key1) || count == TESSERA_ATTACHMENTS) {
                *link = old->next;
                tessera_attachment_free(old);
            } else {
                link = &old->next;
                count++;
            }
        }
        break;
    }
    tessera_products_unlock_all();
    if (!kept) tessera_attachment_free(a);
    return kept;
}
/* Python: attach `n` bytes under `key` to the recording `serial` of the buffer `handle` (tessera_cb.serial, which the
   ledger records with each submit: the driver, a placement plan of a buffer submitted again); one per recording,
   a later one replaces it, the next begin or reset drops it. 0 when the buffer holds another recording now. */
int tessera_cb_attach(void *handle, uint64_t serial, uint64_t key, const uint8_t *data, size_t n)
{
    tessera_attachment *a = tessera_attachment_new(serial, key, data, n);
    if (!a) return 0;
    int attached = 0;
    pthread_mutex_lock(&tessera_cb_lock);   /* not unregistered meanwhile */
    tessera_cb *cb = tessera_cb_find(handle);
    if (cb) {
        pthread_mutex_lock(&tessera_ledger_lock);   /* where submits read it */
        attached = __atomic_load_n(&cb->serial, __ATOMIC_ACQUIRE) == serial;
        if (attached) a = __atomic_exchange_n(&cb->attached, a, __ATOMIC_ACQ_REL);   /* the one it replaces */
        pthread_mutex_unlock(&tessera_ledger_lock);
    }
    pthread_mutex_unlock(&tessera_cb_lock);
    tessera_attachment_free(a);   /* replaced, or refused */
    return attached;
}
/* (the ledger locked) What is attached to `cb`'s recording under `key`, or NULL. A begin racing with an attach may
   leave one of an earlier recording: its serial says so. */
__attribute__((unused)) static const tessera_attachment *tessera_cb_attachment(const tessera_cb *cb, uint64_t key)
{
    const tessera_attachment *a = __atomic_load_n(&cb->attached, __ATOMIC_ACQUIRE);
    return a && a->key[0] == __atomic_load_n(&cb->serial, __ATOMIC_ACQUIRE) && a->key[1] == key ? a : NULL;
}
/* (the thread's stripe locked) What is attached to `p` under (key0, key1), or NULL. */
__attribute__((unused)) static const tessera_attachment *tessera_attachment_find(const tessera_product *p,
                                                                                 uint64_t key0, uint64_t key1)
{
    for (const tessera_attachment *a = p->attached; a; a = a->next)
        if (a->key[0] == key0 && a->key[1] == key1) return a;
    return NULL;
}

/* (the thread's stripe locked) The kept recording equal to `cb`'s whole recording (hashed `hash`)
   but for its tags, made on the same device while nothing it names changed; NULL when none is kept. The
   recording's tags into `tags` (at most `max`; NULL: not wanted), their number into `*count`. */
static const tessera_product *tessera_product_equal(const tessera_cb *cb, uint64_t hash, uint64_t *tags, size_t max,
                                                    long *count)
{
    uint64_t generation = __atomic_load_n(&cb->dev->generation, __ATOMIC_ACQUIRE);
    for (const tessera_product *p = *tessera_product_bucket(cb->dev, hash, cb->used); p; p = p->next)
        if (p->dev == cb->dev && p->hash == hash && p->size == cb->used && p->generation == generation
                && (*count = tessera_records_same(cb->data, p->data, cb->used, tags, max)) >= 0)
            return p;
    return NULL;
}

/* The submit decision of the kept recording equal to `cb`'s whole recording but for its tags
   (tessera_product_equal); -1 when none is kept. The recording's hash kept in `cb->end_hash`: its submits
   are read by it (tessera_cb_read_product) and nothing changes the records before C begins the buffer again. */
static int tessera_product_match(tessera_cb *cb)
{
    uint64_t hash = cb->end_hash = tessera_records_hash(cb->data, cb->used);
    if (!hash) return -1;
    long count;
    pthread_mutex_t *lock = &tessera_my_stripe()->products;
    pthread_mutex_lock(lock);
    const tessera_product *p = tessera_product_equal(cb, hash, NULL, 0, &count);
    int found = p ? p->submit_ok != 0 : -1;
    pthread_mutex_unlock(lock);
    return found;
}

/* Whether C may reset the buffer (`deferred` its deferred bits): a buffer of a device whose hooks may run
   later (`deferrable`), with no records left for Python to apply (but those of a recording ended in C, which
   nobody submitted: dropped) and no submit in a ledger Python has yet to read (of the buffer, or for a
   secondary, of a primary executing it: tessera_cb_submitted). */
static int tessera_resettable_in_c(const tessera_cb *cb, int deferred)
{
    if (!cb->dev->deferrable) return 0;
    if ((cb->used || cb->dropped) && !(deferred & TESSERA_ENDED_IN_C) && !cb->applied) return 0;
    return __atomic_load_n(&cb->in_ledger, __ATOMIC_ACQUIRE)
           <= __atomic_load_n(&tessera_ledger_read_up_to, __ATOMIC_ACQUIRE);
}

/* The guard of vkBeginCommandBuffer: 1 when C made the call (its result in `*result`), 0 when Python
   must. C makes it for a buffer C may reset, with no chained structure. */
static int tessera_begin_in_c(VkCommandBuffer commandBuffer, const VkCommandBufferBeginInfo *info, int index,
                              VkResult *result)
{
    tessera_cb *cb = tessera_cb_find((void *)commandBuffer);
    if (!cb || !info || info->pNext) return 0;
    int deferred = __atomic_load_n(&cb->deferred, __ATOMIC_ACQUIRE);
    if (!tessera_resettable_in_c(cb, deferred)) return 0;
    PFN_vkBeginCommandBuffer next = (PFN_vkBeginCommandBuffer)cb->dev->next[index];
    if (!next) return 0;
    *result = next(commandBuffer, info);
    if (*result == 0) {   /* VK_SUCCESS */
        tessera_cb_begin(cb);
        cb->begin_flags = info->flags;
        __atomic_store_n(&cb->deferred, (deferred & TESSERA_RESET_IN_C) | TESSERA_BEGUN_IN_C, __ATOMIC_RELEASE);
        __atomic_add_fetch(&tessera_my_stripe()->begun_in_c, 1, __ATOMIC_RELAXED);
    }
    return 1;
}

/* The guard of vkEndCommandBuffer: 1 when C made the call, 0 when Python must. C makes it for a buffer C
   began whose whole recording C made (no Python hook ran since the begin) and equals one whose product
   Python keeps: Python then finds that product when it runs the hooks (vkapi/replay.py). */
static int tessera_end_in_c(VkCommandBuffer commandBuffer, int index, VkResult *result)
{
    tessera_cb *cb = tessera_cb_find((void *)commandBuffer);
    if (!cb || (__atomic_load_n(&cb->deferred, __ATOMIC_ACQUIRE) & (TESSERA_BEGUN_IN_C | TESSERA_ENDED_IN_C))
            != TESSERA_BEGUN_IN_C || !cb->whole || cb->dropped || cb->python_path || cb->pass_in_c)
        return 0;
    int submit_ok = tessera_product_match(cb);
    if (submit_ok < 0) return 0;
    PFN_vkEndCommandBuffer next = (PFN_vkEndCommandBuffer)cb->dev->next[index];
    if (!next) return 0;
    *result = next(commandBuffer);
    cb->end_result = *result;
    if (*result == 0)   /* VK_SUCCESS */
        cb->submit_ok = submit_ok && !cb->python_submits && cb->label_depth == 0;
    __atomic_or_fetch(&cb->deferred, TESSERA_ENDED_IN_C, __ATOMIC_RELEASE);
    __atomic_add_fetch(&tessera_my_stripe()->ended_in_c, 1, __ATOMIC_RELAXED);
    return 1;
}

/* The guard of vkCmdExecuteCommands (intercepts.EXECUTE): 1 when C recorded and forwarded the call, 0 when
   Python must. C records it into a primary buffer whose recording C has made whole so far, on a device whose
   hooks may run later, when each secondary (1 to TESSERA_EXECUTE_MAX) holds a recording equal to a kept one on the
   same device, which C ended, or Python applied and C kept the records of (tessera_cb_applied: a secondary recorded
   once and executed every frame). The record (format X) holds the count, the tags' total, per secondary its
   handle, the key of the kept recording it equals (its hash and size) and its tag count, then the secondaries'
   tags: the primary's records say all it executes but for tags, and its tags are its own and its secondaries' in
   command order (tessera_tag_span), so that a primary re-recorded with re-recorded secondaries equals the earlier
   one (vkapi/replay.py). A secondary whose own submits could not take the C path (submit_ok: its labels do not
   balance...), or executed inside labels the primary opened, sends the primary's submits through Python, whose
   walk says what each workload's labels are there. */
#define TESSERA_EXECUTE_MAX 64
static int tessera_execute_in_c(VkCommandBuffer commandBuffer, uint32_t count, const VkCommandBuffer *secondaries,
                                int index)
{
    tessera_cb *cb = tessera_cb_find((void *)commandBuffer);
    if (!cb || !cb->primary || !cb->whole || cb->dropped || cb->python_path || cb->python_brackets
            || !cb->dev->deferrable || count == 0 || count > TESSERA_EXECUTE_MAX || !secondaries)
        return 0;
    PFN_vkCmdExecuteCommands next = (PFN_vkCmdExecuteCommands)cb->dev->next[index];
    if (!next) return 0;
    if (cb->executed_count + count > cb->executed_cap) {   /* room to name them first: nothing to undo later */
        uint32_t cap = cb->executed_cap ? cb->executed_cap : 16;
        while (cap < cb->executed_count + count) cap *= 2;
        void **grown = realloc(cb->executed, cap * sizeof(void *));
        if (!grown) return 0;
        cb->executed = grown;
        cb->executed_cap = cap;
    }
    tessera_cb *found[TESSERA_EXECUTE_MAX];
    size_t used[TESSERA_EXECUTE_MAX];
    long tags[TESSERA_EXECUTE_MAX];
    size_t total = 0;
    int plain = cb->label_depth == 0;
    pthread_mutex_t *lock = &tessera_my_stripe()->products;
    pthread_mutex_lock(lock);
    for (uint32_t i = 0; i < count; i++) {
        tessera_cb *s = found[i] = tessera_cb_find((void *)secondaries[i]);
        /* Its arena holds the recording C ended until the buffer is begun again, which Vulkan does not allow while
           a primary being recorded executes it; a reader applying it meanwhile only empties it (tessera_cb_clear). */
        if (!s || s == cb || s->primary || s->dev != cb->dev || s->dropped
                || !(s->applied || (s->end_result == 0 && __atomic_load_n(&s->deferred, __ATOMIC_ACQUIRE)
                                                          & TESSERA_ENDED_IN_C))
                || !tessera_product_equal(s, s->end_hash, NULL, 0, &tags[i])) {
            pthread_mutex_unlock(lock);
            return 0;
        }
        used[i] = s->used;
        total += (size_t)tags[i];
        plain &= s->submit_ok != 0;
    }
    uint64_t *slot = tessera_record(cb, (uint32_t)index, 2 + TESSERA_EXECUTE_ENTRY * (size_t)count + total, 0);
    if (slot) {
        slot[0] = count;
        slot[1] = total;
        uint64_t *entry = slot + 2, *out = entry + TESSERA_EXECUTE_ENTRY * (size_t)count;
        for (uint32_t i = 0; i < count; i++, entry += TESSERA_EXECUTE_ENTRY) {
            entry[0] = (uint64_t)(uintptr_t)secondaries[i];
            entry[1] = found[i]->end_hash;
            entry[2] = used[i];
            entry[3] = (uint64_t)tags[i];
            if (tessera_records_tags(found[i]->data, used[i], out, (size_t)tags[i]) != tags[i]) cb->dropped++;
            out += tags[i];
        }
    }
    pthread_mutex_unlock(lock);
    for (uint32_t i = 0; i < count; i++) cb->executed[cb->executed_count++] = (void *)secondaries[i];
    if (!plain) cb->python_submits = 1;
    next(commandBuffer, count, secondaries);
    return 1;
}

/* Python: the handles of the secondaries the buffer's recording executes in records C made (tessera_execute_in_c),
   in order, into `out` (room for `max`); how many there are. */
size_t tessera_cb_executed(void *handle, uint64_t *out, size_t max)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return 0;
    for (uint32_t i = 0; i < cb->executed_count && i < max; i++) out[i] = (uint64_t)(uintptr_t)cb->executed[i];
    return cb->executed_count;
}

/* A submit of `c` went into the ledger of serial `serial` (the C path, submits.py): none of its secondaries executed
   in records C made (tessera_execute_in_c) is begun again in C before Python has read it (their records hold what the
   reading of the submit reads). */
static inline void tessera_cb_submitted(tessera_cb *c, uint64_t serial)
{
    c->submits++;
    __atomic_store_n(&c->in_ledger, serial, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < c->executed_count; i++) {
        tessera_cb *s = tessera_cb_find(c->executed[i]);
        if (!s) continue;
        uint64_t was = __atomic_load_n(&s->in_ledger, __ATOMIC_ACQUIRE);   /* two primaries' submits at once: the later */
        while (was < serial && !__atomic_compare_exchange_n(&s->in_ledger, &was, serial, 0, __ATOMIC_ACQ_REL,
                                                            __ATOMIC_ACQUIRE)) {}
    }
}

/* The buffers of the pool a thread reset last, while no buffer was registered or unregistered since
   (`tessera_cb_version`): engines reset the same pools frame after frame, each from its own thread. */
#define TESSERA_POOL_CACHE 64
static __thread struct {
    uint64_t pool, version;
    size_t count;
    tessera_cb *cbs[TESSERA_POOL_CACHE];
} tessera_pool_cache;

/* The buffers of `pool` into the thread's cache; 0 when it has none or more than TESSERA_POOL_CACHE. */
static int tessera_pool_members(uint64_t pool)
{
    uint64_t version = __atomic_load_n(&tessera_cb_version, __ATOMIC_ACQUIRE);
    if (tessera_pool_cache.pool == pool && tessera_pool_cache.version == version && tessera_pool_cache.count)
        return 1;
    size_t count = 0;
    pthread_mutex_lock(&tessera_cb_lock);   /* no buffer of another pool is freed while it is looked at */
    tessera_table *t = tessera_cbs;
    for (size_t i = 0; t && i <= t->mask && count <= TESSERA_POOL_CACHE; i++) {
        void *k = t->slots[i].key;
        if (k == NULL || k == TESSERA_TOMBSTONE || t->slots[i].cb->pool != pool) continue;
        if (count < TESSERA_POOL_CACHE) tessera_pool_cache.cbs[count] = t->slots[i].cb;
        count++;
    }
    version = tessera_cb_version;
    pthread_mutex_unlock(&tessera_cb_lock);
    int ok = count > 0 && count <= TESSERA_POOL_CACHE;
    tessera_pool_cache.pool = pool;
    tessera_pool_cache.version = version;
    tessera_pool_cache.count = ok ? count : 0;
    return ok;
}

/* The guard of vkResetCommandPool: 1 when C made the call, 0 when Python must. C makes it when C may reset
   every buffer of the pool (Vulkan synchronises them with the pool: none is being recorded or used now),
   and the pool has one to TESSERA_POOL_CACHE: each gets its records dropped and the pool's reset deferred. */
static int tessera_pool_reset_in_c(VkDevice device, VkCommandPool commandPool, VkCommandPoolResetFlags flags,
                                   int index, VkResult *result)
{
    if (!tessera_pool_members((uint64_t)(uintptr_t)commandPool)) return 0;
    tessera_cb *const *cbs = tessera_pool_cache.cbs;
    size_t count = tessera_pool_cache.count;
    for (size_t i = 0; i < count; i++)
        if (!tessera_resettable_in_c(cbs[i], __atomic_load_n(&cbs[i]->deferred, __ATOMIC_ACQUIRE))) return 0;
    PFN_vkResetCommandPool next = (PFN_vkResetCommandPool)cbs[0]->dev->next[index];
    if (!next) return 0;
    *result = next(device, commandPool, flags);
    if (*result == 0)   /* VK_SUCCESS */
        for (size_t i = 0; i < count; i++) {
            tessera_cb_begin(cbs[i]);
            cbs[i]->whole = 0;   /* no recording begun */
            __atomic_store_n(&cbs[i]->deferred, TESSERA_RESET_IN_C, __ATOMIC_RELEASE);
        }
    __atomic_add_fetch(&tessera_my_stripe()->pools_reset_in_c, 1, __ATOMIC_RELAXED);
    return 1;
}

/* Python, before any hook looks at the buffer: what C made that Python has yet to run (TESSERA_BEGUN_IN_C,
   TESSERA_ENDED_IN_C, TESSERA_RESET_IN_C), with 8 added when a submit of the buffer is in a ledger Python has
   yet to read. */
int tessera_cb_deferred(void *handle)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return 0;
    int deferred = __atomic_load_n(&cb->deferred, __ATOMIC_ACQUIRE);
    if (deferred && __atomic_load_n(&cb->in_ledger, __ATOMIC_ACQUIRE)
            > __atomic_load_n(&tessera_ledger_read_up_to, __ATOMIC_ACQUIRE))
        deferred |= 8;
    return deferred;
}

/* Python: take what C made that Python has yet to run (the caller runs the hooks: once); the begin's
   flags and the end's result into `flags` and `end_result`. */
int tessera_cb_take_deferred(void *handle, uint32_t *flags, int32_t *end_result)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return 0;
    int deferred = __atomic_exchange_n(&cb->deferred, 0, __ATOMIC_ACQ_REL);
    *flags = cb->begin_flags;
    *end_result = cb->end_result;
    return deferred;
}

/* Python, reading a submit of the buffer (vkapi/lifecycle.py, "Submits read without the hooks"): for a recording
   C began and ended successfully, not read so yet, that equals a kept one (on the same device, under the same
   generation): the kept one's hash and size into `key` and the recording's tags into `tags` (at most `max`); the
   number of tags. -2: the recording was read so already; -1: Python must run its hooks first. Changes nothing. */
static long tessera_cb_product(tessera_cb *cb, uint64_t *key, uint64_t *tags, size_t max);
long tessera_cb_read_product(void *handle, uint64_t *key, uint64_t *tags, size_t max)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return -1;
    int deferred = __atomic_load_n(&cb->deferred, __ATOMIC_ACQUIRE);
    if (!(deferred & TESSERA_ENDED_IN_C) || cb->end_result != 0 || cb->dropped) return -1;
    if (deferred & TESSERA_READ_IN_PYTHON) return -2;
    if (deferred & TESSERA_REPORTED_IN_C) return -1;   /* its hooks make its Read (tessera_cb_reported_product) */
    return tessera_cb_product(cb, key, tags, max);
}
/* Python, running the hooks of a recording whose submits C reported (the layer, reported_submits.c: no Read of
   Python's): as tessera_cb_read_product would have answered before the first report; the submits C reported
   into `*reported`, also when the product is no longer kept (-1: Python applies the records, and leaves them
   counted). */
long tessera_cb_reported_product(void *handle, uint64_t *key, uint64_t *tags, size_t max, uint64_t *reported)
{
    tessera_cb *cb = tessera_cb_find(handle);   /* its deferred bits taken already (tessera_cb_take_deferred) */
    if (!cb || cb->end_result != 0 || cb->dropped || !cb->reported) return -1;
    *reported = cb->reported;
    return tessera_cb_product(cb, key, tags, max);
}
static long tessera_cb_product(tessera_cb *cb, uint64_t *key, uint64_t *tags, size_t max)
{
    uint64_t hash = cb->end_hash;   /* ended in C: tessera_product_match found it kept */
    long n = -1;
    pthread_mutex_t *lock = &tessera_my_stripe()->products;
    pthread_mutex_lock(lock);
    const tessera_product *p = tessera_product_equal(cb, hash, tags, max, &n);
    pthread_mutex_unlock(lock);
    if (!p) return -1;
    key[0] = hash;
    key[1] = cb->used;
    return n;
}

/* Python: a submit of the buffer was reported from the kept recording its recording equals
   (tessera_cb_read_product), its hooks not run: marked so until C begins the buffer again. 0 when the buffer
   has no deferred end (nothing changes). */
int tessera_cb_read_in_python(void *handle)
{
    tessera_cb *cb = tessera_cb_find(handle);
    if (!cb) return 0;
    int deferred = __atomic_load_n(&cb->deferred, __ATOMIC_ACQUIRE);
    do {
        if (!(deferred & TESSERA_ENDED_IN_C)) return 0;
    } while (!__atomic_compare_exchange_n(&cb->deferred, &deferred, deferred | TESSERA_READ_IN_PYTHON, 0,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    return 1;
}

/* tessera_cb_read_product for the buffers of one submit at once (Recorder.reading_all; `handles` their
   addresses): buffer i's result in counts[i], its key in keys[2i] and keys[2i + 1], its tags after those of
   the buffers before it in `tags` (room for `max`; the total in `*used`). Stops before a buffer found unequal
   once another's tags were written (it may have lacked room: Python reads it again, from the start of `tags`);
   returns how many buffers it read. Changes nothing. */
size_t tessera_cb_read_products(const uint64_t *handles, size_t count, uint64_t *keys, uint64_t *tags, size_t max,
                                long *counts, size_t *used)
{
    size_t at = 0, i = 0;
    for (; i < count; i++) {
        long n = tessera_cb_read_product((void *)(uintptr_t)handles[i], keys + 2 * i, tags + at, max - at);
        if (n == -1 && at > 0) break;
        counts[i] = n;
        if (n > 0) at += (size_t)n;
    }
    *used = at;
    return i;
}

/* tessera_cb_read_in_python for each of `count` buffers (`handles` their addresses; Recorder.read_all). */
void tessera_cb_read_in_python_all(const uint64_t *handles, size_t count)
{
    for (size_t i = 0; i < count; i++) tessera_cb_read_in_python((void *)(uintptr_t)handles[i]);
}

/* Python (TESSERA_LOG=info): begins, ends and pool resets made in C so far. */
void tessera_lifecycle_counts(uint64_t *counts)
{
    counts[0] = counts[1] = counts[2] = 0;
    for (int i = 0; i < TESSERA_STRIPES; i++) {
        counts[0] += __atomic_load_n(&tessera_stripes[i].begun_in_c, __ATOMIC_RELAXED);
        counts[1] += __atomic_load_n(&tessera_stripes[i].ended_in_c, __ATOMIC_RELAXED);
        counts[2] += __atomic_load_n(&tessera_stripes[i].pools_reset_in_c, __ATOMIC_RELAXED);
    }
}

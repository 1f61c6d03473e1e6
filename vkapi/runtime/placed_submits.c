/* ---- submits placed in C (the driver; tessera.icd.placed_submits: the design is its docstring) ----
   Static C, after submits.c, lifecycle.c and event_packets.c. A submit whose every command buffer holds a
   recording C ended that equals a kept one carrying a native placement plan for that buffer on the queue's
   GPU (tessera_product_attach), or a recording carrying one itself (tessera_cb_attach: a buffer submitted
   again as it is), is placed at the submit, in the submit's guard, as the timeline's job would place it, while
   Python holds nothing back: its timeline has granted the licence (tessera_placing, submits.c) with a copy of
   what placing reads and changes (each queue's class floors and ends, each GPU's hardware queue free times,
   the submission, event and render-pass-instance counters, each binary semaphore's last signal, each timeline
   semaphore's last signals' values and times), and takes
   that copy back when it revokes the licence before its next job. The events' packets are appended to the
   trace file at once, through its stage (staged_appends.c: a shared mapping, written to the file in large
   writes and when the licence is revoked). Queue labels begun under the licence on a queue with none open
   before it (up to TESSERA_PENDING_LABELS deep) are kept here (tessera_label_in_c) as the labels on entry of
   the submits inside them, and written to the ledger before anything else is.
   Checking (TESSERA_C_PLACEMENT=check): C places a submit as above but writes and changes nothing; it keeps the
   packets and the state it would have left (`checked`) and the submit takes the ledger as before, so the
   timeline places it from the same state and compares its own packets with C's, byte for byte (start times
   included), and its state after it with C's. */
#include <errno.h>
#include <unistd.h>

#define TESSERA_PLACE_TAGS 1024     /* a submit's buffers' tags, together */
#define TESSERA_PLACED_QUEUES 64
#define TESSERA_PLACED_GPUS 8
#define TESSERA_PLACED_SEMAPHORES 256   /* binary semaphores' last signal times kept (more: none placed in C) */
#define TESSERA_PLACED_TIMELINES 64     /* timeline semaphores known (more: no semaphore placed in C) */
#define TESSERA_PLACED_SIGNALS 64       /* a timeline semaphore's last signals kept (icd/timeline.py SIGNALS_KEPT) */
/* The licence's state, as int64 words (Python: icd/placed_submits.py): submissions, next event id, render pass
   instances, the GPU count G, the queue count Q; each GPU's three hardware queues' free times; each queue's
   address, its GPU's index, its four class floors and four class ends. */
#define TESSERA_PLACED_HEAD 5
#define TESSERA_PLACED_GPU_WORDS 3
#define TESSERA_PLACED_QUEUE_WORDS 10

#define TESSERA_PENDING_LABEL 256         /* a queue label kept in C: its longest name */
#define TESSERA_PENDING_LABELS 4          /* queue labels kept in C on one queue, at most (icd/placed_submits.py) */
typedef struct {
    uint64_t queue;
    int64_t gpu;
    int64_t floors[4], ends[4];
    uint32_t pending;                      /* queue labels begun under the licence, not ended, outermost first: */
    uint16_t length[TESSERA_PENDING_LABELS];                     /* ... each one's length */
    char label[TESSERA_PENDING_LABELS][TESSERA_PENDING_LABEL];   /* ... and name */
} tessera_placed_queue;
typedef struct { uint64_t semaphore; int64_t time; } tessera_placed_semaphore;
/* A timeline semaphore's last signals on the emulated GPU (Timeline._timelines), oldest first: each one's value
   and the time it was signalled. */
typedef struct {
    uint64_t semaphore;
    size_t count;
    uint64_t value[TESSERA_PLACED_SIGNALS];
    int64_t time[TESSERA_PLACED_SIGNALS];
} tessera_placed_timeline;
static struct {
    int fd;                     /* the trace file's */
    uint64_t placed, total;     /* submits placed since the grant, and in all */
    uint64_t buffers;           /* their command buffers, in all */
    int write_error;            /* errno of a write of the trace that failed (0: none); the licence ends */
    int check;                  /* checking: placed, kept in `checked`, not written (see above) */
    uint8_t *checked;           /* per submit placed so, int64 words: its submission id, its packets' length, the
                                   TESSERA_PLAN_STATE words after it, the count of semaphores it signals and
                                   each one's (handle, time); then its packets */
    size_t checked_len, checked_cap;
    int64_t submissions, next_event, pass_instances;
    size_t gpus, queues;
    int64_t free_at[TESSERA_PLACED_GPUS][TESSERA_PLACED_GPU_WORDS];
    tessera_placed_queue queue[TESSERA_PLACED_QUEUES];
    /* the timeline's binary semaphores (Timeline._semaphores: the end of each one's last signal) and timeline
       semaphores (Timeline._timelines); -1: too many, a submit with semaphores takes Python */
    long semaphores;
    tessera_placed_semaphore semaphore[TESSERA_PLACED_SEMAPHORES];
    size_t timelines;
    tessera_placed_timeline timeline[TESSERA_PLACED_TIMELINES];
    uint8_t *out;               /* the packets' buffer, grown to the largest submit's bound */
    size_t cap;
    uint8_t *texts;             /* a submit's slot texts (tessera_place_submit), grown to the largest's */
    size_t texts_cap;
} tessera_placement;

/* Each queue label kept in C, written to the ledger as the begin it is (the ledger locked: before any other
   record, and when the licence is taken back), oldest first per queue. */
static void tessera_pending_labels_write(void)
{
    for (size_t i = 0; i < tessera_placement.queues; i++) {
        tessera_placed_queue *q = &tessera_placement.queue[i];
        uint32_t pending = q->pending;
        q->pending = 0;   /* first: the records written below call this again */
        for (uint32_t k = 0; k < pending; k++)
            tessera_ledger_label_record(q->queue, TESSERA_LEDGER_LABEL_BEGIN, q->label[k], q->length[k]);
    }
}

/* Whether the label `name` (`n` bytes) is a t<tag> label (tessera.schemas.labels TAG_LABEL: t and digits). */
static int tessera_is_tag_label(const char *name, size_t n)
{
    if (n < 2 || name[0] != 't') return 0;
    for (size_t i = 1; i < n; i++) if (name[i] < '0' || name[i] > '9') return 0;
    return 1;
}

static tessera_placed_queue *tessera_placed_queue_of(VkQueue queue)
{
    for (size_t i = 0; i < tessera_placement.queues; i++)
        if (tessera_placement.queue[i].queue == (uint64_t)(uintptr_t)queue) return &tessera_placement.queue[i];
    return NULL;
}

/* The guard of a queue label's begin (`name`) or end (NULL): 1 when C keeps it itself under the licence (no
   ledger record): a begin on a granted queue (none open when granted) with fewer than TESSERA_PENDING_LABELS
   kept, pending for the submits until its end (an application's labels, the layer's s<submitID> around a
   submit); an end closes the innermost kept. 0: the ledger takes it. */
static int tessera_label_in_c(VkQueue queue, const char *name)
{
    int kept = 0;
    pthread_mutex_lock(&tessera_ledger_lock);
    tessera_placed_queue *q = __atomic_load_n(&tessera_placing, __ATOMIC_RELAXED) ? tessera_placed_queue_of(queue)
                                                                                 : NULL;
    if (q && name && q->pending < TESSERA_PENDING_LABELS) {
        size_t n = strlen(name);
        if (n < TESSERA_PENDING_LABEL) {
            memcpy(q->label[q->pending], name, n);
            q->length[q->pending++] = (uint16_t)n;
            kept = 1;
        }
    } else if (q && !name && q->pending) {
        q->pending--;
        kept = 1;
    }
    pthread_mutex_unlock(&tessera_ledger_lock);
    return kept;
}

/* The timeline semaphores as int64 words (`n` of them; Python: icd/placed_submits.py): each one's handle, its signal
   count, then each signal's value and time, oldest first. Read into `out` (room for TESSERA_PLACED_TIMELINES); 0
   when damaged. */
static int tessera_timelines_read(const int64_t *words, size_t len, size_t n, tessera_placed_timeline *out)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (at + 2 > len) return 0;
        tessera_placed_timeline *t = &out[i];
        t->semaphore = (uint64_t)words[at];
        int64_t count = words[at + 1];
        at += 2;
        if (count < 0 || count > TESSERA_PLACED_SIGNALS || at + 2 * (size_t)count > len) return 0;
        t->count = (size_t)count;
        for (int64_t k = 0; k < count; k++) {
            t->value[k] = (uint64_t)words[at++];
            t->time[k] = words[at++];
        }
    }
    return at == len;
}

/* Python: grant the licence with the state in `state` (`words` int64 words, the layout above), the binary
   semaphores' (handle, time) pairs (`nsemaphores`; -1: too many, a submit with semaphores takes Python), the
   timeline semaphores (`ntimelines`, in `timelines_len` words: tessera_timelines_read) and the trace file's
   descriptor (`check`: checking, see above). 0 when refused: the ledger holds a record (Python has a job), or
   the state is damaged. */
int tessera_placement_grant(int fd, const int64_t *state, size_t words, int check, const int64_t *semaphores,
                            long nsemaphores, const int64_t *timelines, size_t timelines_len, size_t ntimelines)
{
    static tessera_placed_timeline parsed[TESSERA_PLACED_TIMELINES];   /* read before the lock: Python's thread */
    if (words < TESSERA_PLACED_HEAD || nsemaphores > TESSERA_PLACED_SEMAPHORES || ntimelines > TESSERA_PLACED_TIMELINES
            || !tessera_timelines_read(timelines, timelines_len, ntimelines, parsed))
        return 0;
    int64_t gpus = state[3], queues = state[4];
    if (gpus < 0 || gpus > TESSERA_PLACED_GPUS || queues < 0 || queues > TESSERA_PLACED_QUEUES
            || words != TESSERA_PLACED_HEAD + (size_t)gpus * TESSERA_PLACED_GPU_WORDS
                        + (size_t)queues * TESSERA_PLACED_QUEUE_WORDS)
        return 0;
    const int64_t *q = state + TESSERA_PLACED_HEAD + gpus * TESSERA_PLACED_GPU_WORDS;
    for (int64_t i = 0; i < queues; i++)
        if (q[i * TESSERA_PLACED_QUEUE_WORDS + 1] < 0 || q[i * TESSERA_PLACED_QUEUE_WORDS + 1] >= gpus) return 0;
    pthread_mutex_lock(&tessera_ledger_lock);
    tessera_ledger *l = tessera_ledger_active;
    int granted = l->used == 0 && l->dropped == 0;
    if (granted) {
        tessera_placement.fd = fd;
        tessera_placement.check = check;
        tessera_placement.semaphores = nsemaphores;
        for (long i = 0; i < nsemaphores; i++) {
            tessera_placement.semaphore[i].semaphore = (uint64_t)semaphores[2 * i];
            tessera_placement.semaphore[i].time = semaphores[2 * i + 1];
        }
        tessera_placement.timelines = ntimelines;
        memcpy(tessera_placement.timeline, parsed, ntimelines * sizeof parsed[0]);
        tessera_placement.checked_len = 0;
        tessera_placement.placed = 0;
        tessera_placement.write_error = 0;
        tessera_placement.submissions = state[0];
        tessera_placement.next_event = state[1];
        tessera_placement.pass_instances = state[2];
        tessera_placement.gpus = (size_t)gpus;
        tessera_placement.queues = (size_t)queues;
        memcpy(tessera_placement.free_at, state + TESSERA_PLACED_HEAD, (size_t)gpus * sizeof tessera_placement.free_at[0]);
        for (int64_t i = 0; i < queues; i++) {
            const int64_t *w = q + i * TESSERA_PLACED_QUEUE_WORDS;
            tessera_placed_queue *pq = &tessera_placement.queue[i];
            pq->queue = (uint64_t)w[0];
            pq->gpu = w[1];
            memcpy(pq->floors, w + 2, sizeof pq->floors);
            memcpy(pq->ends, w + 6, sizeof pq->ends);
            pq->pending = 0;
        }
        tessera_ledger_before = tessera_pending_labels_write;
        __atomic_store_n(&tessera_placing, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tessera_ledger_lock);
    return granted;
}

/* Python, before its timeline's next job: end the licence; the state as C left it into `state` (room for
   `words`, the size granted) when C placed a submit since the grant. Returns how many it placed, and the
   errno of a write of the trace that failed into `*write_error` (0: none). */
long tessera_placement_revoke(int64_t *state, size_t words, int *write_error)
{
    pthread_mutex_lock(&tessera_ledger_lock);
    __atomic_store_n(&tessera_placing, 0, __ATOMIC_RELEASE);
    tessera_pending_labels_write();   /* Python takes them from the ledger before its next job */
    uint64_t placed = tessera_placement.placed;
    size_t need = TESSERA_PLACED_HEAD + tessera_placement.gpus * TESSERA_PLACED_GPU_WORDS
                  + tessera_placement.queues * TESSERA_PLACED_QUEUE_WORDS;
    if (placed && words >= need) {
        state[0] = tessera_placement.submissions;
        state[1] = tessera_placement.next_event;
        state[2] = tessera_placement.pass_instances;
        state[3] = (int64_t)tessera_placement.gpus;
        state[4] = (int64_t)tessera_placement.queues;
        memcpy(state + TESSERA_PLACED_HEAD, tessera_placement.free_at,
               tessera_placement.gpus * sizeof tessera_placement.free_at[0]);
        int64_t *q = state + TESSERA_PLACED_HEAD + tessera_placement.gpus * TESSERA_PLACED_GPU_WORDS;
        for (size_t i = 0; i < tessera_placement.queues; i++) {
            int64_t *w = q + i * TESSERA_PLACED_QUEUE_WORDS;
            const tessera_placed_queue *pq = &tessera_placement.queue[i];
            w[0] = (int64_t)pq->queue;
            w[1] = pq->gpu;
            memcpy(w + 2, pq->floors, sizeof pq->floors);
            memcpy(w + 6, pq->ends, sizeof pq->ends);
        }
    }
    tessera_placement.placed = 0;
    int error = tessera_stage_flush();   /* Python's next write follows what C staged */
    if (error && !tessera_placement.write_error) tessera_placement.write_error = error;
    *write_error = tessera_placement.write_error;
    tessera_placement.write_error = 0;
    pthread_mutex_unlock(&tessera_ledger_lock);
    return (long)placed;
}

/* Python, after a revoke that took back what C placed: the binary semaphores' (handle, time) pairs into `out` (room
   for TESSERA_PLACED_SEMAPHORES); how many (-1: C kept none). */
long tessera_placement_semaphores(int64_t *out)
{
    long n = tessera_placement.semaphores;
    for (long i = 0; i < n; i++) {
        out[2 * i] = (int64_t)tessera_placement.semaphore[i].semaphore;
        out[2 * i + 1] = tessera_placement.semaphore[i].time;
    }
    return n;
}

/* Python, after a revoke that took back what C placed: the timeline semaphores, as tessera_timelines_read reads
   them, into `out` (room for `room` words); how many words (-1: they do not fit, or C kept none). */
long tessera_placement_timelines(int64_t *out, size_t room)
{
    if (tessera_placement.semaphores < 0) return -1;
    size_t at = 0;
    for (size_t i = 0; i < tessera_placement.timelines; i++) {
        const tessera_placed_timeline *t = &tessera_placement.timeline[i];
        if (at + 2 + 2 * t->count > room) return -1;
        out[at++] = (int64_t)t->semaphore;
        out[at++] = (int64_t)t->count;
        for (size_t k = 0; k < t->count; k++) {
            out[at++] = (int64_t)t->value[k];
            out[at++] = t->time[k];
        }
    }
    return (long)at;
}

/* The kept binary semaphore `s`, or NULL (never signalled on the emulated timeline: its time is 0). */
static tessera_placed_semaphore *tessera_placed_semaphore_find(uint64_t s)
{
    for (long i = 0; i < tessera_placement.semaphores; i++)
        if (tessera_placement.semaphore[i].semaphore == s) return &tessera_placement.semaphore[i];
    return NULL;
}

/* The known timeline semaphore `s`, or NULL (a binary one). */
static tessera_placed_timeline *tessera_placed_timeline_find(uint64_t s)
{
    for (size_t i = 0; i < tessera_placement.timelines; i++)
        if (tessera_placement.timeline[i].semaphore == s) return &tessera_placement.timeline[i];
    return NULL;
}

/* A submit's batches as its guard read them, for tessera_place_submit: per batch, how many command buffers, waits
   and signals; the waits' semaphores and values (a timeline one's), then the signals', batch after batch. */
typedef struct {
    uint32_t count, waits, signals;   /* batches; waits and signals of all of them */
    uint32_t buffers[TESSERA_IN_C_BATCHES], nwait[TESSERA_IN_C_BATCHES], nsignal[TESSERA_IN_C_BATCHES];
    uint64_t wait[TESSERA_IN_C_SEMAPHORES], wait_value[TESSERA_IN_C_SEMAPHORES];
    uint64_t signal[TESSERA_IN_C_SEMAPHORES], signal_value[TESSERA_IN_C_SEMAPHORES];
} tessera_batches;

/* As Timeline._signalled_at: when a wait for `s` (`value`, for a timeline semaphore) is met on the emulated GPU,
   the submit's signals so far (the first `signals` of `b`'s, at the times `signalled`) counted as the timeline
   has them by then: the end of a binary semaphore's last signal; the earliest of a timeline semaphore's kept
   signals that reach `value` (those of the submit appended, the oldest past TESSERA_PLACED_SIGNALS gone); 0 when
   none (never signalled, a host signal, or a signal submitted later). */
static int64_t tessera_placed_signalled_at(uint64_t s, uint64_t value, const tessera_batches *b, uint32_t signals,
                                           const int64_t *signalled)
{
    const tessera_placed_timeline *t = tessera_placed_timeline_find(s);
    if (!t) {
        for (uint32_t k = signals; k-- > 0;)
            if (b->signal[k] == s) return signalled[k];
        const tessera_placed_semaphore *kept = tessera_placed_semaphore_find(s);
        return kept ? kept->time : 0;
    }
    size_t pending = 0;
    for (uint32_t k = 0; k < signals; k++) pending += b->signal[k] == s;
    size_t gone = t->count + pending > TESSERA_PLACED_SIGNALS ? t->count + pending - TESSERA_PLACED_SIGNALS : 0;
    int64_t at = 0;
    int found = 0;
    for (size_t k = gone; k < t->count; k++)
        if (t->value[k] >= value && (!found || t->time[k] < at)) { at = t->time[k]; found = 1; }
    for (uint32_t k = 0, seen = 0; k < signals; k++)
        if (b->signal[k] == s && t->count + seen++ >= gone && b->signal_value[k] >= value
                && (!found || signalled[k] < at)) { at = signalled[k]; found = 1; }
    return at;
}

/* Whether the submit's semaphores can be placed in C: the tables complete, room for the new binary signals. */
static int tessera_placed_semaphores_ok(const uint64_t *waits, uint32_t nwait, const uint64_t *signals, uint32_t nsignal)
{
    (void)waits;
    if (!nwait && !nsignal) return 1;
    if (tessera_placement.semaphores < 0) return 0;
    long fresh = 0;
    for (uint32_t i = 0; i < nsignal; i++) {
        int known = tessera_placed_timeline_find(signals[i]) || tessera_placed_semaphore_find(signals[i]);
        for (uint32_t k = 0; !known && k < i; k++) known = signals[k] == signals[i];
        fresh += !known;
    }
    return tessera_placement.semaphores + fresh <= TESSERA_PLACED_SEMAPHORES;
}

/* Python, after a revoke while checking: the submits C placed without writing them (the `checked` layout), valid
   until the next grant. */
const uint8_t *tessera_placement_checked(size_t *len)
{
    *len = tessera_placement.checked_len;
    return tessera_placement.checked;
}

/* Python (TESSERA_LOG=info): submits placed in C so far, and their command buffers. */
void tessera_placement_counts(uint64_t *counts)
{
    counts[0] = __atomic_load_n(&tessera_placement.total, __ATOMIC_RELAXED);
    counts[1] = __atomic_load_n(&tessera_placement.buffers, __ATOMIC_RELAXED);
}

/* The submit's guard, the ledger locked, after the backend accepted the submit (its `n` command buffers `cbs`,
   batch after batch, on `queue`, called at CLOCK_BOOTTIME `host`, its batches `b`): 1 when C placed it (no ledger
   record then), 0 when Python must (nothing changed). As Timeline._place_submit: one submission; each batch starts
   no earlier than each of its waits is met (tessera_placed_signalled_at, which counts the signals of the batches
   before it), and each semaphore it signals is signalled when it ends; the next batch follows it on the queue. */
static int tessera_place_submit(VkQueue queue, uint64_t host, tessera_cb *const *cbs, uint32_t n,
                                const tessera_batches *b)
{
    if (!__atomic_load_n(&tessera_placing, __ATOMIC_RELAXED) || n == 0 || n > TESSERA_IN_C_MAX
            || !tessera_placed_semaphores_ok(b->wait, b->waits, b->signal, b->signals))
        return 0;
    tessera_placed_queue *q = tessera_placed_queue_of(queue);
    if (!q) return 0;
    /* the queue's labels on entry: those kept in C, none a t<tag> label (a plan's key says which are: entry_shape) */
    size_t longest = TESSERA_TAG_TEXT, entry_size = 0;
    for (uint32_t k = 0; k < q->pending; k++) {
        if (tessera_is_tag_label(q->label[k], q->length[k])) return 0;
        if (q->length[k] > longest) longest = q->length[k];
        entry_size += 2 + (size_t)q->length[k];
    }
    uint64_t shape = q->pending, key = (uint64_t)q->gpu | shape << 32;
    /* each buffer's slot texts as tessera_place_all takes them (from text_at[i] on): the labels on entry (u32 size,
       then each one's u16 length and bytes), its tags (u32 count, u64 each) */
    size_t texts_need = n * (8 + entry_size) + 8 * TESSERA_PLACE_TAGS;
    if (texts_need > tessera_placement.texts_cap) {
        uint8_t *grown = realloc(tessera_placement.texts, texts_need);
        if (!grown) return 0;
        tessera_placement.texts = grown;
        tessera_placement.texts_cap = texts_need;
    }
    uint8_t *texts = tessera_placement.texts;
    uint64_t tags_of[TESSERA_PLACE_TAGS];
    const uint8_t *plans[TESSERA_IN_C_MAX];
    size_t lens[TESSERA_IN_C_MAX], text_at[TESSERA_IN_C_MAX + 1], used = 0, bound = 0;
    int placed = 0;
    pthread_mutex_t *lock = &tessera_my_stripe()->products;   /* the kept products and their plans stay */
    pthread_mutex_lock(lock);
    uint32_t i = 0;
    text_at[0] = 0;
    for (; i < n; i++) {
        const tessera_cb *cb = cbs[i];
        /* a recording C ended equal to a kept one: the plan attached to that product; else one attached to the
           recording itself (a buffer submitted again as it is: its tags are in the plan) */
        long tags = -1;
        const tessera_attachment *a = NULL;
        if (__atomic_load_n(&cb->deferred, __ATOMIC_ACQUIRE) & TESSERA_ENDED_IN_C && cb->end_result == 0
                && !cb->dropped) {
            const tessera_product *p = tessera_product_equal(cb, cb->end_hash, tags_of + used,
                                                             TESSERA_PLACE_TAGS - used, &tags);
            if (p && tags >= 0) a = tessera_attachment_find(p, (uint64_t)(uintptr_t)cb->handle, key);
        }
        if (!a) {
            a = tessera_cb_attachment(cb, key);
            tags = 0;
        }
        if (!a || a->size < 16) break;
        const uint64_t *head = (const uint64_t *)a->data;   /* the most bytes its packets take but the slots', and
                                                               its slot tokens (each written twice at most) */
        uint32_t entry = (uint32_t)entry_size, count = (uint32_t)tags;
        size_t at = text_at[i];
        memcpy(texts + at, &entry, 4);
        at += 4;
        for (uint32_t k = 0; k < q->pending; k++) {
            memcpy(texts + at, &q->length[k], 2);
            memcpy(texts + at + 2, q->label[k], q->length[k]);
            at += 2 + (size_t)q->length[k];
        }
        memcpy(texts + at, &count, 4);
        memcpy(texts + at + 4, tags_of + used, 8 * (size_t)tags);
        text_at[i + 1] = at + 4 + 8 * (size_t)tags;
        used += (size_t)tags;
        plans[i] = a->data + 16;
        lens[i] = a->size - 16;
        bound += head[0] + 2 * head[1] * longest;
    }
    if (i == n) {
        if (bound > tessera_placement.cap) {
            uint8_t *out = realloc(tessera_placement.out, bound);
            if (out) { tessera_placement.out = out; tessera_placement.cap = bound; }
        }
        if (bound <= tessera_placement.cap) {
            int64_t *free_at = tessera_placement.free_at[q->gpu];
            int64_t st[TESSERA_PLAN_STATE] = {0, 0, tessera_placement.submissions + 1,
                                              tessera_placement.next_event, tessera_placement.pass_instances,
                                              free_at[0], free_at[1], free_at[2]};
            memcpy(st + 8, q->floors, sizeof q->floors);
            memcpy(st + 12, q->ends, sizeof q->ends);
            /* batch after batch on one state, as the timeline places them: each from its own earliest time, each
               signal when its batch ends */
            int64_t signalled[TESSERA_IN_C_SEMAPHORES];
            long bytes = 0;
            uint32_t first = 0, waits = 0, signals = 0, k = 0;
            for (; k < b->count; k++) {
                int64_t earliest = (int64_t)host;   /* the host's call, each wait met */
                for (uint32_t end = waits + b->nwait[k]; waits < end; waits++) {
                    int64_t met = tessera_placed_signalled_at(b->wait[waits], b->wait_value[waits], b, signals,
                                                              signalled);
                    if (met > earliest) earliest = met;
                }
                size_t done = 0;
                st[0] = st[1] = earliest;
                long more = tessera_place_all(plans + first, lens + first, b->buffers[k], texts + text_at[first],
                                              text_at[first + b->buffers[k]] - text_at[first], st,
                                              tessera_placement.out + bytes, tessera_placement.cap - (size_t)bytes,
                                              &done);
                if (done != b->buffers[k] || more < 0) break;
                bytes += more;
                first += b->buffers[k];
                for (uint32_t end = signals + b->nsignal[k]; signals < end; signals++)
                    signalled[signals] = st[1] > earliest ? st[1] : earliest;
            }
            if (k == b->count && tessera_placement.check) {   /* kept; the ledger takes the submit */
                /* the state after it: st, each signalled semaphore's time, then the packets (`checked` layout) */
                size_t from = tessera_placement.checked_len, words = 2 + TESSERA_PLAN_STATE + 1 + 2 * (size_t)signals;
                size_t need = from + 8 * words + (size_t)bytes;
                if (need > tessera_placement.checked_cap) {
                    uint8_t *grown = realloc(tessera_placement.checked, need);
                    if (grown) { tessera_placement.checked = grown; tessera_placement.checked_cap = need; }
                }
                if (need <= tessera_placement.checked_cap) {
                    int64_t head[2 + TESSERA_PLAN_STATE + 1 + 2 * TESSERA_IN_C_SEMAPHORES];
                    head[0] = st[2];
                    head[1] = bytes;
                    memcpy(head + 2, st, sizeof st);
                    head[2 + TESSERA_PLAN_STATE] = signals;
                    for (uint32_t s = 0; s < signals; s++) {
                        head[3 + TESSERA_PLAN_STATE + 2 * s] = (int64_t)b->signal[s];
                        head[4 + TESSERA_PLAN_STATE + 2 * s] = signalled[s];
                    }
                    memcpy(tessera_placement.checked + from, head, 8 * words);
                    memcpy(tessera_placement.checked + from + 8 * words, tessera_placement.out, (size_t)bytes);
                    tessera_placement.checked_len = need;
                    tessera_placement.placed++;
                }
            } else if (k == b->count) {
                size_t appended;   /* staged (staged_appends.c), or written */
                int error = tessera_stage_append(tessera_placement.fd, tessera_placement.out, (size_t)bytes,
                                                 &appended);
                if (error) {   /* as the trace's own failed write: the events from here on are lost */
                    tessera_placement.write_error = error;
                    __atomic_store_n(&tessera_placing, 0, __ATOMIC_RELEASE);
                }
                tessera_placement.submissions = st[2];
                tessera_placement.next_event = st[3];
                tessera_placement.pass_instances = st[4];
                memcpy(free_at, st + 5, 3 * sizeof free_at[0]);
                memcpy(q->floors, st + 8, sizeof q->floors);
                memcpy(q->ends, st + 12, sizeof q->ends);
                for (uint32_t s = 0; s < signals; s++) {   /* checked room: tessera_placed_semaphores_ok */
                    tessera_placed_timeline *t = tessera_placed_timeline_find(b->signal[s]);
                    if (t) {   /* as Timeline._signal: the oldest kept signal goes past TESSERA_PLACED_SIGNALS */
                        if (t->count == TESSERA_PLACED_SIGNALS) {
                            memmove(t->value, t->value + 1, (t->count - 1) * sizeof t->value[0]);
                            memmove(t->time, t->time + 1, (t->count - 1) * sizeof t->time[0]);
                            t->count--;
                        }
                        t->value[t->count] = b->signal_value[s];
                        t->time[t->count++] = signalled[s];
                        continue;
                    }
                    tessera_placed_semaphore *sem = tessera_placed_semaphore_find(b->signal[s]);
                    if (!sem) {
                        sem = &tessera_placement.semaphore[tessera_placement.semaphores++];
                        sem->semaphore = b->signal[s];
                    }
                    sem->time = signalled[s];
                }
                tessera_placement.placed++;
                __atomic_add_fetch(&tessera_placement.total, 1, __ATOMIC_RELAXED);
                __atomic_add_fetch(&tessera_placement.buffers, n, __ATOMIC_RELAXED);
                placed = 1;
            }
        }
    }
    pthread_mutex_unlock(lock);
    return placed;
}

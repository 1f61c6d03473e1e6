/* ---- submits reported in C (the layer; tessera.layer.reported_submits: the design is its docstring) ----
   Static C, after submits.c and lifecycle.c. A submit whose every command buffer holds a recording C ended,
   submitted for the first time, equal to a kept one carrying a report template (tessera_product_attach: the
   WORKLOADS text between its tags, and which tags a submit lists) is reported at the submit, in the submit's
   guard, while Python holds nothing back: the layer granted the licence (tessera_placing, submits.c) with each
   queue's SUBMIT text up to its time and the transport's destination (the daemon's socket or the spool
   file, through its stage: staged_appends.c). The WORKLOADS frame of each buffer, then the SUBMIT frame, are
   written there before the submit returns; what a socket did not take waits for Python (`unsent`), and what
   it took is kept until Python takes it (`written`: the transport keeps frames until the daemon acknowledges
   them). The secondaries a buffer executes in records C made are described with it the first time, from
   templates attached to their own kept recordings (tessera_report_executed). */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#define TESSERA_REPORT_TAGS 1024         /* their tags, together */
#define TESSERA_REPORT_QUEUES 64
#define TESSERA_REPORT_PREFIX 512        /* a queue's SUBMIT text up to its time */
#define TESSERA_REPORT_WRITTEN_MAX (4u << 20)   /* bytes sent that Python has yet to take: past it, no licence */
#define TESSERA_REPORT_KEY 1             /* the attachment's second key word (the first: the buffer's address) */

#define TESSERA_REPORT_SWAPCHAINS 16
#define TESSERA_REPORT_IMAGES 16
#define TESSERA_REPORT_LABELS 4          /* the application's queue labels C keeps on one queue, at most */
#define TESSERA_REPORT_LABEL 128         /* ... each one's longest name */
/* Each queue's SUBMIT text up to its time (`prefix`), and a present's FRAME text between its time and its images
   (`present`: its device, queue and source); the application's queue labels begun on it under the licence,
   outermost first, each as its JSON string (`label`, `label_n`): what C keeps of them (tessera_report_label_in_c)
   until the ledger takes them. */
typedef struct {
    uint64_t queue;
    size_t n, present_n;
    char prefix[TESSERA_REPORT_PREFIX], present[TESSERA_REPORT_PREFIX];
    uint32_t labels;
    uint16_t label_n[TESSERA_REPORT_LABELS];
    char label[TESSERA_REPORT_LABELS][TESSERA_REPORT_LABEL + 2];
} tessera_report_queue;
/* The images of each swapchain (Python fills it at vkGetSwapchainImagesKHR): what a present shows. */
typedef struct { uint64_t swapchain; uint32_t count; uint64_t image[TESSERA_REPORT_IMAGES]; } tessera_report_swapchain;
typedef struct { uint8_t *p; size_t n, cap; } tessera_buffer;
static struct {
    int fd, socket;              /* the destination, and whether it is the daemon's socket (else the spool) */
    size_t queues;
    tessera_report_queue queue[TESSERA_REPORT_QUEUES];
    tessera_buffer out;          /* this submit's frames */
    tessera_buffer written;      /* sent on the socket since the grant */
    tessera_buffer unsent;       /* not written (the socket was full, or the write failed) */
    int error;                   /* errno of a failed write (0: none) */
    uint64_t reported, total, buffers;   /* submits reported since the grant, in all, and their buffers */
    uint64_t grant;              /* licences granted so far: the current one's number (tessera_attachment.sent_in) */
    uint64_t presents;           /* presents reported in all */
    int presenting;              /* presents under way (between tessera_present_begin and _end): no revoke */
    size_t swapchains;
    tessera_report_swapchain swapchain[TESSERA_REPORT_SWAPCHAINS];
} tessera_report;
static pthread_cond_t tessera_presented = PTHREAD_COND_INITIALIZER;   /* `presenting` fell to 0 */

static int tessera_buffer_put(tessera_buffer *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *grown = realloc(b->p, cap);
        if (!grown) return 0;
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return 1;
}

/* Each queue label C keeps, written to the ledger as the begin it is (the ledger locked: before any other record,
   and when the licence is taken back), outermost first per queue; the queue's depth (submits.c) counted them
   when they began. */
static void tessera_report_labels_write(void)
{
    for (size_t i = 0; i < tessera_report.queues; i++) {
        tessera_report_queue *q = &tessera_report.queue[i];
        uint32_t labels = q->labels;
        q->labels = 0;   /* first: the records written below call this again */
        for (uint32_t k = 0; k < labels; k++)   /* the name, without its JSON quotes */
            tessera_ledger_label_record(q->queue, TESSERA_LEDGER_LABEL_BEGIN, q->label[k] + 1, q->label_n[k] - 2u);
    }
}

/* The guard of an application's queue label begin (`name`) or end (NULL), before it records it in the ledger: 1
   when C keeps it under the licence instead (a begin on a granted queue of a name whose JSON string is itself in
   quotes: printable ASCII but for `"` and backslash, at most TESSERA_REPORT_LABEL bytes; an end of one C kept),
   so that the queue's submits are reported in C with their ANNEX (tessera_report_annexes). 0: the ledger takes
   it. */
static int tessera_report_label_in_c(VkQueue queue, const char *name)
{
    int kept = 0;
    pthread_mutex_lock(&tessera_ledger_lock);
    tessera_report_queue *q = NULL;
    for (size_t i = 0; __atomic_load_n(&tessera_placing, __ATOMIC_RELAXED) && i < tessera_report.queues; i++)
        if (tessera_report.queue[i].queue == (uint64_t)(uintptr_t)queue) q = &tessera_report.queue[i];
    if (q && name && q->labels < TESSERA_REPORT_LABELS) {
        size_t n = 0;
        while (name[n] && n <= TESSERA_REPORT_LABEL && name[n] >= 0x20 && name[n] < 0x7F && name[n] != '"'
               && name[n] != '\\')
            n++;
        if (!name[n] && n <= TESSERA_REPORT_LABEL) {
            char *text = q->label[q->labels];
            text[0] = '"';
            memcpy(text + 1, name, n);
            text[n + 1] = '"';
            q->label_n[q->labels++] = (uint16_t)(n + 2);
            tessera_queue_label_depth(q->queue, 1);
            kept = 1;
        }
    } else if (q && !name && q->labels) {
        q->labels--;
        tessera_queue_label_depth(q->queue, 0);
        kept = 1;
    }
    pthread_mutex_unlock(&tessera_ledger_lock);
    return kept;
}

/* Python: grant the licence: write to `fd` (`socket`: the daemon's non-blocking socket, else the spool file);
   `queues` (`len` bytes): per queue its address (u64), its SUBMIT text up to its time and its FRAME text of a
   present between time and images (each u16 length, bytes). 0 when refused: the ledger holds a record, or
   `queues` is damaged. */
int tessera_report_grant(int fd, int socket, const uint8_t *queues, size_t len)
{
    tessera_reader r = { queues, queues + len, 0 };
    tessera_report_queue parsed[TESSERA_REPORT_QUEUES];
    size_t n = 0;
    while (r.at < r.end) {
        if (n == TESSERA_REPORT_QUEUES) return 0;
        parsed[n].queue = tessera_read(&r, 8);
        tessera_bytes prefix = tessera_read_bytes(&r, 2), present = tessera_read_bytes(&r, 2);
        if (r.bad || prefix.n > TESSERA_REPORT_PREFIX || present.n > TESSERA_REPORT_PREFIX) return 0;
        memcpy(parsed[n].prefix, prefix.p, prefix.n);
        parsed[n].n = prefix.n;
        memcpy(parsed[n].present, present.p, present.n);
        parsed[n].labels = 0;
        parsed[n++].present_n = present.n;
    }
    pthread_mutex_lock(&tessera_ledger_lock);
    tessera_ledger *l = tessera_ledger_active;
    int granted = l->used == 0 && l->dropped == 0;
    if (granted) {
        tessera_report.fd = fd;
        tessera_report.socket = socket;
        tessera_report.queues = n;
        memcpy(tessera_report.queue, parsed, n * sizeof parsed[0]);
        tessera_report.written.n = tessera_report.unsent.n = 0;
        tessera_report.error = 0;
        tessera_report.reported = 0;
        tessera_report.grant++;
        tessera_ledger_before = tessera_report_labels_write;
        __atomic_store_n(&tessera_placing, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tessera_ledger_lock);
    return granted;
}

/* Python, before it sends anything: end the licence. The bytes sent on the socket since the grant into
   `*written` and those not written into `*unsent` (valid until the next grant), a failed write's errno into
   `*error`; returns how many submits C reported since the grant. */
long tessera_report_revoke(const uint8_t **written, size_t *written_len, const uint8_t **unsent, size_t *unsent_len,
                           int *error)
{
    pthread_mutex_lock(&tessera_ledger_lock);
    __atomic_store_n(&tessera_placing, 0, __ATOMIC_RELEASE);
    while (tessera_report.presenting)   /* a present under way writes its FRAME first */
        pthread_cond_wait(&tessera_presented, &tessera_ledger_lock);
    tessera_report_labels_write();   /* Python takes them from the ledger before it plans what follows */
    *written = tessera_report.written.p;
    *written_len = tessera_report.written.n;
    *unsent = tessera_report.unsent.p;
    *unsent_len = tessera_report.unsent.n;
    int flushed = tessera_stage_flush();   /* Python's next write to the spool follows what C staged */
    *error = tessera_report.error ? tessera_report.error : flushed;
    long reported = (long)tessera_report.reported;
    tessera_report.written.n = tessera_report.unsent.n = 0;
    tessera_report.reported = 0;
    tessera_report.error = 0;
    pthread_mutex_unlock(&tessera_ledger_lock);
    return reported;
}

/* The wait guards: nothing of Python's to write (the licence holds, and C wrote every frame it made). */
static inline int tessera_report_idle(void)
{
    return __atomic_load_n(&tessera_placing, __ATOMIC_ACQUIRE);
}

/* Python (TESSERA_LOG=info): presents reported in C so far. */
uint64_t tessera_report_presents(void) { return __atomic_load_n(&tessera_report.presents, __ATOMIC_RELAXED); }

/* Python (TESSERA_LOG=info): submits reported in C so far, and their command buffers. */
void tessera_report_counts(uint64_t *counts)
{
    counts[0] = __atomic_load_n(&tessera_report.total, __ATOMIC_RELAXED);
    counts[1] = __atomic_load_n(&tessera_report.buffers, __ATOMIC_RELAXED);
}

static size_t tessera_decimal(char *out, uint64_t v)
{
    char digits[20];
    size_t n = 0;
    do { digits[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    for (size_t i = 0; i < n; i++) out[i] = digits[n - 1 - i];
    return n;
}

static size_t tessera_hex(char *out, uint64_t v)   /* as Python's hex(): 0x, lowercase, no padding */
{
    char digits[16];
    size_t n = 0;
    do { digits[n++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    out[0] = '0'; out[1] = 'x';
    for (size_t i = 0; i < n; i++) out[2 + i] = digits[n - 1 - i];
    return 2 + n;
}

/* A frame's header (schemas/frames.py encode): u8 type, u64 sequence (sequenced types), u64 tag 0, u32 length. */
static int tessera_frame_head(tessera_buffer *b, uint8_t type, uint64_t sequence, int sequenced, uint32_t length)
{
    uint8_t head[21];
    size_t n = 0;
    head[n++] = type;
    if (sequenced) { memcpy(head + n, &sequence, 8); n += 8; }
    memset(head + n, 0, 8); n += 8;
    memcpy(head + n, &length, 4); n += 4;
    return tessera_buffer_put(b, head, n);
}

/* A report template's WORKLOADS layout (layer/encoder.report_template): `t` left at its pieces; how many
   workloads the frame describes (`*count`: its pieces but one) and, for each, the index of its tag in the
   recording's (`index`). 0 when the template is damaged or names a tag the recording lacks. */
static int tessera_template_workloads(const tessera_attachment *a, tessera_reader *t, uint32_t *count,
                                      uint32_t *index, long ntags)
{
    *t = (tessera_reader){ a->data, a->data + a->size, 0 };
    uint32_t plain = (uint32_t)tessera_read(t, 4);
    if (plain > TESSERA_REPORT_TAGS) return 0;
    t->at += 4 * (size_t)plain;
    if (t->at > t->end) return 0;
    uint32_t pieces = (uint32_t)tessera_read(t, 4);
    if (t->bad || pieces > TESSERA_REPORT_TAGS + 1) return 0;
    *count = pieces ? pieces - 1 : 0;
    for (uint32_t g = 0; g < *count; g++) {
        index[g] = (uint32_t)tessera_read(t, 4);
        if (t->bad || index[g] >= (uint64_t)ntags) return 0;
    }
    return 1;
}

/* The description of one buffer's recording submitted for the first time, from its product's template `a` (the
   recording's tags `tags`): a RECORDED_AGAIN frame pairing each of its tags with the one the workload had when
   this template's WORKLOADS last went out in full under this licence, else that WORKLOADS frame (the template's
   pieces joined with the tags in decimal; tessera_report_sent notes it once written); nothing when the template
   describes no workload. 0 when the template is damaged or memory ran out. */
static int tessera_report_workloads(tessera_buffer *b, const tessera_attachment *a, const uint64_t *tags, long ntags)
{
    tessera_reader t;
    uint32_t gaps, index[TESSERA_REPORT_TAGS];
    if (!tessera_template_workloads(a, &t, &gaps, index, ntags)) return 0;
    if (gaps == 0) return 1;
    int again = a->sent_in == tessera_report.grant && a->sent_count == gaps && a->sent_tags;
    size_t head = b->n;
    if (!tessera_frame_head(b, again ? TESSERA_FRAME_RECORDED_AGAIN : TESSERA_FRAME_WORKLOADS, 0, 0, 0)) return 0;
    size_t body = b->n;
    char digits[20];
    if (again) {
        if (!tessera_buffer_put(b, TESSERA_AGAIN_HEAD, sizeof TESSERA_AGAIN_HEAD - 1)) return 0;
        for (uint32_t g = 0; g < gaps; g++) {
            if (!tessera_buffer_put(b, g ? ",[" : "[", g ? 2 : 1)
                    || !tessera_buffer_put(b, digits, tessera_decimal(digits, tags[index[g]]))
                    || !tessera_buffer_put(b, ",", 1)
                    || !tessera_buffer_put(b, digits, tessera_decimal(digits, a->sent_tags[g]))
                    || !tessera_buffer_put(b, "]", 1))
                return 0;
        }
        if (!tessera_buffer_put(b, TESSERA_AGAIN_TAIL, sizeof TESSERA_AGAIN_TAIL - 1)) return 0;
    } else {
        for (uint32_t g = 0; g <= gaps; g++) {
            tessera_bytes piece = tessera_read_bytes(&t, 4);
            if (t.bad || !tessera_buffer_put(b, piece.p, piece.n)) return 0;
            if (g < gaps && !tessera_buffer_put(b, digits, tessera_decimal(digits, tags[index[g]]))) return 0;
        }
    }
    uint32_t length = (uint32_t)(b->n - body);
    memcpy(b->p + head + 1 + 8, &length, 4);
    return 1;
}

/* After the frames of a submit went out (tessera_report_write): note, on the template `a` of a recording whose
   WORKLOADS went out in full, this licence and that recording's tags. Without memory nothing is noted (its next
   recording is described in full again). */
static void tessera_report_sent(tessera_attachment *a, const uint64_t *tags, long ntags)
{
    tessera_reader t;
    uint32_t gaps, index[TESSERA_REPORT_TAGS];
    if (a->sent_in == tessera_report.grant || !tessera_template_workloads(a, &t, &gaps, index, ntags) || !gaps)
        return;
    if (a->sent_count != gaps) {
        free(a->sent_tags);
        a->sent_count = 0;
        if (!(a->sent_tags = malloc(gaps * sizeof a->sent_tags[0]))) return;
        a->sent_count = gaps;
    }
    for (uint32_t g = 0; g < gaps; g++) a->sent_tags[g] = tags[index[g]];
    a->sent_in = tessera_report.grant;
}

/* A report template's labels section (layer/encoder.report_template: after its pieces): the JSON of each plain
   workload's own labels into `texts` (room for TESSERA_REPORT_TAGS; NULL: only whether there is one for each). 0
   when the template holds none, or is damaged. */
static int tessera_template_labels(const tessera_attachment *a, tessera_bytes *texts)
{
    tessera_reader t = { a->data, a->data + a->size, 0 };
    uint32_t plain = (uint32_t)tessera_read(&t, 4);
    if (plain > TESSERA_REPORT_TAGS) return 0;
    t.at += 4 * (size_t)plain;
    if (t.at > t.end) return 0;
    uint32_t pieces = (uint32_t)tessera_read(&t, 4);
    if (t.bad || pieces > TESSERA_REPORT_TAGS + 1) return 0;
    t.at += 4 * (size_t)(pieces ? pieces - 1 : 0);
    if (t.at > t.end) return 0;
    for (uint32_t k = 0; k < pieces; k++) tessera_read_bytes(&t, 4);
    uint32_t count = (uint32_t)tessera_read(&t, 4);
    if (t.bad || count != plain) return 0;
    for (uint32_t k = 0; k < count; k++) {
        tessera_bytes text = tessera_read_bytes(&t, 2);
        if (texts) texts[k] = text;
    }
    return !t.bad;
}

/* The ANNEX frame of each plain workload of a buffer reported inside the queue's labels C keeps (`q`), from its
   template `a` (the recording's tags `tags`): as layer/encoder.annexes writes one, its label stack at the submit,
   the queue's labels, then the workload's own. 0 when the template is damaged or memory ran out. */
static int tessera_report_annexes(tessera_buffer *b, const tessera_report_queue *q, const tessera_attachment *a,
                                  uint64_t submit_id, const uint64_t *tags, long ntags)
{
    tessera_bytes own[TESSERA_REPORT_TAGS];
    if (!tessera_template_labels(a, own)) return 0;
    tessera_reader t = { a->data, a->data + a->size, 0 };
    uint32_t plain = (uint32_t)tessera_read(&t, 4);
    for (uint32_t k = 0; k < plain; k++) {
        uint32_t index = (uint32_t)tessera_read(&t, 4);
        if (t.bad || index >= (uint64_t)ntags) return 0;
        uint8_t head[21];
        head[0] = TESSERA_FRAME_ANNEX;
        memcpy(head + 1, &submit_id, 8);
        memcpy(head + 9, &tags[index], 8);
        size_t at = b->n;
        if (!tessera_buffer_put(b, head, sizeof head)
                || !tessera_buffer_put(b, TESSERA_ANNEX_LABELS_HEAD, sizeof TESSERA_ANNEX_LABELS_HEAD - 1))
            return 0;
        for (uint32_t l = 0; l < q->labels; l++)
            if ((l && !tessera_buffer_put(b, ",", 1)) || !tessera_buffer_put(b, q->label[l], q->label_n[l])) return 0;
        if (own[k].n && (!tessera_buffer_put(b, ",", 1) || !tessera_buffer_put(b, own[k].p, own[k].n))) return 0;
        if (!tessera_buffer_put(b, TESSERA_ANNEX_LABELS_TAIL, sizeof TESSERA_ANNEX_LABELS_TAIL - 1)) return 0;
        uint32_t length = (uint32_t)(b->n - at - sizeof head);
        memcpy(b->p + at + 17, &length, 4);
    }
    return 1;
}

/* Write the frames built (to the spool through its stage, staged_appends.c); what is not written waits in
   `unsent` and ends the licence. */
static void tessera_report_write(const uint8_t *p, size_t n)
{
    if (!tessera_report.socket) {
        size_t done;
        int error = tessera_stage_append(tessera_report.fd, p, n, &done);
        if (error) tessera_report.error = error;
        p += done;
        n -= done;
    }
    while (n && tessera_report.socket) {
        ssize_t w = send(tessera_report.fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) tessera_report.error = errno;
            break;
        }
        if (!tessera_buffer_put(&tessera_report.written, p, (size_t)w)) {
            tessera_report.error = ENOMEM;   /* sent, but Python cannot keep it until acknowledged */
        }
        p += w;
        n -= (size_t)w;
    }
    if (n) tessera_buffer_put(&tessera_report.unsent, p, n);
    if (n || tessera_report.error || tessera_report.written.n > TESSERA_REPORT_WRITTEN_MAX)
        __atomic_store_n(&tessera_placing, 0, __ATOMIC_RELEASE);
}

/* (the ledger locked) The granted queue `queue`, or NULL. */
static const tessera_report_queue *tessera_report_queue_of(VkQueue queue)
{
    for (size_t i = 0; i < tessera_report.queues; i++)
        if (tessera_report.queue[i].queue == (uint64_t)(uintptr_t)queue) return &tessera_report.queue[i];
    return NULL;
}

/* How a buffer of a submit is reported: its recording's first submit (its WORKLOADS, then its plain tags in the
   SUBMIT), a later one (the plain tags alone), both from the template attached to the kept product its recording
   equals; or a buffer submitted again as it is (pre-recorded), from the tags attached to the recording itself. */
enum { TESSERA_FIRST, TESSERA_AGAIN, TESSERA_AS_IT_IS };

/* The secondaries a submit's primaries execute in records C made (lifecycle.c tessera_execute_in_c) whose recordings
   no report or reading described yet: each one's template (attached to the kept recording it equals under its own
   address), where its tags are in the submit's `tags`, and how many. */
typedef struct {
    size_t n;
    tessera_cb *cbs[TESSERA_IN_C_MAX];
    const tessera_attachment *templates[TESSERA_IN_C_MAX];
    size_t tag_at[TESSERA_IN_C_MAX];
    long count[TESSERA_IN_C_MAX];
} tessera_report_secondaries;

/* (the ledger and the thread's stripe locked) Into `out`, the secondaries the `n` buffers `cbs` execute that are to be
   described with the submit (their tags into `tags` from `at`): a secondary whose recording a report or a reading
   described already (TESSERA_REPORTED_IN_C, TESSERA_READ_IN_PYTHON; its hooks ran: not ended in C any more) is not;
   each once. 0 when C cannot: a secondary's recording not kept (or no template attached to it), more than
   TESSERA_IN_C_MAX of them, more tags than TESSERA_REPORT_TAGS. */
static int tessera_report_executed(tessera_cb *const *cbs, uint32_t n, uint64_t *tags, size_t at,
                                   tessera_report_secondaries *out)
{
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < cbs[i]->executed_count; k++) {
            tessera_cb *s = tessera_cb_find(cbs[i]->executed[k]);
            if (!s) return 0;
            int deferred = __atomic_load_n(&s->deferred, __ATOMIC_ACQUIRE);
            if (!(deferred & TESSERA_ENDED_IN_C) || deferred & (TESSERA_REPORTED_IN_C | TESSERA_READ_IN_PYTHON))
                continue;
            size_t j = 0;
            while (j < out->n && out->cbs[j] != s) j++;
            if (j < out->n) continue;   /* executed twice */
            if (out->n == TESSERA_IN_C_MAX || s->end_result != 0 || s->dropped) return 0;
            long c = -1;
            const tessera_product *p = tessera_product_equal(s, s->end_hash, tags + at, TESSERA_REPORT_TAGS - at, &c);
            const tessera_attachment *a = p && c >= 0 ? tessera_attachment_find(p, (uint64_t)(uintptr_t)s->handle,
                                                                               TESSERA_REPORT_KEY) : NULL;
            if (!a) return 0;
            out->cbs[out->n] = s;
            out->templates[out->n] = a;
            out->tag_at[out->n] = at;
            out->count[out->n++] = c;
            at += (size_t)c;
        }
    return 1;
}

/* The submit's guard, the ledger locked, after the next element accepted the submit (one batch: the `n`
   command buffers `cbs` on `queue`; its submitID, whether it was `wrapped` in s<submitID>, the frame,
   MONOTONIC_RAW at the call and the return): 1 when C reported it (no ledger record then), 0 when Python must
   (nothing changed). */
static int tessera_report_submit(VkQueue queue, uint64_t submit_id, int wrapped, uint64_t frame, uint64_t called,
                                 uint64_t returned, tessera_cb *const *cbs, uint32_t n)
{
    if (!__atomic_load_n(&tessera_placing, __ATOMIC_RELAXED) || n == 0 || n > TESSERA_IN_C_MAX) return 0;
    const tessera_report_queue *q = tessera_report_queue_of(queue);
    if (!q) return 0;
    /* inside the application's queue labels: only those C keeps (their ANNEX is known here) */
    uint64_t depth = tessera_queue_depth_locked((uint64_t)(uintptr_t)queue);
    if (depth && depth != q->labels) return 0;
    uint64_t tags[TESSERA_REPORT_TAGS];
    const tessera_attachment *templates[TESSERA_IN_C_MAX];
    int kind[TESSERA_IN_C_MAX];
    size_t tag_at[TESSERA_IN_C_MAX + 1];
    long count[TESSERA_IN_C_MAX];
    tessera_buffer *b = &tessera_report.out;
    b->n = 0;
    int reported = 0;
    pthread_mutex_t *lock = &tessera_my_stripe()->products;   /* the kept products and their templates stay */
    pthread_mutex_lock(lock);
    uint32_t i = 0;
    tag_at[0] = 0;
    for (; i < n; i++) {
        const tessera_cb *cb = cbs[i];
        templates[i] = NULL;
        count[i] = 0;
        if (__atomic_load_n(&cb->deferred, __ATOMIC_ACQUIRE) & TESSERA_ENDED_IN_C && cb->end_result == 0
                && !cb->dropped) {
            long c = -1;
            const tessera_product *p = tessera_product_equal(cb, cb->end_hash, tags + tag_at[i],
                                                             TESSERA_REPORT_TAGS - tag_at[i], &c);
            if (p && c >= 0) templates[i] = tessera_attachment_find(p, (uint64_t)(uintptr_t)cb->handle,
                                                                    TESSERA_REPORT_KEY);
            if (templates[i]) {
                count[i] = c;
                kind[i] = cb->submits == 0 ? TESSERA_FIRST : TESSERA_AGAIN;
            }
        }
        if (!templates[i] && cb->submits != 0 && !depth) {   /* its tags alone: no ANNEX of them known */
            templates[i] = tessera_cb_attachment(cb, TESSERA_REPORT_KEY);
            kind[i] = TESSERA_AS_IT_IS;
        }
        if (!templates[i] || (depth && !tessera_template_labels(templates[i], NULL))) break;
        tag_at[i + 1] = tag_at[i] + (size_t)count[i];
    }
    tessera_report_secondaries described = { .n = 0 };
    if (i == n && !tessera_report_executed(cbs, n, tags, tag_at[n], &described)) i = 0;   /* Python reads them */
    if (i == n) {
        /* the WORKLOADS of each secondary executed and not described yet and of each recording submitted for the
           first time, then the SUBMIT */
        int ok = 1;
        char text[64];
        for (size_t j = 0; ok && j < described.n; j++)
            ok = tessera_report_workloads(b, described.templates[j], tags + described.tag_at[j], described.count[j]);
        for (i = 0; ok && i < n; i++)
            if (kind[i] == TESSERA_FIRST) ok = tessera_report_workloads(b, templates[i], tags + tag_at[i], count[i]);
        size_t head = b->n;
        ok = ok && tessera_frame_head(b, TESSERA_FRAME_SUBMIT, submit_id, 1, 0);
        size_t body = b->n;
        ok = ok && tessera_buffer_put(b, q->prefix, q->n)
             && tessera_buffer_put(b, text, tessera_decimal(text, called))
             && tessera_buffer_put(b, ",\"duration_ns\":", 15)
             && tessera_buffer_put(b, text, tessera_decimal(text, returned - called))
             && tessera_buffer_put(b, ",\"command_buffers\":[", 20);
        for (i = 0; ok && i < n; i++) {
            text[0] = '"';
            size_t k = 1 + tessera_hex(text + 1, (uint64_t)(uintptr_t)cbs[i]->handle);
            text[k++] = '"';
            ok = (i == 0 || tessera_buffer_put(b, ",", 1)) && tessera_buffer_put(b, text, k);
        }
        ok = ok && tessera_buffer_put(b, "],\"tags\":[", 10);
        int first = 1;
        for (i = 0; ok && i < n; i++) {
            if (kind[i] == TESSERA_AS_IT_IS) {   /* its tags, as text */
                if (templates[i]->size)
                    ok = (first || tessera_buffer_put(b, ",", 1))
                         && tessera_buffer_put(b, templates[i]->data, templates[i]->size);
                first = first && !templates[i]->size;
                continue;
            }
            tessera_reader t = { templates[i]->data, templates[i]->data + templates[i]->size, 0 };
            uint32_t plain = (uint32_t)tessera_read(&t, 4);
            for (uint32_t k = 0; ok && k < plain; k++) {
                uint32_t index = (uint32_t)tessera_read(&t, 4);
                if (t.bad || index >= (uint64_t)count[i]) { ok = 0; break; }
                ok = (first || tessera_buffer_put(b, ",", 1))
                     && tessera_buffer_put(b, text, tessera_decimal(text, tags[tag_at[i] + index]));
                first = 0;
            }
        }
        ok = ok && tessera_buffer_put(b, "],\"frame\":", 10)
             && tessera_buffer_put(b, text, tessera_decimal(text, frame))
             && (wrapped ? tessera_buffer_put(b, ",\"annexed\":true}", 16)
                         : tessera_buffer_put(b, ",\"annexed\":false}", 17));
        if (ok) {
            uint32_t length = (uint32_t)(b->n - body);
            memcpy(b->p + head + 1 + 8 + 8, &length, 4);
        }
        for (i = 0; ok && depth && i < n; i++)   /* then each workload's ANNEX: its label stack at the submit */
            ok = tessera_report_annexes(b, q, templates[i], submit_id, tags + tag_at[i], count[i]);
        if (ok) {
            tessera_report_write(b->p, b->n);
            for (size_t j = 0; j < described.n; j++) {   /* reported as its primary's buffers are, once */
                tessera_report_sent((tessera_attachment *)described.templates[j], tags + described.tag_at[j],
                                    described.count[j]);
                __atomic_or_fetch(&described.cbs[j]->deferred, TESSERA_REPORTED_IN_C, __ATOMIC_ACQ_REL);
                described.cbs[j]->reported++;
            }
            for (i = 0; i < n; i++) {   /* its hooks run only if something looks at it (lifecycle.c) */
                if (kind[i] == TESSERA_AS_IT_IS) continue;   /* its hooks ran */
                if (kind[i] == TESSERA_FIRST)   /* the products' templates stay: the stripe is locked */
                    tessera_report_sent((tessera_attachment *)templates[i], tags + tag_at[i], count[i]);
                __atomic_or_fetch(&cbs[i]->deferred, TESSERA_REPORTED_IN_C, __ATOMIC_ACQ_REL);
                cbs[i]->reported++;
            }
            tessera_report.reported++;
            __atomic_add_fetch(&tessera_report.total, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&tessera_report.buffers, n, __ATOMIC_RELAXED);
            reported = 1;
        }
    }
    pthread_mutex_unlock(lock);
    return reported;
}


/* Python (vkGetSwapchainImagesKHR, vkDestroySwapchainKHR): the images of `swapchain` (`count` of them; 0: it is gone),
   what a present reported in C names; one past TESSERA_REPORT_SWAPCHAINS or TESSERA_REPORT_IMAGES is not kept (its
   presents take Python). */
void tessera_report_swapchain_images(uint64_t swapchain, const uint64_t *images, uint32_t count)
{
    pthread_mutex_lock(&tessera_ledger_lock);
    size_t i = 0;
    while (i < tessera_report.swapchains && tessera_report.swapchain[i].swapchain != swapchain) i++;
    if (i < tessera_report.swapchains)   /* forgotten: replaced by the last */
        tessera_report.swapchain[i] = tessera_report.swapchain[--tessera_report.swapchains];
    if (count && count <= TESSERA_REPORT_IMAGES && tessera_report.swapchains < TESSERA_REPORT_SWAPCHAINS) {
        tessera_report_swapchain *sc = &tessera_report.swapchain[tessera_report.swapchains++];
        sc->swapchain = swapchain;
        sc->count = count;
        memcpy(sc->image, images, count * sizeof images[0]);
    }
    pthread_mutex_unlock(&tessera_ledger_lock);
}

static const tessera_report_swapchain *tessera_report_swapchain_of(uint64_t swapchain)
{
    for (size_t i = 0; i < tessera_report.swapchains; i++)
        if (tessera_report.swapchain[i].swapchain == swapchain) return &tessera_report.swapchain[i];
    return NULL;
}

/* The guard of vkQueuePresentKHR, before the call: 1 when C reports the present (its FRAME, after the call:
   tessera_present_end): the licence holds, the queue and every swapchain are known, no VkFrameBoundaryEXT
   (which names the frame: Python). The licence is not revoked until its FRAME is written. */
static int tessera_present_begin(VkQueue queue, const VkPresentInfoKHR *info)
{
    if (!__atomic_load_n(&tessera_placing, __ATOMIC_RELAXED) || !info || info->swapchainCount > TESSERA_REPORT_SWAPCHAINS
            || tessera_has_frame_boundary(info->pNext))
        return 0;
    int ok = 0;
    pthread_mutex_lock(&tessera_ledger_lock);
    if (__atomic_load_n(&tessera_placing, __ATOMIC_RELAXED)) {
        ok = tessera_report_queue_of(queue) != NULL;
        for (uint32_t i = 0; ok && i < info->swapchainCount; i++)
            ok = tessera_report_swapchain_of((uint64_t)info->pSwapchains[i]) != NULL;
        if (ok) tessera_report.presenting++;
    }
    pthread_mutex_unlock(&tessera_ledger_lock);
    return ok;
}

/* After the call that tessera_present_begin let C report: the FRAME (as layer/encoder.frame writes it: the frame
   number, MONOTONIC_RAW now, the queue's text, each swapchain's image shown, "0x0" for one it does not have),
   written, and the frame counted. */
static void tessera_present_end(VkQueue queue, const VkPresentInfoKHR *info)
{
    uint64_t now = tessera_clock(CLOCK_MONOTONIC_RAW);
    pthread_mutex_lock(&tessera_ledger_lock);
    const tessera_report_queue *q = tessera_report_queue_of(queue);
    uint64_t frame = __atomic_load_n(&tessera_frame, __ATOMIC_RELAXED);
    tessera_buffer *b = &tessera_report.out;
    b->n = 0;
    char text[64];
    int ok = q && tessera_frame_head(b, TESSERA_FRAME_FRAME, 0, 0, 0);
    size_t body = b->n;
    ok = ok && tessera_buffer_put(b, "{\"frame\":", 9) && tessera_buffer_put(b, text, tessera_decimal(text, frame))
         && tessera_buffer_put(b, ",\"time_ns\":", 11) && tessera_buffer_put(b, text, tessera_decimal(text, now))
         && tessera_buffer_put(b, q->present, q->present_n) && tessera_buffer_put(b, ",\"images\":[", 11);
    for (uint32_t i = 0; ok && i < info->swapchainCount; i++) {
        const tessera_report_swapchain *sc = tessera_report_swapchain_of((uint64_t)info->pSwapchains[i]);
        uint32_t index = info->pImageIndices[i];
        text[0] = '"';
        size_t k = 1 + tessera_hex(text + 1, sc && index < sc->count ? sc->image[index] : 0);
        text[k++] = '"';
        ok = (i == 0 || tessera_buffer_put(b, ",", 1)) && tessera_buffer_put(b, text, k);
    }
    ok = ok && tessera_buffer_put(b, "]}", 2);
    if (ok) {
        uint32_t length = (uint32_t)(b->n - body);
        memcpy(b->p + 1 + 8, &length, 4);
        tessera_report_write(b->p, b->n);
        __atomic_store_n(&tessera_frame, frame + 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&tessera_report.presents, 1, __ATOMIC_RELAXED);
    } else {   /* cannot happen but for memory: the frame is not counted, Python's next present names it */
        __atomic_store_n(&tessera_placing, 0, __ATOMIC_RELEASE);
    }
    if (--tessera_report.presenting == 0) pthread_cond_broadcast(&tessera_presented);
    pthread_mutex_unlock(&tessera_ledger_lock);
}

/* The driver's placement plans in C (icd/placement_plans.py): place a recording's GPU events on the
 * emulated timeline from its plan and append their TracePacket bytes, as Plan.place does in Python.
 *
 * The plan arrives as bytes Python made (placement_plans._native_plan): every protobuf key and constant
 * part comes from there (icd/event_packets.py is the one layout), so this file knows the shape of the
 * work, not the trace format. All integers little-endian:
 *
 *   header: u32 steps, then 10 byte strings (u16 length + bytes): event_id key, render pass instance key,
 *           timestamp key, event key, packet key, the packet's sequence head, extra_data key, the label
 *           entry's name part, the label stack entry's name part, the value key
 *   step:   u8 kind: 0 an event, 1 a barrier
 *   barrier: u8 source classes, u8 destination classes (bit i: class i of scheduler.CLASSES)
 *   event:  u8 class, u8 hardware queue, u8 flags (1: a render pass phase, 2: its main phase), u64 duration,
 *           i16 the token of the innermost t<tag> label (-1: none),
 *           u16 tokens, each u8 kind (0: text, u16 length + bytes; 1: a slot, u32 index into `texts`),
 *           u32 length + the parts before the labels, u32 + the parts after them, u32 + the tail
 *
 * `texts`: this placement's slot texts (the label stack's parts that change between placements), each
 * u16 length + bytes, at most TESSERA_PLAN_SLOTS. `state` (in/out; written back only on success): [0]
 * earliest, [1] end, [2] submission id, [3] next event id, [4] render pass instances, [5..7] each hardware
 * queue's free time, [8..11] each class's floor, [12..15] each class's last end. Returns the bytes written
 * to `out`, -1 if `cap` is too small, -2 if the plan or the texts are damaged (nothing is written back
 * then). */

#define TESSERA_PLAN_STRINGS 10
#define TESSERA_PLAN_SLOTS 256
#define TESSERA_PLAN_STATE 16
#define TESSERA_LABEL_MAX 4096

typedef struct { uint8_t *at, *end; int full; } tessera_writer;

/* Inlined: an event's packet is some twenty puts and varints, each a few bytes. */
static inline __attribute__((always_inline)) void tessera_put(tessera_writer *w, const void *p, size_t n)
{
    if (w->full || (size_t)(w->end - w->at) < n) { w->full = 1; return; }
    memcpy(w->at, p, n);
    w->at += n;
}

static inline __attribute__((always_inline)) void tessera_varint(tessera_writer *w, uint64_t v)
{
    if (w->full || w->end - w->at < 10) {   /* near the end: as many bytes as it takes, or full */
        uint8_t b[10];
        size_t n = 0;
        while (v >= 0x80) { b[n++] = (uint8_t)(v | 0x80); v >>= 7; }
        b[n++] = (uint8_t)v;
        tessera_put(w, b, n);
        return;
    }
    uint8_t *at = w->at;
    while (v >= 0x80) { *at++ = (uint8_t)(v | 0x80); v >>= 7; }
    *at++ = (uint8_t)v;
    w->at = at;
}

static size_t tessera_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

/* One extra_data entry: key, length, name part, value key, value length, value. */
static inline __attribute__((always_inline)) void tessera_entry(tessera_writer *w, tessera_bytes key,
                                                               tessera_bytes name, tessera_bytes value_key,
                                                               const char *value, size_t n)
{
    tessera_put(w, key.p, key.n);
    tessera_varint(w, name.n + value_key.n + tessera_varint_size(n) + n);
    tessera_put(w, name.p, name.n);
    tessera_put(w, value_key.p, value_key.n);
    tessera_varint(w, n);
    tessera_put(w, value, n);
}

static size_t tessera_entry_size(tessera_bytes key, tessera_bytes name, tessera_bytes value_key, size_t n)
{
    size_t inner = name.n + value_key.n + tessera_varint_size(n) + n;
    return key.n + tessera_varint_size(inner) + inner;
}

long tessera_place_events(const uint8_t *plan, size_t plan_len, const uint8_t *texts, size_t texts_len,
                          int64_t *state, uint8_t *out, size_t cap)
{
    tessera_reader r = { plan, plan + plan_len, 0 };
    tessera_writer w = { out, out + cap, 0 };
    int64_t st[TESSERA_PLAN_STATE];
    memcpy(st, state, sizeof st);
    /* this placement's slot texts: the queue's labels on entry, then the recording's t<tag> labels */
    tessera_reader tr = { texts, texts + texts_len, 0 };
    tessera_bytes slot[TESSERA_PLAN_SLOTS];
    size_t nslots = 0;
    while (tr.at < tr.end) {
        if (nslots == TESSERA_PLAN_SLOTS) return -2;
        slot[nslots++] = tessera_read_bytes(&tr, 2);
    }
    uint32_t steps = (uint32_t)tessera_read(&r, 4);
    tessera_bytes s[TESSERA_PLAN_STRINGS];
    for (int i = 0; i < TESSERA_PLAN_STRINGS; i++) s[i] = tessera_read_bytes(&r, 2);
    const tessera_bytes k_event_id = s[0], k_instance = s[1], k_timestamp = s[2], k_event = s[3], k_packet = s[4],
        head = s[5], k_extra = s[6], label_name = s[7], stack_name = s[8], k_value = s[9];
    if (r.bad || tr.bad) return -2;
    int64_t binning_end = 0;
    char stack[TESSERA_LABEL_MAX];
    for (uint32_t i = 0; i < steps; i++) {
        uint8_t kind = (uint8_t)tessera_read(&r, 1);
        if (kind == 1) {   /* a barrier: the destination classes wait for the source classes' last ends */
            uint8_t src = (uint8_t)tessera_read(&r, 1), dst = (uint8_t)tessera_read(&r, 1);
            int64_t done = 0;
            for (int c = 0; c < 4; c++) if ((src >> c) & 1 && st[12 + c] > done) done = st[12 + c];
            for (int c = 0; c < 4; c++) if ((dst >> c) & 1 && done > st[8 + c]) st[8 + c] = done;
            continue;
        }
        uint8_t cls = (uint8_t)tessera_read(&r, 1), queue = (uint8_t)tessera_read(&r, 1);
        uint8_t flags = (uint8_t)tessera_read(&r, 1);
        int64_t duration = (int64_t)tessera_read(&r, 8);
        int16_t innermost = (int16_t)tessera_read(&r, 2);
        uint16_t ntokens = (uint16_t)tessera_read(&r, 2);
        if (r.bad || kind != 0 || cls > 3 || queue > 2) return -2;
        /* the label stack's text, " / " between labels, and where the innermost t<tag> label is in it */
        size_t len = 0, innermost_at = 0, innermost_len = 0;
        for (uint16_t t = 0; t < ntokens; t++) {
            const char *text;
            size_t n;
            if (tessera_read(&r, 1) == 0) {
                tessera_bytes b = tessera_read_bytes(&r, 2);
                text = (const char *)b.p; n = b.n;
            } else {
                uint32_t index = (uint32_t)tessera_read(&r, 4);
                if (index >= nslots) return -2;
                text = (const char *)slot[index].p; n = slot[index].n;
            }
            if (r.bad || len + n + 3 > sizeof stack) return -2;
            if (t > 0) { memcpy(stack + len, " / ", 3); len += 3; }
            if (t == innermost) { innermost_at = len; innermost_len = n; }
            memcpy(stack + len, text, n);
            len += n;
        }
        tessera_bytes before = tessera_read_bytes(&r, 4), after = tessera_read_bytes(&r, 4),
            tail = tessera_read_bytes(&r, 4);
        if (r.bad) return -2;
        /* where it lands: as EmulatedGpu.place and QueueOrder do */
        int64_t start = st[0];
        if (st[8 + cls] > start) start = st[8 + cls];
        if (st[5 + queue] > start) start = st[5 + queue];
        int64_t instance = -1;
        if (flags & 1) {
            if (flags & 2) { if (binning_end > start) start = binning_end; }
            else st[4]++;
            instance = st[4];
        }
        int64_t stop = start + duration;
        if ((flags & 1) && !(flags & 2)) binning_end = stop;
        st[5 + queue] = stop;
        if (stop > st[12 + cls]) st[12 + cls] = stop;
        if (stop > st[1]) st[1] = stop;
        /* the event: event_id, the parts before the labels, the labels, after them, submission, tail; its
           length first (the packet and the event are length-delimited), then its bytes straight to `out` */
        int tagged = ntokens && innermost >= 0 && innermost < ntokens;
        size_t event_len = k_event_id.n + tessera_varint_size((uint64_t)st[3]) + before.n + after.n
            + tessera_varint_size((uint64_t)st[2]) + tail.n
            + (ntokens ? tessera_entry_size(k_extra, stack_name, k_value, len) : 0)
            + (tagged ? tessera_entry_size(k_extra, label_name, k_value, innermost_len) : 0)
            + (instance >= 0 ? k_instance.n + tessera_varint_size((uint64_t)instance) : 0);
        size_t packet_len = k_timestamp.n + tessera_varint_size((uint64_t)start) + head.n + k_event.n
            + tessera_varint_size(event_len) + event_len;
        tessera_put(&w, k_packet.p, k_packet.n);
        tessera_varint(&w, packet_len);
        tessera_put(&w, k_timestamp.p, k_timestamp.n);
        tessera_varint(&w, (uint64_t)start);
        tessera_put(&w, head.p, head.n);
        tessera_put(&w, k_event.p, k_event.n);
        tessera_varint(&w, event_len);
        tessera_put(&w, k_event_id.p, k_event_id.n);
        tessera_varint(&w, (uint64_t)st[3]++);
        tessera_put(&w, before.p, before.n);
        if (tagged) tessera_entry(&w, k_extra, label_name, k_value, stack + innermost_at, innermost_len);
        if (ntokens) tessera_entry(&w, k_extra, stack_name, k_value, stack, len);
        tessera_put(&w, after.p, after.n);
        tessera_varint(&w, (uint64_t)st[2]);
        tessera_put(&w, tail.p, tail.n);
        if (instance >= 0) {
            tessera_put(&w, k_instance.p, k_instance.n);
            tessera_varint(&w, (uint64_t)instance);
        }
        if (w.full) return -1;
    }
    if (r.bad) return -2;
    memcpy(state, st, sizeof st);
    return (long)(w.at - out);
}

/* Place `count` recordings one after another, as `count` calls of tessera_place_events on one `state`
 * would: recording i's plan is plans[i] (plan_lens[i] bytes), its slot texts made from the i-th part of
 * `texts`: a u32 length and the queue's labels on entry as tessera_place_events takes texts, then a u32
 * count and the recording's tags (u64 each), whose t<tag> labels (tessera_tag_text) are the slots after
 * them. One call for a batch's stretch of planned recordings (icd/placement_plans.NativePlacer.place_all).
 * Stops at the first recording refused (its part damaged, or what tessera_place_events refuses): `*placed`
 * says how many were placed, their bytes in `out` and their effect in `state`; the return value is those
 * bytes' length. */
long tessera_place_all(const uint8_t *const *plans, const size_t *plan_lens, size_t count, const uint8_t *texts,
                       size_t texts_len, int64_t *state, uint8_t *out, size_t cap, size_t *placed)
{
    tessera_reader tr = { texts, texts + texts_len, 0 };
    size_t written = 0;
    uint8_t scratch[8192];
    *placed = 0;
    for (size_t i = 0; i < count; i++) {
        tessera_bytes entry = tessera_read_bytes(&tr, 4);
        uint64_t ntags = tessera_read(&tr, 4);
        if (tr.bad || ntags > TESSERA_PLAN_SLOTS || (size_t)(tr.end - tr.at) < 8 * ntags) break;
        /* each tag's slot: a u16 length and its t<tag> label */
        size_t need = entry.n + ntags * (2 + TESSERA_TAG_TEXT);
        uint8_t *slots = need <= sizeof scratch ? scratch : malloc(need);
        if (!slots) break;
        memcpy(slots, entry.p, entry.n);
        size_t at = entry.n;
        for (uint64_t k = 0; k < ntags; k++) {
            size_t n = tessera_tag_text((char *)slots + at + 2, tessera_read(&tr, 8));
            slots[at] = (uint8_t)n;
            slots[at + 1] = 0;
            at += 2 + (size_t)n;
        }
        long n = tessera_place_events(plans[i], plan_lens[i], slots, at, state, out + written, cap - written);
        if (slots != scratch) free(slots);
        if (n < 0) break;
        written += (size_t)n;
        *placed = i + 1;
    }
    return (long)written;
}

/* ---- reading bytes Python made (placement plans, report templates, a licence's queues) ----
   Static C for the runtime files that read them (event_packets.c, placed_submits.c, reported_submits.c): every
   read is bounded by the end; one past it marks the reader bad, and what it read then is 0 or empty.
   Integers are little-endian. Inlined: a plan's event is a dozen small reads, each of a constant size. */
typedef struct { const uint8_t *p; size_t n; } tessera_bytes;
typedef struct { const uint8_t *at, *end; int bad; } tessera_reader;

static inline __attribute__((always_inline)) uint64_t tessera_read(tessera_reader *r, size_t n)
{
    uint64_t v = 0;
    if (r->bad || (size_t)(r->end - r->at) < n) { r->bad = 1; return 0; }
    for (size_t i = 0; i < n; i++) v |= (uint64_t)r->at[i] << (8 * i);
    r->at += n;
    return v;
}

static inline __attribute__((always_inline)) tessera_bytes tessera_read_bytes(tessera_reader *r,
                                                                             size_t length_size)
{
    tessera_bytes b = { NULL, 0 };
    size_t n = (size_t)tessera_read(r, length_size);
    if (r->bad || (size_t)(r->end - r->at) < n) { r->bad = 1; return b; }
    b.p = r->at; b.n = n;
    r->at += n;
    return b;
}

/* A harness for the shims' static C (vkapi/runtime/) that runs without Vulkan and without Python:
   the command-buffer map and arenas (recorder.c), the submit ledger (submits.c), begins and ends made in C
   (lifecycle.c), kept answers
   (answers.c) and the guards' next functions (guards.c). tests/vkapi/test_runtime_c.py compiles it
   after a shim's Vulkan declarations, the generator's #defines and those files, under
   AddressSanitizer and UBSan, and runs it. Prints "ok" and returns 0, or names the failed check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
                              exit(1); } } while (0)

static void *key(size_t i) { return (void *)(uintptr_t)(0x10000 + i * 16); }

static int label_depth, labels;
static char last_label[32];
static void fake_label_begin(VkCommandBuffer commandBuffer, const VkDebugUtilsLabelEXT *label)
{
    (void)commandBuffer;
    CHECK(label->sType == 1000128002 && label->pNext == NULL);
    snprintf(last_label, sizeof last_label, "%s", label->pLabelName);
    label_depth++;
    labels++;
}
static void fake_label_end(VkCommandBuffer commandBuffer) { (void)commandBuffer; label_depth--; }
static void fake_marker_begin(VkCommandBuffer commandBuffer, const VkDebugMarkerMarkerInfoEXT *marker)
{
    (void)commandBuffer;
    snprintf(last_label, sizeof last_label, "%s", marker->pMarkerName);
    label_depth++;
}
static void fake_marker_end(VkCommandBuffer commandBuffer) { (void)commandBuffer; label_depth--; }
static void fake_queue_begin(VkQueue queue, const VkDebugUtilsLabelEXT *label)
{
    (void)queue;
    snprintf(last_label, sizeof last_label, "%s", label->pLabelName);
}
static void fake_queue_end(VkQueue queue) { (void)queue; }
static void fake_next_a(void) {}
static void fake_next_b(void) {}

/* The map: growth past its first table, tombstones, a reused handle, and the arenas behind it. */
static void map_and_arenas(void)
{
    static tessera_device dev;
    enum { N = 3000 };
    CHECK(tessera_cb_find(key(1)) == NULL);
    for (size_t i = 0; i < N; i++) CHECK(tessera_cb_register(key(i), &dev, 1, 0));
    for (size_t i = 0; i < N; i++) {
        tessera_cb *cb = tessera_cb_find(key(i));
        CHECK(cb && cb->handle == key(i) && cb->dev == &dev && cb->last_index == UINT32_MAX);
    }
    CHECK(tessera_cb_find((void *)(uintptr_t)8) == NULL);

    /* Records of slots and extra bytes, past the first 4096-byte page several times. */
    tessera_cb *cb = tessera_cb_find(key(7));
    for (uint64_t k = 0; k < 1000; k++) {
        uint64_t *slot = tessera_record(cb, 0, 2, 13);
        CHECK(slot);
        slot[0] = k;
        slot[1] = 13;
        memset(slot + 2, 0xab, 13);
    }
    uint8_t *data;
    size_t used;
    uint64_t dropped;
    CHECK(tessera_cb_records(key(7), &data, &used, &dropped));
    CHECK(used == 1000 * (8 + 16 + 16) && dropped == 0);
    for (size_t at = 0, k = 0; at < used; k++) {
        uint32_t *head = (uint32_t *)(data + at);
        uint64_t *slot = (uint64_t *)(data + at + 8);
        CHECK(head[0] == 0 && head[1] == 40 && slot[0] == k && slot[1] == 13 && data[at + 24 + 12] == 0xab);
        at += head[1];
    }
    CHECK(cb->last_index == 0 && cb->last == used - 40);
    tessera_cb_clear(key(7));
    CHECK(tessera_cb_records(key(7), &data, &used, &dropped) && used == 0 && cb->last_index == UINT32_MAX);

    /* The flags Python and the guards set, and what a reset clears. */
    tessera_cb_set_python(key(7), 1);
    tessera_cb_set_python_brackets(key(7), 1);
    tessera_cb_set_submit_ok(key(7), 1);
    tessera_cb_count_submit(key(7));
    cb->pass_in_c = 1;
    tessera_cb_python_seen(key(7));
    CHECK(cb->python_path == 1 && cb->python_brackets == 1 && cb->submit_ok == 1 && cb->submits == 1 &&
          cb->pass_in_c == 0);
    cb->python_submits = 1;
    tessera_cb_set_submit_ok(key(7), 1);
    CHECK(cb->submit_ok == 0);
    cb->python_submits = 0;
    cb->label_depth = 1;   /* an application label left open: submits plan in Python */
    tessera_cb_set_submit_ok(key(7), 1);
    CHECK(cb->submit_ok == 0);
    cb->python_submits = 1;
    tessera_cb_reset(key(7));
    CHECK(!cb->python_path && !cb->python_brackets && !cb->submit_ok && !cb->submits && !cb->python_submits &&
          !cb->label_depth && !cb->pass_label);
    tessera_cb_set_python(key(N + 5), 1);   /* unknown handles are ignored */
    tessera_cb_set_python_brackets(key(N + 5), 1);
    tessera_cb_reset(key(N + 5));
    tessera_cb_clear(key(N + 5));
    CHECK(!tessera_cb_records(key(N + 5), &data, &used, &dropped));

    /* Unregister every other buffer (tombstones), then register more than the table held. */
    for (size_t i = 0; i < N; i += 2) tessera_cb_unregister(key(i));
    tessera_cb_unregister(key(N + 5));
    for (size_t i = 0; i < N; i++) CHECK((tessera_cb_find(key(i)) != NULL) == (i % 2 == 1));
    for (size_t i = N; i < 2 * N; i++) CHECK(tessera_cb_register(key(i), &dev, 1, 0));
    /* A handle registered again without being freed (the backend reused it): replaced. */
    tessera_cb *old = tessera_cb_find(key(9));
    CHECK(tessera_record(old, 1, 1, 0));
    CHECK(tessera_cb_register(key(9), &dev, 1, 0));
    CHECK(tessera_cb_find(key(9)) != NULL && tessera_cb_records(key(9), &data, &used, &dropped) && used == 0);
    for (size_t i = 1; i < 2 * N; i++) tessera_cb_unregister(key(i));
    for (size_t i = 0; i < 2 * N; i++) CHECK(tessera_cb_find(key(i)) == NULL);

    /* Formats by guard index. */
    CHECK(strcmp(tessera_record_format(0), "R,Q") == 0 && tessera_record_format(-1) == NULL
          && tessera_record_format(TESSERA_GUARD_COUNT) == NULL);
}

/* Readers find buffers without the lock while another thread registers (and grows the table). */
static void *register_many(void *arg)
{
    static tessera_device dev;
    (void)arg;
    for (size_t i = 10000; i < 14000; i++) CHECK(tessera_cb_register(key(i), &dev, 1, 0));
    return NULL;
}

static void concurrent_readers(void)
{
    static tessera_device dev;
    for (size_t i = 0; i < 16; i++) CHECK(tessera_cb_register(key(i), &dev, 1, 0));
    pthread_t writer;
    CHECK(pthread_create(&writer, NULL, register_many, NULL) == 0);
    for (int round = 0; round < 2000; round++)
        for (size_t i = 0; i < 16; i++) CHECK(tessera_cb_find(key(i)) != NULL);
    CHECK(pthread_join(writer, NULL) == 0);
    for (size_t i = 10000; i < 14000; i++) CHECK(tessera_cb_find(key(i)) != NULL);
    for (size_t i = 10000; i < 14000; i++) tessera_cb_unregister(key(i));
    for (size_t i = 0; i < 16; i++) tessera_cb_unregister(key(i));
}

/* The layer's t<tag> labels: debug utils first, else markers, else none. */
static void tags(void)
{
    tessera_device dev;
    memset(&dev, 0, sizeof dev);
    VkCommandBuffer commandBuffer = (VkCommandBuffer)key(1);
    CHECK(!tessera_push_tag(commandBuffer, &dev, 1));
    dev.marker_begin = fake_marker_begin;
    dev.marker_end = fake_marker_end;
    uint64_t first = tessera_next_tag(), second = tessera_next_tag();
    CHECK(second == first + 1);
    char text[TESSERA_TAG_TEXT];
    CHECK(tessera_tag_text(text, 0) == 2 && strcmp(text, "t0") == 0);
    CHECK(tessera_tag_text(text, 9) == 2 && strcmp(text, "t9") == 0);
    CHECK(tessera_tag_text(text, 10) == 3 && strcmp(text, "t10") == 0);
    CHECK(tessera_tag_text(text, 1234567890) == 11 && strcmp(text, "t1234567890") == 0);
    CHECK(tessera_tag_text(text, 18446744073709551615ull) == 21 && strcmp(text, "t18446744073709551615") == 0);
    CHECK(tessera_tag_label(text) == 0);   /* at or above 2^63: recorded as text */
    tessera_tag_text(text, 9223372036854775807ull);
    CHECK(tessera_tag_label(text) == (TESSERA_TAG_BIT | 9223372036854775807ull));
    CHECK(tessera_push_tag(commandBuffer, &dev, 18446744073709551615ull) && label_depth == 1);
    CHECK(strcmp(last_label, "t18446744073709551615") == 0);
    tessera_pop_tag(commandBuffer, &dev);
    dev.label_begin = fake_label_begin;
    dev.label_end = fake_label_end;
    CHECK(tessera_push_tag(commandBuffer, &dev, 42) && labels == 1 && strcmp(last_label, "t42") == 0);
    tessera_pop_tag(commandBuffer, &dev);
    CHECK(label_depth == 0);
}

/* The ledger: records from the submit path, queue labels, taking and giving back. */
static void ledger(void)
{
    CHECK(tessera_ledger_take() == NULL);
    size_t expect = 0;
    for (uint64_t k = 0; k < 5000; k++) {   /* past the first 16 KiB several times */
        pthread_mutex_lock(&tessera_ledger_lock);
        uint64_t *r = tessera_ledger_record(9);
        CHECK(r);
        r[0] = 72;
        for (int s = 1; s < 9; s++) r[s] = k;
        pthread_mutex_unlock(&tessera_ledger_lock);
        expect += 72;
    }
    VkQueue queue = (VkQueue)key(3);
    tessera_ledger_label(queue, 1, "a label of twenty bytes");
    tessera_ledger_label(queue, 2, NULL);
    expect += 8 * (3 + 3) + 8 * 3;
    tessera_ledger *l = tessera_ledger_take();
    CHECK(l && l->used == expect && l->dropped == 0);
    CHECK(tessera_ledger_take() == NULL);   /* empty while the spare is out */
    const uint64_t *label = (const uint64_t *)(l->data + 5000 * 72);
    CHECK((label[0] & 0xFFFFFFFF) == 48 && label[0] >> 48 == 1 && label[2] == 23);
    CHECK(memcmp(label + 3, "a label of twenty bytes", 23) == 0);
    tessera_ledger_label(queue, 2, NULL);   /* into the other ledger */
    tessera_ledger_give_back(l);
    tessera_ledger *m = tessera_ledger_take();
    CHECK(m && m != l && m->used == 24);
    tessera_ledger_give_back(m);
    CHECK(tessera_ledger_take() == NULL);

    uint64_t a = tessera_next_submit(), b = tessera_next_submit();
    CHECK(b == a + 1);
    tessera_set_frame(7);
    tessera_python_reason(1);
    tessera_python_reason(-1);
    tessera_set_c_submits(1);
    CHECK(tessera_frame == 7 && tessera_python_reasons == 0 && tessera_c_submits == 1);

    tessera_chain_node boundary = { TESSERA_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT, NULL }, other = { 1, &boundary };
    CHECK(tessera_has_frame_boundary(&other) && !tessera_has_frame_boundary(NULL));
    other.pNext = NULL;
    CHECK(!tessera_has_frame_boundary(&other));

    tessera_device dev;
    memset(&dev, 0, sizeof dev);
    CHECK(!tessera_queue_push(queue, &dev, 5));
    dev.queue_label_begin = (PFN_vkVoidFunction)fake_queue_begin;
    dev.queue_label_end = (PFN_vkVoidFunction)fake_queue_end;
    CHECK(tessera_queue_push(queue, &dev, 5) && strcmp(last_label, "s5") == 0);
}

/* Kept answers: the two-call idiom, a short array, items written past sType/pNext, forgetting. */
typedef struct { int32_t sType; void *pNext; uint32_t value; } item;

static void answers(void)
{
    const void *instance = key(1), *other = key(2);
    item kept[3] = { { 1, NULL, 10 }, { 1, NULL, 11 }, { 1, NULL, 12 } };
    uint32_t count = 0;
    CHECK(tessera_answer_get(4, instance, &count, NULL, sizeof(item), offsetof(item, value)) == -1);
    tessera_answer_keep(4, instance, 3, kept, sizeof(item), offsetof(item, value));
    tessera_answer_keep(4, instance, 1, kept, sizeof(item), offsetof(item, value));   /* kept already */
    tessera_answer_keep(4, other, 0, NULL, sizeof(item), offsetof(item, value));
    CHECK(tessera_answer_get(4, instance, &count, NULL, sizeof(item), offsetof(item, value)) == 3 && count == 3);
    item out[2] = { { 99, &count, 0 }, { 99, &count, 0 } };
    count = 2;
    CHECK(tessera_answer_get(4, instance, &count, out, sizeof(item), offsetof(item, value)) == 3 && count == 2);
    CHECK(out[0].sType == 99 && out[0].pNext == &count && out[0].value == 10 && out[1].value == 11);
    CHECK(tessera_answer_get(4, other, &count, NULL, sizeof(item), 0) == 0 && count == 0);
    CHECK(tessera_answer_get(5, instance, &count, NULL, sizeof(item), 0) == -1);
    tessera_answer_final();
    CHECK(tessera_answer_is_final == 1);
    tessera_answers_forget((void *)instance);
    CHECK(tessera_answer_get(4, instance, &count, NULL, sizeof(item), 0) == -1);
    CHECK(tessera_answer_get(4, other, &count, NULL, sizeof(item), 0) == 0);
    tessera_answers_forget((void *)other);
    CHECK(tessera_answers == NULL);
}

/* The guards' next functions: one per command, ambiguous when two chains disagree. */
static void next_functions(void)
{
    CHECK(tessera_next_of(1) == NULL);
    tessera_note_next(1, (PFN_vkVoidFunction)fake_next_a);
    tessera_note_next(1, (PFN_vkVoidFunction)fake_next_a);
    CHECK(tessera_next_of(1) == (PFN_vkVoidFunction)fake_next_a);
    tessera_note_next(1, (PFN_vkVoidFunction)fake_next_b);
    CHECK(tessera_next_of(1) == NULL);
    tessera_note_next(-1, (PFN_vkVoidFunction)fake_next_a);
    tessera_note_next(TESSERA_GUARD_COUNT, (PFN_vkVoidFunction)fake_next_a);
    tessera_note_next(2, NULL);
    CHECK(tessera_next_of(2) == NULL);
}

/* Re-recordings (vkapi/replay.py): two recordings equal but for their tags, the tags read in order;
   t<tag> label text recorded as numbers. Formats here: 0 "R,Q", 1 "T,Q" (tag in slot 0), 2 a label. */
static void write_recording(void *handle, uint64_t first_tag, uint64_t label, uint64_t value)
{
    tessera_cb *cb = tessera_cb_find(handle);
    tessera_cb_reset(handle);
    uint64_t *slot = tessera_record(cb, 1, 2, 0);
    slot[0] = first_tag; slot[1] = value;
    slot = tessera_record(cb, 0, 1, 0);
    slot[0] = 7;
    slot = tessera_record(cb, 2, 1, 0);
    slot[0] = label;
    slot = tessera_record(cb, 1, 2, 0);
    slot[0] = first_tag + 5; slot[1] = value;
}

static void replay_matching(void)
{
    static tessera_device dev;
    CHECK(tessera_tag_label("t1") == (TESSERA_TAG_BIT | 1) && tessera_tag_label("t0") == TESSERA_TAG_BIT);
    CHECK(tessera_tag_label("t9223372036854775807") == (TESSERA_TAG_BIT | 9223372036854775807ull));
    CHECK(tessera_tag_label("t9223372036854775808") == 0 && tessera_tag_label("t007") == 0);
    CHECK(tessera_tag_label("t") == 0 && tessera_tag_label("t1x") == 0 && tessera_tag_label("s1") == 0
          && tessera_tag_label("t-1") == 0 && tessera_tag_label("") == 0);
    void *a = key(5001), *b = key(5002);
    CHECK(tessera_cb_register(a, &dev, 1, 0) && tessera_cb_register(b, &dev, 1, 0));
    CHECK(!tessera_cb_whole(a));   /* registered, never begun */
    write_recording(a, 10, TESSERA_TAG_BIT | 3, 42);
    write_recording(b, 90, TESSERA_TAG_BIT | 4, 42);
    CHECK(tessera_cb_whole(a) && tessera_cb_whole(b));
    uint8_t *da, *db;
    size_t na, nb;
    uint64_t dropped, tags[4];
    CHECK(tessera_cb_records(a, &da, &na, &dropped) && tessera_cb_records(b, &db, &nb, &dropped) && na == nb);
    CHECK(tessera_records_tags(da, na, tags, 4) == 3 && tags[0] == 10 && tags[1] == 3 && tags[2] == 15);
    CHECK(tessera_records_tags(da, na, tags, 2) == -1);
    CHECK(tessera_records_same(db, da, nb, tags, 4) == 3 && tags[0] == 90 && tags[1] == 4 && tags[2] == 95);
    uint64_t hash = tessera_records_hash(da, na);
    CHECK(hash != 0 && tessera_records_hash(db, nb) == hash);   /* equal but for their tags: one hash */
    write_recording(b, 90, TESSERA_TAG_BIT | 4, 43);          /* a value differs */
    CHECK(tessera_cb_records(b, &db, &nb, &dropped) && tessera_records_same(db, da, nb, tags, 4) == -1);
    CHECK(tessera_records_hash(db, nb) != hash);
    write_recording(b, 90, 2, 42);                            /* a label recorded as text, not as a tag */
    CHECK(tessera_cb_records(b, &db, &nb, &dropped) && tessera_records_same(db, da, nb, tags, 4) == -1);
    ((uint32_t *)da)[1] = 4;                                  /* a damaged size */
    CHECK(tessera_records_tags(da, na, tags, 4) == -1 && tessera_records_same(da, da, na, tags, 4) == -1
          && tessera_records_hash(da, na) == 0);
    tessera_cb_clear(a);                                      /* applied: no longer whole until begun again */
    CHECK(!tessera_cb_whole(a));
    tessera_cb_unregister(a);
    tessera_cb_unregister(b);
}

/* Begins and ends made in C (lifecycle.c): which begins C makes, an end C makes only for a recording equal
   to a kept one under the same generation, what Python takes, and the ledger's serials. */
static int begins, ends;
static VkResult fake_begin(VkCommandBuffer commandBuffer, const VkCommandBufferBeginInfo *info)
{
    (void)commandBuffer; (void)info; begins++; return 0;
}
static VkResult fake_end(VkCommandBuffer commandBuffer) { (void)commandBuffer; ends++; return 0; }
static int pool_resets;
static VkResult fake_pool_reset(VkDevice device, VkCommandPool pool, VkCommandPoolResetFlags flags)
{
    (void)device; (void)pool; (void)flags; pool_resets++; return 0;
}

static void record_two(void *handle, uint64_t tag)
{
    tessera_cb *cb = tessera_cb_find(handle);
    uint64_t *slot = tessera_record(cb, 1, 2, 0);
    slot[0] = tag; slot[1] = 11;
    slot = tessera_record(cb, 0, 1, 0);
    slot[0] = 7;
}

static void begun_and_ended_in_c(void)
{
    static tessera_device dev;
    dev.next[0] = (PFN_vkVoidFunction)fake_begin;
    dev.next[1] = (PFN_vkVoidFunction)fake_end;
    void *a = key(6001), *secondary = key(6002);
    CHECK(tessera_cb_register(a, &dev, 1, 0x500) && tessera_cb_register(secondary, &dev, 0, 0x600));
    VkCommandBufferBeginInfo info = {0};
    info.flags = 5;
    VkResult result = -1;
    CHECK(!tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result));   /* the device does not defer */
    dev.deferrable = 1;
    info.pNext = &info;
    CHECK(!tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result));   /* a chained structure */
    info.pNext = NULL;
    CHECK(tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result) && result == 0 && begins == 1);
    CHECK(tessera_cb_deferred(a) == TESSERA_BEGUN_IN_C && tessera_cb_whole(a));
    record_two(a, 10);
    CHECK(!tessera_end_in_c((VkCommandBuffer)a, 1, &result) && ends == 0);   /* nothing kept */
    CHECK(!tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result));   /* records left for Python */

    uint8_t *data;
    size_t used;
    uint64_t dropped;
    CHECK(tessera_cb_records(a, &data, &used, &dropped));
    tessera_cb_find(a)->submit_ok = 1;
    uint64_t hash = tessera_records_hash(data, used);
    CHECK(tessera_product_keep(a, data, used, hash, 0));
    CHECK(!tessera_product_keep(key(6099), data, used, hash, 0));   /* not a registered buffer */
    CHECK(tessera_product_keep(a, data, used, hash, 0));            /* kept again: replaced */
    uint32_t flags;
    int32_t end_result;
    CHECK(tessera_cb_take_deferred(a, &flags, &end_result) == TESSERA_BEGUN_IN_C && flags == 5);
    CHECK(tessera_cb_deferred(a) == 0 && tessera_cb_take_deferred(a, &flags, &end_result) == 0);
    tessera_cb_clear(a);                                  /* Python applied the records */

    CHECK(tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result) && begins == 2);
    record_two(a, 20);                                    /* equal but for its tag */
    CHECK(tessera_end_in_c((VkCommandBuffer)a, 1, &result) && result == 0 && ends == 1);
    CHECK(tessera_cb_deferred(a) == (TESSERA_BEGUN_IN_C | TESSERA_ENDED_IN_C) && tessera_cb_find(a)->submit_ok);
    CHECK(tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result) && begins == 3);   /* unsubmitted: dropped */
    CHECK(tessera_cb_deferred(a) == TESSERA_BEGUN_IN_C && tessera_cb_find(a)->used == 0);
    record_two(a, 30);
    dev.generation = 1;                                   /* something it names was replaced */
    CHECK(!tessera_end_in_c((VkCommandBuffer)a, 1, &result));
    dev.generation = 0;
    tessera_cb_find(a)->python_path = 1;                  /* a Python hook routed the buffer */
    CHECK(!tessera_end_in_c((VkCommandBuffer)a, 1, &result));
    tessera_cb_find(a)->python_path = 0;
    CHECK(tessera_end_in_c((VkCommandBuffer)a, 1, &result) && ends == 2);

    /* A submit of it in a ledger Python has yet to read: not begun in C until it is read. */
    uint64_t serial = tessera_ledger_active->serial;
    tessera_cb_find(a)->in_ledger = serial;
    CHECK(tessera_cb_deferred(a) == (TESSERA_BEGUN_IN_C | TESSERA_ENDED_IN_C | 8));   /* unread */
    CHECK(!tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result));
    pthread_mutex_lock(&tessera_ledger_lock);
    CHECK(tessera_ledger_record(1));
    pthread_mutex_unlock(&tessera_ledger_lock);
    tessera_ledger *l = tessera_ledger_take();
    CHECK(l && l->serial == serial && tessera_ledger_active->serial == serial + 1);
    tessera_ledger_give_back(l);
    CHECK(!tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result));   /* taken, not yet read */
    tessera_ledger_read(serial);
    tessera_ledger_read(serial - 1);                      /* never goes back */
    CHECK(tessera_ledger_read_up_to == serial && tessera_cb_deferred(a) == (TESSERA_BEGUN_IN_C | TESSERA_ENDED_IN_C));

    /* Its submit read in Python without running its hooks: C finds the kept recording it equals (its key, the
       recording's tags) and changes nothing; then the recording is marked read, until C begins the buffer again.
       Never for a failed end, a kept recording of another generation, or more tags than asked for. */
    const int made = TESSERA_BEGUN_IN_C | TESSERA_ENDED_IN_C;
    uint64_t read_key[2] = {0, 0}, read_tags[2] = {0, 0};
    CHECK(tessera_cb_read_product(a, read_key, read_tags, 2) == 1 && read_key[0] == hash && read_key[1] == used
          && read_tags[0] == 30 && tessera_cb_deferred(a) == made);
    CHECK(tessera_cb_read_product(a, read_key, read_tags, 0) == -1);   /* no room for its tag */
    tessera_cb_find(a)->end_result = -3;   /* VK_ERROR_OUT_OF_DEVICE_MEMORY */
    CHECK(tessera_cb_read_product(a, read_key, read_tags, 2) == -1);
    tessera_cb_find(a)->end_result = 0;
    dev.generation = 2;
    CHECK(tessera_cb_read_product(a, read_key, read_tags, 2) == -1);
    dev.generation = 0;
    /* A submit's buffers read in one call: each one's result, key and tags after the ones before; it stops
       before a buffer found unequal once tags were written (perhaps for want of room), which is read first
       in the next call. */
    uint64_t handles[3] = { (uint64_t)(uintptr_t)a, (uint64_t)(uintptr_t)key(6099), (uint64_t)(uintptr_t)a };
    uint64_t keys[6] = {0}, many_tags[2] = {0, 0};
    long results[3] = {0, 0, 0};
    size_t tags_used = 9;
    CHECK(tessera_cb_read_products(handles, 3, keys, many_tags, 2, results, &tags_used) == 1 && tags_used == 1
          && results[0] == 1 && keys[0] == hash && keys[1] == used && many_tags[0] == 30);
    CHECK(tessera_cb_read_products(handles + 1, 2, keys, many_tags, 2, results, &tags_used) == 2 && tags_used == 1
          && results[0] == -1 && results[1] == 1 && keys[2] == hash && keys[3] == used && many_tags[0] == 30);
    handles[1] = handles[0];
    CHECK(tessera_cb_read_products(handles, 3, keys, many_tags, 1, results, &tags_used) == 1 && tags_used == 1);
    CHECK(tessera_cb_read_products(handles, 3, keys, many_tags, 0, results, &tags_used) == 3 && tags_used == 0
          && results[0] == -1 && results[2] == -1 && tessera_cb_deferred(a) == made);   /* no room, nothing read */
    tessera_cb_read_in_python_all(handles, 1);
    CHECK(tessera_cb_deferred(a) == (made | TESSERA_READ_IN_PYTHON));
    CHECK(tessera_cb_read_products(handles, 2, keys, many_tags, 2, results, &tags_used) == 2 && tags_used == 0
          && results[0] == -2 && results[1] == -2);
    CHECK(tessera_cb_read_in_python(a) && tessera_cb_deferred(a) == (made | TESSERA_READ_IN_PYTHON));
    CHECK(tessera_cb_read_product(a, read_key, read_tags, 2) == -2);   /* read already */
    CHECK(tessera_cb_read_in_python(a) && tessera_cb_deferred(a) == (made | TESSERA_READ_IN_PYTHON));
    CHECK(!tessera_cb_read_in_python(key(6099)) && tessera_cb_read_product(key(6099), read_key, read_tags, 2) == -1);
    CHECK(tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result) && begins == 4);
    CHECK(tessera_cb_deferred(a) == TESSERA_BEGUN_IN_C && !tessera_cb_read_in_python(a)   /* not ended */
          && tessera_cb_read_product(a, read_key, read_tags, 2) == -1);

    /* Pool resets: a known pool of one buffer, C (cached per thread until a buffer is registered or
       unregistered). */
    CHECK(!tessera_pool_reset_in_c(NULL, (VkCommandPool)(uintptr_t)0x700, 0, 2, &result));   /* no buffer */
    CHECK(!tessera_pool_reset_in_c(NULL, (VkCommandPool)(uintptr_t)0x500, 0, 2, &result));   /* no next */
    dev.next[2] = (PFN_vkVoidFunction)fake_pool_reset;
    record_two(a, 50);
    CHECK(tessera_cb_find(a)->used && !tessera_pool_reset_in_c(NULL, (VkCommandPool)(uintptr_t)0x500, 0, 2, &result));
    CHECK(tessera_end_in_c((VkCommandBuffer)a, 1, &result));   /* ended in C, never submitted: may go */
    CHECK(tessera_pool_reset_in_c(NULL, (VkCommandPool)(uintptr_t)0x500, 0, 2, &result) && pool_resets == 1);
    CHECK(tessera_cb_deferred(a) == TESSERA_RESET_IN_C && tessera_cb_find(a)->used == 0 && !tessera_cb_whole(a));
    CHECK(tessera_begin_in_c((VkCommandBuffer)a, &info, 0, &result));   /* the reset stays deferred with it */
    CHECK(tessera_cb_deferred(a) == (TESSERA_RESET_IN_C | TESSERA_BEGUN_IN_C));
    record_two(a, 60);
    CHECK(tessera_end_in_c((VkCommandBuffer)a, 1, &result));
    CHECK(tessera_cb_take_deferred(a, &flags, &end_result) == (TESSERA_RESET_IN_C | TESSERA_BEGUN_IN_C | TESSERA_ENDED_IN_C));
    void *other = key(6003);
    CHECK(tessera_cb_register(other, &dev, 1, 0x500));            /* the cache is stale: looked up again */
    CHECK(!tessera_pool_reset_in_c(NULL, (VkCommandPool)(uintptr_t)0x500, 0, 2, &result));   /* a's records */
    tessera_cb_clear(a);
    CHECK(tessera_pool_reset_in_c(NULL, (VkCommandPool)(uintptr_t)0x500, 0, 2, &result) && pool_resets == 2);
    CHECK(tessera_cb_deferred(a) == TESSERA_RESET_IN_C && tessera_cb_deferred(other) == TESSERA_RESET_IN_C);
    tessera_cb_unregister(other);

    tessera_product_drop(&dev, hash, used);
    record_two(a, 40);
    CHECK(!tessera_end_in_c((VkCommandBuffer)a, 1, &result));   /* no longer kept */
    tessera_cb_reset(a);                                  /* Python's reset: nothing left deferred */
    CHECK(tessera_cb_deferred(a) == 0 && tessera_cb_find(a)->used == 0);
    uint64_t counts[3];
    tessera_lifecycle_counts(counts);
    CHECK(counts[0] == 5 && counts[1] == 4 && counts[2] == 2);
    tessera_cb_unregister(a);
    tessera_cb_unregister(secondary);
}

/* vkCmdExecuteCommands recorded in C (lifecycle.c tessera_execute_in_c): into a primary C has recorded whole, of
   secondaries C began and ended equal to a kept recording; the record names them and the kept keys and carries
   their tags after the primary's own, so that two such frames hash alike and compare equal but for their tags. */
static int executes;
static void fake_execute(VkCommandBuffer commandBuffer, uint32_t count, const VkCommandBuffer *secondaries)
{
    (void)commandBuffer; (void)secondaries; executes += (int)count;
}

static void recorded_frame(void *p, void *s1, void *s2, uint64_t first_tag)
{
    VkCommandBufferBeginInfo info = {0};
    VkResult result;
    VkCommandBuffer both[2] = {(VkCommandBuffer)s1, (VkCommandBuffer)s2};
    CHECK(tessera_begin_in_c((VkCommandBuffer)s1, &info, 0, &result) && tessera_begin_in_c((VkCommandBuffer)s2, &info, 0, &result));
    record_two(s1, first_tag + 1);
    record_two(s2, first_tag + 2);
    CHECK(tessera_end_in_c((VkCommandBuffer)s1, 1, &result) && tessera_end_in_c((VkCommandBuffer)s2, 1, &result));
    CHECK(tessera_begin_in_c((VkCommandBuffer)p, &info, 0, &result));
    record_two(p, first_tag);
    CHECK(tessera_execute_in_c((VkCommandBuffer)p, 2, both, 4));
}

static void executed_in_c(void)
{
    static tessera_device dev;
    dev.next[0] = (PFN_vkVoidFunction)fake_begin;
    dev.next[1] = (PFN_vkVoidFunction)fake_end;
    dev.next[4] = (PFN_vkVoidFunction)fake_execute;
    dev.deferrable = 1;
    void *p = key(6101), *s1 = key(6102), *s2 = key(6103), *q = key(6104);
    CHECK(tessera_cb_register(p, &dev, 1, 0x800) && tessera_cb_register(s1, &dev, 0, 0x800)
          && tessera_cb_register(s2, &dev, 0, 0x800) && tessera_cb_register(q, &dev, 1, 0x800));
    VkCommandBufferBeginInfo info = {0};
    VkResult result;
    uint32_t flags;
    int32_t end_result;
    VkCommandBuffer one[1] = {(VkCommandBuffer)s1};
    /* a secondary is begun in C like a primary; Python applies its first recording and keeps it */
    CHECK(tessera_begin_in_c((VkCommandBuffer)s1, &info, 0, &result));
    record_two(s1, 1);
    CHECK(!tessera_execute_in_c((VkCommandBuffer)q, 1, one, 4));   /* q holds no recording C made */
    uint8_t *data;
    size_t used;
    uint64_t dropped;
    CHECK(tessera_cb_records(s1, &data, &used, &dropped));
    uint64_t hash = tessera_records_hash(data, used);
    tessera_cb_find(s1)->submit_ok = 1;
    CHECK(tessera_product_keep(s1, data, used, hash, 0));
    CHECK(tessera_cb_take_deferred(s1, &flags, &end_result) == TESSERA_BEGUN_IN_C);
    tessera_cb_clear(s1);

    int before = executes;
    recorded_frame(p, s1, s2, 10);
    CHECK(executes == before + 2 && tessera_cb_whole(p) && tessera_cb_find(p)->executed_count == 2
          && !tessera_cb_find(p)->python_submits);
    uint64_t tags[4] = {0};
    CHECK(tessera_cb_records(p, &data, &used, &dropped));
    CHECK(tessera_records_tags(data, used, tags, 4) == 3 && tags[0] == 10 && tags[1] == 11 && tags[2] == 12);
    uint64_t *x = (uint64_t *)(data + 24 + 16 + 8);   /* after record_two's records (24 and 16 bytes): the X record's slots */
    CHECK(x[0] == 2 && x[1] == 2 && x[2] == (uint64_t)(uintptr_t)s1 && x[3] == hash && x[5] == 1 && x[6] == (uint64_t)(uintptr_t)s2
          && x[10] == 11 && x[11] == 12);
    uint64_t first_hash = tessera_records_hash(data, used);
    size_t first_used = used;
    uint8_t *first = malloc(used);
    memcpy(first, data, used);

    /* A submit of p in a ledger Python has yet to read: neither secondary is begun in C until it is read. */
    uint64_t serial = tessera_ledger_active->serial;
    tessera_cb_submitted(tessera_cb_find(p), serial);
    CHECK(tessera_cb_find(s1)->in_ledger == serial && tessera_cb_find(s2)->in_ledger == serial);
    CHECK(!tessera_begin_in_c((VkCommandBuffer)s1, &info, 0, &result));
    tessera_ledger_read(serial);

    /* the next frame: equal but for its tags */
    tessera_cb_find(p)->deferred = 0;   /* as after Python ran the hooks (the next begin drops the records) */
    tessera_cb_clear(p);
    recorded_frame(p, s1, s2, 20);
    CHECK(tessera_cb_records(p, &data, &used, &dropped) && used == first_used
          && tessera_records_hash(data, used) == first_hash);
    CHECK(tessera_records_same(data, first, used, tags, 4) == 3 && tags[0] == 20 && tags[1] == 21 && tags[2] == 22);
    free(first);

    /* A secondary Python applied whose recording equals a kept one keeps its records for C (tessera_cb_applied:
       recorded once, executed every frame), which Python no longer sees; a primary's go. */
    void *once = key(6105);
    CHECK(tessera_cb_register(once, &dev, 0, 0x900));
    CHECK(tessera_begin_in_c((VkCommandBuffer)once, &info, 0, &result));
    record_two(once, 30);
    CHECK(tessera_cb_take_deferred(once, &flags, &end_result) == TESSERA_BEGUN_IN_C);
    tessera_cb_applied(once, 1);
    CHECK(tessera_cb_records(once, &data, &used, &dropped) && used == 0 && !tessera_cb_whole(once));
    CHECK(tessera_cb_find(once)->used && tessera_cb_find(once)->end_hash == hash);
    tessera_cb_clear(p);
    CHECK(tessera_begin_in_c((VkCommandBuffer)p, &info, 0, &result));
    VkCommandBuffer kept_once[1] = {(VkCommandBuffer)once};
    CHECK(tessera_execute_in_c((VkCommandBuffer)p, 1, kept_once, 4));
    CHECK(tessera_cb_records(p, &data, &used, &dropped) && tessera_records_tags(data, used, tags, 4) == 1
          && tags[0] == 30);
    tessera_cb_applied(p, 1);   /* a primary: its records go */
    CHECK(tessera_cb_find(p)->used == 0);
    CHECK(tessera_begin_in_c((VkCommandBuffer)once, &info, 0, &result)   /* begun again: nothing of it stays */
          && tessera_cb_find(once)->used == 0 && !tessera_cb_find(once)->applied);
    tessera_cb_unregister(once);

    /* Python's: a secondary whose recording is not kept, a primary as a secondary, a label open in the primary */
    tessera_cb_clear(p);
    CHECK(tessera_begin_in_c((VkCommandBuffer)p, &info, 0, &result));
    VkCommandBuffer primary_one[1] = {(VkCommandBuffer)q};
    CHECK(!tessera_execute_in_c((VkCommandBuffer)p, 1, primary_one, 4));
    tessera_cb_find(p)->label_depth = 1;
    CHECK(tessera_execute_in_c((VkCommandBuffer)p, 1, one, 4) && tessera_cb_find(p)->python_submits);
    tessera_product_drop(&dev, hash, tessera_cb_find(s1)->used);
    CHECK(!tessera_execute_in_c((VkCommandBuffer)p, 1, one, 4));
    CHECK(!tessera_execute_in_c((VkCommandBuffer)p, 0, one, 4));
    tessera_cb_unregister(p);
    tessera_cb_unregister(s1);
    tessera_cb_unregister(s2);
    tessera_cb_unregister(q);
}

/* Threads recording at once: tags from per-thread blocks of the one counter, kept products read while
   Python keeps and drops them, lifecycle counts summed over the threads' stripes. */
#define TAG_THREADS 4
#define TAGS_EACH 1000   /* several blocks each */
static uint64_t thread_tags[TAG_THREADS][TAGS_EACH];

static void *take_tags(void *arg)
{
    uint64_t *mine = arg;
    for (int i = 0; i < TAGS_EACH; i++) mine[i] = tessera_next_tag();
    return NULL;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static VkResult quiet_begin(VkCommandBuffer commandBuffer, const VkCommandBufferBeginInfo *info)
{
    (void)commandBuffer; (void)info; return 0;
}

static tessera_device shared_dev;
static void *kept_key;
static uint64_t kept_hash;
static size_t kept_size;
#define READS_EACH 20000

static void *read_products(void *arg)
{
    void *handle = arg;
    tessera_cb *cb = tessera_cb_find(handle);
    VkCommandBufferBeginInfo info = {0};
    VkResult result;
    long found = 0, i = 0;
    for (; i < READS_EACH || !found; i++) {   /* Python keeps the product at the end: found at last */
        CHECK(tessera_begin_in_c((VkCommandBuffer)handle, &info, 0, &result) && result == 0);
        record_two(handle, 1000 + (uint64_t)i);   /* equal to the kept recording but for its tag */
        int match = tessera_product_match(cb);
        CHECK(match == -1 || match == 1);
        found += match == 1;
        tessera_cb_clear(handle);
    }
    return (void *)i;
}

static void threads_at_once(void)
{
    pthread_t threads[TAG_THREADS];
    for (int k = 0; k < TAG_THREADS; k++)
        CHECK(pthread_create(&threads[k], NULL, take_tags, thread_tags[k]) == 0);
    for (int k = 0; k < TAG_THREADS; k++) CHECK(pthread_join(threads[k], NULL) == 0);
    static uint64_t all[TAG_THREADS * TAGS_EACH];
    for (int k = 0; k < TAG_THREADS; k++)
        for (int i = 0; i < TAGS_EACH; i++) {
            CHECK(thread_tags[k][i] >= 1);
            if (i) CHECK(thread_tags[k][i] > thread_tags[k][i - 1]);   /* a thread's tags increase */
            all[k * TAGS_EACH + i] = thread_tags[k][i];
        }
    qsort(all, TAG_THREADS * TAGS_EACH, sizeof all[0], compare_u64);
    for (int i = 1; i < TAG_THREADS * TAGS_EACH; i++) CHECK(all[i] != all[i - 1]);   /* unique */
    /* at most one part-used block per thread (and this thread's, from tags()) between them */
    CHECK(all[TAG_THREADS * TAGS_EACH - 1] <= (uint64_t)(TAG_THREADS * TAGS_EACH + (TAG_THREADS + 1) * 64));

    uint64_t before[3], after[3];
    tessera_lifecycle_counts(before);
    shared_dev.deferrable = 1;
    shared_dev.next[0] = (PFN_vkVoidFunction)quiet_begin;
    kept_key = key(7000);
    CHECK(tessera_cb_register(kept_key, &shared_dev, 1, 0x900));
    record_two(kept_key, 1);
    uint8_t *data;
    uint64_t dropped;
    CHECK(tessera_cb_records(kept_key, &data, &kept_size, &dropped));
    tessera_cb_find(kept_key)->submit_ok = 1;
    kept_hash = tessera_records_hash(data, kept_size);
    for (int k = 0; k < TAG_THREADS; k++) CHECK(tessera_cb_register(key(7001 + (size_t)k), &shared_dev, 1, 0x901 + (uint64_t)k));
    for (int k = 0; k < TAG_THREADS; k++)
        CHECK(pthread_create(&threads[k], NULL, read_products, key(7001 + (size_t)k)) == 0);
    for (int i = 0; i < 2000; i++) {   /* Python keeps and drops the product while the threads read it */
        CHECK(tessera_product_keep(kept_key, data, kept_size, kept_hash, 0));
        if (i % 2 == 0) tessera_product_drop(&shared_dev, kept_hash, kept_size);
    }
    long begun = 0;
    for (int k = 0; k < TAG_THREADS; k++) {
        void *n;
        CHECK(pthread_join(threads[k], &n) == 0);
        begun += (long)n;
    }
    tessera_lifecycle_counts(after);
    CHECK(after[0] - before[0] == (uint64_t)begun && begun >= TAG_THREADS * READS_EACH && after[1] == before[1]);
    tessera_product_drop(&shared_dev, kept_hash, kept_size);
    for (int k = 0; k <= TAG_THREADS; k++) tessera_cb_unregister(key(7000 + (size_t)k));
}

int main(void)
{
    map_and_arenas();
    replay_matching();
    concurrent_readers();
    tags();
    ledger();
    begun_and_ended_in_c();
    executed_in_c();
    answers();
    next_functions();
    threads_at_once();
    puts("ok");
    return 0;
}

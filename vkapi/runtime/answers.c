/* ---- queries answered in C once Python has (tessera.vkapi.answers) ----
   Static C: answers kept per (guard index, first parameter) in a list under one mutex. The generated
   guards of `answered=` commands (vkapi/answers.py `call_hook`) call it. Helpers that only one shim calls
   are marked unused (tests/vkapi/test_runtime_c.py compiles both shims with -Wall -Wextra -Werror). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TESSERA_ANSWER_SUCCESS 0      /* VK_SUCCESS (the spec's values, fixed) */
#define TESSERA_ANSWER_INCOMPLETE 5   /* VK_INCOMPLETE */

typedef struct tessera_answer {
    struct tessera_answer *next;
    int index;                   /* guard index of the command */
    const void *handle;          /* its first parameter */
    uint32_t count;              /* items kept */
    size_t part;                 /* bytes kept per item */
    unsigned char data[];
} tessera_answer;

static tessera_answer *tessera_answers;
static pthread_mutex_t tessera_answers_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int tessera_answer_is_final;

/* Called by the Python trampoline, last, when every hook of the call succeeded. */
void tessera_answer_final(void)
{
    tessera_answer_is_final = 1;
}

static tessera_answer *tessera_answer_find(int index, const void *handle)
{
    for (tessera_answer *a = tessera_answers; a; a = a->next)
        if (a->index == index && a->handle == handle) return a;
    return NULL;
}

/* The kept answer of (index, handle) written to `out` (items of `stride` bytes, written from byte
   `offset` of each): min(*pCount, kept) items, *pCount set to that; with `out` NULL only *pCount is
   set (to the number kept). Returns the number kept, or -1 when nothing is kept. */
__attribute__((unused)) static int64_t tessera_answer_get(int index, const void *handle, uint32_t *pCount, void *out,
                                  size_t stride, size_t offset)
{
    int64_t total = -1;
    pthread_mutex_lock(&tessera_answers_lock);
    tessera_answer *a = tessera_answer_find(index, handle);
    if (a) {
        total = a->count;
        if (out) {
            uint32_t n = *pCount < a->count ? *pCount : a->count;
            for (uint32_t i = 0; i < n; i++)
                memcpy((unsigned char *)out + (size_t)i * stride + offset, a->data + (size_t)i * a->part, a->part);
            *pCount = n;
        } else {
            *pCount = a->count;
        }
    }
    pthread_mutex_unlock(&tessera_answers_lock);
    return total;
}

/* Keeps `count` items of `src` (as tessera_answer_get writes them) for (index, handle). */
__attribute__((unused)) static void tessera_answer_keep(int index, const void *handle, uint32_t count, const void *src,
                                size_t stride, size_t offset)
{
    size_t part = stride - offset;
    tessera_answer *a = malloc(sizeof(tessera_answer) + (size_t)count * part);
    if (!a) return;
    a->index = index;
    a->handle = handle;
    a->count = count;
    a->part = part;
    for (uint32_t i = 0; i < count; i++)
        memcpy(a->data + (size_t)i * part, (const unsigned char *)src + (size_t)i * stride + offset, part);
    pthread_mutex_lock(&tessera_answers_lock);
    if (tessera_answer_find(index, handle)) {   /* another thread kept it first */
        free(a);
    } else {
        a->next = tessera_answers;
        tessera_answers = a;
    }
    pthread_mutex_unlock(&tessera_answers_lock);
}

/* Drops every answer kept for `handle` (its object is being destroyed). */
void tessera_answers_forget(void *handle)
{
    pthread_mutex_lock(&tessera_answers_lock);
    for (tessera_answer **p = &tessera_answers; *p;) {
        tessera_answer *a = *p;
        if (a->handle == handle) {
            *p = a->next;
            free(a);
        } else {
            p = &a->next;
        }
    }
    pthread_mutex_unlock(&tessera_answers_lock);
}

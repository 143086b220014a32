/*===- constants.c - libpt2rt: what a kernel derives from its constants once -===*
 *
 *   pt2rt_constants_create / _clear / _destroy   (runtime/kernel.c, per kernel)
 *   pt2rt_constants_get(cache, source, key, bytes, fill)   (conv.c)
 *
 * oneDNN's fast convolutions read weights in a blocked layout (Acdb48a,
 * ...), and libpt2rt reorders w into it at every call because a weight may
 * change between calls.  A frozen weight (pt2.compile(freeze=True)) does
 * not: its reorder can be made once.  Where it is kept decides whether it
 * can go stale, so it is kept by the kernel that runs it, not by address in
 * a process-wide table: runtime/kernel.c hands a run the kernel's cache only
 * when the run's frozen inputs are the ones the cache was filled from (the
 * same addresses; their contents the same by the frozen inputs' contract,
 * which capture's FROZEN guards keep), empties it with the prologue's
 * results (pt2KernelResetFrozen) and frees it with the kernel.  An entry is
 * keyed by the constant's address and what was derived (the primitive's key),
 * both compared whole.
 *===----------------------------------------------------------------------===*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct Entry {
    const void *source;
    void *key;
    size_t key_size, bytes;
    void *data;
    struct Entry *next;
} Entry;

struct Pt2rtConstants {
    pthread_mutex_t lock;
    Entry *head; /* guarded by lock; entries are immutable once linked */
};

Pt2rtConstants *pt2rt_constants_create(void) {
    Pt2rtConstants *c = calloc(1, sizeof *c);
    if (c && pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

static void free_entries(Entry *e) {
    while (e) {
        Entry *next = e->next;
        free(e->key);
        free(e->data);
        free(e);
        e = next;
    }
}

void pt2rt_constants_clear(Pt2rtConstants *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    Entry *old = c->head;
    c->head = NULL;
    pthread_mutex_unlock(&c->lock);
    free_entries(old);
}

void pt2rt_constants_destroy(Pt2rtConstants *c) {
    if (!c) return;
    free_entries(c->head);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Filling under the lock: it happens once per constant, and concurrent
 * first runs then derive it once. */
void *pt2rt_constants_get(Pt2rtConstants *c, const void *source, const void *key, size_t key_size, size_t bytes,
                          bool (*fill)(void *dst, void *context), void *context) {
    void *data = NULL;
    pthread_mutex_lock(&c->lock);
    Entry *e = c->head;
    while (e && !(e->source == source && e->key_size == key_size && e->bytes == bytes && memcmp(e->key, key, key_size) == 0)) {
        e = e->next;
    }
    if (e) {
        data = e->data;
    } else {
        e = calloc(1, sizeof *e);
        void *key_copy = malloc(key_size ? key_size : 1);
        data = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
        if (e && key_copy && data && fill(data, context)) {
            memcpy(key_copy, key, key_size);
            *e = (Entry){source, key_copy, key_size, bytes, data, c->head};
            c->head = e;
        } else {
            free(e);
            free(key_copy);
            free(data);
            data = NULL;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return data;
}

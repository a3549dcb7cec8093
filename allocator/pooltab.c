/* The live pools by their stream: a hash table (linear probing) that a
 * thread reads without a lock on each allocation whose stream is not its
 * last one's, and that writers change under the allocator's retire_lock.
 * Before (issue 29) that look-up read every pool in turn: 33 us a call with
 * 4,000 live streams, each pool on cache lines of its own.
 *
 * A reader may miss a pool while a writer moves slots (a deletion shifts the
 * slots after it back; a growth copies them), never find a wrong one: it
 * takes a slot's pool only when the pool's own key still names the stream,
 * and pool structs are never freed. A miss sends the caller to the slow
 * path, which looks again under retire_lock. Tables grow by doubling, with
 * twice as many slots as pools at least; the ones outgrown stay until the
 * allocator goes (a reader may be in one), as the pool arrays do. */
#include <stdlib.h>

#include "internal.h"

#define EMPTY CA_NO_STREAM /* the key of a free slot; never a stream */

static size_t home(const ca_pooltab *t, ca_stream s) {
    return (size_t)(((uint64_t)s * 0x9E3779B97F4A7C15ull) >> (64 - t->bits));
}

static ca_pooltab *tab_new(int bits) {
    size_t cap = (size_t)1 << bits;
    ca_pooltab *t = malloc(sizeof *t + cap * sizeof t->slot[0]);
    if (!t) return NULL;
    t->older = NULL;
    t->bits = bits;
    for (size_t i = 0; i < cap; i++) t->slot[i] = (ca_pooltab_slot){EMPTY, NULL};
    return t;
}

int ca_pooltab_init(ca_allocator *a) {
    return (a->pooltab = tab_new(4)) ? CA_OK : CA_ERR_OOM;
}

void ca_pooltab_destroy(ca_allocator *a) {
    for (ca_pooltab *t = a->pooltab, *older; t; t = older) {
        older = t->older;
        free(t);
    }
}

ca_pool *ca_pooltab_find(ca_allocator *a, ca_stream s) {
    const ca_pooltab *t = __atomic_load_n(&a->pooltab, __ATOMIC_ACQUIRE);
    size_t mask = ((size_t)1 << t->bits) - 1;
    for (size_t i = home(t, s), n = 0; n <= mask; i = (i + 1) & mask, n++) {
        ca_stream k = __atomic_load_n(&t->slot[i].key, __ATOMIC_ACQUIRE);
        if (k == EMPTY) return NULL;
        if (k != s) continue;
        ca_pool *p = __atomic_load_n(&t->slot[i].pool, __ATOMIC_RELAXED);
        return p && __atomic_load_n(&p->key, __ATOMIC_ACQUIRE) == s ? p : NULL;
    }
    return NULL;
}

/* Slot i takes (key, pool): the pool first, so that a reader who sees the
 * key sees the pool (or an older one, whose key no longer matches). */
static void put(ca_pooltab *t, size_t i, ca_stream key, ca_pool *p) {
    __atomic_store_n(&t->slot[i].pool, p, __ATOMIC_RELAXED);
    __atomic_store_n(&t->slot[i].key, key, __ATOMIC_RELEASE);
}

static void insert(ca_pooltab *t, ca_stream s, ca_pool *p) {
    size_t mask = ((size_t)1 << t->bits) - 1, i = home(t, s);
    while (t->slot[i].key != EMPTY && t->slot[i].key != s) i = (i + 1) & mask;
    put(t, i, s, p);
}

int ca_pooltab_reserve(ca_allocator *a, size_t pools) {
    ca_pooltab *t = a->pooltab;
    if (pools <= (size_t)1 << (t->bits - 1)) return CA_OK;
    ca_pooltab *bigger = tab_new(t->bits + 1);
    if (!bigger) return CA_ERR_OOM;
    for (size_t i = 0; i < (size_t)1 << t->bits; i++)
        if (t->slot[i].key != EMPTY) insert(bigger, t->slot[i].key, t->slot[i].pool);
    bigger->older = t;
    __atomic_store_n(&a->pooltab, bigger, __ATOMIC_RELEASE);
    return CA_OK;
}

void ca_pooltab_set(ca_allocator *a, ca_stream s, ca_pool *p) { insert(a->pooltab, s, p); }

void ca_pooltab_drop(ca_allocator *a, ca_stream s) {
    ca_pooltab *t = a->pooltab;
    size_t mask = ((size_t)1 << t->bits) - 1, i = home(t, s);
    while (t->slot[i].key != s) {
        if (t->slot[i].key == EMPTY) return;
        i = (i + 1) & mask;
    }
    /* Shift back the slots after it that would no longer be found (their
     * home lies at or before the hole, cyclically), then free the last. */
    for (size_t j = (i + 1) & mask; t->slot[j].key != EMPTY; j = (j + 1) & mask) {
        size_t h = home(t, t->slot[j].key);
        if (((j - h) & mask) < ((j - i) & mask)) continue; /* its home is after the hole */
        put(t, i, t->slot[j].key, t->slot[j].pool);
        i = j;
    }
    put(t, i, EMPTY, NULL);
}

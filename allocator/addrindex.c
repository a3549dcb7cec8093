/* Which pool's segment holds an address, in O(log segments) and without any
 * pool's lock: the segments' address spans (an expandable range's whole
 * reservation, a classic segment's bytes) in one sorted array. Pointer
 * queries (cuPointerGetAttribute from NCCL or MPI, cudaPointerGetAttributes,
 * a free that misses the thread's and the stream's pool) asked every pool in
 * turn before: 16 us to 230 us a query with 4,000 live streams (issue 29).
 *
 * Writers (a segment made or ended, under its pool's lock) take the index's
 * own lock, innermost, and bracket each change with a sequence count: odd
 * while they write. A reader searches, then looks at the count again and
 * searches again if it moved (a seqlock). An array that fills is copied into
 * one twice its size and published; the ones outgrown stay until the
 * allocator goes, as a reader may still be searching one. Every field is
 * read and written atomically, so a reader racing a writer reads only values
 * that were stored, and then looks again. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

static ca_addr_spans *spans_new(size_t cap) {
    ca_addr_spans *s = calloc(1, sizeof *s + cap * sizeof s->span[0]);
    if (s) s->cap = cap;
    return s;
}

int ca_addr_index_init(ca_addr_index *x) {
    memset(x, 0, sizeof *x);
    ca_lock_init(&x->lock);
    x->cur = spans_new(16);
    return x->cur ? CA_OK : CA_ERR_OOM;
}

void ca_addr_index_destroy(ca_addr_index *x) {
    for (ca_addr_spans *s = x->cur, *older; s; s = older) {
        older = s->older;
        free(s);
    }
    x->cur = NULL;
}

/* The first span of s whose base is above addr (n when none). */
static size_t first_above(const ca_addr_spans *s, size_t n, uintptr_t addr) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (LOAD(s->span[mid].base) <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void write_begin(ca_addr_index *x) {
    STORE(x->seq, x->seq + 1);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void write_end(ca_addr_index *x) { __atomic_store_n(&x->seq, x->seq + 1, __ATOMIC_RELEASE); }

int ca_addr_index_add(ca_addr_index *x, uintptr_t base, size_t size, ca_pool *pool) {
    ca_lock_acquire(&x->lock);
    ca_addr_spans *s = x->cur;
    size_t n = s->n, at = first_above(s, n, base);
    if (n == s->cap) { /* a larger copy, published whole */
        ca_addr_spans *t = spans_new(2 * s->cap);
        if (!t) {
            ca_lock_release(&x->lock);
            return CA_ERR_OOM;
        }
        memcpy(t->span, s->span, n * sizeof s->span[0]);
        t->n = n;
        t->older = s;
        write_begin(x);
        __atomic_store_n(&x->cur, t, __ATOMIC_RELEASE);
        s = t;
    } else {
        write_begin(x);
    }
    for (size_t i = n; i > at; i--) {
        STORE(s->span[i].base, s->span[i - 1].base);
        STORE(s->span[i].size, s->span[i - 1].size);
        STORE(s->span[i].pool, s->span[i - 1].pool);
    }
    STORE(s->span[at].base, base);
    STORE(s->span[at].size, size);
    STORE(s->span[at].pool, pool);
    STORE(s->n, n + 1);
    write_end(x);
    ca_lock_release(&x->lock);
    return CA_OK;
}

void ca_addr_index_remove(ca_addr_index *x, uintptr_t base) {
    ca_lock_acquire(&x->lock);
    ca_addr_spans *s = x->cur;
    size_t n = s->n, at = first_above(s, n, base);
    if (at && s->span[at - 1].base == base) {
        write_begin(x);
        for (size_t i = at; i < n; i++) {
            STORE(s->span[i - 1].base, s->span[i].base);
            STORE(s->span[i - 1].size, s->span[i].size);
            STORE(s->span[i - 1].pool, s->span[i].pool);
        }
        STORE(s->n, n - 1);
        write_end(x);
    }
    ca_lock_release(&x->lock);
}

ca_pool *ca_addr_index_find(ca_addr_index *x, uintptr_t addr) {
    for (;;) {
        unsigned seq = __atomic_load_n(&x->seq, __ATOMIC_ACQUIRE);
        if (seq & 1) {
            ca_cpu_relax();
            continue;
        }
        const ca_addr_spans *s = __atomic_load_n(&x->cur, __ATOMIC_ACQUIRE);
        size_t n = LOAD(s->n), i = first_above(s, n, addr);
        ca_pool *p = NULL;
        if (i && addr - LOAD(s->span[i - 1].base) < LOAD(s->span[i - 1].size)) p = LOAD(s->span[i - 1].pool);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (LOAD(x->seq) == seq) return p;
    }
}

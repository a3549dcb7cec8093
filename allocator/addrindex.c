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
 * that were stored, and then looks again.
 *
 * A removed span stays in place as a gap (size 0: it holds no address, and
 * its base keeps the order) until an insert reuses it: an insert shifts the
 * spans between its place and the nearest gap, not every span to the end.
 * A pool per stream that comes and goes (a stream per request among 4,000)
 * removed and inserted a span each, shifting thousands (issue 29). A reader
 * steps back over gaps to the span below them (one may reach past a gap's
 * base: a range made later where a removed one began); once gaps are half
 * the array they are swept out, so there are few to step over. */
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

static void put(ca_addr_spans *s, size_t i, uintptr_t base, size_t size, ca_pool *pool) {
    STORE(s->span[i].base, base);
    STORE(s->span[i].size, size);
    STORE(s->span[i].pool, pool);
}

static void copy(ca_addr_spans *s, size_t to, size_t from) {
    put(s, to, s->span[from].base, s->span[from].size, s->span[from].pool);
}

/* The gaps swept out, in place (inside a write). */
static void sweep(ca_addr_spans *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->span[i].size) {
            if (i != n) copy(s, n, i);
            n++;
        }
    STORE(s->n, n);
    STORE(s->gaps, 0);
}

int ca_addr_index_add(ca_addr_index *x, uintptr_t base, size_t size, ca_pool *pool) {
    ca_lock_acquire(&x->lock);
    ca_addr_spans *s = x->cur;
    if (s->n == s->cap && !s->gaps) { /* a larger copy, published whole */
        ca_addr_spans *t = spans_new(2 * s->cap);
        if (!t) {
            ca_lock_release(&x->lock);
            return CA_ERR_OOM;
        }
        memcpy(t->span, s->span, s->n * sizeof s->span[0]);
        t->n = s->n;
        t->older = s;
        write_begin(x);
        __atomic_store_n(&x->cur, t, __ATOMIC_RELEASE);
        s = t;
    } else {
        write_begin(x);
        if (s->n == s->cap) sweep(s); /* full, with gaps: they make the room */
    }
    size_t n = s->n, at = first_above(s, n, base);
    /* the spans to move: up to the nearest gap above (or the end), or, when
     * nearer, down to the nearest gap below */
    size_t right = at, left = at;
    while (right < n && LOAD(s->span[right].size))
        right++;
    while (left > 0 && at - left < right - at && LOAD(s->span[left - 1].size))
        left--;
    if (left > 0 && at - left <= right - at && !LOAD(s->span[left - 1].size)) {
        /* the gap at left - 1: the spans after it move down one, the new one
         * goes last among those below base */
        for (size_t i = left - 1; i + 1 < at; i++)
            copy(s, i, i + 1);
        put(s, at - 1, base, size, pool);
        STORE(s->gaps, s->gaps - 1);
    } else {
        /* the gap at right, or one more slot at the end: the spans from at up move up one */
        for (size_t i = right; i > at; i--)
            copy(s, i, i - 1);
        put(s, at, base, size, pool);
        if (right < n)
            STORE(s->gaps, s->gaps - 1);
        else
            STORE(s->n, n + 1);
    }
    write_end(x);
    ca_lock_release(&x->lock);
    return CA_OK;
}

void ca_addr_index_remove(ca_addr_index *x, uintptr_t base) {
    ca_lock_acquire(&x->lock);
    ca_addr_spans *s = x->cur;
    size_t at = first_above(s, s->n, base);
    /* the live span with that base (a gap with the same base may lie below it) */
    while (at && s->span[at - 1].base == base && !s->span[at - 1].size)
        at--;
    if (at && s->span[at - 1].base == base && s->span[at - 1].size) {
        write_begin(x);
        STORE(s->span[at - 1].size, 0);
        STORE(s->span[at - 1].pool, NULL);
        STORE(s->gaps, s->gaps + 1);
        if (s->gaps > 16 && 2 * s->gaps > s->n) sweep(s); /* readers step over gaps: keep them few */
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
        /* a gap holds no address, and the span below it may reach past its
         * base (a range made later where a removed one began) */
        while (i && !LOAD(s->span[i - 1].size))
            i--;
        ca_pool *p = NULL;
        if (i && addr - LOAD(s->span[i - 1].base) < LOAD(s->span[i - 1].size)) p = LOAD(s->span[i - 1].pool);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (LOAD(x->seq) == seq) return p;
    }
}

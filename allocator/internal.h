/* Internal structures of the allocator core, shared by its files only. */
#ifndef CA_INTERNAL_H
#define CA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "allocator.h"
#include "lock.h"

typedef struct ca_pool ca_pool;
typedef struct ca_batch ca_batch;
typedef struct ca_heap ca_heap;
typedef struct ca_segment ca_segment;

/* A block tiles part of a segment; blocks of a segment are in address order. */
typedef struct ca_block {
    uintptr_t addr;
    size_t size;                       /* multiple of CA_ROUND */
    size_t requested;                  /* as asked; 0 while free */
    struct ca_block *prev, *next;      /* address-order neighbours in the segment */
    ca_segment *seg;
    struct ca_block *left, *right, *parent; /* free index (treap) links */
    int32_t bin;                       /* free index bin; -1 when not indexed */
    bool allocated;                    /* not free: held by the program, or pending */
    bool small;                        /* allocated: asked for at most CA_SMALL_LIMIT (its
                                        * statistics count in the small pool) */
    bool pending;                      /* freed by a plain free, waiting for a fence
                                        * (fence.c); `allocated` stays set meanwhile,
                                        * so nothing merges, maps or unmaps it */
    union {                            /* never needed at once: */
        struct ca_block *pending_next; /* pending: in its pool's unfenced list or batch */
        size_t unmapped;               /* free, expandable: granules lying wholly inside it
                                        * with no physical memory (0: all mapped, the hot
                                        * path's test); 0 while allocated */
    };
    struct ca_block *live_next;        /* allocated: next in its live table's bucket */
} ca_block;

#include "livetable.h"

#define CA_BINS 352
#define CA_BIN_WORDS ((CA_BINS + 63) / 64)

/* Free blocks of one pool: best fit (size, then address) in O(log n). Sizes
 * fall in bins (exact below 32 KiB, then 8 per power of two); a bitmap finds
 * the next non-empty bin and a treap per bin orders its blocks. */
typedef struct ca_free_index {
    ca_block *root[CA_BINS];
    uint64_t bitmap[CA_BIN_WORDS];
    size_t count;
} ca_free_index;

struct ca_segment {
    ca_heap *heap;
    uintptr_t base;
    size_t span;          /* bytes tiled by blocks */
    size_t reserve_size;  /* expandable: the whole virtual range */
    size_t mapped;        /* bytes of physical memory behind the range */
    ca_handle *handles;   /* expandable: one per granule of span; 0 = unmapped */
    uint64_t *mapped_bits; /* expandable: bit i set when handles[i] is: scans go 64 granules a step */
    uint64_t *busy;       /* expandable, on a device that runs work after calls return: per
                           * granule, the pool's epoch when a free that left device work
                           * behind last covered it (0: none); see expandable.c */
    size_t handles_cap;
    ca_block *first, *last;
    ca_segment *next;     /* in the heap */
    bool expandable;
};

/* The blocks of one size class in a pool: small (up to 1 MiB) or large,
 * each with its own segments, so that a small block never pins a classic
 * segment. Expandable segments use the large heap alone: any free granule can
 * be moved where a request needs it, so one range wastes fewer partly used
 * granules than two (BENCHMARKS.md, issue 11). */
struct ca_heap {
    ca_pool *pool;
    bool small;
    uintptr_t range_base;   /* expandable: the reserved range, fixed once set */
    size_t range_size;
    ca_free_index free;
    ca_segment *segments;
};

/* A pool serves one stream and has its own lock, live table and statistics,
 * so threads on different streams share no written cache line on the hot path. */
struct ca_pool {
    ca_lock lock;
    ca_stream stream;
    ca_heap heap[2];        /* [0] large, [1] small */
    ca_live_table live;     /* allocated blocks, by address */
    ca_stats st;            /* this pool's figures; active and active_bytes keep only
                             * their peaks: the rest is allocated + pending (pool_current) */
    int64_t pend_count[CA_POOL_KINDS], pend_bytes[CA_POOL_KINDS]; /* pending plain frees */
    /* Plain frees waiting for the device (fence.c): blocks freed since the
     * last fence, then fenced batches, oldest first. */
    ca_block *unfenced;
    size_t n_unfenced;
    ca_batch *oldest, *newest;
    ca_batch *spare_batches;
    /* Reserved memory follows need (expandable.c): the pool's clock is its
     * allocation count. Granules freed with device work behind them are busy
     * until a mark (a fence) recorded after the free has passed: epoch counts
     * the marks recorded, granules labelled below idle_epoch are idle. */
    uint64_t next_sweep;    /* clock at which granules not needed are next given back */
    int64_t win_peak;       /* active bytes (allocated, or freed and waiting for a fence)
                             * at their highest since the last sweep */
    int64_t win_peak_prev;  /* ... between the two sweeps before */
    size_t edges;           /* reserved - active - busy free granules when the pool last
                             * had to grow: what partly used granules at blocks' edges
                             * cost it */
    uint64_t epoch, idle_epoch;
    ca_fence mark;          /* in flight; 0: none */
    ca_block *spare;        /* recycled block structs */
    void **chunks;          /* block slabs, freed with the pool */
    size_t nchunks, chunks_cap;
};

#define CA_MAX_POOLS 1024

struct ca_allocator {
    ca_lock lock;             /* innermost: pool creation, global peaks */
    ca_backend *be;
    ca_options opt;
    size_t granule;
    size_t capacity;          /* device total, from mem_info at creation (0: unknown) */
    size_t limit;             /* the most it may ever hold (see ca_malloc), whole granules */
    size_t cap;               /* limit, when the allocator keeps to it itself because the
                               * device would give more (max_reserved, CA_MAX_BYTES); 0: the
                               * device's own capacity is the limit */
    size_t reserve;           /* expandable: virtual range per heap, at least limit */
    bool async;               /* the device may still run work when calls return (events or
                               * fences): a block freed in stream order is not idle */
    ca_pool *pools[CA_MAX_POOLS]; /* published in order, never removed */
    _Atomic size_t npools;
    ca_stats peaks;           /* device-wide peaks of the pools' sums */
    uint64_t serial;          /* unique per allocator in this process */
    ca_observer_fn observer;
    void *observer_ctx;
};

/* freeindex.c */
void ca_free_index_insert(ca_free_index *fi, ca_block *b);
void ca_free_index_remove(ca_free_index *fi, ca_block *b);
ca_block *ca_free_index_best_fit(ca_free_index *fi, size_t size);
ca_block *ca_free_index_largest(ca_free_index *fi);
/* The block before b in (size, address) order; NULL when b is the smallest.
 * With ca_free_index_largest, walks the index from its largest block down. */
ca_block *ca_free_index_smaller(ca_free_index *fi, ca_block *b);
/* The block after b in (size, address) order; NULL when b is the largest. */
ca_block *ca_free_index_larger(ca_free_index *fi, ca_block *b);
/* Of b and the n blocks after it, the one at the lowest address. */
ca_block *ca_free_index_lowest_near(ca_free_index *fi, ca_block *b, int n);
void ca_free_index_walk(ca_free_index *fi, void (*fn)(void *ctx, ca_block *b), void *ctx);

/* block.c: block structs from the pool's slabs */
ca_block *ca_block_new(ca_pool *p);
void ca_block_put(ca_pool *p, ca_block *b);
void ca_block_free_all(ca_pool *p);

/* allocator.c: shared steps */
ca_block *ca_split(ca_allocator *a, ca_block *b, size_t size);
void ca_emit(ca_allocator *a, ca_event_kind kind, uintptr_t addr, size_t size, size_t req, ca_stream s);
/* The pool's stream finished with its memory: false when that could not be
 * waited for (nothing may be unmapped then). */
bool ca_pool_sync(ca_allocator *a, ca_pool *p);
static inline int ca_heap_kind(const ca_heap *h) { return h->small ? CA_POOL_SMALL : CA_POOL_LARGE; }
/* A pool reached a new peak of a statistic: update the device-wide peak. */
void ca_pool_new_peak(ca_allocator *a, size_t field);
/* Change one statistic of heap h's pool. */
#define CA_STAT(a, h, field, delta) CA_STAT_KIND(a, (h)->pool, ca_heap_kind(h), field, delta)
/* Change one statistic of a block of pool p: its kind is its size class
 * (ca_block.small), whichever heap holds it. */
#define CA_BLOCK_STAT(a, p, b, field, delta) \
    CA_STAT_KIND(a, p, (b)->small ? CA_POOL_SMALL : CA_POOL_LARGE, field, delta)
#define CA_STAT_KIND(a, p, kind, field, delta)                                           \
    do {                                                                                 \
        if (ca_stat_update((p)->st.field, (kind), (delta)))                              \
            ca_pool_new_peak((a), offsetof(ca_stats, field));                            \
    } while (0)
size_t ca_reserved_total(ca_allocator *a);

/* A pending plain free comes (sign 1) or goes (-1): blocks awaiting their
 * fence count as active, not allocated. Read without the lock by the
 * device-wide sums, so stored whole. */
static inline void ca_pend(ca_pool *p, const ca_block *b, int sign) {
    int kinds[2] = {CA_POOL_ALL, b->small ? CA_POOL_SMALL : CA_POOL_LARGE};
    for (int i = 0; i < 2; i++) {
        int k = kinds[i];
        __atomic_store_n(&p->pend_count[k], p->pend_count[k] + sign, __ATOMIC_RELAXED);
        __atomic_store_n(&p->pend_bytes[k], p->pend_bytes[k] + sign * (int64_t)b->size, __ATOMIC_RELAXED);
    }
}
/* Active bytes of the pool: allocated, or freed and waiting for a fence. */
static inline int64_t ca_pool_active_bytes(const ca_pool *p) {
    return p->st.allocated_bytes[CA_POOL_ALL].current + p->pend_bytes[CA_POOL_ALL];
}

/* The pool's clock: allocations it served so far (a statistic kept anyway). */
static inline uint64_t ca_pool_clock(const ca_pool *p) { return (uint64_t)p->st.allocation[CA_POOL_ALL].allocated; }

/* expandable.c */
/* Work one search for donor granules may do, beyond two units per granule it
 * needs (a move replaces a creation, which costs far more on a GPU): a unit
 * is a free block looked at or 64 granules scanned. BENCHMARKS.md (issue 11)
 * has what it costs and gains. */
#define CA_REMAP_BUDGET 64
int ca_exp_alloc(ca_allocator *a, ca_heap *h, size_t size, ca_block **out);
void ca_exp_release(ca_allocator *a, ca_segment *seg);
void ca_exp_destroy(ca_allocator *a, ca_segment *seg);
size_t ca_exp_mapped_run(const ca_allocator *a, const ca_block *b);
size_t ca_exp_block_mapped(const ca_allocator *a, const ca_block *b);
/* Every release_after allocations of the pool: give back the idle granules it
 * did not need over the last release_after to twice that many. */
void ca_exp_sweep(ca_allocator *a, ca_pool *p);
/* At destruction: the pool's mark dropped. */
void ca_exp_drop_mark(ca_allocator *a, ca_pool *p);

/* fence.c: plain frees wait for a fence before their blocks are free again */
void ca_pending_add(ca_allocator *a, ca_pool *p, ca_block *b);
/* Fence the unfenced blocks, then free the blocks of every batch whose fence
 * passed, oldest first, without blocking. */
void ca_pending_collect(ca_allocator *a, ca_pool *p);
/* Wait for the oldest batch (fencing the unfenced blocks first when there is
 * none) and free its blocks; false when nothing was freed. */
bool ca_pending_wait_oldest(ca_allocator *a, ca_pool *p);
/* Everything pending back, waiting as needed. */
void ca_pending_settle(ca_allocator *a, ca_pool *p);
/* At destruction: fences dropped without waiting. */
void ca_pending_drop(ca_allocator *a, ca_pool *p);
static inline bool ca_pool_has_pending(const ca_pool *p) { return p->unfenced || p->oldest; }

/* allocator.c: a block that is free again, merged and indexed;
 * idle: no device work can touch it any more (else its granules are busy:
 * see expandable.c). */
void ca_block_release(ca_allocator *a, ca_pool *p, ca_block *b, bool idle);
/* expandable.c: b's granules are busy (freed with device work behind them). */
void ca_exp_busy(ca_allocator *a, ca_pool *p, const ca_block *b);

/* classic.c */
int ca_classic_alloc(ca_allocator *a, ca_heap *h, size_t size, ca_block **out);
void ca_classic_release(ca_allocator *a, ca_heap *h);
void ca_classic_destroy(ca_allocator *a, ca_segment *seg);

#endif

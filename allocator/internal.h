/* Internal structures of the allocator core, shared by its files only. */
#ifndef CA_INTERNAL_H
#define CA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "allocator.h"
#include "lock.h"

/* The index of a statistic (its offset in ca_stats) among the ca_stat arrays. */
#define CA_FIELD(offset) ((offset) / sizeof(ca_stat[CA_POOL_KINDS]))
#define CA_FIELDS CA_FIELD(offsetof(ca_stats, num_alloc_retries))

typedef struct ca_pool ca_pool;
typedef struct ca_batch ca_batch;
typedef struct ca_heap ca_heap;
typedef struct ca_segment ca_segment;

/* A block tiles part of a segment; blocks of a segment are in address order.
 * Its first 64 bytes hold all that a malloc, a free, a merge and the live
 * table touch; then a treap's parent or an allocation's id. What a free
 * block and an allocated one need is never needed at once: they share
 * bytes. 72 bytes in all (112 before: with 100,000 live blocks, fewer lines
 * and pages to miss; issue 29, BENCHMARKS.md). */
typedef struct ca_block {
    uintptr_t addr;
    size_t size;                       /* multiple of CA_ROUND */
    struct ca_block *prev, *next;      /* address-order neighbours in the segment */
    ca_segment *seg;
    union {
        struct {                       /* free: */
            struct ca_block *left, *right; /* free index links (treap children, or a
                                        * list's previous and next) */
        };
        struct {                       /* allocated: */
            size_t requested;          /* as asked; 0 once freed (pending) */
            union {
                struct ca_block *live_next;    /* live: next in its live table's bucket */
                struct ca_block *pending_next; /* pending: in its pool's unfenced list or batch */
            };
        };
    };
    union {
        uint32_t unmapped;             /* free, expandable: granules lying wholly inside it
                                        * with no physical memory (0: all mapped, the hot
                                        * path's test). A range holds at most 2^32
                                        * granules (set_limits) */
        uint32_t owner;                /* allocated or pending: in the shared pool, the
                                        * stream pool that asked for it (share.c); else 0.
                                        * Back to 0 when free (a merge reads unmapped) */
    };
    int16_t bin;                       /* free index bin; -1 when not indexed */
    union {
        struct {
            bool allocated : 1;        /* not free: held by the program, or pending */
            bool small : 1;            /* allocated: asked for at most CA_SMALL_LIMIT (its
                                        * statistics count in the small pool) */
            bool pending : 1;          /* freed by a plain free, waiting for a fence
                                        * (fence.c); `allocated` stays set meanwhile,
                                        * so nothing merges, maps or unmaps it */
            bool ordered : 1;          /* live: made by ca_malloc_ordered */
            bool has_id : 1;           /* live: id is given */
        };
        uint8_t flags;                 /* all of them, for an allocation's one store */
    };
    union {
        struct ca_block *parent;       /* free, in a treap bin: its parent */
        struct {                       /* live: */
            uint64_t id : 40;          /* has_id: its allocation's id (ca_find_allocation),
                                        * given on first asking (a million ids a
                                        * second take 12 days to wrap) */
            uint64_t tag : CA_TAG_BITS; /* the observer's (ca_trace_event.tag), from
                                        * the allocation; left as it was while there
                                        * is none */
        };
    };
} ca_block;
_Static_assert(offsetof(ca_block, parent) == 64 && sizeof(ca_block) == 72, "a block's hot fields fit 64 bytes");

/* A new allocation's flags: allocated, not pending, no id yet. */
#define CA_FLAG(field) (((ca_block){.field = true}).flags) /* its bit in flags */
static inline uint8_t ca_block_flags_live(bool small, bool ordered) {
    return (uint8_t)(CA_FLAG(allocated) | (small ? CA_FLAG(small) : 0) | (ordered ? CA_FLAG(ordered) : 0));
}

/* Is b live (allocated, not waiting for a fence)? Then requested is set. */
static inline bool ca_block_live(const ca_block *b) { return b->allocated && !b->pending; }

#include "livetable.h"

/* The index of block starts in expandable segments (ca_segment.first_start),
 * kept where blocks begin (a split, a grown range: b linked after its
 * predecessor) and end (a merge, a trimmed tail: b still linked). A block
 * is the first of its granule exactly when its predecessor lies in an
 * earlier one (ranges are granule-aligned): the common case, a block cut or
 * merged inside one granule, costs a compare. */
static inline void ca_starts_begin(struct ca_segment *seg, ca_block *b);
static inline void ca_starts_end(struct ca_segment *seg, ca_block *b);

#define CA_BINS 352
#define CA_BIN_WORDS ((CA_BINS + 63) / 64)

/* Free blocks of one pool: best fit (size, then address) in O(log n). Sizes
 * fall in bins (exact below 32 KiB, then 8 per power of two); a bitmap finds
 * the next non-empty bin; an exact bin is a list, newest first, the others a
 * treap each (freeindex.c). */
#define CA_EXACT_BINS 64
typedef struct ca_free_index {
    uint64_t bitmap[CA_BIN_WORDS];
    size_t count;
    ca_block *root[CA_BINS];        /* a list's head, or a treap's root */
    ca_block *tail[CA_EXACT_BINS];  /* a list's last block (the largest walks start there) */
} ca_free_index;

struct ca_segment {
    ca_heap *heap;
    uintptr_t base;
    size_t span;          /* bytes tiled by blocks */
    size_t reserve_size;  /* expandable: the whole virtual range */
    size_t mapped;        /* bytes of physical memory behind the range */
    ca_handle *handles;   /* expandable: one per granule of span; 0 = unmapped */
    uint64_t *mapped_bits; /* expandable: bit i set when handles[i] is: scans go 64 granules a step */
    ca_block **first_start; /* expandable: per granule, the first block that begins in it
                           * (NULL: none), so that the block around an address is found
                           * near it (ca_find_allocation) */
    unsigned gshift;      /* expandable: log2 of the granule */
    uint64_t *free_edges; /* expandable, once its heap keeps them (ca_heap.edge_bits; else
                           * NULL): per CA_ROUND bytes of span, a bit set at the first and
                           * the last unit of each free block in the index, so that a free
                           * finds its neighbours free or not without reading them (cache
                           * misses with many blocks; ca_edge_at) */
    uint64_t *busy;       /* expandable, on a device that runs work after calls return: per
                           * granule, the pool's epoch when a free that left device work
                           * behind last covered it (0: none); see expandable.c */
    size_t handles_cap;
    size_t free_edges_words;
    ca_block *first, *last;
    ca_segment *next;     /* in the heap */
    bool expandable;
};

/* Do a and b lie in different granules of seg? */
static inline bool ca_granules_differ(const struct ca_segment *seg, uintptr_t a, uintptr_t b) {
    return (a ^ b) >> seg->gshift;
}

/* The unit (CA_ROUND bytes) of seg where addr lies. */
static inline size_t ca_unit_of(const struct ca_segment *seg, uintptr_t addr) {
    return (addr - seg->base) / CA_ROUND;
}

/* Is the unit of seg at addr the first or last of a free block? */
static inline bool ca_edge_at(const struct ca_segment *seg, uintptr_t addr) {
    size_t unit = ca_unit_of(seg, addr);
    return seg->free_edges[unit / 64] >> (unit % 64) & 1;
}

/* b joins (on) or leaves the index: its edges' bits follow, where seg keeps
 * them (freeindex.c). */
void ca_edges_mark(struct ca_segment *seg, const ca_block *b, bool on);

static inline void ca_starts_begin(struct ca_segment *seg, ca_block *b) {
    if (seg->expandable && (!b->prev || ca_granules_differ(seg, b->prev->addr, b->addr)))
        seg->first_start[(b->addr - seg->base) >> seg->gshift] = b;
}

static inline void ca_starts_end(struct ca_segment *seg, ca_block *b) {
    if (seg->expandable && (!b->prev || ca_granules_differ(seg, b->prev->addr, b->addr)))
        seg->first_start[(b->addr - seg->base) >> seg->gshift] =
            b->next && !ca_granules_differ(seg, b->next->addr, b->addr) ? b->next : NULL;
}

/* Expandable: the virtual ranges a heap holds, read without the pool's lock
 * (ca_free looks for a pointer's pool): a range's size is stored last, with
 * release, and cleared first. Each new range is at least twice the last
 * (ranges.c), so that what a heap reserves grows as the pool does (up to
 * ca_allocator.reserve in all) and its ranges stay few: 32 cover any device. */
#define CA_MAX_RANGES 32
typedef struct ca_range {
    uintptr_t base;
    size_t size;            /* 0: empty */
} ca_range;

/* The blocks of one size class in a pool: small (up to 1 MiB) or large,
 * each with its own segments, so that a small block never pins a classic
 * segment. Expandable segments use the large heap alone: any free granule can
 * be moved where a request needs it, so one range wastes fewer partly used
 * granules than two (BENCHMARKS.md, issue 11). */
struct ca_heap {
    ca_pool *pool;
    bool small;
    ca_free_index free;     /* the free blocks of all its segments (ranges) */
    ca_segment *segments;   /* newest first; expandable: one per range, the first the
                             * one that grows */
    ca_range ranges[CA_MAX_RANGES];
    int nranges;            /* read without the lock: atomically */
    size_t reserved_va;     /* expandable: the sum of the ranges' sizes */
    bool edge_bits;         /* expandable: its ranges keep bitmaps of free edges */
    size_t edges_from;      /* the pool's live blocks at which they start: CA_EDGES_FROM,
                             * twice what it held after a start that failed; SIZE_MAX
                             * once started, and in classic heaps */
};

/* A pool's life: LIVE while its stream is; RETIRED once the stream is
 * destroyed or its thread exited (ca_retire_stream), holding what it held
 * until its last block is freed and the device is past its work (a fence);
 * then SPARE, empty, until a new stream takes it. Pool structs are never
 * freed before the allocator, so a thread may read any of them without a
 * lock and find out under its lock what it has become. */
enum { CA_POOL_LIVE, CA_POOL_RETIRED, CA_POOL_SPARE };

/* A pool serves one stream and has its own lock, live table and statistics,
 * so threads on different streams share no written cache line on the hot path. */
struct ca_pool {
    ca_lock lock;
    ca_stream key;          /* the stream it serves, for lookups (read without the
                             * lock: atomically); CA_NO_STREAM unless LIVE */
    ca_stream stream;       /* the stream it serves or served (events, views) */
    int state;              /* CA_POOL_*; written under retire_lock and the pool's lock,
                             * read without them atomically */
    ca_fence retire_fence;  /* RETIRED with nothing live: the device's work up to
                             * then (0: not recorded yet) */
    struct ca_pool *next_idle; /* RETIRED: the next in the allocator's retired list;
                             * SPARE: in its spare list (under retire_lock) */
    ca_live_table live;     /* allocated blocks, by address */
    ca_stats st;            /* this pool's figures; active and active_bytes keep only
                             * their peaks: the rest is allocated + pending (pool_current) */
    int64_t pend_count[CA_POOL_KINDS], pend_bytes[CA_POOL_KINDS]; /* pending plain frees */
    /* Plain frees waiting for the device (fence.c): blocks freed since the
     * last fence, then fenced batches, oldest first. */
    ca_block *unfenced;
    size_t n_unfenced, unfenced_bytes;
    bool fences_pass;       /* the last fence passed at record (no non-blocking
                             * stream): unfenced blocks are as good as free */
    ca_batch *oldest, *newest;
    ca_batch *spare_batches;
    /* Reserved memory follows need (expandable.c): the pool's clock is its
     * allocation count. Granules freed with device work behind them are busy
     * until a mark (a fence) recorded after the free has passed: epoch counts
     * the marks recorded, granules labelled below idle_epoch are idle. */
    uint64_t next_sweep;    /* clock at which granules not needed are next given back */
    int64_t win_peak;       /* bytes needed (ca_pool_needed_bytes: allocated, or freed and waiting for a fence)
                             * at their highest since the last sweep */
    int64_t win_peak_prev;  /* ... between the two sweeps before */
    size_t edges;           /* reserved - active - busy free granules when the pool last
                             * had to grow: what partly used granules at blocks' edges
                             * cost it */
    uint64_t epoch, idle_epoch;
    ca_fence mark;          /* in flight; 0: none */
    /* Small blocks shared across streams (share.c). */
    bool own;               /* its stream's requests come here, not to the shared pool:
                             * once it served one, until it holds no memory again
                             * (read without the lock: atomically) */
    uint32_t index;         /* its place in the pool table */
    uint32_t gen;           /* starts so far (a struct serves stream after stream) */
    int64_t shared_held;    /* bytes its stream's requests hold in the shared pool
                             * (changed under that pool's lock; read atomically) */
    uint32_t contended;     /* its requests that found the shared pool's lock taken
                             * (atomically); at CA_SHARE_CONTENDED it becomes own */
    struct ca_share_keep *keep; /* the shared pool: blocks kept for reuse in their
                             * stream's order (share.c); NULL until the first */
    size_t n_kept, kept_bytes;
    ca_block *spare;        /* recycled block structs */
    void **chunks;          /* block slabs, freed with the pool */
    size_t nchunks, chunks_cap;
    /* Its heaps (4 KB each) come with its first block of its own
     * (ca_pool_make_heaps): a stream whose blocks are all in the shared pool
     * never needs them (a pool was 8.9 KB, now 1 KB: issue 29). Until then
     * nheaps is 0 and heap an empty one holding no range (pool_holds reads
     * it without the lock: atomically). Expandable pools have no small heap:
     * they never use it (ca_heap). */
    int nheaps;             /* 0, then 1 expandable, 2 classic */
    ca_heap *heap;          /* [0] large, [1] small */
};

/* The key of a pool that serves no stream; no caller may name it a stream. */
#define CA_NO_STREAM UINTPTR_MAX

/* The pool table: pointers in creation order, in an array that doubles;
 * readers take the count, then the array (both published with release), and
 * the arrays it outgrew stay until the allocator goes. */
typedef struct ca_pool_array {
    struct ca_pool_array *older;
    size_t cap;
    ca_pool *pool[];
} ca_pool_array;

/* pooltab.c: the live pools by stream (a slot's key CA_NO_STREAM: free). */
typedef struct ca_pooltab_slot {
    ca_stream key;
    ca_pool *pool;
} ca_pooltab_slot;
typedef struct ca_pooltab {
    struct ca_pooltab *older; /* outgrown, kept for readers until the allocator goes */
    int bits;                 /* 1 << bits slots */
    ca_pooltab_slot slot[];
} ca_pooltab;

/* addrindex.c: the segments' address spans, sorted by base, for finding an
 * address's pool without a lock (see there). */
typedef struct ca_addr_span {
    uintptr_t base;
    size_t size;
    ca_pool *pool;
} ca_addr_span;
typedef struct ca_addr_spans {
    struct ca_addr_spans *older; /* outgrown, kept for readers until the allocator goes */
    size_t n, cap;
    size_t gaps;         /* spans removed but left in place (size 0) until reused or
                          * swept: an insert shifts the spans up to the nearest gap */
    ca_addr_span span[];
} ca_addr_spans;
typedef struct ca_addr_index {
    ca_lock lock;        /* writers; innermost */
    unsigned seq;        /* odd while a writer changes the spans */
    ca_addr_spans *cur;
} ca_addr_index;

struct ca_allocator {
    ca_lock lock;             /* innermost: pool creation, global peaks, retired figures */
    ca_lock retire_lock;      /* outermost: a retired pool's end (its figures move to
                               * `gone`) against the walks that sum every pool */
    ca_backend *be;
    ca_options opt;
    size_t granule;
    size_t capacity;          /* device total, from mem_info at creation (0: unknown) */
    size_t limit;             /* the most it may ever hold (see ca_malloc), whole granules */
    size_t max_request;       /* the largest request whose granules fit the limit: limit
                               * in whole CA_ROUND units (one compare on the hot path) */
    size_t cap;               /* limit, when the allocator keeps to it itself because the
                               * device would give more (max_reserved, CA_MAX_BYTES); 0: the
                               * device's own capacity is the limit */
    size_t reserve;           /* expandable: the most virtual address space one heap's
                               * ranges take in all, at least limit */
    size_t first_range;       /* expandable: the size of a heap's first range (or more,
                               * for a larger first request) */
    bool async;               /* the device may still run work when calls return (events or
                               * fences): a block freed in stream order is not idle */
    /* Physical memory held from the device, all pools: `held` is taken before
     * memory is created (so the cap holds however many threads grow at once)
     * and given back after it is released; `reserved` follows the pools'
     * reserved_bytes, its peak the device-wide one. */
    size_t held, reserved, reserved_peak; /* (all three read and written atomically) */
    ca_pool_array *pools;     /* (read atomically) */
    size_t npools;            /* (read atomically) */
    ca_pooltab *pooltab;      /* the live ones by stream (read atomically) */
    ca_addr_index addrs;      /* every segment's pool by address */
    ca_pool *spare;           /* pools SPARE, a list (under retire_lock): a new
                               * stream takes the first */
    ca_pool *shared;          /* small blocks of streams that hold little (share.c); made on
                               * first need, under retire_lock (read atomically) */
    size_t share_bytes;       /* ca_options.share_bytes; 0 when off, or when the device runs
                               * work after calls return and has no fences */
    ca_pool *retired;         /* pools RETIRED, a list (under retire_lock): their ends
                               * are looked for among them alone, not every pool
                               * (a stream per request among 4,000: issue 29) */
    size_t nretired;          /* pools RETIRED, read atomically: their ends are looked
                               * for only when there are some */
    ca_stats peaks;           /* device-wide peaks of the pools' sums */
    /* With more than one pool (`several`, set once, read atomically), every
     * change of a pool's figure is added to `totals` too (atomically), so that
     * a pool's new peak finds the device-wide sum at once instead of summing
     * every pool: the statistics with a device-wide peak (index CA_FIELD),
     * small and large (ALL is their sum); active's hold the pending plain
     * frees only (allocation's are added). One pool pays nothing. */
    bool several;
    _Alignas(64) int64_t totals[CA_FIELDS][CA_POOL_KINDS];
    ca_stats gone;            /* the figures of pools that ended (totals and peaks) */
    uint64_t serial;          /* unique per allocator in this process */
    ca_observer_fn observer;
    void *observer_ctx;
};

/* The pool table now: its count, and *arr (see ca_pool_array). */
static inline size_t ca_pools(ca_allocator *a, ca_pool *const **arr) {
    size_t n = __atomic_load_n(&a->npools, __ATOMIC_ACQUIRE);
    *arr = __atomic_load_n(&a->pools, __ATOMIC_ACQUIRE)->pool;
    return n;
}

/* pools.c: pool p's heaps, made (under its lock) before its first block of
 * its own; false without host memory for them. */
bool ca_pool_make_heaps(ca_allocator *a, ca_pool *p);

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
/* A new slab's blocks made spare; false when no memory for it. */
bool ca_block_slab(ca_pool *p);
/* Inline: a split takes one on every allocation that does not fit exactly. */
static inline ca_block *ca_block_new(ca_pool *p) {
    if (__builtin_expect(!p->spare, 0) && !ca_block_slab(p)) return NULL;
    ca_block *b = p->spare;
    p->spare = b->next;
    /* the hot 64 bytes only: a treap's parent is set when the block joins one */
    memset(b, 0, offsetof(ca_block, parent));
    b->bin = -1;
    return b;
}
static inline void ca_block_put(ca_pool *p, ca_block *b) {
    b->next = p->spare;
    p->spare = b;
}
void ca_block_free_all(ca_pool *p);

/* allocator.c: shared steps */
void ca_emit(ca_allocator *a, ca_event_kind kind, uintptr_t addr, size_t size, size_t req, ca_stream s);
/* A classic segment made (SEGMENT_MAP) or released (SEGMENT_UNMAP), with its pool. */
void ca_emit_classic(ca_allocator *a, ca_event_kind kind, const ca_segment *seg);
/* Wait until the work queued so far on every stream of the device is done
 * (a fence of backend.h's fence_record_done; without one, p's stream):
 * false when that could not be waited for (nothing may be unmapped then). */
bool ca_device_wait(ca_allocator *a, ca_pool *p);
static inline int ca_heap_kind(const ca_heap *h) { return h->small ? CA_POOL_SMALL : CA_POOL_LARGE; }

/* addrindex.c. add and remove: each segment made or ended (add fails only
 * for want of host memory); find: the pool whose segment spans addr, or NULL,
 * without a lock (a segment made or ended meanwhile may be missed or seen:
 * the caller checks under the pool's lock). */
int ca_addr_index_init(ca_addr_index *x);
void ca_addr_index_destroy(ca_addr_index *x);
int ca_addr_index_add(ca_addr_index *x, uintptr_t base, size_t size, ca_pool *pool);
void ca_addr_index_remove(ca_addr_index *x, uintptr_t base);
ca_pool *ca_addr_index_find(ca_addr_index *x, uintptr_t addr);

/* pooltab.c; all but find under retire_lock */
int ca_pooltab_init(ca_allocator *a);
void ca_pooltab_destroy(ca_allocator *a);
/* The live pool of stream s, without a lock; NULL if none (or a writer was
 * moving it: look again under retire_lock). */
ca_pool *ca_pooltab_find(ca_allocator *a, ca_stream s);
/* Room for `pools` pools without allocating in set. */
int ca_pooltab_reserve(ca_allocator *a, size_t pools);
void ca_pooltab_set(ca_allocator *a, ca_stream s, ca_pool *p);
void ca_pooltab_drop(ca_allocator *a, ca_stream s);

/* pools.c: the pool table, a stream's pool, retired pools' ends */
int ca_pools_init(ca_allocator *a);
void ca_pools_destroy(ca_allocator *a);
/* The live pool of a stream, made (or a spare one taken) on its first use.
 * CA_ERR_STREAM when the backend says the stream is not one; CA_ERR_OOM
 * when there is no host memory for a pool. Outside every lock. */
int ca_pool_for(ca_allocator *a, ca_stream stream, ca_pool **out);
/* Retired pools with nothing allocated end when the device is past their
 * work; wait: block until it is. Outside every lock. */
void ca_pools_end_retired(ca_allocator *a, bool wait);

/* figures.c */
/* A pool reached a new peak of a statistic: update the device-wide peak. */
void ca_pool_new_peak(ca_allocator *a, size_t field);
int64_t ca_sum_current(ca_allocator *a, size_t field, int kind);
/* Its active figures, from allocated and pending (the rest of *st is p->st). */
void ca_pool_figures(const ca_pool *p, ca_stats *st);
void ca_stats_add(ca_stats *dst, const ca_stats *src);
/* Change one statistic of heap h's pool (and its running total). */
#define CA_STAT(a, h, field, delta)                                                      \
    do {                                                                                 \
        bool rose_ = ca_stat_update((h)->pool->st.field, ca_heap_kind(h), (delta));      \
        ca_total_add((a), offsetof(ca_stats, field), ca_heap_kind(h), (delta));          \
        if (rose_) ca_pool_new_peak((a), offsetof(ca_stats, field));                     \
    } while (0)
/* A pool's figure changed by delta: the running total too, when there are
 * several pools (under the pool's lock: see ca_allocator.several). */
static inline void ca_total_add(ca_allocator *a, size_t field, int kind, int64_t delta) {
    if (__atomic_load_n(&a->several, __ATOMIC_RELAXED))
        __atomic_add_fetch(&a->totals[CA_FIELD(field)][kind], delta, __ATOMIC_RELAXED);
}
/* A block of `kind` allocated (sign 1) or freed (-1): the running totals of
 * its three figures, the test of `several` made once. */
static inline void ca_totals_block(ca_allocator *a, int kind, int sign, const ca_block *b) {
    if (!__atomic_load_n(&a->several, __ATOMIC_RELAXED)) return;
    int64_t(*t)[CA_POOL_KINDS] = a->totals;
    __atomic_add_fetch(&t[CA_FIELD(offsetof(ca_stats, allocation))][kind], sign, __ATOMIC_RELAXED);
    __atomic_add_fetch(&t[CA_FIELD(offsetof(ca_stats, allocated_bytes))][kind], sign * (int64_t)b->size,
                       __ATOMIC_RELAXED);
    __atomic_add_fetch(&t[CA_FIELD(offsetof(ca_stats, requested_bytes))][kind], sign * (int64_t)b->requested,
                       __ATOMIC_RELAXED);
}
/* There will be a second pool: the running totals start from the first's figures. */
void ca_totals_start(ca_allocator *a);
size_t ca_reserved_total(ca_allocator *a);

/* share.c: small blocks of streams that hold little, in one pool */
/* A request of `rounded` bytes (at most share_bytes) on the stream of p,
 * which is not `own`: the shared pool, with *owner naming p, or p (which
 * then becomes own when it serves it). */
ca_pool *ca_share_route(ca_allocator *a, ca_pool *p, size_t rounded, uint32_t *owner);
/* Requests of a stream that find the shared pool's lock held by another
 * thread, after which the stream gets its own pool (its own lock). */
#define CA_SHARE_CONTENDED 16
/* The shared pool p's lock, for a request of asker's stream: counted when
 * another thread holds it (share.c). */
void ca_share_lock(ca_pool *p, ca_pool *asker);
/* b, just allocated in the shared pool for `asker`, counts as its stream's. */
void ca_share_hold(ca_pool *asker, ca_block *b, uint32_t owner);
/* b, in the shared pool, is free again (its fence passed, if it waited for
 * one): off its stream's count, which holds its pending blocks too. */
void ca_share_drop(ca_allocator *a, ca_block *b);
/* The shared pool, made on first need; NULL without host memory. */
ca_pool *ca_pool_shared(ca_allocator *a);
/* Was the shared block b asked for on `stream` (a live stream, then)? */
bool ca_share_asked_on(ca_allocator *a, const ca_block *b, ca_stream stream);
/* b, in the shared pool p (locked), freed in the order of the stream that
 * asked for it: kept pending for that stream's next request; false when not
 * kept (then it waits for a fence). */
bool ca_share_keep(ca_allocator *a, ca_pool *p, ca_block *b);
/* A block kept for `owner` of `size` bytes, out of the pending figures, or NULL. */
ca_block *ca_share_take(ca_allocator *a, ca_pool *p, uint32_t owner, size_t size);
/* Every kept block (linked by pending_next, still pending), for a fence. */
ca_block *ca_share_take_all(ca_allocator *a, ca_pool *p);
/* asker's stream is gone: the blocks kept for it wait for a fence, as any
 * other stream would reuse them (a new stream may get its handle, and its
 * pool struct). Under retire_lock, no pool's lock held. */
void ca_share_forget(ca_allocator *a, ca_pool *asker);
/* A stream pool that holds no memory again shares again (not stream 0, the
 * legacy stream: its pool, cudaMalloc's, serves every stream already). */
static inline void ca_share_reserved_changed(ca_pool *p) {
    if (__atomic_load_n(&p->own, __ATOMIC_RELAXED) && !p->st.reserved_bytes[CA_POOL_ALL].current && p->stream)
        __atomic_store_n(&p->own, false, __ATOMIC_RELAXED);
}

/* Physical memory from the device: ca_hold before it is created (false, with
 * nothing taken, when the cap would be passed: one atomic step for every
 * pool and thread), ca_unhold after it is given back; ca_reserved_add when
 * a pool's reserved figure changes (the exact device-wide peak). */
static inline bool ca_hold(ca_allocator *a, size_t bytes) {
    size_t cur = __atomic_load_n(&a->held, __ATOMIC_RELAXED);
    do {
        if (a->cap && (bytes > a->cap || cur > a->cap - bytes)) return false;
    } while (!__atomic_compare_exchange_n(&a->held, &cur, cur + bytes, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return true;
}
static inline void ca_unhold(ca_allocator *a, size_t bytes) { __atomic_sub_fetch(&a->held, bytes, __ATOMIC_RELAXED); }
static inline void ca_reserved_add(ca_allocator *a, ca_heap *h, int64_t delta) {
    CA_STAT(a, h, reserved_bytes, delta);
    ca_share_reserved_changed(h->pool);
    size_t now = __atomic_add_fetch(&a->reserved, (size_t)delta, __ATOMIC_RELAXED);
    size_t peak = __atomic_load_n(&a->reserved_peak, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&a->reserved_peak, &peak, now, true, __ATOMIC_RELAXED,
                                                       __ATOMIC_RELAXED)) {
    }
}

/* Pending plain frees of one kind (small or large) come (count > 0) or go:
 * blocks awaiting their fence count as active, not allocated. Read without
 * the lock by the device-wide sums, so stored whole. */
static inline void ca_pend_pool(ca_pool *p, int kind, int64_t count, int64_t bytes) {
    int kinds[2] = {CA_POOL_ALL, kind};
    for (int i = 0; i < 2; i++) {
        int k = kinds[i];
        __atomic_store_n(&p->pend_count[k], p->pend_count[k] + count, __ATOMIC_RELAXED);
        __atomic_store_n(&p->pend_bytes[k], p->pend_bytes[k] + bytes, __ATOMIC_RELAXED);
    }
}
static inline void ca_pend_totals(ca_allocator *a, int kind, int64_t count, int64_t bytes) {
    ca_total_add(a, offsetof(ca_stats, active), kind, count);
    ca_total_add(a, offsetof(ca_stats, active_bytes), kind, bytes);
}
static inline void ca_pend_kind(ca_allocator *a, ca_pool *p, int kind, int64_t count, int64_t bytes) {
    ca_pend_pool(p, kind, count, bytes);
    ca_pend_totals(a, kind, count, bytes);
}
/* One block's plain free becomes pending. */
static inline void ca_pend(ca_allocator *a, ca_pool *p, const ca_block *b) {
    ca_pend_kind(a, p, b->small ? CA_POOL_SMALL : CA_POOL_LARGE, 1, (int64_t)b->size);
}
/* Active bytes of the pool: allocated, or freed and waiting for a fence. */
static inline int64_t ca_pool_active_bytes(const ca_pool *p) {
    return p->st.allocated_bytes[CA_POOL_ALL].current + p->pend_bytes[CA_POOL_ALL];
}
/* What the pool needs kept mapped: its active bytes, less plain frees left
 * unfenced while fences pass at record (fence.c): one fence frees them at once. */
static inline int64_t ca_pool_needed_bytes(const ca_pool *p) {
    return ca_pool_active_bytes(p) - (p->fences_pass ? (int64_t)p->unfenced_bytes : 0);
}

/* The pool's clock: allocations it served so far (a statistic kept anyway). */
static inline uint64_t ca_pool_clock(const ca_pool *p) { return (uint64_t)p->st.allocation[CA_POOL_ALL].allocated; }

/* expandable.c */
/* Bitmaps of free edges (ca_segment.free_edges) for an expandable heap's
 * ranges from now on, or no more (host memory short: stop, which puts the
 * next start off, ca_heap.edges_from). With few blocks everything a merge
 * reads is in the caches: the bitmaps would only cost instructions
 * (resnet_end_plain: 398 -> 448 a call, callgrind), so a pool starts them at
 * CA_EDGES_FROM live blocks: at 20,000 and 50,000 they saved no misses in
 * callgrind's 8 MiB model and cost time, at 100,000 and 1,000,000 they paid
 * (issue 29, BENCHMARKS.md, "Where the bitmaps pay"). */
#define CA_EDGES_FROM 65536
void ca_exp_edges_start(ca_heap *h);
void ca_exp_edges_stop(ca_heap *h);
/* Work one search for donor granules may do, beyond two units per granule it
 * needs (a move replaces a creation, which costs far more on a GPU): a unit
 * is a free block looked at or 64 granules scanned. BENCHMARKS.md (issue 11)
 * has what it costs and gains. */
#define CA_REMAP_BUDGET 64
/* A heap's first range, unless the device (or cap) is smaller or the first
 * request larger; each later one is at least twice the last (ca_range). */
#define CA_FIRST_RANGE ((size_t)1 << 30)
/* Small requests (4 KiB to CA_SMALL_LIMIT) take, of the best fit and the
 * CA_FIT_WINDOW next larger free blocks, the one at the lowest address; the
 * others take the best fit. Small blocks, many and often long-lived (weights,
 * optimizer state, kept losses), then pack toward the start of the range, as
 * in a small heap of their own, without a second heap's partly used last
 * granule; plain best fit scatters them over the holes of the whole range,
 * each partly using a granule. An exact fit leaves no hole and is taken as
 * it is. Requests under 4 KiB, the most numerous, skip the look (each costs
 * cache misses on the hot path) and lose nothing measurable. Measured on every
 * trace of tests/data/torch, the two real ones of ../shared/traces and six
 * more recorded alike (train_gpt.py, SEED 1 to 4; BENCHMARKS.md, issue 11): windows of 3 to 6 met the goal on all 14,
 * 2 missed it on 3, plain best fit on 5. */
#ifndef CA_FIT_WINDOW /* -DCA_FIT_WINDOW=N to measure another; 0: plain best fit */
#define CA_FIT_WINDOW 3
#endif
#define CA_FIT_FROM 4096

static inline ca_block *ca_exp_fit(ca_heap *h, size_t size) {
    ca_block *b = ca_free_index_best_fit(&h->free, size);
    if (CA_FIT_WINDOW && b && b->size != size && size >= CA_FIT_FROM && size <= CA_SMALL_LIMIT)
        b = ca_free_index_lowest_near(&h->free, b, CA_FIT_WINDOW);
    return b;
}
/* A block of `size` from fit (ca_exp_fit's choice, still indexed; NULL: none
 * fits), mapping what it lacks, else from a range grown. The allocator takes
 * a fit whose memory is all mapped itself (the hot path); this does the rest.
 * may_grow false: only a fit whose memory is mapped, else CA_ERR_OOM with
 * nothing changed (reserved memory stays as it is). */
int ca_exp_alloc(ca_allocator *a, ca_heap *h, size_t size, ca_block *fit, bool may_grow, ca_block **out);
/* Give back the mapped granules of [first, end) of seg, reporting each run;
 * returns how many. */
size_t ca_exp_unmap_granules(ca_allocator *a, ca_segment *seg, size_t first, size_t end);
/* Trim the unmapped end of seg's free tail off its span. */
void ca_exp_trim_tail(ca_allocator *a, ca_segment *seg);

/* ranges.c: a heap's virtual ranges */
/* The heap's range has no room for a block of `size`: a new range, at least
 * twice it (and the request), is where the heap grows from now on; the older
 * ones keep serving requests from their free blocks. NULL when a->reserve or
 * the backend leaves no room. */
ca_segment *ca_range_new(ca_allocator *a, ca_heap *h, size_t size);
/* Older ranges with no block in use and no granule mapped go back. */
void ca_ranges_drop_empty(ca_allocator *a, ca_heap *h);
/* Give back the granules lying wholly inside free blocks of p, waiting for
 * the device first when device work may still touch some; then trim the
 * ranges' unmapped tails. The out-of-memory path and ca_release. */
void ca_exp_release(ca_allocator *a, ca_pool *p);
/* A retired pool's segment, at its end: every granule unmapped (reported),
 * the range given back. */
void ca_exp_end(ca_allocator *a, ca_segment *seg);
/* At the allocator's destruction: the same, unreported. */
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
/* The same without fencing the unfenced blocks. */
void ca_pending_poll(ca_allocator *a, ca_pool *p);
/* Unfenced bytes past which allocations fence at once even while fences pass
 * at record: an allocation served around them is placed otherwise than best
 * fit would place it with them free, which costs density (tests/preload
 * remap-torch: 0.926 utilization with no bound); this bounds what is set aside. */
#define CA_LAZY_BYTES ((size_t)256 << 10)
/* An allocation leaves the unfenced blocks so until the free memory cannot
 * serve it without growing (fence.c): up to CA_LAZY_BYTES of them. */
static inline bool ca_pending_lazy(const ca_pool *p) {
    return p->unfenced && p->unfenced_bytes <= CA_LAZY_BYTES;
}
/* Wait for the oldest batch (fencing the unfenced blocks first when there is
 * none) and free its blocks; false when nothing was freed. */
bool ca_pending_wait_oldest(ca_allocator *a, ca_pool *p);
/* Everything pending back, waiting as needed. */
void ca_pending_settle(ca_allocator *a, ca_pool *p);
/* At destruction: fences dropped without waiting. */
void ca_pending_drop(ca_allocator *a, ca_pool *p);
static inline bool ca_pool_has_pending(const ca_pool *p) { return p->unfenced || p->oldest; }
/* The same, or blocks kept for their stream (share.c): what a settle waits for. */
static inline bool ca_pool_has_any_pending(const ca_pool *p) { return ca_pool_has_pending(p) || p->n_kept; }
/* b, pending already (kept for its stream: share.c), waits for a fence too. */
void ca_pending_requeue(ca_allocator *a, ca_pool *p, ca_block *b);

/* allocator.c: a block that is free again, merged and indexed;
 * idle: no device work can touch it any more (else its granules are busy:
 * see expandable.c). */
void ca_block_release(ca_allocator *a, ca_pool *p, ca_block *b, bool idle);
/* expandable.c: b's granules are busy (freed with device work behind them). */
void ca_exp_busy(ca_allocator *a, ca_pool *p, const ca_block *b);

/* classic.c */
int ca_classic_alloc(ca_allocator *a, ca_heap *h, size_t size, bool may_grow, ca_block **out);
void ca_classic_release(ca_allocator *a, ca_heap *h);
void ca_classic_destroy(ca_allocator *a, ca_segment *seg);

#endif

/* The allocator's public operations: a pool per stream (pools.c), each with
 * its own lock and a small and a large heap; splitting and merging; the
 * out-of-memory retry; what the device looks like under a cap. Lock order:
 * the retire lock, a pool's lock, then the allocator's; never two pools at
 * once. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util/checked.h"

#define MIB ((size_t)1 << 20)
#define TIB ((size_t)1 << 40)

/* Each thread remembers its last pool: the next request is usually the same.
 * Allocators are told apart by a serial number, not their address, which a
 * new allocator may reuse. */
static __thread __attribute__((tls_model("initial-exec"))) ca_pool *tl_pool;
static __thread __attribute__((tls_model("initial-exec"))) uint64_t tl_serial;
static _Atomic uint64_t serials;

void ca_options_default(ca_options *opt) {
    opt->expandable = 1;
    opt->max_reserved = 0;
    opt->release_after = CA_RELEASE_AFTER;
    opt->share_bytes = CA_SHARE_BYTES;
}

/* What the allocator may hold and how much address space a heap reserves,
 * fixed at creation from the device's capacity. */
static void set_limits(ca_allocator *a) {
    size_t g = a->granule;
    /* Unknown capacity (mem_info failed): as much as one 4 TiB range holds. */
    size_t device = a->capacity ? a->capacity : 4 * TIB;
    if (device > CA_MAX_BYTES) device = CA_MAX_BYTES;
    size_t limit = device;
    if (a->opt.max_reserved && a->opt.max_reserved < limit) limit = a->opt.max_reserved;
    a->limit = limit & ~(g - 1);
    a->cap = a->limit < (device & ~(g - 1)) || device < a->capacity ? a->limit : 0;
    /* Four times the device: blocks are never moved, so after fragmentation
     * a request may have to be placed past the end of everything else, and
     * virtual address space is cheap; 4 TiB at most, but never less than the
     * limit, so that every request the device could hold has room. */
    size_t reserve = device <= TIB ? 4 * device : 4 * TIB;
    if (reserve < a->limit) reserve = a->limit;
    /* A block counts its unmapped granules in 32 bits (ca_block): no range,
     * and so no limit, beyond 2^32 - 1 granules (16 TiB of 4 KiB ones). */
    if (reserve / g > UINT32_MAX) reserve = (size_t)UINT32_MAX * g;
    if (a->limit > reserve) a->limit = a->cap = reserve; /* kept to by the allocator itself */
    a->max_request = a->limit & ~(size_t)(CA_ROUND - 1);
    a->reserve = reserve < g ? g : reserve & ~(g - 1);
    /* That much is what a heap may take in all; it starts with one range of
     * CA_FIRST_RANGE (twice the limit on a smaller device: room for what it
     * holds and as much again freed but not yet free) and moves to larger
     * ones as it grows (ranges.c), so that thousands of streams fit in the
     * address space, not a few hundred. */
    size_t first = a->limit < CA_FIRST_RANGE / 2 ? 2 * a->limit : CA_FIRST_RANGE;
    if (first > a->reserve) first = a->reserve;
    a->first_range = first < g ? g : first & ~(g - 1);
}

int ca_allocator_new(ca_backend *be, const ca_options *opt, ca_allocator **out) {
    if (!be || !out || !be->granule || (be->granule & (be->granule - 1))) return CA_ERR_INVALID;
    ca_allocator *a = calloc(1, sizeof *a);
    if (!a) return CA_ERR_OOM;
    ca_lock_init(&a->lock);
    ca_lock_init(&a->retire_lock);
    if (ca_pools_init(a) != CA_OK) {
        free(a);
        return CA_ERR_OOM;
    }
    if (ca_addr_index_init(&a->addrs) != CA_OK) {
        ca_pools_destroy(a);
        free(a);
        return CA_ERR_OOM;
    }
    a->be = be;
    if (opt) a->opt = *opt;
    else ca_options_default(&a->opt);
    a->granule = be->granule;
    a->async = be->event_record || be->fence_record;
    /* a shared block's free waits for a fence where the device runs work after calls return */
    a->share_bytes = a->async && !be->fence_record ? 0 : a->opt.share_bytes;
    size_t free_bytes = 0, total = 0;
    if (be->mem_info(be->self, &free_bytes, &total) != CA_OK) total = 0;
    a->capacity = total;
    set_limits(a);
    a->serial = atomic_fetch_add(&serials, 1) + 1;
    *out = a;
    return CA_OK;
}

void ca_allocator_destroy(ca_allocator *a) {
    if (!a) return;
    ca_pools_destroy(a);
    ca_addr_index_destroy(&a->addrs);
    if (a->be->destroy) a->be->destroy(a->be);
    free(a);
}

void ca_emit(ca_allocator *a, ca_event_kind kind, uintptr_t addr, size_t size, size_t req, ca_stream s) {
    if (!a->observer) return;
    ca_trace_event ev = {kind, addr, size, req, s};
    a->observer(a->observer_ctx, &ev);
}

/* An allocation's or a free's event, with the block's tag for the observer.
 * Inline: the common case is no observer, one test. Named ca_* as the
 * reports skip leading frames so named (its inlined frame among them). */
static inline __attribute__((always_inline)) void ca_emit_block(ca_allocator *a, ca_event_kind kind,
                                                                ca_block *b, size_t req, ca_stream s) {
    if (!a->observer) return;
    uint32_t tag = kind == CA_EV_FREE ? b->tag : 0;
    ca_trace_event ev = {kind, b->addr, b->size, req, s, .tag = &tag};
    a->observer(a->observer_ctx, &ev);
    if (kind == CA_EV_ALLOC) b->tag = tag & CA_TAG_MAX;
}

void ca_emit_classic(ca_allocator *a, ca_event_kind kind, const ca_segment *seg) {
    if (!a->observer) return;
    ca_trace_event ev = {kind, seg->base, seg->span, 0, seg->heap->pool->stream, seg->heap->small ? 1 : 2};
    a->observer(a->observer_ctx, &ev);
}

/* After an allocation of kind `kind`: active's peaks (see figures.c:
 * pool_current). */
static inline void active_peaks(ca_allocator *a, ca_pool *p, int kind) {
    bool count = false, bytes = false;
    int kinds[2] = {CA_POOL_ALL, kind};
    for (int i = 0; i < 2; i++) {
        int k = kinds[i];
        int64_t n = p->st.allocation[k].current + p->pend_count[k];
        int64_t by = p->st.allocated_bytes[k].current + p->pend_bytes[k];
        if (n > p->st.active[k].peak) p->st.active[k].peak = n, count = true;
        if (by > p->st.active_bytes[k].peak) p->st.active_bytes[k].peak = by, bytes = true;
    }
    if (count) ca_pool_new_peak(a, offsetof(ca_stats, active));
    if (bytes) ca_pool_new_peak(a, offsetof(ca_stats, active_bytes));
}

/* Split b (taken out of the index) so that it is `size` bytes; the rest, if
 * worth keeping apart, becomes a free block. (Inline: every allocation.) */
static inline __attribute__((always_inline)) ca_block *split_block(ca_block *b, size_t size) {
    size_t rest = b->size - size;
    /* Classic large blocks keep small remainders, as PyTorch does, so that a
     * large segment is not cut into pieces only small requests could use. */
    bool split = b->seg->expandable || b->seg->heap->small ? rest >= CA_ROUND : rest > MIB;
    if (!split) return b;
    ca_block *r = ca_block_new(b->seg->heap->pool);
    if (!r) return b;
    r->addr = b->addr + size;
    r->size = rest;
    r->seg = b->seg;
    r->unmapped = b->unmapped; /* what b's request needed is mapped: the rest is r's */
    b->unmapped = 0;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    else b->seg->last = r;
    b->next = r;
    b->size = size;
    ca_starts_begin(b->seg, r);
    ca_free_index_insert(&b->seg->heap->free, r);
    return b;
}

/* Give a pool's cached memory back: expandable granules once no queued work
 * can touch them (expandable.c waits for the device when some might), empty
 * classic segments after the device's work. */
static void release_pool(ca_allocator *a, ca_pool *p) {
    if (a->opt.expandable) {
        ca_exp_release(a, p);
        return;
    }
    for (int k = 0; k < p->nheaps; k++) ca_classic_release(a, &p->heap[k]);
}

/* Every pool gives its cached memory back, plain frees included (waiting
 * for their fences), and retired pools with nothing live end (waiting for
 * the device); the caller holds no lock. */
static void release_all(ca_allocator *a) {
    ca_pools_end_retired(a, true);
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr);
    for (size_t i = 0; i < n; i++) {
        ca_pool *p = arr[i];
        ca_lock_acquire(&p->lock);
        if (ca_pool_has_any_pending(p)) ca_pending_settle(a, p);
        if (p->state != CA_POOL_SPARE) release_pool(a, p);
        ca_lock_release(&p->lock);
    }
}

bool ca_device_wait(ca_allocator *a, ca_pool *p) {
    const ca_backend *be = a->be;
    if (be->fence_record_done) {
        ca_fence f = 0;
        if (be->fence_record_done(be->self, &f) != CA_OK) return false;
        if (!f) return true; /* the device was synchronized */
        bool done = be->fence_wait(be->self, f) == 1;
        be->fence_destroy(be->self, f);
        return done;
    }
    /* a retired pool's stream is gone: without fences only live ones are synced */
    if (be->stream_sync && p->state == CA_POOL_LIVE) return be->stream_sync(be->self, p->stream) == CA_OK;
    return true;
}

/* The device as the program may see it under a cap: no larger than the cap,
 * and with no more free than the cap leaves. */
static void keep_to_cap(ca_allocator *a, size_t *free_bytes, size_t *total) {
    size_t cap = a->cap, held = __atomic_load_n(&a->held, __ATOMIC_RELAXED);
    if (!cap) return;
    size_t room = cap > held ? cap - held : 0;
    if (room < *free_bytes) *free_bytes = room;
    if (cap < *total) *total = cap;
}

void ca_mem_info(ca_allocator *a, size_t *free_bytes, size_t *total) {
    ca_stats s;
    ca_get_stats(a, &s);
    int64_t cached = s.reserved_bytes[CA_POOL_ALL].current - s.allocated_bytes[CA_POOL_ALL].current;
    keep_to_cap(a, free_bytes, total);
    *free_bytes += cached > 0 ? (size_t)cached : 0;
    if (*free_bytes > *total) *free_bytes = *total;
}

static void fill_oom(ca_allocator *a, size_t size, ca_stream stream, ca_oom_info *oom) {
    size_t free_bytes = 0, total = 0;
    if (a->be->mem_info(a->be->self, &free_bytes, &total) != CA_OK) free_bytes = total = 0;
    *oom = (ca_oom_info){0}; /* every field said, those added later too */
    oom->requested = size;
    oom->allocated = (size_t)ca_sum_current(a, offsetof(ca_stats, allocated_bytes), CA_POOL_ALL);
    oom->reserved = ca_reserved_total(a);
    keep_to_cap(a, &free_bytes, &total);
    oom->device_total = total;
    oom->device_free = free_bytes;
    /* the pools' sums are read without their locks: never let a race wrap it */
    oom->free_cached = oom->reserved > oom->allocated ? oom->reserved - oom->allocated : 0;
    oom->largest_free = ca_largest_free(a);
    oom->stream = stream;
}

/* may_grow false: from the memory already free and mapped, or not at all
 * (CA_ERR_OOM). Inline: an expandable fit whose memory is mapped, nearly
 * every allocation's, is taken here. */
static inline __attribute__((always_inline)) int try_alloc_maybe_growing(ca_allocator *a, ca_heap *h, size_t size,
                                                                        bool may_grow, ca_block **b) {
    if (!a->opt.expandable) return ca_classic_alloc(a, h, size, may_grow, b);
    ca_block *fit = ca_exp_fit(h, size);
    if (__builtin_expect(!fit || fit->unmapped, 0)) return ca_exp_alloc(a, h, size, fit, may_grow, b);
    ca_free_index_remove(&h->free, fit);
    *b = fit;
    return CA_OK;
}

static int try_alloc(ca_allocator *a, ca_heap *h, size_t size, ca_block **b) {
    return try_alloc_maybe_growing(a, h, size, true, b);
}

static int try_alloc_in_place(ca_allocator *a, ca_heap *h, size_t size, ca_block **b) {
    return try_alloc_maybe_growing(a, h, size, false, b);
}

/* Every release_after allocations of a pool: expandable pools give back the
 * granules they did not need lately (expandable.c); the caller then looks
 * for retired pools that can end. */
static void sweep_pool(ca_allocator *a, ca_pool *p) {
    p->next_sweep = ca_pool_clock(p) + a->opt.release_after;
    if (a->opt.expandable) ca_exp_sweep(a, p);
}

/* Named ca_ though file-private: where a build keeps it a frame of its own
 * (-O1 under ASan), the reports still know it for cudalloc's and name the
 * program's caller. */
static inline __attribute__((always_inline)) int ca_alloc_block(ca_allocator *a, size_t size, ca_stream stream,
                                                               void **ptr, ca_oom_info *oom, bool ordered) {
    if (!size || !ptr) return CA_ERR_INVALID;
    /* Each thread remembers its last pool: the next request is usually the same. */
    ca_pool *p = tl_pool;
    if (!p || tl_serial != a->serial || __atomic_load_n(&p->key, __ATOMIC_RELAXED) != stream) {
        int rc = ca_pool_for(a, stream, &p);
        if (rc != CA_OK) {
            if (rc == CA_ERR_OOM && oom) fill_oom(a, size, stream, oom);
            return rc;
        }
        tl_pool = p;
        tl_serial = a->serial;
    }
    /* Physical memory comes in granules: a request whose granules exceed the
     * limit could never be served, whatever is freed. */
    bool never = size > a->max_request;
    size_t rounded = never ? SIZE_MAX : (size + CA_ROUND - 1) & ~(size_t)(CA_ROUND - 1);
    bool small = rounded <= CA_SMALL_LIMIT;
    /* A stream that holds little takes small blocks from the shared pool (share.c). */
    ca_pool *asker = p;
    uint32_t owner = 0;
    if (__builtin_expect(rounded <= a->share_bytes && !__atomic_load_n(&p->own, __ATOMIC_RELAXED), 0))
        p = ca_share_route(a, p, rounded, &owner);
    ca_block *b = NULL;
    if (__builtin_expect(owner != 0, 0)) ca_share_lock(p, asker);
    else ca_lock_acquire(&p->lock);
    int rc = CA_ERR_OOM;
    /* no host memory for the pool's first heaps: out of memory all the same */
    if (__builtin_expect(!p->nheaps, 0) && !ca_pool_make_heaps(a, p)) never = true;
    ca_heap *h = &p->heap[small && !a->opt.expandable]; /* see ca_heap */
    /* a block its stream freed in its order: at once (share.c) */
    if (__builtin_expect(owner != 0, 0) && p->n_kept && (b = ca_share_take(a, p, owner, rounded))) rc = CA_OK;
    else if (ca_pool_has_pending(p)) {
        if (!ca_pending_lazy(p)) ca_pending_collect(a, p);
        else { /* fenced when the free memory cannot serve the request without growing */
            ca_pending_poll(a, p);
            if (!never && (rc = try_alloc_in_place(a, h, rounded, &b)) != CA_OK) ca_pending_collect(a, p);
        }
    }
    if (rc != CA_OK && !never) rc = try_alloc_maybe_growing(a, h, rounded, true, &b);
    /* Short of memory: wait for this pool's plain frees, oldest first, before
     * giving cached memory back. */
    while (rc == CA_ERR_OOM && !never && ca_pending_wait_oldest(a, p)) rc = try_alloc(a, h, rounded, &b);
    if (rc == CA_ERR_OOM && !never) {
        /* Give every cached granule and empty segment back, then try again. */
        p->st.num_alloc_retries++;
        ca_lock_release(&p->lock);
        release_all(a);
        ca_lock_acquire(&p->lock);
        rc = try_alloc(a, h, rounded, &b);
    }
    if (rc != CA_OK) {
        /* Here, not in a helper: the observer captures the call stack, and
         * reports leave out the leading frames named ca_*. */
        if (rc == CA_ERR_OOM) {
            p->st.num_ooms++;
            ca_emit(a, CA_EV_OOM, 0, size, size, stream);
        }
        ca_lock_release(&p->lock);
        if (rc == CA_ERR_OOM && oom) fill_oom(a, size, stream, oom);
        return rc;
    }
    b = split_block(b, rounded);
    if (__builtin_expect(owner != 0, 0)) {
        if (b->owner != owner) { /* (a kept block is its stream's already) */
            if (b->owner) ca_share_drop(a, b);
            ca_share_hold(asker, b, owner);
        }
    } else if (__builtin_expect(!__atomic_load_n(&p->own, __ATOMIC_RELAXED), 0)) {
        __atomic_store_n(&p->own, true, __ATOMIC_RELAXED);
    }
    b->flags = ca_block_flags_live(small, ordered); /* no id yet: a new one when asked */
    b->requested = size;
    ca_live_add(&p->live, b);
    if (__builtin_expect(p->live.count >= h->edges_from, 0)) ca_exp_edges_start(h);
    int kind = small ? CA_POOL_SMALL : CA_POOL_LARGE;
    bool rose_n = ca_stat_rise(p->st.allocation, kind, 1);
    bool rose_b = ca_stat_rise(p->st.allocated_bytes, kind, (int64_t)b->size);
    ca_totals_block(a, kind, 1, b);
    if (rose_n) ca_pool_new_peak(a, offsetof(ca_stats, allocation));
    if (rose_b) ca_pool_new_peak(a, offsetof(ca_stats, allocated_bytes));
    if (ca_stat_rise(p->st.requested_bytes, kind, (int64_t)size))
        ca_pool_new_peak(a, offsetof(ca_stats, requested_bytes));
    /* active = allocated + pending, so its peak can only rise with
     * allocated's, or while plain frees are pending */
    if (rose_n || rose_b || p->pend_count[CA_POOL_ALL]) active_peaks(a, p, kind);
    ca_emit_block(a, CA_EV_ALLOC, b, size, stream);
    /* The hot path's whole share of giving memory back: two compares. */
    int64_t needed = ca_pool_needed_bytes(p);
    if (needed > p->win_peak) p->win_peak = needed;
    bool sweep = ca_pool_clock(p) >= p->next_sweep;
    if (sweep) sweep_pool(a, p);
    ca_lock_release(&p->lock);
    if (sweep) ca_pools_end_retired(a, false);
    *ptr = (void *)b->addr;
    return CA_OK;
}

int ca_malloc(ca_allocator *a, size_t size, ca_stream stream, void **ptr, ca_oom_info *oom) {
    return ca_alloc_block(a, size, stream, ptr, oom, false);
}

int ca_malloc_ordered(ca_allocator *a, size_t size, ca_stream stream, void **ptr, ca_oom_info *oom) {
    return ca_alloc_block(a, size, stream, ptr, oom, true);
}

/* b is free: merge it with free neighbours and index the result. */
static inline __attribute__((always_inline)) void merge_and_index(ca_pool *p, ca_block *b) {
    b->allocated = false;
    b->requested = 0;
    ca_segment *seg = b->seg;
    ca_free_index *fi = &seg->heap->free;
    ca_block *n = b->next, *prev = b->prev;
    /* Are they free? From the bitmap where the segment keeps one: neither
     * is read unless it is. */
    bool n_free, prev_free;
    if (__builtin_expect(!seg->free_edges, 1)) {
        n_free = n && !n->allocated;
        prev_free = prev && !prev->allocated;
    } else {
        n_free = n && ca_edge_at(seg, b->addr + b->size);
        prev_free = prev && ca_edge_at(seg, b->addr - CA_ROUND);
    }
    /* b was allocated, so all its granules are mapped, the ones it shares
     * with a neighbour too: the merged block's unmapped ones are theirs */
    if (n_free) {
        ca_free_index_remove(fi, n);
        ca_starts_end(seg, n);
        b->size += n->size;
        b->unmapped = n->unmapped;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        else seg->last = b;
        ca_block_put(p, n);
    }
    if (prev_free) {
        ca_free_index_remove(fi, prev);
        ca_starts_end(seg, b);
        prev->size += b->size;
        prev->unmapped += b->unmapped;
        prev->next = b->next;
        if (b->next) b->next->prev = prev;
        else seg->last = prev;
        ca_block_put(p, b);
        b = prev;
    }
    ca_free_index_insert(fi, b);
}

/* Does pool p's expandable heap hold addr? Read without the pool's lock:
 * each range's size (stored last, with release, and cleared first) before
 * its base (TSan: a race when the base was read first). A range that changes
 * meanwhile holds no live block, so no live block is missed. The newest
 * range, where most blocks are, is usually the last slot: looked at first. */
static inline bool pool_holds(const ca_pool *p, uintptr_t addr) {
    const ca_heap *h = __atomic_load_n(&p->heap, __ATOMIC_ACQUIRE);
    for (int i = __atomic_load_n(&h->nranges, __ATOMIC_ACQUIRE); i-- > 0;) {
        size_t size = __atomic_load_n(&h->ranges[i].size, __ATOMIC_ACQUIRE); /* 0: none */
        if (addr - __atomic_load_n(&h->ranges[i].base, __ATOMIC_RELAXED) < size) return true;
    }
    return false;
}

/* Is addr live in pool p (maybe NULL)? Then with p's lock held. */
static inline ca_block *live_in(ca_allocator *a, ca_pool *p, uintptr_t addr) {
    if (!p || (a->opt.expandable && !pool_holds(p, addr))) return NULL;
    ca_lock_acquire(&p->lock);
    ca_block *b = ca_live_find(&p->live, addr);
    if (!b) ca_lock_release(&p->lock);
    return b;
}

/* The pool that owns addr, with its lock held, and the block; NULL if none.
 * (Inlined: it is the free path's search.) */
static inline __attribute__((always_inline)) ca_block *find_live(ca_allocator *a, uintptr_t addr, ca_stream stream,
                                                                 ca_pool **pool) {
    if (!addr) return NULL; /* never live */
    /* The thread's last pool first: with many streams alive, a block is
     * mostly freed by the thread that allocated it; then, with thousands of
     * streams, the pool of the stream it is freed on, found by hash (without
     * that, every pool in turn: 33 us a free with 4,000 streams). */
    ca_pool *mine = tl_serial == a->serial ? tl_pool : NULL, *its = NULL;
    ca_block *b = live_in(a, mine, addr);
    if (b) {
        *pool = mine;
        return b;
    }
    /* then the shared pool: the small blocks of streams that hold little */
    ca_pool *shared = __atomic_load_n(&a->shared, __ATOMIC_ACQUIRE);
    if (shared && (b = live_in(a, shared, addr))) {
        *pool = shared;
        return b;
    }
    if (stream != CA_NO_STREAM && (its = ca_pooltab_find(a, stream)) != mine && (b = live_in(a, its, addr))) {
        *pool = its;
        return b;
    }
    /* Then the pool whose segment spans addr (the address index). */
    ca_pool *p = ca_addr_index_find(&a->addrs, addr);
    if (p && p != mine && p != its && p != shared && (b = live_in(a, p, addr))) {
        *pool = p;
        return b;
    }
    return NULL;
}

/* ca_block_release, inline in the frees (a call's frame is a tenth of a free). */
static inline __attribute__((always_inline)) void release_block(ca_allocator *a, ca_pool *p, ca_block *b, bool idle) {
    if (__builtin_expect(b->owner != 0, 0)) ca_share_drop(a, b); /* its stream's until now, pending too */
    if (!idle && b->seg->expandable) ca_exp_busy(a, p, b);
    merge_and_index(p, b);
}

void ca_block_release(ca_allocator *a, ca_pool *p, ca_block *b, bool idle) { release_block(a, p, b, idle); }

/* b, found live in pool p (locked), out of the live table with the
 * statistics of a free applied. */
static inline __attribute__((always_inline)) void take_live(ca_allocator *a, ca_pool *p, ca_block *b,
                                                            ca_stream stream) {
    /* where no bitmap tells, the merge reads both neighbours' lines: cache
     * misses with many blocks */
    if (!b->seg->free_edges) {
        __builtin_prefetch(b->prev);
        __builtin_prefetch(b->next);
    }
    ca_live_remove(&p->live, b);
    int kind = b->small ? CA_POOL_SMALL : CA_POOL_LARGE;
    ca_totals_block(a, kind, -1, b);
    ca_stat_fall(p->st.allocation, kind, 1);
    ca_stat_fall(p->st.allocated_bytes, kind, (int64_t)b->size);
    ca_stat_fall(p->st.requested_bytes, kind, (int64_t)b->requested);
    ca_emit_block(a, CA_EV_FREE, b, b->requested, stream);
    b->requested = 0;
}

/* A shared block, found live in the shared pool p (locked), freed in the
 * order of `stream`, which must be one: kept for the next request of the
 * stream that asked for it, if it is that stream's order; else, as any
 * stream may take it next, waiting for a fence (share.c). */
static int free_shared(ca_allocator *a, ca_pool *p, ca_block *b, ca_stream stream) {
    bool own_order = ca_share_asked_on(a, b, stream); /* the usual case */
    if (!own_order && !ca_pooltab_find(a, stream) && a->be->stream_check &&
        a->be->stream_check(a->be->self, stream) != CA_OK) {
        ca_lock_release(&p->lock);
        return CA_ERR_STREAM;
    }
    take_live(a, p, b, stream);
    if (!a->async) ca_block_release(a, p, b, true);
    else if (!own_order || !ca_share_keep(a, p, b)) ca_pending_add(a, p, b);
    ca_lock_release(&p->lock);
    return CA_OK;
}

int ca_free(ca_allocator *a, void *ptr, ca_stream stream) {
    ca_pool *p;
    ca_block *b = find_live(a, (uintptr_t)ptr, stream, &p);
    if (!b) return CA_ERR_INVALID;
    if (p == __atomic_load_n(&a->shared, __ATOMIC_RELAXED)) return free_shared(a, p, b, stream);
    /* Freed in another stream's order: that stream must be one (the pool's
     * own is, while the pool is live). */
    bool cross = stream != p->key;
    if (cross && a->be->stream_check && a->be->stream_check(a->be->self, stream) != CA_OK) {
        ca_lock_release(&p->lock);
        return CA_ERR_STREAM;
    }
    take_live(a, p, b, stream);
    /* The pool's stream, the only one that will reuse the block, waits for
     * the work queued on `stream` so far. A pool stream that cannot be made
     * to wait from here (another thread's per-thread stream) leaves the block
     * waiting for a fence instead. A retired pool reuses nothing: its end
     * waits for the device. */
    bool wait_device = false;
    if (cross && p->state == CA_POOL_LIVE && a->be->event_record) {
        ca_event ev;
        int rc = a->be->event_record(a->be->self, stream, &ev);
        if (rc == CA_OK) {
            rc = a->be->stream_wait(a->be->self, p->stream, ev);
            a->be->event_destroy(a->be->self, ev);
        }
        wait_device = rc != CA_OK && a->be->fence_record;
    }
    /* In stream order the pool's stream may still have work on the block:
     * not idle, on a device that runs work after calls return. */
    if (wait_device) ca_pending_add(a, p, b);
    else release_block(a, p, b, !a->async);
    ca_lock_release(&p->lock);
    return CA_OK;
}

int ca_free_device(ca_allocator *a, void *ptr, int device_idle) {
    ca_pool *p;
    ca_block *b = find_live(a, (uintptr_t)ptr, CA_NO_STREAM, &p);
    if (!b) return CA_ERR_INVALID;
    take_live(a, p, b, 0);
    if (!device_idle && a->be->fence_record && p->state == CA_POOL_LIVE) ca_pending_add(a, p, b);
    else release_block(a, p, b, device_idle || !a->async);
    ca_lock_release(&p->lock);
    return CA_OK;
}

int ca_owns(ca_allocator *a, const void *ptr, size_t *requested) {
    ca_pool *p;
    ca_block *b = find_live(a, (uintptr_t)ptr, CA_NO_STREAM, &p);
    if (!b) return 0;
    if (requested) *requested = b->requested;
    ca_lock_release(&p->lock);
    return 1;
}

/* Expandable: a block that begins at or before addr (in [base, base + span))
 * in addr's granule or the last one before it, from the index of block
 * starts: the walk from it to addr stays within a granule's blocks. */
static ca_block *start_at_or_before(ca_segment *seg, uintptr_t addr) {
    size_t i = (addr - seg->base) >> seg->gshift;
    ca_block *b = seg->first_start[i];
    if (b) return b->addr <= addr ? b : b->prev; /* else the block before covers addr */
    while (i-- > 0)
        if (seg->first_start[i]) return seg->first_start[i];
    return seg->first;
}

/* The live block with addr inside it (not at its start), its pool locked:
 * in the pool whose segment spans addr. */
static ca_block *find_covering(ca_allocator *a, uintptr_t addr, ca_pool **pool) {
    ca_pool *p = ca_addr_index_find(&a->addrs, addr);
    if (!p) return NULL;
    ca_lock_acquire(&p->lock);
    for (int k = 0; k < p->nheaps; k++)
        for (ca_segment *seg = p->heap[k].segments; seg; seg = seg->next) {
            if (addr - seg->base >= seg->span) continue;
            ca_block *b = seg->expandable ? start_at_or_before(seg, addr) : seg->first;
            while (b && b->addr + b->size <= addr) b = b->next;
            if (b && ca_block_live(b) && addr - b->addr < b->requested) {
                *pool = p;
                return b;
            }
        }
    ca_lock_release(&p->lock);
    return NULL;
}

int ca_find_allocation(ca_allocator *a, const void *ptr, ca_allocation *out) {
    static uint64_t last_id; /* process-wide: ids are unique across devices too */
    uintptr_t addr = (uintptr_t)ptr;
    ca_pool *p;
    ca_block *b = find_live(a, addr, CA_NO_STREAM, &p);
    if (!b) b = find_covering(a, addr, &p);
    if (!b) return 0;
    if (!b->has_id) {
        b->id = __atomic_add_fetch(&last_id, 1, __ATOMIC_RELAXED);
        b->has_id = true;
    }
    *out = (ca_allocation){.addr = b->addr, .requested = b->requested, .id = b->id, .ordered = b->ordered,
                           .expandable = b->seg->expandable};
    ca_lock_release(&p->lock);
    return 1;
}

int ca_contains(ca_allocator *a, const void *ptr) {
    return ca_addr_index_find(&a->addrs, (uintptr_t)ptr) != NULL;
}

void ca_release(ca_allocator *a) { release_all(a); }

void ca_wait_pending(ca_allocator *a) {
    ca_pools_end_retired(a, true); /* their fences too */
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr);
    for (size_t i = 0; i < n; i++) {
        ca_pool *p = arr[i];
        ca_lock_acquire(&p->lock);
        if (ca_pool_has_any_pending(p)) ca_pending_settle(a, p);
        ca_exp_drop_mark(a, p); /* its events go back to the backend now */
        ca_lock_release(&p->lock);
    }
}

void ca_set_observer(ca_allocator *a, ca_observer_fn fn, void *ctx) {
    ca_lock_acquire(&a->lock);
    a->observer_ctx = ctx;
    a->observer = fn;
    ca_lock_release(&a->lock);
}

const ca_backend *ca_allocator_backend(const ca_allocator *a) { return a->be; }

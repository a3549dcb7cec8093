/* The allocator's public operations: a pool per stream, each with its own lock
 * and a small and a large heap; splitting and merging; the out-of-memory retry;
 * stats and views. Lock order: a pool's lock, then the allocator's; never two
 * pools at once. */
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
    a->reserve = reserve < g ? g : reserve & ~(g - 1);
}

int ca_allocator_new(ca_backend *be, const ca_options *opt, ca_allocator **out) {
    if (!be || !out || !be->granule || (be->granule & (be->granule - 1))) return CA_ERR_INVALID;
    ca_allocator *a = calloc(1, sizeof *a);
    if (!a) return CA_ERR_OOM;
    ca_lock_init(&a->lock);
    a->be = be;
    if (opt) a->opt = *opt;
    else ca_options_default(&a->opt);
    a->granule = be->granule;
    a->async = be->event_record || be->fence_record;
    size_t free_bytes = 0, total = 0;
    if (be->mem_info(be->self, &free_bytes, &total) != CA_OK) total = 0;
    a->capacity = total;
    set_limits(a);
    a->serial = atomic_fetch_add(&serials, 1) + 1;
    *out = a;
    return CA_OK;
}

static size_t pool_count(ca_allocator *a) { return atomic_load_explicit(&a->npools, memory_order_acquire); }

void ca_allocator_destroy(ca_allocator *a) {
    if (!a) return;
    for (size_t i = 0; i < pool_count(a); i++) {
        ca_pool *p = a->pools[i];
        ca_pending_drop(a, p);
        ca_exp_drop_mark(a, p);
        for (int k = 0; k < 2; k++)
            for (ca_segment *seg = p->heap[k].segments, *next; seg; seg = next) {
                next = seg->next;
                if (seg->expandable) ca_exp_destroy(a, seg);
                else ca_classic_destroy(a, seg);
            }
        ca_live_destroy(&p->live);
        ca_block_free_all(p);
        free(p);
    }
    if (a->be->destroy) a->be->destroy(a->be);
    free(a);
}

void ca_emit(ca_allocator *a, ca_event_kind kind, uintptr_t addr, size_t size, size_t req, ca_stream s) {
    if (!a->observer) return;
    ca_trace_event ev = {kind, addr, size, req, s};
    a->observer(a->observer_ctx, &ev);
}

bool ca_pool_sync(ca_allocator *a, ca_pool *p) {
    return !a->be->stream_sync || a->be->stream_sync(a->be->self, p->stream) == CA_OK;
}

/* A pool's current figure; read without its lock (a snapshot). Active
 * counts and bytes are allocated ones plus pending plain frees: keeping them
 * apart on the hot path cost four more updates an allocation. */
static int64_t pool_current(const ca_pool *p, size_t field, int kind) {
    const int64_t *pend = NULL;
    if (field == offsetof(ca_stats, active)) field = offsetof(ca_stats, allocation), pend = p->pend_count;
    if (field == offsetof(ca_stats, active_bytes)) field = offsetof(ca_stats, allocated_bytes), pend = p->pend_bytes;
    const ca_stat *s3 = (const ca_stat *)((const char *)&p->st + field);
    int64_t v = __atomic_load_n(&s3[kind].current, __ATOMIC_RELAXED);
    return pend ? v + __atomic_load_n(&pend[kind], __ATOMIC_RELAXED) : v;
}

/* The sum over pools of one statistic's current value. Other pools' figures
 * are read without their locks: a snapshot. */
static int64_t sum_current(ca_allocator *a, size_t field, int kind) {
    int64_t sum = 0;
    for (size_t i = 0; i < pool_count(a); i++) sum += pool_current(a->pools[i], field, kind);
    return sum;
}

/* After an allocation of kind `kind`: active's peaks (see pool_current). */
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

/* A pool's active figures in full (see pool_current). */
static void pool_active(const ca_pool *p, ca_stat *count, ca_stat *bytes) {
    for (int k = 0; k < CA_POOL_KINDS; k++) {
        const ca_stat *n = &p->st.allocation[k], *by = &p->st.allocated_bytes[k];
        count[k] = (ca_stat){n->current + p->pend_count[k], p->st.active[k].peak, n->allocated,
                             n->allocated - n->current - p->pend_count[k]};
        bytes[k] = (ca_stat){by->current + p->pend_bytes[k], p->st.active_bytes[k].peak, by->allocated,
                             by->allocated - by->current - p->pend_bytes[k]};
    }
}

/* With one pool (one stream) its own peaks are the device's, exactly. With
 * several, the device-wide peak is the largest sum seen when any pool reached
 * a new peak of its own: exact while streams allocate one at a time. */
void ca_pool_new_peak(ca_allocator *a, size_t field) {
    if (pool_count(a) < 2) return;
    ca_lock_acquire(&a->lock);
    ca_stat *peak = (ca_stat *)((char *)&a->peaks + field);
    for (int kind = 0; kind < CA_POOL_KINDS; kind++) {
        int64_t sum = sum_current(a, field, kind);
        if (sum > peak[kind].peak) peak[kind].peak = sum;
    }
    ca_lock_release(&a->lock);
}

size_t ca_reserved_total(ca_allocator *a) {
    return (size_t)sum_current(a, offsetof(ca_stats, reserved_bytes), CA_POOL_ALL);
}

static ca_pool *pool_new(ca_allocator *a, ca_stream stream) {
    ca_pool *p = calloc(1, sizeof *p);
    if (!p || ca_live_init(&p->live) != CA_OK) {
        free(p);
        return NULL;
    }
    ca_lock_init(&p->lock);
    p->stream = stream;
    p->next_sweep = a->opt.expandable && a->opt.release_after ? a->opt.release_after : UINT64_MAX;
    p->epoch = p->idle_epoch = 1; /* a granule's 0: never busy */
    for (int k = 0; k < 2; k++) {
        p->heap[k].pool = p;
        p->heap[k].small = k == 1;
    }
    return p;
}

static ca_pool *get_pool(ca_allocator *a, ca_stream stream) {
    ca_pool *p = tl_pool;
    if (p && tl_serial == a->serial && p->stream == stream) return p;
    size_t n = pool_count(a);
    for (size_t i = 0; i < n; i++) {
        p = a->pools[i];
        if (p->stream == stream) goto found;
    }
    ca_lock_acquire(&a->lock);
    p = NULL;
    n = pool_count(a); /* another thread may have added it meanwhile */
    for (size_t i = 0; i < n && !p; i++)
        if (a->pools[i]->stream == stream) p = a->pools[i];
    if (!p && n < CA_MAX_POOLS && (p = pool_new(a, stream))) {
        a->pools[n] = p;
        atomic_store_explicit(&a->npools, n + 1, memory_order_release);
    }
    ca_lock_release(&a->lock);
    if (!p) return NULL;
found:
    tl_pool = p;
    tl_serial = a->serial;
    return p;
}

/* Split b (taken out of the index) so that it is `size` bytes; the rest, if
 * worth keeping apart, becomes a free block. */
ca_block *ca_split(ca_allocator *a, ca_block *b, size_t size) {
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
    ca_free_index_insert(&b->seg->heap->free, r);
    return b;
}

static void release_pool(ca_allocator *a, ca_pool *p) {
    for (int k = 0; k < 2; k++) {
        if (a->opt.expandable) {
            for (ca_segment *seg = p->heap[k].segments; seg; seg = seg->next) ca_exp_release(a, seg);
        } else {
            ca_classic_release(a, &p->heap[k]);
        }
    }
}

/* Every pool gives its cached memory back, plain frees included (waiting
 * for their fences); the caller holds no pool lock. */
static void release_all(ca_allocator *a) {
    for (size_t i = 0; i < pool_count(a); i++) {
        ca_pool *p = a->pools[i];
        ca_lock_acquire(&p->lock);
        if (ca_pool_has_pending(p)) ca_pending_settle(a, p);
        release_pool(a, p);
        ca_lock_release(&p->lock);
    }
}

struct largest_ctx {
    const ca_allocator *a;
    size_t best;
};

static void largest_cb(void *ctx, ca_block *b) {
    struct largest_ctx *c = ctx;
    size_t run = b->seg->expandable ? ca_exp_mapped_run(c->a, b) : b->size;
    if (run > c->best) c->best = run;
}

static size_t pool_largest_free(ca_allocator *a, ca_pool *p) {
    struct largest_ctx c = {a, 0};
    for (int k = 0; k < 2; k++) ca_free_index_walk(&p->heap[k].free, largest_cb, &c);
    return c.best;
}

size_t ca_largest_free(ca_allocator *a) {
    size_t best = 0;
    for (size_t i = 0; i < pool_count(a); i++) {
        ca_pool *p = a->pools[i];
        ca_lock_acquire(&p->lock);
        size_t b = pool_largest_free(a, p);
        ca_lock_release(&p->lock);
        if (b > best) best = b;
    }
    return best;
}

static void fill_oom(ca_allocator *a, size_t size, ca_stream stream, ca_oom_info *oom) {
    size_t free_bytes = 0, total = 0;
    a->be->mem_info(a->be->self, &free_bytes, &total);
    oom->requested = size;
    oom->allocated = (size_t)sum_current(a, offsetof(ca_stats, allocated_bytes), CA_POOL_ALL);
    oom->reserved = ca_reserved_total(a);
    /* Under a cap, the device is as large as the cap lets us have. */
    size_t cap = a->cap;
    if (cap) {
        size_t room = cap > oom->reserved ? cap - oom->reserved : 0;
        if (room < free_bytes) free_bytes = room;
        if (cap < total) total = cap;
    }
    oom->device_total = total;
    oom->device_free = free_bytes;
    /* the pools' sums are read without their locks: never let a race wrap it */
    oom->free_cached = oom->reserved > oom->allocated ? oom->reserved - oom->allocated : 0;
    oom->largest_free = ca_largest_free(a);
    oom->stream = stream;
}

static int try_alloc(ca_allocator *a, ca_heap *h, size_t size, ca_block **b) {
    return a->opt.expandable ? ca_exp_alloc(a, h, size, b) : ca_classic_alloc(a, h, size, b);
}

int ca_malloc(ca_allocator *a, size_t size, ca_stream stream, void **ptr, ca_oom_info *oom) {
    if (!size || !ptr) return CA_ERR_INVALID;
    ca_pool *p = get_pool(a, stream);
    if (!p) return CA_ERR_OOM;
    /* Physical memory comes in granules: a request whose granules exceed the
     * limit could never be served, whatever is freed. */
    size_t rounded = SIZE_MAX, granules;
    bool never = !ca_size_round_up(size, CA_ROUND, &rounded) || !ca_size_round_up(rounded, a->granule, &granules) ||
                 granules > a->limit;
    bool small = rounded <= CA_SMALL_LIMIT;
    ca_heap *h = &p->heap[small && !a->opt.expandable]; /* see ca_heap */
    ca_block *b = NULL;
    ca_lock_acquire(&p->lock);
    if (ca_pool_has_pending(p)) ca_pending_collect(a, p);
    int rc = never ? CA_ERR_OOM : try_alloc(a, h, rounded, &b);
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
    b = ca_split(a, b, rounded);
    b->allocated = true;
    b->requested = size;
    ca_live_add(&p->live, b);
    b->small = small;
    int kind = small ? CA_POOL_SMALL : CA_POOL_LARGE;
    bool rose_n = ca_stat_update(p->st.allocation, kind, 1);
    bool rose_b = ca_stat_update(p->st.allocated_bytes, kind, (int64_t)b->size);
    if (rose_n) ca_pool_new_peak(a, offsetof(ca_stats, allocation));
    if (rose_b) ca_pool_new_peak(a, offsetof(ca_stats, allocated_bytes));
    CA_BLOCK_STAT(a, p, b, requested_bytes, (int64_t)size);
    /* active = allocated + pending, so its peak can only rise with
     * allocated's, or while plain frees are pending */
    if (rose_n || rose_b || p->pend_count[CA_POOL_ALL]) active_peaks(a, p, kind);
    ca_emit(a, CA_EV_ALLOC, b->addr, b->size, size, stream);
    /* The hot path's whole share of giving memory back: two compares. */
    int64_t active = ca_pool_active_bytes(p);
    if (active > p->win_peak) p->win_peak = active;
    if (ca_pool_clock(p) >= p->next_sweep) ca_exp_sweep(a, p);
    ca_lock_release(&p->lock);
    *ptr = (void *)b->addr;
    return CA_OK;
}

/* b is free: merge it with free neighbours and index the result. */
static void merge_and_index(ca_pool *p, ca_block *b) {
    b->allocated = false;
    b->requested = 0;
    ca_segment *seg = b->seg;
    ca_heap *h = seg->heap;
    ca_block *n = b->next, *prev = b->prev;
    /* b was allocated, so all its granules are mapped, the ones it shares
     * with a neighbour too: the merged block's unmapped ones are theirs */
    if (n && !n->allocated) {
        ca_free_index_remove(&h->free, n);
        b->size += n->size;
        b->unmapped = n->unmapped;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        else seg->last = b;
        ca_block_put(p, n);
    }
    if (prev && !prev->allocated) {
        ca_free_index_remove(&h->free, prev);
        prev->size += b->size;
        prev->unmapped += b->unmapped;
        prev->next = b->next;
        if (b->next) b->next->prev = prev;
        else seg->last = prev;
        ca_block_put(p, b);
        b = prev;
    }
    ca_free_index_insert(&h->free, b);
}

/* Read without the pool's lock: the size (stored last, with release) first,
 * and the base only once the size says it is there (TSan: a race when the
 * base was read first, unordered with the store). */
static bool in_range(const ca_heap *h, uintptr_t addr) {
    size_t size = __atomic_load_n(&h->range_size, __ATOMIC_ACQUIRE);
    return size && addr - h->range_base < size;
}

/* The pool that owns addr, with its lock held, and the block; NULL if none. */
static ca_block *find_live(ca_allocator *a, uintptr_t addr, ca_pool **pool) {
    if (!addr) return NULL; /* never live */
    size_t n = pool_count(a);
    for (size_t i = 0; i < n; i++) {
        ca_pool *p = a->pools[i];
        /* Expandable heaps own one fixed range each: look only where it can be. */
        if (a->opt.expandable && !in_range(&p->heap[0], addr) && !in_range(&p->heap[1], addr)) continue;
        ca_lock_acquire(&p->lock);
        ca_block *b = ca_live_find(&p->live, addr);
        if (b) {
            *pool = p;
            return b;
        }
        ca_lock_release(&p->lock);
    }
    return NULL;
}

void ca_block_release(ca_allocator *a, ca_pool *p, ca_block *b, bool idle) {
    if (!idle && b->seg->expandable) ca_exp_busy(a, p, b);
    merge_and_index(p, b);
}

/* The live block at ptr out of its pool's live table, with the pool locked
 * and the statistics of a free applied; NULL if ptr is not live. */
static ca_block *take_live(ca_allocator *a, void *ptr, ca_stream stream, ca_pool **pool) {
    ca_block *b = find_live(a, (uintptr_t)ptr, pool);
    if (!b) return NULL;
    ca_pool *p = *pool;
    ca_live_remove(&p->live, b);
    CA_BLOCK_STAT(a, p, b, allocation, -1);
    CA_BLOCK_STAT(a, p, b, allocated_bytes, -(int64_t)b->size);
    CA_BLOCK_STAT(a, p, b, requested_bytes, -(int64_t)b->requested);
    ca_emit(a, CA_EV_FREE, b->addr, b->size, b->requested, stream);
    b->requested = 0;
    return b;
}

int ca_free(ca_allocator *a, void *ptr, ca_stream stream) {
    ca_pool *p;
    ca_block *b = take_live(a, ptr, stream, &p);
    if (!b) return CA_ERR_INVALID;
    /* Freed in another stream's order: the pool's stream, the only one that
     * will reuse the block, waits for the work queued there so far. A pool
     * stream that cannot be made to wait from here (another thread's
     * per-thread stream) leaves the block waiting for a fence instead. */
    bool wait_device = false;
    if (stream != p->stream && a->be->event_record) {
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
    else ca_block_release(a, p, b, !a->async);
    ca_lock_release(&p->lock);
    return CA_OK;
}

int ca_free_device(ca_allocator *a, void *ptr, int device_idle) {
    ca_pool *p;
    ca_block *b = take_live(a, ptr, 0, &p);
    if (!b) return CA_ERR_INVALID;
    if (!device_idle && a->be->fence_record) ca_pending_add(a, p, b);
    else ca_block_release(a, p, b, device_idle || !a->async);
    ca_lock_release(&p->lock);
    return CA_OK;
}

int ca_owns(ca_allocator *a, const void *ptr, size_t *requested) {
    ca_pool *p;
    ca_block *b = find_live(a, (uintptr_t)ptr, &p);
    if (!b) return 0;
    if (requested) *requested = b->requested;
    ca_lock_release(&p->lock);
    return 1;
}

int ca_contains(ca_allocator *a, const void *ptr) {
    uintptr_t addr = (uintptr_t)ptr;
    for (size_t i = 0; i < pool_count(a); i++) {
        ca_pool *p = a->pools[i];
        int found = 0;
        ca_lock_acquire(&p->lock);
        for (int k = 0; k < 2 && !found; k++)
            for (ca_segment *seg = p->heap[k].segments; seg && !found; seg = seg->next)
                found = addr - seg->base < (seg->expandable ? seg->reserve_size : seg->span);
        ca_lock_release(&p->lock);
        if (found) return 1;
    }
    return 0;
}

void ca_release(ca_allocator *a) { release_all(a); }

void ca_wait_pending(ca_allocator *a) {
    for (size_t i = 0; i < pool_count(a); i++) {
        ca_pool *p = a->pools[i];
        ca_lock_acquire(&p->lock);
        if (ca_pool_has_pending(p)) ca_pending_settle(a, p);
        ca_exp_drop_mark(a, p); /* its events go back to the backend now */
        ca_lock_release(&p->lock);
    }
}

/* A pool's figures into the sums: what was freed is what was added less
 * what is there now (the hot path keeps only the first two). */
static void add_stat(ca_stat *dst, const ca_stat *src) {
    for (int k = 0; k < CA_POOL_KINDS; k++) {
        dst[k].current += src[k].current;
        dst[k].allocated += src[k].allocated;
        dst[k].freed += src[k].allocated - src[k].current;
        if (src[k].peak > dst[k].peak) dst[k].peak = src[k].peak; /* at least any pool's */
    }
}

#define STAT_FIELDS(X) \
    X(allocation) X(segment) X(active) X(allocated_bytes) X(reserved_bytes) X(active_bytes) X(requested_bytes)

void ca_get_stats(ca_allocator *a, ca_stats *out) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < pool_count(a); i++) {
        ca_pool *p = a->pools[i];
        ca_lock_acquire(&p->lock);
        /* Plain frees whose fence has passed are free, not active: a program
         * that synchronized and asks sees its frees complete. (No waiting.) */
        if (ca_pool_has_pending(p)) ca_pending_collect(a, p);
        ca_stats st = p->st;
        pool_active(p, st.active, st.active_bytes);
#define ADD(f) add_stat(out->f, st.f);
        STAT_FIELDS(ADD)
#undef ADD
        out->num_alloc_retries += p->st.num_alloc_retries;
        out->num_ooms += p->st.num_ooms;
        out->num_device_alloc += p->st.num_device_alloc;
        out->num_device_free += p->st.num_device_free;
        out->num_granules_moved += p->st.num_granules_moved;
        ca_lock_release(&p->lock);
    }
    ca_lock_acquire(&a->lock);
    for (int k = 0; k < CA_POOL_KINDS; k++) {
#define PEAK(f) if (a->peaks.f[k].peak > out->f[k].peak) out->f[k].peak = a->peaks.f[k].peak;
        STAT_FIELDS(PEAK)
#undef PEAK
    }
    ca_lock_release(&a->lock);
}

void ca_reset_peaks(ca_allocator *a) {
    for (size_t i = 0; i < pool_count(a); i++) {
        ca_pool *p = a->pools[i];
        ca_lock_acquire(&p->lock);
        ca_stats_reset_peaks(&p->st);
        for (int k = 0; k < CA_POOL_KINDS; k++) {
            p->st.active[k].peak = pool_current(p, offsetof(ca_stats, active), k);
            p->st.active_bytes[k].peak = pool_current(p, offsetof(ca_stats, active_bytes), k);
        }
        ca_lock_release(&p->lock);
    }
    ca_stats now;
    ca_get_stats(a, &now);
    ca_lock_acquire(&a->lock);
    for (int k = 0; k < CA_POOL_KINDS; k++) {
#define RESET(f) a->peaks.f[k].peak = now.f[k].current;
        STAT_FIELDS(RESET)
#undef RESET
    }
    ca_lock_release(&a->lock);
}

void ca_set_observer(ca_allocator *a, ca_observer_fn fn, void *ctx) {
    ca_lock_acquire(&a->lock);
    a->observer_ctx = ctx;
    a->observer = fn;
    ca_lock_release(&a->lock);
}

static void visit_heap(ca_allocator *a, ca_heap *h, ca_segment_fn on_segment, ca_block_fn on_block, void *ctx) {
    for (ca_segment *seg = h->segments; seg; seg = seg->next) {
        ca_segment_view sv = {seg->base, seg->span, seg->mapped, h->pool->stream, h->small, seg->expandable};
        if (on_segment) on_segment(ctx, &sv);
        if (!on_block) continue;
        for (ca_block *b = seg->first; b; b = b->next) {
            ca_block_state st = b->pending ? CA_BLOCK_PENDING : b->allocated ? CA_BLOCK_ALLOCATED : CA_BLOCK_FREE;
            ca_block_view bv = {b->addr, b->size, b->requested, st,
                                seg->expandable ? ca_exp_block_mapped(a, b) : b->size};
            on_block(ctx, &sv, &bv);
        }
    }
}

void ca_visit(ca_allocator *a, ca_segment_fn on_segment, ca_block_fn on_block, void *ctx) {
    for (size_t i = 0; i < pool_count(a); i++) {
        ca_pool *p = a->pools[i];
        ca_lock_acquire(&p->lock);
        for (int k = 0; k < 2; k++) visit_heap(a, &p->heap[k], on_segment, on_block, ctx);
        ca_lock_release(&p->lock);
    }
}

const ca_backend *ca_allocator_backend(const ca_allocator *a) { return a->be; }

/* The allocator's public operations: pools per (stream, size class), the live
 * table, splitting and merging, the out-of-memory retry, stats and views. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MIB ((size_t)1 << 20)

void ca_options_default(ca_options *opt) {
    opt->expandable = 1;
    opt->max_reserved = 0;
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
    size_t free_bytes = 0, total = 0;
    if (be->mem_info(be->self, &free_bytes, &total) != CA_OK) total = 0;
    a->capacity = total;
    *out = a;
    return CA_OK;
}

void ca_allocator_destroy(ca_allocator *a) {
    if (!a) return;
    for (size_t i = 0; i < a->npools; i++) {
        ca_pool *p = a->pools[i];
        for (ca_segment *seg = p->segments, *next; seg; seg = next) {
            next = seg->next;
            if (seg->expandable) ca_exp_destroy(a, seg);
            else ca_classic_destroy(a, seg);
        }
        free(p);
    }
    free(a->pools);
    HASH_CLEAR(hh, a->live);
    ca_block_free_all(a);
    if (a->be->destroy) a->be->destroy(a->be);
    free(a);
}

void ca_emit(ca_allocator *a, ca_event_kind kind, uintptr_t addr, size_t size, size_t req, ca_stream s) {
    if (!a->observer) return;
    ca_trace_event ev = {kind, addr, size, req, s};
    a->observer(a->observer_ctx, &ev);
}

void ca_pool_sync(ca_allocator *a, ca_pool *p) {
    if (a->be->stream_sync) a->be->stream_sync(a->be->self, p->stream);
}

static ca_pool *get_pool(ca_allocator *a, ca_stream stream, bool small) {
    ca_pool *p = a->last_pool;
    if (p && p->stream == stream && p->small == small) return p;
    for (size_t i = 0; i < a->npools; i++) {
        p = a->pools[i];
        if (p->stream == stream && p->small == small) return a->last_pool = p;
    }
    if (a->npools == a->pools_cap) {
        size_t cap = a->pools_cap ? 2 * a->pools_cap : 8;
        ca_pool **pools = realloc(a->pools, cap * sizeof *pools);
        if (!pools) return NULL;
        a->pools = pools;
        a->pools_cap = cap;
    }
    if (!(p = calloc(1, sizeof *p))) return NULL;
    p->stream = stream;
    p->small = small;
    a->pools[a->npools++] = p;
    return a->last_pool = p;
}

/* Split b (taken out of the index) so that it is `size` bytes; the rest, if
 * worth keeping apart, becomes a free block. */
ca_block *ca_split(ca_allocator *a, ca_block *b, size_t size) {
    size_t rest = b->size - size;
    /* Classic large blocks keep small remainders, as PyTorch does, so that a
     * large segment is not cut into pieces only small requests could use. */
    bool split = b->seg->expandable || b->seg->pool->small ? rest >= CA_ROUND : rest > MIB;
    if (!split) return b;
    ca_block *r = ca_block_new(a);
    if (!r) return b;
    r->addr = b->addr + size;
    r->size = rest;
    r->seg = b->seg;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    else b->seg->last = r;
    b->next = r;
    b->size = size;
    ca_free_index_insert(&b->seg->pool->free, r);
    return b;
}

static void release_all(ca_allocator *a) {
    for (size_t i = 0; i < a->npools; i++) {
        ca_pool *p = a->pools[i];
        if (a->opt.expandable) {
            for (ca_segment *seg = p->segments; seg; seg = seg->next) ca_exp_release(a, seg);
        } else {
            ca_classic_release(a, p);
        }
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

static size_t largest_free_locked(ca_allocator *a) {
    struct largest_ctx c = {a, 0};
    for (size_t i = 0; i < a->npools; i++) ca_free_index_walk(&a->pools[i]->free, largest_cb, &c);
    return c.best;
}

static void fill_oom(ca_allocator *a, size_t size, ca_stream stream, ca_oom_info *oom) {
    size_t free_bytes = 0, total = 0;
    a->be->mem_info(a->be->self, &free_bytes, &total);
    oom->requested = size;
    oom->device_total = total;
    oom->device_free = free_bytes;
    oom->allocated = (size_t)a->stats.allocated_bytes[CA_POOL_ALL].current;
    oom->reserved = (size_t)a->stats.reserved_bytes[CA_POOL_ALL].current;
    oom->free_cached = oom->reserved - oom->allocated;
    oom->largest_free = largest_free_locked(a);
    oom->stream = stream;
}

static int try_alloc(ca_allocator *a, ca_pool *p, size_t size, ca_block **b) {
    return a->opt.expandable ? ca_exp_alloc(a, p, size, b) : ca_classic_alloc(a, p, size, b);
}

int ca_malloc(ca_allocator *a, size_t size, ca_stream stream, void **ptr, ca_oom_info *oom) {
    if (!size || !ptr) return CA_ERR_INVALID;
    if (size > SIZE_MAX - CA_ROUND) return CA_ERR_OOM;
    size_t rounded = (size + CA_ROUND - 1) & ~(size_t)(CA_ROUND - 1);
    ca_lock_acquire(&a->lock);
    ca_pool *p = get_pool(a, stream, rounded <= CA_SMALL_LIMIT);
    ca_block *b = NULL;
    int rc = p ? try_alloc(a, p, rounded, &b) : CA_ERR_OOM;
    if (rc == CA_ERR_OOM && p) {
        /* Give every cached granule and empty segment back, then try again. */
        a->stats.num_alloc_retries++;
        release_all(a);
        rc = try_alloc(a, p, rounded, &b);
    }
    if (rc != CA_OK) {
        if (rc == CA_ERR_OOM) {
            a->stats.num_ooms++;
            if (oom) fill_oom(a, size, stream, oom);
            ca_emit(a, CA_EV_OOM, 0, size, size, stream);
        }
        ca_lock_release(&a->lock);
        return rc;
    }
    b = ca_split(a, b, rounded);
    b->allocated = true;
    b->requested = size;
    HASH_ADD(hh, a->live, addr, sizeof(uintptr_t), b);
    int kind = ca_pool_kind(p);
    ca_stat_update(a->stats.allocation, kind, 1);
    ca_stat_update(a->stats.active, kind, 1);
    ca_stat_update(a->stats.allocated_bytes, kind, (int64_t)b->size);
    ca_stat_update(a->stats.active_bytes, kind, (int64_t)b->size);
    ca_stat_update(a->stats.requested_bytes, kind, (int64_t)size);
    ca_emit(a, CA_EV_ALLOC, b->addr, b->size, size, stream);
    ca_lock_release(&a->lock);
    *ptr = (void *)b->addr;
    return CA_OK;
}

/* b is free: merge it with free neighbours and index the result. */
static void merge_and_index(ca_allocator *a, ca_block *b) {
    ca_segment *seg = b->seg;
    ca_free_index *fi = &seg->pool->free;
    ca_block *n = b->next, *p = b->prev;
    if (n && !n->allocated) {
        ca_free_index_remove(fi, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        else seg->last = b;
        ca_block_put(a, n);
    }
    if (p && !p->allocated) {
        ca_free_index_remove(fi, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next) b->next->prev = p;
        else seg->last = p;
        ca_block_put(a, b);
        b = p;
    }
    ca_free_index_insert(fi, b);
}

int ca_free(ca_allocator *a, void *ptr, ca_stream stream) {
    uintptr_t addr = (uintptr_t)ptr;
    ca_block *b;
    ca_lock_acquire(&a->lock);
    HASH_FIND(hh, a->live, &addr, sizeof(uintptr_t), b);
    if (!b) {
        ca_lock_release(&a->lock);
        return CA_ERR_INVALID;
    }
    HASH_DELETE(hh, a->live, b);
    ca_pool *p = b->seg->pool;
    int kind = ca_pool_kind(p);
    ca_stat_update(a->stats.allocation, kind, -1);
    ca_stat_update(a->stats.active, kind, -1);
    ca_stat_update(a->stats.allocated_bytes, kind, -(int64_t)b->size);
    ca_stat_update(a->stats.active_bytes, kind, -(int64_t)b->size);
    ca_stat_update(a->stats.requested_bytes, kind, -(int64_t)b->requested);
    ca_emit(a, CA_EV_FREE, b->addr, b->size, b->requested, stream);
    /* Freed in another stream's order: the pool's stream, the only one that
     * will reuse the block, waits for the work queued there so far. */
    if (stream != p->stream && a->be->event_record) {
        ca_event ev;
        if (a->be->event_record(a->be->self, stream, &ev) == CA_OK) {
            a->be->stream_wait(a->be->self, p->stream, ev);
            a->be->event_destroy(a->be->self, ev);
        }
    }
    b->allocated = false;
    b->requested = 0;
    merge_and_index(a, b);
    ca_lock_release(&a->lock);
    return CA_OK;
}

int ca_owns(ca_allocator *a, const void *ptr, size_t *requested) {
    uintptr_t addr = (uintptr_t)ptr;
    ca_block *b;
    ca_lock_acquire(&a->lock);
    HASH_FIND(hh, a->live, &addr, sizeof(uintptr_t), b);
    if (b && requested) *requested = b->requested;
    ca_lock_release(&a->lock);
    return b != NULL;
}

void ca_release(ca_allocator *a) {
    ca_lock_acquire(&a->lock);
    release_all(a);
    ca_lock_release(&a->lock);
}

void ca_get_stats(ca_allocator *a, ca_stats *out) {
    ca_lock_acquire(&a->lock);
    *out = a->stats;
    ca_lock_release(&a->lock);
}

void ca_reset_peaks(ca_allocator *a) {
    ca_lock_acquire(&a->lock);
    ca_stats_reset_peaks(&a->stats);
    ca_lock_release(&a->lock);
}

size_t ca_largest_free(ca_allocator *a) {
    ca_lock_acquire(&a->lock);
    size_t best = largest_free_locked(a);
    ca_lock_release(&a->lock);
    return best;
}

void ca_set_observer(ca_allocator *a, ca_observer_fn fn, void *ctx) {
    ca_lock_acquire(&a->lock);
    a->observer = fn;
    a->observer_ctx = ctx;
    ca_lock_release(&a->lock);
}

void ca_visit(ca_allocator *a, ca_segment_fn on_segment, ca_block_fn on_block, void *ctx) {
    ca_lock_acquire(&a->lock);
    for (size_t i = 0; i < a->npools; i++) {
        ca_pool *p = a->pools[i];
        for (ca_segment *seg = p->segments; seg; seg = seg->next) {
            ca_segment_view sv = {seg->base, seg->span, seg->mapped, p->stream, p->small, seg->expandable};
            if (on_segment) on_segment(ctx, &sv);
            if (!on_block) continue;
            for (ca_block *b = seg->first; b; b = b->next) {
                ca_block_view bv = {b->addr, b->size, b->requested,
                                    b->allocated ? CA_BLOCK_ALLOCATED : CA_BLOCK_FREE,
                                    seg->expandable ? ca_exp_block_mapped(a, b) : b->size};
                on_block(ctx, &sv, &bv);
            }
        }
    }
    ca_lock_release(&a->lock);
}

const ca_backend *ca_allocator_backend(const ca_allocator *a) { return a->be; }

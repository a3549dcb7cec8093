/* The allocator's figures and views: statistics summed over pools (and the
 * pools that ended), device-wide peaks, the largest free block, the walk over
 * segments and blocks for reports. */
#include <string.h>

#include "internal.h"

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
int64_t ca_sum_current(ca_allocator *a, size_t field, int kind) {
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr);
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += pool_current(arr[i], field, kind);
    return sum;
}

/* The device-wide sum of one statistic now, small or large, from the
 * running totals (active's: allocated plus pending). */
static int64_t total_now(ca_allocator *a, size_t field, int kind) {
    int64_t v = __atomic_load_n(&a->totals[CA_FIELD(field)][kind], __ATOMIC_RELAXED);
    if (field == offsetof(ca_stats, active)) field = offsetof(ca_stats, allocation);
    else if (field == offsetof(ca_stats, active_bytes)) field = offsetof(ca_stats, allocated_bytes);
    else return v;
    return v + __atomic_load_n(&a->totals[CA_FIELD(field)][kind], __ATOMIC_RELAXED);
}

/* With one pool (one stream) its own peaks are the device's, exactly. With
 * several, the device-wide peak is the largest sum seen when any pool reached
 * a new peak of its own: exact while streams allocate one at a time. (Reserved
 * memory has an exact one: ca_reserved_add.) The sum is the running total,
 * whatever the number of pools: summing them cost each new peak 594 us with
 * 4,000 streams (issue 29). */
void ca_pool_new_peak(ca_allocator *a, size_t field) {
    if (!__atomic_load_n(&a->several, __ATOMIC_RELAXED)) return;
    ca_lock_acquire(&a->lock);
    ca_stat *peak = (ca_stat *)((char *)&a->peaks + field);
    int64_t all = 0;
    for (int kind = CA_POOL_SMALL; kind < CA_POOL_KINDS; kind++) {
        int64_t sum = total_now(a, field, kind);
        all += sum;
        if (sum > peak[kind].peak) peak[kind].peak = sum;
    }
    if (all > peak[CA_POOL_ALL].peak) peak[CA_POOL_ALL].peak = all;
    ca_lock_release(&a->lock);
}

void ca_totals_start(ca_allocator *a) {
    if (__atomic_load_n(&a->several, __ATOMIC_RELAXED)) return;
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr); /* at most one: the second is being made */
    for (size_t i = 0; i < n; i++) ca_lock_acquire(&arr[i]->lock);
    for (size_t i = 0; i < n; i++)
        for (size_t f = 0; f < CA_FIELDS; f++)
            for (int kind = CA_POOL_SMALL; kind < CA_POOL_KINDS; kind++) {
                size_t field = f * sizeof(ca_stat[CA_POOL_KINDS]);
                int64_t v = field == offsetof(ca_stats, active)         ? arr[i]->pend_count[kind]
                            : field == offsetof(ca_stats, active_bytes) ? arr[i]->pend_bytes[kind]
                                                                        : pool_current(arr[i], field, kind);
                a->totals[f][kind] += v;
            }
    __atomic_store_n(&a->several, true, __ATOMIC_RELAXED);
    for (size_t i = n; i-- > 0;) ca_lock_release(&arr[i]->lock);
}

size_t ca_reserved_total(ca_allocator *a) { return __atomic_load_n(&a->reserved, __ATOMIC_RELAXED); }

void ca_pool_figures(const ca_pool *p, ca_stats *st) {
    for (int k = 0; k < CA_POOL_KINDS; k++) {
        const ca_stat *n = &p->st.allocation[k], *by = &p->st.allocated_bytes[k];
        st->active[k] = (ca_stat){n->current + p->pend_count[k], p->st.active[k].peak, n->allocated,
                                  n->allocated - n->current - p->pend_count[k]};
        st->active_bytes[k] = (ca_stat){by->current + p->pend_bytes[k], p->st.active_bytes[k].peak, by->allocated,
                                        by->allocated - by->current - p->pend_bytes[k]};
    }
}

/* What was freed is what was added less what is there now (the hot path
 * keeps only the first two). */
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

void ca_stats_add(ca_stats *dst, const ca_stats *src) {
#define ADD(f) add_stat(dst->f, src->f);
    STAT_FIELDS(ADD)
#undef ADD
    dst->num_alloc_retries += src->num_alloc_retries;
    dst->num_ooms += src->num_ooms;
    dst->num_device_alloc += src->num_device_alloc;
    dst->num_device_free += src->num_device_free;
    dst->num_granules_moved += src->num_granules_moved;
}

/* `gone` holds pools' figures at their end, where current is 0 and freed is
 * all that was allocated: added as they are. */
static void add_gone(ca_stats *dst, const ca_stats *gone) {
    ca_stat *d = (ca_stat *)dst;
    const ca_stat *g = (const ca_stat *)gone;
    for (size_t i = 0; i < offsetof(ca_stats, num_alloc_retries) / sizeof *d; i++) {
        d[i].allocated += g[i].allocated;
        d[i].freed += g[i].freed;
        if (g[i].peak > d[i].peak) d[i].peak = g[i].peak;
    }
    dst->num_alloc_retries += gone->num_alloc_retries;
    dst->num_ooms += gone->num_ooms;
    dst->num_device_alloc += gone->num_device_alloc;
    dst->num_device_free += gone->num_device_free;
    dst->num_granules_moved += gone->num_granules_moved;
}

void ca_get_stats(ca_allocator *a, ca_stats *out) {
    memset(out, 0, sizeof *out);
    ca_pools_end_retired(a, false); /* what ended is given back, not counted as held */
    /* no pool ends meanwhile: its figures would be counted twice, or not at all */
    ca_lock_acquire(&a->retire_lock);
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr);
    for (size_t i = 0; i < n; i++) {
        ca_pool *p = arr[i];
        ca_lock_acquire(&p->lock);
        /* Plain frees whose fence has passed are free, not active: a program
         * that synchronized and asks sees its frees complete. (No waiting.) */
        if (ca_pool_has_pending(p)) ca_pending_collect(a, p);
        ca_stats st = p->st;
        ca_pool_figures(p, &st);
        ca_stats_add(out, &st);
        ca_lock_release(&p->lock);
    }
    ca_lock_acquire(&a->lock);
    add_gone(out, &a->gone);
    for (int k = 0; k < CA_POOL_KINDS; k++) {
#define PEAK(f) if (a->peaks.f[k].peak > out->f[k].peak) out->f[k].peak = a->peaks.f[k].peak;
        STAT_FIELDS(PEAK)
#undef PEAK
    }
    ca_lock_release(&a->lock);
    ca_lock_release(&a->retire_lock);
    out->reserved_bytes[CA_POOL_ALL].peak = (int64_t)__atomic_load_n(&a->reserved_peak, __ATOMIC_RELAXED);
}

void ca_reset_peaks(ca_allocator *a) {
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr);
    for (size_t i = 0; i < n; i++) {
        ca_pool *p = arr[i];
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
    ca_stats_reset_peaks(&a->gone);
    for (int k = 0; k < CA_POOL_KINDS; k++) {
#define RESET(f) a->peaks.f[k].peak = now.f[k].current;
        STAT_FIELDS(RESET)
#undef RESET
    }
    __atomic_store_n(&a->reserved_peak, __atomic_load_n(&a->reserved, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    ca_lock_release(&a->lock);
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

size_t ca_largest_free(ca_allocator *a) {
    struct largest_ctx c = {a, 0};
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr);
    for (size_t i = 0; i < n; i++) {
        ca_pool *p = arr[i];
        ca_lock_acquire(&p->lock);
        for (int k = 0; k < p->nheaps; k++) ca_free_index_walk(&p->heap[k].free, largest_cb, &c);
        ca_lock_release(&p->lock);
    }
    return c.best;
}

static void visit_heap(ca_allocator *a, ca_heap *h, ca_segment_fn on_segment, ca_block_fn on_block, void *ctx) {
    for (ca_segment *seg = h->segments; seg; seg = seg->next) {
        ca_segment_view sv = {seg->base, seg->span, seg->mapped, h->pool->stream, h->small, seg->expandable};
        if (on_segment) on_segment(ctx, &sv);
        if (!on_block) continue;
        for (ca_block *b = seg->first; b; b = b->next) {
            ca_block_state st = b->pending ? CA_BLOCK_PENDING : b->allocated ? CA_BLOCK_ALLOCATED : CA_BLOCK_FREE;
            ca_block_view bv = {b->addr, b->size, ca_block_live(b) ? b->requested : 0, st,
                                seg->expandable ? ca_exp_block_mapped(a, b) : b->size};
            on_block(ctx, &sv, &bv);
        }
    }
}

void ca_visit(ca_allocator *a, ca_segment_fn on_segment, ca_block_fn on_block, void *ctx) {
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr);
    for (size_t i = 0; i < n; i++) {
        ca_pool *p = arr[i];
        ca_lock_acquire(&p->lock);
        for (int k = 0; k < p->nheaps; k++) visit_heap(a, &p->heap[k], on_segment, on_block, ctx);
        ca_lock_release(&p->lock);
    }
}

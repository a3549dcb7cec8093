/* Pools come and go with their streams. A stream's pool is made on its first
 * allocation (ca_pool_for); when the stream is destroyed, or the thread whose
 * per-thread stream it served exits, it is retired (ca_retire_stream): no
 * allocation finds it any more, its blocks can still be freed, and once the
 * last one is and the device is past the work queued until then (a fence
 * recorded then; on a device that runs work after calls return), it ends:
 * its memory goes back to the device, its figures to the allocator's `gone`,
 * and its struct waits, SPARE, for the next new stream. So the table holds
 * as many pools as are alive or ending at once, however many streams and
 * threads a long run makes.
 *
 * Pool structs are never freed before the allocator: threads read them
 * without locks (the hot path's key compare, ca_free's range look-up, the
 * device-wide sums) and find out under a pool's lock what it serves now.
 * Lock order: retire_lock, then one pool's lock, then the allocator's lock. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static ca_pool *pool_at(ca_allocator *a, size_t i) {
    ca_pool *const *arr;
    ca_pools(a, &arr);
    return arr[i];
}

static void pool_start(ca_allocator *a, ca_pool *p, ca_stream stream) {
    p->stream = stream;
    __atomic_store_n(&p->gen, p->gen + 1, __ATOMIC_RELAXED); /* its shared blocks' owner is gone */
    __atomic_store_n(&p->shared_held, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->contended, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->own, stream == 0, __ATOMIC_RELAXED); /* see ca_share_reserved_changed */
    p->next_sweep = a->opt.release_after ? a->opt.release_after : UINT64_MAX;
    p->epoch = p->idle_epoch = 1; /* a granule's 0: never busy */
    __atomic_store_n(&p->state, CA_POOL_LIVE, __ATOMIC_RELAXED);
    __atomic_store_n(&p->key, stream, __ATOMIC_RELEASE);
}

/* What a pool's heap points at before it has heaps: no ranges, nothing
 * written (every walk stops at nheaps, 0). */
static ca_heap no_heaps;

bool ca_pool_make_heaps(ca_allocator *a, ca_pool *p) {
    int n = a->opt.expandable ? 1 : 2;
    ca_heap *h = calloc((size_t)n, sizeof *h);
    if (!h) return false;
    for (int k = 0; k < n; k++) {
        h[k].pool = p;
        h[k].small = k == 1;
        h[k].edges_from = a->opt.expandable && k == 0 ? CA_EDGES_FROM : SIZE_MAX;
    }
    __atomic_store_n(&p->heap, h, __ATOMIC_RELEASE);
    p->nheaps = n;
    return true;
}

static ca_pool *pool_new(ca_allocator *a, ca_stream stream) {
    ca_pool *p = calloc(1, sizeof *p);
    if (!p || ca_live_init(&p->live) != CA_OK) {
        free(p);
        return NULL;
    }
    ca_lock_init(&p->lock);
    p->heap = &no_heaps;
    pool_start(a, p, stream);
    return p;
}

/* Appends p to the table, under the allocator's lock; false when the table
 * cannot grow (no host memory). */
static bool publish(ca_allocator *a, ca_pool *p) {
    ca_lock_acquire(&a->lock);
    ca_pool_array *arr = a->pools;
    size_t n = a->npools;
    if (ca_pooltab_reserve(a, n + 1) != CA_OK) {
        ca_lock_release(&a->lock);
        return false;
    }
    if (n == arr->cap) {
        ca_pool_array *bigger = malloc(sizeof *bigger + 2 * arr->cap * sizeof bigger->pool[0]);
        if (!bigger) {
            ca_lock_release(&a->lock);
            return false;
        }
        bigger->older = arr;
        bigger->cap = 2 * arr->cap;
        memcpy(bigger->pool, arr->pool, n * sizeof arr->pool[0]);
        __atomic_store_n(&a->pools, bigger, __ATOMIC_RELEASE);
        arr = bigger;
    }
    p->index = (uint32_t)n;
    arr->pool[n] = p;
    __atomic_store_n(&a->npools, n + 1, __ATOMIC_RELEASE);
    ca_lock_release(&a->lock);
    return true;
}

/* A new pool for `stream`, looked up by `key`, in the table; NULL without
 * host memory. Under retire_lock. */
static ca_pool *pool_made(ca_allocator *a, ca_stream stream, ca_stream key) {
    if (__atomic_load_n(&a->npools, __ATOMIC_ACQUIRE)) ca_totals_start(a); /* a second pool */
    ca_pool *p = pool_new(a, stream);
    if (p) p->key = key;
    if (p && !publish(a, p)) {
        ca_live_destroy(&p->live);
        free(p);
        p = NULL;
    }
    return p;
}

/* ---- the end of a retired pool ---- */

static void zero_but_current(ca_stats *s) {
    ca_stat *stat = (ca_stat *)s;
    /* the ca_stat arrays come first in ca_stats; current is 0 in each and is
     * read without the lock, so it is left alone */
    for (size_t i = 0; i < offsetof(ca_stats, num_alloc_retries) / sizeof *stat; i++)
        stat[i].peak = stat[i].allocated = stat[i].freed = 0;
    s->num_alloc_retries = s->num_ooms = s->num_device_alloc = s->num_device_free = s->num_granules_moved = 0;
}

/* Its memory back to the device, its figures to `gone`, its struct spare. */
static void end_pool(ca_allocator *a, ca_pool *p) {
    ca_pending_drop(a, p);
    for (int k = CA_POOL_SMALL; k < CA_POOL_KINDS; k++) {
        ca_total_add(a, offsetof(ca_stats, active), k, -p->pend_count[k]);
        ca_total_add(a, offsetof(ca_stats, active_bytes), k, -p->pend_bytes[k]);
    }
    for (int k = 0; k < CA_POOL_KINDS; k++) {
        __atomic_store_n(&p->pend_count[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&p->pend_bytes[k], 0, __ATOMIC_RELAXED);
    }
    ca_exp_drop_mark(a, p);
    for (int k = 0; k < p->nheaps; k++) {
        ca_heap *h = &p->heap[k];
        for (int r = 0; r < h->nranges; r++) __atomic_store_n(&h->ranges[r].size, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&h->nranges, 0, __ATOMIC_RELEASE);
        h->reserved_va = 0;
        for (ca_segment *seg = h->segments, *next; seg; seg = next) {
            next = seg->next;
            if (seg->expandable) ca_exp_end(a, seg);
            else ca_classic_destroy(a, seg);
        }
        h->segments = NULL;
        if (h->free.count) memset(&h->free, 0, sizeof h->free); /* (empty: all zero already) */
    }
    ca_block_free_all(p);
    p->unfenced = NULL;
    p->n_unfenced = p->unfenced_bytes = 0;
    p->win_peak = p->win_peak_prev = 0;
    p->edges = 0;
    ca_stats st = p->st;
    ca_pool_figures(p, &st);
    ca_lock_acquire(&a->lock);
    ca_stats_add(&a->gone, &st);
    ca_lock_release(&a->lock);
    zero_but_current(&p->st);
    __atomic_store_n(&p->state, CA_POOL_SPARE, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&a->nretired, 1, __ATOMIC_RELAXED);
}

/* A retired pool with nothing allocated ends once the device is past its
 * work: the fence that says so is recorded the first time this finds it
 * empty (after its last free, so it covers that free's work too). wait:
 * block until then. Under retire_lock and the pool's lock. */
static void try_end(ca_allocator *a, ca_pool *p, bool wait) {
    if (p->state != CA_POOL_RETIRED || p->st.allocation[CA_POOL_ALL].current) return;
    const ca_backend *be = a->be;
    /* a pool that holds no memory (its stream's blocks were the shared pool's:
     * share.c) has nothing the device's work could touch: no fence */
    bool holds = p->st.reserved_bytes[CA_POOL_ALL].current != 0;
    if (holds && !p->retire_fence && be->fence_record_done) {
        ca_fence f = 0;
        if (be->fence_record_done(be->self, &f) == CA_OK && f) p->retire_fence = f;
        /* else the device was synchronized, or cannot answer: past its work */
    }
    if (p->retire_fence) {
        if (wait) be->fence_wait(be->self, p->retire_fence);
        else if (!be->fence_query(be->self, p->retire_fence)) return;
        be->fence_destroy(be->self, p->retire_fence);
        p->retire_fence = 0;
    }
    end_pool(a, p);
}

/* Ends what can end among the retired pools; those that end move to the
 * spare list. Under retire_lock. */
static void end_retired_locked(ca_allocator *a, bool wait) {
    for (ca_pool **link = &a->retired, *p; (p = *link);) {
        ca_lock_acquire(&p->lock);
        try_end(a, p, wait);
        ca_lock_release(&p->lock);
        if (p->state == CA_POOL_SPARE) {
            *link = p->next_idle;
            p->next_idle = a->spare;
            a->spare = p;
        } else {
            link = &p->next_idle;
        }
    }
}

void ca_pools_end_retired(ca_allocator *a, bool wait) {
    if (!__atomic_load_n(&a->nretired, __ATOMIC_RELAXED)) return;
    ca_lock_acquire(&a->retire_lock);
    end_retired_locked(a, wait);
    ca_lock_release(&a->retire_lock);
}

void ca_retire_stream(ca_allocator *a, ca_stream stream) {
    if (stream == CA_NO_STREAM) return;
    ca_lock_acquire(&a->retire_lock);
    ca_pool *p = ca_pooltab_find(a, stream);
    if (p) {
        ca_lock_acquire(&p->lock);
        bool retired = p->key == stream && p->state == CA_POOL_LIVE;
        if (retired) {
            __atomic_store_n(&p->key, CA_NO_STREAM, __ATOMIC_RELAXED);
            ca_pooltab_drop(a, stream);
            __atomic_store_n(&p->state, CA_POOL_RETIRED, __ATOMIC_RELAXED);
            __atomic_add_fetch(&a->nretired, 1, __ATOMIC_RELAXED);
            try_end(a, p, false);
            ca_pool **list = p->state == CA_POOL_SPARE ? &a->spare : &a->retired;
            p->next_idle = *list;
            *list = p;
        }
        ca_lock_release(&p->lock);
        if (retired) ca_share_forget(a, p); /* before a new stream can take the struct (under retire_lock) */
    }
    ca_lock_release(&a->retire_lock);
}

/* ---- a stream's pool ---- */

int ca_pool_for(ca_allocator *a, ca_stream stream, ca_pool **out) {
    ca_pool *p = stream == CA_NO_STREAM ? NULL : ca_pooltab_find(a, stream);
    if (p) {
        *out = p;
        return CA_OK;
    }
    /* A new stream: the driver must know it (outside every lock: the backend
     * may ask the driver). */
    if (stream == CA_NO_STREAM || (a->be->stream_check && a->be->stream_check(a->be->self, stream) != CA_OK))
        return CA_ERR_STREAM;
    ca_lock_acquire(&a->retire_lock);
    end_retired_locked(a, false); /* their structs become spare */
    p = ca_pooltab_find(a, stream); /* another thread may have made it meanwhile */
    if (!p && (p = a->spare)) {
        a->spare = p->next_idle;
        p->next_idle = NULL;
        ca_lock_acquire(&p->lock);
        pool_start(a, p, stream);
        ca_lock_release(&p->lock);
    }
    if (!p) p = pool_made(a, stream, stream);
    if (p) ca_pooltab_set(a, stream, p);
    ca_lock_release(&a->retire_lock);
    *out = p;
    return p ? CA_OK : CA_ERR_OOM;
}

ca_pool *ca_pool_shared(ca_allocator *a) {
    ca_pool *p = __atomic_load_n(&a->shared, __ATOMIC_ACQUIRE);
    if (p) return p;
    ca_lock_acquire(&a->retire_lock);
    /* its memory is any stream's, as cudaMalloc's: shown on stream 0; no
     * stream's look-up finds it */
    if (!(p = a->shared) && (p = pool_made(a, 0, CA_NO_STREAM))) __atomic_store_n(&a->shared, p, __ATOMIC_RELEASE);
    ca_lock_release(&a->retire_lock);
    return p;
}

int ca_pools_init(ca_allocator *a) {
    ca_pool_array *arr = malloc(sizeof *arr + 8 * sizeof arr->pool[0]);
    if (!arr || ca_pooltab_init(a) != CA_OK) {
        free(arr);
        return CA_ERR_OOM;
    }
    arr->older = NULL;
    arr->cap = 8;
    a->pools = arr;
    a->npools = 0;
    return CA_OK;
}

void ca_pools_destroy(ca_allocator *a) {
    size_t n = a->npools;
    for (size_t i = 0; i < n; i++) {
        ca_pool *p = pool_at(a, i);
        ca_pending_drop(a, p);
        ca_exp_drop_mark(a, p);
        if (p->retire_fence) a->be->fence_destroy(a->be->self, p->retire_fence);
        for (int k = 0; k < p->nheaps; k++)
            for (ca_segment *seg = p->heap[k].segments, *next; seg; seg = next) {
                next = seg->next;
                if (seg->expandable) ca_exp_destroy(a, seg);
                else ca_classic_destroy(a, seg);
            }
        if (p->nheaps) free(p->heap);
        ca_live_destroy(&p->live);
        ca_block_free_all(p);
        free(p);
    }
    ca_pooltab_destroy(a);
    for (ca_pool_array *arr = a->pools, *older; arr; arr = older) {
        older = arr->older;
        free(arr);
    }
}

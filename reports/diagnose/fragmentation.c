/* Fragmentation figures from the tracker's mapped ranges and live blocks;
 * see fragmentation.h. */
#include "reports/diagnose/fragmentation.h"

#include <stdlib.h>
#include <string.h>

int ca_frag_bin(uint64_t b) {
    static const uint64_t lim[CA_FRAG_BINS - 1] = {
        4096, 65536, 1 << 20, 2 << 20, 16 << 20, 128 << 20, 1 << 30,
    };
    int i = 0;
    while (i < CA_FRAG_BINS - 1 && b >= lim[i]) i++;
    return i;
}

uint64_t ca_frag_bin_min(int bin) {
    static const uint64_t lo[CA_FRAG_BINS] = {
        0, 4096, 65536, 1 << 20, 2 << 20, 16 << 20, 128 << 20, 1 << 30,
    };
    return bin >= 0 && bin < CA_FRAG_BINS ? lo[bin] : 0;
}

/* First live block at or after addr (the live array is sorted). */
static size_t first_live(const ca_track_snap *s, uintptr_t addr) {
    size_t lo = 0, hi = s->n_live;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->live[mid].addr < addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void ca_frag_walk(const ca_track_snap *s, const ca_frag_segment *seg, ca_frag_block_fn fn, void *ctx) {
    uintptr_t at = seg->addr, end = seg->addr + seg->reserved;
    for (size_t i = first_live(s, seg->addr); i < s->n_live && s->live[i].addr < end; i++) {
        const ca_live_view *v = &s->live[i];
        if (v->addr < at) continue; /* overlaps the previous one: not ours to draw */
        if (v->addr > at) fn(ctx, at, v->addr - at, NULL);
        uint64_t size = v->addr + v->size > end ? end - v->addr : v->size;
        fn(ctx, v->addr, size, v);
        at = v->addr + size;
    }
    if (at < end) fn(ctx, at, end - at, NULL);
}

typedef struct seg_acc {
    ca_frag *f;
    ca_frag_segment *seg;
} seg_acc;

static void account(void *ctx, uintptr_t addr, uint64_t size, const ca_live_view *live) {
    seg_acc *a = ctx;
    ca_frag_segment *g = a->seg;
    g->n_blocks++;
    if (live) {
        g->allocated += size;
        return;
    }
    g->n_free++;
    g->cached_free += size;
    if (size > g->largest_free) g->largest_free = size;
    int b = ca_frag_bin(size);
    a->f->hist_count[b]++;
    a->f->hist_bytes[b] += size;
}

/* The segments by address (an index into f->segs), so that each of the
 * allocator's segments finds the ones it holds by binary search: looking
 * through all of them for each took 25 s with 10,000 streams (issue 29). */
typedef struct pool_ctx {
    ca_frag *f;
    ca_frag_segment **by_addr;
} pool_ctx;

static int addr_cmp(const void *x, const void *y) {
    uint64_t a = (*(ca_frag_segment *const *)x)->addr, b = (*(ca_frag_segment *const *)y)->addr;
    return (a > b) - (a < b);
}

static void pool_of(void *ctx, const ca_segment_view *sv) {
    pool_ctx *pc = ctx;
    size_t lo = 0, hi = pc->f->n_segs; /* the first at or above sv->base */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pc->by_addr[mid]->addr < sv->base) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < pc->f->n_segs && pc->by_addr[lo]->addr < sv->base + sv->size; lo++) {
        pc->by_addr[lo]->pool = sv->small_pool ? 1 : 2;
        pc->by_addr[lo]->expandable = sv->expandable;
    }
}

static double frag_of(uint64_t largest, uint64_t free_bytes) {
    return free_bytes ? 1.0 - (double)largest / (double)free_bytes : 0.0;
}

int ca_frag_compute(const ca_track_snap *s, ca_allocator *a, ca_frag *f) {
    memset(f, 0, sizeof *f);
    if (s->n_ranges && !(f->segs = calloc(s->n_ranges, sizeof *f->segs))) return -1;
    for (size_t i = 0; i < s->n_ranges; i++) {
        ca_frag_segment *g = &f->segs[f->n_segs++];
        g->addr = s->ranges[i].addr;
        g->reserved = s->ranges[i].size;
        g->stream = (uint32_t)s->ranges[i].stream;
        g->pool = s->ranges[i].kind.pool;
        g->expandable = s->ranges[i].kind.expandable;
        memcpy(g->pool_id, s->ranges[i].kind.pool_id, sizeof g->pool_id);
        seg_acc acc = {f, g};
        ca_frag_walk(s, g, account, &acc);
        g->fragmentation = frag_of(g->largest_free, g->cached_free);
        f->reserved += g->reserved;
        f->allocated += g->allocated;
        f->cached_free += g->cached_free;
        if (g->largest_free > f->largest_free) f->largest_free = g->largest_free;
    }
    f->fragmentation = frag_of(f->largest_free, f->cached_free);
    f->largest_allocation_now = f->largest_free;
    if (a) {
        pool_ctx pc = {f, calloc(f->n_segs ? f->n_segs : 1, sizeof *pc.by_addr)};
        if (!pc.by_addr) return -1;
        for (size_t i = 0; i < f->n_segs; i++) pc.by_addr[i] = &f->segs[i];
        qsort(pc.by_addr, f->n_segs, sizeof *pc.by_addr, addr_cmp);
        ca_visit(a, pool_of, NULL, &pc);
        free(pc.by_addr);
        f->largest_allocation_now = ca_largest_free(a);
        const ca_backend *be = ca_allocator_backend(a);
        size_t fr = 0, tot = 0;
        if (be && be->mem_info && be->mem_info(be->self, &fr, &tot) == CA_OK) {
            f->have_device = 1;
            f->device_free = fr;
            f->device_total = tot;
        }
    }
    return 0;
}

void ca_frag_free(ca_frag *f) {
    free(f->segs);
    memset(f, 0, sizeof *f);
}

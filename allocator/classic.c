/* Classic segments, as PyTorch's default allocator has them: fixed device
 * allocations (2 MiB for small requests, 20 MiB for requests under 10 MiB,
 * else the request rounded to 2 MiB) split into blocks. Kept for comparison
 * and for programs that need one cudaMalloc per segment (cudaIpc*). */
#include <stdlib.h>

#include "internal.h"

#define MIB ((size_t)1 << 20)

static size_t segment_size(const ca_pool *p, size_t size) {
    if (p->small) return 2 * MIB;
    if (size < 10 * MIB) return 20 * MIB;
    return (size + 2 * MIB - 1) & ~(2 * MIB - 1);
}

int ca_classic_alloc(ca_allocator *a, ca_pool *p, size_t size, ca_block **out) {
    ca_block *b = ca_free_index_best_fit(&p->free, size);
    if (b) {
        ca_free_index_remove(&p->free, b);
        *out = b;
        return CA_OK;
    }
    size_t seg_size = segment_size(p, size);
    size_t cap = a->opt.max_reserved;
    if (cap && (size_t)a->stats.reserved_bytes[CA_POOL_ALL].current + seg_size > cap) return CA_ERR_OOM;
    uintptr_t addr;
    int rc = a->be->fixed_alloc(a->be->self, seg_size, &addr);
    if (rc != CA_OK) return rc == CA_ERR_OOM ? CA_ERR_OOM : CA_ERR_BACKEND;
    ca_segment *seg = calloc(1, sizeof *seg);
    b = seg ? ca_block_new(a) : NULL;
    if (!b) {
        free(seg);
        a->be->fixed_free(a->be->self, addr, seg_size);
        return CA_ERR_OOM;
    }
    seg->pool = p;
    seg->base = addr;
    seg->span = seg->mapped = seg_size;
    seg->first = seg->last = b;
    seg->next = p->segments;
    p->segments = seg;
    b->addr = addr;
    b->size = seg_size;
    b->seg = seg;
    int kind = ca_pool_kind(p);
    ca_stat_update(a->stats.segment, kind, 1);
    ca_stat_update(a->stats.reserved_bytes, kind, (int64_t)seg_size);
    a->stats.num_device_alloc++;
    ca_emit(a, CA_EV_SEGMENT_MAP, addr, seg_size, 0, p->stream);
    *out = b;
    return CA_OK;
}

void ca_classic_destroy(ca_allocator *a, ca_segment *seg) {
    int kind = ca_pool_kind(seg->pool);
    a->be->fixed_free(a->be->self, seg->base, seg->span);
    ca_stat_update(a->stats.segment, kind, -1);
    ca_stat_update(a->stats.reserved_bytes, kind, -(int64_t)seg->span);
    a->stats.num_device_free++;
    ca_emit(a, CA_EV_SEGMENT_UNMAP, seg->base, seg->span, 0, seg->pool->stream);
    free(seg);
}

/* Free the segments that hold no allocation. Returns the bytes released. */
size_t ca_classic_release(ca_allocator *a, ca_pool *p) {
    size_t released = 0;
    bool synced = false;
    for (ca_segment **link = &p->segments; *link;) {
        ca_segment *seg = *link;
        ca_block *b = seg->first;
        if (b->next || b->allocated) {
            link = &seg->next;
            continue;
        }
        if (!synced) { ca_pool_sync(a, p); synced = true; }
        *link = seg->next;
        ca_free_index_remove(&p->free, b);
        ca_block_put(a, b);
        released += seg->span;
        ca_classic_destroy(a, seg);
    }
    return released;
}

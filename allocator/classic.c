/* Classic segments, as PyTorch's default allocator has them: fixed device
 * allocations (2 MiB for small requests, 20 MiB for requests under 10 MiB,
 * else the request rounded to 2 MiB) split into blocks. Kept for comparison
 * and for programs that need one cudaMalloc per segment (cudaIpc*). */
#include <stdlib.h>

#include "internal.h"
#include "util/checked.h"

#define MIB ((size_t)1 << 20)

/* 0 when the size cannot be rounded (ca_malloc refuses such sizes first). */
static size_t segment_size(const ca_heap *h, size_t size) {
    if (h->small) return 2 * MIB;
    if (size < 10 * MIB) return 20 * MIB;
    size_t seg;
    return ca_size_round_up(size, 2 * MIB, &seg) ? seg : 0;
}

int ca_classic_alloc(ca_allocator *a, ca_heap *h, size_t size, bool may_grow, ca_block **out) {
    ca_block *b = ca_free_index_best_fit(&h->free, size);
    if (b) {
        ca_free_index_remove(&h->free, b);
        *out = b;
        return CA_OK;
    }
    if (!may_grow) return CA_ERR_OOM;
    size_t seg_size = segment_size(h, size);
    if (!seg_size || !ca_hold(a, seg_size)) return CA_ERR_OOM;
    uintptr_t addr;
    int rc = a->be->fixed_alloc(a->be->self, seg_size, &addr);
    if (rc != CA_OK) {
        ca_unhold(a, seg_size);
        return rc == CA_ERR_OOM ? CA_ERR_OOM : CA_ERR_BACKEND;
    }
    ca_segment *seg = calloc(1, sizeof *seg);
    b = seg ? ca_block_new(h->pool) : NULL;
    if (b && ca_addr_index_add(&a->addrs, addr, seg_size, h->pool) != CA_OK) {
        ca_block_put(h->pool, b);
        b = NULL;
    }
    if (!b) {
        free(seg);
        a->be->fixed_free(a->be->self, addr, seg_size);
        ca_unhold(a, seg_size);
        return CA_ERR_OOM;
    }
    seg->heap = h;
    seg->base = addr;
    seg->span = seg->mapped = seg_size;
    seg->first = seg->last = b;
    seg->next = h->segments;
    h->segments = seg;
    b->addr = addr;
    b->size = seg_size;
    b->seg = seg;
    CA_STAT(a, h, segment, 1);
    ca_reserved_add(a, h, (int64_t)seg_size);
    h->pool->st.num_device_alloc++;
    ca_emit_classic(a, CA_EV_SEGMENT_MAP, seg);
    *out = b;
    return CA_OK;
}

void ca_classic_destroy(ca_allocator *a, ca_segment *seg) {
    ca_heap *h = seg->heap;
    ca_addr_index_remove(&a->addrs, seg->base);
    a->be->fixed_free(a->be->self, seg->base, seg->span);
    ca_unhold(a, seg->span);
    CA_STAT(a, h, segment, -1);
    ca_reserved_add(a, h, -(int64_t)seg->span);
    seg->heap->pool->st.num_device_free++;
    ca_emit_classic(a, CA_EV_SEGMENT_UNMAP, seg);
    free(seg);
}

/* Free the segments that hold no allocation, once the device's work queued
 * so far is done (a block freed in stream order, or a plain free reused
 * behind the legacy stream's event, may still have work on it). */
void ca_classic_release(ca_allocator *a, ca_heap *h) {
    bool synced = false;
    for (ca_segment **link = &h->segments; *link;) {
        ca_segment *seg = *link;
        ca_block *b = seg->first;
        if (b->next || b->allocated) {
            link = &seg->next;
            continue;
        }
        if (!synced && !ca_device_wait(a, h->pool)) return; /* its work may still run */
        synced = true;
        *link = seg->next;
        ca_free_index_remove(&seg->heap->free, b);
        ca_block_put(h->pool, b);
        ca_classic_destroy(a, seg);
    }
}

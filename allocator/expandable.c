/* Expandable segments: one large virtual range per pool, physical granules
 * mapped on demand. Free blocks may have unmapped granules inside them; an
 * allocated block always has all of its granules mapped. Because any request
 * can be placed at the end of the range, physical memory given back from free
 * blocks anywhere serves it: fragmentation costs at most the partly used
 * granules at the edges of live blocks. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util/checked.h"

static ca_segment *segment_new(ca_allocator *a, ca_heap *h) {
    size_t reserve = a->reserve; /* see set_limits */
    uintptr_t base;
    if (a->be->reserve(a->be->self, reserve, &base) != CA_OK) return NULL;
    ca_segment *seg = calloc(1, sizeof *seg);
    if (!seg) {
        a->be->unreserve(a->be->self, base, reserve);
        return NULL;
    }
    seg->heap = h;
    seg->base = base;
    seg->reserve_size = reserve;
    seg->expandable = true;
    seg->next = h->segments;
    h->segments = seg;
    h->range_base = base; /* read without the pool's lock by ca_free: set once */
    __atomic_store_n(&h->range_size, reserve, __ATOMIC_RELEASE);
    CA_STAT(a, h, segment, 1);
    return seg;
}

/* Room for new_n granule handles; the array grows geometrically. new_n is at
 * most the reserve's granules, so neither doubling nor the byte count wraps. */
static int grow_handles(ca_segment *seg, size_t new_n) {
    if (new_n <= seg->handles_cap) return CA_OK;
    size_t cap = seg->handles_cap ? seg->handles_cap : 64;
    while (cap < new_n) cap *= 2;
    size_t bytes;
    if (!ca_size_mul(cap, sizeof(ca_handle), &bytes)) return CA_ERR_OOM;
    ca_handle *h = realloc(seg->handles, bytes);
    if (!h) return CA_ERR_OOM;
    memset(h + seg->handles_cap, 0, (cap - seg->handles_cap) * sizeof *h);
    seg->handles = h;
    seg->handles_cap = cap;
    return CA_OK;
}

/* Granule i's physical memory comes (back) from the device. */
static int map_granule(ca_allocator *a, ca_segment *seg, size_t i) {
    size_t g = a->granule;
    ca_handle h;
    int rc = a->be->create(a->be->self, g, &h);
    if (rc != CA_OK) return rc;
    rc = a->be->map(a->be->self, seg->base + i * g, g, h);
    if (rc != CA_OK) {
        a->be->release(a->be->self, h);
        return rc == CA_ERR_OOM ? CA_ERR_OOM : CA_ERR_BACKEND;
    }
    seg->handles[i] = h;
    seg->mapped += g;
    CA_STAT(a, seg->heap, reserved_bytes, (int64_t)g);
    seg->heap->pool->st.num_device_alloc++;
    return CA_OK;
}

static void unmap_granule(ca_allocator *a, ca_segment *seg, size_t i) {
    size_t g = a->granule;
    a->be->unmap(a->be->self, seg->base + i * g, g);
    a->be->release(a->be->self, seg->handles[i]);
    seg->handles[i] = 0;
    seg->mapped -= g;
    CA_STAT(a, seg->heap, reserved_bytes, -(int64_t)g);
    seg->heap->pool->st.num_device_free++;
}

/* Can the device, and the cap, give `bytes` more physical memory? */
static bool room_for(ca_allocator *a, size_t bytes) {
    size_t free_bytes = 0, total = 0;
    if (a->be->mem_info(a->be->self, &free_bytes, &total) == CA_OK && free_bytes < bytes) return false;
    return !a->cap || ca_reserved_total(a) + bytes <= a->cap; /* both <= CA_MAX_BYTES */
}

/* Map every granule under [addr, addr+size); reports runs to the observer.
 * Asks first whether the device has the memory, so a request that cannot fit
 * costs no mapping and unmapping. */
static int map_range(ca_allocator *a, ca_segment *seg, uintptr_t addr, size_t size) {
    if (seg->mapped == seg->span) return CA_OK; /* the common case: nothing unmapped */
    size_t g = a->granule;
    size_t first = (addr - seg->base) / g, end = (addr + size - seg->base + g - 1) / g;
    size_t missing = 0;
    for (size_t i = first; i < end; i++) missing += !seg->handles[i];
    if (!missing) return CA_OK;
    if (!room_for(a, missing * g)) return CA_ERR_OOM;
    size_t run = end; /* start of the run being mapped; end = none */
    for (size_t i = first; i < end; i++) {
        if (seg->handles[i]) continue;
        int rc = map_granule(a, seg, i);
        if (rc != CA_OK) {
            if (run != end) ca_emit(a, CA_EV_SEGMENT_MAP, seg->base + run * g, (i - run) * g, 0, seg->heap->pool->stream);
            return rc;
        }
        if (run == end) run = i;
        if (i + 1 == end || seg->handles[i + 1]) {
            ca_emit(a, CA_EV_SEGMENT_MAP, seg->base + run * g, (i + 1 - run) * g, 0, seg->heap->pool->stream);
            run = end;
        }
    }
    return CA_OK;
}

/* Extend the range so that a block of `size` fits at its end; returns that
 * free block, taken out of the index. NULL, with nothing changed, when the
 * range or the device has no room for the granules it adds: a request that
 * cannot fit costs no per-granule work, whatever its size. */
static ca_block *extend(ca_allocator *a, ca_segment *seg, size_t size) {
    size_t g = a->granule;
    ca_block *tail = seg->last;
    bool tail_free = tail && !tail->allocated;
    uintptr_t start = tail_free ? tail->addr : seg->base + seg->span;
    size_t new_span;
    if (!ca_size_add(start - seg->base, size, &new_span) || !ca_size_round_up(new_span, g, &new_span) ||
        new_span > seg->reserve_size)
        return NULL;
    size_t added = new_span - seg->span; /* none of it mapped */
    if (!room_for(a, added) || grow_handles(seg, new_span / g) != CA_OK) return NULL;
    ca_block *b;
    if (tail_free) {
        ca_free_index_remove(&seg->heap->free, tail);
        tail->size += added;
        b = tail;
    } else {
        if (!(b = ca_block_new(seg->heap->pool))) return NULL;
        b->addr = seg->base + seg->span;
        b->size = added;
        b->seg = seg;
        b->prev = tail;
        if (tail) tail->next = b;
        else seg->first = b;
        seg->last = b;
    }
    seg->span = new_span;
    return b;
}

int ca_exp_alloc(ca_allocator *a, ca_heap *h, size_t size, ca_block **out) {
    ca_segment *seg = h->segments;
    if (!seg && !(seg = segment_new(a, h))) return CA_ERR_OOM;
    ca_block *b = ca_free_index_best_fit(&h->free, size);
    if (b) ca_free_index_remove(&h->free, b);
    else if (!(b = extend(a, seg, size))) return CA_ERR_OOM;
    int rc = map_range(a, seg, b->addr, size);
    if (rc != CA_OK) {
        ca_free_index_insert(&h->free, b);
        return rc;
    }
    *out = b;
    return CA_OK;
}

/* Give back the granules that lie wholly inside free blocks, then trim an
 * unmapped tail off the range. */
void ca_exp_release(ca_allocator *a, ca_segment *seg) {
    size_t g = a->granule;
    bool synced = false;
    for (ca_block *b = seg->first; b; b = b->next) {
        if (b->allocated) continue;
        size_t first = (b->addr - seg->base + g - 1) / g, end = (b->addr + b->size - seg->base) / g;
        size_t run = end;
        for (size_t i = first; i < end; i++) {
            if (seg->handles[i]) {
                if (!synced) { ca_pool_sync(a, seg->heap->pool); synced = true; }
                unmap_granule(a, seg, i);
                if (run == end) run = i;
            }
            if (run != end && (i + 1 == end || !seg->handles[i + 1])) {
                ca_emit(a, CA_EV_SEGMENT_UNMAP, seg->base + run * g, (i + 1 - run) * g, 0, seg->heap->pool->stream);
                run = end;
            }
        }
    }
    /* Trim the unmapped end of a free tail off the range. The granule where the
     * tail starts is mapped if an allocated block shares it, so the cut never
     * reaches into the block before the tail. */
    ca_block *tail = seg->last;
    if (tail && !tail->allocated) {
        size_t end = seg->span / g, lo = (tail->addr - seg->base) / g;
        while (end > lo && !seg->handles[end - 1]) end--;
        if (end * g < seg->span) {
            uintptr_t new_end = seg->base + end * g;
            ca_free_index_remove(&seg->heap->free, tail);
            if (new_end > tail->addr) {
                tail->size = new_end - tail->addr;
                ca_free_index_insert(&seg->heap->free, tail);
            } else {
                seg->last = tail->prev;
                if (seg->last) seg->last->next = NULL;
                else seg->first = NULL;
                ca_block_put(seg->heap->pool, tail);
            }
            seg->span = end * g;
        }
    }
}

void ca_exp_destroy(ca_allocator *a, ca_segment *seg) {
    size_t g = a->granule;
    for (size_t i = 0; i < seg->span / g; i++)
        if (seg->handles[i]) unmap_granule(a, seg, i);
    a->be->unreserve(a->be->self, seg->base, seg->reserve_size);
    CA_STAT(a, seg->heap, segment, -1);
    free(seg->handles);
    free(seg);
}

/* Bytes of b with physical memory behind them. */
size_t ca_exp_block_mapped(const ca_allocator *a, const ca_block *b) {
    const ca_segment *seg = b->seg;
    size_t g = a->granule, mapped = 0;
    for (size_t i = (b->addr - seg->base) / g; i * g < b->addr + b->size - seg->base; i++) {
        if (!seg->handles[i]) continue;
        uintptr_t lo = seg->base + i * g, hi = lo + g;
        if (lo < b->addr) lo = b->addr;
        if (hi > b->addr + b->size) hi = b->addr + b->size;
        mapped += hi - lo;
    }
    return mapped;
}

/* The longest stretch of b that is mapped: what b can serve without growing. */
size_t ca_exp_mapped_run(const ca_allocator *a, const ca_block *b) {
    const ca_segment *seg = b->seg;
    size_t g = a->granule, best = 0, cur = 0;
    for (size_t i = (b->addr - seg->base) / g; i * g < b->addr + b->size - seg->base; i++) {
        uintptr_t lo = seg->base + i * g, hi = lo + g;
        if (lo < b->addr) lo = b->addr;
        if (hi > b->addr + b->size) hi = b->addr + b->size;
        cur = seg->handles[i] ? cur + (hi - lo) : 0;
        if (cur > best) best = cur;
    }
    return best;
}

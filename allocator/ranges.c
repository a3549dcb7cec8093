/* The virtual ranges of an expandable heap. A pool starts with one range of
 * CA_FIRST_RANGE (or its first request); when a request fits neither in a
 * free block nor at the end of the range, the pool moves to a new range at
 * least twice as large, and twice what the pool holds, where it grows from
 * then on. The older ranges keep their blocks, and their free blocks stay in
 * the heap's one free index: they serve requests (best fit over every range)
 * and give their granules as any free block does; only the newest range is
 * extended. A range older than the newest with nothing in use and nothing
 * mapped goes back to the device.
 *
 * So what a pool reserves grows as it does (a stream that holds 4 KiB holds
 * 1 GiB of addresses, not four times the device: hundreds of thousands of
 * streams fit in a 47-bit address space), and growth never strands memory:
 * when older ranges took no request (issue 19), 100,000 small blocks under
 * churn left the first range's granules partly used, one live block in each
 * enough to keep it mapped, and the pool reserved 1.71 times its peak (1.03
 * now; BENCHMARKS.md, issue 29). Extending one range only keeps a training
 * loop from moving granules between ranges' ends every iteration (albert:
 * 480 instructions a call when several ranges grew side by side). */
#include <stdlib.h>

#include "internal.h"
#include "util/checked.h"

/* Slot i of the heap's range table holds [base, base + size): published for
 * readers without the lock, the size last. */
static void publish(ca_heap *h, int i, uintptr_t base, size_t size) {
    __atomic_store_n(&h->ranges[i].base, base, __ATOMIC_RELAXED);
    __atomic_store_n(&h->ranges[i].size, size, __ATOMIC_RELEASE);
    if (i == h->nranges) __atomic_store_n(&h->nranges, i + 1, __ATOMIC_RELEASE);
}

static int free_slot(const ca_heap *h) {
    for (int i = 0; i < h->nranges; i++)
        if (!h->ranges[i].size) return i;
    return h->nranges < CA_MAX_RANGES ? h->nranges : -1;
}

ca_segment *ca_range_new(ca_allocator *a, ca_heap *h, size_t size) {
    size_t g = a->granule, left = a->reserve - h->reserved_va, need;
    int slot = free_slot(h);
    if (slot < 0 || !ca_size_round_up(size, g, &need) || need > left) return NULL;
    /* twice the last range, and twice what the pool holds with this request:
     * then the new range alone holds all of it again, and once more */
    size_t reserve = h->segments ? 2 * h->segments->reserve_size : a->first_range;
    size_t holds = (size_t)ca_pool_active_bytes(h->pool) + need; /* both <= CA_MAX_BYTES */
    if (reserve < 2 * holds) reserve = (2 * holds + g - 1) & ~(g - 1);
    if (reserve > left) reserve = left;
    uintptr_t base;
    if (a->be->reserve(a->be->self, reserve, &base) != CA_OK) return NULL;
    ca_segment *seg = calloc(1, sizeof *seg);
    if (!seg || ca_addr_index_add(&a->addrs, base, reserve, h->pool) != CA_OK) {
        free(seg);
        a->be->unreserve(a->be->self, base, reserve);
        return NULL;
    }
    seg->heap = h;
    seg->base = base;
    seg->reserve_size = reserve;
    seg->expandable = true;
    seg->gshift = (unsigned)__builtin_ctzll(g);
    seg->next = h->segments;
    h->segments = seg;
    h->reserved_va += reserve;
    publish(h, slot, base, reserve);
    CA_STAT(a, h, segment, 1);
    return seg;
}

void ca_ranges_drop_empty(ca_allocator *a, ca_heap *h) {
    ca_segment **link = h->segments ? &h->segments->next : NULL; /* the newest grows */
    while (link && *link) {
        ca_segment *seg = *link;
        ca_exp_trim_tail(a, seg);
        if (seg->first) { /* a block in use, or a granule mapped, is left */
            link = &seg->next;
            continue;
        }
        *link = seg->next;
        for (int i = 0; i < h->nranges; i++)
            if (h->ranges[i].size && h->ranges[i].base == seg->base) __atomic_store_n(&h->ranges[i].size, 0, __ATOMIC_RELEASE);
        h->reserved_va -= seg->reserve_size;
        ca_exp_destroy(a, seg);
    }
}

/* Fragmentation: how the reserved memory is split between live allocations
 * and free pieces, per segment and in total.
 *
 * Segments are the mapped ranges the tracker saw, as their allocator made
 * them (reports/track/ranges.h): a classic segment is one, however its
 * neighbours touch it; expandable memory is one segment per contiguous
 * mapped range, as PyTorch's snapshot has it. Free pieces are the gaps
 * between live allocations inside a segment (never across two), so a free
 * piece is always backed by physical memory and can serve a request without
 * the allocator growing. fragmentation = 1 - largest free piece / free bytes
 * (0 when nothing is free): 0 means all free memory is in one piece.
 * With the allocator at hand, each segment is told small or large pool, the
 * largest allocation that would succeed now comes from ca_largest_free(), and
 * the device's own free memory from the backend. */
#ifndef CA_FRAGMENTATION_H
#define CA_FRAGMENTATION_H
#include <stddef.h>
#include <stdint.h>

#include "allocator/allocator.h"
#include "reports/track/tracker.h"

#define CA_FRAG_BINS 8 /* <4K, <64K, <1M, <2M, <16M, <128M, <1G, >=1G */

typedef struct ca_frag_segment {
    uintptr_t addr;
    uint64_t reserved;          /* bytes mapped */
    uint64_t allocated;         /* live block bytes inside */
    uint64_t cached_free;       /* reserved - allocated */
    uint64_t largest_free;
    double fragmentation;
    uint32_t n_blocks, n_free;
    uint32_t stream;            /* index in the snapshot's streams */
    int pool;                   /* 0 unknown, 1 small, 2 large */
    int expandable;             /* 1, 0, or -1 unknown */
    int64_t pool_id[2];         /* PyTorch's segment_pool_id ((0, 0): its default pool) */
} ca_frag_segment;

typedef struct ca_frag {
    ca_frag_segment *segs;
    size_t n_segs;
    uint64_t reserved, allocated, cached_free, largest_free;
    double fragmentation;
    uint64_t largest_allocation_now; /* would succeed now without growing */
    int have_device;
    uint64_t device_free, device_total;
    uint64_t hist_count[CA_FRAG_BINS], hist_bytes[CA_FRAG_BINS];
} ca_frag;

/* a may be NULL (offline without an allocator). 0, or -1 out of memory. */
int ca_frag_compute(const ca_track_snap *s, ca_allocator *a, ca_frag *out);
void ca_frag_free(ca_frag *f);

/* Bin of a free piece of `bytes`, and each bin's lower bound. */
int ca_frag_bin(uint64_t bytes);
uint64_t ca_frag_bin_min(int bin);

/* The free pieces of segment i in address order: calls fn for every block
 * (live or free) of the segment so writers can draw it. */
typedef void (*ca_frag_block_fn)(void *ctx, uintptr_t addr, uint64_t size, const ca_live_view *live);
void ca_frag_walk(const ca_track_snap *s, const ca_frag_segment *seg, ca_frag_block_fn fn, void *ctx);

#endif

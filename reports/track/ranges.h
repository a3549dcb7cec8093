/* A table of mapped ranges (segments) by address, kept as the allocator
 * that made them has them.
 *
 * A whole range (ca_range_kind.whole: PyTorch's classic segments, each one
 * cudaMalloc) stays one range however its neighbours touch it: no
 * allocation ever spans two such segments, so joining them would invent
 * free blocks that do not exist. Other ranges (expandable segments, mapped
 * and unmapped granule by granule, and cudalloc's own) are joined where
 * neighbours of one stream and one pool touch, as PyTorch reports one
 * segment per contiguous mapped range, and split where their middle is
 * unmapped. The tracker keeps its segments in one (track/tracker.c), and
 * the snapshot reader lays out the segments of a trace's start with
 * another (read/snapshot_run.c). */
#ifndef CA_RANGES_H
#define CA_RANGES_H
#include <stddef.h>
#include <stdint.h>

#include "reports/track/tracker.h"

typedef struct ca_range_set {
    ca_range *v; /* by address, never overlapping */
    size_t n, cap;
} ca_range_set;

/* The kind a range has when nothing says more: joinable, pool and
 * expandability not said, PyTorch's default pool. */
ca_range_kind ca_range_kind_default(void);

/* Maps r: what it overlaps is cut out of the ranges there first (a bad
 * trace cannot make two ranges overlap), then it joins its neighbours when
 * both may be joined. 0, or -1 when memory ran out (the set unchanged). */
int ca_ranges_map(ca_range_set *s, const ca_range *r);

/* Unmaps [addr, addr + size). With whole, a whole range starting at addr
 * goes entirely (a classic segment is freed whole); otherwise the bytes are
 * cut out of whatever ranges they overlap, splitting one when its middle
 * goes. 0, or -1 when memory ran out. */
int ca_ranges_unmap(ca_range_set *s, uintptr_t addr, uint64_t size, int whole);

void ca_ranges_free(ca_range_set *s);

#endif

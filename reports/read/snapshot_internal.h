/* What the snapshot reader's files share (read/ only). */
#ifndef CA_SNAPSHOT_INTERNAL_H
#define CA_SNAPSHOT_INTERNAL_H
#include <stdint.h>

#include "reports/read/snapshot_read.h"

/* The site of allocations recorded without frames, by requested size: a
 * named frame "allocations of 1.5 MiB (1572864 B)" interned into s->stacks,
 * once per size while *cache (NULL at first) lives; ca_snap_sizes_free
 * empties it. CA_SITE_NONE when memory ran out. */
typedef struct ca_snap_sizes ca_snap_sizes;
uint32_t ca_snap_size_site(ca_torch_snapshot *s, ca_snap_sizes **cache, uint64_t size);
void ca_snap_sizes_free(ca_snap_sizes **cache);

#endif

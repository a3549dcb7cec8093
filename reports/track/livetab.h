/* The tracker's live allocations by address: open addressing (linear
 * probing, deletion by backward shift, at most half full) over slots that
 * hold an address and its entry, the entries in slabs of the table's own, a
 * freed one reused first. A put reads the slots' lines alone (its entry is
 * the one last freed, still in the caches), a take those and the entry.
 * Linked in the order they were added, as they were, the entries cost four
 * cache misses a free with 100,000 live allocations freed in any order, both
 * neighbours in the list too; entries kept in the slots, 48 bytes each, made
 * probes read more lines (issue 29). Not thread-safe: the tracker's lock is
 * held. */
#ifndef CA_LIVETAB_H
#define CA_LIVETAB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One live allocation, 48 bytes. */
typedef struct live {
    uintptr_t addr;
    uint64_t size, requested, birth_ticks;
    uint32_t site, birth_iter;
    uint32_t thread, stream;
} live;

typedef struct ca_live_slot {
    uintptr_t addr;
    live *e; /* NULL: empty */
} ca_live_slot;
typedef union ca_live_cell ca_live_cell;
typedef struct ca_live_slab ca_live_slab;

typedef struct ca_livetab {
    ca_live_slot *slot;
    size_t mask, n;
    unsigned shift;      /* 64 - log2(slots): the hash's top bits pick the slot */
    ca_live_cell *spare; /* entries free for reuse, the last freed first */
    ca_live_slab *slabs;
    size_t n_slabs;
} ca_livetab;

live *ca_livetab_find(const ca_livetab *t, uintptr_t addr);
/* The entry of addr, its address set, the rest for the caller to fill in
 * whole: a new one, or the one already there (its free was missed), copied
 * to *replaced first, with *had set. NULL: no memory (addr was not in it).
 * An entry stays where it is until taken. */
live *ca_livetab_put(ca_livetab *t, uintptr_t addr, live *replaced, bool *had);
/* The entry of addr copied to *out and removed; false when there is none. */
bool ca_livetab_take(ca_livetab *t, uintptr_t addr, live *out);
/* The entries in no order: the one after l, the first when l is NULL; NULL
 * after the last. */
live *ca_livetab_next(ca_livetab *t, const live *l);
size_t ca_livetab_memory(const ca_livetab *t);
void ca_livetab_free(ca_livetab *t);

#endif

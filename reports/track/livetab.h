/* The tracker's live allocations. Each has an entry, found one of two ways:
 * by the tag its allocator keeps in the block (ca_trace_event.tag: the
 * entry's index), or by address, in an open-addressing table (linear
 * probing, deletion by backward shift, at most half full) whose slots hold
 * the address and the entry's index, for events that come without a block
 * (a trace's or a snapshot's). Entries sit in slabs of the table's own, the
 * last freed reused first. With 100,000 live allocations freed in any order,
 * a tagged free reads its entry alone, and an allocation nothing that is not
 * in the caches: linked in the order they were added and found by address,
 * as they were, the entries cost four cache misses a free (the slot, the
 * entry, both neighbours in the list; issue 29). Not thread-safe: the
 * tracker's lock is held. */
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
    uint32_t e; /* the entry's index + 1; 0: empty */
} ca_live_slot;
typedef struct ca_live_slab ca_live_slab;

typedef struct ca_livetab {
    ca_live_slot *slot; /* by address */
    size_t mask, n_slot;
    unsigned shift;     /* 64 - log2(slots): the hash's top bits pick the slot */
    ca_live_slab **slabs;
    size_t n_slabs, cap_slabs;
    uint32_t spare;     /* a free entry's index + 1 (0: none), the last freed first */
    size_t n;           /* entries in use, both ways */
} ca_livetab;

/* By address. The entry of addr, its address set, the rest for the caller
 * to fill in whole: a new one, or the one already there (its free was
 * missed), copied to *replaced first, with *had set. NULL: no memory (addr
 * was not in it). An entry stays where it is until taken. */
live *ca_livetab_put(ca_livetab *t, uintptr_t addr, live *replaced, bool *had);
/* The entry of addr copied to *out and removed; false when there is none. */
bool ca_livetab_take(ca_livetab *t, uintptr_t addr, live *out);
live *ca_livetab_find(const ca_livetab *t, uintptr_t addr);

/* By tag. A new entry of addr, its tag (the entry's index + 1) in *tag; 0
 * and NULL when there is no memory, or its tag would pass max_tag. */
live *ca_livetab_put_tagged(ca_livetab *t, uintptr_t addr, uint32_t max_tag, uint32_t *tag);
/* The entry *tag names copied to *out and removed, when it is one put by tag
 * for addr and still in use; false otherwise (a tag another observer wrote,
 * or none: the caller's unknown free). */
bool ca_livetab_take_tagged(ca_livetab *t, uint32_t tag, uintptr_t addr, live *out);

/* The entries in use, both ways, in no order: the one at or after *at,
 * which moves past it; NULL after the last. Start with *at = 0. */
live *ca_livetab_next(const ca_livetab *t, size_t *at);
size_t ca_livetab_memory(const ca_livetab *t);
void ca_livetab_free(ca_livetab *t);

#endif

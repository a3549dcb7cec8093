/* The tracker's live allocations by address: the entries themselves in an
 * open-addressing table (linear probing, deletion by backward shift, at most
 * half full), so that a free reads one place. Pointers to entries kept
 * apart and linked in the order they were added cost four cache misses a
 * free with 100,000 live allocations freed in any order: the slot, the entry
 * and both neighbours in the list (issue 29). Entries move: a pointer to one
 * holds until the next put or take. Address 0 marks an empty slot: an entry
 * of address 0 is kept beside the slots. Not thread-safe: the tracker's lock
 * is held. */
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

typedef struct ca_livetab {
    live *slot;
    size_t mask, n; /* n: entries, the one at address 0 included */
    unsigned shift; /* 64 - log2(slots): the hash's top bits pick the slot */
    bool has_zero;
    live zero;
} ca_livetab;

live *ca_livetab_find(const ca_livetab *t, uintptr_t addr);
/* The entry of addr, its address set, the rest for the caller to fill in
 * whole: a new one, or the one already there (its free was missed), copied
 * to *replaced first, with *had set. NULL: no memory to grow the table (addr
 * was not in it). */
live *ca_livetab_put(ca_livetab *t, uintptr_t addr, live *replaced, bool *had);
/* The entry of addr copied to *out and removed; false when there is none. */
bool ca_livetab_take(ca_livetab *t, uintptr_t addr, live *out);
/* The entries in no order: the one after l, the first when l is NULL; NULL
 * after the last. */
live *ca_livetab_next(ca_livetab *t, const live *l);
size_t ca_livetab_memory(const ca_livetab *t);
void ca_livetab_free(ca_livetab *t);

#endif

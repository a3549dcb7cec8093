/* The tracker's live allocations by address: open addressing over pointers
 * to the entries (linear probing, deletion by backward shift, at most half
 * full), the entries also linked in the order they were added, which is the
 * order reports walk them in. Not thread-safe: the tracker's lock is held. */
#ifndef CA_LIVETAB_H
#define CA_LIVETAB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct live live; /* tracker_internal.h: addr, prev, next */

typedef struct ca_livetab {
    live **slot; /* NULL: empty */
    size_t mask, n;
    unsigned shift; /* 64 - log2(slots): the hash's top bits pick the slot */
    live *head, *tail; /* oldest first */
} ca_livetab;

live *ca_livetab_find(const ca_livetab *t, uintptr_t addr);
/* false: no memory to grow the table (l is not in it). *replaced: the entry
 * of the same address l took the place of (out of the table and the list),
 * or NULL. */
bool ca_livetab_add(ca_livetab *t, live *l, live **replaced);
void ca_livetab_remove(ca_livetab *t, live *l);
/* The entry of addr, removed from the table; NULL when there is none. */
live *ca_livetab_take(ca_livetab *t, uintptr_t addr);
size_t ca_livetab_memory(const ca_livetab *t);
void ca_livetab_free(ca_livetab *t);

#endif

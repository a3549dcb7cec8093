/* The tracker's tables of OS thread ids and stream handles: each id gets the
 * index of its first sighting, kept for the whole run (events, live blocks and
 * ranges hold the index; reports print ids[index]). Found by an open-addressed
 * hash, so a long run that makes streams or threads by the hundred thousand
 * pays the same per new one as a short run. Not thread-safe: the tracker's
 * lock is held. */
#ifndef CA_IDTAB_H
#define CA_IDTAB_H
#include <stddef.h>
#include <stdint.h>

#define CA_IDTAB_NONE UINT32_MAX /* no memory for one more id */

typedef struct ca_idtab {
    uint64_t *ids;   /* by index, in the order first seen */
    size_t n, cap;
    uint32_t *slots; /* hash: index + 1, 0 empty */
    size_t mask;
} ca_idtab;

uint32_t ca_idtab_index(ca_idtab *t, uint64_t id);
size_t ca_idtab_memory(const ca_idtab *t);
void ca_idtab_free(ca_idtab *t);

#endif

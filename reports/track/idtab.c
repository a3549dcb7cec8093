/* Ids to indices: an array in order of first sighting, and a hash of it
 * (linear probing, at most half full) rebuilt twice as large when it fills. */
#include <stdlib.h>

#include "reports/track/idtab.h"

static size_t hash(uint64_t id, size_t mask) {
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & mask;
}

static int rehash(ca_idtab *t, size_t nslots) {
    uint32_t *s = calloc(nslots, sizeof *s);
    if (!s) return -1;
    for (size_t i = 0; i < t->n; i++) {
        size_t h = hash(t->ids[i], nslots - 1);
        while (s[h]) h = (h + 1) & (nslots - 1);
        s[h] = (uint32_t)i + 1;
    }
    free(t->slots);
    t->slots = s;
    t->mask = nslots - 1;
    return 0;
}

uint32_t ca_idtab_index(ca_idtab *t, uint64_t id) {
    if (t->slots)
        for (size_t h = hash(id, t->mask); t->slots[h]; h = (h + 1) & t->mask)
            if (t->ids[t->slots[h] - 1] == id) return t->slots[h] - 1;
    if (t->n >= CA_IDTAB_NONE - 1) return CA_IDTAB_NONE;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        uint64_t *ids = realloc(t->ids, cap * sizeof *ids);
        if (!ids) return CA_IDTAB_NONE;
        t->ids = ids;
        t->cap = cap;
    }
    if (2 * (t->n + 1) > (t->slots ? t->mask + 1 : 0) && rehash(t, t->slots ? 2 * (t->mask + 1) : 32))
        return CA_IDTAB_NONE;
    size_t h = hash(id, t->mask);
    while (t->slots[h]) h = (h + 1) & t->mask;
    t->ids[t->n] = id;
    t->slots[h] = (uint32_t)t->n + 1;
    return (uint32_t)t->n++;
}

size_t ca_idtab_memory(const ca_idtab *t) {
    return t->cap * sizeof *t->ids + (t->slots ? (t->mask + 1) * sizeof *t->slots : 0);
}

void ca_idtab_free(ca_idtab *t) {
    free(t->ids);
    free(t->slots);
    *t = (ca_idtab){0};
}

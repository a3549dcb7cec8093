/* Address ranges kept sorted by base in a growable array: lookups are binary
 * searches, inserts and removals move the tail (a few thousand ranges at most). */
#include <stdlib.h>
#include <string.h>

#include "simgpu/sim.h"

/* Index of the first region whose base is above addr. */
static size_t upper(const struct ca_sim_regions *r, uintptr_t addr)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->v[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct ca_sim_region *ca_sim_regions_find(struct ca_sim_regions *r, uintptr_t addr)
{
    size_t i = upper(r, addr);
    if (i == 0)
        return NULL;
    struct ca_sim_region *c = &r->v[i - 1];
    return addr - c->base < c->size ? c : NULL;
}

/* The region holding addr, else the first one above it; NULL past the end. */
struct ca_sim_region *ca_sim_regions_first_from(struct ca_sim_regions *r, uintptr_t addr)
{
    struct ca_sim_region *c = ca_sim_regions_find(r, addr);
    if (c)
        return c;
    size_t i = upper(r, addr);
    return i < r->n ? &r->v[i] : NULL;
}

int ca_sim_regions_overlap(struct ca_sim_regions *r, uintptr_t base, size_t size)
{
    struct ca_sim_region *c = ca_sim_regions_first_from(r, base);
    return c && c->base < base + size;
}

int ca_sim_regions_insert(struct ca_sim_regions *r, const struct ca_sim_region *reg)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct ca_sim_region *v = realloc(r->v, cap * sizeof *v);
        if (!v)
            return -1;
        r->v = v;
        r->cap = cap;
    }
    size_t i = upper(r, reg->base);
    memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof *r->v);
    r->v[i] = *reg;
    r->n++;
    return 0;
}

void ca_sim_regions_remove(struct ca_sim_regions *r, struct ca_sim_region *reg)
{
    size_t i = (size_t)(reg - r->v);
    memmove(&r->v[i], &r->v[i + 1], (r->n - i - 1) * sizeof *r->v);
    r->n--;
}

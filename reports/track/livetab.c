/* See livetab.h. uthash did this before: its add, find and delete cost about
 * 250 instructions a tracked alloc+free pair, a third of the tracker's own
 * work at a shallow stack (issue 29). */
#include "reports/track/livetab.h"

#include <stdlib.h>

union ca_live_cell {
    live l;
    ca_live_cell *next; /* spare */
};

#define SLAB 1024
struct ca_live_slab {
    ca_live_slab *next;
    ca_live_cell e[SLAB];
};

/* Fibonacci hashing: the top bits of the product, the best mixed. */
static size_t home(const ca_livetab *t, uintptr_t addr) {
    return (size_t)(((uint64_t)addr * 0x9E3779B97F4A7C15ull) >> t->shift);
}

/* The slot of addr, or the empty slot that ends its probe run. */
static size_t probe(const ca_livetab *t, uintptr_t addr) {
    size_t i = home(t, addr);
    while (t->slot[i].e && t->slot[i].addr != addr) i = (i + 1) & t->mask;
    return i;
}

static bool grow(ca_livetab *t) {
    size_t cap = t->slot ? 2 * (t->mask + 1) : 64;
    ca_live_slot *old = t->slot;
    size_t old_cap = old ? t->mask + 1 : 0;
    if (!(t->slot = calloc(cap, sizeof *t->slot))) {
        t->slot = old;
        return false;
    }
    t->mask = cap - 1;
    t->shift = 64 - (unsigned)__builtin_ctzll(cap);
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].e) t->slot[probe(t, old[i].addr)] = old[i];
    free(old);
    return true;
}

static live *entry_new(ca_livetab *t) {
    if (!t->spare) {
        ca_live_slab *s = malloc(sizeof *s);
        if (!s) return NULL;
        s->next = t->slabs;
        t->slabs = s;
        t->n_slabs++;
        for (size_t i = SLAB; i-- > 0;) {
            s->e[i].next = t->spare;
            t->spare = &s->e[i];
        }
    }
    ca_live_cell *c = t->spare;
    t->spare = c->next;
    return &c->l;
}

live *ca_livetab_find(const ca_livetab *t, uintptr_t addr) { return t->slot ? t->slot[probe(t, addr)].e : NULL; }

live *ca_livetab_put(ca_livetab *t, uintptr_t addr, live *replaced, bool *had) {
    size_t i = 0;
    *had = t->slot && t->slot[i = probe(t, addr)].e;
    if (*had) {
        *replaced = *t->slot[i].e;
    } else {
        if (2 * (t->n + 1) > (t->slot ? t->mask + 1 : 0)) {
            if (!grow(t)) return NULL;
            i = probe(t, addr);
        }
        live *e = entry_new(t);
        if (!e) return NULL;
        t->slot[i] = (ca_live_slot){addr, e};
        t->n++;
    }
    t->slot[i].e->addr = addr;
    return t->slot[i].e;
}

bool ca_livetab_take(ca_livetab *t, uintptr_t addr, live *out) {
    if (!t->slot) return false;
    size_t i = probe(t, addr);
    ca_live_cell *c = (ca_live_cell *)t->slot[i].e;
    if (!c) return false;
    *out = c->l;
    c->next = t->spare;
    t->spare = c;
    /* Backward shift: a later slot of the run moves into the hole when the
     * hole lies on its probe path (between its home and where it sits). */
    for (size_t j = (i + 1) & t->mask; t->slot[j].e; j = (j + 1) & t->mask) {
        size_t h = home(t, t->slot[j].addr);
        if (((j - h) & t->mask) >= ((j - i) & t->mask)) {
            t->slot[i] = t->slot[j];
            i = j;
        }
    }
    t->slot[i].e = NULL;
    t->n--;
    return true;
}

live *ca_livetab_next(ca_livetab *t, const live *l) {
    if (!t->slot) return NULL;
    size_t i = l ? probe(t, l->addr) + 1 : 0;
    for (; i <= t->mask; i++)
        if (t->slot[i].e) return t->slot[i].e;
    return NULL;
}

size_t ca_livetab_memory(const ca_livetab *t) {
    return (t->slot ? (t->mask + 1) * sizeof *t->slot : 0) + t->n_slabs * sizeof(ca_live_slab);
}

void ca_livetab_free(ca_livetab *t) {
    free(t->slot);
    while (t->slabs) {
        ca_live_slab *s = t->slabs;
        t->slabs = s->next;
        free(s);
    }
    *t = (ca_livetab){0};
}

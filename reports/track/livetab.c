/* See livetab.h. uthash did this before: its add, find and delete cost about
 * 250 instructions a tracked alloc+free pair, a third of the tracker's own
 * work at a shallow stack (issue 29). */
#include "reports/track/livetab.h"

#include <stdlib.h>

/* Fibonacci hashing: the top bits of the product, the best mixed. */
static size_t home(const ca_livetab *t, uintptr_t addr) {
    return (size_t)(((uint64_t)addr * 0x9E3779B97F4A7C15ull) >> t->shift);
}

/* The slot of addr (nonzero), or the empty slot that ends its probe run. */
static size_t probe(const ca_livetab *t, uintptr_t addr) {
    size_t i = home(t, addr);
    while (t->slot[i].addr && t->slot[i].addr != addr) i = (i + 1) & t->mask;
    return i;
}

static bool grow(ca_livetab *t) {
    size_t cap = t->slot ? 2 * (t->mask + 1) : 64;
    live *old = t->slot;
    size_t old_cap = old ? t->mask + 1 : 0;
    if (!(t->slot = calloc(cap, sizeof *t->slot))) {
        t->slot = old;
        return false;
    }
    t->mask = cap - 1;
    t->shift = 64 - (unsigned)__builtin_ctzll(cap);
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].addr) t->slot[probe(t, old[i].addr)] = old[i];
    free(old);
    return true;
}

live *ca_livetab_find(const ca_livetab *t, uintptr_t addr) {
    if (!addr) return t->has_zero ? (live *)&t->zero : NULL;
    if (!t->slot) return NULL;
    live *l = &t->slot[probe(t, addr)];
    return l->addr ? l : NULL;
}

live *ca_livetab_put(ca_livetab *t, uintptr_t addr, live *replaced, bool *had) {
    live *l = NULL;
    if (!addr) {
        l = &t->zero;
        *had = t->has_zero;
        t->has_zero = true;
    } else {
        if (t->slot) l = &t->slot[probe(t, addr)];
        *had = l && l->addr;
        if (!*had && 2 * (t->n + 1) > (t->slot ? t->mask + 1 : 0)) {
            if (!grow(t)) return NULL;
            l = &t->slot[probe(t, addr)];
        }
    }
    if (*had) *replaced = *l;
    else t->n++;
    l->addr = addr;
    return l;
}

bool ca_livetab_take(ca_livetab *t, uintptr_t addr, live *out) {
    if (!addr) {
        if (!t->has_zero) return false;
        *out = t->zero;
        t->has_zero = false;
        t->n--;
        return true;
    }
    if (!t->slot) return false;
    size_t i = probe(t, addr);
    if (!t->slot[i].addr) return false;
    *out = t->slot[i];
    /* Backward shift: a later entry of the run moves into the hole when the
     * hole lies on its probe path (between its home and where it sits). */
    for (size_t j = (i + 1) & t->mask; t->slot[j].addr; j = (j + 1) & t->mask) {
        size_t h = home(t, t->slot[j].addr);
        if (((j - h) & t->mask) >= ((j - i) & t->mask)) {
            t->slot[i] = t->slot[j];
            i = j;
        }
    }
    t->slot[i].addr = 0;
    t->n--;
    return true;
}

live *ca_livetab_next(ca_livetab *t, const live *l) {
    size_t i = 0;
    if (!l && t->has_zero) return &t->zero;
    if (l && l != &t->zero) i = (size_t)(l - t->slot) + 1;
    for (; t->slot && i <= t->mask; i++)
        if (t->slot[i].addr) return &t->slot[i];
    return NULL;
}

size_t ca_livetab_memory(const ca_livetab *t) { return t->slot ? (t->mask + 1) * sizeof *t->slot : 0; }

void ca_livetab_free(ca_livetab *t) {
    free(t->slot);
    *t = (ca_livetab){0};
}

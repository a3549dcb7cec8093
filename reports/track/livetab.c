/* See livetab.h. uthash did this before: its add, find and delete cost about
 * 250 instructions a tracked alloc+free pair, a third of the tracker's own
 * work at a shallow stack (issue 29). */
#include "reports/track/livetab.h"

#include <stdlib.h>

#include "reports/track/tracker_internal.h" /* GROW */

#define SLAB 1024 /* entries a slab */
#define WORDS (SLAB / 64)
#define MAX_SLABS ((size_t)UINT32_MAX / SLAB) /* an index + 1 fits 32 bits */

typedef union cell {
    live l;
    uint32_t next; /* spare: the next spare's index + 1 */
} cell;

struct ca_live_slab {
    uint64_t used[WORDS];   /* entries in use */
    uint64_t tagged[WORDS]; /* of those, the ones put by tag */
    cell e[SLAB];
};

static inline cell *cell_at(const ca_livetab *t, uint32_t i) { return &t->slabs[i / SLAB]->e[i % SLAB]; }
static inline uint64_t *word(uint64_t *bits, uint32_t i) { return &bits[i % SLAB / 64]; }
static inline uint64_t bit(uint32_t i) { return 1ull << (i % 64); }

/* A free entry, marked in use (and tagged when asked); its index + 1, 0
 * when there is no memory. */
static uint32_t entry_new(ca_livetab *t, bool tagged) {
    if (!t->spare) {
        if (t->n_slabs == MAX_SLABS || GROW(t->slabs, t->cap_slabs, t->n_slabs + 1)) return 0;
        ca_live_slab *s = calloc(1, sizeof *s);
        if (!s) return 0;
        t->slabs[t->n_slabs] = s;
        uint32_t first = (uint32_t)(t->n_slabs++ * SLAB);
        for (uint32_t i = SLAB; i-- > 0;) {
            s->e[i].next = t->spare;
            t->spare = first + i + 1;
        }
    }
    uint32_t i = t->spare - 1;
    ca_live_slab *s = t->slabs[i / SLAB];
    t->spare = s->e[i % SLAB].next;
    *word(s->used, i) |= bit(i);
    if (tagged) *word(s->tagged, i) |= bit(i);
    t->n++;
    return i + 1;
}

static void entry_put_back(ca_livetab *t, uint32_t i) {
    ca_live_slab *s = t->slabs[i / SLAB];
    *word(s->used, i) &= ~bit(i);
    *word(s->tagged, i) &= ~bit(i);
    s->e[i % SLAB].next = t->spare;
    t->spare = i + 1;
    t->n--;
}

/* ---- by address ---- */

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

live *ca_livetab_find(const ca_livetab *t, uintptr_t addr) {
    if (!t->slot) return NULL;
    uint32_t e = t->slot[probe(t, addr)].e;
    return e ? &cell_at(t, e - 1)->l : NULL;
}

live *ca_livetab_put(ca_livetab *t, uintptr_t addr, live *replaced, bool *had) {
    size_t i = 0;
    *had = t->slot && t->slot[i = probe(t, addr)].e;
    if (*had) {
        *replaced = cell_at(t, t->slot[i].e - 1)->l;
    } else {
        if (2 * (t->n_slot + 1) > (t->slot ? t->mask + 1 : 0)) {
            if (!grow(t)) return NULL;
            i = probe(t, addr);
        }
        uint32_t e = entry_new(t, false);
        if (!e) return NULL;
        t->slot[i] = (ca_live_slot){addr, e};
        t->n_slot++;
    }
    live *l = &cell_at(t, t->slot[i].e - 1)->l;
    l->addr = addr;
    return l;
}

bool ca_livetab_take(ca_livetab *t, uintptr_t addr, live *out) {
    if (!t->slot) return false;
    size_t i = probe(t, addr);
    uint32_t e = t->slot[i].e;
    if (!e) return false;
    *out = cell_at(t, e - 1)->l;
    entry_put_back(t, e - 1);
    /* Backward shift: a later slot of the run moves into the hole when the
     * hole lies on its probe path (between its home and where it sits). */
    for (size_t j = (i + 1) & t->mask; t->slot[j].e; j = (j + 1) & t->mask) {
        size_t h = home(t, t->slot[j].addr);
        if (((j - h) & t->mask) >= ((j - i) & t->mask)) {
            t->slot[i] = t->slot[j];
            i = j;
        }
    }
    t->slot[i].e = 0;
    t->n_slot--;
    return true;
}

/* ---- by tag ---- */

live *ca_livetab_put_tagged(ca_livetab *t, uintptr_t addr, uint32_t max_tag, uint32_t *tag) {
    if (!(*tag = entry_new(t, true))) return NULL;
    if (*tag > max_tag) {
        entry_put_back(t, *tag - 1);
        return *tag = 0, NULL;
    }
    live *l = &cell_at(t, *tag - 1)->l;
    l->addr = addr;
    return l;
}

bool ca_livetab_take_tagged(ca_livetab *t, uint32_t tag, uintptr_t addr, live *out) {
    if (!tag || tag - 1 >= t->n_slabs * SLAB) return false;
    uint32_t i = tag - 1;
    ca_live_slab *s = t->slabs[i / SLAB];
    if (!(*word(s->tagged, i) & bit(i)) || s->e[i % SLAB].l.addr != addr) return false;
    *out = s->e[i % SLAB].l;
    entry_put_back(t, i);
    return true;
}

/* ---- both ---- */

live *ca_livetab_next(const ca_livetab *t, size_t *at) {
    for (size_t i = *at; i < t->n_slabs * SLAB;) {
        ca_live_slab *s = t->slabs[i / SLAB];
        uint64_t w = s->used[i % SLAB / 64] & (~0ull << (i % 64));
        if (!w) {
            i = (i | 63) + 1;
            continue;
        }
        i = (i & ~(size_t)63) + (size_t)__builtin_ctzll(w);
        *at = i + 1;
        return &s->e[i % SLAB].l;
    }
    *at = t->n_slabs * SLAB;
    return NULL;
}

size_t ca_livetab_memory(const ca_livetab *t) {
    return (t->slot ? (t->mask + 1) * sizeof *t->slot : 0) + t->n_slabs * sizeof(ca_live_slab) + t->cap_slabs * sizeof *t->slabs;
}

void ca_livetab_free(ca_livetab *t) {
    free(t->slot);
    for (size_t i = 0; i < t->n_slabs; i++) free(t->slabs[i]);
    free(t->slabs);
    *t = (ca_livetab){0};
}

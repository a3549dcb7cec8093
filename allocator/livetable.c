/* The live table's slots: made, doubled, freed, and removal (the look-ups
 * are inline in livetable.h). */
#include <stdlib.h>

#include "internal.h"

/* 8 slots (two cache lines): a pool of one of thousands of streams holds a
 * few blocks, and its table is read on each of its calls (issue 29); it
 * doubles as blocks come. */
#define CA_LIVE_FIRST_SHIFT (64 - 3)

int ca_live_init(ca_live_table *t) {
    t->shift = CA_LIVE_FIRST_SHIFT;
    t->mask = ((size_t)1 << (64 - t->shift)) - 1;
    t->count = t->found = 0;
    t->slots = calloc((size_t)1 << (64 - t->shift), sizeof *t->slots);
    return t->slots ? CA_OK : CA_ERR_OOM;
}

void ca_live_destroy(ca_live_table *t) {
    free(t->slots);
    t->slots = NULL;
}

bool ca_live_grow(ca_live_table *t) {
    size_t n = t->mask + 1;
    ca_live_slot *old = t->slots, *slots = t->shift > 64 - 40 ? calloc(2 * n, sizeof *slots) : NULL;
    if (!slots) return t->count + 1 < n; /* fuller, still correct: one slot stays empty */
    t->slots = slots;
    t->shift--;
    t->mask = 2 * n - 1;
    t->count = 0;
    for (size_t i = 0; i < n; i++)
        if (old[i].addr) ca_live_add(t, old[i].addr, old[i].block);
    free(old);
    return true;
}

void ca_live_shift(ca_live_table *t, size_t i) {
    size_t mask = t->mask;
    /* Shift back the slots after the hole that would no longer be found
     * (their home lies at or before the hole, cyclically), then empty the
     * last one. */
    for (size_t j = (i + 1) & mask; t->slots[j].addr; j = (j + 1) & mask) {
        size_t home = ca_live_slot_of(t, t->slots[j].addr);
        if (((j - home) & mask) < ((j - i) & mask)) continue; /* its home lies after the hole */
        t->slots[i] = t->slots[j];
        i = j;
    }
    t->slots[i] = (ca_live_slot){0, NULL};
}

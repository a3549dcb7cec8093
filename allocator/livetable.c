/* The live table's buckets: made, doubled, freed (the lookups are inline in
 * livetable.h). */
#include <stdlib.h>

#include "internal.h"

/* 8 buckets: a pool of one of thousands of streams holds a few blocks, and
 * its table is read on each of its calls (256 took 2 KiB a pool, each call a
 * cache miss with 4,000 streams: issue 29); it doubles as blocks come */
#define CA_LIVE_FIRST_SHIFT (64 - 3)

int ca_live_init(ca_live_table *t) {
    t->shift = CA_LIVE_FIRST_SHIFT;
    t->count = 0;
    t->buckets = calloc((size_t)1 << (64 - t->shift), sizeof *t->buckets);
    return t->buckets ? CA_OK : CA_ERR_OOM;
}

void ca_live_destroy(ca_live_table *t) {
    free(t->buckets);
    t->buckets = NULL;
}

void ca_live_grow(ca_live_table *t) {
    size_t n = (size_t)1 << (64 - t->shift);
    if (t->shift <= 64 - 40) return; /* 2^40 buckets: more blocks than any device holds */
    ca_block **old = t->buckets, **nb = calloc(2 * n, sizeof *nb);
    if (!nb) return; /* longer chains, still correct */
    t->buckets = nb;
    t->shift--;
    for (size_t i = 0; i < n; i++)
        for (ca_block *b = old[i], *next; b; b = next) {
            next = b->live_next;
            ca_block **head = &nb[ca_live_slot(t, b->addr)];
            b->live_next = *head;
            *head = b;
        }
    free(old);
}

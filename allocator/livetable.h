/* A pool's live table: its allocated blocks by address, for the frees.
 * internal.h includes it where ca_block is complete.
 *
 * Open addressing: slots of (address, block), a power of two of them, linear
 * probing from a multiplicative hash of the address, removal by backward
 * shift (no tombstones). A look-up reads the slot's line and compares
 * addresses there, without touching any block but the one found: the chained
 * table it replaces read a bucket, then each block of the chain, then the
 * found block's second line again to unlink it (2-3 cache misses a free with
 * 100,000 live blocks, issue 29). The table stays at most half full; room is
 * made before a block is taken (ca_live_reserve), so adding never fails.
 * Address 0 marks an empty slot: no block lives there (find_live rejects it). */
#ifndef CA_LIVETABLE_H
#define CA_LIVETABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ca_live_slot {
    uintptr_t addr; /* 0: empty */
    struct ca_block *block;
} ca_live_slot;

typedef struct ca_live_table {
    ca_live_slot *slots;
    size_t mask;      /* slots - 1 */
    unsigned shift;   /* 64 - log2(slots) */
    size_t count;
    size_t found;     /* the slot of the last look-up that found a block: its
                       * removal (the free that follows) starts there */
} ca_live_table;

int ca_live_init(ca_live_table *t);     /* CA_OK or CA_ERR_OOM */
void ca_live_destroy(ca_live_table *t); /* the blocks are not the table's */
/* Room for one more block, growing when half full; false when the table is
 * full and cannot grow (no host memory). */
bool ca_live_grow(ca_live_table *t);

static inline size_t ca_live_slot_of(const ca_live_table *t, uintptr_t addr) {
    /* blocks start on 512 B boundaries: the low bits carry nothing */
    return (size_t)(((uint64_t)(addr >> 9) * 0x9E3779B97F4A7C15ull) >> t->shift);
}

static inline bool ca_live_reserve(ca_live_table *t) {
    return 8 * (t->count + 1) <= 3 * (t->mask + 1) || ca_live_grow(t);
}

static inline struct ca_block *ca_live_find(ca_live_table *t, uintptr_t addr) {
    for (size_t i = ca_live_slot_of(t, addr);; i = (i + 1) & t->mask) {
        const ca_live_slot *s = &t->slots[i];
        if (s->addr == addr) {
            t->found = i;
            return s->block;
        }
        if (!s->addr) return NULL;
    }
}

/* addr not in the table, and room reserved (ca_live_reserve). */
static inline void ca_live_add(ca_live_table *t, uintptr_t addr, struct ca_block *b) {
    size_t i = ca_live_slot_of(t, addr);
    while (t->slots[i].addr) i = (i + 1) & t->mask;
    t->slots[i] = (ca_live_slot){addr, b};
    t->count++;
}

/* Empty slot i, shifting back the ones after it (out of line). */
void ca_live_shift(ca_live_table *t, size_t i);

/* addr must be in the table: usually at the slot of the last look-up, with
 * an empty slot after it. */
static inline void ca_live_remove(ca_live_table *t, uintptr_t addr) {
    size_t i = t->found;
    if (t->slots[i].addr != addr)
        for (i = ca_live_slot_of(t, addr); t->slots[i].addr != addr;) i = (i + 1) & t->mask;
    t->count--;
    if (!t->slots[(i + 1) & t->mask].addr) t->slots[i] = (ca_live_slot){0, NULL};
    else ca_live_shift(t, i);
}

#endif

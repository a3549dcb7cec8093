/* A pool's live table: its allocated blocks by address, for the frees.
 * internal.h includes it where ca_block is complete (the inline calls below
 * read its addr and live_next).
 *
 * Chained, intrusive (one link in the block), a power of two of buckets
 * indexed by a multiplicative hash of the address. It replaces uthash, whose
 * handle was 56 bytes a block and whose add, find and delete cost ~110
 * instructions an allocation+free pair on the albert replay (callgrind); here
 * they are a multiply, a load and a short chain. Growth doubles the buckets
 * when there are more blocks than buckets; when that malloc fails the table
 * keeps working with longer chains, so adding never fails. */
#ifndef CA_LIVETABLE_H
#define CA_LIVETABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ca_live_table {
    struct ca_block **buckets;
    unsigned shift;   /* 64 - log2(buckets) */
    size_t count;
} ca_live_table;

int ca_live_init(ca_live_table *t);     /* CA_OK or CA_ERR_OOM */
void ca_live_destroy(ca_live_table *t); /* the blocks are not the table's */
void ca_live_grow(ca_live_table *t);    /* on add, when count passes the buckets */

static inline size_t ca_live_slot(const ca_live_table *t, uintptr_t addr) {
    /* blocks start on 512 B boundaries: the low bits carry nothing */
    return (size_t)(((uint64_t)(addr >> 9) * 0x9E3779B97F4A7C15ull) >> t->shift);
}

static inline struct ca_block *ca_live_find(const ca_live_table *t, uintptr_t addr) {
    struct ca_block *b = t->buckets[ca_live_slot(t, addr)];
    while (b && b->addr != addr) b = b->live_next;
    return b;
}

static inline void ca_live_add(ca_live_table *t, struct ca_block *b) {
    if (t->count >= ((size_t)1 << (64 - t->shift))) ca_live_grow(t);
    struct ca_block **head = &t->buckets[ca_live_slot(t, b->addr)];
    b->live_next = *head;
    *head = b;
    t->count++;
}

/* b must be in the table. */
static inline void ca_live_remove(ca_live_table *t, struct ca_block *b) {
    struct ca_block **at = &t->buckets[ca_live_slot(t, b->addr)];
    while (*at != b) at = &(*at)->live_next;
    *at = b->live_next;
    t->count--;
}

#endif

/* Block structs come from per-pool slabs: no malloc per allocation on the hot
 * path, and no memory shared between pools. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Slabs grow from 16 blocks to 256: a pool that holds a few blocks (one of
 * thousands of streams) takes 2 KiB of them, not 28 (issue 29). */
#define SLAB_FIRST 16
#define SLAB_BLOCKS 256

bool ca_block_slab(ca_pool *a) {
    if (a->nchunks == a->chunks_cap) {
        size_t cap = a->chunks_cap ? a->chunks_cap * 2 : 16;
        void **chunks = realloc(a->chunks, cap * sizeof *chunks);
        if (!chunks) return false;
        a->chunks = chunks;
        a->chunks_cap = cap;
    }
    size_t n = a->nchunks < 4 ? (size_t)SLAB_FIRST << a->nchunks : SLAB_BLOCKS;
    ca_block *slab = malloc(n * sizeof *slab);
    if (!slab) return false;
    a->chunks[a->nchunks++] = slab;
    for (size_t i = 0; i < n; i++) {
        slab[i].next = a->spare;
        a->spare = &slab[i];
    }
    return true;
}

void ca_block_free_all(ca_pool *a) {
    for (size_t i = 0; i < a->nchunks; i++) free(a->chunks[i]);
    free(a->chunks);
    a->chunks = NULL;
    a->nchunks = a->chunks_cap = 0;
    a->spare = NULL;
}

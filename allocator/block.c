/* Block structs come from per-pool slabs: no malloc per allocation on the hot
 * path, and no memory shared between pools. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SLAB_BLOCKS 256

ca_block *ca_block_new(ca_pool *a) {
    if (!a->spare) {
        if (a->nchunks == a->chunks_cap) {
            size_t cap = a->chunks_cap ? a->chunks_cap * 2 : 16;
            void **chunks = realloc(a->chunks, cap * sizeof *chunks);
            if (!chunks) return NULL;
            a->chunks = chunks;
            a->chunks_cap = cap;
        }
        ca_block *slab = calloc(SLAB_BLOCKS, sizeof *slab);
        if (!slab) return NULL;
        a->chunks[a->nchunks++] = slab;
        for (int i = 0; i < SLAB_BLOCKS; i++) {
            slab[i].next = a->spare;
            a->spare = &slab[i];
        }
    }
    ca_block *b = a->spare;
    a->spare = b->next;
    memset(b, 0, sizeof *b);
    b->bin = -1;
    return b;
}

void ca_block_put(ca_pool *a, ca_block *b) {
    b->next = a->spare;
    a->spare = b;
}

void ca_block_free_all(ca_pool *a) {
    for (size_t i = 0; i < a->nchunks; i++) free(a->chunks[i]);
    free(a->chunks);
    a->chunks = NULL;
    a->nchunks = a->chunks_cap = 0;
    a->spare = NULL;
}

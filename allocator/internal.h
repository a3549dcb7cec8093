/* Internal structures of the allocator core, shared by its files only. */
#ifndef CA_INTERNAL_H
#define CA_INTERNAL_H

#include <stdbool.h>
#include <uthash.h>

#include "allocator.h"
#include "lock.h"

/* Pointer keys: a multiplicative hash of the address beats uthash's default
 * Jenkins hash by a wide margin on the hot path. */
#undef HASH_FUNCTION
#define HASH_FUNCTION(keyptr, keylen, hashv)                                    \
    do {                                                                        \
        uint64_t k_ = (uint64_t)(*(const uintptr_t *)(keyptr)) >> 9;            \
        (hashv) = (unsigned)((k_ * 0x9E3779B97F4A7C15ull) >> 32);               \
    } while (0)
#undef HASH_KEYCMP
#define HASH_KEYCMP(a, b, n) (*(const uintptr_t *)(a) != *(const uintptr_t *)(b))

typedef struct ca_pool ca_pool;
typedef struct ca_segment ca_segment;

/* A block tiles part of a segment; blocks of a segment are in address order. */
typedef struct ca_block {
    uintptr_t addr;
    size_t size;                       /* multiple of CA_ROUND */
    size_t requested;                  /* as asked; 0 while free */
    struct ca_block *prev, *next;      /* address-order neighbours in the segment */
    ca_segment *seg;
    struct ca_block *left, *right, *parent; /* free index (treap) links */
    int32_t bin;                       /* free index bin; -1 when not indexed */
    bool allocated;
    UT_hash_handle hh;                 /* live table, keyed by addr */
} ca_block;

#define CA_BINS 352
#define CA_BIN_WORDS ((CA_BINS + 63) / 64)

/* Free blocks of one pool: best fit (size, then address) in O(log n). Sizes
 * fall in bins (exact below 32 KiB, then 8 per power of two); a bitmap finds
 * the next non-empty bin and a treap per bin orders its blocks. */
typedef struct ca_free_index {
    ca_block *root[CA_BINS];
    uint64_t bitmap[CA_BIN_WORDS];
    size_t count;
} ca_free_index;

struct ca_segment {
    ca_pool *pool;
    uintptr_t base;
    size_t span;          /* bytes tiled by blocks */
    size_t reserve_size;  /* expandable: the whole virtual range */
    size_t mapped;        /* bytes of physical memory behind the range */
    ca_handle *handles;   /* expandable: one per granule of span; 0 = unmapped */
    ca_block *first, *last;
    ca_segment *next;     /* in the pool */
    bool expandable;
};

struct ca_pool {
    ca_stream stream;
    bool small;
    ca_free_index free;
    ca_segment *segments;
};

struct ca_allocator {
    ca_lock lock;
    ca_backend *be;
    ca_options opt;
    size_t granule;
    size_t capacity;          /* device total, from mem_info at creation */
    ca_pool **pools;
    size_t npools, pools_cap;
    ca_pool *last_pool;       /* the pool of the previous request: usually the next too */
    ca_block *live;           /* uthash table of allocated blocks */
    ca_block *spare;          /* recycled block structs */
    void **chunks;            /* block slabs, freed at destroy */
    size_t nchunks, chunks_cap;
    ca_stats stats;
    ca_observer_fn observer;
    void *observer_ctx;
};

/* freeindex.c */
void ca_free_index_insert(ca_free_index *fi, ca_block *b);
void ca_free_index_remove(ca_free_index *fi, ca_block *b);
ca_block *ca_free_index_best_fit(ca_free_index *fi, size_t size);
ca_block *ca_free_index_largest(ca_free_index *fi);
void ca_free_index_walk(ca_free_index *fi, void (*fn)(void *ctx, ca_block *b), void *ctx);

/* block.c: block structs from slabs */
ca_block *ca_block_new(ca_allocator *a);
void ca_block_put(ca_allocator *a, ca_block *b);
void ca_block_free_all(ca_allocator *a);

/* allocator.c: shared steps */
ca_block *ca_split(ca_allocator *a, ca_block *b, size_t size);
void ca_emit(ca_allocator *a, ca_event_kind kind, uintptr_t addr, size_t size, size_t req, ca_stream s);
void ca_pool_sync(ca_allocator *a, ca_pool *p);
static inline int ca_pool_kind(const ca_pool *p) { return p->small ? CA_POOL_SMALL : CA_POOL_LARGE; }

/* expandable.c */
int ca_exp_alloc(ca_allocator *a, ca_pool *p, size_t size, ca_block **out);
size_t ca_exp_release(ca_allocator *a, ca_segment *seg);
void ca_exp_destroy(ca_allocator *a, ca_segment *seg);
size_t ca_exp_mapped_run(const ca_allocator *a, const ca_block *b);
size_t ca_exp_block_mapped(const ca_allocator *a, const ca_block *b);

/* classic.c */
int ca_classic_alloc(ca_allocator *a, ca_pool *p, size_t size, ca_block **out);
size_t ca_classic_release(ca_allocator *a, ca_pool *p);
void ca_classic_destroy(ca_allocator *a, ca_segment *seg);

#endif

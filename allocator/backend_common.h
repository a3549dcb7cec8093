/* What the host and count backends share: the byte accounting that
 * ca_backend_used() reads, a handle table that turns handles into small array
 * indices (so stale or made-up handles are refused in O(1), never followed),
 * and the record of a classic (fixed) allocation. Internal to allocator/. */
#ifndef CA_BACKEND_COMMON_H
#define CA_BACKEND_COMMON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "backend.h"

/* Both backends' `self` starts with this, and their `name` is one of these two
 * strings (compared by address), which is how ca_backend_used() knows it may
 * read it. `used` changes under the backend's lock; readers need no lock. */
typedef struct ca_acct {
    _Atomic size_t used; /* bytes created (handles + fixed allocations) */
    size_t capacity;     /* SIZE_MAX: unlimited */
} ca_acct;
extern const char ca_backend_host_name[];
extern const char ca_backend_count_name[];

static inline size_t ca_acct_used(const ca_acct *a)
{
    return atomic_load_explicit(&a->used, memory_order_relaxed);
}
static inline void ca_acct_add(ca_acct *a, size_t n) /* caller holds the lock */
{
    atomic_store_explicit(&a->used, ca_acct_used(a) + n, memory_order_relaxed);
}
static inline void ca_acct_sub(ca_acct *a, size_t n)
{
    atomic_store_explicit(&a->used, ca_acct_used(a) - n, memory_order_relaxed);
}
/* Would n more bytes still fit under the capacity? */
static inline int ca_acct_fits(const ca_acct *a, size_t n)
{
    return n <= a->capacity - ca_acct_used(a);
}

static inline int ca_is_aligned(uint64_t x, size_t granule)
{
    return (x & (granule - 1)) == 0;
}
/* A size the backends accept for reserve/create/map: nonzero, whole granules. */
static inline int ca_size_ok(size_t size, size_t granule)
{
    return size != 0 && ca_is_aligned(size, granule);
}

/* A piece of the host backend's memfd: [off, off + len). */
typedef struct ca_extent {
    size_t off, len;
} ca_extent;

/* One physical allocation. The count backend only uses size. */
typedef struct ca_hslot {
    size_t size;       /* bytes; 0 while the slot is free */
    uint32_t gen;      /* bumped when freed, so an old handle no longer matches */
    uint32_t next_free;
    uint32_t maps;     /* host: live mappings of this handle */
    uint32_t n_ext;    /* host: pieces of the memfd behind it */
    int released;      /* host: released while mapped; freed at the last unmap */
    ca_extent one;     /* host: the piece when n_ext == 1 */
    ca_extent *ext;    /* host: the pieces when n_ext > 1 (malloc'd) */
} ca_hslot;

/* A handle is (gen << 32) | (index + 1): never 0, and stale once freed. */
typedef struct ca_htable {
    ca_hslot *slot;
    uint32_t n, cap;
    uint32_t free_head; /* index + 1 of the first free slot; 0: none */
} ca_htable;

#define CA_HTABLE_MAX 0x7fffffffu /* the host backend keeps index + 1 in 31 bits */

/* A new live slot with `size`; NULL when out of host memory. */
ca_hslot *ca_htable_add(ca_htable *t, size_t size, ca_handle *h);
/* The live slot of h, or NULL for a handle that is unknown, freed or made up. */
static inline ca_hslot *ca_htable_get(ca_htable *t, ca_handle h)
{
    uint64_t i = (h & 0xffffffffu) - 1;
    if (i >= t->n) return NULL;
    ca_hslot *s = &t->slot[i];
    return s->size && s->gen == (uint32_t)(h >> 32) ? s : NULL;
}
static inline uint32_t ca_htable_index(ca_handle h) { return (uint32_t)(h & 0xffffffffu) - 1; }
/* Forget the slot at index i (its handle becomes stale). */
void ca_htable_del(ca_htable *t, uint32_t i);
void ca_htable_fini(ca_htable *t);

/* A classic segment, so fixed_free can refuse addresses it never gave out. */
typedef struct ca_fixed {
    uintptr_t addr;
    size_t size;   /* as asked */
    size_t charge; /* as counted: size rounded up to the granule */
    UT_hash_handle hh;
} ca_fixed;

static inline size_t ca_round_up(size_t size, size_t granule)
{
    return (size + granule - 1) & ~(granule - 1);
}

#endif

/* Statistics named as PyTorch's CUDA caching allocator names them, so figures
 * compare one to one with torch.cuda.memory_stats(). */
#ifndef CA_STATS_H
#define CA_STATS_H

#include <stdint.h>

typedef struct ca_stat {
    int64_t current, peak, allocated, freed; /* in a pool, freed is not kept: it is
                                              * allocated - current (ca_get_stats) */
} ca_stat;

enum { CA_POOL_ALL, CA_POOL_SMALL, CA_POOL_LARGE, CA_POOL_KINDS };

typedef struct ca_stats {
    ca_stat allocation[CA_POOL_KINDS];      /* live allocations (count) */
    ca_stat segment[CA_POOL_KINDS];         /* segments (count) */
    ca_stat active[CA_POOL_KINDS];          /* allocated, or freed by a plain free and
                                               waiting for the device (count) */
    ca_stat allocated_bytes[CA_POOL_KINDS]; /* rounded sizes of live allocations */
    ca_stat reserved_bytes[CA_POOL_KINDS];  /* physical memory held from the device */
    ca_stat active_bytes[CA_POOL_KINDS];    /* allocated_bytes + bytes waiting for the device */
    ca_stat requested_bytes[CA_POOL_KINDS]; /* sizes as the program asked */
    int64_t num_alloc_retries;
    int64_t num_ooms;
    int64_t num_device_alloc;               /* physical creations (cuMemCreate/cudaMalloc) */
    int64_t num_device_free;
    int64_t num_granules_moved;             /* granules unmapped from free blocks and mapped
                                               again where a request needed memory (no
                                               cuMemCreate/cuMemRelease) */
} ca_stats;

/* Returns 1 when the peak rose. */
static inline int ca_stat_apply(ca_stat *s, int64_t delta) {
    /* current is read by other threads without a lock (device-wide sums) */
    __atomic_store_n(&s->current, s->current + delta, __ATOMIC_RELAXED);
    if (delta > 0) s->allocated += delta;
    if (s->current <= s->peak) return 0;
    s->peak = s->current;
    return 1;
}

/* Apply a change of `delta` to one stat in the ALL pool and in `pool`;
 * returns 1 when either peak rose. */
static inline int ca_stat_update(ca_stat *stat3, int pool, int64_t delta) {
    return ca_stat_apply(&stat3[CA_POOL_ALL], delta) | ca_stat_apply(&stat3[pool], delta);
}

/* The same for a change known to be a rise (an allocation's) or a fall (a
 * free's, which raises no peak): the sign tests go, and a fall is one store
 * a stat (every allocation and free pays these six times). */
static inline int ca_stat_rise(ca_stat *stat3, int pool, int64_t up) {
    int rose = 0;
    for (int k = 0; k < 2; k++) {
        ca_stat *s = &stat3[k ? pool : CA_POOL_ALL];
        int64_t now = s->current + up;
        __atomic_store_n(&s->current, now, __ATOMIC_RELAXED);
        s->allocated += up;
        if (now > s->peak) s->peak = now, rose = 1;
    }
    return rose;
}
static inline void ca_stat_fall(ca_stat *stat3, int pool, int64_t down) {
    __atomic_store_n(&stat3[CA_POOL_ALL].current, stat3[CA_POOL_ALL].current - down, __ATOMIC_RELAXED);
    __atomic_store_n(&stat3[pool].current, stat3[pool].current - down, __ATOMIC_RELAXED);
}
void ca_stats_reset_peaks(ca_stats *s);

#endif

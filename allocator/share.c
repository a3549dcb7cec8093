/* Small blocks of streams that hold little, in one pool (issue 29).
 *
 * A pool maps whole granules (2 MiB, the driver's least for cuMemCreate) and
 * no two pools share one, so a stream that holds one 4 KiB block holds 2 MiB:
 * an inference server with a stream per request, 4,000 of them, reserved
 * 8,000 MiB for 16 MiB of blocks. So a stream whose pool holds no memory gets
 * its requests of up to share_bytes from one pool that all such streams
 * share, while it holds at most share_bytes there. A request that would take
 * it past that, or any larger one, is its own pool's; from then on that pool
 * serves all of the stream's requests (`own`), until it holds no memory again.
 *
 * The shared pool's blocks may next serve any stream, so each free, in any
 * stream's order, waits for a fence as a plain free does (fence.c): a block is
 * reused once the device is past the work queued before its free, on every
 * stream. What a stream of its own pool has and these lose is reuse in stream
 * order (the stream's next request takes the block at once). So a block
 * counts as its stream's until it is free again, its fence passed: a stream
 * that frees faster than fences pass, or holds more, reaches share_bytes and
 * gets its own pool, with reuse in stream order; what the shared pool keeps
 * waiting for fences is at most share_bytes a stream, less than the granule
 * a pool of its own would map.
 *
 * Each block remembers the pool of the stream that asked for it (`owner`: the
 * pool's place in the table and which of its starts, since a pool struct
 * serves stream after stream), so that it comes off that stream's count,
 * whichever stream frees it. */
#include "internal.h"

/* owner: (place in the table + 1) << GEN_BITS | start, modulo 2^GEN_BITS.
 * A pool past 2^20 places shares nothing. */
#define GEN_BITS 12
#define GEN_MASK ((1u << GEN_BITS) - 1)

static uint32_t owner_of(const ca_pool *p) {
    if (p->index + 1 >= (1u << (32 - GEN_BITS))) return 0;
    return (p->index + 1) << GEN_BITS | (__atomic_load_n(&p->gen, __ATOMIC_RELAXED) & GEN_MASK);
}

/* The pool that owner names, if it still serves the same stream. */
static ca_pool *owner_pool(ca_allocator *a, uint32_t owner) {
    ca_pool *const *arr;
    size_t n = ca_pools(a, &arr), i = (owner >> GEN_BITS) - 1;
    if (i >= n) return NULL;
    ca_pool *p = arr[i];
    return (__atomic_load_n(&p->gen, __ATOMIC_RELAXED) & GEN_MASK) == (owner & GEN_MASK) ? p : NULL;
}

ca_pool *ca_share_route(ca_allocator *a, ca_pool *p, size_t rounded, uint32_t *owner) {
    int64_t held = __atomic_load_n(&p->shared_held, __ATOMIC_RELAXED);
    uint32_t o = owner_of(p);
    ca_pool *s;
    if (held < 0 || (size_t)held + rounded > a->share_bytes || !o || !(s = ca_pool_shared(a))) return p;
    *owner = o;
    return s;
}

void ca_share_hold(ca_pool *asker, ca_block *b, uint32_t owner) {
    b->owner = owner;
    __atomic_add_fetch(&asker->shared_held, (int64_t)b->size, __ATOMIC_RELAXED);
}

void ca_share_drop(ca_allocator *a, ca_block *b) {
    ca_pool *p = owner_pool(a, b->owner);
    if (p) __atomic_sub_fetch(&p->shared_held, (int64_t)b->size, __ATOMIC_RELAXED);
    b->owner = 0;
}

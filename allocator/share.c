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
 * So does a stream whose requests found the shared pool's lock held by
 * another thread CA_SHARE_CONTENDED times: threads that allocate at once get
 * locks of their own, as pools per stream gave them.
 *
 * The shared pool's blocks may next serve any stream, so each free, in any
 * stream's order, waits for a fence as a plain free does (fence.c): a block is
 * reused once the device is past the work queued before its free, on every
 * stream. What a stream of its own pool has and these lose is reuse in stream
 * order (the stream's next request takes the block at once). So a block
 * counts as its stream's until it is free again, its fence passed: a stream
 * that frees faster than fences pass, or holds more, reaches share_bytes and
 * gets its own pool, with reuse in stream order; what the shared pool keeps
 * waiting for fences is at most share_bytes a stream, no more than the
 * granule a pool of its own would map.
 *
 * Reuse in stream order is kept for the stream that asked for a block: freed
 * in that stream's order, the block is kept aside, pending, for the stream's
 * next request of its rounded size (the work before the free is before that
 * request in the stream), and the next fence takes what is still kept with
 * it (fence.c). A few blocks per stream, CA_LAZY_BYTES in all: a loop of
 * cudaMallocAsync and cudaFreeAsync on a stream that shares records no fence.
 *
 * Each block remembers the pool of the stream that asked for it (`owner`: the
 * pool's place in the table and which of its starts, since a pool struct
 * serves stream after stream), so that it comes off that stream's count,
 * whichever stream frees it. */
#include <stdlib.h>

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
    ca_pool *s = __atomic_load_n(&a->shared, __ATOMIC_ACQUIRE);
    if (held < 0 || (size_t)held + rounded > a->share_bytes || !o || (!s && !(s = ca_pool_shared(a)))) return p;
    *owner = o;
    return s;
}

void ca_share_lock(ca_pool *p, ca_pool *asker) {
    if (ca_lock_try(&p->lock)) return;
    /* threads that allocate a lot at once share one lock badly: past a few
     * such waits the stream gets a pool, and a lock, of its own */
    uint32_t n = __atomic_add_fetch(&asker->contended, 1, __ATOMIC_RELAXED);
    if (n >= CA_SHARE_CONTENDED) __atomic_store_n(&asker->own, true, __ATOMIC_RELAXED);
    ca_lock_acquire(&p->lock);
}

/* A stream's count changes under the shared pool's lock only (its blocks are
 * that pool's): a plain store, no locked instruction; read without the lock. */
static void count(ca_pool *p, int64_t delta) {
    __atomic_store_n(&p->shared_held, __atomic_load_n(&p->shared_held, __ATOMIC_RELAXED) + delta, __ATOMIC_RELAXED);
}

void ca_share_hold(ca_pool *asker, ca_block *b, uint32_t owner) {
    b->owner = owner;
    count(asker, (int64_t)b->size);
}

void ca_share_drop(ca_allocator *a, ca_block *b) {
    ca_pool *p = owner_pool(a, b->owner);
    if (p) count(p, -(int64_t)b->size);
    b->owner = 0;
}

/* ---- reuse in stream order ---- */

/* A kept block is pending in its pool's figures, but joins the device-wide
 * running totals (allocator/internal.h: `several`) only when it goes to a
 * fence: a keep and a take are then two plain stores each, not four locked
 * adds (a stream-ordered pair through the preload: about 20 ns; BENCHMARKS.md). */
static int kind_of(const ca_block *b) { return b->small ? CA_POOL_SMALL : CA_POOL_LARGE; }

/* b, kept until now, goes to a fence: into the totals. */
static void unkeep(ca_allocator *a, ca_pool *p, ca_block *b) {
    p->n_kept--;
    p->kept_bytes -= b->size;
    ca_pend_totals(a, kind_of(b), 1, (int64_t)b->size);
}

/* Kept blocks by the owner they are kept for: a slot holds one owner's. */
#define KEEP_SLOTS 64
#define KEEP_PER_SLOT 4
struct ca_share_keep {
    struct keep_slot {
        uint32_t owner;
        int n;
        ca_block *head; /* newest first, by pending_next */
    } slot[KEEP_SLOTS];
};

static struct keep_slot *slot_of(ca_pool *p, uint32_t owner) {
    return &p->keep->slot[(owner * 0x9E3779B9u) >> (32 - 6)];
}

/* The blocks of sl after its first `keep` wait for a fence. Detached first:
 * a fence recorded meanwhile takes every kept block (ca_share_take_all). */
static void evict(ca_allocator *a, ca_pool *p, struct keep_slot *sl, int keep) {
    ca_block **link = &sl->head;
    for (int i = 0; i < keep && *link; i++) link = &(*link)->pending_next;
    ca_block *b = *link;
    *link = NULL;
    sl->n = keep < sl->n ? keep : sl->n;
    for (ca_block *next; b; b = next) {
        next = b->pending_next;
        unkeep(a, p, b);
        ca_pending_requeue(a, p, b);
    }
}

bool ca_share_asked_on(ca_allocator *a, const ca_block *b, ca_stream stream) {
    ca_pool *o = owner_pool(a, b->owner);
    return o && __atomic_load_n(&o->key, __ATOMIC_RELAXED) == stream;
}

bool ca_share_keep(ca_allocator *a, ca_pool *p, ca_block *b) {
    if (p->kept_bytes + b->size > CA_LAZY_BYTES) return false;
    if (!p->keep && !(p->keep = calloc(1, sizeof *p->keep))) return false;
    struct keep_slot *sl = slot_of(p, b->owner);
    if (sl->n && sl->owner != b->owner) evict(a, p, sl, 0);
    else if (sl->n >= KEEP_PER_SLOT) evict(a, p, sl, KEEP_PER_SLOT - 1);
    sl->owner = b->owner;
    b->pending = true;
    ca_pend_pool(p, kind_of(b), 1, (int64_t)b->size);
    b->pending_next = sl->head;
    sl->head = b;
    sl->n++;
    p->n_kept++;
    p->kept_bytes += b->size;
    return true;
}

ca_block *ca_share_take(ca_allocator *a, ca_pool *p, uint32_t owner, size_t size) {
    struct keep_slot *sl = slot_of(p, owner);
    if (!sl->n || sl->owner != owner) return NULL;
    for (ca_block **link = &sl->head, *b; (b = *link); link = &b->pending_next)
        if (b->size == size) {
            *link = b->pending_next;
            b->pending_next = NULL;
            b->pending = false;
            sl->n--;
            p->n_kept--;
            p->kept_bytes -= b->size;
            ca_pend_pool(p, kind_of(b), -1, -(int64_t)b->size);
            return b;
        }
    return NULL;
}

ca_block *ca_share_take_all(ca_allocator *a, ca_pool *p) {
    ca_block *all = NULL;
    for (int i = 0; i < KEEP_SLOTS && p->n_kept; i++) {
        struct keep_slot *sl = &p->keep->slot[i];
        for (ca_block *b = sl->head, *next; b; b = next) {
            next = b->pending_next;
            b->pending_next = all;
            all = b;
            unkeep(a, p, b);
        }
        sl->head = NULL;
        sl->n = 0;
    }
    return all;
}

void ca_share_forget(ca_allocator *a, ca_pool *asker) {
    ca_pool *p = __atomic_load_n(&a->shared, __ATOMIC_ACQUIRE);
    uint32_t owner = owner_of(asker);
    if (!p || !owner) return;
    ca_lock_acquire(&p->lock);
    struct keep_slot *sl = p->n_kept ? slot_of(p, owner) : NULL;
    if (sl && sl->n && sl->owner == owner) evict(a, p, sl, 0);
    ca_lock_release(&p->lock);
}

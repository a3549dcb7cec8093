/* The caching allocator core: expandable or classic segments over a backend.
 * One instance per device; thread-safe behind one lock per instance.
 * No CUDA header: see backend.h. */
#ifndef CA_ALLOCATOR_H
#define CA_ALLOCATOR_H

#include "backend.h"
#include "stats.h"

#define CA_ROUND 512u                  /* every block size is a multiple of this */
#define CA_SMALL_LIMIT (1u << 20)      /* requests up to this go to the small pool */
/* The most memory an allocator ever holds, whatever its device says (an
 * unlimited device, the count backend with capacity 0, is this large): no
 * device comes near it (the largest hold a few hundred GiB) and host and GPU
 * address spaces are 47 to 49 bits. Below it, every sum of sizes fits the
 * int64 statistics and every block the tracker's 48-bit records. */
#define CA_MAX_BYTES ((size_t)1 << 47)
/* Default of ca_options.release_after (expandable.c says why this many). */
#define CA_RELEASE_AFTER 10000

/* Default of ca_options.share_bytes: a 2 MiB granule, the least a pool of its
 * own maps. A stream that outgrows the shared pool has put that much there,
 * so its own pool's granules cost no more than they would have alone; at half
 * a granule, a stream holding 1.5 MiB paid 1 MiB shared and a 2 MiB granule
 * (BENCHMARKS.md, issue 29, sixth round). */
#define CA_SHARE_BYTES ((size_t)2 << 20)

typedef struct ca_allocator ca_allocator;

typedef struct ca_options {
    int expandable;            /* 1: expandable segments (default); 0: classic */
    size_t max_reserved;       /* cap on reserved bytes (0: the device's capacity) */
    uint64_t release_after;    /* expandable: every this many allocations of a pool, the
                                * granules it did not need over the last that many go back
                                * to the device (0: never, until an OOM or ca_release);
                                * CA_RELEASE_AFTER by default */
    size_t share_bytes;        /* a stream whose pool holds no memory takes requests of up to
                                * this many bytes from a pool that all such streams share,
                                * while it holds at most this many there (allocator/share.c);
                                * 0: never. CA_SHARE_BYTES by default */
} ca_options;

/* What an out-of-memory failure looked like, for the OOM report. */
typedef struct ca_oom_info {
    size_t requested;      /* bytes asked for */
    size_t device_total;   /* device capacity; 0 offline when not known (then device_free is 0 too) */
    size_t device_free;    /* the device's own free bytes after all retries */
    size_t allocated;      /* bytes in allocated blocks */
    size_t reserved;       /* bytes the allocator holds from the device */
    size_t largest_free;   /* largest free block that is mapped (cached) */
    size_t free_cached;    /* cached free bytes (reserved - allocated) */
    ca_stream stream;
    int device_total_inferred; /* offline: device_total is not recorded but inferred (a
                                  snapshot: what PyTorch reserved + what the driver had free) */
} ca_oom_info;

/* Events the allocator reports to an observer (the tracker in reports/). The
 * observer runs under the allocator's lock: it must be quick and must not call
 * back into the allocator. */
typedef enum {
    CA_EV_ALLOC,       /* addr, size (rounded), requested */
    CA_EV_FREE,        /* addr, size, requested */
    CA_EV_SEGMENT_MAP, /* addr, size: physical memory attached */
    CA_EV_SEGMENT_UNMAP,
    CA_EV_OOM,         /* size = requested */
} ca_event_kind;

typedef struct ca_trace_event {
    ca_event_kind kind;
    uintptr_t addr;
    size_t size;
    size_t requested;
    ca_stream stream;
    /* SEGMENT_MAP/UNMAP of a classic segment: made and released whole (no
     * allocation spans two, however they touch), in the small pool (1) or the
     * large one (2). 0 for expandable segments' granules. */
    uint8_t classic_pool;
    /* ALLOC and FREE from the allocator: a number of CA_TAG_BITS bits kept
     * in the block for the observer, which sets it at the allocation (*tag
     * is 0 then; what the observer leaves there is kept) and reads it at the
     * free (the tracker finds its entry there, not by address). Left as it
     * was while no observer is set: an observer checks what it reads. NULL
     * for other events. */
    uint32_t *tag;
} ca_trace_event;
#define CA_TAG_BITS 24
#define CA_TAG_MAX ((1u << CA_TAG_BITS) - 1)

typedef void (*ca_observer_fn)(void *ctx, const ca_trace_event *ev);

/* The read-only view for reports: every segment, then its blocks in address order. */
/* PENDING: freed by ca_free_device, waiting for the device (active, not allocated). */
typedef enum { CA_BLOCK_FREE, CA_BLOCK_ALLOCATED, CA_BLOCK_PENDING } ca_block_state;
typedef struct ca_segment_view {
    uintptr_t base;        /* first address */
    size_t size;           /* span of the blocks (virtual, for expandable) */
    size_t mapped;         /* bytes of physical memory behind it */
    ca_stream stream;
    int small_pool;        /* 1 small pool, 0 large */
    int expandable;
} ca_segment_view;
typedef struct ca_block_view {
    uintptr_t addr;
    size_t size;
    size_t requested;      /* 0 for free blocks */
    ca_block_state state;
    size_t mapped;         /* bytes of this block with physical memory behind them */
} ca_block_view;
typedef void (*ca_segment_fn)(void *ctx, const ca_segment_view *seg);
typedef void (*ca_block_fn)(void *ctx, const ca_segment_view *seg, const ca_block_view *blk);

void ca_options_default(ca_options *opt);
/* The allocator takes ownership of the backend (destroyed with it). */
int ca_allocator_new(ca_backend *be, const ca_options *opt, ca_allocator **out);
void ca_allocator_destroy(ca_allocator *a);

/* CA_OK with *ptr set; CA_ERR_OOM after every retry failed (then *oom, if not
 * NULL, says why); CA_ERR_INVALID for size 0; CA_ERR_STREAM for a stream the
 * backend does not know (never made, or destroyed; CA_NO_STREAM, all ones,
 * is never one), which gets no pool. A request larger than the device
 * could ever hold (its capacity, max_reserved, CA_MAX_BYTES, in whole
 * granules) fails with CA_ERR_OOM at once: no retry, no backend call, its cost
 * the same whatever its size. Sizes are never rounded past SIZE_MAX. */
int ca_malloc(ca_allocator *a, size_t size, ca_stream stream, void **ptr, ca_oom_info *oom);
/* The same, for an allocation made in a stream's order (cudaMallocAsync):
 * only ca_find_allocation tells the two apart. */
int ca_malloc_ordered(ca_allocator *a, size_t size, ca_stream stream, void **ptr, ca_oom_info *oom);
/* Free ptr in the order of `stream` (cudaFreeAsync): reusable by the pool's
 * stream once that stream has passed the point of the free. CA_ERR_INVALID
 * for a pointer the allocator does not own, or a double free; CA_ERR_STREAM
 * for a stream that is not one: nothing changes. */
int ca_free(ca_allocator *a, void *ptr, ca_stream stream);
/* Free ptr in the order of the whole device (cudaFree): the block is handed
 * out again only after a fence recorded after this call (backend.h) has
 * passed; until then it is pending, counted as active and cached. With
 * device_idle the caller has synchronized the device: reusable at once, as
 * it is on a backend without fences. Errors as ca_free. */
int ca_free_device(ca_allocator *a, void *ptr, int device_idle);
/* The stream was destroyed, or the thread whose per-thread stream it is
 * exited: its pool takes no more allocations (a later stream with the same
 * handle gets a new one), its blocks can still be freed, and once the last
 * is and the device is past the work queued until then, its memory goes
 * back to the device. */
void ca_retire_stream(ca_allocator *a, ca_stream stream);
/* What cudaMemGetInfo says with this allocator on the device, from the
 * driver's own *free_bytes and *total: memory cached here counts as free, and
 * under max_reserved the device is the cap (total) and what it leaves. */
void ca_mem_info(ca_allocator *a, size_t *free_bytes, size_t *total);
/* Is ptr the start of a live allocation of ours? Its requested size if so. */
int ca_owns(ca_allocator *a, const void *ptr, size_t *requested);
/* A live allocation as pointer queries see it (preload/pointer_query.c). */
typedef struct ca_allocation {
    uintptr_t addr;
    size_t requested;      /* bytes asked for: [addr, addr + requested) */
    uint64_t id;           /* unique in the process to this allocation, never reused
                            * for another (registration caches key on it); nonzero */
    int ordered;           /* made by ca_malloc_ordered */
    int expandable;        /* in an expandable segment (else a classic one) */
} ca_allocation;
/* The live allocation holding ptr anywhere in [addr, addr + requested):
 * 1 with *out set, else 0. A pointer at an allocation's start costs a hash
 * lookup; one inside it, in an expandable segment, a walk among the blocks of
 * one granule (the segment's index of block starts), in a classic one a walk
 * of its segment's blocks. */
int ca_find_allocation(ca_allocator *a, const void *ptr, ca_allocation *out);
/* Is ptr inside memory this allocator manages, live or not? (A free of such a
 * pointer that is not live is a double free, not someone else's pointer.) */
int ca_contains(ca_allocator *a, const void *ptr);
/* Give every free physical granule (and free classic segment) back to the
 * device, pending plain frees included (this waits for their fences). */
void ca_release(ca_allocator *a);
/* Wait for every pending plain free: their blocks are free when it returns.
 * Fences the allocator still holds for itself are given back to the backend. */
void ca_wait_pending(ca_allocator *a);

/* The figures now; pending plain frees whose fence has passed are collected
 * first (a non-blocking query), so they count as free, not active. */
void ca_get_stats(ca_allocator *a, ca_stats *out);
void ca_reset_peaks(ca_allocator *a);
/* Largest allocation that would succeed now without new physical memory. */
size_t ca_largest_free(ca_allocator *a);
void ca_set_observer(ca_allocator *a, ca_observer_fn fn, void *ctx);
/* Walk segments and blocks under the lock; callbacks must not call the allocator. */
void ca_visit(ca_allocator *a, ca_segment_fn on_segment, ca_block_fn on_block, void *ctx);
const ca_backend *ca_allocator_backend(const ca_allocator *a);

#endif

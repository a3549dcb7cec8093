/* The allocator's view of a device: virtual ranges, physical granules, fixed
 * allocations, memory info and events. Three backends fit it: host (real memory
 * from mmap + one memfd), count (accounting only) and cuda (driver VMM, in
 * preload/). No CUDA header here: handles, streams and events are integers. */
#ifndef CA_BACKEND_H
#define CA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* Status codes shared by backends and the allocator. */
enum {
    CA_OK = 0,
    CA_ERR_OOM = 1,     /* the device has no memory for this (capacity reached) */
    CA_ERR_INVALID = 2, /* bad argument: unknown pointer, double free, bad size */
    CA_ERR_BACKEND = 3, /* the backend failed for another reason */
    CA_ERR_STREAM = 4,  /* not a live stream (never created, or destroyed) */
};

typedef uint64_t ca_handle; /* a physical memory handle; 0 = none */
typedef uint64_t ca_event;  /* a device event; 0 = none */
typedef uint64_t ca_fence;  /* a point in every stream of the device; 0 = passed */
typedef uintptr_t ca_stream;

typedef struct ca_backend ca_backend;
struct ca_backend {
    const char *name;
    void *self;
    size_t granule; /* physical granule size in bytes, a power of two */

    /* A virtual address range with nothing behind it yet. */
    int (*reserve)(void *self, size_t size, uintptr_t *base);
    int (*unreserve)(void *self, uintptr_t base, size_t size);
    /* Physical memory of `size` bytes (a multiple of granule); CA_ERR_OOM when the
     * device is full. map/unmap attach it to, or detach it from, a reserved range. */
    int (*create)(void *self, size_t size, ca_handle *h);
    int (*release)(void *self, ca_handle h);
    int (*map)(void *self, uintptr_t addr, size_t size, ca_handle h);
    int (*unmap)(void *self, uintptr_t addr, size_t size);
    /* Classic segments: a plain device allocation, as cudaMalloc gives. */
    int (*fixed_alloc)(void *self, size_t size, uintptr_t *addr);
    int (*fixed_free)(void *self, uintptr_t addr, size_t size);
    /* The device's own view: free and total bytes. */
    int (*mem_info)(void *self, size_t *free_bytes, size_t *total_bytes);

    /* Stream order. Each pool serves one stream, so a block freed on that stream
     * is safe to reuse at once; a block freed on another stream makes the pool's
     * stream wait on an event recorded there (stream_wait fails for a stream
     * that cannot be named from the calling thread, another thread's per-thread
     * stream, or one being captured: the block then waits for a fence).
     * Memory is unmapped only after the pool's stream has finished with it:
     * stream_sync's error (it could not wait) leaves it mapped. All NULL when
     * the device finishes work before calls return (host, count). */
    int (*event_record)(void *self, ca_stream stream, ca_event *ev);
    int (*stream_wait)(void *self, ca_stream stream, ca_event ev);
    void (*event_destroy)(void *self, ca_event ev);
    int (*stream_sync)(void *self, ca_stream stream);
    /* Is `stream` a live stream of the device's driver? CA_OK, or CA_ERR_STREAM
     * for a handle that was never a stream or was destroyed. Asked only when a
     * stream gets its pool and for a free in another stream's order, never on
     * the hot path. NULL: every stream is. */
    int (*stream_check)(void *self, ca_stream stream);

    /* Device order, what a plain cudaFree promises: a fence is the point "now"
     * in every stream of the device. fence_record records one and gives 0 when
     * no later work can run before it anyway (every stream orders its later
     * work after it), so that a block waiting for it is reusable at once; an
     * error when no fence can be recorded now (a stream capture is under way,
     * or the device refused): the blocks then stay pending and a later call
     * records one. fence_query never blocks: 1 when the work queued before the
     * fence is done, or the device can run nothing more (a sticky error); 0
     * when not yet, and for any answer that says nothing about that work (a
     * capture or handle error: asked again later). fence_wait blocks until it
     * is done: 1 then, 0 when it could not be waited for (the memory stays
     * busy). All NULL when the device finishes work before calls return
     * (host, count). */
    int (*fence_record)(void *self, ca_fence *f);
    int (*fence_query)(void *self, ca_fence f);
    int (*fence_wait)(void *self, ca_fence f);
    void (*fence_destroy)(void *self, ca_fence f);
    /* A fence that passes only once the work queued before it, on every
     * stream, is done: never merely ordered (fence_record's 0 lets a block be
     * handed out again, not its memory be unmapped, which work still queued
     * would fault on). 0 only when the device was synchronized; errors as
     * fence_record's. Answered and destroyed with fence_query and
     * fence_destroy. NULL when fence_record's fences are always done when
     * they pass (or there are none). */
    int (*fence_record_done)(void *self, ca_fence *f);

    void (*destroy)(ca_backend *be); /* frees the backend itself */
};

/* host: real memory on the host. The range is mmap(PROT_NONE); granules come from
 * one memfd and are mapped with MAP_FIXED; release punches the pages out. */
ca_backend *ca_backend_host_new(size_t capacity, size_t granule);
/* count: addresses and accounting only; no memory is touched. */
ca_backend *ca_backend_count_new(size_t capacity, size_t granule);

/* Bytes of physical memory currently created through a host/count backend. */
size_t ca_backend_used(const ca_backend *be);

#endif

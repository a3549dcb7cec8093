/* simgpu introspection for tests.
 *
 * libcuda.so.1 from simgpu exports these two functions; a test that may run on a
 * real driver looks them up with dlsym and skips its simgpu-only checks when they
 * are absent. This header needs no CUDA header: streams and events are void *.
 */
#ifndef SIMGPU_H
#define SIMGPU_H

#include <stddef.h>
#include <stdint.h>

#define SIMGPU_MAX_DEVICES 8
#define SIMGPU_MAX_WAITS 64
#define SIMGPU_MAX_HOLDS 16

typedef struct simgpu_counters {
    /* Memory: linear allocations (sizes rounded up to 512 B) and cuMemCreate
     * handles, summed over devices; capacity is per device times devices. */
    uint64_t bytes_in_use;
    uint64_t capacity;
    int device_count;
    uint64_t device_bytes_in_use[SIMGPU_MAX_DEVICES];

    /* Successful calls. cuMemFree of a cuMemAllocAsync pointer counts as mem_free. */
    uint64_t mem_alloc;         /* cuMemAlloc_v2 and cuMemAllocPitch_v2 */
    uint64_t mem_free;          /* cuMemFree_v2 */
    uint64_t mem_alloc_async;   /* cuMemAllocAsync */
    uint64_t mem_free_async;    /* cuMemFreeAsync */
    uint64_t mem_create;        /* cuMemCreate */
    uint64_t mem_release;       /* cuMemRelease */
    uint64_t mem_map;           /* cuMemMap */
    uint64_t mem_unmap;         /* cuMemUnmap */
    uint64_t out_of_memory;     /* calls answered CUDA_ERROR_OUT_OF_MEMORY */

    uint64_t event_records;     /* cuEventRecord */
    uint64_t not_ready;         /* event or stream queries answered CUDA_ERROR_NOT_READY */
    uint64_t stream_waits;      /* cuStreamWaitEvent */
    uint64_t event_syncs;       /* cuEventSynchronize */
    uint64_t stream_syncs;      /* cuStreamSynchronize */
    uint64_t ctx_syncs;         /* cuCtxSynchronize (what cudaDeviceSynchronize calls) */
    uint64_t held_waits;        /* synchronizes that ran work held by simgpu_stream_hold: on a GPU,
                                   a wait until it ends (never, if nothing would end it) */
    uint64_t proc_lookups;      /* cuGetProcAddress(_v2) calls */

    /* Stream capture and graphs. */
    uint64_t captures;          /* capture sequences begun */
    uint64_t captures_invalidated;
    uint64_t capture_refusals;  /* calls answered with a capture error (unsafe, implicit, ...) */
    uint64_t graph_allocs;      /* allocation nodes captured (cuMemAllocAsync in a capture) */
    uint64_t graph_launches;    /* cuGraphLaunch calls that ran a graph */
    uint64_t ctx_records;       /* cuCtxRecordEvent */
    uint64_t injected;          /* errors answered because CUDALLOC_SIM_FAIL asked */

    /* The last event each stream was made to wait on, for streams that waited.
     * The legacy default stream shows as NULL, the per-thread one as
     * CU_STREAM_PER_THREAD ((void *)2); the first SIMGPU_MAX_WAITS streams only. */
    int wait_count;
    struct { void *stream; void *event; } last_wait[SIMGPU_MAX_WAITS];

    /* The most each device had in use at once since the process started. */
    uint64_t device_bytes_peak[SIMGPU_MAX_DEVICES];
} simgpu_counters_t;

/* Fills *out; 0 on success, -1 when out is NULL. Works before cuInit (zeros). */
int simgpu_counters(simgpu_counters_t *out);

/* The event `stream` last waited on (NULL if none); the legacy and per-thread
 * handles mean those of the calling thread's current context. 0, or -1 when the
 * stream is unknown. */
int simgpu_stream_last_wait(void *stream, void **event);

/* Hold a stream's work (hold 1) or let it run (hold 0), for tests of code
 * that must not reuse memory a stream may still be using. While a stream is
 * held, work issued to it has not run: an event recorded on it answers
 * CUDA_ERROR_NOT_READY, so does one recorded on the legacy stream while a
 * blocking stream of its context is held (the legacy stream waits for
 * blocking streams), and so does one recorded on any stream made to wait
 * (cuStreamWaitEvent) on such an event. A synchronize that covers an event
 * (the event, its stream, the context) runs that work, as time passing on a
 * GPU would: the event completes, and with it every event recorded behind
 * the same hold before it (a stream's or the context's synchronize: all the
 * held work so far); the hold stays for later work. Each such wait is
 * counted in held_waits: on a GPU it would last until the work ended, and
 * forever behind a hold nobody releases (such a hold is named on stderr at
 * exit). Destroying a held stream leaves its work
 * queued, as on a GPU: its events stay not ready until released (hold 0 with
 * the old handle) or synchronized. 0, or -1 for a stream that is not a live
 * stream (hold 1), not held (hold 0), or when SIMGPU_MAX_HOLDS are held. */
int simgpu_stream_hold(void *stream, int hold);

/* What a kernel on the current context's device reading (write 0) or writing
 * (write 1) [ptr, ptr+size) would meet, as a CUresult: 0, or
 * CUDA_ERROR_ILLEGAL_ADDRESS (700) when that device may not touch it (a VMM
 * mapping without access for it, another device's linear memory without peer
 * access), which poisons the context as a faulting kernel does; or another
 * error for memory the driver never handed out. Tests use it where a program on
 * a GPU would launch a kernel. */
int simgpu_kernel_access(void *ptr, size_t size, int write);

/* What the driver did, as CUPTI's activity records tell it: the CUPTI
 * stand-in (libcupti.so.13 of build/sim) registers the one sink. */
enum { SIMGPU_ACT_ALLOC = 1, SIMGPU_ACT_RELEASE, SIMGPU_ACT_MEMCPY, SIMGPU_ACT_MEMSET };
typedef struct simgpu_activity {
    int kind;         /* SIMGPU_ACT_* */
    int device;
    int pool;         /* memory of the stream-ordered pool (cuMemAllocAsync) */
    uint64_t address; /* allocations and releases; the destination of copies and sets */
    uint64_t bytes;
} simgpu_activity;
void simgpu_activity_sink(void (*sink)(const simgpu_activity *));

#endif

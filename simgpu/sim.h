/* State shared by the files of the simulated driver (libcuda.so.1).
 *
 * One mutex (ca_sim.lock) guards everything below; the API functions take it,
 * the ca_sim_* helpers expect it held unless they say otherwise.
 */
#ifndef CA_SIM_H
#define CA_SIM_H

/* The driver's own build mode: cuda.h then declares every versioned and
 * per-thread entry point under its real name (cuMemAlloc_v2, cuMemcpy_ptds, ...). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uthash.h>

#include "simgpu/simgpu.h"
#include "util/export.h"

#define CA_SIM_GRANULARITY ((size_t)2 << 20) /* cuMemGetAllocationGranularity */
#define CA_SIM_ROUND 512                     /* accounting unit of linear allocations */
#define CA_SIM_PITCH 512                     /* cuMemAllocPitch's rows: what GPUs give */
#define CA_SIM_CTX_STACK 16                  /* cuCtxPushCurrent depth per thread */

struct CUctx_st {
    int device;
    unsigned refcount;          /* cuDevicePrimaryCtxRetain minus releases */
    unsigned flags;
    CUevent legacy_wait;        /* last cuStreamWaitEvent on the legacy stream */
    CUevent ptds_wait;          /* ... and on the per-thread stream */
    CUstream legacy_behind;     /* the held stream the legacy stream waits behind */
    CUstream ptds_behind;       /* ... and the per-thread streams */
};

struct CUstream_st {
    void *self;                 /* hash key: the handle */
    struct CUctx_st *ctx;
    unsigned flags;
    CUevent last_wait;
    CUstream behind;            /* a held stream it waits behind (stream_hold.c) */
    UT_hash_handle hh;
};

struct CUevent_st {
    void *self;                 /* hash key: the handle */
    struct CUctx_st *ctx;
    unsigned flags;
    int recorded;
    unsigned late_left;         /* queries still to answer CUDA_ERROR_NOT_READY */
    CUstream held_by;           /* behind the work of this held stream: not ready */
    CUstream stream;            /* where it was recorded: a handle, NULL = legacy */
    pthread_t thread;           /* recording thread, for the per-thread stream */
    uint64_t ns;                /* CLOCK_MONOTONIC at record */
    UT_hash_handle hh;
};

/* A physical allocation from cuMemCreate: a range of the process's memfd. */
struct ca_sim_phys {
    unsigned long long handle;
    off_t off;
    size_t size;
    unsigned refs;              /* cuMemCreate + cuMemRetainAllocationHandle - cuMemRelease */
    unsigned maps;              /* live cuMemMap mappings */
    CUmemAllocationProp prop;
    UT_hash_handle hh;
};

enum ca_sim_kind { CA_SIM_LINEAR, CA_SIM_POOL, CA_SIM_HOST, CA_SIM_MAPPING, CA_SIM_RESERVED };

/* A range of addresses the driver handed out. */
struct ca_sim_region {
    uintptr_t base;
    size_t size;
    enum ca_sim_kind kind;
    int device;
    struct CUctx_st *ctx;       /* owner; NULL for VMM and pool memory */
    unsigned long long id;      /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
    size_t charged;             /* bytes counted against the capacity */
    struct ca_sim_phys *phys;   /* mappings: backing allocation, offset, protection */
    size_t phys_off;
    int prot;
};

/* Regions sorted by base, no overlaps. */
struct ca_sim_regions {
    struct ca_sim_region *v;
    size_t n, cap;
};

struct ca_sim_device {
    struct CUctx_st primary;
    uint64_t used;
    uint64_t peak;              /* the most `used` has been */
};

struct ca_sim {
    pthread_mutex_t lock;
    int initialized;            /* read with __atomic: set once, under the lock */
    int ndev;
    uint64_t capacity;          /* per device */
    unsigned late_events;
    struct ca_sim_device dev[SIMGPU_MAX_DEVICES];
    struct ca_sim_regions mem;  /* linear, pool, host allocations and VMM mappings */
    struct ca_sim_regions resv; /* cuMemAddressReserve ranges */
    struct CUstream_st *streams;
    struct CUevent_st *events;
    struct ca_sim_hold {        /* held streams (stream_hold.c); handles outlive streams */
        CUstream handle;
        struct CUctx_st *ctx;
        unsigned flags;
    } holds[SIMGPU_MAX_HOLDS];
    int nholds;
    struct ca_sim_phys *phys;
    unsigned long long next_id;
    simgpu_counters_t n;        /* call counters; byte figures are filled on read */
};

extern struct ca_sim ca_sim;

void ca_sim_lock(void);
void ca_sim_unlock(void);

/* CUDA_ERROR_NOT_INITIALIZED before a successful cuInit. Lock not needed. */
CUresult ca_sim_check_init(void);
/* The calling thread's current context, or CUDA_ERROR_INVALID_CONTEXT. */
CUresult ca_sim_current(struct CUctx_st **ctx);
struct CUctx_st *ca_sim_current_or_null(void);

/* Environment, read once by cuInit: 0, or -1 after printing what is wrong. */
int ca_sim_read_env(void);

/* Capacity accounting per device: 0, or -1 when the device is full. */
int ca_sim_charge(int dev, size_t bytes);
void ca_sim_uncharge(int dev, size_t bytes);

int ca_sim_regions_insert(struct ca_sim_regions *r, const struct ca_sim_region *reg);
struct ca_sim_region *ca_sim_regions_find(struct ca_sim_regions *r, uintptr_t addr);
struct ca_sim_region *ca_sim_regions_first_from(struct ca_sim_regions *r, uintptr_t addr);
void ca_sim_regions_remove(struct ca_sim_regions *r, struct ca_sim_region *reg);
int ca_sim_regions_overlap(struct ca_sim_regions *r, uintptr_t base, size_t size);

/* Memory [p, p+n) the driver handed out with `prot` (PROT_READ, PROT_WRITE)
 * access, else CUDA_ERROR_INVALID_VALUE. Addresses it does not know are taken
 * for host memory when host_ok is set. */
CUresult ca_sim_check_range(uintptr_t p, size_t n, int host_ok, int prot);

/* Linear allocations (driver_mem.c), also used by the context reset. */
void ca_sim_linear_unmap(struct ca_sim_region *reg);

/* The memfd behind cuMemCreate (physmem.c). */
int ca_sim_phys_fd(void);
int ca_sim_phys_alloc(size_t size, off_t *off);
void ca_sim_phys_free(off_t off, size_t size);
void ca_sim_phys_after_fork(void);
int ca_sim_phys_settle(void);

/* Streams (driver_stream.c). A stream argument resolved: its context, the
 * handle events remember (NULL for the legacy stream), and flags. */
struct ca_sim_stream_ref {
    struct CUctx_st *ctx;
    CUstream handle;
    struct CUstream_st *obj;    /* NULL for the legacy and per-thread streams */
};
CUresult ca_sim_stream_resolve(CUstream s, struct ca_sim_stream_ref *out);
void ca_sim_streams_drop_ctx(struct CUctx_st *ctx);

/* Held streams (stream_hold.c). The held stream an event recorded on `ref`
 * now is behind, or NULL; a stream made to wait on an event behind a held
 * stream is behind it too; dropping a context drops its holds. */
CUstream ca_sim_hold_for_record(const struct ca_sim_stream_ref *ref);
void ca_sim_hold_wait(const struct ca_sim_stream_ref *ref, CUstream held);
void ca_sim_hold_clear_stream(const struct ca_sim_stream_ref *ref);
void ca_sim_holds_drop_ctx(struct CUctx_st *ctx);

/* Events (driver_events.c). */
void ca_sim_events_complete_stream(const struct ca_sim_stream_ref *ref);
void ca_sim_events_complete_ctx(struct CUctx_st *ctx);
int ca_sim_events_pending_query(const struct ca_sim_stream_ref *ref);
void ca_sim_events_drop_ctx(struct CUctx_st *ctx);
struct CUevent_st *ca_sim_find_event(CUevent e);
struct CUstream_st *ca_sim_find_stream(CUstream s);

/* Per-thread variants answer CU_STREAM_PER_THREAD for the NULL stream. */
static inline CUstream ca_sim_ptsz(CUstream s)
{
    return s ? s : CU_STREAM_PER_THREAD;
}

#endif

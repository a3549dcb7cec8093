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
#define CA_SIM_MAX_PEERS 8                   /* contexts one context may reach (CUDA_ERROR_TOO_MANY_PEERS) */
#define CA_SIM_MAX_CTXS 64                   /* cuCtxCreate contexts alive at once */

struct CUctx_st {
    int device;
    unsigned refcount;          /* primary: cuDevicePrimaryCtxRetain minus releases;
                                 * created: 1 until cuCtxDestroy */
    unsigned flags;
    int created;                /* made by cuCtxCreate, not a device's primary context */
    CUresult sticky;            /* a fault poisoned it (driver_peer.c): every call answers this */
    struct CUctx_st *peers[CA_SIM_MAX_PEERS]; /* contexts whose memory it reaches directly */
    int npeers;                 /* (cuCtxEnablePeerAccess) */
    struct CUctx_st *dead_next; /* destroyed, kept (handles may linger): ca_sim.dead_ctxs */
    CUevent legacy_wait;        /* last cuStreamWaitEvent on the legacy stream */
    CUevent ptds_wait;          /* ... and on the per-thread stream */
    CUstream legacy_behind;     /* the held stream the legacy stream waits behind */
    CUstream ptds_behind;       /* ... and the per-thread streams */
};

/* A stream's part in a capture sequence (capture.c): the sequence it is in,
 * and the nodes the next one captured in it depends on. */
struct ca_sim_cstate {
    struct ca_sim_capture *cap;         /* NULL: not capturing */
    struct CUctx_st *ctx;
    CUstream handle;                    /* the stream, as events remember it */
    int blocking;                       /* not CU_STREAM_NON_BLOCKING: the legacy stream waits for it */
    struct CUgraphNode_st **deps;
    size_t ndeps, deps_cap;
    CUgraphEdgeData *edges;             /* zeros, ndeps of them, for cuStreamGetCaptureInfo */
    struct ca_sim_cstate *next_member;  /* the capture's member list */
};

struct CUstream_st {
    void *self;                 /* hash key: the handle */
    struct CUctx_st *ctx;
    unsigned flags;
    CUevent last_wait;
    CUstream behind;            /* a held stream it waits behind (stream_hold.c) */
    struct ca_sim_cstate cs;    /* capture state */
    UT_hash_handle hh;
};

struct CUevent_st {
    void *self;                 /* hash key: the handle */
    struct CUctx_st *ctx;
    unsigned flags;
    int recorded;
    unsigned late_left;         /* queries still to answer CUDA_ERROR_NOT_READY */
    CUstream held_by;           /* behind the work of this held stream: not ready */
    CUstream stream;            /* where it was recorded: a handle, NULL = legacy, or: */
#define CA_SIM_WHOLE_CONTEXT ((CUstream)3) /* every stream of its context (cuCtxRecordEvent) */
    pthread_t thread;           /* recording thread, for the per-thread stream */
    uint64_t ns;                /* CLOCK_MONOTONIC at record */
    unsigned long long seq;     /* order of records, process-wide (ca_sim.records) */
    unsigned long long captured; /* id of the capture it was last recorded in; 0: none */
    struct CUgraphNode_st **deps; /* ... and the nodes it stands for there */
    size_t ndeps;
    UT_hash_handle hh;
};

/* A physical allocation from cuMemCreate: a range of the process's memfd. */
struct ca_sim_phys {
    unsigned long long handle;
    off_t off;                  /* in the process's memfd, unless it has one of its own: */
    int own_fd;                 /* exported or imported (driver_ipc.c): its own memfd; -1: none */
    int imported;               /* from cuMemImportFromShareableHandle: another process's memory */
    size_t size;
    unsigned refs;              /* cuMemCreate + cuMemRetainAllocationHandle - cuMemRelease */
    unsigned maps;              /* live cuMemMap mappings */
    CUmemAllocationProp prop;
    UT_hash_handle hh;
};

enum ca_sim_kind { CA_SIM_LINEAR, CA_SIM_POOL, CA_SIM_HOST, CA_SIM_MAPPING, CA_SIM_RESERVED, CA_SIM_IMPORTED, CA_SIM_GRAPH };

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
    int prot;                   /* the host's: the union of every device's access */
    unsigned char access[SIMGPU_MAX_DEVICES]; /* mappings: CUmemAccess_flags per device */
    int ipc_fd;                 /* linear memory exported for IPC, or imported: its memfd; -1: none */
    unsigned ipc_refs;          /* imported: cuIpcOpenMemHandle minus cuIpcCloseMemHandle */
    int managed;                /* linear memory from cuMemAllocManaged */
    int ipc_pid;                /* imported: the exporter, and its allocation's id */
    unsigned long long ipc_id;
    struct ca_sim_gmem *gmem;   /* graph allocations: the allocation node's memory */
};

/* Regions sorted by base, no overlaps. */
struct ca_sim_regions {
    struct ca_sim_region *v;
    size_t n, cap;
};

struct ca_sim_device {
    struct CUctx_st primary;
    char mempool;               /* its address is the device's memory pool (cuDeviceGetMemPool) */
    uint64_t used;
    uint64_t peak;              /* the most `used` has been */
};

struct ca_sim {
    pthread_mutex_t lock;
    int initialized;            /* read with __atomic: set once, under the lock */
    int ndev;
    uint64_t capacity;          /* per device */
    int vmm;                    /* the devices support VMM (CUDALLOC_SIM_VMM): 0 no, 1 yes, */
#define CA_SIM_VMM_NO_FD 2          /* or without shareable (POSIX fd) handles */
    unsigned late_events;
    struct ca_sim_device dev[SIMGPU_MAX_DEVICES];
    struct ca_sim_regions mem;  /* linear, pool, host allocations and VMM mappings */
    struct ca_sim_regions resv; /* cuMemAddressReserve ranges */
    struct CUctx_st *ctxs[CA_SIM_MAX_CTXS]; /* alive cuCtxCreate contexts */
    struct CUctx_st *dead_ctxs;
    struct CUstream_st *streams;
    struct CUevent_st *events;
    struct ca_sim_hold {        /* held streams (stream_hold.c); handles outlive streams */
        CUstream handle;
        struct CUctx_st *ctx;
        unsigned flags;
        int waited;             /* a synchronize ran its work: said at exit if never released */
    } holds[SIMGPU_MAX_HOLDS];
    int nholds;
    struct ca_sim_phys *phys;
    unsigned long long next_id;
    struct ca_sim_capture *captures;    /* capture sequences under way (capture.c) */
    struct CUgraph_st *graphs;          /* graphs and executable graphs (graph.c) */
    struct CUgraphExec_st *execs;
    unsigned long long next_capture_id;
    unsigned long long records; /* events recorded so far: their order */
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
/* The version the driver claims (CUDALLOC_SIM_DRIVER_VERSION, else 13000). */
int ca_sim_driver_version(void);

/* Injected errors (inject.c, CUDALLOC_SIM_FAIL): the error `call` answers
 * now, or CUDA_SUCCESS; a sticky error once injected answers every call. */
int ca_sim_read_fail(const char *spec);
CUresult ca_sim_inject(const char *call);
CUresult ca_sim_sticky(void);
#define CA_SIM_FAIL(call)                        \
    do {                                         \
        CUresult fail_ = ca_sim_inject(call);    \
        if (fail_ != CUDA_SUCCESS)               \
            return fail_;                        \
    } while (0)

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

/* Contexts (driver_ctx.c): a context handle that is alive, primary or created. */
int ca_sim_ctx_valid(CUcontext ctx);

/* Which device touches memory, and whether it may (driver_peer.c). The device
 * of context `ctx` runs an operation touching [p, p+n) with access `prot`
 * (PROT_READ, PROT_WRITE): as a copy (`kernel` 0; memory of another device is
 * reached directly only with peer access, else the copy is staged and that
 * device touches its own memory) or as a kernel (`kernel` 1; another device's
 * memory needs peer access). A VMM mapping touched by a device without that
 * access, or linear memory a kernel cannot reach, is CUDA_ERROR_ILLEGAL_ADDRESS
 * and poisons ctx (sticky). */
CUresult ca_sim_touch(struct CUctx_st *ctx, uintptr_t p, size_t n, int prot, int kernel);
/* Peer access from and to ctx goes (its destruction or reset). */
void ca_sim_peers_drop_ctx(struct CUctx_st *ctx);

/* Activity for the CUPTI stand-in (counters.c): called without the lock. */
void ca_sim_activity(int kind, int device, int pool, uintptr_t address, size_t bytes);

/* The one memory pool of a device: the default, and the current (driver_device.c). */
CUmemoryPool ca_sim_mempool(int device);

/* Linear allocations (driver_mem.c), also used by the context reset. */
void ca_sim_linear_unmap(struct ca_sim_region *reg);

/* VMM (driver_vmm.c): the check every VMM call starts with (lock held), its
 * handles, and a handle's end once released and unmapped everywhere. */
CUresult ca_sim_vmm_enter(void);
struct ca_sim_phys *ca_sim_find_phys(CUmemGenericAllocationHandle handle);
void ca_sim_phys_maybe_destroy(struct ca_sim_phys *ph);

/* IPC (driver_ipc.c): a mapping's memory (a range of the memfd below, or a
 * memfd of its own), and the cleanup of an exported or imported region. */
int ca_sim_phys_fd_of(const struct ca_sim_phys *ph, off_t *off);
void ca_sim_ipc_forget(struct ca_sim_region *reg);

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
CUstream ca_sim_hold_for_context(struct CUctx_st *ctx);
void ca_sim_hold_wait(const struct ca_sim_stream_ref *ref, CUstream held);
void ca_sim_hold_clear_stream(const struct ca_sim_stream_ref *ref);
void ca_sim_holds_drop_ctx(struct CUctx_st *ctx);
/* A synchronize needs the work behind a held stream up to the event recorded
 * `upto` (CA_SIM_ALL_WORK: all of it), or behind every held stream of ctx: it
 * runs, as a GPU would in time. Whether any did (the caller counts the wait
 * in held_waits). */
#define CA_SIM_ALL_WORK (~0ULL)
int ca_sim_hold_run(CUstream held, unsigned long long upto);
int ca_sim_holds_run_ctx(struct CUctx_st *ctx);

/* Events (driver_events.c). */
void ca_sim_events_complete_stream(const struct ca_sim_stream_ref *ref);
void ca_sim_events_complete_ctx(struct CUctx_st *ctx);
int ca_sim_events_pending_query(const struct ca_sim_stream_ref *ref);
void ca_sim_events_drop_ctx(struct CUctx_st *ctx);
struct CUevent_st *ca_sim_find_event(CUevent e);
struct CUstream_st *ca_sim_find_stream(CUstream s);
/* What cuEventRecord and cuStreamWaitEvent do to work that runs (not captured). */
void ca_sim_event_record_now(struct CUevent_st *e, const struct ca_sim_stream_ref *ref);
void ca_sim_stream_wait_now(const struct ca_sim_stream_ref *ref, struct CUevent_st *e);

/* ---- stream capture (capture.c) ----
 * A capture sequence: begun on one stream, joined by the streams that wait
 * on its events, ended on the stream that began it. */
struct ca_sim_capture {
    unsigned long long id;
    struct CUgraph_st *graph;
    CUstreamCaptureMode mode;
    pthread_t thread;                   /* the thread that began it */
    struct ca_sim_cstate *origin;
    struct ca_sim_cstate *members;      /* origin included */
    int invalidated;
    struct ca_sim_capture *next;
};

/* The capture state of a stream, NULL for the legacy stream. */
struct ca_sim_cstate *ca_sim_cstate_of(const struct ca_sim_stream_ref *ref);
/* A potentially unsafe call (cuThreadExchangeStreamCaptureMode): CUDA_SUCCESS,
 * or CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED after invalidating the captures
 * that prohibit the calling thread. */
CUresult ca_sim_capture_unsafe(void);
/* Work issued to a stream: *cs NULL when it runs now, the stream's capture
 * state when it is captured instead; or the error CUDA gives (the legacy
 * stream while a blocking stream of its context captures, a stream whose
 * capture was invalidated). */
CUresult ca_sim_capture_issue(const struct ca_sim_stream_ref *ref, struct ca_sim_cstate **cs);
/* A query or synchronize of a stream, and of a context: the checks that
 * come before it (an unsafe call that may also conflict with a capture). */
CUresult ca_sim_capture_sync_stream(const struct ca_sim_stream_ref *ref);
CUresult ca_sim_capture_sync_ctx(struct CUctx_st *ctx);
/* A query or synchronize of an event: CUDA_ERROR_CAPTURED_EVENT for one last
 * recorded in a capture, then the unsafe-call rule. */
CUresult ca_sim_capture_sync_event(struct CUevent_st *e);
/* Record e on a capturing stream, or wait on e from a stream (capture or not):
 * what capture makes of them. *done set when capture handled it. */
CUresult ca_sim_capture_record(struct CUevent_st *e, struct ca_sim_cstate *cs);
CUresult ca_sim_capture_wait(const struct ca_sim_stream_ref *ref, struct CUevent_st *e, unsigned flags,
                             int *done);
/* Invalidate a capture (an illegal operation during it): its streams answer
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED until cuStreamEndCapture. */
void ca_sim_capture_invalidate(struct ca_sim_capture *c);
struct ca_sim_capture *ca_sim_capture_find(unsigned long long id);
/* A stream that goes, and a context that goes, leave their captures. */
void ca_sim_capture_stream_gone(struct ca_sim_cstate *cs);
void ca_sim_captures_drop_ctx(struct CUctx_st *ctx);
/* Whether a stream of ctx captures (for cuCtxRecordEvent); NULL ctx: any. */
int ca_sim_ctx_capturing(struct CUctx_st *ctx, int invalidate);

/* ---- graphs (graph.c, graph_mem.c) ---- */
struct CUgraphNode_st {
    struct CUgraph_st *graph;
    CUgraphNodeType type;
    struct CUgraphNode_st **deps;
    size_t ndeps;
    union {
        struct { uintptr_t dst; unsigned value; size_t width, n; } set;
        struct { uintptr_t dst, src; size_t n; } copy;
        CUevent event;
        struct ca_sim_gmem *mem;        /* allocation and free nodes */
    } u;
};

struct CUgraph_st {
    void *self;                         /* hash key */
    struct CUctx_st *ctx;
    struct CUgraphNode_st **nodes;
    size_t n, cap;
    unsigned refs;                      /* the user's handle + executable graphs */
    int destroyed;                      /* cuGraphDestroy was called */
    int mem_nodes;                      /* has allocation or free nodes */
    unsigned execs;                     /* live executable graphs */
    UT_hash_handle hh;
};

struct CUgraphExec_st {
    void *self;
    struct CUgraph_st *graph;
    size_t n;                           /* the graph's nodes when instantiated */
    unsigned long long flags;
    UT_hash_handle hh;
};

/* Memory of a graph allocation node: its address is fixed for the graph's
 * life; it is backed and counted while allocated (from the node's launch to
 * its free). */
struct ca_sim_gmem {
    uintptr_t base;
    size_t size;
    int device;
    int live;                           /* allocated now */
    struct CUgraph_st *owner;           /* NULL once the graph is gone */
    int freed_in_graph;                 /* a free node exists for it */
};

/* A node appended to the capture of cs, depending on its current nodes. */
struct CUgraphNode_st *ca_sim_graph_capture_node(struct ca_sim_cstate *cs, CUgraphNodeType type);
struct CUgraph_st *ca_sim_graph_new(struct CUctx_st *ctx);
void ca_sim_graph_release(struct CUgraph_st *g);
struct CUgraph_st *ca_sim_find_graph(CUgraph g);
void ca_sim_graphs_drop_ctx(struct CUctx_st *ctx);
/* Graph memory (graph_mem.c). */
CUresult ca_sim_gmem_reserve(struct ca_sim_cstate *cs, size_t size, uintptr_t *out);
CUresult ca_sim_gmem_capture_free(struct ca_sim_cstate *cs, uintptr_t p);
CUresult ca_sim_gmem_alloc(struct ca_sim_gmem *m);
void ca_sim_gmem_free(struct ca_sim_gmem *m);
void ca_sim_gmem_orphan(struct ca_sim_gmem *m);
/* Frees the graph allocation at p (cuMemFree, cuMemFreeAsync outside a
 * capture): 1 when p is one, with *r the answer; 0 when it is not. */
int ca_sim_gmem_free_at(uintptr_t p, CUresult *r);
void ca_sim_gmem_drop_device(int device);

/* Per-thread variants answer CU_STREAM_PER_THREAD for the NULL stream. */
static inline CUstream ca_sim_ptsz(CUstream s)
{
    return s ? s : CU_STREAM_PER_THREAD;
}

#endif

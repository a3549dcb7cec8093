/* Shared declarations of the preload (libcudalloc.so). The only layer with
 * symbol interposition and dlsym tricks; it owns one allocator per device. */
#ifndef CA_PRELOAD_H
#define CA_PRELOAD_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#undef cuGetProcAddress /* we define both the old and the _v2 entry */
#include <stddef.h>

#include "allocator/allocator.h"
#include "reports/write/report.h"
#include "reports/track/tracker.h"
#include "util/export.h"

/* A sanitizer's runtime, loaded first, looks up the functions it intercepts
 * with dlsym (ours) while it starts, before its shadow memory exists: the code
 * on that path (hooks_dl.c, real.c) must not be instrumented to touch it,
 * nor call libc functions the runtime wraps (strcmp, memcmp). */
#define CA_NO_SANITIZE __attribute__((no_sanitize_address, no_sanitize_thread))

/* ---- real.c: the functions we stand in front of ---- */
void *ca_real_dlsym(void *handle, const char *name);
void *ca_real_dlvsym(void *handle, const char *name, const char *version);
/* In a function: real_NAME, the next definition of NAME (cudart's), looked up
 * once; threads racing to look it up store the same pointer (atomically: the
 * race is then no data race). NULL where there is none. */
#define CA_REAL(name)                                                                      \
    static __typeof__(&name) real_##name##_found;                                          \
    __typeof__(&name) real_##name = __atomic_load_n(&real_##name##_found, __ATOMIC_ACQUIRE); \
    if (!real_##name) {                                                                    \
        real_##name = (__typeof__(&name))ca_real_symbol(#name);                            \
        __atomic_store_n(&real_##name##_found, real_##name, __ATOMIC_RELEASE);             \
    }
/* The real `name` behind one of our hooks: dlsym(RTLD_NEXT), else the first
 * object after ours in load order that defines it. RTLD_NEXT searches only the
 * global scope: a libcudart loaded RTLD_LOCAL (ctypes.CDLL's default, a
 * Python extension's dependency) is not in it, yet the program's calls reach
 * our hooks all the same. NULL when no object defines it. */
void *ca_real_symbol(const char *name);
/* dlsym(RTLD_NEXT, name) (dlvsym: in that version) as seen from the object
 * containing `caller`, for names that are no TLS variable. */
void *ca_next_symbol(const void *caller, const char *name, const char *version);
/* glibc's dlsym and dlvsym, where hooks_dl.c's jump; found by ca_find_real_dl. */
extern void *ca_glibc_dlsym, *ca_glibc_dlvsym;
void ca_find_real_dl(void);
/* hooks_dl.c: dlsym/dlvsym of a driver name (cu and a capital). */
void *ca_dlsym_driver(void *handle, const char *name);
void *ca_dlvsym_driver(void *handle, const char *name, const char *version);
/* hooks_driver.c: our function standing for a real driver function, or NULL:
 * by its name where it was found in libcuda (dlsym; never loads the driver).
 * cuGetProcAddress's answers are swapped by symbol, version and flags. */
void *ca_hook_for_driver_name(const char *name, void *real);
/* A driver function we stand in for: its entry's name, where ca_driver keeps
 * the driver's address, and ours. Beside hooks_driver.c's own table, the
 * pointer queries' and the other allocators' (pointer_query.c, others.c). */
typedef struct ca_swap {
    const char *name;
    size_t field;
    void *ours;
} ca_swap;
#define CA_SWAP(entry, ours) {#entry, offsetof(ca_driver, entry), (void *)ours}
extern const ca_swap ca_query_swaps[];
extern const size_t ca_query_nswaps;

/* The real driver, from libcuda.so.1, looked up by its exact entry names. */
typedef struct ca_driver {
    bool loaded;
    CUresult (*cuGetProcAddress_v2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    CUresult (*cuGetProcAddress)(const char *, void **, int, cuuint64_t);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuCtxPushCurrent_v2)(CUcontext);
    CUresult (*cuCtxPopCurrent_v2)(CUcontext *);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
    CUresult (*cuMemAllocPitch_v2)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    CUresult (*cuMemFree_v2)(CUdeviceptr);
    CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
    CUresult (*cuMemAllocAsync_ptsz)(CUdeviceptr *, size_t, CUstream);
    CUresult (*cuMemFreeAsync_ptsz)(CUdeviceptr, CUstream);
    CUresult (*cuMemGetInfo_v2)(size_t *, size_t *);
    CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
    CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
    CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
    CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*cuEventCreate)(CUevent *, unsigned int);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventQuery)(CUevent);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventDestroy_v2)(CUevent);
    CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamQuery)(CUstream);
    CUresult (*cuStreamCreate)(CUstream *, unsigned int);
    CUresult (*cuStreamCreateWithPriority)(CUstream *, unsigned int, int);
    CUresult (*cuStreamDestroy_v2)(CUstream);
    CUresult (*cuStreamDestroy_v1)(CUstream); /* "cuStreamDestroy", where the driver has it */
    CUresult (*cuStreamGetFlags)(CUstream, unsigned int *);
    CUresult (*cuDevicePrimaryCtxReset_v2)(CUdevice);
    CUresult (*cuDevicePrimaryCtxReset_v1)(CUdevice); /* "cuDevicePrimaryCtxReset", where the driver has it */
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuCtxDestroy_v2)(CUcontext);
    CUresult (*cuCtxCreate_v2)(CUcontext *, unsigned int, CUdevice);
    CUresult (*cuCtxCreate_v3)(CUcontext *, CUexecAffinityParam *, int, unsigned int, CUdevice);
    CUresult (*cuCtxCreate_v4)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice);
    CUresult (*cuGreenCtxCreate)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
    CUresult (*cuGreenCtxDestroy)(CUgreenCtx);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice);
    CUresult (*cuDevicePrimaryCtxGetState)(CUdevice, unsigned int *, int *);
    CUresult (*cuDevicePrimaryCtxRelease_v1)(CUdevice); /* "cuDevicePrimaryCtxRelease", where the driver has it */
    CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned int);
    CUresult (*cuCtxDisablePeerAccess)(CUcontext);
    CUresult (*cuMemRetainAllocationHandle)(CUmemGenericAllocationHandle *, void *);
    CUresult (*cuMemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                             unsigned long long);
    CUresult (*cuMemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
    CUresult (*cuIpcOpenMemHandle_v2)(CUdeviceptr *, CUipcMemHandle, unsigned int);
    CUresult (*cuIpcOpenMemHandle_v1)(CUdeviceptr *, CUipcMemHandle, unsigned int); /* "cuIpcOpenMemHandle" */
    CUresult (*cuIpcCloseMemHandle)(CUdeviceptr);
    /* stream capture (capture.c) */
    CUresult (*cuStreamBeginCapture_v2)(CUstream, CUstreamCaptureMode);
    CUresult (*cuStreamBeginCapture_v2_ptsz)(CUstream, CUstreamCaptureMode);
    CUresult (*cuStreamBeginCapture_v1)(CUstream);      /* "cuStreamBeginCapture" (CUDA 10.0) */
    CUresult (*cuStreamBeginCapture_v1_ptsz)(CUstream); /* "cuStreamBeginCapture_ptsz" */
    CUresult (*cuStreamBeginCaptureToGraph)(CUstream, CUgraph, const CUgraphNode *, const CUgraphEdgeData *, size_t,
                                            CUstreamCaptureMode);
    CUresult (*cuStreamBeginCaptureToGraph_ptsz)(CUstream, CUgraph, const CUgraphNode *, const CUgraphEdgeData *,
                                                 size_t, CUstreamCaptureMode);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
    CUresult (*cuStreamEndCapture_ptsz)(CUstream, CUgraph *);
    CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*cuThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *);
    /* one event for all the context's work, CUDA 12.5+, found through cuGetProcAddress */
    CUresult (*cuCtxRecordEvent)(CUcontext, CUevent);
    /* pointer queries (pointer_query.c) and the allocators beside ours (others.c) */
    CUresult (*cuMemGetAddressRange_v2)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*cuPointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
    CUresult (*cuPointerGetAttributes)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
    CUresult (*cuDeviceGetMemPool)(CUmemoryPool *, CUdevice);
    CUresult (*cuMemGetHandleForAddressRange)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
    CUresult (*cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    CUresult (*cuMemAllocFromPoolAsync_ptsz)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
} ca_driver;

/* The driver, loaded on first use; NULL when libcuda.so.1 cannot be loaded.
 * Every hook asks: once loaded, the answer is one load (ca_drv_loaded). */
extern CA_HIDDEN const ca_driver *ca_drv_loaded;
const ca_driver *ca_drv_load(void);
static inline const ca_driver *ca_drv(void) {
    const ca_driver *d = __atomic_load_n(&ca_drv_loaded, __ATOMIC_ACQUIRE);
    return d ? d : ca_drv_load();
}
/* The same question where the answer is nearly always yes: a hook that
 * tests this first and ca_drv() only when it is false keeps its hot path free
 * of the register saves that the loading call needs. */
static inline bool ca_drv_ready(void) { return __atomic_load_n(&ca_drv_loaded, __ATOMIC_ACQUIRE) != NULL; }
/* Is the driver simgpu's simulated one? */
bool ca_on_simulated_device(void);

/* ---- config.c: CUDALLOC_CONF ---- */
/* What a leak or an out-of-memory failure does (on_leak, on_oom). */
typedef enum { CA_ON_WARN, CA_ON_REPORT, CA_ON_EXIT } ca_on;
/* The report prefix report:/exit use when none is given. */
#define CA_DEFAULT_REPORT "cudalloc.%p"
typedef struct ca_config {
    bool expandable;      /* expandable_segments */
    bool sync_free;       /* cudaFree synchronizes the device first, as CUDA's does */
    size_t max_reserved;  /* per device; 0: the device's memory */
    size_t release_after; /* allocations between give-backs of granules not needed (0: never) */
    size_t share_bytes;   /* ca_options.share_bytes (0: never) */
    char report[1024];    /* report path prefix; empty: none */
    bool summary;         /* the exit summary on stderr */
    bool tracking;        /* watch lifetimes, call sites and iterations (reports, leaks) */
    bool python_frames;   /* Python frames in call sites (reports/capture/pyframes.h) */
    bool trace_iterations; /* `iteration` rows in PREFIX.csv (our extension of RMM's format) */
    char nvtx_range[128]; /* the NVTX range that is one iteration */
    bool oom_message;     /* the OOM message on stderr */
    bool context_fences;  /* fences are one cuCtxRecordEvent where the driver has it */
    bool membarrier;      /* a reset's membarrier(2) stands for the fence of every allocator call (users.c) */
    ca_on on_leak, on_oom; /* warn, write the reports, or exit with exit_code after writing them */
    size_t exit_code;     /* the status on_leak:exit and on_oom:exit end the program with */
    size_t error_exitcode; /* the program's status at exit when a leak or an OOM was seen; 0: its own */
    bool status;          /* the live figures in a file for cudalloc status and top */
    char metrics[1024];   /* Prometheus text file path template; empty: none */
    size_t metrics_every; /* seconds between rewrites of it */
    char suppressions[1024]; /* call-site patterns not reported (reports/diagnose/suppress.h); empty: none */
} ca_config;
extern CA_HIDDEN ca_config ca_conf;
/* Parse CUDALLOC_CONF (and CUDALLOC_REPORT); on a bad value write one line to
 * err and return -1. */
int ca_config_parse(const char *conf, ca_config *out, char *err, size_t errlen);
/* The settings in force in CUDALLOC_CONF syntax, every key with its value
 * (defaults included; sizes in bytes, and only when set; the report path
 * left out), e.g. "expandable_segments:True,sync_free:False,...": what
 * parses back to the same allocator. Returns the length it needs, as
 * snprintf does. */
size_t ca_config_format(const ca_config *c, char *buf, size_t n);

/* ---- devices.c: one allocator per device ---- */
#define CA_MAX_DEVICES 64
typedef struct ca_device {
    int ordinal;
    uint64_t bit;         /* 1 << ordinal: the device in a thread's slot (users.c) */
    CUcontext ctx;        /* the context the allocator was made in */
    bool unbound;         /* that context went: the next one used on the device takes over */
    ca_allocator *alloc;  /* read only between ca_device_use and ca_device_done */
    ca_backend *backend;  /* the allocator's (owned by it) */
    ca_tracker *tracker;  /* NULL with tracking:false */
    atomic_bool held;     /* ca_device_hold (users.c) */
    unsigned hold_depth;  /* nested holds by the holding thread */
    pthread_mutex_t hold_lock; /* recursive */
} ca_device;

/* The allocator of the calling thread's current device. Sets *err to the
 * driver's answer when there is no usable context (not initialized, none
 * current) and returns NULL. Inline: every allocation asks. The driver is
 * asked every time (the program, the driver itself and cudart's private
 * tables all change the current context unseen); its device is the thread's
 * last answer while the context and the generation are the same. */
typedef struct ca_thread_device {
    CUcontext ctx;
    struct ca_device *dev;
    unsigned generation;
} ca_thread_device;
extern __thread __attribute__((tls_model("initial-exec"))) ca_thread_device ca_tl_device;
extern CA_HIDDEN unsigned ca_devices_generation;
ca_device *ca_current_device_bind(const ca_driver *drv, CUresult r, CUcontext ctx, CUresult *err);
static inline ca_device *ca_current_device(CUresult *err) {
    const ca_driver *drv = ca_drv();
    CUcontext ctx = NULL;
    CUresult r = drv ? drv->cuCtxGetCurrent(&ctx) : CUDA_ERROR_NO_DEVICE;
    if (__builtin_expect(r == CUDA_SUCCESS && ctx && ctx == ca_tl_device.ctx &&
                             ca_tl_device.generation == __atomic_load_n(&ca_devices_generation, __ATOMIC_ACQUIRE),
                         1)) {
        ca_device *d = ca_tl_device.dev;
        if (!d) __builtin_unreachable(); /* set with its context, which is not NULL here */
        return d;
    }
    return ca_current_device_bind(drv, r, ctx, err);
}
ca_device *ca_device_by_ordinal(int ordinal);
ca_device *ca_device_by_ctx(CUcontext ctx);
/* The device whose allocator manages ptr (live or not), or NULL. */
ca_device *ca_owner(const void *ptr);
/* The same, left between ca_device_use and ca_device_done (the caller's). */
ca_device *ca_owner_used(const void *ptr);
/* Before its context is reset or destroyed: plain frees waited for, the
 * backend's events destroyed, the context's streams forgotten. Under
 * ca_device_hold. */
void ca_device_quiesce(ca_device *d);
/* Calls fn for each device made, between ca_device_use and ca_device_done. */
void ca_devices_foreach(void (*fn)(ca_device *d, void *ctx), void *ctx);
/* The devices made so far, in order (*n of them): for a walk on a hot path. */
ca_device *const *ca_devices_made(int *n);
/* The device's primary context is about to be reset (cudaDeviceReset, which
 * cudart does with cuDevicePrimaryCtxReset): the device is held, plain frees
 * are waited for, every allocation on it is freed (the tracker sees each),
 * its memory goes back to the driver while the context can still take it,
 * and a fresh allocator takes over. CUDA forbids other threads to use the
 * device meanwhile; those that do wait until ca_device_reset_end, after the
 * driver's reset, and go on in the fresh allocator. Returns the device held,
 * or NULL. */
ca_device *ca_device_reset_begin(int ordinal);
void ca_device_reset_end(ca_device *d);
/* A context is about to go (cuCtxDestroy, the primary context's last
 * release): if it is a device's allocator's, every allocation made in it is
 * freed, its memory given back, and the next context used on the device gets
 * a fresh allocator; its streams are forgotten either way. */
void ca_device_ctx_gone(CUcontext ctx);
/* The same once the context went (the driver says the primary context is no
 * longer active): its work, events and cuMemAlloc memory went with it; the
 * allocator gives back the rest (its virtual memory) without it. */
void ca_device_ctx_went(CUcontext ctx);

/* ---- users.c: threads inside a device's allocator ---- */
/* Each thread's slot: the devices it is inside (bit i: device i), a cache
 * line of its own that only it writes. */
typedef struct ca_user_slot {
    _Alignas(64) _Atomic uint64_t using;
    atomic_bool taken; /* by a live thread; a dead one's is taken by the next new one */
    struct ca_user_slot *next;
} ca_user_slot;
/* The calling thread's side, in one place (one TLS look-up). */
typedef struct ca_user {
    ca_user_slot *slot; /* every device in use until the thread has one: its first use is the slow one */
    uint64_t slow;      /* devices whose next ca_device_done is not the plain one: nested, held or locked */
    uint64_t holding;   /* devices this thread holds (ca_device_hold) */
    uint64_t locked;    /* devices it uses through their hold_lock (no slot could be had) */
    uint16_t depth[CA_MAX_DEVICES]; /* uses inside a use (or a hold) */
} ca_user;
extern __thread __attribute__((tls_model("initial-exec"))) ca_user ca_user_me;
extern CA_HIDDEN bool ca_users_light; /* set by ca_users_init: the holder fences for the users */
void ca_device_use_slowly(ca_device *d, uint64_t bit);
void ca_device_done_slowly(ca_device *d, uint64_t bit);

/* Around every use of d->alloc or d->backend (nested uses are fine); waits
 * while another thread holds the device. Cheap, inline: a store and a load on
 * the thread's own slot, fenced by the holder (ca_users_asymmetric) or itself. */
static inline void ca_device_use(ca_device *d) {
    ca_user_slot *s = ca_user_me.slot;
    uint64_t bit = d->bit;
    uint64_t was = atomic_load_explicit(&s->using, memory_order_relaxed);
    if (__builtin_expect(!(was & bit), 1)) {
        if (__builtin_expect(ca_users_light, 1)) {
            atomic_store_explicit(&s->using, was | bit, memory_order_relaxed);
            __asm__ volatile("" ::: "memory"); /* the holder's membarrier is the fence */
        } else {
            atomic_store(&s->using, was | bit);
        }
        if (__builtin_expect(!atomic_load_explicit(&d->held, memory_order_acquire), 1)) return;
        atomic_store_explicit(&s->using, was, memory_order_release);
    }
    ca_device_use_slowly(d, bit);
}
static inline void ca_device_done(ca_device *d) {
    uint64_t bit = d->bit;
    if (__builtin_expect(ca_user_me.slow & bit, 0)) {
        ca_device_done_slowly(d, bit);
        return;
    }
    ca_user_slot *s = ca_user_me.slot;
    atomic_store_explicit(&s->using, atomic_load_explicit(&s->using, memory_order_relaxed) & ~bit, memory_order_release);
}
/* The device to this thread alone (recursive): waits until no other thread
 * uses it, and keeps them off until ca_device_unhold. */
void ca_device_hold(ca_device *d);
void ca_device_unhold(ca_device *d);
/* Chooses the users' fence, once ca_conf is read and before any device is
 * used: the holder's membarrier(2) where the setting and the kernel allow. */
void ca_users_init(void);
/* True when the holder's membarrier(2) stands for the users' fences. */
bool ca_users_asymmetric(void);
void ca_users_after_fork(void);

/* ---- alloc.c: what every entry point shares ---- */
/* stream: CUstream as given, 0 for the legacy default stream; async: in the
 * stream's order (cudaMallocAsync), else a plain cudaMalloc. dptr is not
 * NULL and size not 0: the hooks answer those (as their API does) first.
 * ca_do_malloc, inline at the end of this header, is its fast path. */
CUresult ca_malloc_slowly(CUdeviceptr *dptr, size_t size, CUstream stream, bool async);
/* What a failed allocation on d answers (an OOM explained first). */
CUresult ca_malloc_failed(ca_device *d, int rc, const ca_oom_info *oom);
/* Pitched memory (cuMemAllocPitch, cudaMallocPitch, cudaMalloc3D): `rows`
 * rows of `width` bytes rounded up to CA_PITCH, rows = height x depth; sizes
 * nonzero. A pitch or a size past 2^64 - 1 is more than any device: out of
 * memory, with one line saying so (the allocator never sees such a size). */
#define CA_PITCH 512 /* what GPUs give (cudaMallocPitch's rows are 512-byte multiples) */
CUresult ca_do_malloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, size_t depth);
/* The free in full (ca_do_free, inline at the end of this header, is its
 * fast path): what a capture or sync_free asks first, then each device in
 * turn; a pointer inside a block is a bad free (CUDA_ERROR_INVALID_VALUE, with
 * a warning), one no device holds CUDA_ERROR_NOT_FOUND. */
CUresult ca_free_slowly(CUdeviceptr ptr, CUstream stream, bool plain);
CUresult ca_do_mem_info(size_t *free_bytes, size_t *total_bytes);

/* ---- steps.c: iteration boundaries, in order of trust (ca_iter_source:
 * reports/track/tracker.h) ---- */
void ca_iteration_mark(ca_iter_source source);
long ca_iterations(ca_iter_source *source);

/* ---- live.c: while the job runs: leak warnings, on_leak/on_oom, the
 * live figures for cudalloc status/top and the metrics file ---- */
/* An iteration mark (explicit or NVTX), after the trackers stepped. */
void ca_live_mark(void);
/* The first device was made: the watcher thread starts. */
void ca_live_device_made(void);
/* After the OOM message and reports: on_oom:exit ends the program here. */
void ca_live_oom(void);
/* At exit, after the summary and reports: the last files; error_exitcode. */
void ca_live_exit(void);
void ca_live_after_fork(void);

/* ---- cupti.c: device memory allocated past us ---- */
/* Once, with no lock of ours held; steps aside for profilers (cupti.c). */
void ca_cupti_start(void);
/* Bytes in allocations that are not ours, and held by memory pools, on a
 * device; false when CUPTI is not watching. */
bool ca_cupti_external(int device, uint64_t *allocations, uint64_t *pools);

/* ---- last_error.c: cudart's last error, for what we answer ourselves ---- */
/* A runtime call we answered without entering cudart returned e (an int:
 * cudaError_t, whose header this one does not include): the thread's last
 * error from now on, as cudart keeps it. Returns e. */
int ca_rt_answered(int e);

/* ---- contexts.c: the primary context's last release ---- */
CA_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CA_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
void ca_contexts_after_fork(void);
/* Contexts of their own (cuCtxCreate): none alive (a relaxed read), the
 * device's contexts other than `mine` that fences must cover (up to cap into
 * out; the count is returned whole; the primary among them when it is
 * active), and one that goes (cuCtxDestroy). */
bool ca_contexts_none_made(void);
size_t ca_contexts_others(int device, CUcontext mine, CUcontext *out, size_t cap);
/* Green contexts (cuGreenCtxCreate) alive on the device: counted as made,
 * never among the others; the primary context's cuCtxRecordEvent covers them. */
bool ca_contexts_green(int device);
CA_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags);
CA_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx);
void ca_contexts_destroyed(CUcontext ctx);
CA_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CA_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags,
                                  CUdevice dev);

/* ---- peers.c: peer access on expandable segments ---- */
/* After cuMemMap in the backend: access for the owner and the peers granted
 * on its mappings; the mapping is remembered for later grants. */
CUresult ca_peers_map(int owner, uintptr_t addr, size_t size);
void ca_peers_unmap(int owner, uintptr_t addr);
/* Peer access from one context to another came or went; a context reset or
 * destroyed takes its peer access, both ways, with it. */
void ca_peers_enabled(CUcontext from_ctx, CUcontext to_ctx);
void ca_peers_disabled(CUcontext from_ctx, CUcontext to_ctx);
void ca_peers_ctx_gone(CUcontext ctx);
/* The primary context of a device is being reset. */
void ca_peers_primary_reset(int ordinal);
void ca_peers_after_fork(void);
CA_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);
CA_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peerContext);

/* ---- ipc.c: CUDA IPC of blocks (ipc.h has the inside) ---- */
/* A block was freed: an export of it goes (one relaxed read when nothing is
 * exported, inline: every free asks). */
extern CA_HIDDEN _Atomic size_t ca_ipc_nexports;
void ca_ipc_export_freed(const void *ptr);
static inline void ca_ipc_block_freed(const void *ptr) {
    if (atomic_load_explicit(&ca_ipc_nexports, memory_order_relaxed)) ca_ipc_export_freed(ptr);
}
void ca_ipc_device_reset(int ordinal);
void ca_ipc_after_fork(void);
/* Memory this process opened with cuIpcOpenMemHandle around p: the block as
 * opened (its start and size), the context that opened it and an id of the
 * opening; false when p is in none. */
bool ca_ipc_import_at(CUdeviceptr p, CUdeviceptr *base, size_t *size, CUcontext *ctx, uint64_t *id);
CA_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr);
CA_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags);
CA_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);

/* ---- pointer_query.c: a block is cudaMalloc memory to every query ---- */
CA_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
CA_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr);
CA_EXPORT CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute *attributes, void **data,
                                          CUdeviceptr ptr);
CA_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);
CA_EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                                 CUmemRangeHandleType handleType, unsigned long long flags);

/* ---- others.c: allocators beside ours get our cache on out of memory ---- */
CA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags);
CA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
CA_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CA_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream hStream);

/* ---- torch.c, torch_oom.c: PyTorch's pluggable allocator ---- */
/* Raise torch.OutOfMemoryError(message) through PyTorch's C++ (a C++
 * exception that unwinds through the caller); returns only when the process
 * is not a PyTorch one. No lock may be held. */
void ca_torch_raise_oom(const char *message);
void ca_torch_after_fork(void);

/* ---- cuda_backend.c ---- */
/* *vmm: whether the device has virtual memory management (else only classic
 * segments can be made on it). */
ca_backend *ca_backend_cuda_new(int ordinal, CUcontext ctx, bool *vmm);
/* The backend's context went: nothing it queued runs any more, its events
 * and classic segments went with it; later calls do not use it. */
void ca_backend_cuda_context_went(ca_backend *be);
/* Are its granules made shareable (POSIX file descriptors), so that ipc.c
 * can export blocks of expandable segments? */
bool ca_backend_cuda_shareable(const ca_backend *be);
/* Destroys the events the backend keeps for reuse (none may be in a fence). */
void ca_backend_cuda_drop_events(ca_backend *be);
/* A call that a capture forbids exactly when it forbids cudaMalloc and cudaFree
 * (an event query): its answer, a capture error when this thread is refused
 * (and then the capture is invalidated, as the real call would have done). */
CUresult ca_backend_cuda_capture_probe(ca_backend *be);
/* s waits for the last ordered fence's legacy event while it has not passed
 * (streams.c). */
void ca_backend_cuda_order_after_fences(ca_backend *be, CUstream s);
/* The host waits for it; false when that could not be done (a capture). */
bool ca_backend_cuda_wait_ordered(ca_backend *be);

/* ---- streams.c: the streams fences cover; per-thread stream keys ---- */
/* Hooks call these around the real create (after it) and destroy (before it). */
void ca_stream_created(CUstream s, unsigned flags);
/* Also retires the stream's pools: a later stream with the same handle gets
 * new ones, and theirs end once the device is past their work. */
void ca_stream_destroying(CUstream s);
/* Was s created through our hooks and not destroyed? Was it destroyed
 * through them (and not made again)? */
bool ca_streams_known(CUstream s);
bool ca_streams_gone(CUstream s);
void ca_streams_forget_ctx(CUcontext ctx);
/* The context a stream made through our hooks belongs to; NULL for the
 * legacy and per-thread streams (the current context's) and unknown ones. */
CUcontext ca_stream_ctx(CUstream s);
/* Held while a fence is recorded: no stream comes or goes meanwhile. */
void ca_streams_lock(void);
void ca_streams_unlock(void);
/* Under the lock: the non-blocking streams of ctx (up to cap into out; the
 * count is returned whole; out NULL: 1 at the first, whether there is one),
 * and saying that a fence of a context without
 * them was its legacy event alone. */
size_t ca_streams_nonblocking(CUcontext ctx, CUstream *out, size_t cap);
void ca_streams_fenced_ordered(void);
/* After recording a fence's legacy event: true when that event alone orders
 * every later use of the blocks (no non-blocking stream in the process). */
bool ca_fence_is_ordered(void);
/* A hint, read without ordering: whether an ordered fence is worth trying
 * (no non-blocking stream, no context of its own). */
bool ca_streams_ordered_fences_ok(void);
/* A context was made on the device (contexts.c). */
void ca_streams_context_made(int device);
/* The calling thread made a per-thread-stream pool on device d: it is
 * retired at thread exit, as a later thread may get the same key. */
void ca_ptds_pool_used(const ca_device *d);
void ca_streams_after_fork(void);

/* ---- capture.c: stream capture (CUDA graphs) ---- */
/* A capture is under way somewhere in the process (a relaxed read: every
 * allocation and free asks). */
extern CA_HIDDEN _Atomic int ca_capture_active;
static inline bool ca_capture_any(void) { return atomic_load_explicit(&ca_capture_active, memory_order_relaxed) != 0; }
/* Around device work of ours (fences, event records and waits, synchronizes):
 * enter is false while a capture is under way, and then nothing is issued. */
bool ca_capture_guard_enter(void);
void ca_capture_guard_leave(void);
/* Is s capturing (or the legacy stream unusable because a blocking stream
 * captures)? Asked only while a capture is under way; false otherwise. */
bool ca_stream_capturing(CUstream s);
/* An allocation on a capturing stream: the driver's graph allocation, told to
 * the device's tracker; its free is told with ca_capture_freed. */
CUresult ca_capture_malloc(ca_device *d, CUdeviceptr *dptr, size_t size, CUstream stream);
void ca_capture_freed(CUdeviceptr ptr, CUstream stream);
void ca_capture_stream_destroyed(CUstream s);
void ca_capture_after_fork(void);
/* The hooks, for cuGetProcAddress's swaps (hooks_driver.c). */
CUresult cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
CUresult ca_begin_capture_v1(CUstream) __asm__("cuStreamBeginCapture");
CUresult ca_begin_capture_v1_ptsz(CUstream) __asm__("cuStreamBeginCapture_ptsz");
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream, CUgraph, const CUgraphNode *, const CUgraphEdgeData *, size_t,
                                          CUstreamCaptureMode);
CUresult cuStreamEndCapture_ptsz(CUstream, CUgraph *);

/* ---- report.c ---- */
void ca_report_oom(ca_device *d, const ca_oom_info *oom);
void ca_report_exit(void);
/* Write every device's report files now (when a report prefix is set); 0 when
 * all were written. Not from a signal handler. */
int ca_report_write_all(void);
/* SIGUSR1 writes the reports: the handler set at load, the thread that writes
 * started with the first device. */
void ca_report_signal_init(void);
void ca_report_signal_start(void);
void ca_report_after_fork(void);

/* Stream handles as pools know them: the legacy default stream is 0 whether
 * named NULL or CU_STREAM_LEGACY. CU_STREAM_PER_THREAD names a different
 * stream in each thread: its key is odd (no stream handle is) and made from
 * the address of a thread-local variable, so each live thread has its own
 * pool, and a later thread reuses a dead one's. */
extern __thread __attribute__((tls_model("initial-exec"))) uint64_t ca_tl_ptds_anchor;
static inline ca_stream ca_ptds_key(void) { return (ca_stream)(uintptr_t)&ca_tl_ptds_anchor | 1; }
static inline bool ca_is_ptds_key(ca_stream k) { return k & 1; }
static inline ca_stream ca_stream_key(CUstream s) {
    if (__builtin_expect((uintptr_t)s > (uintptr_t)CU_STREAM_PER_THREAD, 1)) /* a stream made */
        return (ca_stream)(uintptr_t)s;
    if (s == CU_STREAM_PER_THREAD) return ca_ptds_key();
    return 0; /* NULL or CU_STREAM_LEGACY */
}

/* ---- alloc.c: the fast paths, inline (a hook is then one frame from the
 * program to the allocator) ---- */
/* The allocator's answer on d, between ca_device_use and ca_device_done. */
static inline CUresult ca_malloc_on(ca_device *d, CUdeviceptr *dptr, size_t size, ca_stream key, bool async) {
    void *p;
    ca_oom_info oom;
    /* stream-ordered memory answers pointer queries as pool memory (pointer_query.c) */
    int rc = async ? ca_malloc_ordered(d->alloc, size, key, &p, &oom) : ca_malloc(d->alloc, size, key, &p, &oom);
    if (__builtin_expect(rc != CA_OK, 0)) return ca_malloc_failed(d, rc, &oom);
    *dptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

/* An allocation on the thread's current device while no capture is under way
 * and not on the per-thread stream; anything else is ca_malloc_slowly's,
 * from the start. */
static inline CUresult ca_do_malloc(CUdeviceptr *dptr, size_t size, CUstream stream, bool async) {
    ca_stream key = ca_stream_key(stream);
    CUresult r;
    ca_device *d;
    if (__builtin_expect(ca_capture_any() || ca_is_ptds_key(key) || !(d = ca_current_device(&r)), 0))
        return ca_malloc_slowly(dptr, size, stream, async);
    ca_device_use(d); /* d->alloc is read only in between: a reset replaces it */
    r = ca_malloc_on(d, dptr, size, key, async);
    ca_device_done(d);
    return r;
}

/* ptr freed by device d if it owns it: CA_ERR_INVALID when it does not. */
static inline int ca_free_on(ca_device *d, void *ptr, ca_stream stream, bool plain, bool device_idle) {
    ca_device_use(d); /* d->alloc is read only in between: a reset replaces it */
    int rc = plain ? ca_free_device(d->alloc, ptr, device_idle) : ca_free(d->alloc, ptr, stream);
    ca_device_done(d);
    return rc;
}

/* A plain free (cudaFree, cuMemFree) is ordered against the whole device
 * that owns the pointer, whichever device is current: its block waits for a
 * fence of that device (allocator/fence.c, cuda_backend.c). Tried first on
 * the thread's current device, nearly always the owner; anything else (no
 * such device, a capture, sync_free, another owner, a bad free) is
 * ca_free_slowly's, from the start. CUDA_ERROR_NOT_FOUND when ptr is not ours
 * (the caller passes it through, then tells ca_capture_freed when the real
 * free succeeded). */
static inline CUresult ca_do_free(CUdeviceptr ptr, CUstream stream, bool plain) {
    ca_device *d = ca_tl_device.dev;
    if (__builtin_expect(!d || ca_capture_any() || (plain && ca_conf.sync_free), 0))
        return ca_free_slowly(ptr, stream, plain);
    int rc = ca_free_on(d, (void *)ptr, ca_stream_key(stream), plain, false);
    if (__builtin_expect(rc != CA_OK, 0))
        return rc == CA_ERR_STREAM ? CUDA_ERROR_INVALID_HANDLE : ca_free_slowly(ptr, stream, plain);
    ca_ipc_block_freed((void *)ptr);
    return CUDA_SUCCESS;
}

#endif

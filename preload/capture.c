/* Stream capture (CUDA graphs), seen from the allocator: while a capture is
 * under way anywhere in the process, cudalloc issues no device work of its
 * own (no fence, no event record or query, no synchronize: simgpu/README.md
 * lists what capture forbids), and the calls it answers answer as CUDA
 * would without it (alloc.c):
 *   - an allocation on a capturing stream is the driver's graph allocation,
 *     an address the graph owns, which no eager allocation ever gets;
 *   - a plain cudaMalloc or cudaFree asks the driver first, with a call that
 *     capture forbids exactly when it forbids those (an event query): a
 *     refused thread gets the driver's error, and the capture is invalidated
 *     as the real call would have invalidated it.
 * Captures are known from the begin and end calls (driver and runtime, also
 * through cuGetProcAddress and dlsym). A begin waits for device work of
 * ours already being issued (ca_capture_guard_enter), so no fence event
 * lands on a stream that has just begun capturing. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(e) (hash_oom = 1)
#include <uthash.h>

#include "preload/log.h"
#include "preload/preload.h"

/* Captures begun and not ended, by stream (the per-thread stream by thread too). */
typedef struct capture_key {
    CUstream stream;
    pthread_t thread;
} capture_key;

#define MAX_CAPTURES 256
static capture_key keys[MAX_CAPTURES];
static int nkeys;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic int ca_capture_active; /* captures under way, plus begins in progress */
static _Atomic int inflight; /* device work of ours being issued */


/* Dekker's handshake with begin(): either the begin sees us in flight and
 * waits, or we see its capture and issue nothing. */
bool ca_capture_guard_enter(void) {
    atomic_fetch_add(&inflight, 1);
    if (atomic_load(&ca_capture_active)) {
        atomic_fetch_sub(&inflight, 1);
        return false;
    }
    return true;
}

void ca_capture_guard_leave(void) { atomic_fetch_sub(&inflight, 1); }

static capture_key key_of(CUstream s) {
    capture_key k = {s, 0};
    if (s == CU_STREAM_PER_THREAD) k.thread = pthread_self();
    return k;
}

static int find(capture_key k) {
    for (int i = 0; i < nkeys; i++)
        if (keys[i].stream == k.stream && (k.stream != CU_STREAM_PER_THREAD || pthread_equal(keys[i].thread, k.thread)))
            return i;
    return -1;
}

/* The one line for PyTorch users whose cache cudalloc run turned off. */
static void hint_torch(void) {
    static atomic_bool said;
    const char *v = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    if (!v || strcmp(v, "1") || atomic_exchange(&said, true)) return;
    ca_warn("a CUDA graph capture began, and PYTORCH_NO_CUDA_MEMORY_CACHING=1 makes PyTorch allocate with plain "
            "cudaMalloc, which CUDA refuses while capturing: CUDA graphs need PyTorch's own allocator (leave the "
            "variable unset) or cudalloc as PyTorch's pluggable allocator (docs/pytorch.md)");
}

/* Around a real begin: announced first (no fence of ours may land on the
 * stream once it captures), then kept if it began. */
static void begin_announce(void) {
    atomic_fetch_add(&ca_capture_active, 1);
    while (atomic_load(&inflight)) sched_yield();
}

static void begin_done(CUstream s, bool began) {
    pthread_mutex_lock(&lock);
    capture_key k = key_of(s);
    bool kept = began && find(k) < 0 && nkeys < MAX_CAPTURES;
    if (kept) keys[nkeys++] = k;
    pthread_mutex_unlock(&lock);
    if (!kept) atomic_fetch_sub(&ca_capture_active, 1); /* failed, or already known (the runtime and the driver both saw it) */
    if (began) hint_torch();
}

static void forget(CUstream s) {
    pthread_mutex_lock(&lock);
    int i = find(key_of(s));
    if (i >= 0) keys[i] = keys[--nkeys];
    pthread_mutex_unlock(&lock);
    if (i >= 0) atomic_fetch_sub(&ca_capture_active, 1);
}

/* After a real end: the capture is over unless the stream still captures
 * (an end from the wrong thread, or on a stream the capture joined). */
static void end_done(CUstream s) {
    const ca_driver *d = ca_drv();
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (d && d->cuStreamIsCapturing && d->cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
        st != CU_STREAM_CAPTURE_STATUS_NONE)
        return;
    forget(s);
}

void ca_capture_stream_destroyed(CUstream s) {
    if (ca_capture_any()) forget(s);
}

bool ca_stream_capturing(CUstream s) {
    const ca_driver *d = ca_drv();
    if (!ca_capture_any() || !d || !d->cuStreamIsCapturing) return false;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = d->cuStreamIsCapturing(s, &st);
    return r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE; /* IMPLICIT: the legacy stream is in one */
}

/* ---- graph allocations: the driver's, counted for the reports ---- */

typedef struct graph_alloc {
    uintptr_t addr;
    size_t size;
    int device;
    ca_stream stream;
    UT_hash_handle hh;
} graph_alloc;

static graph_alloc *graph_allocs;
static _Atomic size_t ngraph_allocs; /* read without the lock: most frees are not of these */

static void tell_tracker(int device, ca_event_kind kind, uintptr_t addr, size_t size, ca_stream stream) {
    ca_device *d = ca_device_by_ordinal(device);
    if (!d || !d->tracker) return;
    size_t rounded = (size + CA_ROUND - 1) / CA_ROUND * CA_ROUND;
    ca_trace_event ev = {kind, addr, rounded, size, stream};
    ca_tracker_observe(d->tracker, &ev);
}

CUresult ca_capture_malloc(ca_device *d, CUdeviceptr *dptr, size_t size, CUstream stream) {
    const ca_driver *drv = ca_drv();
    if (!drv->cuMemAllocAsync) return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = drv->cuMemAllocAsync(dptr, size, stream); /* CU_STREAM_PER_THREAD is a handle like any */
    if (r != CUDA_SUCCESS) return r;
    graph_alloc *g = calloc(1, sizeof *g);
    if (g) {
        *g = (graph_alloc){.addr = (uintptr_t)*dptr, .size = size, .device = d->ordinal, .stream = ca_stream_key(stream)};
        int hash_oom = 0;
        pthread_mutex_lock(&lock);
        HASH_ADD(hh, graph_allocs, addr, sizeof g->addr, g);
        if (!hash_oom) atomic_fetch_add(&ngraph_allocs, 1);
        pthread_mutex_unlock(&lock);
        if (hash_oom) free(g), g = NULL;
    }
    if (g) tell_tracker(d->ordinal, CA_EV_ALLOC, g->addr, size, g->stream);
    return CUDA_SUCCESS;
}

void ca_capture_freed(CUdeviceptr ptr, CUstream stream) {
    if (!atomic_load_explicit(&ngraph_allocs, memory_order_relaxed)) return;
    uintptr_t addr = (uintptr_t)ptr;
    graph_alloc *g;
    pthread_mutex_lock(&lock);
    HASH_FIND(hh, graph_allocs, &addr, sizeof addr, g);
    if (g) {
        HASH_DEL(graph_allocs, g);
        atomic_fetch_sub(&ngraph_allocs, 1);
    }
    pthread_mutex_unlock(&lock);
    if (!g) return;
    tell_tracker(g->device, CA_EV_FREE, g->addr, g->size, ca_stream_key(stream));
    free(g);
}

/* ---- the begin and end calls ---- */

static CUresult no_driver(void) { return CUDA_ERROR_NOT_INITIALIZED; }

#define BEGIN(real_call, s)                                   \
    ({                                                        \
        begin_announce();                                     \
        CUresult r_ = (real_call);                            \
        begin_done((s), r_ == CUDA_SUCCESS);                  \
        r_;                                                   \
    })

static CUstream per_thread(CUstream s) { return s ? s : CU_STREAM_PER_THREAD; }

CA_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
    const ca_driver *d = ca_drv();
    if (!d || !d->cuStreamBeginCapture_v2) return no_driver();
    return BEGIN(d->cuStreamBeginCapture_v2(s, mode), s);
}

CA_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
    const ca_driver *d = ca_drv();
    if (!d || !d->cuStreamBeginCapture_v2_ptsz) return no_driver();
    return BEGIN(d->cuStreamBeginCapture_v2_ptsz(s, mode), per_thread(s));
}

/* CUDA 10.0's entries, before modes, under their exported names. */
CA_EXPORT CUresult ca_begin_capture_v1(CUstream s) __asm__("cuStreamBeginCapture");
CA_EXPORT CUresult ca_begin_capture_v1_ptsz(CUstream s) __asm__("cuStreamBeginCapture_ptsz");

CA_EXPORT CUresult ca_begin_capture_v1(CUstream s) {
    const ca_driver *d = ca_drv();
    if (!d || !d->cuStreamBeginCapture_v1) return no_driver();
    return BEGIN(d->cuStreamBeginCapture_v1(s), s);
}

CA_EXPORT CUresult ca_begin_capture_v1_ptsz(CUstream s) {
    const ca_driver *d = ca_drv();
    if (!d || !d->cuStreamBeginCapture_v1_ptsz) return no_driver();
    return BEGIN(d->cuStreamBeginCapture_v1_ptsz(s), per_thread(s));
}

CA_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                               const CUgraphEdgeData *data, size_t n, CUstreamCaptureMode mode) {
    const ca_driver *d = ca_drv();
    if (!d || !d->cuStreamBeginCaptureToGraph) return no_driver();
    return BEGIN(d->cuStreamBeginCaptureToGraph(s, g, deps, data, n, mode), s);
}

CA_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps,
                                                    const CUgraphEdgeData *data, size_t n, CUstreamCaptureMode mode) {
    const ca_driver *d = ca_drv();
    if (!d || !d->cuStreamBeginCaptureToGraph_ptsz) return no_driver();
    return BEGIN(d->cuStreamBeginCaptureToGraph_ptsz(s, g, deps, data, n, mode), per_thread(s));
}

CA_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
    const ca_driver *d = ca_drv();
    if (!d || !d->cuStreamEndCapture) return no_driver();
    CUresult r = d->cuStreamEndCapture(s, g);
    end_done(s);
    return r;
}

CA_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) {
    const ca_driver *d = ca_drv();
    if (!d || !d->cuStreamEndCapture_ptsz) return no_driver();
    CUresult r = d->cuStreamEndCapture_ptsz(s, g);
    end_done(per_thread(s));
    return r;
}

/* The runtime's, for a cudart that would reach the driver by other paths;
 * being told twice changes nothing. */
CA_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    CA_REAL(cudaStreamBeginCapture);
    if (!real_cudaStreamBeginCapture) return cudaErrorInitializationError;
    begin_announce();
    cudaError_t e = real_cudaStreamBeginCapture(s, mode);
    begin_done((CUstream)s, e == cudaSuccess);
    return e;
}

CA_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    CA_REAL(cudaStreamBeginCapture_ptsz);
    if (!real_cudaStreamBeginCapture_ptsz) return cudaErrorInitializationError;
    begin_announce();
    cudaError_t e = real_cudaStreamBeginCapture_ptsz(s, mode);
    begin_done(per_thread((CUstream)s), e == cudaSuccess);
    return e;
}

CA_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    CA_REAL(cudaStreamEndCapture);
    if (!real_cudaStreamEndCapture) return cudaErrorInitializationError;
    cudaError_t e = real_cudaStreamEndCapture(s, g);
    end_done((CUstream)s);
    return e;
}

CA_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g) {
    CA_REAL(cudaStreamEndCapture_ptsz);
    if (!real_cudaStreamEndCapture_ptsz) return cudaErrorInitializationError;
    cudaError_t e = real_cudaStreamEndCapture_ptsz(s, g);
    end_done(per_thread((CUstream)s));
    return e;
}

void ca_capture_after_fork(void) {
    pthread_mutex_init(&lock, NULL);
    nkeys = 0;
    atomic_store(&ca_capture_active, 0);
    atomic_store(&inflight, 0);
    graph_allocs = NULL; /* the parent's: not the child's memory */
    atomic_store(&ngraph_allocs, 0);
}

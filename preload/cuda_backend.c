/* The allocator's backend on the real driver: virtual memory management
 * (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
 * cuMemRelease) for expandable segments, cuMemAlloc for classic ones, events
 * for stream order and fences for device order (plain frees). Calls run in
 * the device's context, made current for the call when the calling thread has
 * another one (or none): a free of another device's pointer orders that
 * device's streams.
 *
 * Answers are what they say (answer_of): only CUDA_ERROR_NOT_READY means
 * "not yet"; a sticky error means the device runs nothing more (so nothing
 * can still touch the memory); any other error says nothing about the work
 * (a capture rule, a handle, a refused call) and passes no fence. While a
 * stream capture is under way nothing here issues device work (capture.c). */
#include <stdlib.h>

#include "allocator/lock.h"
#include "preload/preload.h"
#include "util/cuda_sticky.h"

typedef struct cuda_fence cuda_fence;

typedef struct cuda_backend {
    int ordinal;
    CUcontext ctx;
    CUmemAllocationProp prop;
    CUevent barrier;          /* the legacy event of ordered fences, recorded again each time */
    CUevent probe;            /* never recorded: queried to ask whether capture forbids the call */
    ca_lock lock;             /* the spare events and fences */
    CUevent *spare;
    size_t nspare, spare_cap;
    cuda_fence *spare_fences;
} cuda_backend;

/* Run in the device's context: push it only when it is not current already,
 * pop only what was pushed; a push that fails is the call's answer. */
#define IN_CTX(cb, call)                                                        \
    ({                                                                          \
        const ca_driver *d_ = ca_drv();                                         \
        CUcontext cur_ = NULL, popped_;                                         \
        d_->cuCtxGetCurrent(&cur_);                                             \
        bool push_ = cur_ != (cb)->ctx && d_->cuCtxPushCurrent_v2;              \
        CUresult p_ = push_ ? d_->cuCtxPushCurrent_v2((cb)->ctx) : CUDA_SUCCESS; \
        CUresult r_ = p_ == CUDA_SUCCESS ? (call) : p_;                         \
        if (push_ && p_ == CUDA_SUCCESS) d_->cuCtxPopCurrent_v2(&popped_);      \
        r_;                                                                     \
    })

/* The errors that leave the process unable to run any more CUDA work, and a
 * driver shutting down. */
static bool sticky(CUresult r) { return r == CUDA_ERROR_DEINITIALIZED || ca_cuda_sticky(r); }

/* What an answer says about the work queued before it. */
typedef enum { DONE, PENDING, UNKNOWN } answer;
static answer answer_of(CUresult r) {
    if (r == CUDA_SUCCESS || sticky(r)) return DONE;
    return r == CUDA_ERROR_NOT_READY ? PENDING : UNKNOWN;
}

/* The whole device, waited for: DONE, or it could not be. */
static answer sync_device(cuda_backend *cb) { return answer_of(IN_CTX(cb, ca_drv()->cuCtxSynchronize())); }

static int status(CUresult r) {
    if (r == CUDA_SUCCESS) return CA_OK;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? CA_ERR_OOM : r == CUDA_ERROR_INVALID_VALUE ? CA_ERR_INVALID : CA_ERR_BACKEND;
}

static int b_reserve(void *self, size_t size, uintptr_t *base) {
    cuda_backend *cb = self;
    CUdeviceptr p = 0;
    int rc = status(IN_CTX(cb, ca_drv()->cuMemAddressReserve(&p, size, 0, 0, 0)));
    if (rc == CA_OK) *base = (uintptr_t)p;
    return rc;
}

static int b_unreserve(void *self, uintptr_t base, size_t size) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, ca_drv()->cuMemAddressFree((CUdeviceptr)base, size)));
}

/* Granules are created shareable where the driver says it can (IPC of
 * blocks, ipc.c); a driver that refuses it all the same gets plain ones from
 * then on, and IPC of that device's blocks says so. */
static int b_create(void *self, size_t size, ca_handle *h) {
    cuda_backend *cb = self;
    CUmemGenericAllocationHandle handle = 0;
    CUmemAllocationProp prop = cb->prop;
    prop.requestedHandleTypes = __atomic_load_n(&cb->prop.requestedHandleTypes, __ATOMIC_RELAXED);
    CUresult r = IN_CTX(cb, ca_drv()->cuMemCreate(&handle, size, &prop, 0));
    if (prop.requestedHandleTypes &&
        (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_NOT_PERMITTED || r == CUDA_ERROR_INVALID_VALUE)) {
        __atomic_store_n(&cb->prop.requestedHandleTypes, CU_MEM_HANDLE_TYPE_NONE, __ATOMIC_RELAXED);
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
        r = IN_CTX(cb, ca_drv()->cuMemCreate(&handle, size, &prop, 0));
    }
    int rc = status(r);
    if (rc == CA_OK) *h = (ca_handle)handle;
    return rc;
}

static int b_release(void *self, ca_handle h) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, ca_drv()->cuMemRelease((CUmemGenericAllocationHandle)h)));
}

/* Access for the device and the peers granted on its mappings (peers.c). */
static CUresult map_and_grant(cuda_backend *cb, uintptr_t addr, size_t size, ca_handle h) {
    const ca_driver *d = ca_drv();
    CUresult r = d->cuMemMap((CUdeviceptr)addr, size, 0, (CUmemGenericAllocationHandle)h, 0);
    if (r != CUDA_SUCCESS) return r;
    r = ca_peers_map(cb->ordinal, addr, size);
    if (r != CUDA_SUCCESS) d->cuMemUnmap((CUdeviceptr)addr, size);
    return r;
}

static int b_map(void *self, uintptr_t addr, size_t size, ca_handle h) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, map_and_grant(cb, addr, size, h)));
}

static int b_unmap(void *self, uintptr_t addr, size_t size) {
    cuda_backend *cb = self;
    int rc = status(IN_CTX(cb, ca_drv()->cuMemUnmap((CUdeviceptr)addr, size)));
    if (rc == CA_OK) ca_peers_unmap(cb->ordinal, addr);
    return rc;
}

/* cuMemAlloc and cuMemFree are calls a capture may forbid: none while one is
 * under way (a classic segment is then not made or given back). */
static int b_fixed_alloc(void *self, size_t size, uintptr_t *addr) {
    cuda_backend *cb = self;
    CUdeviceptr p = 0;
    if (!ca_capture_guard_enter()) return CA_ERR_BACKEND;
    int rc = status(IN_CTX(cb, ca_drv()->cuMemAlloc_v2(&p, size)));
    ca_capture_guard_leave();
    if (rc == CA_OK) *addr = (uintptr_t)p;
    return rc;
}

static int b_fixed_free(void *self, uintptr_t addr, size_t size) {
    cuda_backend *cb = self;
    if (!ca_capture_guard_enter()) return CA_ERR_BACKEND;
    int rc = status(IN_CTX(cb, ca_drv()->cuMemFree_v2((CUdeviceptr)addr)));
    ca_capture_guard_leave();
    return rc;
}

static int b_mem_info(void *self, size_t *free_bytes, size_t *total) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, ca_drv()->cuMemGetInfo_v2(free_bytes, total)));
}

/* ---- events, kept for reuse: creating one costs more than recording it ---- */

static CUevent get_event(cuda_backend *cb) {
    CUevent e = NULL;
    ca_lock_acquire(&cb->lock);
    if (cb->nspare) e = cb->spare[--cb->nspare];
    ca_lock_release(&cb->lock);
    if (!e && IN_CTX(cb, ca_drv()->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) e = NULL;
    return e;
}

static void put_event(cuda_backend *cb, CUevent e) {
    ca_lock_acquire(&cb->lock);
    if (cb->nspare == cb->spare_cap) {
        size_t cap = cb->spare_cap ? 2 * cb->spare_cap : 16;
        CUevent *v = realloc(cb->spare, cap * sizeof *v);
        if (v) cb->spare = v, cb->spare_cap = cap;
    }
    bool kept = cb->nspare < cb->spare_cap;
    if (kept) cb->spare[cb->nspare++] = e;
    ca_lock_release(&cb->lock);
    if (!kept) ca_drv()->cuEventDestroy_v2(e);
}

/* A pool's key as a stream handle (preload.h: ca_stream_key); false for
 * another thread's per-thread stream, which cannot be named from here. */
static bool name_stream(ca_stream key, CUstream *s) {
    if (ca_is_ptds_key(key)) {
        *s = CU_STREAM_PER_THREAD;
        return key == ca_ptds_key();
    }
    *s = (CUstream)key;
    return true;
}

/* An event recorded on a stream of another context than the device's is made
 * in that context (an event and the stream it is recorded on must be of one
 * context: cuEventRecord), used once, and marked by its low bit. */
#define FOREIGN 1u

static int record_foreign(CUcontext ctx, CUstream s, ca_event *ev) {
    const ca_driver *d = ca_drv();
    CUevent e = NULL;
    CUcontext popped;
    if (d->cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS) return CA_ERR_BACKEND;
    CUresult r = d->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS && (r = d->cuEventRecord(e, s)) != CUDA_SUCCESS) d->cuEventDestroy_v2(e);
    d->cuCtxPopCurrent_v2(&popped);
    if (r == CUDA_SUCCESS) *ev = (ca_event)(uintptr_t)e | FOREIGN;
    return status(r);
}

static CUevent event_of(ca_event ev) { return (CUevent)(uintptr_t)(ev & ~(ca_event)FOREIGN); }

/* Stream order: refused while a capture is under way (the block then waits
 * for a fence after it). */
static int b_event_record(void *self, ca_stream stream, ca_event *ev) {
    cuda_backend *cb = self;
    CUstream s;
    if (!name_stream(stream, &s)) return CA_ERR_INVALID;
    CUcontext owner = ca_stream_ctx(s);
    if (owner && owner != cb->ctx) {
        if (!ca_capture_guard_enter()) return CA_ERR_BACKEND;
        int rc = record_foreign(owner, s, ev);
        ca_capture_guard_leave();
        return rc;
    }
    CUevent e = get_event(cb);
    if (!e) return CA_ERR_BACKEND;
    CUresult r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (ca_capture_guard_enter()) {
        r = IN_CTX(cb, ca_drv()->cuEventRecord(e, s));
        ca_capture_guard_leave();
    }
    if (r != CUDA_SUCCESS) {
        put_event(cb, e);
        return CA_ERR_BACKEND;
    }
    *ev = (ca_event)(uintptr_t)e;
    return CA_OK;
}

static int b_stream_wait(void *self, ca_stream stream, ca_event ev) {
    cuda_backend *cb = self;
    CUstream s;
    if (!name_stream(stream, &s)) return CA_ERR_INVALID;
    if (!ca_capture_guard_enter()) return CA_ERR_BACKEND;
    CUresult r = IN_CTX(cb, ca_drv()->cuStreamWaitEvent(s, event_of(ev), 0));
    ca_capture_guard_leave();
    return r == CUDA_SUCCESS ? CA_OK : CA_ERR_BACKEND;
}

/* The wait already took the event's point: the event may be recorded again. */
static void b_event_destroy(void *self, ca_event ev) {
    if (ev & FOREIGN) ca_drv()->cuEventDestroy_v2(event_of(ev));
    else put_event(self, event_of(ev));
}

/* Done only when the stream's work is: a stream that cannot be waited for
 * (destroyed since: its handle is gone, its work folded into the legacy
 * stream) is covered by the whole device; when that cannot be waited for
 * either, nothing may be unmapped. */
static int b_stream_sync(void *self, ca_stream stream) {
    cuda_backend *cb = self;
    CUstream s;
    const ca_driver *d = ca_drv();
    if (!ca_capture_guard_enter()) return CA_ERR_BACKEND;
    answer a = name_stream(stream, &s) ? answer_of(IN_CTX(cb, d->cuStreamSynchronize(s))) : UNKNOWN;
    if (a != DONE) a = sync_device(cb);
    ca_capture_guard_leave();
    return a == DONE ? CA_OK : CA_ERR_BACKEND;
}

/* A pool's stream is one: the legacy and per-thread streams always; a handle
 * when streams.c knows it, or else when the driver says it is one (a stream
 * made past our hooks). A handle the driver calls invalid (never a stream,
 * or destroyed) gets no pool, as cuMemAllocAsync would refuse it. */
static int b_stream_check(void *self, ca_stream key) {
    const ca_driver *d = ca_drv();
    CUstream s = (CUstream)key;
    unsigned flags;
    if (!key || ca_is_ptds_key(key) || ca_streams_known(s) || !d->cuStreamGetFlags) return CA_OK;
    CUresult r = d->cuStreamGetFlags(s, &flags);
    return r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_CONTEXT_IS_DESTROYED ? CA_ERR_STREAM : CA_OK;
}

/* ---- fences: a plain free's point in every stream (streams.c says which) ---- */

typedef struct cuda_fence {
    struct cuda_fence *next; /* spare list */
    unsigned n, done, cap;   /* events, how many are known passed, room */
    CUevent ev[];            /* [0] on the legacy stream, then one per non-blocking stream */
} cuda_fence;

static cuda_fence *get_fence(cuda_backend *cb, unsigned n) {
    ca_lock_acquire(&cb->lock);
    cuda_fence **link = &cb->spare_fences;
    while (*link && (*link)->cap < n) link = &(*link)->next;
    cuda_fence *f = *link;
    if (f) *link = f->next;
    ca_lock_release(&cb->lock);
    if (!f && (f = malloc(sizeof *f + n * sizeof f->ev[0]))) f->cap = n;
    if (f) f->n = f->done = 0;
    return f;
}

static void b_fence_destroy(void *self, ca_fence fence) {
    cuda_backend *cb = self;
    cuda_fence *f = (cuda_fence *)(uintptr_t)fence;
    for (unsigned i = 0; i < f->n; i++) put_event(cb, f->ev[i]);
    ca_lock_acquire(&cb->lock);
    f->next = cb->spare_fences;
    cb->spare_fences = f;
    ca_lock_release(&cb->lock);
}

/* An event on s in the fence; the event goes back on failure. */
static CUresult record_on(cuda_backend *cb, cuda_fence *f, CUstream s) {
    CUevent e = get_event(cb);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = ca_drv()->cuEventRecord(e, s);
    if (r != CUDA_SUCCESS) put_event(cb, e);
    else f->ev[f->n++] = e;
    return r;
}

/* One event for all the context's work (cuCtxRecordEvent, CUDA 12.5+). */
static CUresult record_context(cuda_backend *cb, cuda_fence *f) {
    CUevent e = get_event(cb);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = ca_drv()->cuCtxRecordEvent(cb->ctx, e);
    if (r != CUDA_SUCCESS) put_event(cb, e);
    else f->ev[f->n++] = e;
    return r;
}

/* The point "now" in every stream of the device: one event for the whole
 * context where the driver has cuCtxRecordEvent, else the legacy event and
 * one on each non-blocking stream. With no non-blocking stream on this
 * device (other devices have some), the legacy event alone orders later
 * uses (0). Under the registry's lock. A fence that cannot be recorded is
 * replaced by synchronizing the device (0); when that fails too, there is
 * no fence (the error): the blocks stay pending. No stream is forgotten for
 * a failed record: it may be capturing, or the error passing. */
static CUresult record_fence(cuda_backend *cb, ca_fence *out, bool done) {
    *out = 0;
    CUstream few[16], *nb = few;
    /* with the context's event, whether there is a non-blocking stream is
     * enough: counting them all made each fence O(streams) (issue 29) */
    bool can_whole = ca_drv()->cuCtxRecordEvent && ca_conf.context_fences;
    size_t n = ca_streams_nonblocking(cb->ctx, can_whole ? NULL : few, can_whole ? 0 : 16);
    bool whole = n && can_whole;
    if (!whole && n > 16 && (nb = malloc(n * sizeof *nb))) ca_streams_nonblocking(cb->ctx, nb, n);
    cuda_fence *f = nb ? get_fence(cb, whole ? 1 : (unsigned)n + 1) : NULL;
    CUresult r = f ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS && whole) r = record_context(cb, f);
    else if (r == CUDA_SUCCESS) r = record_on(cb, f, CU_STREAM_LEGACY);
    for (size_t i = 0; r == CUDA_SUCCESS && !whole && i < n; i++) r = record_on(cb, f, nb[i]);
    if (nb && nb != few) free(nb);
    if (r != CUDA_SUCCESS) {
        if (f) b_fence_destroy(cb, (ca_fence)(uintptr_t)f);
        return sync_device(cb) == DONE ? CUDA_SUCCESS : r;
    }
    if (!done && !n) { /* the legacy event alone: ordered, passed at record */
        b_fence_destroy(cb, (ca_fence)(uintptr_t)f);
        ca_streams_fenced_ordered();
        return CUDA_SUCCESS;
    }
    *out = (ca_fence)(uintptr_t)f;
    return CUDA_SUCCESS;
}

/* Without non-blocking streams, the legacy event alone orders every later
 * use of the blocks after the work before it (streams.c): the fence has
 * passed at record (0), and costs one event record. */
static CUresult record_ordered(cuda_backend *cb, bool *ordered) {
    const ca_driver *d = ca_drv();
    *ordered = false;
    CUevent e = __atomic_load_n(&cb->barrier, __ATOMIC_ACQUIRE), mine = NULL;
    if (!e && d->cuEventCreate(&mine, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
        if (__atomic_compare_exchange_n(&cb->barrier, &e, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) e = mine;
        else d->cuEventDestroy_v2(mine); /* another thread made it first: e is theirs */
    }
    if (!e || d->cuEventRecord(e, CU_STREAM_LEGACY) != CUDA_SUCCESS) return CUDA_SUCCESS;
    *ordered = ca_fence_is_ordered();
    return CUDA_SUCCESS;
}

/* While a capture is under way no fence is recorded (an event on a stream in
 * it would join the capture, one on the legacy stream may invalidate it, and
 * cuCtxRecordEvent invalidates every capture of its context). */
static int record(cuda_backend *cb, ca_fence *out, bool done) {
    *out = 0;
    if (!ca_capture_guard_enter()) return CA_ERR_BACKEND;
    bool ordered = false;
    if (!done && ca_streams_none_nonblocking()) IN_CTX(cb, record_ordered(cb, &ordered));
    CUresult r = CUDA_SUCCESS;
    if (!ordered) {
        ca_streams_lock();
        r = IN_CTX(cb, record_fence(cb, out, done));
        ca_streams_unlock();
    }
    ca_capture_guard_leave();
    return r == CUDA_SUCCESS ? CA_OK : CA_ERR_BACKEND;
}

static int b_fence_record(void *self, ca_fence *out) { return record(self, out, false); }

/* A fence for unmapping (backend.h): the legacy event alone is queried too,
 * never taken as passed because it orders later work. */
static int b_fence_record_done(void *self, ca_fence *out) { return record(self, out, true); }

/* Passed when every event is done; an event query is what a capture may
 * forbid, so none is asked while one is under way. */
static int b_fence_query(void *self, ca_fence fence) {
    cuda_fence *f = (cuda_fence *)(uintptr_t)fence;
    const ca_driver *d = ca_drv();
    if (!ca_capture_guard_enter()) return 0;
    while (f->done < f->n && answer_of(d->cuEventQuery(f->ev[f->done])) == DONE) f->done++;
    ca_capture_guard_leave();
    return f->done == f->n;
}

/* An event that cannot be waited for is replaced by the whole device; when
 * that cannot be waited for either, the memory stays busy (0). */
static int b_fence_wait(void *self, ca_fence fence) {
    cuda_backend *cb = self;
    cuda_fence *f = (cuda_fence *)(uintptr_t)fence;
    const ca_driver *d = ca_drv();
    if (!ca_capture_guard_enter()) return 0;
    while (f->done < f->n && answer_of(d->cuEventSynchronize(f->ev[f->done])) == DONE) f->done++;
    if (f->done < f->n && sync_device(cb) == DONE) f->done = f->n;
    ca_capture_guard_leave();
    return f->done == f->n;
}

/* ---- stream capture (capture.c) ---- */

CUresult ca_backend_cuda_capture_probe(ca_backend *be) {
    cuda_backend *cb = be->self;
    const ca_driver *d = ca_drv();
    CUevent e = __atomic_load_n(&cb->probe, __ATOMIC_ACQUIRE), mine = NULL;
    if (!e && IN_CTX(cb, d->cuEventCreate(&mine, CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS) {
        if (__atomic_compare_exchange_n(&cb->probe, &e, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) e = mine;
        else d->cuEventDestroy_v2(mine);
    }
    return e ? d->cuEventQuery(e) : CUDA_SUCCESS; /* never recorded: done, unless the call is refused */
}

void ca_backend_cuda_order_after_fences(ca_backend *be, CUstream s) {
    cuda_backend *cb = be->self;
    CUevent e = __atomic_load_n(&cb->barrier, __ATOMIC_ACQUIRE);
    if (e) IN_CTX(cb, ca_drv()->cuStreamWaitEvent(s, e, 0));
}

bool ca_backend_cuda_shareable(const ca_backend *be) {
    const cuda_backend *cb = be->self;
    return __atomic_load_n(&cb->prop.requestedHandleTypes, __ATOMIC_RELAXED) != CU_MEM_HANDLE_TYPE_NONE;
}

void ca_backend_cuda_drop_events(ca_backend *be) {
    cuda_backend *cb = be->self;
    ca_lock_acquire(&cb->lock);
    CUevent *spare = cb->spare;
    size_t n = cb->nspare;
    cuda_fence *f = cb->spare_fences;
    cb->spare = NULL;
    cb->nspare = cb->spare_cap = 0;
    cb->spare_fences = NULL;
    ca_lock_release(&cb->lock);
    for (size_t i = 0; i < n; i++) ca_drv()->cuEventDestroy_v2(spare[i]);
    free(spare);
    if (cb->barrier) ca_drv()->cuEventDestroy_v2(cb->barrier);
    if (cb->probe) ca_drv()->cuEventDestroy_v2(cb->probe);
    cb->barrier = cb->probe = NULL;
    while (f) {
        cuda_fence *next = f->next;
        free(f);
        f = next;
    }
}

static void b_destroy(ca_backend *be) {
    ca_backend_cuda_drop_events(be);
    free(be->self);
    free(be);
}

static int attribute(const ca_driver *d, CUdevice_attribute a, int ordinal, int otherwise) {
    int v = otherwise;
    if (d->cuDeviceGetAttribute && d->cuDeviceGetAttribute(&v, a, ordinal) != CUDA_SUCCESS) v = otherwise;
    return v;
}

#define CLASSIC_GRANULE ((size_t)2 << 20) /* what the allocator rounds to where there is no VMM */

ca_backend *ca_backend_cuda_new(int ordinal, CUcontext ctx, bool *vmm) {
    const ca_driver *d = ca_drv();
    if (!d) return NULL;
    cuda_backend *cb = calloc(1, sizeof *cb);
    ca_backend *be = calloc(1, sizeof *be);
    if (!cb || !be) goto fail;
    cb->ordinal = ordinal;
    cb->ctx = ctx;
    cb->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    cb->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    cb->prop.location.id = ordinal;
    /* as PyTorch's expandable segments ask: shareable, and usable by RDMA (NICs, NCCL) where supported */
    if (attribute(d, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, ordinal, 0))
        cb->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (attribute(d, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, ordinal, 0))
        cb->prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t granule = 0;
    *vmm = attribute(d, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, ordinal, 1) != 0;
    CUresult r = *vmm ? IN_CTX(cb, d->cuMemGetAllocationGranularity(&granule, &cb->prop,
                                                                     CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
                      : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_ERROR_NOT_SUPPORTED) { /* no VMM here: classic segments only */
        *vmm = false;
        granule = CLASSIC_GRANULE;
    } else if (r != CUDA_SUCCESS || !granule || (granule & (granule - 1))) {
        goto fail;
    }
    bool events = d->cuEventCreate && d->cuEventRecord && d->cuEventDestroy_v2 && d->cuStreamWaitEvent &&
                  d->cuStreamSynchronize && d->cuCtxSynchronize;
    bool fences = events && d->cuEventQuery && d->cuEventSynchronize;
    *be = (ca_backend){
        .name = "cuda",
        .self = cb,
        .granule = granule,
        .reserve = b_reserve,
        .unreserve = b_unreserve,
        .create = b_create,
        .release = b_release,
        .map = b_map,
        .unmap = b_unmap,
        .fixed_alloc = b_fixed_alloc,
        .fixed_free = b_fixed_free,
        .mem_info = b_mem_info,
        .event_record = events ? b_event_record : NULL,
        .stream_wait = events ? b_stream_wait : NULL,
        .event_destroy = events ? b_event_destroy : NULL,
        .stream_sync = events ? b_stream_sync : NULL,
        .stream_check = b_stream_check,
        .fence_record = fences ? b_fence_record : NULL,
        .fence_query = fences ? b_fence_query : NULL,
        .fence_wait = fences ? b_fence_wait : NULL,
        .fence_destroy = fences ? b_fence_destroy : NULL,
        .fence_record_done = fences ? b_fence_record_done : NULL,
        .destroy = b_destroy,
    };
    return be;
fail:
    free(cb);
    free(be);
    return NULL;
}

/* What every entry point shares: allocate on the current device, free on the
 * owning device, and the memory figures with our cache counted as free. */
#include "preload/log.h"
#include "preload/preload.h"
#include "util/checked.h"

static bool capture_error(CUresult r) {
    return r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

/* While a capture is under way (capture.c): the driver's answer to a call
 * that the capture forbids when it forbids cudaMalloc and cudaFree. */
static CUresult capture_probe(ca_device *d) {
    CUresult r = ca_backend_cuda_capture_probe(d->backend);
    return capture_error(r) ? r : CUDA_SUCCESS;
}

__attribute__((noinline, cold)) CUresult ca_malloc_failed(ca_device *d, int rc, const ca_oom_info *oom) {
    if (rc == CA_ERR_OOM) {
        ca_report_oom(d, oom);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc == CA_ERR_STREAM ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_UNKNOWN;
}

/* While a capture is under way: the graph's allocation, or what the capture
 * forbids; CUDA_ERROR_NOT_FOUND when neither (the allocator's then). */
__attribute__((noinline)) static CUresult malloc_in_capture(ca_device *d, CUdeviceptr *dptr, size_t size,
                                                            CUstream stream, bool async) {
    if (async && ca_stream_capturing(stream)) return ca_capture_malloc(d, dptr, size, stream); /* the graph's */
    CUresult r = async ? CUDA_SUCCESS : capture_probe(d);
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_NOT_FOUND;
}

static CUresult malloc_on(ca_device *d, CUdeviceptr *dptr, size_t size, CUstream stream, bool async) {
    if (ca_capture_any()) {
        CUresult r = malloc_in_capture(d, dptr, size, stream, async);
        if (r != CUDA_ERROR_NOT_FOUND) return r;
    }
    ca_stream key = ca_stream_key(stream);
    if (ca_is_ptds_key(key)) ca_ptds_pool_used(d);
    return ca_malloc_on(d, dptr, size, key, async);
}

CUresult ca_malloc_slowly(CUdeviceptr *dptr, size_t size, CUstream stream, bool async) {
    CUresult err;
    ca_device *d = ca_current_device(&err);
    if (!d) return err;
    ca_device_use(d);
    CUresult r = malloc_on(d, dptr, size, stream, async);
    ca_device_done(d);
    return r;
}

CUresult ca_do_malloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, size_t depth) {
    size_t p, rows, bytes;
    if (!ca_size_round_up(width, CA_PITCH, &p) || !ca_size_mul(height, depth, &rows) || !ca_size_mul(p, rows, &bytes)) {
        if (ca_conf.oom_message)
            ca_warn("out of memory: %zu x %zu x %zu bytes (rows of %zu rounded up to %d) is more than 2^64 - 1 "
                    "bytes, larger than any device",
                    width, height, depth, width, CA_PITCH);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = ca_do_malloc(dptr, bytes, NULL, false);
    if (r == CUDA_SUCCESS) *pitch = p;
    return r;
}

/* ptr freed by the device that owns it, each in turn; CA_ERR_INVALID when none does. */
static int free_on_owner(void *ptr, ca_stream stream, bool plain, bool device_idle) {
    int n;
    ca_device *const *devs = ca_devices_made(&n);
    for (int i = 0; i < n; i++) {
        int rc = ca_free_on(devs[i], ptr, stream, plain, device_idle);
        if (rc == CA_OK || rc == CA_ERR_STREAM) return rc; /* CA_ERR_STREAM: not a stream, nothing freed */
    }
    return CA_ERR_INVALID;
}

/* cudaFree's own semantics: the owning device's work done first (its
 * context made current for the call: the current one may be another's).
 * True when it was. */
static bool sync_owner(ca_device *d) {
    const ca_driver *drv = ca_drv();
    CUcontext cur = NULL, popped;
    drv->cuCtxGetCurrent(&cur);
    bool push = cur != d->ctx && drv->cuCtxPushCurrent_v2;
    if (push && drv->cuCtxPushCurrent_v2(d->ctx) != CUDA_SUCCESS) return false;
    bool done = drv->cuCtxSynchronize() == CUDA_SUCCESS;
    if (push) drv->cuCtxPopCurrent_v2(&popped);
    return done;
}

/* What comes before a free while a capture is under way, or with sync_free:
 * true when that answered the free (*r). While a capture is under way, a
 * plain free answers what the capture lets this thread do, and a free in a
 * capturing stream's order is the driver's to answer: a free node for memory
 * that is not the graph's is refused (capture.c). */
__attribute__((noinline)) static bool free_first(CUdeviceptr ptr, CUstream stream, bool plain, bool *device_idle,
                                                 CUresult *r) {
    ca_device *owner;
    if (ca_capture_any() && (owner = ca_owner((void *)ptr))) {
        if (!plain && ca_stream_capturing(stream)) return *r = ca_drv()->cuMemFreeAsync(ptr, stream), true;
        ca_device_use(owner);
        *r = plain ? capture_probe(owner) : CUDA_SUCCESS;
        ca_device_done(owner);
        return *r != CUDA_SUCCESS;
    }
    if (plain && ca_conf.sync_free && (owner = ca_owner((void *)ptr)))
        *device_idle = sync_owner(owner); /* not synchronized: the block waits for a fence */
    return false;
}

/* No device freed ptr: a bad free if it is inside one's blocks, else not ours. */
__attribute__((noinline, cold)) static CUresult free_not_found(CUdeviceptr ptr) {
    if (ca_owner((void *)ptr)) {
        ca_warn("bad free of device pointer %p: not the start of a live allocation (freed already, or inside "
                "a block); ignored", (void *)ptr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult ca_free_slowly(CUdeviceptr ptr, CUstream stream, bool plain) {
    bool device_idle = false;
    CUresult r;
    if ((ca_capture_any() || (plain && ca_conf.sync_free)) && free_first(ptr, stream, plain, &device_idle, &r))
        return r;
    int rc = free_on_owner((void *)ptr, ca_stream_key(stream), plain, device_idle);
    if (rc == CA_OK) {
        ca_ipc_block_freed((void *)ptr);
        return CUDA_SUCCESS;
    }
    return rc == CA_ERR_STREAM ? CUDA_ERROR_INVALID_HANDLE : free_not_found(ptr);
}

CUresult ca_do_mem_info(size_t *free_bytes, size_t *total_bytes) {
    const ca_driver *drv = ca_drv();
    size_t f = 0, t = 0;
    CUresult r = drv->cuMemGetInfo_v2(&f, &t);
    if (r != CUDA_SUCCESS) return r;
    CUresult err;
    ca_device *d = ca_current_device(&err);
    if (d) { /* our cache is free; max_reserved is the device */
        ca_device_use(d);
        ca_mem_info(d->alloc, &f, &t);
        ca_device_done(d);
    }
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return CUDA_SUCCESS;
}

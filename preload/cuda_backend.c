/* The allocator's backend on the real driver: virtual memory management
 * (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
 * cuMemRelease) for expandable segments, cuMemAlloc for classic ones, events
 * for stream order. Calls run in the device's context, made current for the
 * call when the calling thread has another one (or none). */
#include <stdlib.h>

#include "preload/preload.h"

typedef struct cuda_backend {
    int ordinal;
    CUcontext ctx;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
} cuda_backend;

/* Run in the device's context: push it only when it is not current already. */
#define IN_CTX(cb, call)                                                        \
    ({                                                                          \
        const ca_driver *d_ = ca_drv();                                         \
        CUcontext cur_ = NULL, popped_;                                         \
        d_->cuCtxGetCurrent(&cur_);                                             \
        bool push_ = cur_ != (cb)->ctx && d_->cuCtxPushCurrent_v2;              \
        if (push_) d_->cuCtxPushCurrent_v2((cb)->ctx);                          \
        CUresult r_ = (call);                                                   \
        if (push_) d_->cuCtxPopCurrent_v2(&popped_);                            \
        r_;                                                                     \
    })

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

static int b_create(void *self, size_t size, ca_handle *h) {
    cuda_backend *cb = self;
    CUmemGenericAllocationHandle handle = 0;
    int rc = status(IN_CTX(cb, ca_drv()->cuMemCreate(&handle, size, &cb->prop, 0)));
    if (rc == CA_OK) *h = (ca_handle)handle;
    return rc;
}

static int b_release(void *self, ca_handle h) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, ca_drv()->cuMemRelease((CUmemGenericAllocationHandle)h)));
}

static CUresult map_and_grant(cuda_backend *cb, uintptr_t addr, size_t size, ca_handle h) {
    const ca_driver *d = ca_drv();
    CUresult r = d->cuMemMap((CUdeviceptr)addr, size, 0, (CUmemGenericAllocationHandle)h, 0);
    if (r != CUDA_SUCCESS) return r;
    r = d->cuMemSetAccess((CUdeviceptr)addr, size, &cb->access, 1);
    if (r != CUDA_SUCCESS) d->cuMemUnmap((CUdeviceptr)addr, size);
    return r;
}

static int b_map(void *self, uintptr_t addr, size_t size, ca_handle h) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, map_and_grant(cb, addr, size, h)));
}

static int b_unmap(void *self, uintptr_t addr, size_t size) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, ca_drv()->cuMemUnmap((CUdeviceptr)addr, size)));
}

static int b_fixed_alloc(void *self, size_t size, uintptr_t *addr) {
    cuda_backend *cb = self;
    CUdeviceptr p = 0;
    int rc = status(IN_CTX(cb, ca_drv()->cuMemAlloc_v2(&p, size)));
    if (rc == CA_OK) *addr = (uintptr_t)p;
    return rc;
}

static int b_fixed_free(void *self, uintptr_t addr, size_t size) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, ca_drv()->cuMemFree_v2((CUdeviceptr)addr)));
}

static int b_mem_info(void *self, size_t *free_bytes, size_t *total) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, ca_drv()->cuMemGetInfo_v2(free_bytes, total)));
}

static int b_event_record(void *self, ca_stream stream, ca_event *ev) {
    cuda_backend *cb = self;
    const ca_driver *d = ca_drv();
    CUevent e = NULL;
    CUresult r = IN_CTX(cb, d->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    if (r == CUDA_SUCCESS) r = IN_CTX(cb, d->cuEventRecord(e, (CUstream)stream));
    if (r != CUDA_SUCCESS) {
        if (e) d->cuEventDestroy_v2(e);
        return status(r);
    }
    *ev = (ca_event)(uintptr_t)e;
    return CA_OK;
}

static int b_stream_wait(void *self, ca_stream stream, ca_event ev) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, ca_drv()->cuStreamWaitEvent((CUstream)stream, (CUevent)(uintptr_t)ev, 0)));
}

static void b_event_destroy(void *self, ca_event ev) { ca_drv()->cuEventDestroy_v2((CUevent)(uintptr_t)ev); }

static int b_stream_sync(void *self, ca_stream stream) {
    cuda_backend *cb = self;
    return status(IN_CTX(cb, ca_drv()->cuStreamSynchronize((CUstream)stream)));
}

static void b_destroy(ca_backend *be) {
    free(be->self);
    free(be);
}

ca_backend *ca_backend_cuda_new(int ordinal, CUcontext ctx) {
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
    cb->access.location = cb->prop.location;
    cb->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t granule = 0;
    if (IN_CTX(cb, d->cuMemGetAllocationGranularity(&granule, &cb->prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) !=
            CUDA_SUCCESS ||
        !granule || (granule & (granule - 1)))
        goto fail;
    bool events = d->cuEventCreate && d->cuEventRecord && d->cuEventDestroy_v2 && d->cuStreamWaitEvent &&
                  d->cuStreamSynchronize;
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
        .destroy = b_destroy,
    };
    return be;
fail:
    free(cb);
    free(be);
    return NULL;
}

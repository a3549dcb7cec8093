/* Allocators beside ours in the same process: NCCL (2.19 and later) and
 * PyTorch's expandable segments create memory with cuMemCreate, managed and
 * pool allocations (cuMemAllocManaged, cuMemAllocFromPoolAsync) go around us
 * too. cudaMemGetInfo told them our cache is free; when the driver then has
 * too little for them, the cache goes back to it and the call is made once
 * more, as we do for our own requests and PyTorch does for its cuMemCreate. */
#include "preload/log.h"
#include "preload/preload.h"

static void release(ca_device *d, void *ctx) {
    ca_stats s;
    ca_get_stats(d->alloc, &s);
    if (s.reserved_bytes[CA_POOL_ALL].current == s.allocated_bytes[CA_POOL_ALL].current) return;
    ca_release(d->alloc);
    *(bool *)ctx = true;
}

/* Out of memory: true when our cache went back, so a retry may succeed. */
static bool gave_back(CUresult r, const char *call, size_t size) {
    if (r != CUDA_ERROR_OUT_OF_MEMORY) return false;
    bool any = false;
    ca_devices_foreach(release, &any);
    static bool told;
    if (any && !__atomic_exchange_n(&told, true, __ATOMIC_RELAXED))
        ca_warn("%s of %zu bytes (an allocator beside cudalloc) ran out of memory: cudalloc gave its cache back "
                "and the call was made again (said once)", call, size);
    return any;
}

CA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags) {
    const ca_driver *drv = ca_drv();
    if (!drv) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuMemCreate(handle, size, prop, flags);
    return gave_back(r, "cuMemCreate", size) ? drv->cuMemCreate(handle, size, prop, flags) : r;
}

CA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuMemAllocManaged) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = drv->cuMemAllocManaged(dptr, bytesize, flags);
    return gave_back(r, "cuMemAllocManaged", bytesize) ? drv->cuMemAllocManaged(dptr, bytesize, flags) : r;
}

static CUresult from_pool(CUresult (*real)(CUdeviceptr *, size_t, CUmemoryPool, CUstream), CUdeviceptr *dptr,
                          size_t bytesize, CUmemoryPool pool, CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(dptr, bytesize, pool, stream);
    return gave_back(r, "cuMemAllocFromPoolAsync", bytesize) ? real(dptr, bytesize, pool, stream) : r;
}

CA_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return from_pool(ca_drv() ? ca_drv()->cuMemAllocFromPoolAsync : NULL, dptr, bytesize, pool, hStream);
}

CA_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream hStream) {
    return from_pool(ca_drv() ? ca_drv()->cuMemAllocFromPoolAsync_ptsz : NULL, dptr, bytesize, pool, hStream);
}

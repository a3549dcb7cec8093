/* Runtime memory calls, each one driver call away: cudaMalloc is cuMemAlloc_v2,
 * cudaMallocPitch and cudaMalloc3D cuMemAllocPitch_v2, cudaMallocAsync
 * cuMemAllocAsync, cudaMemGetInfo cuMemGetInfo_v2, and so on.
 * The _ptds/_ptsz entry points (programs built with --default-stream
 * per-thread) use the per-thread driver variants. */
#include "simgpu/rt.h"
#include "util/checked.h"

CA_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    if (!devPtr)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = ca_rt_enter();
    if (e != cudaSuccess || size == 0) {
        if (e == cudaSuccess)
            *devPtr = NULL;
        return ca_rt_ret(e);
    }
    CUdeviceptr p;
    e = CA_RT_CALL(ca_rt.MemAlloc, &p, size);
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return ca_rt_ret(e);
}

/* Pitched memory is cuMemAllocPitch's (4-byte elements). A zero width or
 * height allocates nothing: cudaSuccess, a NULL pointer, pitch 0. */
static cudaError_t malloc_pitch(void **devPtr, size_t *pitch, size_t width, size_t rows)
{
    cudaError_t e = ca_rt_enter();
    if (e != cudaSuccess || width == 0 || rows == 0) {
        if (e == cudaSuccess)
            *devPtr = NULL, *pitch = 0;
        return ca_rt_ret(e);
    }
    CUdeviceptr p;
    size_t pp;
    e = CA_RT_CALL(ca_rt.MemAllocPitch, &p, &pp, width, rows, 4);
    if (e == cudaSuccess)
        *devPtr = (void *)p, *pitch = pp;
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    if (!devPtr || !pitch)
        return ca_rt_ret(cudaErrorInvalidValue);
    return malloc_pitch(devPtr, pitch, width, height);
}

/* Depth slices of height rows each: height * depth rows. More rows than
 * 2^64 - 1 is more than any device. */
CA_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
    if (!pitchedDevPtr)
        return ca_rt_ret(cudaErrorInvalidValue);
    size_t rows;
    if (!ca_size_mul(extent.height, extent.depth, &rows))
        return ca_rt_ret(cudaErrorMemoryAllocation);
    void *p = NULL;
    size_t pitch = 0;
    cudaError_t e = malloc_pitch(&p, &pitch, extent.width, rows);
    if (e == cudaSuccess)
        *pitchedDevPtr = (struct cudaPitchedPtr){.ptr = p, .pitch = pitch, .xsize = extent.width,
                                                 .ysize = extent.height};
    return e;
}

/* cudaFree(0) only initializes, the classic way to create the context. */
CA_EXPORT cudaError_t cudaFree(void *devPtr)
{
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess && devPtr)
        e = CA_RT_CALL(ca_rt.MemFree, (CUdeviceptr)devPtr);
    return ca_rt_ret(e);
}

static cudaError_t malloc_async(const struct ca_rt_streamfns *f, void **devPtr, size_t size,
                                cudaStream_t stream)
{
    if (!devPtr)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = ca_rt_enter();
    if (e != cudaSuccess || size == 0) {
        if (e == cudaSuccess)
            *devPtr = NULL;
        return ca_rt_ret(e);
    }
    CUdeviceptr p;
    e = CA_RT_CALL(f->MemAllocAsync, &p, size, stream);
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return ca_rt_ret(e);
}

static cudaError_t free_async(const struct ca_rt_streamfns *f, void *devPtr, cudaStream_t stream)
{
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess && devPtr)
        e = CA_RT_CALL(f->MemFreeAsync, (CUdeviceptr)devPtr, stream);
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream)
{
    return malloc_async(&ca_rt.legacy, devPtr, size, stream);
}

CA_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream)
{
    return malloc_async(&ca_rt.ptsz, devPtr, size, stream);
}

CA_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream)
{
    return free_async(&ca_rt.legacy, devPtr, stream);
}

CA_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream)
{
    return free_async(&ca_rt.ptsz, devPtr, stream);
}

CA_EXPORT cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.MemGetInfo, free, total);
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    if (!pHost)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = ca_rt_enter();
    if (e != cudaSuccess || size == 0) {
        if (e == cudaSuccess)
            *pHost = NULL;
        return ca_rt_ret(e);
    }
    return ca_rt_ret(CA_RT_CALL(ca_rt.MemHostAlloc, pHost, size, flags));
}

CA_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

CA_EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess && ptr)
        e = CA_RT_CALL(ca_rt.MemFreeHost, ptr);
    return ca_rt_ret(e);
}

/* The direction picks the driver call, which checks the device side(s). */
static cudaError_t copy(const struct ca_rt_streamfns *f, void *dst, const void *src, size_t count,
                        enum cudaMemcpyKind kind, int async, cudaStream_t s)
{
    cudaError_t e = ca_rt_enter();
    if (e != cudaSuccess)
        return ca_rt_ret(e);
    CUdeviceptr d = (CUdeviceptr)dst, h = (CUdeviceptr)src;
    switch (kind) {
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
        e = async ? CA_RT_CALL(f->MemcpyAsync, d, h, count, s) : CA_RT_CALL(f->Memcpy, d, h, count);
        break;
    case cudaMemcpyHostToDevice:
        e = async ? CA_RT_CALL(f->MemcpyHtoDAsync, d, src, count, s) : CA_RT_CALL(f->MemcpyHtoD, d, src, count);
        break;
    case cudaMemcpyDeviceToHost:
        e = async ? CA_RT_CALL(f->MemcpyDtoHAsync, dst, h, count, s) : CA_RT_CALL(f->MemcpyDtoH, dst, h, count);
        break;
    case cudaMemcpyDeviceToDevice:
        e = async ? CA_RT_CALL(f->MemcpyDtoDAsync, d, h, count, s) : CA_RT_CALL(f->MemcpyDtoD, d, h, count);
        break;
    default:
        e = cudaErrorInvalidMemcpyDirection;
    }
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy(&ca_rt.legacy, dst, src, count, kind, 0, NULL);
}

CA_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy(&ca_rt.ptsz, dst, src, count, kind, 0, NULL);
}

CA_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream)
{
    return copy(&ca_rt.legacy, dst, src, count, kind, 1, stream);
}

CA_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                           cudaStream_t stream)
{
    return copy(&ca_rt.ptsz, dst, src, count, kind, 1, stream);
}

static cudaError_t set(const struct ca_rt_streamfns *f, void *devPtr, int value, size_t count, int async,
                       cudaStream_t s)
{
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess)
        e = async ? CA_RT_CALL(f->MemsetD8Async, (CUdeviceptr)devPtr, (unsigned char)value, count, s)
                  : CA_RT_CALL(f->MemsetD8, (CUdeviceptr)devPtr, (unsigned char)value, count);
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    return set(&ca_rt.legacy, devPtr, value, count, 0, NULL);
}

CA_EXPORT cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    return set(&ca_rt.ptsz, devPtr, value, count, 0, NULL);
}

CA_EXPORT cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return set(&ca_rt.legacy, devPtr, value, count, 1, stream);
}

CA_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return set(&ca_rt.ptsz, devPtr, value, count, 1, stream);
}

/* Memory the driver does not know is unregistered host memory (device -2),
 * as cudart answers since CUDA 11. */
CA_EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    if (!attributes)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = ca_rt_enter();
    unsigned int type = 0;
    int device = 0;
    void *host = NULL;
    CUdeviceptr dev = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_HOST_POINTER, CU_POINTER_ATTRIBUTE_DEVICE_POINTER};
    void *data[] = {&type, &device, &host, &dev};
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.PointerGetAttributes, 4, attrs, data, (CUdeviceptr)ptr);
    if (e != cudaSuccess)
        return ca_rt_ret(e);
    if (type == 0) {
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = -2;
        attributes->devicePointer = NULL;
        attributes->hostPointer = (void *)ptr;
    } else {
        attributes->type = type == CU_MEMORYTYPE_HOST ? cudaMemoryTypeHost : cudaMemoryTypeDevice;
        attributes->device = device;
        attributes->devicePointer = (void *)dev;
        attributes->hostPointer = host;
    }
    return cudaSuccess;
}

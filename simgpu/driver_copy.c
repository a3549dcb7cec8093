/* cuMemcpy* and cuMemset*: done on the spot with memmove/memset, async ones
 * included (the stream is checked, then the copy happens before returning).
 * The device of the stream (or of the current context) runs them, and must be
 * allowed to touch what they touch (driver_peer.c).
 * Device ranges are checked against what the driver handed out, so a copy past
 * the end of an allocation fails as CUDA_ERROR_INVALID_VALUE instead of
 * corrupting the host heap. */
#include <string.h>
#include <sys/mman.h>

#include "simgpu/sim.h"

enum { HOST = 1, DEVICE = 0 };

/* SYNC marks the synchronous calls, which need a current context; the async
 * ones resolve their stream instead, which checks the same. */
#define SYNC ((CUstream)-1)

static CUresult copy(uintptr_t dst, int dst_host, uintptr_t src, int src_host, size_t n,
                     CUstream stream)
{
    struct CUctx_st *ctx;
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = stream == SYNC ? ca_sim_current(&ctx) : ca_sim_stream_resolve(stream, &ref);
    if (r == CUDA_SUCCESS && stream != SYNC)
        ctx = ref.ctx;
    if (r == CUDA_SUCCESS)
        r = ca_sim_check_range(dst, n, dst_host, PROT_WRITE);
    if (r == CUDA_SUCCESS)
        r = ca_sim_check_range(src, n, src_host, PROT_READ);
    /* the device that runs the copy, or the owners for a staged one, may touch both sides */
    if (r == CUDA_SUCCESS)
        r = ca_sim_touch(ctx, dst, n, PROT_WRITE, 0);
    if (r == CUDA_SUCCESS)
        r = ca_sim_touch(ctx, src, n, PROT_READ, 0);
    int dev = r == CUDA_SUCCESS ? ctx->device : -1;
    ca_sim_unlock();
    if (r == CUDA_SUCCESS && n)
        memmove((void *)dst, (const void *)src, n);
    if (dev >= 0)
        ca_sim_activity(SIMGPU_ACT_MEMCPY, dev, 0, dst, n);
    return r;
}

/* Fills n elements of `width` bytes with the low bytes of `value`. */
static CUresult set(uintptr_t dst, unsigned value, size_t width, size_t n, CUstream stream)
{
    struct CUctx_st *ctx;
    struct ca_sim_stream_ref ref;
    ca_sim_lock();
    CUresult r = stream == SYNC ? ca_sim_current(&ctx) : ca_sim_stream_resolve(stream, &ref);
    if (r == CUDA_SUCCESS && stream != SYNC)
        ctx = ref.ctx;
    if (r == CUDA_SUCCESS && (dst % width || n > SIZE_MAX / width))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_check_range(dst, n * width, 0, PROT_WRITE);
    if (r == CUDA_SUCCESS)
        r = ca_sim_touch(ctx, dst, n * width, PROT_WRITE, 0);
    int dev = r == CUDA_SUCCESS ? ctx->device : -1;
    ca_sim_unlock();
    if (r != CUDA_SUCCESS)
        return r;
    ca_sim_activity(SIMGPU_ACT_MEMSET, dev, 0, dst, n * width);
    if (width == 1) {
        memset((void *)dst, (int)(value & 0xff), n);
    } else if (width == 2) {
        unsigned short *p = (unsigned short *)dst;
        for (size_t i = 0; i < n; i++)
            p[i] = (unsigned short)value;
    } else {
        unsigned int *p = (unsigned int *)dst;
        for (size_t i = 0; i < n; i++)
            p[i] = value;
    }
    return CUDA_SUCCESS;
}

CA_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(dst, HOST, src, HOST, n, SYNC);
}

CA_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return copy(dst, HOST, src, HOST, n, s);
}

CA_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return copy(dst, DEVICE, (uintptr_t)src, HOST, n, SYNC);
}

CA_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return copy((uintptr_t)dst, HOST, src, DEVICE, n, SYNC);
}

CA_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(dst, DEVICE, src, DEVICE, n, SYNC);
}

CA_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    return copy(dst, DEVICE, (uintptr_t)src, HOST, n, s);
}

CA_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return copy((uintptr_t)dst, HOST, src, DEVICE, n, s);
}

CA_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return copy(dst, DEVICE, src, DEVICE, n, s);
}

CA_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n)
{
    return set(dst, v, 1, n, SYNC);
}

CA_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n)
{
    return set(dst, v, 2, n, SYNC);
}

CA_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n)
{
    return set(dst, v, 4, n, SYNC);
}

CA_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
    return set(dst, v, 1, n, s);
}

CA_EXPORT CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s)
{
    return set(dst, v, 2, n, s);
}

CA_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s)
{
    return set(dst, v, 4, n, s);
}

/* Per-thread default stream variants: the synchronous ones behave the same;
 * the async ones read the NULL stream as the calling thread's stream. */
CA_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return cuMemcpy(dst, src, n);
}

CA_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return cuMemcpyAsync(dst, src, n, ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
    return cuMemcpyHtoD_v2(dst, src, n);
}

CA_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
    return cuMemcpyDtoH_v2(dst, src, n);
}

CA_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return cuMemcpyDtoD_v2(dst, src, n);
}

CA_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    return cuMemcpyHtoDAsync_v2(dst, src, n, ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return cuMemcpyDtoHAsync_v2(dst, src, n, ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return cuMemcpyDtoDAsync_v2(dst, src, n, ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n)
{
    return cuMemsetD8_v2(dst, v, n);
}

CA_EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short v, size_t n)
{
    return cuMemsetD16_v2(dst, v, n);
}

CA_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n)
{
    return cuMemsetD32_v2(dst, v, n);
}

CA_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
    return cuMemsetD8Async(dst, v, n, ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuMemsetD16Async_ptsz(CUdeviceptr dst, unsigned short v, size_t n, CUstream s)
{
    return cuMemsetD16Async(dst, v, n, ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream s)
{
    return cuMemsetD32Async(dst, v, n, ca_sim_ptsz(s));
}

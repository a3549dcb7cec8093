/* cuMemcpy* and cuMemset*: done on the spot with memmove/memset, async ones
 * included (the stream is checked, then the copy happens before returning),
 * unless the stream captures: then they are graph nodes (graph.c). The
 * device of the stream (or of the current context) runs them, and must be
 * allowed to touch what they touch (driver_peer.c).
 * Device ranges are checked against what the driver handed out, so a copy past
 * the end of an allocation fails as CUDA_ERROR_INVALID_VALUE instead of
 * corrupting the host heap. */
#include <string.h>
#include <sys/mman.h>

#include "simgpu/sim.h"

enum { HOST = 1, DEVICE = 0 };

/* SYNC and SYNC_PT mark the synchronous calls (on the legacy stream and on
 * the per-thread one): work on that stream, then a wait for it, so during
 * capture they are what a stream synchronize is (capture.c). The async ones
 * resolve their stream; on a capturing stream they become graph nodes,
 * checked against what the driver handed out but run only at launch. */
#define SYNC ((CUstream)-1)
#define SYNC_PT ((CUstream)-2)

static CUresult enter(CUstream stream, struct ca_sim_cstate **cs, struct CUctx_st **ctx)
{
    struct ca_sim_stream_ref ref;
    *cs = NULL;
    int sync = stream == SYNC || stream == SYNC_PT;
    CUresult r = ca_sim_stream_resolve(sync ? (stream == SYNC ? NULL : CU_STREAM_PER_THREAD) : stream, &ref);
    if (r != CUDA_SUCCESS)
        return r;
    *ctx = ref.ctx;
    return sync ? ca_sim_capture_sync_stream(&ref) : ca_sim_capture_issue(&ref, cs);
}

static CUresult copy(uintptr_t dst, int dst_host, uintptr_t src, int src_host, size_t n,
                     CUstream stream)
{
    struct ca_sim_cstate *cs;
    struct CUctx_st *ctx = NULL;
    ca_sim_lock();
    CUresult r = enter(stream, &cs, &ctx);
    if (r == CUDA_SUCCESS) /* captured: the memory need not be accessible until launch */
        r = ca_sim_check_range(dst, n, dst_host, cs ? 0 : PROT_WRITE);
    if (r == CUDA_SUCCESS)
        r = ca_sim_check_range(src, n, src_host, cs ? 0 : PROT_READ);
    /* the device that runs the copy, or the owners for a staged one, may touch both sides */
    if (r == CUDA_SUCCESS && !cs)
        r = ca_sim_touch(ctx, dst, n, PROT_WRITE, 0);
    if (r == CUDA_SUCCESS && !cs)
        r = ca_sim_touch(ctx, src, n, PROT_READ, 0);
    int dev = r == CUDA_SUCCESS && !cs ? ctx->device : -1;
    struct CUgraphNode_st *node = NULL;
    if (r == CUDA_SUCCESS && cs && !(node = ca_sim_graph_capture_node(cs, CU_GRAPH_NODE_TYPE_MEMCPY)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (node) {
        node->u.copy.dst = dst;
        node->u.copy.src = src;
        node->u.copy.n = n;
    }
    ca_sim_unlock();
    if (r == CUDA_SUCCESS && n && !cs)
        memmove((void *)dst, (const void *)src, n);
    if (dev >= 0)
        ca_sim_activity(SIMGPU_ACT_MEMCPY, dev, 0, dst, n);
    return r;
}

/* Fills n elements of `width` bytes with the low bytes of `value`. */
static CUresult set(uintptr_t dst, unsigned value, size_t width, size_t n, CUstream stream)
{
    struct ca_sim_cstate *cs;
    struct CUctx_st *ctx = NULL;
    ca_sim_lock();
    CUresult r = enter(stream, &cs, &ctx);
    if (r == CUDA_SUCCESS && (dst % width || n > SIZE_MAX / width))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_check_range(dst, n * width, 0, cs ? 0 : PROT_WRITE);
    if (r == CUDA_SUCCESS && !cs)
        r = ca_sim_touch(ctx, dst, n * width, PROT_WRITE, 0);
    struct CUgraphNode_st *node = NULL;
    if (r == CUDA_SUCCESS && cs && !(node = ca_sim_graph_capture_node(cs, CU_GRAPH_NODE_TYPE_MEMSET)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (node) {
        node->u.set.dst = dst;
        node->u.set.value = value;
        node->u.set.width = width;
        node->u.set.n = n;
    }
    ca_sim_unlock();
    if (r != CUDA_SUCCESS || cs)
        return r;
    ca_sim_activity(SIMGPU_ACT_MEMSET, ctx->device, 0, dst, n * width);
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

/* Per-thread default stream variants: the synchronous ones use the calling
 * thread's stream; the async ones read the NULL stream as that stream. */
CA_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(dst, HOST, src, HOST, n, SYNC_PT);
}

CA_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return cuMemcpyAsync(dst, src, n, ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
    return copy(dst, DEVICE, (uintptr_t)src, HOST, n, SYNC_PT);
}

CA_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
    return copy((uintptr_t)dst, HOST, src, DEVICE, n, SYNC_PT);
}

CA_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(dst, DEVICE, src, DEVICE, n, SYNC_PT);
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
    return set(dst, v, 1, n, SYNC_PT);
}

CA_EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short v, size_t n)
{
    return set(dst, v, 2, n, SYNC_PT);
}

CA_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n)
{
    return set(dst, v, 4, n, SYNC_PT);
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

/* The driver API: for programs that call it directly, for cudart (static or
 * shared) which reaches it through cuGetProcAddress, and for PyTorch. Each
 * allocation is answered here exactly once. */
#include <string.h>

#include "preload/preload.h"

static CUresult no_driver(void) { return CUDA_ERROR_NOT_INITIALIZED; }

CA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    return ca_drv() ? ca_do_malloc(dptr, bytesize, NULL) : no_driver();
}

CA_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    const ca_driver *drv = ca_drv();
    if (!drv) return no_driver();
    if (dptr) {
        CUresult r = ca_do_free(dptr, NULL, true);
        if (r != CUDA_ERROR_NOT_FOUND) return r;
    }
    return drv->cuMemFree_v2(dptr);
}

CA_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return ca_drv() ? ca_do_malloc(dptr, bytesize, hStream) : no_driver();
}

static CUresult free_async(CUdeviceptr dptr, CUstream s, CUresult (*real)(CUdeviceptr, CUstream)) {
    if (!ca_drv()) return no_driver();
    CUresult r = ca_do_free(dptr, s, false);
    if (r != CUDA_ERROR_NOT_FOUND) return r;
    return real ? real(dptr, s) : CUDA_ERROR_NOT_FOUND;
}

CA_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    return free_async(dptr, hStream, ca_drv() ? ca_drv()->cuMemFreeAsync : NULL);
}

/* The per-thread default stream variants: stream 0 is the thread's own. */
static CUstream per_thread(CUstream s) { return s ? s : CU_STREAM_PER_THREAD; }

CA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return ca_drv() ? ca_do_malloc(dptr, bytesize, per_thread(hStream)) : no_driver();
}

CA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    return free_async(dptr, per_thread(hStream), ca_drv() ? ca_drv()->cuMemFreeAsync_ptsz : NULL);
}

CA_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    return ca_drv() ? ca_do_mem_info(free_bytes, total_bytes) : no_driver();
}

/* Reset frees every allocation of the context: ours first (cudaDeviceReset
 * reaches this through cudart's cuGetProcAddress). */
CA_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuDevicePrimaryCtxReset_v2) return no_driver();
    ca_device_reset_begin((int)dev);
    CUresult r = drv->cuDevicePrimaryCtxReset_v2(dev);
    ca_device_reset_done((int)dev);
    return r;
}

CA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus);
CA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

/* Our function for a real driver function, or NULL: the driver decides which
 * entry (version, per-thread variant) a name means; we swap the ones we serve. */
void *ca_hook_for_real(void *real) {
    const ca_driver *drv = ca_drv();
    if (!real || !drv) return NULL;
    const struct { void *real, *ours; } swaps[] = {
        {(void *)drv->cuMemAlloc_v2, (void *)cuMemAlloc_v2},
        {(void *)drv->cuMemFree_v2, (void *)cuMemFree_v2},
        {(void *)drv->cuMemAllocAsync, (void *)cuMemAllocAsync},
        {(void *)drv->cuMemFreeAsync, (void *)cuMemFreeAsync},
        {(void *)drv->cuMemAllocAsync_ptsz, (void *)cuMemAllocAsync_ptsz},
        {(void *)drv->cuMemFreeAsync_ptsz, (void *)cuMemFreeAsync_ptsz},
        {(void *)drv->cuMemGetInfo_v2, (void *)cuMemGetInfo_v2},
        {(void *)drv->cuDevicePrimaryCtxReset_v2, (void *)cuDevicePrimaryCtxReset_v2},
        {(void *)drv->cuGetProcAddress_v2, (void *)cuGetProcAddress_v2},
        {(void *)drv->cuGetProcAddress, (void *)cuGetProcAddress},
    };
    for (size_t i = 0; i < sizeof swaps / sizeof swaps[0]; i++)
        if (swaps[i].real == real) return swaps[i].ours;
    return NULL;
}

CA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuGetProcAddress_v2) return no_driver();
    CUresult r = drv->cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn) {
        void *ours = ca_hook_for_real(*pfn);
        if (ours) *pfn = ours;
    }
    return r;
}

CA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    const ca_driver *drv = ca_drv();
    if (!drv) return no_driver();
    CUresult r = drv->cuGetProcAddress ? drv->cuGetProcAddress(symbol, pfn, cudaVersion, flags)
                                       : drv->cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
    if (r == CUDA_SUCCESS && pfn) {
        void *ours = ca_hook_for_real(*pfn);
        if (ours) *pfn = ours;
    }
    return r;
}

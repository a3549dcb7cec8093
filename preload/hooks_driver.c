/* The driver API: for programs that call it directly, for cudart (static or
 * shared) which reaches it through cuGetProcAddress, and for PyTorch. Each
 * allocation is answered here exactly once. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "preload/preload.h"

static CUresult no_driver(void) { return CUDA_ERROR_NOT_INITIALIZED; }

static CUresult driver_malloc(CUdeviceptr *dptr, size_t bytesize, CUstream stream, bool async) {
    if (!ca_drv()) return no_driver();
    if (!dptr || !bytesize) return CUDA_ERROR_INVALID_VALUE; /* nowhere to write, nothing to allocate */
    return ca_do_malloc(dptr, bytesize, stream, async);
}

CA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    return driver_malloc(dptr, bytesize, NULL, false);
}

/* Pitched memory is ours like any other (C programs use it for 2D data).
 * What we would refuse (a NULL pointer, a zero size, an element size other
 * than 4, 8 or 16) goes to the driver, whose answer is the right one. */
CA_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                      unsigned int ElementSizeBytes) {
    const ca_driver *drv = ca_drv();
    if (!drv) return no_driver();
    if (!dptr || !pPitch || !WidthInBytes || !Height ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return drv->cuMemAllocPitch_v2 ? drv->cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes)
                                       : CUDA_ERROR_INVALID_VALUE;
    return ca_do_malloc_pitch(dptr, pPitch, WidthInBytes, Height, 1);
}

CA_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    const ca_driver *drv = ca_drv();
    if (!drv) return no_driver();
    if (dptr) {
        CUresult r = ca_do_free(dptr, NULL, true);
        if (r != CUDA_ERROR_NOT_FOUND) return r;
    }
    CUresult r = drv->cuMemFree_v2(dptr);
    if (r == CUDA_SUCCESS && dptr) ca_capture_freed(dptr, NULL);
    return r;
}

CA_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return driver_malloc(dptr, bytesize, hStream, true);
}

static CUresult free_async(CUdeviceptr dptr, CUstream s, CUresult (*real)(CUdeviceptr, CUstream)) {
    if (!ca_drv()) return no_driver();
    CUresult r = ca_do_free(dptr, s, false);
    if (r != CUDA_ERROR_NOT_FOUND) return r;
    r = real ? real(dptr, s) : CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS) ca_capture_freed(dptr, s); /* a graph allocation */
    return r;
}

CA_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    return free_async(dptr, hStream, ca_drv() ? ca_drv()->cuMemFreeAsync : NULL);
}

/* The per-thread default stream variants: stream 0 is the thread's own. */
static CUstream per_thread(CUstream s) { return s ? s : CU_STREAM_PER_THREAD; }

CA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return driver_malloc(dptr, bytesize, per_thread(hStream), true);
}

CA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    return free_async(dptr, per_thread(hStream), ca_drv() ? ca_drv()->cuMemFreeAsync_ptsz : NULL);
}

CA_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    return ca_drv() ? ca_do_mem_info(free_bytes, total_bytes) : no_driver();
}

/* Streams: plain frees are ordered against every stream of the device, so
 * the preload knows them (streams.c). */
CA_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuStreamCreateWithPriority) return no_driver();
    CUresult r = drv->cuStreamCreateWithPriority(phStream, flags, priority);
    if (r == CUDA_SUCCESS) ca_stream_created(*phStream, flags);
    return r;
}

CA_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int flags) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuStreamCreate) return no_driver();
    CUresult r = drv->cuStreamCreate(phStream, flags);
    if (r == CUDA_SUCCESS) ca_stream_created(*phStream, flags);
    return r;
}

CA_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuStreamDestroy_v2) return no_driver();
    ca_stream_destroying(hStream);
    return drv->cuStreamDestroy_v2(hStream);
}

/* Reset frees every allocation of the context: ours first (cudaDeviceReset
 * reaches this through cudart's cuGetProcAddress), after its plain frees. */
CA_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuDevicePrimaryCtxReset_v2) return no_driver();
    ca_peers_primary_reset((int)dev);
    ca_device *held = ca_device_reset_begin((int)dev);
    CUresult r = drv->cuDevicePrimaryCtxReset_v2(dev);
    ca_device_reset_end(held);
    return r;
}

/* A context that goes takes its allocations, events and streams with it:
 * the allocator bound to it follows (devices.c). */
CA_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuCtxDestroy_v2) return no_driver();
    ca_peers_ctx_gone(ctx);
    ca_device_ctx_gone(ctx);
    ca_contexts_destroyed(ctx);
    return drv->cuCtxDestroy_v2(ctx);
}

CA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus);
CA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);


/* The driver functions we stand in for: the driver's entry (by its name, and
 * where ca_driver keeps its address) and ours. The driver decides which
 * entry (version, per-thread variant) a name means; we swap the ones we serve. */
#define SWAP CA_SWAP
static const ca_swap swaps[] = {
    SWAP(cuMemAlloc_v2, cuMemAlloc_v2),
    SWAP(cuMemAllocPitch_v2, cuMemAllocPitch_v2),
    SWAP(cuMemFree_v2, cuMemFree_v2),
    SWAP(cuMemAllocAsync, cuMemAllocAsync),
    SWAP(cuMemFreeAsync, cuMemFreeAsync),
    SWAP(cuMemAllocAsync_ptsz, cuMemAllocAsync_ptsz),
    SWAP(cuMemFreeAsync_ptsz, cuMemFreeAsync_ptsz),
    SWAP(cuMemGetInfo_v2, cuMemGetInfo_v2),
    SWAP(cuStreamCreate, cuStreamCreate),
    SWAP(cuStreamCreateWithPriority, cuStreamCreateWithPriority),
    SWAP(cuStreamDestroy_v2, cuStreamDestroy_v2),
    {"cuStreamDestroy", offsetof(ca_driver, cuStreamDestroy_v1), (void *)cuStreamDestroy_v2},
    SWAP(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset_v2),
    SWAP(cuCtxDestroy_v2, cuCtxDestroy_v2),
    SWAP(cuCtxCreate_v2, cuCtxCreate_v2),
    SWAP(cuCtxCreate_v3, cuCtxCreate_v3),
    SWAP(cuCtxCreate_v4, cuCtxCreate_v4),
    SWAP(cuGreenCtxCreate, cuGreenCtxCreate),
    SWAP(cuGreenCtxDestroy, cuGreenCtxDestroy),
    SWAP(cuStreamBeginCapture_v2, cuStreamBeginCapture_v2),
    SWAP(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture_v2_ptsz),
    {"cuStreamBeginCapture", offsetof(ca_driver, cuStreamBeginCapture_v1), (void *)ca_begin_capture_v1},
    {"cuStreamBeginCapture_ptsz", offsetof(ca_driver, cuStreamBeginCapture_v1_ptsz), (void *)ca_begin_capture_v1_ptsz},
    SWAP(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph),
    SWAP(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph_ptsz),
    SWAP(cuStreamEndCapture, cuStreamEndCapture),
    SWAP(cuStreamEndCapture_ptsz, cuStreamEndCapture_ptsz),
    SWAP(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess),
    SWAP(cuCtxDisablePeerAccess, cuCtxDisablePeerAccess),
    SWAP(cuIpcGetMemHandle, cuIpcGetMemHandle),
    SWAP(cuIpcOpenMemHandle_v2, cuIpcOpenMemHandle_v2),
    {"cuIpcOpenMemHandle", offsetof(ca_driver, cuIpcOpenMemHandle_v1), (void *)cuIpcOpenMemHandle_v2},
    SWAP(cuIpcCloseMemHandle, cuIpcCloseMemHandle),
    SWAP(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain),
    SWAP(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease_v2),
    {"cuDevicePrimaryCtxRelease", offsetof(ca_driver, cuDevicePrimaryCtxRelease_v1), (void *)cuDevicePrimaryCtxRelease_v2},
    {"cuDevicePrimaryCtxReset", offsetof(ca_driver, cuDevicePrimaryCtxReset_v1), (void *)cuDevicePrimaryCtxReset_v2},
    SWAP(cuGetProcAddress_v2, cuGetProcAddress_v2),
    SWAP(cuGetProcAddress, cuGetProcAddress),
};
#define NSWAPS (sizeof swaps / sizeof swaps[0])

static const struct table {
    const ca_swap *swaps;
    const size_t *n;
} tables[] = {{swaps, &(const size_t){NSWAPS}}, {ca_query_swaps, &ca_query_nswaps}};
#define NTABLES (sizeof tables / sizeof tables[0])

/* Which entry cuGetProcAddress answers for a base name: the newest one the
 * caller's CUDA version knows (cudaTypedefs.h: PFN_cuX_vNNNN), its per-thread
 * variant with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. Entries we do not
 * serve are named NULL, so an older version is not taken for a newer one. */
static const struct proc {
    const char *symbol;
    int version;
    bool per_thread;
    const char *entry;
} procs[] = {
    {"cuMemAlloc", 2000, 0, NULL},
    {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
    {"cuMemAllocPitch", 2000, 0, NULL},
    {"cuMemAllocPitch", 3020, 0, "cuMemAllocPitch_v2"},
    {"cuMemFree", 2000, 0, NULL},
    {"cuMemFree", 3020, 0, "cuMemFree_v2"},
    {"cuMemGetInfo", 2000, 0, NULL},
    {"cuMemGetInfo", 3020, 0, "cuMemGetInfo_v2"},
    {"cuMemAllocAsync", 11020, 0, "cuMemAllocAsync"},
    {"cuMemAllocAsync", 11020, 1, "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", 11020, 0, "cuMemFreeAsync"},
    {"cuMemFreeAsync", 11020, 1, "cuMemFreeAsync_ptsz"},
    {"cuStreamCreate", 2000, 0, "cuStreamCreate"},
    {"cuStreamCreateWithPriority", 5050, 0, "cuStreamCreateWithPriority"},
    {"cuStreamDestroy", 2000, 0, "cuStreamDestroy"},
    {"cuStreamDestroy", 4000, 0, "cuStreamDestroy_v2"},
    {"cuDevicePrimaryCtxReset", 7000, 0, "cuDevicePrimaryCtxReset"},
    {"cuDevicePrimaryCtxReset", 11000, 0, "cuDevicePrimaryCtxReset_v2"},
    {"cuCtxDestroy", 2000, 0, NULL},
    {"cuCtxDestroy", 4000, 0, "cuCtxDestroy_v2"},
    {"cuCtxCreate", 2000, 0, NULL},
    {"cuCtxCreate", 3020, 0, "cuCtxCreate_v2"},
    {"cuCtxCreate", 11040, 0, "cuCtxCreate_v3"},
    {"cuCtxCreate", 12050, 0, "cuCtxCreate_v4"},
    {"cuGreenCtxCreate", 12040, 0, "cuGreenCtxCreate"},
    {"cuGreenCtxDestroy", 12040, 0, "cuGreenCtxDestroy"},
    {"cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture"},
    {"cuStreamBeginCapture", 10000, 1, "cuStreamBeginCapture_ptsz"},
    {"cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2"},
    {"cuStreamBeginCapture", 10010, 1, "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamBeginCaptureToGraph", 12030, 0, "cuStreamBeginCaptureToGraph"},
    {"cuStreamBeginCaptureToGraph", 12030, 1, "cuStreamBeginCaptureToGraph_ptsz"},
    {"cuStreamEndCapture", 10000, 0, "cuStreamEndCapture"},
    {"cuStreamEndCapture", 10000, 1, "cuStreamEndCapture_ptsz"},
    {"cuCtxEnablePeerAccess", 4000, 0, "cuCtxEnablePeerAccess"},
    {"cuCtxDisablePeerAccess", 4000, 0, "cuCtxDisablePeerAccess"},
    {"cuIpcGetMemHandle", 4010, 0, "cuIpcGetMemHandle"},
    {"cuIpcOpenMemHandle", 4010, 0, "cuIpcOpenMemHandle"},
    {"cuIpcOpenMemHandle", 11000, 0, "cuIpcOpenMemHandle_v2"},
    {"cuIpcCloseMemHandle", 4010, 0, "cuIpcCloseMemHandle"},
    {"cuDevicePrimaryCtxRetain", 7000, 0, "cuDevicePrimaryCtxRetain"},
    {"cuDevicePrimaryCtxRelease", 7000, 0, "cuDevicePrimaryCtxRelease"},
    {"cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2"},
    {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
    {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
    /* pointer queries and allocations past us (hooks_queries.c) */
    {"cuMemGetAddressRange", 2000, 0, NULL},
    {"cuMemGetAddressRange", 3020, 0, "cuMemGetAddressRange_v2"},
    {"cuPointerGetAttribute", 4000, 0, "cuPointerGetAttribute"},
    {"cuPointerGetAttributes", 7000, 0, "cuPointerGetAttributes"},
    {"cuMemRetainAllocationHandle", 11000, 0, "cuMemRetainAllocationHandle"},
    {"cuMemGetHandleForAddressRange", 11070, 0, "cuMemGetHandleForAddressRange"},
    {"cuMemCreate", 10020, 0, "cuMemCreate"},
    {"cuMemAllocManaged", 6000, 0, "cuMemAllocManaged"},
    {"cuMemAllocFromPoolAsync", 11020, 0, "cuMemAllocFromPoolAsync"},
    {"cuMemAllocFromPoolAsync", 11020, 1, "cuMemAllocFromPoolAsync_ptsz"},
};

static const ca_swap *swap_named(const char *name) {
    for (size_t t = 0; t < NTABLES; t++)
        for (size_t i = 0; i < *tables[t].n; i++)
            if (!strcmp(tables[t].swaps[i].name, name)) return &tables[t].swaps[i];
    return NULL;
}

static bool driver_has(const ca_driver *drv, const ca_swap *s) {
    return *(void *const *)((const char *)drv + s->field) != NULL;
}

/* The entry of one kind (per-thread or not) for symbol at `version`: the
 * newest not newer than it that the driver has. An entry we do not serve
 * stops the search (NULL). */
static const ca_swap *entry_for(const ca_driver *drv, const char *symbol, int version, bool per_thread) {
    const struct proc *best = NULL;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        const struct proc *p = &procs[i];
        if (p->per_thread != per_thread || strcmp(p->symbol, symbol)) continue;
        if (p->version > version || (best && p->version < best->version)) continue;
        const ca_swap *s = p->entry ? swap_named(p->entry) : NULL;
        if (!p->entry || (s && driver_has(drv, s))) best = p;
    }
    return best && best->entry ? swap_named(best->entry) : NULL;
}

/* Ours for what cuGetProcAddress answered: by the symbol, the version asked
 * (no newer than the driver's) and the flags, never by the address, which
 * the driver may give as another than its export's (a thunk). */
static void *hook_for_proc(const char *symbol, int version, cuuint64_t flags) {
    const ca_driver *drv = ca_drv();
    int driver = 0;
    if (!symbol || !drv) return NULL;
    if (drv->cuDriverGetVersion && drv->cuDriverGetVersion(&driver) == CUDA_SUCCESS && driver < version)
        version = driver;
    const ca_swap *s = NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) s = entry_for(drv, symbol, version, true);
    if (!s) s = entry_for(drv, symbol, version, false); /* no per-thread variant: the legacy one */
    return s ? s->ours : NULL;
}

/* Is addr inside a loaded libcuda.so*? */
CA_NO_SANITIZE static bool in_libcuda(void *addr) {
    Dl_info di;
    if (!dladdr(addr, &di) || !di.dli_fname) return false;
    const char *base = strrchr(di.dli_fname, '/');
    return !strncmp(base ? base + 1 : di.dli_fname, "libcuda.so", 10);
}

CA_NO_SANITIZE void *ca_hook_for_driver_name(const char *name, void *real) {
    for (size_t t = 0; t < NTABLES; t++)
        for (size_t i = 0; i < *tables[t].n; i++)
            if (!strcmp(tables[t].swaps[i].name, name)) return in_libcuda(real) ? tables[t].swaps[i].ours : NULL;
    return NULL;
}

CA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus) {
    const ca_driver *drv = ca_drv();
    if (!drv || !drv->cuGetProcAddress_v2) return no_driver();
    CUresult r = drv->cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn && *pfn) {
        void *ours = hook_for_proc(symbol, cudaVersion, flags);
        if (ours) *pfn = ours;
    }
    return r;
}

CA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    const ca_driver *drv = ca_drv();
    if (!drv) return no_driver();
    CUresult r = drv->cuGetProcAddress ? drv->cuGetProcAddress(symbol, pfn, cudaVersion, flags)
                                       : drv->cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
    if (r == CUDA_SUCCESS && pfn && *pfn) {
        void *ours = hook_for_proc(symbol, cudaVersion, flags);
        if (ours) *pfn = ours;
    }
    return r;
}

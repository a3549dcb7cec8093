/* cuGetProcAddress: the route cudart (real and simulated) takes to every driver
 * entry point. Symbols are asked by base name ("cuMemAlloc") with the CUDA
 * version the caller was built for; the answer is the newest variant introduced
 * at or before that version (cuMemAlloc_v2 from 3020 on). With
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the _ptds/_ptsz variant wins
 * where there is one. Versions are those of cudaTypedefs.h (PFN_cuX_vNNNN).
 * With CUDALLOC_SIM_DRIVER_VERSION, entries newer than that driver are not
 * found (cuCtxRecordEvent needs 12050). */
#include <string.h>

#include "simgpu/sim.h"

struct entry {
    const char *name;
    int version;
    int per_thread;
    void *fn;
};

#define E(name, version, fn) {name, version, 0, (void *)(fn)}
#define PT(name, version, fn) {name, version, 1, (void *)(fn)}

static const struct entry table[] = {
    E("cuInit", 2000, cuInit),
    E("cuDriverGetVersion", 2020, cuDriverGetVersion),
    E("cuGetErrorString", 6000, cuGetErrorString),
    E("cuGetErrorName", 6000, cuGetErrorName),
    E("cuGetProcAddress", 11030, cuGetProcAddress),
    E("cuGetProcAddress", 12000, cuGetProcAddress_v2),

    E("cuDeviceGet", 2000, cuDeviceGet),
    E("cuDeviceGetCount", 2000, cuDeviceGetCount),
    E("cuDeviceGetName", 2000, cuDeviceGetName),
    E("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    E("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    E("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    E("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    E("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    E("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),

    E("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    E("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease_v2),
    E("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    E("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset_v2),
    E("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    E("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    E("cuDevicePrimaryCtxSetFlags", 7000, cuDevicePrimaryCtxSetFlags_v2),
    E("cuDevicePrimaryCtxSetFlags", 11000, cuDevicePrimaryCtxSetFlags_v2),
    E("cuCtxCreate", 3020, cuCtxCreate_v2),
    E("cuCtxCreate", 12050, cuCtxCreate_v4),
    E("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    E("cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer),
    E("cuCtxEnablePeerAccess", 4000, cuCtxEnablePeerAccess),
    E("cuCtxDisablePeerAccess", 4000, cuCtxDisablePeerAccess),
    E("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    E("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    E("cuCtxPushCurrent", 2000, cuCtxPushCurrent_v2),
    E("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    E("cuCtxPopCurrent", 2000, cuCtxPopCurrent_v2),
    E("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    E("cuCtxGetDevice", 2000, cuCtxGetDevice),
    E("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    E("cuCtxSynchronize", 2000, cuCtxSynchronize),
    E("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),

    E("cuMemAlloc", 3020, cuMemAlloc_v2),
    E("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    E("cuMemFree", 3020, cuMemFree_v2),
    E("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    E("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    E("cuMemHostAlloc", 2020, cuMemHostAlloc),
    E("cuMemFreeHost", 2000, cuMemFreeHost),
    E("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    E("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PT("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    E("cuMemFreeAsync", 11020, cuMemFreeAsync),
    E("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    PT("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    E("cuMemAllocManaged", 6000, cuMemAllocManaged),
    PT("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    E("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    E("cuPointerGetAttributes", 7000, cuPointerGetAttributes),

    E("cuMemcpy", 4000, cuMemcpy),
    PT("cuMemcpy", 7000, cuMemcpy_ptds),
    E("cuMemcpyAsync", 4000, cuMemcpyAsync),
    PT("cuMemcpyAsync", 7000, cuMemcpyAsync_ptsz),
    E("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    PT("cuMemcpyHtoD", 7000, cuMemcpyHtoD_v2_ptds),
    E("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    PT("cuMemcpyDtoH", 7000, cuMemcpyDtoH_v2_ptds),
    E("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2),
    PT("cuMemcpyDtoD", 7000, cuMemcpyDtoD_v2_ptds),
    E("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2),
    PT("cuMemcpyHtoDAsync", 7000, cuMemcpyHtoDAsync_v2_ptsz),
    E("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2),
    PT("cuMemcpyDtoHAsync", 7000, cuMemcpyDtoHAsync_v2_ptsz),
    E("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2),
    PT("cuMemcpyDtoDAsync", 7000, cuMemcpyDtoDAsync_v2_ptsz),
    E("cuMemsetD8", 3020, cuMemsetD8_v2),
    PT("cuMemsetD8", 7000, cuMemsetD8_v2_ptds),
    E("cuMemsetD16", 3020, cuMemsetD16_v2),
    PT("cuMemsetD16", 7000, cuMemsetD16_v2_ptds),
    E("cuMemsetD32", 3020, cuMemsetD32_v2),
    PT("cuMemsetD32", 7000, cuMemsetD32_v2_ptds),
    E("cuMemsetD8Async", 3020, cuMemsetD8Async),
    PT("cuMemsetD8Async", 7000, cuMemsetD8Async_ptsz),
    E("cuMemsetD16Async", 3020, cuMemsetD16Async),
    PT("cuMemsetD16Async", 7000, cuMemsetD16Async_ptsz),
    E("cuMemsetD32Async", 3020, cuMemsetD32Async),
    PT("cuMemsetD32Async", 7000, cuMemsetD32Async_ptsz),

    E("cuMemAddressReserve", 10020, cuMemAddressReserve),
    E("cuMemAddressFree", 10020, cuMemAddressFree),
    E("cuMemCreate", 10020, cuMemCreate),
    E("cuMemRelease", 10020, cuMemRelease),
    E("cuMemMap", 10020, cuMemMap),
    E("cuMemUnmap", 10020, cuMemUnmap),
    E("cuMemSetAccess", 10020, cuMemSetAccess),
    E("cuMemGetAccess", 10020, cuMemGetAccess),
    E("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    E("cuMemGetAllocationPropertiesFromHandle", 10020, cuMemGetAllocationPropertiesFromHandle),
    E("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    E("cuMemGetHandleForAddressRange", 11070, cuMemGetHandleForAddressRange),
    E("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    E("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
    E("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    E("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    E("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),

    E("cuStreamCreate", 2000, cuStreamCreate),
    E("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
    E("cuStreamDestroy", 2000, cuStreamDestroy_v2),
    E("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    E("cuStreamSynchronize", 2000, cuStreamSynchronize),
    PT("cuStreamSynchronize", 7000, cuStreamSynchronize_ptsz),
    E("cuStreamQuery", 2000, cuStreamQuery),
    PT("cuStreamQuery", 7000, cuStreamQuery_ptsz),
    E("cuStreamGetFlags", 5050, cuStreamGetFlags),
    PT("cuStreamGetFlags", 7000, cuStreamGetFlags_ptsz),
    E("cuStreamWaitEvent", 3020, cuStreamWaitEvent),
    PT("cuStreamWaitEvent", 7000, cuStreamWaitEvent_ptsz),
    E("cuEventCreate", 2000, cuEventCreate),
    E("cuEventRecord", 2000, cuEventRecord),
    PT("cuEventRecord", 7000, cuEventRecord_ptsz),
    E("cuEventQuery", 2000, cuEventQuery),
    E("cuEventSynchronize", 2000, cuEventSynchronize),
    E("cuEventDestroy", 2000, cuEventDestroy_v2),
    E("cuEventDestroy", 4000, cuEventDestroy_v2),
    E("cuEventElapsedTime", 2000, cuEventElapsedTime),
    E("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),
    E("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags),
    PT("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags_ptsz),

    E("cuStreamBeginCapture", 10000, cuStreamBeginCapture),
    PT("cuStreamBeginCapture", 10000, cuStreamBeginCapture_ptsz),
    E("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    PT("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2_ptsz),
    E("cuStreamEndCapture", 10000, cuStreamEndCapture),
    PT("cuStreamEndCapture", 10000, cuStreamEndCapture_ptsz),
    E("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
    PT("cuStreamIsCapturing", 10000, cuStreamIsCapturing_ptsz),
    E("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo),
    PT("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo_ptsz),
    E("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2),
    PT("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2_ptsz),
    E("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3),
    PT("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3_ptsz),
    E("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    E("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    E("cuGraphLaunch", 10000, cuGraphLaunch),
    PT("cuGraphLaunch", 10000, cuGraphLaunch_ptsz),
    E("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    E("cuGraphDestroy", 10000, cuGraphDestroy),
    E("cuGraphGetNodes", 10000, cuGraphGetNodes),
    E("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    E("cuCtxRecordEvent", 12050, cuCtxRecordEvent),
};

/* The newest entry of the wanted kind for symbol at or before version. */
static const struct entry *best(const char *symbol, int version, int per_thread, int *seen)
{
    const struct entry *found = NULL;
    int driver = ca_sim_driver_version(); /* an older driver does not know newer entries */
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const struct entry *e = &table[i];
        if (strcmp(e->name, symbol) != 0 || e->version > driver)
            continue;
        *seen = 1;
        if (e->per_thread == per_thread && e->version <= version &&
            (!found || e->version > found->version))
            found = e;
    }
    return found;
}

CA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus)
{
    const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    __atomic_fetch_add(&ca_sim.n.proc_lookups, 1, __ATOMIC_RELAXED);
    if (!symbol || !pfn || (flags & ~known) || cudaVersion > CUDA_VERSION)
        return CUDA_ERROR_INVALID_VALUE;
    int seen = 0;
    const struct entry *e = NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        e = best(symbol, cudaVersion, 1, &seen);
    if (!e)
        e = best(symbol, cudaVersion, 0, &seen);
    *pfn = e ? e->fn : NULL;
    if (symbolStatus)
        *symbolStatus = e ? CU_GET_PROC_ADDRESS_SUCCESS
                      : seen ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                             : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return e ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* State shared by the files of the simulated runtime (libcudart.so.13).
 *
 * The runtime has no link to the driver: like the real libcudart it dlopens
 * libcuda.so.1, takes cuGetProcAddress_v2 with dlsym, and fetches every driver
 * entry point through it (runtime_init.c). An interposer on dlsym or
 * cuGetProcAddress therefore sees the same route as on a GPU machine.
 */
#ifndef CA_RT_H
#define CA_RT_H

/* The runtime's own build mode: the headers then declare both the legacy and
 * the per-thread (_ptsz/_ptds) entry points under their real names. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "util/export.h"

/* Driver calls that take or imply a stream: one set per stream flavour. */
struct ca_rt_streamfns {
    PFN_cuMemcpy_v4000 Memcpy;
    PFN_cuMemcpyAsync_v4000 MemcpyAsync;
    PFN_cuMemcpyHtoD_v3020 MemcpyHtoD;
    PFN_cuMemcpyDtoH_v3020 MemcpyDtoH;
    PFN_cuMemcpyDtoD_v3020 MemcpyDtoD;
    PFN_cuMemcpyHtoDAsync_v3020 MemcpyHtoDAsync;
    PFN_cuMemcpyDtoHAsync_v3020 MemcpyDtoHAsync;
    PFN_cuMemcpyDtoDAsync_v3020 MemcpyDtoDAsync;
    PFN_cuMemsetD8_v3020 MemsetD8;
    PFN_cuMemsetD8Async_v3020 MemsetD8Async;
    PFN_cuMemAllocAsync_v11020 MemAllocAsync;
    PFN_cuMemFreeAsync_v11020 MemFreeAsync;
    PFN_cuStreamSynchronize_v2000 StreamSynchronize;
    PFN_cuStreamQuery_v2000 StreamQuery;
    PFN_cuStreamWaitEvent_v3020 StreamWaitEvent;
    PFN_cuEventRecord_v2000 EventRecord;
    PFN_cuEventRecordWithFlags_v11010 EventRecordWithFlags;
    PFN_cuStreamBeginCapture_v10010 StreamBeginCapture;
    PFN_cuStreamEndCapture_v10000 StreamEndCapture;
    PFN_cuStreamIsCapturing_v10000 StreamIsCapturing;
    PFN_cuStreamGetCaptureInfo_v12030 StreamGetCaptureInfo;
    PFN_cuGraphLaunch_v10000 GraphLaunch;
};

struct ca_rt_driver {
    PFN_cuGetProcAddress_v12000 GetProcAddress;
    PFN_cuInit_v2000 Init;
    PFN_cuDriverGetVersion_v2020 DriverGetVersion;
    PFN_cuDeviceGetCount_v2000 DeviceGetCount;
    PFN_cuDeviceGetName_v2000 DeviceGetName;
    PFN_cuDeviceTotalMem_v3020 DeviceTotalMem;
    PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
    PFN_cuDeviceGetUuid_v11040 DeviceGetUuid;
    PFN_cuDevicePrimaryCtxRetain_v7000 DevicePrimaryCtxRetain;
    PFN_cuDevicePrimaryCtxReset_v11000 DevicePrimaryCtxReset;
    PFN_cuDeviceCanAccessPeer_v4000 DeviceCanAccessPeer;
    PFN_cuCtxEnablePeerAccess_v4000 CtxEnablePeerAccess;
    PFN_cuCtxDisablePeerAccess_v4000 CtxDisablePeerAccess;
    PFN_cuIpcGetMemHandle_v4010 IpcGetMemHandle;
    PFN_cuIpcOpenMemHandle_v11000 IpcOpenMemHandle;
    PFN_cuIpcCloseMemHandle_v4010 IpcCloseMemHandle;
    PFN_cuCtxGetCurrent_v4000 CtxGetCurrent;
    PFN_cuCtxSetCurrent_v4000 CtxSetCurrent;
    PFN_cuCtxGetDevice_v13000 CtxGetDevice;
    PFN_cuCtxSynchronize_v13000 CtxSynchronize;
    PFN_cuMemAlloc_v3020 MemAlloc;
    PFN_cuMemAllocPitch_v3020 MemAllocPitch;
    PFN_cuMemFree_v3020 MemFree;
    PFN_cuMemGetInfo_v3020 MemGetInfo;
    PFN_cuMemHostAlloc_v2020 MemHostAlloc;
    PFN_cuMemFreeHost_v2000 MemFreeHost;
    PFN_cuPointerGetAttributes_v7000 PointerGetAttributes;
    PFN_cuStreamCreateWithPriority_v5050 StreamCreateWithPriority;
    PFN_cuStreamDestroy_v4000 StreamDestroy;
    PFN_cuEventCreate_v2000 EventCreate;
    PFN_cuEventQuery_v2000 EventQuery;
    PFN_cuEventSynchronize_v2000 EventSynchronize;
    PFN_cuEventDestroy_v4000 EventDestroy;
    PFN_cuEventElapsedTime_v12080 EventElapsedTime;
    PFN_cuThreadExchangeStreamCaptureMode_v10010 ThreadExchangeStreamCaptureMode;
    PFN_cuGraphInstantiateWithFlags_v11040 GraphInstantiateWithFlags;
    PFN_cuGraphExecDestroy_v10000 GraphExecDestroy;
    PFN_cuGraphDestroy_v10000 GraphDestroy;
    PFN_cuGraphGetNodes_v10000 GraphGetNodes;
    PFN_cuGraphNodeGetType_v10000 GraphNodeGetType;
    struct ca_rt_streamfns legacy;     /* fetched with flags 0 (CU_GET_PROC_ADDRESS_DEFAULT) */
    struct ca_rt_streamfns ptsz;       /* ... with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
};

extern struct ca_rt_driver ca_rt;

/* A driver call through its fetched pointer, as a runtime error; a pointer
 * the driver did not give means the driver is too old for the call. */
#define CA_RT_CALL(fn, ...) ((fn) ? ca_rt_error((fn)(__VA_ARGS__)) : cudaErrorCallRequiresNewerDriver)

/* Driver and runtime codes share their numbers (checked in runtime_errors.c). */
static inline cudaError_t ca_rt_error(CUresult r)
{
    return (cudaError_t)r;
}

/* Loads the driver (dlopen, dlsym, cuGetProcAddress) once per process. */
cudaError_t ca_rt_load(void);
/* ca_rt_load, then cuInit, once per process. */
cudaError_t ca_rt_init(void);
/* ca_rt_init, then makes sure the calling thread has a current context: the
 * one it has, or the primary context of its device (retained once per process). */
cudaError_t ca_rt_enter(void);
/* The calling thread's device as cudaSetDevice left it (0 by default). */
int ca_rt_thread_device(void);
cudaError_t ca_rt_bind_device(int device);
/* The runtime's primary context of `device`, retained once per process. */
cudaError_t ca_rt_primary(int device, CUcontext *ctx);

/* Records err as the thread's last error (cudaGetLastError); returns it. */
cudaError_t ca_rt_ret(cudaError_t err);

#endif

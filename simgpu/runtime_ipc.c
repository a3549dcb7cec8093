/* Interprocess memory handles in the runtime: each one driver call away, as
 * cudart does (cudaIpcMemHandle_t and CUipcMemHandle are the same 64 bytes). */
#include <string.h>

#include "simgpu/rt.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(CUipcMemHandle), "the same handle");

CA_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    if (!handle)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.IpcGetMemHandle, (CUipcMemHandle *)handle, (CUdeviceptr)devPtr);
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags)
{
    if (!devPtr)
        return ca_rt_ret(cudaErrorInvalidValue);
    CUipcMemHandle h;
    memcpy(&h, &handle, sizeof h);
    CUdeviceptr p = 0;
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.IpcOpenMemHandle, &p, h, flags);
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
    cudaError_t e = ca_rt_enter();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.IpcCloseMemHandle, (CUdeviceptr)devPtr);
    return ca_rt_ret(e);
}

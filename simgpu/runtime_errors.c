/* Runtime error codes: names, texts, and the per-thread last error. */
#include "simgpu/rt.h"

/* The runtime passes driver codes through unchanged (ca_rt_error): the codes
 * the simulated driver returns have the same numbers in both enums. */
#define SAME(rt, drv) _Static_assert((int)(rt) == (int)(drv), #rt " is not " #drv)
SAME(cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE);
SAME(cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY);
SAME(cudaErrorInitializationError, CUDA_ERROR_NOT_INITIALIZED);
SAME(cudaErrorNoDevice, CUDA_ERROR_NO_DEVICE);
SAME(cudaErrorInvalidDevice, CUDA_ERROR_INVALID_DEVICE);
SAME(cudaErrorDeviceUninitialized, CUDA_ERROR_INVALID_CONTEXT);
SAME(cudaErrorInvalidResourceHandle, CUDA_ERROR_INVALID_HANDLE);
SAME(cudaErrorSymbolNotFound, CUDA_ERROR_NOT_FOUND);
SAME(cudaErrorNotReady, CUDA_ERROR_NOT_READY);
SAME(cudaErrorNotSupported, CUDA_ERROR_NOT_SUPPORTED);
SAME(cudaErrorNoKernelImageForDevice, CUDA_ERROR_NO_BINARY_FOR_GPU);
SAME(cudaErrorIllegalAddress, CUDA_ERROR_ILLEGAL_ADDRESS);
SAME(cudaErrorPeerAccessAlreadyEnabled, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
SAME(cudaErrorPeerAccessNotEnabled, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
SAME(cudaErrorTooManyPeers, CUDA_ERROR_TOO_MANY_PEERS);
SAME(cudaErrorMapBufferObjectFailed, CUDA_ERROR_MAP_FAILED);
SAME(cudaIpcMemLazyEnablePeerAccess, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
/* Flags the runtime hands to the driver as they are. */
SAME(cudaStreamNonBlocking, CU_STREAM_NON_BLOCKING);
SAME(cudaEventBlockingSync, CU_EVENT_BLOCKING_SYNC);
SAME(cudaEventDisableTiming, CU_EVENT_DISABLE_TIMING);
SAME(cudaEventInterprocess, CU_EVENT_INTERPROCESS);
SAME(cudaHostAllocPortable, CU_MEMHOSTALLOC_PORTABLE);
SAME(cudaHostAllocMapped, CU_MEMHOSTALLOC_DEVICEMAP);
SAME(cudaHostAllocWriteCombined, CU_MEMHOSTALLOC_WRITECOMBINED);
SAME(cudaEnablePerThreadDefaultStream, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
SAME(cudaDriverEntryPointSymbolNotFound, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

struct error {
    int code;
    const char *name, *text;
};

static const struct error errors[] = {
#define SIM_ERROR(code, rt_name, drv_name, text) {code, rt_name, text},
#include "simgpu/error_table.h"
#undef SIM_ERROR
};

static __thread cudaError_t last_error;

static const struct error *lookup(cudaError_t code)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)code && errors[i].name)
            return &errors[i];
    return NULL;
}

/* cudaErrorNotReady is an answer, not an error: it is never recorded. */
cudaError_t ca_rt_ret(cudaError_t err)
{
    if (err != cudaSuccess && err != cudaErrorNotReady)
        last_error = err;
    return err;
}

CA_EXPORT const char *cudaGetErrorString(cudaError_t error)
{
    const struct error *e = lookup(error);
    return e ? e->text : "unrecognized error code";
}

CA_EXPORT const char *cudaGetErrorName(cudaError_t error)
{
    const struct error *e = lookup(error);
    return e ? e->name : "unrecognized error code";
}

CA_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

CA_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

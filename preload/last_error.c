/* cudart keeps, per thread, the last error a runtime call returned:
 * cudaGetLastError answers it and resets it, cudaPeekAtLastError answers it.
 * The calls cudalloc answers without entering cudart (cudaMalloc, cudaFree of
 * its blocks, ...) must count too. So an error we answer first clears
 * cudart's (it is older than ours) and becomes ours; an error cudart records
 * later is newer than ours, and wins. Reading resets both, as cudart does. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "preload/preload.h"

static __thread __attribute__((tls_model("initial-exec"))) cudaError_t tl_error;

/* cudaErrorNotReady is an answer, not an error: cudart never records it. */
int ca_rt_answered(int e) {
    if (e == cudaSuccess || e == cudaErrorNotReady) return e;
    /* cudart's older error is overwritten, as cudart overwrites it */
    CA_REAL(cudaGetLastError);
    if (real_cudaGetLastError) real_cudaGetLastError();
    tl_error = (cudaError_t)e;
    return e;
}

CA_EXPORT cudaError_t cudaGetLastError(void) {
    CA_REAL(cudaGetLastError);
    cudaError_t theirs = real_cudaGetLastError ? real_cudaGetLastError() : cudaSuccess, ours = tl_error;
    tl_error = cudaSuccess;
    return theirs != cudaSuccess ? theirs : ours;
}

CA_EXPORT cudaError_t cudaPeekAtLastError(void) {
    CA_REAL(cudaPeekAtLastError);
    cudaError_t theirs = real_cudaPeekAtLastError ? real_cudaPeekAtLastError() : cudaSuccess;
    return theirs != cudaSuccess ? theirs : tl_error;
}

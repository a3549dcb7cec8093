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

static cudaError_t (*real_get(void))(void) {
    static cudaError_t (*fn)(void);
    cudaError_t (*f)(void) = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (cudaError_t(*)(void))ca_real_dlsym(RTLD_NEXT, "cudaGetLastError");
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    }
    return f;
}

static cudaError_t (*real_peek(void))(void) {
    static cudaError_t (*fn)(void);
    cudaError_t (*f)(void) = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (cudaError_t(*)(void))ca_real_dlsym(RTLD_NEXT, "cudaPeekAtLastError");
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* cudaErrorNotReady is an answer, not an error: cudart never records it. */
int ca_rt_answered(int e) {
    if (e == cudaSuccess || e == cudaErrorNotReady) return e;
    cudaError_t (*get)(void) = real_get();
    if (get) get(); /* cudart's older error is overwritten, as cudart overwrites it */
    tl_error = (cudaError_t)e;
    return e;
}

CA_EXPORT cudaError_t cudaGetLastError(void) {
    cudaError_t (*get)(void) = real_get();
    cudaError_t theirs = get ? get() : cudaSuccess, ours = tl_error;
    tl_error = cudaSuccess;
    return theirs != cudaSuccess ? theirs : ours;
}

CA_EXPORT cudaError_t cudaPeekAtLastError(void) {
    cudaError_t (*peek)(void) = real_peek();
    cudaError_t theirs = peek ? peek() : cudaSuccess;
    return theirs != cudaSuccess ? theirs : tl_error;
}

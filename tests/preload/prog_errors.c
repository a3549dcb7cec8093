/* cudaGetLastError and cudaPeekAtLastError under the preload answer as
 * cudart does, for the calls cudalloc answers itself too: the newest error of
 * the thread, reset by cudaGetLastError. Run on a 64 MiB simulated device,
 * under the preload and on the device alone: both must pass. */
#include <cuda_runtime_api.h>
#include <string.h>

#include "tests/preload/check.h"

#define TIB ((size_t)1 << 40)

static const char *name(cudaError_t e) { return cudaGetErrorName(e); }

int main(void) {
    void *p = NULL, *q = NULL;
    CHECK(cudaMalloc(&p, 1 << 20) == cudaSuccess, "cudaMalloc");
    CHECK(cudaGetLastError() == cudaSuccess, "no error yet");
    /* out of memory: answered by cudalloc, the last error all the same */
    CHECK(cudaMalloc(&q, TIB) == cudaErrorMemoryAllocation, "1 TiB");
    CHECK(cudaPeekAtLastError() == cudaErrorMemoryAllocation, "peek: %s", name(cudaPeekAtLastError()));
    CHECK(cudaPeekAtLastError() == cudaErrorMemoryAllocation, "peek does not reset");
    cudaError_t e = cudaGetLastError();
    CHECK(e == cudaErrorMemoryAllocation, "get: %s", name(e));
    CHECK(cudaGetLastError() == cudaSuccess, "get resets");
    /* a bad free */
    CHECK(cudaFree(p) == cudaSuccess, "free");
    CHECK(cudaFree(p) == cudaErrorInvalidValue, "double free");
    CHECK((e = cudaGetLastError()) == cudaErrorInvalidValue, "double free is the last error: %s", name(e));
    /* the newest wins, whichever of cudart and cudalloc answered it */
    CHECK(cudaSetDevice(99) == cudaErrorInvalidDevice, "cudart's error");
    CHECK(cudaMalloc(&q, TIB) == cudaErrorMemoryAllocation, "then cudalloc's");
    CHECK((e = cudaGetLastError()) == cudaErrorMemoryAllocation, "cudalloc's is newer: %s", name(e));
    CHECK(cudaGetLastError() == cudaSuccess, "both reset");
    CHECK(cudaMalloc(&q, TIB) == cudaErrorMemoryAllocation, "cudalloc's error");
    CHECK(cudaSetDevice(99) == cudaErrorInvalidDevice, "then cudart's");
    CHECK((e = cudaPeekAtLastError()) == cudaErrorInvalidDevice, "cudart's is newer: %s", name(e));
    CHECK((e = cudaGetLastError()) == cudaErrorInvalidDevice, "get: %s", name(e));
    CHECK(cudaGetLastError() == cudaSuccess, "both reset");
    CHECK_DONE("last-error");
}

/* Allocators beside cudalloc in the same process (NCCL's cuMemCreate,
 * managed memory, a stream-ordered pool): after cudalloc cached 80% of the
 * device, each gets half of it, as it would without cudalloc, and a request
 * larger than the device still fails with CUDA's error. Run on a 1 GiB
 * simulated device, under the preload and on the device alone. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "tests/preload/check.h"

#define MIB ((size_t)1 << 20)

static size_t total;

/* 80% of the device allocated, then freed: cudalloc caches it. */
static void cache_most(void) {
    enum { N = 1024 };
    static void *p[N];
    size_t n = 0;
    for (; n < N && (n + 1) * 8 * MIB <= total / 10 * 8; n++)
        CHECK(cudaMalloc(&p[n], 8 * MIB) == cudaSuccess, "cudaMalloc %zu", n);
    for (size_t i = 0; i < n; i++) cudaFree(p[i]);
    cudaDeviceSynchronize();
}

int main(void) {
    size_t free_b = 0;
    CHECK(cudaMemGetInfo(&free_b, &total) == cudaSuccess, "cudaMemGetInfo");
    size_t half = total / 2 / (2 * MIB) * (2 * MIB);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h;

    cache_most();
    CUresult r = cuMemCreate(&h, half, &prop, 0);
    CHECK(r == CUDA_SUCCESS, "cuMemCreate of half the device after 80%% was cached: %d", r);
    if (r == CUDA_SUCCESS) cuMemRelease(h);

    /* as NCCL and cudart find it: through cuGetProcAddress */
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long) = NULL;
    CUdriverProcAddressQueryResult st;
    cuGetProcAddress("cuMemCreate", (void **)&create, 10020, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    cache_most();
    r = create ? create(&h, half, &prop, 0) : CUDA_ERROR_NOT_FOUND;
    CHECK(r == CUDA_SUCCESS, "cuMemCreate through cuGetProcAddress: %d", r);
    if (r == CUDA_SUCCESS) cuMemRelease(h);

    CUdeviceptr m = 0;
    cache_most();
    r = cuMemAllocManaged(&m, half, CU_MEM_ATTACH_GLOBAL);
    CHECK(r == CUDA_SUCCESS, "cuMemAllocManaged of half the device: %d", r);
    if (r == CUDA_SUCCESS) cuMemFree(m);

    CUmemoryPool pool = NULL;
    cuDeviceGetMemPool(&pool, 0);
    cache_most();
    r = cuMemAllocFromPoolAsync(&m, half, pool, NULL);
    CHECK(r == CUDA_SUCCESS, "cuMemAllocFromPoolAsync of half the device: %d", r);
    if (r == CUDA_SUCCESS) cuMemFreeAsync(m, NULL);
    cuStreamSynchronize(NULL);

    /* more than the device: still CUDA's error, after one retry */
    r = cuMemCreate(&h, 2 * total, &prop, 0);
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate of twice the device: %d", r);
    CHECK_DONE("beside");
}

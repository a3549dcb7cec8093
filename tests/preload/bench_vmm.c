/* What the driver charges per granule for the ways cudalloc changes what is
 * mapped (issue 11): creating one (cuMemCreate + cuMemMap + cuMemSetAccess),
 * moving one to another address (cuMemUnmap + cuMemMap + cuMemSetAccess, no
 * creation), and giving one back (cuMemUnmap + cuMemRelease). The driver
 * API directly, without cudalloc; for the GPU table in scripts/gpu-check.sh
 * (on the simulated device the figures only prove that it runs).
 *
 *   bench_vmm [GRANULES]     (default 64; each figure the median of 7 rounds)
 *
 * Prints `vmm OP ns-per-granule` lines. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/bench.h"

#define ROUNDS 7

static int failed(CUresult rc, const char *what) {
    if (rc == CUDA_SUCCESS) return 0;
    fprintf(stderr, "bench_vmm: %s failed (CUresult %d)\n", what, (int)rc);
    return 1;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    if (n < 1 || n > 4096) {
        fprintf(stderr, "bench_vmm: bad GRANULES '%s': accepted: 1 to 4096\n", argv[1]);
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    if (failed(cuInit(0), "cuInit") || failed(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        failed(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
        failed(cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
        return 1;
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t g = 0;
    if (failed(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity")) return 1;
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    /* two ranges of n granules: a moved granule goes from one to the other */
    CUdeviceptr va[2];
    if (failed(cuMemAddressReserve(&va[0], 2 * n * g, 0, 0, 0), "cuMemAddressReserve")) return 1;
    va[1] = va[0] + n * g;
    CUmemGenericAllocationHandle *h = calloc((size_t)n, sizeof *h);
    double create[ROUNDS], move[ROUNDS], give_back[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now_ns();
        for (int i = 0; i < n; i++)
            if (failed(cuMemCreate(&h[i], g, &prop, 0), "cuMemCreate") ||
                failed(cuMemMap(va[0] + i * g, g, 0, h[i], 0), "cuMemMap") ||
                failed(cuMemSetAccess(va[0] + i * g, g, &access, 1), "cuMemSetAccess"))
                return 1;
        create[r] = (bench_now_ns() - t0) / n;
        t0 = bench_now_ns();
        for (int i = 0; i < n; i++)
            if (failed(cuMemUnmap(va[0] + i * g, g), "cuMemUnmap") ||
                failed(cuMemMap(va[1] + i * g, g, 0, h[i], 0), "cuMemMap (move)") ||
                failed(cuMemSetAccess(va[1] + i * g, g, &access, 1), "cuMemSetAccess (move)"))
                return 1;
        move[r] = (bench_now_ns() - t0) / n;
        t0 = bench_now_ns();
        for (int i = 0; i < n; i++)
            if (failed(cuMemUnmap(va[1] + i * g, g), "cuMemUnmap") || failed(cuMemRelease(h[i]), "cuMemRelease"))
                return 1;
        give_back[r] = (bench_now_ns() - t0) / n;
    }
    printf("vmm granule %zu bytes, %d granules, median of %d rounds, ns per granule\n", g, n, ROUNDS);
    printf("vmm create %.0f\nvmm move %.0f\nvmm give-back %.0f\n", bench_median(create, ROUNDS),
           bench_median(move, ROUNDS), bench_median(give_back, ROUNDS));
    free(h);
    cuMemAddressFree(va[0], 2 * n * g);
    return 0;
}

/* Time per alloc+free pair through the runtime API, for the GPU table in
 * scripts/gpu-check.sh: run once natively and once under the preload. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tests/bench.h"

/* Median over 5 rounds of n pairs, in ns per pair; <0 on an error. */
static double pairs(int async, cudaStream_t s, size_t size, int n) {
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = bench_now_ns();
        for (int i = 0; i < n; i++) {
            void *p;
            if ((async ? cudaMallocAsync(&p, size, s) : cudaMalloc(&p, size)) != cudaSuccess) return -1;
            if ((async ? cudaFreeAsync(p, s) : cudaFree(p)) != cudaSuccess) return -1;
        }
        cudaDeviceSynchronize();
        t[r] = (bench_now_ns() - t0) / n;
    }
    return bench_median(t, 5);
}

int main(int argc, char **argv) {
    const char *label = argc > 1 ? argv[1] : "run";
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) {
        fprintf(stderr, "bench_latency: no device\n");
        return 2;
    }
    const size_t sizes[] = {4096, 1 << 20, 64 << 20};
    for (int k = 0; k < 3; k++) {
        printf("%s cudaMalloc+cudaFree %zu %.1f\n", label, sizes[k], pairs(0, s, sizes[k], 200));
        printf("%s cudaMallocAsync+cudaFreeAsync %zu %.1f\n", label, sizes[k], pairs(1, s, sizes[k], 5000));
    }
    return 0;
}

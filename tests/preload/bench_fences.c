/* What a plain cudaMalloc+cudaFree pair costs when non-blocking streams are
 * alive (PyTorch makes 32 per priority, NCCL more): host time per pair and,
 * on the simulated device, the event records per pair (cuEventRecord and
 * cuCtxRecordEvent). Run under the preload (BENCHMARKS.md, gpu-check.sh):
 *   bench_fences [STREAMS...]        default 0 8 128 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "simgpu/simgpu.h"
#include "tests/bench.h"

#define PAIRS 2000
#define ROUNDS 5

static int (*counters)(simgpu_counters_t *);

static uint64_t records(uint64_t *ctx) {
    simgpu_counters_t c;
    if (!counters || counters(&c) != 0) return *ctx = 0;
    *ctx = c.ctx_records;
    return c.event_records;
}

int main(int argc, char **argv) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOW);
    counters = driver ? (int (*)(simgpu_counters_t *))dlsym(driver, "simgpu_counters") : NULL;
    int defaults[] = {0, 8, 128}, n = argc > 1 ? argc - 1 : 3;
    for (int k = 0; k < n; k++) {
        int streams = argc > 1 ? atoi(argv[k + 1]) : defaults[k];
        cudaStream_t *s = calloc((size_t)streams + 1, sizeof *s);
        for (int i = 0; i < streams; i++)
            if (cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking) != cudaSuccess) {
                fprintf(stderr, "bench_fences: no device\n");
                return 2;
            }
        double t[ROUNDS];
        uint64_t ctx0, ctx1, ev0 = records(&ctx0);
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = bench_now_ns();
            for (int i = 0; i < PAIRS; i++) {
                void *p;
                if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) {
                    fprintf(stderr, "bench_fences: a pair failed\n");
                    return 1;
                }
            }
            t[r] = (bench_now_ns() - t0) / PAIRS;
        }
        uint64_t ev1 = records(&ctx1);
        double pairs = (double)PAIRS * ROUNDS;
        if (counters)
            printf("fences streams=%d ns_per_pair=%.0f event_records_per_pair=%.2f ctx_records_per_pair=%.2f\n",
                   streams, bench_median(t, ROUNDS), (double)(ev1 - ev0) / pairs, (double)(ctx1 - ctx0) / pairs);
        else
            printf("fences streams=%d ns_per_pair=%.0f\n", streams, bench_median(t, ROUNDS));
        for (int i = 0; i < streams; i++) cudaStreamDestroy(s[i]);
        free(s);
    }
    return 0;
}

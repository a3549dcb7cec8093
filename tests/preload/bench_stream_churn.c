/* What a stream per request costs among many live ones (issue 29): N
 * non-blocking streams each hold a 4 KiB block; then, cycle after cycle, the
 * oldest stream's block is freed in its order and the stream destroyed, and a
 * new stream is made and allocates its first block (its pool is made, or a
 * spare one taken, and its memory reserved and mapped). Run under the preload
 * on the simulated device, or without it for the simulated driver's own cost:
 *   bench_stream_churn [N...]        default 250 4000
 * Prints ns per cycle (the median of 5 rounds of 400) for each N and the
 * last / first. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/bench.h"

enum { ROUNDS = 5, CYCLES = 400 };

static void must(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_stream_churn: %s failed (%d)\n", what, (int)e);
        exit(1);
    }
}

static double cycle_ns(int n) {
    int total = n + ROUNDS * CYCLES;
    cudaStream_t *s = calloc((size_t)total, sizeof *s);
    void **p = calloc((size_t)total, sizeof *p);
    if (!s || !p) exit(1);
    for (int i = 0; i < n; i++) {
        must(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking), "a stream");
        must(cudaMallocAsync(&p[i], 4096, s[i]), "a block");
    }
    double t[ROUNDS];
    for (int r = 0, c = 0; r < ROUNDS; r++) {
        double t0 = bench_now_ns();
        for (int k = 0; k < CYCLES; k++, c++) {
            must(cudaFreeAsync(p[c], s[c]), "the oldest stream's free");
            must(cudaStreamDestroy(s[c]), "the oldest stream's end");
            must(cudaStreamCreateWithFlags(&s[n + c], cudaStreamNonBlocking), "a new stream");
            must(cudaMallocAsync(&p[n + c], 4096, s[n + c]), "its first block");
        }
        t[r] = (bench_now_ns() - t0) / CYCLES;
    }
    for (int i = ROUNDS * CYCLES; i < total; i++) {
        cudaFreeAsync(p[i], s[i]);
        cudaStreamDestroy(s[i]);
    }
    free(s);
    free(p);
    return bench_median(t, ROUNDS);
}

int main(int argc, char **argv) { return bench_stream_counts(argc, argv, "bench_stream_churn", cycle_ns); }

/* What a cudaMallocAsync+cudaFreeAsync pair costs with many live non-blocking
 * streams (issue 29: 12 us at 250, 594 us at 4,000 before): each stream holds
 * a 4 KiB block; then each stream in turn allocates and frees, four passes a
 * round, the sizes rising so that every pass reaches new peaks. Run under the
 * preload on the simulated device:
 *   bench_streams_async [N...]        default 250 4000
 * Prints ns per pair (median of 5 rounds) for each N and the last / first;
 * under the preload also what the N streams' 4 KiB blocks keep reserved. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "include/cudalloc.h"
#include "tests/bench.h"

enum { ROUNDS = 5, PASSES = 4 };

static double pair_ns(int n) {
    cudaStream_t *s = calloc((size_t)n, sizeof *s);
    void **keep = calloc((size_t)n, sizeof *keep);
    if (!s || !keep) exit(1);
    for (int i = 0; i < n; i++)
        if (cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking) != cudaSuccess ||
            cudaMallocAsync(&keep[i], 4096, s[i]) != cudaSuccess) {
            fprintf(stderr, "bench_streams_async: no device or stream\n");
            exit(2);
        }
    cudalloc_stats st;
    if (CUDALLOC_CALL(cudalloc_get_stats, 0, &st) == 0)
        printf("bench_streams_async streams=%d held=%.2f MiB reserved=%.2f MiB (a 4 KiB block a stream)\n", n,
               st.allocated_bytes / 1048576.0, st.reserved_bytes / 1048576.0);
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now_ns();
        for (int k = 0; k < PASSES; k++)
            for (int i = 0; i < n; i++) {
                void *p;
                if (cudaMallocAsync(&p, 8192 + 512 * (size_t)(r * PASSES + k), s[i]) != cudaSuccess ||
                    cudaFreeAsync(p, s[i]) != cudaSuccess) {
                    fprintf(stderr, "bench_streams_async: a pair failed\n");
                    exit(1);
                }
            }
        t[r] = (bench_now_ns() - t0) / (PASSES * n);
    }
    for (int i = 0; i < n; i++) {
        cudaFreeAsync(keep[i], s[i]);
        cudaStreamDestroy(s[i]);
    }
    free(s);
    free(keep);
    return bench_median(t, ROUNDS);
}

int main(int argc, char **argv) { return bench_stream_counts(argc, argv, "bench_streams_async", pair_ns); }

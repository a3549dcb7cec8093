/* What a cudaFree + cudaMalloc pair costs with many live blocks (issue 29):
 * LIVE blocks of 512 B to 32 KiB are allocated, then each pair frees one
 * picked at random (a step of 2654435761, prime to LIVE, visits every one in
 * a scattered order) and allocates it again. Run under the preload on the
 * simulated device, with tracking on and off (CUDALLOC_CONF):
 *   bench_many_live [LIVE [PAIRS]]        default 100000 500000
 * Prints ns a pair, the median of 3 rounds. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/bench.h"

enum { ROUNDS = 3 };

static void must(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_many_live: %s failed (%d)\n", what, (int)e);
        exit(1);
    }
}

static size_t size_of(size_t i) { return 512 + (i % 64) * 512; }

int main(int argc, char **argv) {
    long live = argc > 1 ? atol(argv[1]) : 100000, pairs = argc > 2 ? atol(argv[2]) : 500000;
    if (live < 1 || pairs < 1) {
        fprintf(stderr, "bench_many_live: LIVE and PAIRS must be positive numbers\n");
        return 2;
    }
    void **p = calloc((size_t)live, sizeof *p);
    if (!p) return 1;
    for (long i = 0; i < live; i++) must(cudaMalloc(&p[i], size_of((size_t)i)), "cudaMalloc");
    double v[ROUNDS];
    size_t step = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now_ns();
        for (long i = 0; i < pairs; i++, step++) {
            size_t k = (step * 2654435761u) % (size_t)live;
            must(cudaFree(p[k]), "cudaFree");
            must(cudaMalloc(&p[k], size_of(step)), "cudaMalloc");
        }
        v[r] = (bench_now_ns() - t0) / (double)pairs;
    }
    printf("%ld live, %ld pairs a round: %.1f ns a cudaFree + cudaMalloc pair (median of %d)\n", live, pairs,
           bench_median(v, ROUNDS), ROUNDS);
    for (long i = 0; i < live; i++) must(cudaFree(p[i]), "cudaFree");
    free(p);
    return 0;
}

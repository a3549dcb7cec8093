/* What the preload adds per alloc+free pair over calling the allocator core
 * directly. One process, under the preload on the simulated device: the core
 * is linked in too (its own instance, count backend), timed in the same run.
 * The plain pair is timed twice: with blocking streams only (a plain free's
 * fence is one legacy-stream event) and with a non-blocking stream alive (an
 * event on it too, and the block waits until both completed).
 * Arguments (optional): pairs per round (default 2000000) and one path to run
 * alone (core, async, plain, nonblocking), e.g. a small count of one path
 * under valgrind --tool=callgrind to count instructions per pair. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocator/allocator.h"
#include "tests/bench.h"

enum { ROUNDS = 7 };
static int PAIRS = 2000000;

typedef double (*bench_fn)(void *ctx);

static double median(bench_fn fn, void *ctx) {
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) t[r] = fn(ctx);
    return bench_median(t, ROUNDS);
}

static double core(void *ctx) {
    ca_allocator *a = ctx;
    void *p;
    double t0 = bench_now_ns();
    for (int i = 0; i < PAIRS; i++) {
        ca_malloc(a, 4096, 0, &p, NULL);
        ca_free(a, p, 0);
    }
    return (bench_now_ns() - t0) / PAIRS;
}

static double runtime_plain(void *ctx) {
    void *p;
    double t0 = bench_now_ns();
    for (int i = 0; i < PAIRS; i++) {
        cudaMalloc(&p, 4096);
        cudaFree(p);
    }
    return (bench_now_ns() - t0) / PAIRS;
}

static double runtime_async(void *ctx) {
    cudaStream_t s = ctx;
    void *p;
    double t0 = bench_now_ns();
    for (int i = 0; i < PAIRS; i++) {
        cudaMallocAsync(&p, 4096, s);
        cudaFreeAsync(p, s);
    }
    return (bench_now_ns() - t0) / PAIRS;
}

int main(int argc, char **argv) {
    if (argc > 1 && atoi(argv[1]) > 0) PAIRS = atoi(argv[1]);
    const char *only = argc > 2 ? argv[2] : NULL;
    ca_allocator *a;
    if (ca_allocator_new(ca_backend_count_new(0, 2 << 20), NULL, &a) != CA_OK) return 1;
    cudaStream_t s;
    void *warm;
    if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&warm, 4096) != cudaSuccess) {
        fprintf(stderr, "bench_preload: no device\n");
        return 1;
    }
    cudaFree(warm);
#define RUN(name, fn, ctx) (!only || !strcmp(only, name) ? median(fn, ctx) : 0.0)
    double c = RUN("core", core, a), plain = RUN("plain", runtime_plain, NULL), async = RUN("async", runtime_async, s);
    cudaStream_t nb;
    if (cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking) != cudaSuccess) return 1;
    double plain_nb = RUN("nonblocking", runtime_plain, NULL);
    printf("alloc+free pair, 4 KiB, median of %d rounds of %d pairs:\n", ROUNDS, PAIRS);
    printf("  core directly (count backend)       %6.1f ns\n", c);
    printf("  cudaMallocAsync+cudaFreeAsync       %6.1f ns  (+%.1f ns over the core)\n", async, async - c);
    printf("  cudaMalloc+cudaFree                 %6.1f ns  (+%.1f ns; the fence: one legacy-stream event)\n",
           plain, plain - c);
    printf("  cudaMalloc+cudaFree, non-blocking   %6.1f ns  (+%.1f ns; the fence: two events, queried)\n", plain_nb,
           plain_nb - c);
    ca_allocator_destroy(a);
    return 0;
}

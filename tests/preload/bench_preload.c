/* What the preload adds per alloc+free pair over calling the allocator core
 * directly. One process, under the preload on the simulated device: the core
 * is linked in too (its own instance, count backend), timed in the same run.
 * The plain pair is timed twice: with blocking streams only (a plain free's
 * fence is one legacy-stream event) and with a non-blocking stream alive (an
 * event on it too, and the block waits until both completed).
 * The core is also timed on a device that runs work after calls return, as
 * the preload's does, but whose fences pass at once: the allocator's own
 * work there (busy granules, plain frees pending until a fence) without the
 * driver's, the baseline for the preload's own cost on each route.
 * Arguments (optional): pairs per round (default 2000000) and one path to run
 * alone (core, core-async, core-plain, async, plain, nonblocking), e.g. a
 * small count of one path under valgrind --tool=callgrind to count
 * instructions per pair. */
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

static double core_async(void *ctx) {
    ca_allocator *a = ctx;
    void *p;
    double t0 = bench_now_ns();
    for (int i = 0; i < PAIRS; i++) {
        ca_malloc_ordered(a, 4096, 0, &p, NULL);
        ca_free(a, p, 0);
    }
    return (bench_now_ns() - t0) / PAIRS;
}

static double core_plain(void *ctx) {
    ca_allocator *a = ctx;
    void *p;
    double t0 = bench_now_ns();
    for (int i = 0; i < PAIRS; i++) {
        ca_malloc(a, 4096, 0, &p, NULL);
        ca_free_device(a, p, 0);
    }
    return (bench_now_ns() - t0) / PAIRS;
}

/* Fences that have passed when recorded (backend.h: fence 0). */
static int fence_passed(void *self, ca_fence *f) {
    *f = 0;
    return CA_OK;
}
static int fence_done(void *self, ca_fence f) { return 1; }
static void fence_gone(void *self, ca_fence f) {}

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
    ca_backend *later = ca_backend_count_new(0, 2 << 20);
    if (!later) return 1;
    later->fence_record = fence_passed;
    later->fence_query = later->fence_wait = fence_done;
    later->fence_destroy = fence_gone;
    ca_allocator *a, *dev;
    if (ca_allocator_new(ca_backend_count_new(0, 2 << 20), NULL, &a) != CA_OK) return 1;
    if (ca_allocator_new(later, NULL, &dev) != CA_OK) return 1;
    cudaStream_t s;
    void *warm;
    if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&warm, 4096) != cudaSuccess) {
        fprintf(stderr, "bench_preload: no device\n");
        return 1;
    }
    cudaFree(warm);
#define RUN(name, fn, ctx) (!only || !strcmp(only, name) ? median(fn, ctx) : 0.0)
    double c = RUN("core", core, a), c_async = RUN("core-async", core_async, dev),
           c_plain = RUN("core-plain", core_plain, dev), plain = RUN("plain", runtime_plain, NULL), async = RUN("async", runtime_async, s);
    cudaStream_t nb;
    if (cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking) != cudaSuccess) return 1;
    double plain_nb = RUN("nonblocking", runtime_plain, NULL);
    printf("alloc+free pair, 4 KiB, median of %d rounds of %d pairs:\n", ROUNDS, PAIRS);
    printf("  core directly (count backend)       %6.1f ns\n", c);
    printf("  core, device running work later:\n");
    printf("    malloc_ordered+free               %6.1f ns  (the async pair's allocator share)\n", c_async);
    printf("    malloc+free_device                %6.1f ns  (the plain pair's, fences passed)\n", c_plain);
    printf("  cudaMallocAsync+cudaFreeAsync       %6.1f ns  (+%.1f ns over the core)\n", async, async - c);
    printf("  cudaMalloc+cudaFree                 %6.1f ns  (+%.1f ns; the fence: one legacy-stream event)\n",
           plain, plain - c);
    printf("  cudaMalloc+cudaFree, non-blocking   %6.1f ns  (+%.1f ns; the fence: two events, queried)\n", plain_nb,
           plain_nb - c);
    printf("  the preload's own: async %+.1f ns, plain %+.1f ns, non-blocking %+.1f ns (over the lines above)\n",
           async - c_async, plain - c_plain, plain_nb - c_plain);
    ca_allocator_destroy(a);
    ca_allocator_destroy(dev);
    return 0;
}

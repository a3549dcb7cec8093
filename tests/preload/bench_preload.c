/* What the preload adds per alloc+free pair over calling the allocator core
 * directly. One process, under the preload on the simulated device: the core
 * is linked in too (its own instance, count backend), timed in the same run.
 * The plain pair is timed twice: with blocking streams only (a plain free's
 * fence is one legacy-stream event, passed at record) and with a non-blocking
 * stream alive (the fence waits: the context's event, or one on each stream,
 * and the blocks wait until it completed). Either is recorded once per 64
 * frees in this loop (allocator/fence.c).
 * The core is also timed on a device that runs work after calls return, as
 * the preload's does, but whose fences pass at once: the allocator's own
 * work there (busy granules, plain frees pending until a fence) without the
 * driver's, the baseline for the preload's own cost on each route.
 * Every device has a second pool (a block on another stream, allocated and
 * freed once), as a program with one stream beside the default one has: its
 * figures then keep device-wide totals (allocator/internal.h: `several`),
 * on the preload's device and on the allocator's alike, whichever paths run.
 * The rounds of the first five paths are taken in turn (run_in_turn).
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

typedef struct {
    const char *name;
    bench_fn fn;
    void *ctx;
    double t[ROUNDS];
} path;

/* Each path's median: rounds of the paths taken in turn, so that a busy
 * moment of a shared machine falls on all of them alike (the preload's own
 * cost is a difference of two paths); 0 for a path not run. */
static void run_in_turn(path *ps, int n, const char *only, double *median) {
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < n; i++)
            if (!only || !strcmp(only, ps[i].name)) ps[i].t[r] = ps[i].fn(ps[i].ctx);
    for (int i = 0; i < n; i++) median[i] = !only || !strcmp(only, ps[i].name) ? bench_median(ps[i].t, ROUNDS) : 0.0;
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
    if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&warm, 4096) != cudaSuccess ||
        cudaFree(warm) != cudaSuccess || cudaMallocAsync(&warm, 4096, s) != cudaSuccess ||
        cudaFreeAsync(warm, s) != cudaSuccess) {
        fprintf(stderr, "bench_preload: no device\n");
        return 1;
    }
    for (int i = 0; i < 4; i++) { /* the allocators' pools: stream 0's, then stream 1's */
        ca_allocator *core_a = i % 2 ? dev : a;
        ca_stream stream = i / 2;
        if (ca_malloc(core_a, 4096, stream, &warm, NULL) != CA_OK || ca_free(core_a, warm, stream) != CA_OK) return 1;
    }
    path ps[] = {{"core", core, a},
                 {"core-async", core_async, dev},
                 {"core-plain", core_plain, dev},
                 {"plain", runtime_plain, NULL},
                 {"async", runtime_async, s}};
    double m[5], m_nb;
    run_in_turn(ps, 5, only, m);
    double c = m[0], c_async = m[1], c_plain = m[2], plain = m[3], async = m[4];
    cudaStream_t nb;
    if (cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking) != cudaSuccess) return 1;
    path nonblocking = {"nonblocking", runtime_plain, NULL};
    run_in_turn(&nonblocking, 1, only, &m_nb);
    double plain_nb = m_nb;
    printf("alloc+free pair, 4 KiB, median of %d rounds of %d pairs:\n", ROUNDS, PAIRS);
    printf("  core directly (count backend)       %6.1f ns\n", c);
    printf("  core, device running work later:\n");
    printf("    malloc_ordered+free               %6.1f ns  (the async pair's allocator share)\n", c_async);
    printf("    malloc+free_device                %6.1f ns  (the plain pair's, fences passed)\n", c_plain);
    printf("  cudaMallocAsync+cudaFreeAsync       %6.1f ns  (+%.1f ns over the core)\n", async, async - c);
    printf("  cudaMalloc+cudaFree                 %6.1f ns  (+%.1f ns; fences pass at record: legacy-stream events)\n",
           plain, plain - c);
    printf("  cudaMalloc+cudaFree, non-blocking   %6.1f ns  (+%.1f ns; fences that wait, queried)\n", plain_nb,
           plain_nb - c);
    printf("  the preload's own: async %+.1f ns, plain %+.1f ns, non-blocking %+.1f ns (over the lines above)\n",
           async - c_async, plain - c_plain, plain_nb - c_plain);
    ca_allocator_destroy(a);
    ca_allocator_destroy(dev);
    return 0;
}

/* What tracking costs per alloc+free pair: the allocator on the count
 * backend called from the bottom of a deep call chain, with and without the
 * tracker observing (stack capture, live table, call-site counters, ring),
 * the difference being the tracking cost. Also: a plain libunwind walk from
 * the same depth (what every capture would cost without the cache), and the
 * tracker's memory per live allocation.
 *
 *   build/bench/bench_tracking [pairs [depth [live]]]      (make bench-tracking)
 * With a depth: that depth only (e.g. a small count under valgrind
 * --tool=callgrind, to count instructions per pair). With live (default
 * 64): that many allocations stay live and each pair frees one picked at
 * random, as a job with many tensors does; the full run ends with a row of
 * 100,000 live at depth 20 (issue 29). */
#define _GNU_SOURCE
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "allocator/allocator.h"
#include "reports/track/tracker.h"

#define FEW 64
#define MANY 100000
static void *ring[MANY];
static size_t ring_pos, live_n = FEW;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The work at the bottom: one allocation, one free of the oldest live one
 * (64 stay live, as tensors of a forward pass do), or with more live, of
 * one picked at random (a step of 2654435761, prime to live_n, visits every
 * one in a scattered order). Sizes cycle. */
static __attribute__((noinline)) void pairs(ca_allocator *a, long n) {
    static const size_t sizes[8] = {512, 4096, 65536, 1 << 20, 3 << 20, 8192, 100000, 2 << 20};
    for (long i = 0; i < n; i++) {
        size_t k = live_n == FEW ? ring_pos++ % FEW : (ring_pos++ * 2654435761u) % live_n;
        if (ring[k]) ca_free(a, ring[k], 0);
        ca_malloc(a, sizes[i & 7], 0, &ring[k], NULL);
    }
}

static __attribute__((noinline)) void chain(ca_allocator *a, long n, int depth) {
    if (depth > 0) chain(a, n, depth - 1);
    else pairs(a, n);
    __asm__ volatile("" ::: "memory"); /* a real frame each level, no tail call */
}

static volatile int sink;
static __attribute__((noinline)) void unwind_at(int depth, long n) {
    if (depth > 0) {
        unwind_at(depth - 1, n);
    } else {
        void *ips[128];
        for (long i = 0; i < n; i++) sink += unw_backtrace(ips, 128);
    }
    __asm__ volatile("" ::: "memory");
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* ns per pair over one run of n pairs on a fresh allocator; with a tracker,
 * *mem_per_live (when not NULL) measured after the timed pairs. */
static double one_run(int depth, long n, int track, size_t *mem_per_live) {
    ca_allocator *a;
    ca_allocator_new(ca_backend_count_new(0, 2 << 20), NULL, &a);
    ca_tracker *tr = NULL;
    if (track) {
        tr = ca_tracker_new(NULL);
        ca_tracker_attach(tr, a);
    }
    for (size_t k = 0; k < live_n; k++) ring[k] = NULL;
    chain(a, live_n > 1000 ? (long)live_n : 1000, depth); /* warm: stacks seen, pools made, all live */
    double t0 = now_ns();
    chain(a, n, depth);
    double t = (now_ns() - t0) / (double)n;
    if (tr && mem_per_live) {
        size_t live, before = ca_tracker_memory(tr, &live);
        enum { EXTRA = 200000 };
        void **extra = malloc(EXTRA * sizeof *extra);
        for (int k = 0; k < EXTRA; k++) ca_malloc(a, 4096, 0, &extra[k], NULL);
        size_t after = ca_tracker_memory(tr, &live);
        *mem_per_live = (after - before) / EXTRA;
        for (int k = 0; k < EXTRA; k++) ca_free(a, extra[k], 0);
        free(extra);
    }
    for (size_t k = 0; k < live_n; k++)
        if (ring[k]) ca_free(a, ring[k], 0);
    if (tr) {
        ca_tracker_detach(tr, a);
        ca_tracker_destroy(tr);
    }
    ca_allocator_destroy(a);
    return t;
}

/* Medians of `runs` runs each, untracked and tracked taken in turn, so that a
 * busy stretch of a shared machine falls on both alike (the cost is their
 * difference). */
static void measure(int depth, long n, int runs, double *untracked, double *tracked, size_t *mem_per_live) {
    double u[32], t[32];
    for (int r = 0; r < runs; r++) {
        u[r] = one_run(depth, n, 0, NULL);
        t[r] = one_run(depth, n, 1, r == 0 ? mem_per_live : NULL);
    }
    qsort(u, (size_t)runs, sizeof u[0], cmp);
    qsort(t, (size_t)runs, sizeof t[0], cmp);
    *untracked = u[runs / 2];
    *tracked = t[runs / 2];
}

/* One row: the pairs at depth d with live_n live. */
static void row(int d, long n, int runs) {
    size_t mem = 0;
    double base, tracked;
    measure(d, n, runs, &base, &tracked, &mem);
    double t0 = now_ns();
    unwind_at(d, n / 10);
    double unw = (now_ns() - t0) / (double)(n / 10);
    printf("%-7d %-8zu %-12.1f %-12.1f %-12.1f %-16.1f %zu\n", d, live_n, base, tracked, tracked - base, unw, mem);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    int only = argc > 2 ? atoi(argv[2]) : -1;
    long live = argc > 3 ? atol(argv[3]) : FEW;
    if (n <= 0 || live < 1 || live > MANY) {
        fprintf(stderr, "bench_tracking: pairs must be positive and live 1 to %d\n", MANY);
        return 2;
    }
    const int runs = 7;
    printf("tracking cost per alloc+free pair (count backend, %ld pairs, median of %d runs)\n", n, runs);
    printf("%-7s %-8s %-12s %-12s %-12s %-16s %s\n", "depth", "live", "untracked", "tracked", "cost", "unw_backtrace",
           "bytes/live");
    static const int depths[] = {5, 15, 20, 25, 40};
    if (only >= 0) {
        live_n = (size_t)live;
        row(only, n, runs);
    } else {
        for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) row(depths[i], n, runs);
        live_n = MANY;
        row(20, n, runs);
    }
    printf("(depth: frames of the program's own call chain under the allocator call; the stack\n"
           " also holds the allocator's and the tracker's frames and main's callers. live: that\n"
           " many stay live; with more than 64, each pair frees one picked at random. bytes/live:\n"
           " tracker memory per live allocation over 200000 more live ones; the event ring, full\n"
           " by then, is apart: 32 bytes an event, 2^20 events by default.)\n");
    return 0;
}

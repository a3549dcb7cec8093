/* What the shared pool (allocator/share.c) costs a stream that holds little:
 * T threads, each on a stream of its own, allocate and free 4 KiB in stream
 * order (ca_malloc_ordered, ca_free), with share_bytes at its default and at
 * 0 (a pool each), in turn. Count backend: no device, so a shared block's
 * free is reused at once, without a fence. A second pool (a block on another
 * stream, allocated and freed once) stands for the program's default stream.
 *
 *   build/tests/bench_share [THREADS...]     default 1 2
 *
 * Prints ns per pair (wall time over one thread's pairs, the median of 5
 * rounds) for each thread count, shared and not, and their ratio. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "allocator/allocator.h"
#include "tests/bench.h"

enum { ROUNDS = 5, PAIRS = 500000, MAX_THREADS = 64 };

static ca_allocator *a;

static void *pairs(void *arg) {
    ca_stream s = (ca_stream)(uintptr_t)arg;
    void *p;
    for (int i = 0; i < PAIRS; i++)
        if (ca_malloc_ordered(a, 4096, s, &p, NULL) != CA_OK || ca_free(a, p, s) != CA_OK) {
            fprintf(stderr, "bench_share: a pair failed\n");
            exit(1);
        }
    return NULL;
}

static double pair_ns(int threads, size_t share_bytes) {
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        ca_options opt;
        ca_options_default(&opt);
        opt.share_bytes = share_bytes;
        void *w;
        if (ca_allocator_new(ca_backend_count_new(0, 2u << 20), &opt, &a) != CA_OK ||
            ca_malloc(a, 4096, 0, &w, NULL) != CA_OK || ca_free(a, w, 0) != CA_OK)
            exit(1);
        pthread_t th[MAX_THREADS];
        double t0 = bench_now_ns();
        for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, pairs, (void *)(uintptr_t)(i + 1));
        for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
        t[r] = (bench_now_ns() - t0) / PAIRS;
        ca_allocator_destroy(a);
    }
    return bench_median(t, ROUNDS);
}

int main(int argc, char **argv) {
    int defaults[] = {1, 2}, n = argc > 1 ? argc - 1 : 2;
    for (int k = 0; k < n; k++) {
        int threads = argc > 1 ? atoi(argv[k + 1]) : defaults[k];
        if (threads < 1 || threads > MAX_THREADS) {
            fprintf(stderr, "bench_share: bad thread count '%s': accepted: 1 to %d\n", argv[k + 1], MAX_THREADS);
            return 2;
        }
        double shared = pair_ns(threads, CA_SHARE_BYTES), own = pair_ns(threads, 0);
        printf("bench_share threads=%d shared_ns_per_pair=%.1f own_pools_ns_per_pair=%.1f ratio %.2f\n", threads,
               shared, own, shared / own);
    }
    return 0;
}

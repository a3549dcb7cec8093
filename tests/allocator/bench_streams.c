/* What an allocation costs with many live streams (issue 29): each of N
 * streams holds a 4 KiB block; then, round after round, each stream in turn
 * allocates and frees a block (the thread's last pool is never the one it
 * needs, as with a server's stream per request). A round's first four
 * passes reach new peaks of every pool. Count backend, one thread.
 *
 *   build/tests/bench_streams [N...]     default 250 4000
 *
 * Prints ns per malloc+free pair (the median of 9 rounds of 4 passes) for
 * each N, and the ratio of the last to the first. */
#include <stdio.h>
#include <stdlib.h>

#include "allocator/allocator.h"
#include "tests/bench.h"

enum { ROUNDS = 9, PASSES = 4 };

static double pair_ns(int n) {
    ca_allocator *a;
    if (ca_allocator_new(ca_backend_count_new(0, 2u << 20), NULL, &a) != CA_OK) exit(1);
    void *p;
    for (int i = 0; i < n; i++)
        if (ca_malloc(a, 4096, (ca_stream)(i + 1), &p, NULL) != CA_OK) exit(1);
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now_ns();
        for (int k = 0; k < PASSES; k++)
            for (int i = 0; i < n; i++) {
                ca_stream s = (ca_stream)(i + 1);
                if (ca_malloc(a, 8192 + 512 * (size_t)(r * PASSES + k), s, &p, NULL) != CA_OK ||
                    ca_free(a, p, s) != CA_OK) {
                    fprintf(stderr, "bench_streams: a pair failed\n");
                    exit(1);
                }
            }
        t[r] = (bench_now_ns() - t0) / (PASSES * n);
    }
    ca_allocator_destroy(a);
    return bench_median(t, ROUNDS);
}

int main(int argc, char **argv) { return bench_stream_counts(argc, argv, "bench_streams", pair_ns); }

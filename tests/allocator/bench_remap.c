/* What a request that needs new granules costs when it moves free granules
 * instead of creating them, and what the search for them costs when there is
 * nothing to find (the budget spent), on the count and host backends.
 *
 *   build/tests/bench_remap [ROUNDS]
 *
 * Each figure is the median over ROUNDS (default 201) of one ca_malloc call,
 * timed alone on a fresh allocator set up for it:
 *   create K   a request of K granules + 512 B after a live 1-granule block:
 *              K + 1 created
 *   move K     the same request after a free K-granule block in front of a live
 *              one: K moved, 1 created
 *   visit      the search for free granules looks at one free block for each
 *              unit of its budget (CA_REMAP_BUDGET + 2 per granule needed):
 *              the time per block, walking 4096 free blocks largest first as
 *              the search does, gives what a search that finds nothing costs.
 * A GPU pays cuMemCreate + cuMemMap + cuMemSetAccess per created granule and
 * cuMemUnmap + cuMemMap + cuMemSetAccess per moved one (no GPU here). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "allocator/internal.h"
#include "tests/bench.h"

#define MIB ((size_t)1 << 20)
#define G (2 * MIB)

static ca_allocator *fresh(int host) {
    ca_backend *be = host ? ca_backend_host_new(1024 * MIB, G) : ca_backend_count_new(0, G);
    ca_options o;
    ca_options_default(&o);
    o.release_after = 0;
    ca_allocator *a;
    if (!be || ca_allocator_new(be, &o, &a) != CA_OK) {
        fprintf(stderr, "bench_remap: the %s backend failed to start\n", host ? "host" : "count");
        exit(1);
    }
    return a;
}

static void *must(ca_allocator *a, size_t size) {
    void *p;
    if (ca_malloc(a, size, 0, &p, NULL) != CA_OK) {
        fprintf(stderr, "bench_remap: allocation of %zu bytes failed\n", size);
        exit(1);
    }
    return p;
}

enum { CREATE, MOVE };

/* One timed call in the state `kind` sets up; returns ns, checks the moves. */
static double one(int host, int kind, size_t k) {
    ca_allocator *a = fresh(host);
    if (kind == MOVE) {
        void *x = must(a, k * G);
        must(a, G);
        ca_free(a, x, 0);
    } else {
        must(a, G); /* the same range, without the hole */
    }
    ca_stats before;
    ca_get_stats(a, &before);
    void *p;
    size_t size = k * G + 512;
    double t0 = bench_now_ns();
    int rc = ca_malloc(a, size, 0, &p, NULL);
    double t = bench_now_ns() - t0;
    ca_stats after;
    ca_get_stats(a, &after);
    if (rc != CA_OK || (kind == MOVE && after.num_granules_moved - before.num_granules_moved != (int64_t)k)) {
        fprintf(stderr, "bench_remap: the timed call did not do what it should (rc %d, moved %lld)\n", rc,
                (long long)(after.num_granules_moved - before.num_granules_moved));
        exit(1);
    }
    ca_allocator_destroy(a);
    return t;
}

static double median(int host, int kind, size_t k, int rounds) {
    double *v = malloc((size_t)rounds * sizeof *v);
    for (int r = 0; r < rounds; r++) v[r] = one(host, kind, k);
    double m = bench_median(v, (size_t)rounds);
    free(v);
    return m;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 201;
    if (rounds < 1 || rounds > 100001) {
        fprintf(stderr, "bench_remap: bad ROUNDS '%s': accepted: 1 to 100001\n", argv[1]);
        return 2;
    }
    printf("one ca_malloc call, median of %d, ns (K granules of 2 MiB)\n", rounds);
    printf("%-7s %-10s %12s %12s %14s\n", "backend", "K", "create K+1", "move K + 1", "per moved");
    for (int host = 0; host <= 1; host++) {
        static const size_t ks[] = {1, 8, 64};
        for (int i = 0; i < 3; i++) {
            size_t k = ks[i];
            double c = median(host, CREATE, k, rounds), m = median(host, MOVE, k, rounds);
            double c0 = median(host, CREATE, 0, rounds);
            printf("%-7s %-10zu %12.0f %12.0f %14.0f\n", host ? "host" : "count", k, c, m, (m - c0) / (double)k);
        }
    }
    /* The walk of a search, block by block: 4096 free blocks of 6 MiB kept
     * apart by live 512 B ones, their whole granules unmapped. */
    ca_allocator *a = fresh(0);
    void *big[4096];
    for (int i = 0; i < 4096; i++) {
        big[i] = must(a, 3 * G);
        must(a, 512);
    }
    for (int i = 0; i < 4096; i++) ca_free(a, big[i], 0);
    ca_release(a);
    ca_pool *const *pools;
    ca_pools(a, &pools);
    ca_free_index *fi = &pools[0]->heap[0].free;
    double *v = malloc((size_t)rounds * sizeof *v);
    size_t visited = 0, holding = 0;
    for (int r = 0; r < rounds; r++) {
        visited = holding = 0;
        double t0 = bench_now_ns();
        for (ca_block *b = ca_free_index_largest(fi); b && b->size >= G; b = ca_free_index_smaller(fi, b)) {
            size_t first = (b->addr - b->seg->base + G - 1) / G, end = (b->addr + b->size - b->seg->base) / G;
            visited++;
            holding += end > first && end - first > b->unmapped; /* as the search decides */
        }
        v[r] = (bench_now_ns() - t0) / (double)visited;
    }
    double per_block = bench_median(v, (size_t)rounds);
    printf("search: %.1f ns per free block looked at (%zu blocks, %zu holding granules); the budget of a "
           "1-granule request (%d + 2 blocks) then costs at most %.0f ns\n",
           per_block, visited, holding, CA_REMAP_BUDGET, per_block * (CA_REMAP_BUDGET + 2));
    free(v);
    ca_allocator_destroy(a);
    return 0;
}

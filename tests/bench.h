/* The clock and the median of the benchmarks under tests/, and a run over
 * stream counts. */
#ifndef CA_TESTS_BENCH_H
#define CA_TESTS_BENCH_H
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), n >= 1 (v is sorted in place). */
static inline double bench_median(double *v, size_t n) {
    qsort(v, n, sizeof *v, bench_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ns_per_pair(N) for each count of the command line (250 and 4000 without
 * one), printed as "NAME streams=N ns_per_pair=T", then the last / first.
 * Exit status 2 for a count that is not a positive integer. */
static inline int bench_stream_counts(int argc, char **argv, const char *name, double (*ns_per_pair)(int)) {
    int defaults[] = {250, 4000}, n = argc > 1 ? argc - 1 : 2;
    double first = 0, last = 0;
    for (int k = 0; k < n; k++) {
        int streams = argc > 1 ? atoi(argv[k + 1]) : defaults[k];
        if (streams < 1) {
            fprintf(stderr, "%s: bad stream count '%s': accepted: a positive integer\n", name, argv[k + 1]);
            return 2;
        }
        last = ns_per_pair(streams);
        if (!k) first = last;
        printf("%s streams=%d ns_per_pair=%.0f\n", name, streams, last);
    }
    if (n > 1) printf("ratio %.2f (last / first)\n", last / first);
    return 0;
}
#endif

/* What judging the live figures costs at an iteration boundary (preload/live.c
 * judges at every mark, at most 50 a second): ca_live_judge on trackers
 * holding 1e3 to 1e5 live allocations over 1000 call sites, after 100 or 10000
 * iterations (the boundaries are copied whole), against the full snapshot a
 * report takes (its ring of 2^20 events). Median of 7. */
#include <stdio.h>

#include "reports/write/live.h"
#include "tests/bench.h"
#include "tests/reports/tracking/sim.h"

enum { ROUNDS = 7, SITES = 1000, PER_ITERATION = 20 };

static double time_judge(ca_tracker *t) {
    double v[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        ca_live_figures g;
        double t0 = bench_now_ns();
        ca_live_judge(t, NULL, 0, &g);
        v[r] = bench_now_ns() - t0;
    }
    return bench_median(v, ROUNDS);
}

static double time_snapshot(ca_tracker *t) {
    double v[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        ca_track_snap s;
        double t0 = bench_now_ns();
        ca_tracker_snapshot(t, &s);
        v[r] = bench_now_ns() - t0;
        ca_track_snap_free(&s);
    }
    return bench_median(v, ROUNDS);
}

int main(void) {
    printf("%-10s %-11s %16s %22s\n", "live", "iterations", "ca_live_judge", "full snapshot (ring)");
    size_t lives[] = {1000, 10000, 100000};
    unsigned iterations[] = {100, 10000};
    for (size_t li = 0; li < 3; li++)
        for (size_t ii = 0; ii < 2; ii++) {
            ca_tracker_options o;
            ca_tracker_options_default(&o);
            o.detect = 0;
            sim s = {ca_tracker_new(&o), 0, 1};
            for (size_t i = 0; i < lives[li]; i++) sim_alloc(&s, 4096, (unsigned)(i % SITES));
            uintptr_t a[PER_ITERATION];
            for (unsigned it = 0; it < iterations[ii]; it++) {
                for (int k = 0; k < PER_ITERATION; k++) a[k] = sim_alloc(&s, 1 << 16, (unsigned)k);
                for (int k = 0; k < PER_ITERATION; k++) sim_free(&s, a[k], 1 << 16);
                ca_tracker_step(s.t, CA_ITER_EXPLICIT);
            }
            printf("%-10zu %-11u %13.3f ms %19.3f ms\n", lives[li], iterations[ii], time_judge(s.t) / 1e6,
                   time_snapshot(s.t) / 1e6);
            ca_tracker_destroy(s.t);
        }
    return 0;
}

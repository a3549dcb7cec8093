/* How long reading a PyTorch snapshot takes, phase by phase: the pickle
 * into values (reports/pickle_read), the values into a snapshot
 * (reports/snapshot_read, frames interned), the values freed, device 0's run laid out and fed
 * to a tracker, and the text report. The median of RUNS runs each.
 *   bench_snapshot SNAPSHOT.pickle [RUNS] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "reports/read/pickle_read.h"
#include "reports/write/report.h"
#include "reports/read/snapshot_read.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_snapshot SNAPSHOT.pickle [RUNS]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (runs < 1 || runs > 100) runs = 5;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) return 2;
    fclose(f);
    enum { UNPICKLE, SNAPSHOT, FREE_VALUES, RUN, REPORT, PHASES };
    static const char *const names[PHASES] = {"unpickle", "snapshot", "free values", "run+tracker", "text report"};
    double t[PHASES][100];
    char dir[] = "/tmp/bench_snapshot.XXXXXX", out[64];
    if (!mkdtemp(dir)) return 1;
    snprintf(out, sizeof out, "%s/report.txt", dir);
    size_t entries = 0, ops = 0;
    for (int r = 0; r < runs; r++) {
        char err[512];
        double t0 = now();
        ca_doc *d = ca_unpickle(buf, (size_t)len, err, sizeof err);
        double t1 = now();
        ca_torch_snapshot s;
        if (!d || ca_torch_snapshot_from_doc(d, &s, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", argv[1], err);
            return 2;
        }
        double t15 = now();
        ca_doc_free(d);
        double t2 = now();
        ca_snap_run run;
        if (ca_snap_run_build(&s, 0, &run, err, sizeof err) != 0) return 2;
        ca_tracker_options o;
        ca_tracker_options_default(&o);
        o.stacks = s.stacks;
        o.time_is_index = 1;
        o.trace_events = o.detect_events = run.n_ops + 1024;
        ca_tracker *tr = ca_tracker_new(&o);
        ca_snap_run_feed(&run, tr, 0);
        double t3 = now();
        char e2[512];
        ca_report_options ro;
        ca_report_options_default(&ro);
        ro.device_unknown = 1;
        if (ca_report_write_file(tr, NULL, CA_REPORT_TXT, out, &ro, e2, sizeof e2) != 0) {
            fprintf(stderr, "%s\n", e2);
            return 1;
        }
        double t4 = now();
        t[UNPICKLE][r] = t1 - t0;
        t[SNAPSHOT][r] = t15 - t1;
        t[FREE_VALUES][r] = t2 - t15;
        t[RUN][r] = t3 - t2;
        t[REPORT][r] = t4 - t3;
        entries = s.n_traces ? s.traces[0].n : 0;
        ops = run.n_ops;
        ca_tracker_destroy(tr);
        ca_snap_run_free(&run);
        ca_torch_snapshot_free(&s);
    }
    printf("%s: %ld bytes, %zu trace entries on device 0, %zu ops; median of %d runs:\n", argv[1], len, entries, ops,
           runs);
    double total = 0;
    for (int p = 0; p < PHASES; p++) {
        qsort(t[p], (size_t)runs, sizeof t[p][0], cmp);
        double m = t[p][runs / 2];
        total += m;
        printf("  %-12s %8.3f s  (%.0f MB/s of pickle, %.0f ns per entry)\n", names[p], m, len / m / 1e6,
               entries ? m * 1e9 / (double)entries : 0.0);
    }
    printf("  %-12s %8.3f s\n", "total", total);
    unlink(out);
    rmdir(dir);
    free(buf);
    return 0;
}

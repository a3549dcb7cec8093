/* cudalloc-replay: replays RMM-style allocation logs through the allocator and
 * prints what it measured: peak requested and reserved bytes, utilization,
 * OOMs and time per call (the median of several replays, parsing excluded). */
#include <getopt.h>
#include <stdbool.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/replay.h"
#include "util/checked.h"
#include "util/size.h"
#include "util/version.h"

/* The help is the man page's SYNOPSIS and OPTIONS too (man/, built from it). */
static void usage(FILE *f) {
    fprintf(f,
            "usage: cudalloc-replay [--mode expandable|classic] [--backend count|host]\n"
            "                       [--capacity SIZE] [--min-capacity] [--runs N]\n"
            "                       [--compare] [--threads N] [--timeline[=N]]\n"
            "                       [--release-after N] FILE.csv[.gz]...\n"
            "       cudalloc-replay --version | --help\n"
            "Replays RMM-style CSV allocation logs (Thread,Time,Action,Pointer,Size,Stream) through\n"
            "cudalloc's allocator and prints, per file, peak_requested, peak_reserved, utilization,\n"
            "ooms, cold_ns_per_op and ns_per_op.\n"
            "  --mode        expandable segments (default) or classic (PyTorch's default)\n"
            "  --backend     count: accounting only (default); host: real memory\n"
            "  --capacity    device size, e.g. 16GiB (default: unlimited on count,\n"
            "                twice the trace's peak on host); a failed allocation counts\n"
            "                as an OOM and the replay goes on\n"
            "  --min-capacity  search the smallest capacity (to 1 MiB) with no OOM\n"
            "  --runs        replays after the first to take the median time of (default 9);\n"
            "                the first, on a fresh allocator, is reported as cold_ns_per_op\n"
            "  --compare     also time glibc malloc, mimalloc and jemalloc on the sizes,\n"
            "                and the replay loop alone (an allocator that does nothing)\n"
            "  --threads N   also measure N threads on N streams against one thread\n"
            "  --timeline    also print reserved and allocated memory (now and peak) per\n"
            "                iteration of the trace (its iteration rows), or every N calls\n"
            "                with =N or without iteration rows (N 1000), over 2 passes\n"
            "  --release-after N  every N allocations, give back the granules not needed\n"
            "                over the last N to 2N (0: never; default %d)\n"
            "  --version     print the version and exit\n"
            "  --help        print this help and exit\n"
            "Bad input: FILE:LINE: what is wrong, exit 2.\n", CA_RELEASE_AFTER);
}

/* Twice the trace's peak plus 64 MiB, the host backend's default and where
 * the capacity search starts: at most CA_MAX_BYTES, however large the trace's
 * sizes (its peak may be 2^64 - 1). */
static size_t roomy_capacity(uint64_t peak_live_bytes) {
    size_t twice, cap;
    if (peak_live_bytes > SIZE_MAX || !ca_size_mul((size_t)peak_live_bytes, 2, &twice) ||
        !ca_size_add(twice, (size_t)64 << 20, &cap) || cap > CA_MAX_BYTES)
        return CA_MAX_BYTES;
    return cap;
}

static int bad(const char *what, const char *value, const char *accepted) {
    fprintf(stderr, "cudalloc-replay: bad %s '%s': accepted: %s\n", what, value, accepted);
    return 2;
}

int main(int argc, char **argv) {
    replay_config cfg = {1, 0, 0, CA_RELEASE_AFTER};
    size_t timeline_every = 0;
    int timeline = 0, min_capacity = 0, runs = 9, compare = 0, threads = 0, time_malloc = 0;
    static const struct option longopts[] = {
        {"mode", required_argument, 0, 'm'},     {"backend", required_argument, 0, 'b'},
        {"capacity", required_argument, 0, 'c'}, {"min-capacity", no_argument, 0, 'n'},
        {"runs", required_argument, 0, 'r'},     {"compare", no_argument, 0, 'x'},
        {"threads", required_argument, 0, 't'},  {"help", no_argument, 0, 'h'},
        {"timeline", optional_argument, 0, 'T'}, {"release-after", required_argument, 0, 'R'},
        {"version", no_argument, 0, 'V'},
        {"time-malloc", no_argument, 0, 'M'}, /* internal: --compare's jemalloc child */
        {0, 0, 0, 0}};
    int c;
    opterr = 0; /* one line of our own, not getopt's and the whole usage */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (!strcmp(optarg, "expandable")) cfg.expandable = 1;
            else if (!strcmp(optarg, "classic")) cfg.expandable = 0;
            else return bad("--mode", optarg, "expandable, classic");
            break;
        case 'b':
            if (!strcmp(optarg, "count")) cfg.host = 0;
            else if (!strcmp(optarg, "host")) cfg.host = 1;
            else return bad("--backend", optarg, "count, host");
            break;
        case 'c':
            if (ca_parse_size(optarg, &cfg.capacity) != 0 || cfg.capacity == 0)
                return bad("--capacity", optarg, "a size such as 4096, 512MiB, 16GiB");
            break;
        case 'n': min_capacity = 1; break;
        case 'r':
            runs = atoi(optarg);
            if (runs < 1 || runs > 1000) return bad("--runs", optarg, "1 to 1000");
            break;
        case 'x': compare = 1; break;
        case 't':
            threads = atoi(optarg);
            if (threads < 1 || threads > 16) return bad("--threads", optarg, "1 to 16");
            break;
        case 'T':
            timeline = 1;
            if (optarg && (ca_parse_count(optarg, &timeline_every) || !timeline_every))
                return bad("--timeline", optarg, "--timeline or --timeline=N, N calls per row (1 or more)");
            break;
        case 'R': {
            size_t n;
            if (ca_parse_count(optarg, &n)) return bad("--release-after", optarg, "a count of allocations, 0 for never");
            cfg.release_after = n;
            break;
        }
        case 'M': time_malloc = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': ca_print_version("cudalloc-replay"); return 0;
        case ':': fprintf(stderr, "cudalloc-replay: %s needs a value (see --help)\n", argv[optind - 1]); return 2;
        default: fprintf(stderr, "cudalloc-replay: unknown option '%s' (see --help)\n", argv[optind - 1]); return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "cudalloc-replay: no trace given (see --help)\n");
        return 2;
    }
    /* Keep host memory that one replay frees for the next, as a long-running
     * program would: otherwise each replay pays page faults for the allocator's
     * and the backend's bookkeeping, which a real process pays once. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    for (int i = optind; i < argc; i++) {
        ca_trace t;
        char err[512];
        if (ca_trace_parse_file(argv[i], &t, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        ca_trace_warn_cut(&t, "cudalloc-replay", argv[i], stderr);
        ca_trace_warn_granule(&t, cfg.capacity, "cudalloc-replay", argv[i], stderr);
        if (time_malloc) { /* only the malloc this process has, as a number */
            printf("%.1f\n", replay_foreign(&t, argv[i], "preloaded", runs));
            ca_trace_free(&t);
            continue;
        }
        replay_config run_cfg = cfg;
        /* Real memory: the memfd and 4 ranges of 4 times it must fit the
         * host's address space, so 1 TiB at most. */
        if (run_cfg.host && !run_cfg.capacity) {
            run_cfg.capacity = roomy_capacity(t.peak_live_bytes);
            if (run_cfg.capacity > (size_t)1 << 40) run_cfg.capacity = (size_t)1 << 40;
        }
        replay_result r;
        if (replay_run(&t, &run_cfg, runs, &r) != CA_OK) {
            fprintf(stderr, "cudalloc-replay: %s: the %s backend failed to start\n", argv[i],
                    cfg.host ? "host" : "count");
            ca_trace_free(&t);
            return 1;
        }
        printf("%s: mode=%s backend=%s calls=%zu peak_requested=%lld peak_reserved=%lld "
               "utilization=%.3f ooms=%zu cold_ns_per_op=%.1f ns_per_op=%.1f",
               argv[i], cfg.expandable ? "expandable" : "classic", cfg.host ? "host" : "count", r.calls,
               (long long)r.peak_requested, (long long)r.peak_reserved,
               r.peak_reserved ? (double)r.peak_requested / (double)r.peak_reserved : 0.0, r.ooms, r.cold_ns_per_op,
               r.ns_per_op);
        if (min_capacity) {
            replay_config mc = cfg;
            mc.host = 0; /* the search needs no memory: the count backend decides alike */
            size_t hi = r.peak_reserved > 0 && !r.ooms ? (size_t)r.peak_reserved : roomy_capacity(t.peak_live_bytes);
            size_t min = replay_min_capacity(&t, &mc, hi);
            if (min)
                printf(" min_capacity=%zu ratio=%.3f", min, r.peak_requested ? (double)min / (double)r.peak_requested : 0.0);
            else /* a request larger than any device: no capacity replays it */
                printf(" min_capacity=none");
        }
        /* The failures the log recorded: the replay skips them; say so, and
         * with a device size whether cudalloc would fail there too. */
        size_t recorded = t.count[CA_TRACE_ALLOC_FAIL], too = SIZE_MAX;
        if (recorded && cfg.capacity) {
            replay_config fc = cfg;
            fc.host = 0; /* the count backend decides alike */
            too = replay_recorded_failures(&t, &fc);
        }
        if (recorded) printf(" recorded_failures=%zu", recorded);
        if (too != SIZE_MAX) printf(" failed_too=%zu", too);
        printf("\n");
        if (recorded && too != SIZE_MAX) {
            char cap[CA_SIZE_BUF];
            printf("  recorded failures: %zu allocation%s failed when the log was written; on a %s device "
                   "cudalloc's allocator fails %zu of them too and serves the other %zu\n",
                   recorded, recorded == 1 ? "" : "s", ca_format_size(cfg.capacity, cap, sizeof cap), too,
                   recorded - too);
        } else if (recorded) {
            printf("  recorded failures: %zu allocation%s failed when the log was written (the replay skips "
                   "them); whether cudalloc's allocator fails there too needs the device's size: --capacity\n",
                   recorded, recorded == 1 ? "" : "s");
        }
        if (compare) {
            const char *libs[] = {"glibc", "mimalloc", "jemalloc"};
            printf("  compare: cudalloc %.1f ns/op", r.ns_per_op);
            for (int k = 0; k < 3; k++) {
                double ns = replay_foreign(&t, argv[i], libs[k], runs);
                if (ns < 0) printf(", %s unavailable", libs[k]);
                else printf(", %s %.1f ns/op (%.2fx cudalloc's time)", libs[k], ns, ns / r.ns_per_op);
            }
            printf(", loop alone %.1f ns/op\n", replay_foreign(&t, argv[i], "loop", runs));
        }
        if (timeline && replay_timeline(&t, &run_cfg, timeline_every, 2, stdout) != CA_OK) {
            fprintf(stderr, "cudalloc-replay: %s: the timeline's allocator failed to start\n", argv[i]);
            ca_trace_free(&t);
            return 1;
        }
        if (threads) {
            replay_config tc = cfg;
            tc.host = 0;
            tc.capacity = 0;
            double one = replay_throughput(&t, &tc, 1), many = replay_throughput(&t, &tc, threads);
            printf("  threads: 1 thread %.2f Mcalls/s, %d threads on %d streams %.2f Mcalls/s, ratio %.2f\n",
                   one / 1e6, threads, threads, many / 1e6, many / one);
        }
        ca_trace_free(&t);
    }
    return 0;
}

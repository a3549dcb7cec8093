/* Replaying a parsed trace through the allocator, and through other
 * allocators for comparison. */
#ifndef CA_REPLAY_H
#define CA_REPLAY_H

#include <stdio.h>

#include "allocator/allocator.h"
#include "tools/trace.h"

typedef struct replay_config {
    int expandable;
    int host;          /* 1: host backend (real memory), 0: count */
    size_t capacity;   /* 0: unlimited (count) */
    uint64_t release_after; /* ca_options.release_after */
    int stop_at_oom;   /* a pass ends at its first OOM (all that "does it fit" needs) */
} replay_config;

typedef struct replay_result {
    int64_t peak_requested, peak_reserved, peak_allocated;
    size_t ooms;
    size_t calls;      /* allocator calls made */
    double cold_ns_per_op; /* the first pass, on a fresh allocator */
    double ns_per_op;      /* median of the later passes (the first if none) */
} replay_result;

/* Replays once on a fresh allocator (the figures, and the cold time), then
 * `runs` times more on it (the steady-state time). CA_OK or the failure. */
int replay_run(const ca_trace *t, const replay_config *cfg, int runs, replay_result *out);
/* The trace's recorded failures (its `allocate failure` rows), which a
 * replay otherwise skips: at each, on a fresh allocator replaying the trace,
 * the same size is asked in the state reached (and given back at once, as
 * the program never had it). Returns how many fail under cudalloc too;
 * SIZE_MAX when the allocator cannot start. */
size_t replay_recorded_failures(const ca_trace *t, const replay_config *cfg);
/* The smallest capacity, to 1 MiB, at which the replay has no OOM; 0 when
 * even hi (at most CA_MAX_BYTES) has one. */
size_t replay_min_capacity(const ca_trace *t, const replay_config *cfg, size_t hi);
/* Total calls per second with `threads` threads, each replaying the trace on
 * its own stream of one shared allocator. */
double replay_throughput(const ca_trace *t, const replay_config *cfg, int threads);

/* Median ns per call replaying the same sizes (of the trace read from path)
 * through "glibc", "mimalloc", "jemalloc", "preloaded" (whatever malloc
 * this process has), or "loop" (no allocator: the loop's own time); <0 when
 * not available. */
double replay_foreign(const ca_trace *t, const char *path, const char *which, int runs);

/* Replays `passes` times on a fresh allocator, printing reserved and
 * allocated memory per iteration (the trace's iteration rows) or, with
 * `every` or without iteration rows, every `every` (default 1000) calls. */
int replay_timeline(const ca_trace *t, const replay_config *cfg, size_t every, int passes, FILE *out);
/* The allocator a replay of t runs on, in t's granule (ca_trace_granule);
 * NULL when the backend cannot start. */
ca_allocator *replay_allocator(const ca_trace *t, const replay_config *cfg);

double replay_now_ns(void);
double replay_median(double *v, int n);

#endif

/* The replay loop: allocator calls alone are timed, the trace parsed before. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "tools/replay.h"

double replay_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double replay_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

ca_allocator *replay_allocator(const ca_trace *t, const replay_config *cfg) {
    size_t granule = ca_trace_granule(t, cfg->capacity);
    ca_backend *be = cfg->host ? ca_backend_host_new(cfg->capacity, granule)
                               : ca_backend_count_new(cfg->capacity, granule);
    if (!be) return NULL;
    ca_options opt;
    ca_options_default(&opt);
    opt.expandable = cfg->expandable;
    opt.release_after = cfg->release_after;
    ca_allocator *a;
    if (ca_allocator_new(be, &opt, &a) != CA_OK) {
        be->destroy(be);
        return NULL;
    }
    return a;
}

/* One pass over the trace on `stream` (to its first OOM with `stop`); returns
 * the calls made. */
static size_t replay_once(ca_allocator *a, const ca_trace *t, void **ptrs, ca_stream stream, size_t *ooms, int stop) {
    size_t calls = 0;
    for (size_t i = 0; i < t->n_ops && !(stop && *ooms); i++) {
        const ca_trace_op *op = &t->ops[i];
        if (op->kind == CA_TRACE_ALLOC) {
            calls++;
            if (ca_malloc(a, op->size, stream, &ptrs[op->id], NULL) != CA_OK) {
                ptrs[op->id] = NULL;
                (*ooms)++;
            }
        } else if (op->kind == CA_TRACE_FREE && ptrs[op->id]) {
            calls++;
            ca_free(a, ptrs[op->id], stream);
        }
    }
    return calls;
}

static void free_leftovers(ca_allocator *a, const ca_trace *t, void **ptrs, ca_stream stream) {
    for (uint32_t id = 0; id < t->n_ids; id++)
        if (ptrs[id]) {
            ca_free(a, ptrs[id], stream);
            ptrs[id] = NULL;
        }
}

/* The first pass runs on a fresh allocator: its figures are the trace's, and
 * its time (cold) includes creating every granule. Then `runs` more passes on
 * the same allocator, as the iterations of a training loop would: their median
 * is the time per call in steady state, the way malloc libraries are timed. */
int replay_run(const ca_trace *t, const replay_config *cfg, int runs, replay_result *out) {
    void **ptrs = calloc(t->n_ids ? t->n_ids : 1, sizeof *ptrs);
    double *ns = calloc((size_t)runs, sizeof *ns);
    ca_allocator *a = replay_allocator(t, cfg);
    if (!ptrs || !ns || !a) {
        free(ptrs);
        free(ns);
        if (a) ca_allocator_destroy(a);
        return a ? CA_ERR_OOM : CA_ERR_BACKEND;
    }
    size_t ooms = 0;
    double t0 = replay_now_ns();
    size_t calls = replay_once(a, t, ptrs, 0, &ooms, cfg->stop_at_oom);
    out->cold_ns_per_op = (replay_now_ns() - t0) / (calls ? (double)calls : 1);
    ca_stats s;
    ca_get_stats(a, &s);
    out->peak_requested = s.requested_bytes[CA_POOL_ALL].peak;
    out->peak_reserved = s.reserved_bytes[CA_POOL_ALL].peak;
    out->peak_allocated = s.allocated_bytes[CA_POOL_ALL].peak;
    out->ooms = ooms;
    out->calls = calls;
    for (int r = 0; r < runs; r++) {
        free_leftovers(a, t, ptrs, 0);
        size_t ignored = 0;
        t0 = replay_now_ns();
        calls = replay_once(a, t, ptrs, 0, &ignored, 0);
        ns[r] = (replay_now_ns() - t0) / (calls ? (double)calls : 1);
    }
    out->ns_per_op = runs ? replay_median(ns, runs) : out->cold_ns_per_op;
    ca_allocator_destroy(a);
    free(ptrs);
    free(ns);
    return CA_OK;
}

size_t replay_recorded_failures(const ca_trace *t, const replay_config *cfg) {
    void **ptrs = calloc(t->n_ids ? t->n_ids : 1, sizeof *ptrs);
    ca_allocator *a = replay_allocator(t, cfg);
    size_t failed = 0;
    if (!ptrs || !a) {
        free(ptrs);
        if (a) ca_allocator_destroy(a);
        return SIZE_MAX;
    }
    for (size_t i = 0; i < t->n_ops; i++) {
        const ca_trace_op *op = &t->ops[i];
        void *p;
        if (op->kind == CA_TRACE_ALLOC) {
            if (ca_malloc(a, op->size, 0, &ptrs[op->id], NULL) != CA_OK) ptrs[op->id] = NULL;
        } else if (op->kind == CA_TRACE_FREE && ptrs[op->id]) {
            ca_free(a, ptrs[op->id], 0);
            ptrs[op->id] = NULL;
        } else if (op->kind == CA_TRACE_ALLOC_FAIL) {
            if (ca_malloc(a, op->size, 0, &p, NULL) != CA_OK) failed++;
            else ca_free(a, p, 0);
        }
    }
    ca_allocator_destroy(a);
    free(ptrs);
    return failed;
}

size_t replay_min_capacity(const ca_trace *t, const replay_config *cfg, size_t hi) {
    const size_t mib = (size_t)1 << 20;
    size_t lo = 0; /* in MiB: lo fails (or is zero), hi fits */
    if (hi > CA_MAX_BYTES) hi = CA_MAX_BYTES;
    hi = (hi + mib - 1) / mib;
    replay_config c = *cfg;
    replay_result r;
    /* Each pass only asks "does it fit": it ends at its first OOM. (Replaying on
     * past it would pay a give-back of the whole cache per failed request.) */
    c.stop_at_oom = 1;
    c.capacity = hi * mib;
    if (replay_run(t, &c, 0, &r) != CA_OK || r.ooms) return 0; /* not even hi fits */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        c.capacity = mid * mib;
        if (replay_run(t, &c, 0, &r) == CA_OK && r.ooms == 0) hi = mid;
        else lo = mid;
    }
    return hi * mib;
}

struct thread_arg {
    ca_allocator *a;
    const ca_trace *t;
    ca_stream stream;
    int passes;
    size_t calls;
    pthread_barrier_t *start;
};

static void *thread_main(void *p) {
    struct thread_arg *arg = p;
    void **ptrs = calloc(arg->t->n_ids ? arg->t->n_ids : 1, sizeof *ptrs);
    size_t ooms = 0;
    pthread_barrier_wait(arg->start);
    for (int i = 0; i < arg->passes && ptrs; i++) {
        arg->calls += replay_once(arg->a, arg->t, ptrs, arg->stream, &ooms, 0);
        free_leftovers(arg->a, arg->t, ptrs, arg->stream); /* every pass starts alike */
    }
    free(ptrs);
    return NULL;
}

double replay_throughput(const ca_trace *t, const replay_config *cfg, int threads) {
    ca_allocator *a = replay_allocator(t, cfg);
    if (!a) return -1;
    enum { MAX_THREADS = 16 };
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    pthread_t th[MAX_THREADS];
    struct thread_arg args[MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    int passes = (int)(2000000 / (t->n_ops + 1)) + 1;
    for (int i = 0; i < threads; i++) {
        args[i] = (struct thread_arg){a, t, (ca_stream)(i + 1), passes, 0, &start};
        pthread_create(&th[i], NULL, thread_main, &args[i]);
    }
    pthread_barrier_wait(&start);
    double t0 = replay_now_ns();
    size_t calls = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        calls += args[i].calls;
    }
    double secs = (replay_now_ns() - t0) / 1e9;
    pthread_barrier_destroy(&start);
    ca_allocator_destroy(a);
    return calls / secs;
}

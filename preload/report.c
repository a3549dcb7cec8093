/* What the preload says and writes: the OOM explanation on stderr when an
 * allocation fails after every retry, the exit summary, and the report files
 * (at exit, on OOM, on SIGUSR1 and on cudalloc_report()). */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define CUDALLOC_IMPLEMENTATION
#include "include/cudalloc.h"
#include "preload/log.h"
#include "preload/preload.h"
#include "reports/diagnose/fixes_track.h"
#include "reports/diagnose/oom.h"
#include "reports/diagnose/suppress.h"
#include "reports/write/fileout.h"
#include "reports/write/fixes_text.h"
#include "util/size.h"

#define SZ(x) ca_format_size((x), (char[CA_SIZE_BUF]){0}, CA_SIZE_BUF)

/* The device memory CUPTI saw allocated past us, for the report options. */
static void external(int ordinal, ca_report_options *o) {
    uint64_t allocations = 0, pools = 0;
    o->external_known = ca_cupti_external(ordinal, &allocations, &pools);
    o->external_alloc_bytes = allocations;
    o->external_pool_bytes = pools;
    if (!o->external_known && !ca_on_simulated_device()) o->external_note = "CUPTI is not watching";
}

static void print_external(int ordinal) {
    ca_report_options o = {0};
    external(ordinal, &o);
    if (o.external_known && (o.external_alloc_bytes || o.external_pool_bytes))
        fprintf(stderr, "cudalloc:   outside cudalloc on device %d: %s in allocations, %s held by memory pools (CUPTI)\n",
                ordinal, SZ(o.external_alloc_bytes), SZ(o.external_pool_bytes));
}

/* The suppressions file (suppressions:FILE), read once; NULL when none is
 * set or it cannot be read (said once: the reports then suppress nothing). */
static ca_suppressions suppressions;
static const ca_suppressions *suppressions_loaded;
static pthread_once_t suppressions_once = PTHREAD_ONCE_INIT;
static void load_suppressions(void) {
    char err[1200];
    if (!ca_conf.suppressions[0]) return;
    if (ca_suppressions_load(ca_conf.suppressions, &suppressions, err, sizeof err) != 0)
        ca_warn("%s; reports suppress nothing", err);
    else suppressions_loaded = &suppressions;
}

static void report_options(ca_report_options *o) {
    ca_report_options_default(o);
    pthread_once(&suppressions_once, load_suppressions);
    o->suppressions = suppressions_loaded;
    o->suppressions_name = ca_conf.suppressions;
}

static int write_device(ca_device *d) {
    if (!d->tracker || !ca_conf.report[0]) return 0;
    char prefix[sizeof ca_conf.report + 16];
    /* device 0 writes PREFIX.*, others PREFIX.devN.* */
    if (d->ordinal) snprintf(prefix, sizeof prefix, "%s.dev%d", ca_conf.report, d->ordinal);
    else snprintf(prefix, sizeof prefix, "%s", ca_conf.report);
    ca_report_options o;
    report_options(&o);
    char conf[2048];
    ca_config_format(&ca_conf, conf, sizeof conf);
    o.alloc_conf = conf;
    o.user_conf = getenv("CUDALLOC_CONF");
    o.expandable = ca_conf.expandable;
    o.csv_iterations = ca_conf.trace_iterations;
    o.rank = ca_rank_env();
    external(d->ordinal, &o);
    ca_device_use(d); /* not while a reset replaces the allocator */
    int rc = ca_report_write(d->tracker, d->alloc, prefix, &o);
    ca_device_done(d);
    return rc;
}

static void write_one(ca_device *d, void *failed) {
    if (write_device(d) != 0) *(int *)failed = 1;
}

int ca_report_write_all(void) {
    int failed = 0;
    ca_devices_foreach(write_one, &failed);
    return failed ? -1 : 0;
}

CA_EXPORT int cudalloc_report(void) { return ca_conf.report[0] ? ca_report_write_all() : -1; }

/* What would fit, for the OOM message: predicted from the tracker's state,
 * again only when an iteration has ended since, the device's size changed or
 * a failure needed 5% more than the last one predicted for (an OOM storm
 * costs a few predictions per iteration). */
static void oom_fixes(ca_device *d, const ca_track_snap *s, uint64_t capacity, uint64_t needed,
                      char (*lines)[CA_FIX_LINE], size_t *n) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        const void *tracker;
        size_t n_bounds;
        uint64_t capacity, needed;
        size_t n;
        char lines[CA_FIX_ADVICE_MAX][CA_FIX_LINE];
    } cache;
    pthread_mutex_lock(&lock);
    if (cache.tracker != d->tracker || cache.n_bounds != s->n_bounds || cache.capacity != capacity ||
        (double)needed > 1.05 * (double)cache.needed || !cache.n) {
        ca_fix_report r;
        cache.n = 0;
        if (ca_fixes_from_track(s, capacity, needed, &r) == 0 || r.why[0]) {
            cache.n = ca_fixes_advice(&r, capacity, cache.lines, CA_FIX_ADVICE_MAX);
        }
        ca_fix_report_free(&r);
        cache.tracker = d->tracker, cache.n_bounds = s->n_bounds, cache.capacity = capacity, cache.needed = needed;
    }
    *n = cache.n;
    memcpy(lines, cache.lines, cache.n * sizeof *lines);
    pthread_mutex_unlock(&lock);
}

void ca_report_oom(ca_device *d, const ca_oom_info *o) {
    ca_oom_verdict verdict = ca_oom_judge(o, 0);
    char fixes[CA_FIX_ADVICE_MAX][CA_FIX_LINE];
    size_t n_fixes = 0;
    int predicted = 0;
    if (d->tracker) {
        /* the tracker knows what is leaking: its verdict can be "held by a leak" */
        ca_oom_diagnose(d->tracker, o);
        ca_track_snap s;
        if (ca_tracker_snapshot(d->tracker, &s) == 0) {
            if (s.n_ooms) verdict = s.ooms[s.n_ooms - 1].verdict;
            if (verdict == CA_OOM_NOT_THERE && ca_conf.oom_message) {
                oom_fixes(d, &s, o->device_total, o->allocated + o->requested, fixes, &n_fixes);
                predicted = n_fixes && strncmp(fixes[0], "No fix can be predicted", 23);
            }
            ca_track_snap_free(&s);
        }
    }
    if (ca_conf.oom_message) {
        fprintf(stderr,
                "cudalloc: out of memory on device %d: requested %s\n"
                "cudalloc:   device total %s, device free %s; allocated %s, reserved %s, cached %s, "
                "largest free block %s\n"
                "cudalloc:   verdict: %s\n",
                d->ordinal, SZ(o->requested), SZ(o->device_total), SZ(o->device_free), SZ(o->allocated),
                SZ(o->reserved), SZ(o->free_cached), SZ(o->largest_free), ca_oom_verdict_text(verdict));
        for (size_t i = 0; i < n_fixes; i++) fprintf(stderr, "cudalloc:   - %s\n", fixes[i]);
        for (const char *const *a = predicted ? ca_oom_advice_general(verdict) : ca_oom_advice(verdict); a && *a; a++)
            fprintf(stderr, "cudalloc:   - %s\n", *a);
        print_external(d->ordinal);
    }
    write_device(d);
    ca_live_oom();
}

static void summarize(ca_device *d, void *ctx) {
    ca_stats s;
    ca_get_stats(d->alloc, &s); /* under ca_devices_foreach's use */
    if (!s.allocation[CA_POOL_ALL].allocated && !s.num_ooms) return; /* a device never asked for memory */
    if (d->tracker) {
        ca_report_options o;
        report_options(&o);
        ca_report_summary(d->tracker, d->alloc, &o, stderr);
    } else {
        int64_t peak_res = s.reserved_bytes[CA_POOL_ALL].peak;
        fprintf(stderr, "cudalloc: device %d: peak allocated %s, peak reserved %s (utilization %.3f), %lld OOMs\n",
                d->ordinal, SZ((size_t)s.allocated_bytes[CA_POOL_ALL].peak), SZ((size_t)peak_res),
                peak_res ? (double)s.requested_bytes[CA_POOL_ALL].peak / (double)peak_res : 0.0,
                (long long)s.num_ooms);
    }
    print_external(d->ordinal);
}

void ca_report_exit(void) {
    if (ca_conf.summary) ca_devices_foreach(summarize, NULL);
    ca_report_write_all();
    ca_live_exit();
}

/* SIGUSR1: the handler only posts a semaphore (async-signal-safe); a thread of
 * ours, waiting on it, writes the reports in normal context. The handler is
 * in place from the library's constructor (a SIGUSR1 that comes before the
 * first allocation must not kill the program); the thread starts with the
 * first device, and then writes what was asked before. */
static sem_t report_requests;
static bool handler_set, reporter_started;

static void on_sigusr1(int sig) { sem_post(&report_requests); }

static void *reporter(void *arg) {
    for (;;) {
        while (sem_wait(&report_requests) != 0) {
        }
        ca_report_write_all();
    }
    return NULL;
}

void ca_report_signal_init(void) {
    struct sigaction old;
    if (!ca_conf.report[0] || sigaction(SIGUSR1, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
        return; /* no reports, or the program's own disposition (inherited SIG_IGN): left alone */
    sem_init(&report_requests, 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    handler_set = sigaction(SIGUSR1, &sa, NULL) == 0;
}

void ca_report_signal_start(void) {
    if (reporter_started || !ca_conf.report[0]) return;
    reporter_started = true;
    struct sigaction now;
    if (!handler_set || sigaction(SIGUSR1, NULL, &now) != 0 || (now.sa_flags & SA_SIGINFO) ||
        now.sa_handler != on_sigusr1) {
        ca_warn("the program handles SIGUSR1 itself: use cudalloc_report() to write reports on demand");
        return;
    }
    pthread_t th;
    sigset_t all, prev;
    /* the reporter thread takes no signals: they stay with the program's threads */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    int rc = pthread_create(&th, NULL, reporter, NULL);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    if (rc == 0) pthread_detach(th);
}

/* A forked child has no reporter thread (the handler is inherited): the next
 * device made starts one. */
void ca_report_after_fork(void) { reporter_started = false; }

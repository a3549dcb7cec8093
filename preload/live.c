/* While the job runs: the leak said when it is sure, not at exit; what the
 * job asked a leak to do (on_leak); the live figures published for
 * `cudalloc status` / `cudalloc top` and as Prometheus metrics.
 *
 * Never on the allocation path. A program's iteration mark (cudalloc_step,
 * the NVTX range) judges at once, on its thread, so the warning names the
 * iteration the leak became sure at; a thread of ours judges once a second
 * for iterations found by detection (marked inside the allocation path) and
 * for figures that move between marks, and writes the files: after a mark
 * at most 4 times a second, else once a second; the metrics every
 * metrics_every seconds. Judging is reports/write/live.h's: the exit
 * summary's rule on the tracker's state without its event ring. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CUDALLOC_IMPLEMENTATION
#include "include/cudalloc.h"
#include "preload/log.h"
#include "preload/preload.h"
#include "reports/write/fileout.h"
#include "reports/write/live.h"
#include "util/live_file.h"
#include "util/size.h"

#define SZ(x) ca_format_size((x), (char[CA_SIZE_BUF]){0}, CA_SIZE_BUF)
#define MAX_FIGS 16      /* devices published */
#define MAX_TOLD 64      /* findings said */
/* Marks are judged at most 50 times a second, and never more than 1% of the
 * time: a judgment costs 0.05 ms at 1e3 live allocations, 8 ms at 1e5
 * (bench-live); a mark skipped is judged by the watcher within a second. The
 * cost is the least of the last COSTS judgments': a thread preempted during
 * one (a loaded machine) does not make the next marks go unjudged. */
#define MARK_GAP_NS 20000000ull
#define COST_SHARE 100
#define COSTS 8
#define PUBLISH_GAP_NS 250000000ull /* files written at most 4 times a second */
#define TICK_NS 1000000000ull

/* A finding said on stderr, and what is left to say about it. */
typedef struct told {
    int device;
    uint32_t site;
    uintptr_t root;
    uint32_t iteration;   /* when it was said */
    int64_t oom;          /* the out-of-memory iteration projected then */
    uint64_t kept;        /* its bytes above the level before its growth, when last seen */
    bool near, stopped;
    char title[CA_LIVE_TITLE];
} told;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static told said[MAX_TOLD];
static size_t n_said;
static ca_live_figures figs[MAX_FIGS];
static size_t n_figs;
static uint64_t last_judged_ns, costs_ns[COSTS], last_published_ns, last_metrics_ns;
static unsigned n_costs;
static bool publish_due, thread_started, warned_once, status_off;
static bool exiting; /* in the exit handler: judge, name nothing, say nothing, do nothing, no status file */
static atomic_bool ending; /* on_leak:exit or on_oom:exit chose the exit status */
static atomic_bool leak_seen, oom_seen;
static cudalloc_leak_fn callback;
static void *callback_ctx;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double unix_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "; at this rate device 0 runs out at iteration 48, about 03:12:31 (in 4m 12s)" */
static void projection(const ca_live_figures *g, const ca_live_finding *f, double now, char *buf, size_t n) {
    if (f->oom_iteration < 0) {
        snprintf(buf, n, "; no projection (%s)", g->ooms ? "it has run out already" : "the device's size is unknown");
        return;
    }
    size_t k = (size_t)snprintf(buf, n, "; at this rate device %d runs out at iteration %lld", g->device,
                                (long long)f->oom_iteration);
    double at = ca_live_oom_time(g, f, now);
    if (at < 0 || k >= n) return;
    time_t t = (time_t)at;
    struct tm tm;
    char clock[32], in[32];
    localtime_r(&t, &tm);
    strftime(clock, sizeof clock, at - now < 86400 ? "%H:%M:%S %Z" : "%Y-%m-%d %H:%M %Z", &tm);
    ca_format_duration(at - now, in, sizeof in);
    snprintf(buf + k, n - k, ", about %s (in %s)", clock, in);
}

/* One thing to say, collected under the lock and said after it. */
typedef struct saying {
    const char *event; /* "leak", "near", "stopped" */
    ca_live_figures *g;
    ca_live_finding f;
} saying;

static void say(const saying *w, double now) {
    const ca_live_finding *f = &w->f;
    char proj[160];
    if (!strcmp(w->event, "stopped")) {
        fprintf(stderr, "cudalloc: leak stopped growing at iteration %u on device %d: %s (%s kept)\n", w->g->iteration,
                w->g->device, f->title, SZ(f->leaked_bytes));
        return;
    }
    projection(w->g, f, now, proj, sizeof proj);
    fprintf(stderr, "cudalloc: %s at iteration %u on device %d: +%s/iteration since iteration %u: %s%s\n",
            !strcmp(w->event, "near") ? "leak nearing out of memory" : "leak found", w->g->iteration, w->g->device,
            SZ((size_t)f->bytes_per_iteration), f->growth_since, f->title, proj);
}

static told *find_said(int device, const ca_live_finding *f) {
    for (size_t i = 0; i < n_said; i++) {
        told *t = &said[i];
        if (t->device == device && (t->site == f->site || (t->root && t->root == f->root_ip))) return t;
    }
    return NULL;
}

static bool in_figures(const told *t, const ca_live_figures *g) {
    for (uint32_t i = 0; i < g->n_findings && i < CA_LIVE_FINDINGS; i++) {
        const ca_live_finding *f = &g->findings[i];
        if (t->site == f->site || (t->root && t->root == f->root_ip)) return true;
    }
    return false;
}

/* What there is to say about device g's findings against what was said;
 * new ones get titles (the one costly step, once per finding). */
static size_t compare(ca_device *d, ca_live_figures *g, saying *out, size_t cap) {
    size_t n = 0;
    bool need_titles = false;
    for (uint32_t i = 0; i < g->n_findings && i < CA_LIVE_FINDINGS; i++) {
        const told *t = find_said(g->device, &g->findings[i]);
        if (!t || t->stopped) need_titles = true;
    }
    if (need_titles && !exiting) {
        ca_live_figures named;
        ca_device_use(d);
        int rc = ca_live_judge(d->tracker, d->alloc, 1, &named);
        ca_device_done(d);
        if (rc == 0 && named.n_findings) *g = named;
    }
    for (uint32_t i = 0; i < g->n_findings && i < CA_LIVE_FINDINGS && n < cap; i++) {
        ca_live_finding *f = &g->findings[i];
        told *t = find_said(g->device, f);
        if (t && *t->title && !*f->title) snprintf(f->title, sizeof f->title, "%s", t->title);
        if (t) t->kept = f->leaked_bytes;
        if (!t || t->stopped) {
            if (!t && n_said < MAX_TOLD) t = &said[n_said++];
            if (!t) continue; /* no room to remember it: said never, rather than at every boundary */
            *t = (told){g->device, f->site, f->root_ip, g->iteration, f->oom_iteration, f->leaked_bytes, false, false, ""};
            snprintf(t->title, sizeof t->title, "%s", f->title);
            out[n++] = (saying){"leak", g, *f};
        } else if (!t->near && t->oom >= 0 && f->oom_iteration >= 0 &&
                   (f->oom_iteration - (int64_t)g->iteration) * 10 <= t->oom - (int64_t)t->iteration) {
            t->near = true;
            out[n++] = (saying){"near", g, *f};
        }
    }
    /* a finding past the ones kept may still grow: none is said to stop then */
    for (size_t i = 0; i < n_said && n < cap && g->n_findings <= CA_LIVE_FINDINGS; i++) {
        told *t = &said[i];
        if (t->device != g->device || t->stopped || in_figures(t, g)) continue;
        t->stopped = true;
        ca_live_finding f = {.site = t->site, .root_ip = t->root, .leaked_bytes = t->kept};
        snprintf(f.title, sizeof f.title, "%s", t->title);
        out[n++] = (saying){"stopped", g, f};
    }
    return n;
}

typedef struct judging {
    saying said[16];
    size_t n;
    size_t n_figs;
    uint64_t cost_ns; /* of the judgments themselves (not of naming a new finding: once each) */
} judging;

static void judge_device(ca_device *d, void *ctx) {
    judging *j = ctx;
    if (!d->tracker || j->n_figs >= MAX_FIGS) return;
    ca_live_figures g;
    uint64_t t0 = now_ns();
    ca_device_use(d);
    int rc = ca_live_judge(d->tracker, d->alloc, 0, &g);
    ca_device_done(d);
    j->cost_ns += now_ns() - t0;
    if (rc != 0) return;
    ca_live_figures *slot = &figs[j->n_figs++];
    *slot = g;
    j->n += compare(d, slot, j->said + j->n, sizeof j->said / sizeof j->said[0] - j->n);
}

/* Judges every device; says what is new; does what on_leak asks. */
static void judge_all(void) {
    judging j = {0};
    pthread_mutex_lock(&lock);
    last_judged_ns = now_ns();
    ca_devices_foreach(judge_device, &j);
    costs_ns[n_costs++ % COSTS] = j.cost_ns;
    n_figs = j.n_figs;
    if (exiting) j.n = 0;
    publish_due = true;
    double now = unix_now();
    bool first = false, leak = false;
    char *json[16] = {0};
    for (size_t i = 0; i < j.n; i++) {
        say(&j.said[i], now);
        if (strcmp(j.said[i].event, "stopped")) leak = true;
        if (callback) json[i] = ca_live_finding_json(j.said[i].event, j.said[i].g, &j.said[i].f, now);
    }
    if (leak && !atomic_exchange(&leak_seen, true)) first = true;
    cudalloc_leak_fn fn = callback;
    void *fn_ctx = callback_ctx;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    /* outside the lock: the callback may call cudalloc back */
    for (size_t i = 0; i < j.n; i++) {
        if (fn && json[i]) fn(json[i], fn_ctx);
        free(json[i]);
    }
    if (!leak) return;
    if (ca_conf.on_leak == CA_ON_EXIT) {
        fprintf(stderr, "cudalloc: on_leak:exit: writing the reports, then exit status %zu\n", ca_conf.exit_code);
        atomic_store(&ending, true);
        exit((int)ca_conf.exit_code); /* the exit handler writes the summary and the reports */
    }
    if (ca_conf.report[0] && (first || ca_conf.on_leak == CA_ON_REPORT) && ca_report_write_all() == 0)
        fprintf(stderr, "cudalloc: reports written at iteration %u (%s)\n", j.said[0].g->iteration, ca_conf.report);
}

/* ---- the files ---- */

static void program_name(char *buf, size_t n) {
    FILE *f = fopen("/proc/self/cmdline", "r");
    size_t k = f ? fread(buf, 1, n - 1, f) : 0;
    if (f) fclose(f);
    buf[k] = 0;
    for (size_t i = 0; i + 1 < k; i++)
        if (!buf[i]) buf[i] = ' ';
}

/* The folder the status files are in (util/live_file.h), made 0700, and
 * refused unless it is ours alone. */
static int status_dir(char *buf, size_t n) {
    struct stat st;
    ca_live_dir(getenv("XDG_RUNTIME_DIR"), (unsigned)getuid(), buf, n);
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -1;
    if (lstat(buf, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

static int status_path(char *buf, size_t n) {
    char dir[900];
    if (status_dir(dir, sizeof dir) != 0) return -1;
    snprintf(buf, n, "%s/%ld.status", dir, (long)getpid());
    return 0;
}

typedef void (*writer)(FILE *, const ca_live_process *, const ca_live_figures *, size_t);

static int write_file(const char *path, writer w, const ca_live_process *p, const ca_live_figures *g, size_t n,
                      char *err, size_t errlen) {
    ca_out *o = ca_out_open(path, err, errlen);
    if (!o) return -1;
    w(ca_out_file(o), p, g, n);
    return ca_out_commit(o, err, errlen);
}

/* Writes the status file and, when due (or forced), the metrics; one writer
 * at a time (the watcher, the exit handler). */
static pthread_mutex_t writing = PTHREAD_MUTEX_INITIALIZER;

static void publish(bool metrics_now) {
    static char program[256];
    static unsigned long long started;
    static long started_pid;
    static ca_live_figures copy[MAX_FIGS];
    pthread_mutex_lock(&writing);
    pthread_mutex_lock(&lock);
    size_t n = n_figs;
    memcpy(copy, figs, n * sizeof *copy);
    for (size_t d = 0; d < n; d++) /* titles as they were said */
        for (uint32_t i = 0; i < copy[d].n_findings && i < CA_LIVE_FINDINGS; i++) {
            const told *t = find_said(copy[d].device, &copy[d].findings[i]);
            if (t && !*copy[d].findings[i].title) snprintf(copy[d].findings[i].title, CA_LIVE_TITLE, "%s", t->title);
        }
    uint64_t now = now_ns();
    last_published_ns = now;
    publish_due = false;
    bool metrics = ca_conf.metrics[0] && (metrics_now || now - last_metrics_ns >= ca_conf.metrics_every * TICK_NS);
    if (metrics) last_metrics_ns = now;
    bool status = ca_conf.status && !status_off && !exiting; /* at exit the file goes */
    pthread_mutex_unlock(&lock);
    if (started_pid != getpid()) {
        started_pid = getpid();
        started = ca_proc_start_ticks(0);
        program_name(program, sizeof program);
    }
    ca_live_process p = {getpid(), started, ca_rank_env(), unix_now(), program};
    char err[CA_OUT_ERRLEN], path[1024];
    if (status && (status_path(path, sizeof path) != 0 ||
                   write_file(path, ca_live_write_status, &p, copy, n, err, sizeof err) != 0)) {
        if (!warned_once) ca_warn("no live status file (cudalloc status, top): %s", strerror(errno));
        warned_once = status_off = true;
    }
    if (metrics) {
        char *file = ca_path_expand(ca_conf.metrics, err, sizeof err);
        if (!file || write_file(file, ca_live_write_metrics, &p, copy, n, err, sizeof err) != 0) {
            static bool said_metrics;
            if (!said_metrics) ca_warn("metrics: %s", err);
            said_metrics = true;
        }
        free(file);
    }
    pthread_mutex_unlock(&writing);
}

/* Our thread: the files after a mark, and a judgment each second when no
 * mark judged since (detected iterations, figures between marks). */
static void *watcher(void *arg) {
    for (;;) {
        pthread_mutex_lock(&lock);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        while (!publish_due && pthread_cond_timedwait(&wake, &lock, &until) != ETIMEDOUT) {
        }
        bool judged_recently = now_ns() - last_judged_ns < TICK_NS;
        uint64_t wait = last_published_ns + PUBLISH_GAP_NS > now_ns() ? last_published_ns + PUBLISH_GAP_NS - now_ns() : 0;
        pthread_mutex_unlock(&lock);
        if (wait) {
            struct timespec ts = {0, (long)wait};
            nanosleep(&ts, NULL);
        }
        if (!judged_recently) judge_all();
        publish(false);
    }
    return NULL;
}

static void start_watcher(void) {
    pthread_mutex_lock(&lock);
    bool start = !thread_started && (ca_conf.status || ca_conf.metrics[0]);
    thread_started = true;
    pthread_mutex_unlock(&lock);
    if (!start) return;
    pthread_t th;
    sigset_t all, prev;
    sigfillset(&all); /* signals stay with the program's threads */
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    if (pthread_create(&th, NULL, watcher, NULL) == 0) pthread_detach(th);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
}

void ca_live_device_made(void) { start_watcher(); }

void ca_live_mark(void) {
    if (!ca_conf.tracking) return;
    pthread_mutex_lock(&lock);
    uint64_t cost = UINT64_MAX;
    for (unsigned i = 0; i < COSTS && i < n_costs; i++)
        if (costs_ns[i] < cost) cost = costs_ns[i];
    uint64_t gap = n_costs && COST_SHARE * cost > MARK_GAP_NS ? COST_SHARE * cost : MARK_GAP_NS;
    bool soon = now_ns() - last_judged_ns < gap;
    pthread_mutex_unlock(&lock);
    if (!soon) judge_all();
}

void ca_live_oom(void) {
    atomic_store(&oom_seen, true);
    if (ca_conf.on_oom == CA_ON_EXIT) {
        fprintf(stderr, "cudalloc: on_oom:exit: writing the reports, then exit status %zu\n", ca_conf.exit_code);
        atomic_store(&ending, true);
        exit((int)ca_conf.exit_code);
    }
}

void ca_live_exit(void) {
    pthread_mutex_lock(&lock);
    exiting = true;
    pthread_mutex_unlock(&lock);
    judge_all(); /* the last figures; what they find counts for error_exitcode */
    pthread_mutex_lock(&lock);
    for (size_t d = 0; d < n_figs; d++)
        if (figs[d].n_findings) atomic_store(&leak_seen, true);
    pthread_mutex_unlock(&lock);
    publish(true); /* the metrics; after it no status file is written (a watcher's under way has ended) */
    char path[1024];
    if (ca_conf.status && status_path(path, sizeof path) == 0) unlink(path);
    bool bad = atomic_load(&leak_seen) || atomic_load(&oom_seen);
    if (ca_conf.error_exitcode && bad && !atomic_load(&ending)) {
        fflush(NULL);
        _exit((int)ca_conf.error_exitcode);
    }
}

/* A fork child starts no watcher (CUDA has no use in a child of a process
 * that used it, and a thread started after a multi-threaded fork is what
 * ThreadSanitizer refuses): its marks are still judged and said, its files
 * written at its exit. */
void ca_live_after_fork(void) {
    pthread_mutex_init(&lock, NULL);
    pthread_mutex_init(&writing, NULL);
    pthread_cond_init(&wake, NULL);
    thread_started = true;
    n_said = n_costs = 0;
    n_figs = 0;
}

CA_EXPORT int cudalloc_on_leak(cudalloc_leak_fn fn, void *ctx) {
    pthread_mutex_lock(&lock);
    callback = fn;
    callback_ctx = ctx;
    pthread_mutex_unlock(&lock);
    return 0;
}

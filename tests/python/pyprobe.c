/* A shared object that Python loads with ctypes (as it loads libcudart), to
 * see what cudalloc's stack capture makes of the Python code calling it
 * (walker.py) and what it costs (bench.py). It holds its own stack table and,
 * for the benchmark, an allocator on the count backend with a tracker. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocator/allocator.h"
#include "reports/capture/named_frames.h"
#include "reports/capture/pyframes.h"
#include "reports/capture/stacks.h"
#include "reports/capture/symbolize.h"
#include "reports/track/tracker.h"
#include "util/export.h"

static ca_stacks *S;

/* The calling Python code's stack as cudalloc keeps it, one frame a line:
 * "python|native <TAB> function <TAB> file-or-module <TAB> line". Returns
 * the site id (0: none), -1 when buf is too small. */
CA_EXPORT long pyprobe_capture(char *buf, size_t cap) {
    if (!S) S = ca_stacks_new(32);
    uint32_t site = ca_stacks_capture(S);
    const uintptr_t *ips;
    unsigned n = ca_stacks_get(S, site, &ips);
    ca_symtab *sym = ca_symtab_new();
    for (unsigned i = 0; i < n; i++) ca_symtab_add(sym, ips[i]);
    ca_symtab_resolve(sym, 0, 0); /* dladdr is enough to tell native frames apart */
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        const ca_frame *f = ca_symtab_get(sym, ips[i]);
        int named = ca_ip_is_named(ips[i]);
        int k = snprintf(buf + used, cap - used, "%s\t%s\t%s\t%u\n", named ? f->module : "native", f->function,
                         named ? f->file : f->module, f->line);
        if (k < 0 || (size_t)k >= cap - used) {
            ca_symtab_free(sym);
            return -1;
        }
        used += (size_t)k;
    }
    ca_symtab_free(sym);
    return site;
}

/* C calling back into Python: the callback's frames and the outer ones sit
 * on either side of this native frame. */
CA_EXPORT __attribute__((noinline)) long pyprobe_call(long (*cb)(void)) {
    long r = cb();
    __asm__ volatile("" ::: "memory"); /* a real frame: no tail call */
    return r;
}

/* The interpreter found: "3.11", or why none ("no Python in this process"). */
CA_EXPORT const char *pyprobe_python(void) {
    const char *why;
    const char *v = ca_py_version(&why);
    return v ? v : why;
}

/* ---- benchmark: ns per tracked alloc+free pair at the caller's Python depth ---- */

/* The thread's CPU time: the machines these run on are shared, and time
 * spent descheduled is not the code's. */
static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

#define LIVE 64
/* mode 0: no tracker; 1: tracked, native frames only; 2: tracked with Python
 * frames. The same call site every time, as in a loop's steady state. */
CA_EXPORT double pyprobe_bench(long n, int mode) {
    static const size_t sizes[8] = {512, 4096, 65536, 1 << 20, 3 << 20, 8192, 100000, 2 << 20};
    void *ring[LIVE] = {0};
    ca_allocator *a;
    if (ca_allocator_new(ca_backend_count_new(0, 2 << 20), NULL, &a) != CA_OK) return -1;
    ca_tracker *t = NULL;
    if (mode) {
        ca_tracker_options o;
        ca_tracker_options_default(&o);
        o.detect = 0;
        o.stacks = ca_stacks_new(32);
        ca_stacks_set_python(o.stacks, mode == 2);
        t = ca_tracker_new(&o);
        ca_tracker_attach(t, a);
    }
    double t0 = 0;
    for (long i = 0; i < n + 1000; i++) { /* 1000 to warm up: stacks seen, pools made */
        if (i == 1000) t0 = now_ns();
        size_t k = (size_t)i % LIVE;
        if (ring[k]) ca_free(a, ring[k], 0);
        ca_malloc(a, sizes[i & 7], 0, &ring[k], NULL);
    }
    double ns = (now_ns() - t0) / (double)n;
    for (int k = 0; k < LIVE; k++)
        if (ring[k]) ca_free(a, ring[k], 0);
    if (t) {
        ca_stacks *s = ca_tracker_stacks(t);
        ca_tracker_detach(t, a);
        ca_tracker_destroy(t);
        ca_stacks_free(s);
    }
    ca_allocator_destroy(a);
    return ns;
}

/* Python frames the capture takes at the caller, and whether its per-thread
 * cache answered the captures since the last call. */
CA_EXPORT int pyprobe_python_frames(void) {
    ca_py_frame f[CA_PY_MAX_FRAMES];
    uint64_t h;
    return (int)ca_py_walk(f, CA_PY_MAX_FRAMES, &h);
}

CA_EXPORT void pyprobe_counts(unsigned long long *hits, unsigned long long *builds) {
    uint64_t h, b;
    ca_stacks_python_counts(&h, &b);
    *hits = h;
    *builds = b;
}

static volatile uint64_t keep; /* what the timed loops computed: they must run */

/* ns per ca_py_walk of the caller's frames (the hot path's Python part). */
CA_EXPORT double pyprobe_walk_bench(long n) {
    ca_py_frame f[CA_PY_MAX_FRAMES];
    uint64_t h, sink = 0;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) sink += ca_py_walk(f, CA_PY_MAX_FRAMES, &h) + h;
    double ns = (now_ns() - t0) / (double)n;
    keep = sink;
    return ns;
}

/* For comparison, the same frames through CPython's public API (3.11+; the
 * GIL must be held: call through ctypes.PyDLL): PyThreadState_GetFrame,
 * PyFrame_GetBack, PyFrame_GetCode, PyFrame_GetLasti, each a new reference,
 * frame objects made for frames that had none. ns per walk; -1 without the API. */
CA_EXPORT double pyprobe_api_bench(long n) {
    void *(*get_ts)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyThreadState_Get");
    void *(*get_frame)(void *) = (void *(*)(void *))dlsym(RTLD_DEFAULT, "PyThreadState_GetFrame");
    void *(*back)(void *) = (void *(*)(void *))dlsym(RTLD_DEFAULT, "PyFrame_GetBack");
    void *(*code)(void *) = (void *(*)(void *))dlsym(RTLD_DEFAULT, "PyFrame_GetCode");
    int (*lasti)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "PyFrame_GetLasti");
    void (*decref)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "Py_DecRef");
    if (!get_ts || !get_frame || !back || !code || !lasti || !decref) return -1;
    uint64_t sink = 0;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        void *f = get_frame(get_ts());
        while (f) {
            void *c = code(f);
            sink += (uintptr_t)c + (unsigned)lasti(f);
            decref(c);
            void *b = back(f);
            decref(f);
            f = b;
        }
    }
    double ns = (now_ns() - t0) / (double)n;
    keep = sink;
    return ns;
}

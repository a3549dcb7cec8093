/* The same size sequences through general-purpose allocators, for scale:
 * glibc malloc, and mimalloc and jemalloc loaded privately with dlopen so
 * they do not replace this process's malloc. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "tools/replay.h"

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);

static int lookup(const char *which, malloc_fn *m, free_fn *f) {
    if (!strcmp(which, "glibc")) {
        *m = malloc;
        *f = free;
        return 0;
    }
    const char *lib = !strcmp(which, "mimalloc") ? "libmimalloc.so.2" : "libjemalloc.so.2";
    const char *mname = !strcmp(which, "mimalloc") ? "mi_malloc" : "malloc";
    const char *fname = !strcmp(which, "mimalloc") ? "mi_free" : "free";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    *m = (malloc_fn)dlsym(h, mname);
    *f = (free_fn)dlsym(h, fname);
    return *m && *f ? 0 : -1; /* the library stays loaded: its memory may outlive us */
}

double replay_foreign(const ca_trace *t, const char *which, int runs) {
    malloc_fn m;
    free_fn f;
    if (lookup(which, &m, &f) != 0) return -1;
    void **ptrs = calloc(t->n_ids ? t->n_ids : 1, sizeof *ptrs);
    double *ns = calloc((size_t)runs, sizeof *ns);
    if (!ptrs || !ns) {
        free(ptrs);
        free(ns);
        return -1;
    }
    for (int r = 0; r < runs; r++) {
        size_t calls = 0;
        double t0 = replay_now_ns();
        for (size_t i = 0; i < t->n_ops; i++) {
            const ca_trace_op *op = &t->ops[i];
            if (op->kind == CA_TRACE_ALLOC) {
                ptrs[op->id] = m(op->size);
                calls++;
            } else if (op->kind == CA_TRACE_FREE) {
                f(ptrs[op->id]);
                ptrs[op->id] = NULL;
                calls++;
            }
        }
        ns[r] = (replay_now_ns() - t0) / (calls ? (double)calls : 1);
        for (uint32_t id = 0; id < t->n_ids; id++) {
            f(ptrs[id]);
            ptrs[id] = NULL;
        }
    }
    double med = replay_median(ns, runs);
    free(ptrs);
    free(ns);
    return med;
}

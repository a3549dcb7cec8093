/* The same size sequences through general-purpose allocators, for scale:
 * glibc malloc; mimalloc loaded privately with dlopen, so it does not replace
 * this process's malloc; jemalloc, whose initial-exec TLS cannot be dlopened,
 * in a child of this program started with it preloaded. And through no
 * allocator ("loop"): a bump pointer and an empty free, the replay loop's own
 * share of every figure. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/replay.h"

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);

/* Addresses that are never touched: only the loop's loads and stores remain. */
static uintptr_t bump_next = 4096;
static void *bump_malloc(size_t size) {
    void *p = (void *)bump_next;
    bump_next += (size + 511) & ~(size_t)511;
    return p;
}
static void no_free(void *p) { (void)p; }

static int lookup(const char *which, malloc_fn *m, free_fn *f) {
    if (!strcmp(which, "loop")) {
        *m = bump_malloc;
        *f = no_free;
        return 0;
    }
    if (!strcmp(which, "glibc") || !strcmp(which, "preloaded")) {
        *m = malloc;
        *f = free;
        return 0;
    }
    if (strcmp(which, "mimalloc")) return -1;
    void *h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    *m = (malloc_fn)dlsym(h, "mi_malloc");
    *f = (free_fn)dlsym(h, "mi_free");
    return *m && *f ? 0 : -1; /* the library stays loaded: its memory may outlive us */
}

/* jemalloc: this program again, with jemalloc preloaded as its malloc. */
static double in_child(const char *path, const char *lib, int runs) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "LD_PRELOAD=%s /proc/%d/exe --runs %d --time-malloc '%s'", lib, (int)getpid(), runs, path);
    FILE *p = popen(cmd, "r");
    double ns = -1;
    if (!p) return -1;
    if (fscanf(p, "%lf", &ns) != 1) ns = -1;
    return pclose(p) == 0 ? ns : -1;
}

double replay_foreign(const ca_trace *t, const char *path, const char *which, int runs) {
    if (!strcmp(which, "jemalloc")) return in_child(path, "libjemalloc.so.2", runs);
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

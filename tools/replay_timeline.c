/* cudalloc-replay --timeline: reserved and allocated memory over the replay,
 * a row per iteration (the trace's `iteration` rows) or per N calls, so that
 * a change of policy shows where it happens. Its own replay on a fresh
 * allocator, untimed: the figures of the other passes stay as they were. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tools/replay.h"

#define MIB(x) ((double)(x) / (1 << 20))

struct timeline {
    ca_allocator *a;
    FILE *out;
    int pass;
    size_t row, calls;   /* rows printed in this pass; calls since the last row */
    ca_stats last;       /* at the last row: what changed since */
};

/* One row: the figures now and the peaks since the last row; peaks start again. */
static void print_row(struct timeline *tl, const char *label) {
    ca_stats s;
    ca_get_stats(tl->a, &s);
    const int all = CA_POOL_ALL;
    fprintf(tl->out, "%4d %9s %7zu %9.2f %9.2f %9.2f %9.2f %7lld %7lld %7lld\n", tl->pass, label, tl->calls,
            MIB(s.reserved_bytes[all].current), MIB(s.reserved_bytes[all].peak), MIB(s.allocated_bytes[all].current),
            MIB(s.allocated_bytes[all].peak), (long long)(s.num_device_alloc - tl->last.num_device_alloc),
            (long long)(s.num_device_free - tl->last.num_device_free),
            (long long)(s.num_granules_moved - tl->last.num_granules_moved));
    tl->last = s;
    tl->calls = 0;
    tl->row++;
    ca_reset_peaks(tl->a);
}

static void row_here(struct timeline *tl, const char *prefix, size_t n) {
    char label[32];
    snprintf(label, sizeof label, "%s%zu", prefix, n);
    print_row(tl, label);
}

int replay_timeline(const ca_trace *t, const replay_config *cfg, size_t every, int passes, FILE *out) {
    void **ptrs = calloc(t->n_ids ? t->n_ids : 1, sizeof *ptrs);
    ca_allocator *a = replay_allocator(t, cfg);
    if (!ptrs || !a) {
        free(ptrs);
        if (a) ca_allocator_destroy(a);
        return a ? CA_ERR_OOM : CA_ERR_BACKEND;
    }
    /* The trace's iterations when it marks them, unless asked for N calls. */
    bool by_iteration = !every && t->count[CA_TRACE_ITERATION] > 0;
    if (!every) every = 1000;
    fprintf(out, "timeline: a row %s; MiB; peaks since the previous row; device creations, releases and\n"
                 "granules moved since the previous row\n",
            by_iteration ? "at each iteration row of the trace" : "every N calls");
    fprintf(out, "pass %9s %7s %9s %9s %9s %9s %7s %7s %7s\n", by_iteration ? "iteration" : "row", "calls", "reserved",
            "res_peak", "allocated", "alloc_peak", "created", "released", "moved");
    struct timeline tl;
    memset(&tl, 0, sizeof tl);
    tl.a = a;
    tl.out = out;
    ca_reset_peaks(a);
    for (int pass = 1; pass <= passes; pass++) {
        tl.pass = pass;
        tl.row = 0;
        for (size_t i = 0; i < t->n_ops; i++) {
            const ca_trace_op *op = &t->ops[i];
            if (op->kind == CA_TRACE_ALLOC) {
                if (ca_malloc(a, op->size, 0, &ptrs[op->id], NULL) != CA_OK) ptrs[op->id] = NULL;
            } else if (op->kind == CA_TRACE_FREE && ptrs[op->id]) {
                ca_free(a, ptrs[op->id], 0);
                ptrs[op->id] = NULL;
            } else {
                if (op->kind == CA_TRACE_ITERATION && by_iteration) row_here(&tl, "", (size_t)op->size);
                continue;
            }
            if (++tl.calls == every && !by_iteration) row_here(&tl, "", tl.row + 1);
        }
        if (tl.calls) print_row(&tl, "end");
        /* as replay_run does between passes: what the trace left live is freed */
        for (uint32_t id = 0; id < t->n_ids; id++)
            if (ptrs[id]) {
                ca_free(a, ptrs[id], 0);
                ptrs[id] = NULL;
            }
    }
    ca_allocator_destroy(a);
    free(ptrs);
    return CA_OK;
}

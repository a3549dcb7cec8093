/* The phases of a training step (see phases.h). */
#include "reports/diagnose/phases.h"

#include <stdlib.h>

/* Frame d counted from the outermost. */
static uintptr_t outer(const ca_phase_stack *s, unsigned d) { return s->ips[s->n - 1 - d]; }

typedef struct fw {
    uintptr_t frame;
    uint64_t weight;
} fw;

static int by_frame(const void *a, const void *b) {
    uintptr_t x = ((const fw *)a)->frame, y = ((const fw *)b)->frame;
    return x < y ? -1 : x > y;
}

long ca_phases_find(const ca_phase_stack *st, size_t n, uint32_t *group, ca_phase *phases) {
    /* the stacks of the step's allocations, still sharing the prefix */
    size_t *in = malloc((n ? n : 1) * sizeof *in), nin = 0;
    fw *f = malloc((n ? n : 1) * sizeof *f);
    uintptr_t *prefix = malloc(CA_PHASE_MAX_DEPTH * sizeof *prefix);
    if (!in || !f || !prefix) {
        free(in);
        free(f);
        free(prefix);
        return -1;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (st[i].weight) total += st[i].weight, in[nin++] = i;
    /* The loop's frames: the heaviest frame at each depth, while the stacks
     * through it (and deeper) hold CA_PHASE_SHARE of the step's allocations. */
    unsigned depth = 0;
    while (depth < CA_PHASE_MAX_DEPTH && total) {
        size_t nf = 0;
        for (size_t k = 0; k < nin; k++)
            if (st[in[k]].n > depth + 1) f[nf++] = (fw){outer(&st[in[k]], depth), st[in[k]].weight};
        qsort(f, nf, sizeof *f, by_frame);
        uintptr_t best = 0;
        uint64_t best_w = 0;
        for (size_t a = 0, b; a < nf; a = b) {
            uint64_t w = 0;
            for (b = a; b < nf && f[b].frame == f[a].frame; b++) w += f[b].weight;
            if (w > best_w) best_w = w, best = f[a].frame;
        }
        if ((double)best_w < CA_PHASE_SHARE * (double)total) break;
        prefix[depth] = best;
        size_t keep = 0;
        for (size_t k = 0; k < nin; k++)
            if (st[in[k]].n > depth + 1 && outer(&st[in[k]], depth) == best) in[keep++] = in[k];
        nin = keep;
        depth++;
    }
    /* Each stack's phase frame: where it leaves the prefix, or just past it. */
    long np = 0;
    for (size_t i = 0; i < n; i++) {
        group[i] = 0;
        if (!st[i].n || !st[i].used) continue;
        unsigned d = 0;
        while (d < depth && d < st[i].n && outer(&st[i], d) == prefix[d]) d++;
        if (d >= st[i].n) d = st[i].n - 1;
        uintptr_t fr = outer(&st[i], d);
        long g = 0;
        for (long k = np - 1; k >= 0 && !g; k--) { /* the latest first: stacks of a phase come together */
            const ca_phase_stack *o = &st[phases[k].stack];
            unsigned od = o->n - 1 - phases[k].frame;
            if (od == d && outer(o, od) == fr) g = k + 1;
        }
        if (!g) {
            phases[np] = (ca_phase){i, st[i].n - 1 - d};
            g = ++np;
        }
        group[i] = (uint32_t)g;
    }
    free(in);
    free(f);
    free(prefix);
    return np;
}

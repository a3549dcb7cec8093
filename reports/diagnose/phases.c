/* The phases of a training step (see phases.h). */
#include "reports/diagnose/phases.h"

#include <stdlib.h>

/* Frame d counted from the outermost. */
static uintptr_t outer(const ca_phase_stack *s, unsigned d) { return s->ips[s->n - 1 - d]; }

long ca_phases_find(const ca_phase_stack *st, size_t n, uint32_t *group, ca_phase *phases) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += st[i].weight;
    /* The loop's frames: extend the prefix while the stacks that share it
     * (and go deeper) hold CA_PHASE_SHARE of the step's allocations. */
    uintptr_t *prefix = malloc(sizeof *prefix * 64);
    size_t cap = 64, depth = 0;
    unsigned char *in = malloc(n ? n : 1); /* still shares the prefix */
    if (!prefix || !in) {
        free(prefix);
        free(in);
        return -1;
    }
    for (size_t i = 0; i < n; i++) in[i] = 1;
    for (;;) {
        /* the heaviest frame at this depth among the stacks still in */
        uintptr_t best = 0;
        uint64_t best_w = 0;
        for (size_t i = 0; i < n; i++) {
            if (!in[i] || st[i].n <= depth + 1 || !st[i].weight) continue;
            uintptr_t f = outer(&st[i], (unsigned)depth);
            uint64_t w = 0;
            for (size_t j = i; j < n; j++)
                if (in[j] && st[j].n > depth + 1 && outer(&st[j], (unsigned)depth) == f) w += st[j].weight;
            if (w > best_w) best_w = w, best = f;
        }
        if (!total || (double)best_w < CA_PHASE_SHARE * (double)total) break;
        if (depth == cap) {
            uintptr_t *p = realloc(prefix, sizeof *p * cap * 2);
            if (!p) break;
            prefix = p;
            cap *= 2;
        }
        prefix[depth++] = best;
        for (size_t i = 0; i < n; i++)
            if (in[i] && (st[i].n <= depth || outer(&st[i], (unsigned)depth - 1) != best)) in[i] = 0;
    }
    /* Each stack's phase frame: where it leaves the prefix, or just past it. */
    long np = 0;
    for (size_t i = 0; i < n; i++) {
        group[i] = 0;
        if (!st[i].n) continue;
        unsigned d = 0;
        while (d < depth && d < st[i].n && outer(&st[i], d) == prefix[d]) d++;
        if (d >= st[i].n) d = st[i].n - 1;
        uintptr_t f = outer(&st[i], d);
        long g = 0;
        for (long k = 0; k < np && !g; k++) {
            const ca_phase_stack *o = &st[phases[k].stack];
            unsigned od = o->n - 1 - phases[k].frame;
            if (od == d && outer(o, od) == f) g = k + 1;
        }
        if (!g) {
            phases[np] = (ca_phase){i, st[i].n - 1 - d};
            g = ++np;
        }
        group[i] = (uint32_t)g;
    }
    free(prefix);
    free(in);
    return np;
}

/* The analysed iteration replayed with a fix's changes to its lifetimes
 * (fixes.h says which): a list of memory changes in time, sorted, whose
 * running sum's maximum is the predicted peak. Each change carries its fixed
 * bytes and its batch-scaled bytes apart, so one sorted replay answers for
 * any micro-batch fraction. Changes at one time happen together: the running
 * sum is looked at only after all of them. */
#include <stdlib.h>

#include "reports/diagnose/fixes_internal.h"

typedef struct fx_ev {
    uint64_t t;     /* position * 4 + order within it */
    int64_t fixed;  /* bytes */
    double scaled;  /* bytes, to be multiplied by the micro-batch fraction */
} fx_ev;

/* Times: a recompute's spike rises at 0 and falls at 1 (when the block's
 * saved allocations come back), allocations and frees happen at 2, a block's
 * dropped allocations go at 3 (just after its last allocation). */
static uint64_t at(uint64_t pos, unsigned order) { return pos * 4 + order; }

typedef struct evlist {
    fx_ev *ev;
    size_t n, cap;
    int failed;
} evlist;

static void add(evlist *e, uint64_t t, int64_t fixed, double scaled) {
    if (e->failed) return;
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 1024;
        fx_ev *p = realloc(e->ev, cap * sizeof *p);
        if (!p) {
            e->failed = 1;
            return;
        }
        e->ev = p;
        e->cap = cap;
    }
    e->ev[e->n++] = (fx_ev){t, fixed, scaled};
}

/* +bytes at t0, -bytes at t1 (t1 == UINT64_MAX: never), into the fixed or the
 * scaled part. */
static void live(evlist *e, uint64_t t0, uint64_t t1, uint64_t bytes, int scaled, double r) {
    if (scaled) {
        add(e, t0, 0, (double)bytes * r);
        if (t1 != UINT64_MAX) add(e, t1, 0, -(double)bytes * r);
    } else {
        add(e, t0, (int64_t)bytes, 0);
        if (t1 != UINT64_MAX) add(e, t1, -(int64_t)bytes, 0);
    }
}

static int by_time(const void *a, const void *b) {
    uint64_t x = ((const fx_ev *)a)->t, y = ((const fx_ev *)b)->t;
    return x < y ? -1 : x > y;
}

int fx_curve_build(const fx_iter *it, const fx_scen *s, int later, fx_curve *out) {
    evlist e = {0};
    uint64_t start = at(it->lo, 0);
    if (s->extra) add(&e, start, (int64_t)s->extra, 0);
    for (size_t i = 0; i < it->n; i++) {
        const fx_life *a = &it->l[i];
        uint64_t death = a->death >= it->hi ? UINT64_MAX : at(a->death, 2);
        int scaled = a->scale == FX_SCALED || (a->scale == FX_AMBIGUOUS && s->ambiguous_scale);
        switch (a->cls) {
        case FX_SPAN:
            live(&e, start, UINT64_MAX, a->bytes, 0, 1);
            break;
        case FX_IN: /* freed in the first micro-batch: gone in the later ones */
            if (!later) live(&e, start, death, a->bytes, 0, 1);
            break;
        case FX_OUT:
            if (!later || a->birth > it->bwd_end) { /* as recorded; after backward: once per step */
                live(&e, at(a->birth, 2), UINT64_MAX, a->bytes, 0, 1);
            } else { /* made in the first micro-batch; each later one adds a new one into it */
                live(&e, start, UINT64_MAX, a->bytes, 0, 1);
                if (s->grad_temps) live(&e, at(a->birth, 2), at(a->birth, 3), a->bytes, 0, 1);
            }
            break;
        default: {
            int32_t b = s->ck ? s->ck->drop[i] : -1;
            double r = a->fp32 ? 1 : s->r; /* autocast keeps it in fp32 */
            if (a->grad && later) { /* made in the first micro-batch, each later one adds into it */
                live(&e, start, death, a->bytes, 0, 1);
                if (s->grad_temps) live(&e, at(a->birth, 2), at(a->birth, 3), a->bytes, 0, 1);
            } else if (b < 0) {
                live(&e, at(a->birth, 2), death, a->bytes, scaled, r);
            } else { /* freed at its block's end, made again when backward gets there */
                live(&e, at(a->birth, 2), at(s->ck->end[b], 3), a->bytes, scaled, r);
                live(&e, at(s->ck->again[b], 1), death, a->bytes, scaled, r);
            }
        }
        }
    }
    if (s->ck && !s->no_spike)
        for (size_t b = 0; b < s->ck->n; b++) { /* the block's forward, run again */
            add(&e, at(s->ck->again[b], 0), (int64_t)s->ck->spike_fixed[b], (double)s->ck->spike_scaled[b] * s->r);
            add(&e, at(s->ck->again[b], 1), -(int64_t)s->ck->spike_fixed[b],
                -(double)s->ck->spike_scaled[b] * s->r);
        }
    if (e.failed) {
        free(e.ev);
        return -1;
    }
    qsort(e.ev, e.n, sizeof *e.ev, by_time);
    out->n = e.n;
    out->ev = e.ev;
    return 0;
}

double fx_curve_peak_exact(const fx_curve *c, double f) {
    double cur = 0, peak = 0;
    for (size_t i = 0; i < c->n;) {
        uint64_t t = c->ev[i].t;
        for (; i < c->n && c->ev[i].t == t; i++) cur += (double)c->ev[i].fixed + c->ev[i].scaled * f;
        if (cur > peak) peak = cur;
    }
    return peak;
}

uint64_t fx_curve_peak(const fx_curve *c, double f) { return (uint64_t)(fx_curve_peak_exact(c, f) + 0.5); }

void fx_curve_free(fx_curve *c) {
    free(c->ev);
    c->ev = NULL;
    c->n = 0;
}

uint64_t fx_scen_peak(const fx_iter *it, const fx_scen *s, double f) {
    fx_curve c;
    if (fx_curve_build(it, s, 0, &c)) return UINT64_MAX;
    uint64_t peak = fx_curve_peak(&c, f);
    fx_curve_free(&c);
    if (f < 1) {
        if (fx_curve_build(it, s, 1, &c)) return UINT64_MAX;
        uint64_t later = fx_curve_peak(&c, f);
        fx_curve_free(&c);
        if (later > peak) peak = later;
    }
    return peak;
}

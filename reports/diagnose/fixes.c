/* What the peak is made of and what each fix makes of it (see fixes.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/diagnose/blocks.h"
#include "reports/diagnose/fixes_internal.h"

const char *ca_fix_name(unsigned kinds) {
    static const char *const names[8] = {
        "none", "accumulation", "bf16", "accumulation+bf16", "checkpointing", "accumulation+checkpointing",
        "bf16+checkpointing", "accumulation+bf16+checkpointing",
    };
    return names[kinds & 7];
}

void ca_fix_report_free(ca_fix_report *r) {
    free(r->by_group);
    free(r->group_site);
    free(r->group_frame);
    r->by_group = NULL;
    r->group_site = NULL;
    r->group_frame = NULL;
}

static int by_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- the iteration to analyse ---- */

typedef struct pev {
    uint64_t pos;
    int64_t delta;
} pev;

static int pev_cmp(const void *a, const void *b) {
    const pev *x = a, *y = b;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return (x->delta > y->delta) - (x->delta < y->delta); /* frees first */
}

/* The complete iteration with the highest peak (the latest at a tie): its
 * window [*lo, *hi), number, peak and the peak's position. 0 when there is
 * none, with why filled. */
static int pick_iteration(const ca_fix_input *in, uint64_t *lo, uint64_t *hi, uint32_t *iter, uint64_t *peak,
                          uint64_t *peak_pos, char *why) {
    if (in->n_bounds == 0) {
        snprintf(why, CA_FIX_WHY, "no complete iteration: no iteration boundary was marked or detected");
        return 0;
    }
    uint64_t first = UINT64_MAX;
    for (size_t i = 0; i < in->n; i++)
        if (in->life[i].birth < first) first = in->life[i].birth;
    /* windows: iteration w is [b[w-1], b[w]); iteration 0 [first, b[0]) only when alone */
    size_t w0 = in->n_bounds >= 2 ? 1 : 0, nw = in->n_bounds;
    if (w0 == 0 && (first == UINT64_MAX || first >= in->bounds[0])) {
        snprintf(why, CA_FIX_WHY, "no complete iteration: nothing was allocated before the only iteration boundary");
        return 0;
    }
    pev *ev = malloc((2 * in->n + 1) * sizeof *ev);
    if (!ev) {
        snprintf(why, CA_FIX_WHY, "out of memory while predicting the fixes");
        return -1;
    }
    size_t ne = 0;
    for (size_t i = 0; i < in->n; i++) {
        ev[ne++] = (pev){in->life[i].birth, (int64_t)in->life[i].bytes};
        if (in->life[i].death != CA_LIFE_LIVE) ev[ne++] = (pev){in->life[i].death, -(int64_t)in->life[i].bytes};
    }
    qsort(ev, ne, sizeof *ev, pev_cmp);
    int64_t cur = 0;
    size_t e = 0;
    int found = 0;
    for (size_t w = w0; w < nw; w++) {
        uint64_t a = w ? in->bounds[w - 1] : first, b = in->bounds[w];
        if (b <= a) continue;
        for (; e < ne && ev[e].pos < a; e++) cur += ev[e].delta;
        int64_t best = cur;
        uint64_t best_pos = a;
        for (; e < ne && ev[e].pos < b; e++) {
            cur += ev[e].delta;
            if (cur > best) best = cur, best_pos = ev[e].pos;
        }
        if (!found || (uint64_t)best >= *peak) {
            *lo = a, *hi = b, *iter = (uint32_t)w, *peak = (uint64_t)best, *peak_pos = best_pos;
            found = 1;
        }
    }
    free(ev);
    if (!found) snprintf(why, CA_FIX_WHY, "no complete iteration: the iteration boundaries enclose no events");
    return found;
}

/* ---- classification ---- */

static int by_birth(const void *a, const void *b) {
    uint64_t x = ((const fx_life *)a)->birth, y = ((const fx_life *)b)->birth;
    return x < y ? -1 : x > y;
}

static uint64_t forward_end(const fx_life *l, size_t n, uint64_t lo, uint64_t hi);

/* How many of l (sorted by birth) were born before pos: frees with as many
 * births before them come in one run, with no allocation between them. */
static size_t births_before(const fx_life *l, size_t n, uint64_t pos) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (l[m].birth < pos) lo = m + 1;
        else hi = m;
    }
    return lo;
}

/* Gradients freed inside the iteration (zero_grad(set_to_none=True) after
 * the optimizer's step): made in backward (before the last memory that
 * scales with the batch is freed) with a weight's size, they are live when
 * the last such allocation of backward and the step is made, and zero_grad
 * frees them together, with nothing allocated between the frees (the
 * optimizer's temporaries come and go one by one; the activations are gone
 * before the step). With accumulation they live from the first
 * micro-batch's backward to the step; they do not scale with the batch. (Not
 * by the forward's end: backward's first gradients can be made before the
 * most allocations are live.) l is sorted by birth. */
static void mark_gradients(fx_life *l, size_t n, const uint8_t *sized) {
    uint64_t last = 0, end = 0; /* the last birth of a weight-sized allocation of backward or the step */
    uint64_t batch = 0;         /* the last free of memory that scales with the batch: backward is over */
    for (size_t i = 0; i < n; i++) {
        if (sized[i] && l[i].birth > last) last = l[i].birth;
        if (l[i].cls == FX_TR && !sized[i] && l[i].death > batch) batch = l[i].death;
    }
#define CANDIDATE(a, s) ((s) && (a)->birth < last && (a)->birth < batch && (a)->death > last)
    for (size_t i = 0; i < n; i++)
        if (CANDIDATE(&l[i], sized[i]) && l[i].death > end) end = l[i].death;
    if (!end) return;
    size_t run = births_before(l, n, end), count = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++)
            if (CANDIDATE(&l[i], sized[i]) && births_before(l, n, l[i].death) == run) {
                if (!pass) count++;
                else if (count >= 2) l[i].grad = 1;
            }
#undef CANDIDATE
}

/* What autocast keeps in fp32: the forward's batch-scaled allocations made
 * by an op it runs in fp32 (frames: the loss, softmax, norms), and those of
 * backward with their sizes (their gradients). Without frames, none. */
static void mark_fp32(fx_life *l, size_t n, uint64_t fwd) {
    uint64_t sizes[16];
    size_t ns = 0;
    for (size_t i = 0; i < n && ns < 16; i++)
        if (l[i].fp32 && l[i].cls == FX_TR && l[i].scale == FX_SCALED && l[i].birth <= fwd) {
            size_t k = 0;
            while (k < ns && sizes[k] != l[i].bytes) k++;
            if (k == ns) sizes[ns++] = l[i].bytes;
        }
    for (size_t i = 0; i < n; i++) {
        int keep = 0;
        for (size_t k = 0; k < ns && !keep; k++) keep = l[i].bytes == sizes[k];
        l[i].fp32 = keep && l[i].cls == FX_TR && l[i].scale == FX_SCALED;
    }
}

/* The allocations live in [lo, hi), by birth, classified; *fwd: where
 * backward starts. What the forward pass makes and frees in the iteration
 * scales with the batch; so does what backward and the optimizer make and
 * free, unless it has the size of an allocation that lives across the
 * iteration's ends (a weight's gradient computed, then added: ambiguous).
 * NULL when memory ran out. */
static fx_life *gather(const ca_fix_input *in, uint64_t lo, uint64_t hi, size_t *n_out, uint64_t *fwd) {
    size_t n = 0, nf = 0;
    for (size_t i = 0; i < in->n; i++)
        if (in->life[i].birth < hi && in->life[i].death >= lo) n++;
    fx_life *l = malloc((n ? n : 1) * sizeof *l);
    uint64_t *fixed = malloc((n ? n : 1) * sizeof *fixed);
    if (!l || !fixed) {
        free(l);
        free(fixed);
        return NULL;
    }
    n = 0;
    for (size_t i = 0; i < in->n; i++) {
        const ca_lifetime *a = &in->life[i];
        if (a->birth >= hi || a->death < lo) continue;
        uint8_t cls = a->birth < lo ? (a->death >= hi ? FX_SPAN : FX_IN) : (a->death >= hi ? FX_OUT : FX_TR);
        l[n++] = (fx_life){a->bytes, a->birth, a->death, a->key, a->group, a->unit, cls, FX_FIXED, 0, a->fp32, -1};
        if (cls != FX_TR) fixed[nf++] = a->bytes;
    }
    qsort(l, n, sizeof *l, by_birth);
    qsort(fixed, nf, sizeof *fixed, by_u64);
    uint8_t *sized = calloc(n ? n : 1, 1); /* a persistent allocation has its size */
    if (!sized) {
        free(l);
        free(fixed);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        sized[i] = l[i].cls == FX_TR && bsearch(&l[i].bytes, fixed, nf, sizeof *fixed, by_u64) != NULL;
    mark_gradients(l, n, sized); /* first: freed after the step, they would move the forward's end there */
    *fwd = forward_end(l, n, lo, hi);
    for (size_t i = 0; i < n; i++)
        if (l[i].cls == FX_TR && !l[i].grad) l[i].scale = l[i].birth > *fwd && sized[i] ? FX_AMBIGUOUS : FX_SCALED;
    free(sized);
    mark_fp32(l, n, *fwd);
    free(fixed);
    *n_out = n;
    return l;
}

/* Where backward starts: the position with the most allocations live that
 * were made in the iteration and are freed in it (the first such; kept ones,
 * the gradients, pile up in backward). */
static uint64_t forward_end(const fx_life *l, size_t n, uint64_t lo, uint64_t hi) {
    pev *ev = malloc((2 * n + 1) * sizeof *ev);
    if (!ev) return lo;
    size_t ne = 0;
    for (size_t i = 0; i < n; i++) {
        if (l[i].cls != FX_TR || l[i].grad) continue;
        ev[ne++] = (pev){l[i].birth, 1};
        ev[ne++] = (pev){l[i].death, -1};
    }
    qsort(ev, ne, sizeof *ev, pev_cmp);
    int64_t cur = 0, best = -1;
    uint64_t at = lo;
    for (size_t i = 0; i < ne; i++) {
        cur += ev[i].delta;
        if (cur > best) best = cur, at = ev[i].pos;
    }
    free(ev);
    return at;
}

static void count(ca_breakdown *b, const fx_life *a, uint64_t peak_pos, uint64_t fwd_end) {
    int live = a->birth <= peak_pos && a->death > peak_pos, kept = a->cls == FX_OUT || a->grad;
    if (kept && a->birth > peak_pos) b->kept_after_peak += a->bytes;
    if (!live) return;
    if (a->cls == FX_SPAN || a->cls == FX_IN)
        b->persistent += a->bytes;
    else if (kept) /* this step's gradients too, when zero_grad frees them after the step */
        b->kept += a->bytes;
    else if (a->birth <= fwd_end && a->death > fwd_end)
        b->activations += a->bytes;
    else
        b->temporaries += a->bytes;
}

/* ---- roles: weights, gradients, optimizer state ---- */

/* Where the first step's forward pass starts: the earliest birth of an
 * allocation live at its forward's end (an activation). 0 when the first
 * step is not seen whole; -1 when memory ran out. */
static int first_forward(const ca_fix_input *in, uint64_t *start) {
    uint64_t first = UINT64_MAX;
    for (size_t i = 0; i < in->n; i++)
        if (in->life[i].birth < first) first = in->life[i].birth;
    if (in->n_bounds < 2 || first >= in->bounds[0]) return 0;
    size_t n;
    uint64_t fwd;
    fx_life *l = gather(in, first, in->bounds[0], &n, &fwd);
    if (!l) return -1;
    *start = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (l[i].cls == FX_TR && l[i].birth <= fwd && l[i].death > fwd && l[i].birth < *start) *start = l[i].birth;
    free(l);
    return *start != UINT64_MAX;
}

/* The roles of the analysed iteration's memory (fixes.h, ca_roles). */
static int find_roles(const ca_fix_input *in, const fx_life *l, size_t n, uint64_t lo, ca_roles *r) {
    memset(r, 0, sizeof *r);
    r->from_frames = in->keys_are_stacks;
    uint64_t *span = malloc((n ? n : 1) * sizeof *span);
    if (!span) return -1;
    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        if (l[i].cls == FX_SPAN) span[ns++] = l[i].bytes;
    qsort(span, ns, sizeof *span, by_u64);
    for (size_t i = 0; i < n; i++) {
        const fx_life *a = &l[i];
        if (a->grad) r->gradients += a->bytes, r->grads_freed = 1;
        else if (a->cls == FX_OUT && a->birth > lo && bsearch(&a->bytes, span, ns, sizeof *span, by_u64))
            r->gradients += a->bytes; /* kept to the next iteration (zero_grad before the forward) */
    }
    free(span);
    uint64_t start = 0;
    int got = in->start_unseen ? 0 : first_forward(in, &start);
    if (got < 0) return -1;
    r->from_setup = got;
    if (!got) return 0;
    for (size_t i = 0; i < n; i++) {
        const fx_life *a = &l[i];
        if (a->cls != FX_SPAN) continue;
        if (a->birth < start) r->weights += a->bytes;
        else if (a->birth < in->bounds[0]) r->optimizer += a->bytes;
        else r->later += a->bytes;
    }
    /* a few weight-sized scalars kept to the next step are no gradients */
    if (!r->grads_freed && r->gradients < r->weights / 8) r->gradients = 0, r->grads_in_place = 1;
    return 0;
}

/* ---- checkpointing: the repeated blocks and what each keeps ---- */

static void ckpt_free(fx_ckpt *c) {
    free(c->end);
    free(c->again);
    free(c->spike_fixed);
    free(c->spike_scaled);
    free(c->drop);
    memset(c, 0, sizeof *c);
}

/* A block's forward alone, run again: the most its own allocations hold at
 * once before it ends, by kind. */
static void block_spike(const fx_life *l, const size_t *idx, size_t n, uint64_t *fixed, uint64_t *scaled) {
    uint64_t end = l[idx[n - 1]].birth;
    int64_t f = 0, s = 0, best = 0;
    *fixed = *scaled = 0;
    for (size_t k = 0; k < n; k++) {
        const fx_life *a = &l[idx[k]];
        for (size_t m = 0; m < k; m++) { /* what was freed since the previous allocation */
            const fx_life *b = &l[idx[m]];
            if (b->death <= end && b->death < a->birth && (k == 0 || b->death > l[idx[k - 1]].birth)) {
                if (b->scale == FX_SCALED) s -= (int64_t)b->bytes;
                else f -= (int64_t)b->bytes;
            }
        }
        if (a->scale == FX_SCALED) s += (int64_t)a->bytes;
        else f += (int64_t)a->bytes;
        if (f + s > best) best = f + s, *fixed = (uint64_t)f, *scaled = (uint64_t)s;
    }
}

/* Blocks of `fw` (indices into l, in birth order), block j being fw[from[j]]
 * to fw[to[j] - 1] (one alignment of repeated blocks, or units): what each
 * block saved for backward (alive at the forward's end, freed in the
 * iteration), its last saved allocation kept as its output. Returns how many
 * blocks end with an output of their input's size, the input (the allocation
 * just before the block) also saved; -1 when memory ran out. */
static int ckpt_align(const fx_life *l, size_t n, const size_t *fw, const size_t *from, const size_t *to,
                      size_t count, uint64_t fwd_end, fx_ckpt *c, uint64_t *saved_bytes, uint64_t *input_bytes) {
    memset(c, 0, sizeof *c);
    c->n = count;
    c->end = calloc(c->n, sizeof *c->end);
    c->again = calloc(c->n, sizeof *c->again);
    c->spike_fixed = calloc(c->n, sizeof *c->spike_fixed);
    c->spike_scaled = calloc(c->n, sizeof *c->spike_scaled);
    c->drop = malloc((n ? n : 1) * sizeof *c->drop);
    if (!c->end || !c->again || !c->spike_fixed || !c->spike_scaled || !c->drop) {
        ckpt_free(c);
        return -1;
    }
    for (size_t i = 0; i < n; i++) c->drop[i] = -1;
    int score = 0;
    *saved_bytes = *input_bytes = 0;
    for (size_t j = 0; j < c->n; j++) {
        size_t s0 = from[j], s1 = to[j];
        const fx_life *kept = NULL;
        uint64_t again = UINT64_MAX;
        for (size_t k = s0; k < s1; k++) {
            const fx_life *a = &l[fw[k]];
            if (a->cls == FX_TR && a->death > fwd_end) kept = a;
        }
        c->end[j] = l[fw[s1 - 1]].birth;
        for (size_t k = s0; k < s1; k++) {
            const fx_life *a = &l[fw[k]];
            if (a->cls != FX_TR || a->death <= fwd_end) continue;
            *saved_bytes += a->bytes;
            if (a == kept) continue;
            c->drop[fw[k]] = (int32_t)j;
            if (a->death < again) again = a->death;
        }
        if (kept) *input_bytes += kept->bytes;
        const fx_life *in = s0 ? &l[fw[s0 - 1]] : NULL;
        if (kept && in && in->death > fwd_end && in->bytes == kept->bytes) score++;
        c->again[j] = again == UINT64_MAX ? c->end[j] : again;
        block_spike(l, fw + s0, s1 - s0, &c->spike_fixed[j], &c->spike_scaled[j]);
    }
    *saved_bytes /= c->n;
    *input_bytes /= c->n;
    return score;
}

/* Checkpointing by units (the module calls named by frames, units.h): each
 * call's allocations of the forward pass, fw[from] to fw[to - 1], one block.
 * Fills ck[0] (*n_ck 1) when the calls save something for backward, else
 * says why. -1 when memory ran out. */
static int ckpt_units(const ca_fix_input *in, const fx_life *l, size_t n, const size_t *fw, size_t nfw, uint64_t fwd,
                      ca_fix_report *out, fx_ckpt *ck, size_t *n_ck) {
    if (in->n_units < 2) {
        snprintf(out->checkpoint_why, CA_FIX_WHY, "%s", in->units_why ? in->units_why : "no unit to checkpoint");
        return 0;
    }
    size_t count = (size_t)in->n_units;
    size_t *from = malloc(2 * count * sizeof *from), *to = from + count;
    if (!from) return -1;
    for (size_t j = 0; j < count; j++) from[j] = SIZE_MAX, to[j] = 0;
    for (size_t k = 0; k < nfw; k++) {
        uint32_t u = l[fw[k]].unit;
        if (!u || u > count) continue;
        if (from[u - 1] == SIZE_MAX) from[u - 1] = k;
        to[u - 1] = k + 1;
    }
    size_t m = 0; /* calls with allocations in the forward pass, in order */
    for (size_t j = 0; j < count; j++)
        if (from[j] != SIZE_MAX) from[m] = from[j], to[m] = to[j], m++;
    uint64_t sb = 0, ib = 0;
    int rc = m >= 2 ? ckpt_align(l, n, fw, from, to, m, fwd, &ck[0], &sb, &ib) : 0;
    free(from);
    if (rc < 0) return -1;
    snprintf(out->unit_name, sizeof out->unit_name, "%s", in->unit_name ? in->unit_name : "?");
    if (m < 2 || sb == 0) {
        if (m >= 2) ckpt_free(&ck[0]);
        snprintf(out->checkpoint_why, CA_FIX_WHY, "the %zu calls of %.150s save nothing for backward", m,
                 out->unit_name);
        return 0;
    }
    *n_ck = 1;
    out->blocks = (unsigned)m;
    out->block_saved_bytes = sb;
    out->block_input_bytes = ib;
    return 0;
}

/* ---- predictions ---- */

typedef struct fixspec {
    unsigned kinds, factor;
} fixspec;

static const fixspec specs[] = {
    {CA_FIX_ACCUM, 2}, {CA_FIX_ACCUM, 4}, {CA_FIX_ACCUM, 8}, {CA_FIX_BF16, 0}, {CA_FIX_CHECKPOINT, 0},
    {CA_FIX_ACCUM | CA_FIX_BF16, 4}, {CA_FIX_ACCUM | CA_FIX_CHECKPOINT, 4}, {CA_FIX_BF16 | CA_FIX_CHECKPOINT, 0},
    {CA_FIX_ACCUM | CA_FIX_BF16 | CA_FIX_CHECKPOINT, 4},
};

/* One fix at its low, middle or high end (-1, 0, 1), for a batch `batch`
 * times the analysed iteration's. */
static uint64_t fix_peak(const fx_iter *it, const fixspec *f, int end, uint64_t weights, const fx_ckpt *ck,
                         uint64_t block_saved, double batch) {
    fx_scen s = {.r = 1, .ambiguous_scale = end < 0, .grad_temps = end >= 0, .ck = ck, .no_spike = ck && end < 0};
    double micro = batch / (f->factor ? f->factor : 1);
    if (f->kinds & CA_FIX_BF16) {
        s.r = end < 0 ? CA_BF16_LOW : end > 0 ? CA_BF16_HIGH : (CA_BF16_LOW + CA_BF16_HIGH) / 2;
        s.extra = end < 0 ? 0 : end > 0 ? weights / 2 : weights / 4;
    }
    /* Checkpointing's range: PyTorch's recompute may come after the point
     * where backward reaches the block (low: its peak left out), and the
     * recomputed block's saved memory sits beside its gradients a while
     * (high: half a block's saved bytes more). */
    if (ck && end > 0) s.extra += (uint64_t)((double)block_saved / 2 * s.r * micro);
    return fx_scen_peak(it, &s, micro);
}

/* Accumulation's peak for micro-batch fraction f: the first micro-batch's
 * replay or the later ones', whichever is higher. */
static double accum_peak(const fx_curve *first, const fx_curve *later, double f) {
    double a = fx_curve_peak_exact(first, f), b = fx_curve_peak_exact(later, f);
    return a > b ? a : b;
}

/* The largest micro-batch fraction with which accumulation alone fits in cap
 * (bisection: the peak grows with the fraction), for a batch `batch` times
 * the analysed iteration's; -1 when memory ran out. */
static double micro_fraction(const fx_iter *it, uint64_t cap, double batch, uint64_t *unscaled) {
    fx_scen s = {.r = 1, .grad_temps = 1};
    fx_curve a, b;
    if (fx_curve_build(it, &s, 0, &a)) return -1;
    if (fx_curve_build(it, &s, 1, &b)) {
        fx_curve_free(&a);
        return -1;
    }
    *unscaled = (uint64_t)(accum_peak(&a, &b, 0) + 0.5);
    double ok = 0, bad = 1;
    if (fx_curve_peak_exact(&a, batch) <= (double)cap) ok = 1;
    else if (accum_peak(&a, &b, 0) <= (double)cap)
        for (int i = 0; i < 40; i++) {
            double m = (ok + bad) / 2;
            if (accum_peak(&a, &b, m * batch) <= (double)cap) ok = m;
            else bad = m;
        }
    fx_curve_free(&a);
    fx_curve_free(&b);
    return ok;
}

int ca_fixes_predict(const ca_fix_input *in, ca_fix_report *out) {
    memset(out, 0, sizeof *out);
    out->capacity = in->capacity;
    uint64_t lo = 0, hi = 0;
    int got = pick_iteration(in, &lo, &hi, &out->iteration, &out->peak, &out->peak_position, out->why);
    if (got <= 0) return got;
    size_t n;
    uint64_t fwd;
    fx_life *l = gather(in, lo, hi, &n, &fwd);
    if (!l) goto oom;
    fx_iter it = {l, n, lo, hi, lo};
    out->forward_end = fwd;
    for (size_t i = 0; i < n; i++) /* backward is over when the last activation is freed */
        if (l[i].cls == FX_TR && l[i].birth <= fwd && l[i].death > fwd && l[i].death > it.bwd_end)
            it.bwd_end = l[i].death;

    if (in->n_groups >= 2) {
        out->by_group = calloc(in->n_groups, sizeof *out->by_group);
        if (!out->by_group) goto oom;
        out->n_groups = in->n_groups;
    }
    uint64_t across = 0, carried_in = 0, carried_out = 0, setup = in->bounds[0];
    for (size_t i = 0; i < n; i++) {
        const fx_life *a = &l[i];
        count(&out->total, a, out->peak_position, fwd);
        if (out->by_group && a->group < in->n_groups) count(&out->by_group[a->group], a, out->peak_position, fwd);
        if (a->cls == FX_SPAN && a->birth < setup) across += a->bytes; /* not what later iterations piled up */
        if (a->cls == FX_IN) carried_in += a->bytes;
        if (a->cls == FX_OUT) carried_out += a->bytes;
        if (a->birth <= out->peak_position && a->death > out->peak_position) {
            if (a->scale == FX_SCALED) out->scaled_bytes += a->bytes;
            if (a->scale == FX_AMBIGUOUS) out->ambiguous_bytes += a->bytes;
            if (a->fp32) out->fp32_bytes += a->bytes;
        }
    }
    if (find_roles(in, l, n, lo, &out->roles) < 0) goto oom;
    /* Without the first step's order: weights, gradients and two moments
     * (Adam), a quarter of the state made by the setup and the first step, and
     * of the gradients carried from step to step (freed in the iteration and
     * made again: what a leak keeps is not). */
    out->weight_bytes = out->roles.from_setup ? out->roles.weights
                                              : (across + (carried_in < carried_out ? carried_in : carried_out)) / 4;

    /* checkpointing: the repeated blocks of the forward pass, at each
     * alignment where as many blocks as at best end with an output of their
     * input's size (the first is the prediction, all of them the range) */
    fx_ckpt ck[CA_FIX_ALIGNMENTS];
    size_t n_ck = 0;
    size_t *fw = malloc((n ? n : 1) * sizeof *fw), nfw = 0;
    uint32_t *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!fw || !keys) goto oom_ck;
    for (size_t i = 0; i < n; i++)
        if (l[i].birth >= lo && l[i].birth <= fwd) keys[nfw] = l[i].key, fw[nfw++] = i;
    ca_blocks bk;
    if (in->units_known) {
        if (ckpt_units(in, l, n, fw, nfw, fwd, out, ck, &n_ck) < 0) goto oom_ck;
    } else if (!ca_blocks_find(keys, nfw, 2, &bk)) {
        snprintf(out->checkpoint_why, CA_FIX_WHY,
                 "no repeated blocks in the forward pass (%zu allocations before backward starts)",
                 nfw);
    } else {
        int best = -1;
        out->blocks_by_sizes = !in->keys_are_stacks;
        size_t *from = malloc(2 * bk.count * sizeof *from), *to = from + bk.count;
        if (!from) goto oom_ck;
        for (size_t o = 0; o <= bk.slack; o++) {
            fx_ckpt c;
            uint64_t sb, ib;
            for (size_t j = 0; j < bk.count; j++) from[j] = bk.start + o + j * bk.period, to[j] = from[j] + bk.period;
            int sc = ckpt_align(l, n, fw, from, to, bk.count, fwd, &c, &sb, &ib);
            if (sc < 0) {
                free(from);
                goto oom_ck;
            }
            if (sc > best) {
                while (n_ck) ckpt_free(&ck[--n_ck]);
                best = sc;
                out->block_saved_bytes = sb;
                out->block_input_bytes = ib;
            }
            if (sc == best && n_ck < CA_FIX_ALIGNMENTS) ck[n_ck++] = c;
            else ckpt_free(&c);
        }
        free(from);
        if (out->block_saved_bytes == 0) {
            snprintf(out->checkpoint_why, CA_FIX_WHY,
                     "the %zu repeated blocks of the forward pass save nothing for backward",
                     bk.count);
            while (n_ck) ckpt_free(&ck[--n_ck]);
        } else {
            out->blocks = (unsigned)bk.count;
        }
    }
    free(fw);
    free(keys);
    fw = NULL;
    keys = NULL;

    /* A failing iteration that needed more than the analysed one (shapes
     * vary): its batch-scaled memory taken as that much larger, at least. */
    double batch = 1;
    if (in->needed > out->peak) {
        fx_scen plain = {.r = 1, .grad_temps = 1};
        uint64_t unscaled = fx_scen_peak(&it, &plain, 0);
        out->needed = in->needed;
        if (unscaled < out->peak && unscaled != UINT64_MAX)
            batch = (double)(in->needed - unscaled) / (double)(out->peak - unscaled);
    }
    out->batch_scale = batch;
    for (size_t i = 0; i < sizeof specs / sizeof *specs && out->n_fix < CA_FIX_MAX; i++) {
        const fixspec *f = &specs[i];
        if ((f->kinds & CA_FIX_CHECKPOINT) && !out->blocks) continue;
        ca_fix *x = &out->fix[out->n_fix++];
        x->kinds = f->kinds;
        x->factor = f->factor;
        x->blocks = (f->kinds & CA_FIX_CHECKPOINT) ? out->blocks : 0;
        size_t na = (f->kinds & CA_FIX_CHECKPOINT) ? n_ck : 1;
        for (size_t k = 0; k < na; k++) {
            const fx_ckpt *c = (f->kinds & CA_FIX_CHECKPOINT) ? &ck[k] : NULL;
            uint64_t lw = fix_peak(&it, f, -1, out->weight_bytes, c, out->block_saved_bytes, batch),
                     hg = fix_peak(&it, f, 1, out->weight_bytes, c, out->block_saved_bytes, batch);
            if (k == 0) {
                x->predicted = fix_peak(&it, f, 0, out->weight_bytes, c, out->block_saved_bytes, batch);
                x->low = lw, x->high = hg;
            }
            if (lw < x->low) x->low = lw;
            if (hg > x->high) x->high = hg;
        }
        if (x->low > x->predicted) x->low = x->predicted;
        if (x->high < x->predicted) x->high = x->predicted;
        x->fits = -1;
        if (in->capacity) x->fits = x->high <= in->capacity ? 1 : x->low > in->capacity ? 0 : -1;
        /* blocks of sizes may be timesteps inside one layer, not units: never said to fit */
        if (x->fits == 1 && (f->kinds & CA_FIX_CHECKPOINT) && out->blocks_by_sizes) x->fits = -1;
    }
    if (in->capacity) {
        uint64_t need = out->needed > out->peak ? out->needed : out->peak;
        out->missing = need > in->capacity ? need - in->capacity : 0;
        out->micro_fraction = micro_fraction(&it, in->capacity, batch, &out->unscaled_peak);
    }
    while (n_ck) ckpt_free(&ck[--n_ck]);
    free(l);
    out->have = 1;
    return 0;

oom_ck:
    free(fw);
    free(keys);
    while (n_ck) ckpt_free(&ck[--n_ck]);
oom:
    free(l);
    ca_fix_report_free(out);
    memset(out, 0, sizeof *out);
    snprintf(out->why, CA_FIX_WHY, "out of memory while predicting the fixes");
    return -1;
}

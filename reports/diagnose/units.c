/* Checkpointing's units from Python frames (see units.h). */
#include "reports/diagnose/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/capture/named_frames.h"

typedef struct frame {
    const char *fn, *file;
    unsigned line;
    uintptr_t ip;
} frame;

typedef struct path { /* one allocation's named frames, outermost first */
    frame *f;
    unsigned n;
} path;

static int is_forward(const char *fn) {
    size_t n = strlen(fn);
    return !strcmp(fn, "forward") || (n > 8 && !strcmp(fn + n - 8, ".forward"));
}

static int same_function(const frame *a, const frame *b) { return !strcmp(a->fn, b->fn) && !strcmp(a->file, b->file); }

/* The frames above depth d are the same (the same caller, the same call line). */
static int same_callers(const path *a, const path *b, unsigned d) {
    for (unsigned k = 0; k < d; k++)
        if (a->f[k].ip != b->f[k].ip) return 0;
    return 1;
}

/* Is allocation i in (a call of) the function at depth d of `of`? */
static int under(const path *p, unsigned d, const frame *of) { return p->n > d && same_function(&p->f[d], of); }

/* Where in its function's body allocation p is, at depth d: the line, and
 * the module it calls from there (the first forward below; nn.Sequential
 * calls all its modules from one line, and a loop over modules in a helper
 * calls them all from the helper's one line: only the frame whose modules
 * vary owns the loop), else the innermost frame. */
typedef struct place {
    unsigned line;
    const frame *child;
} place;

static place place_of(const path *p, unsigned d) {
    const frame *child = &p->f[p->n - 1];
    for (unsigned k = d + 1; k < p->n; k++)
        if (is_forward(p->f[k].fn)) {
            child = &p->f[k];
            break;
        }
    return (place){p->f[d].line, child};
}

static int same_place(place a, place b) {
    return a.line == b.line && (is_forward(a.child->fn) ? same_function(a.child, b.child) : a.child->ip == b.child->ip);
}

/* The calls of the function at depth d of path c; call[] from 1 when given.
 * A call starts again where the frames above differ, where something else
 * ran between, where the line goes back, or where the first place of the
 * current call comes again after another. */
static size_t count_calls(const path *p, size_t n, unsigned d, const frame *of, uint32_t *call, uint64_t *bytes,
                          const ca_unit_stack *st) {
    size_t calls = 0, prev = SIZE_MAX;
    place first = {0, NULL};
    int moved = 0; /* the current call has been somewhere else than its first place */
    *bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!under(&p[i], d, of)) {
            if (call) call[i] = 0;
            if (prev != SIZE_MAX && p[i].n) prev = SIZE_MAX - 1; /* something else ran between: a new call next */
            continue;
        }
        place at = place_of(&p[i], d);
        int again = first.child && same_place(at, first);
        int fresh = prev >= SIZE_MAX - 1 || !same_callers(&p[i], &p[prev], d) || at.line < p[prev].f[d].line ||
                    (again && moved);
        if (fresh) calls++, first = at, moved = 0;
        else if (!again) moved = 1;
        prev = i;
        *bytes += st[i].bytes;
        if (call) call[i] = (uint32_t)calls;
    }
    return calls;
}

int ca_frames_autocast_fp32(const uintptr_t *ips, unsigned n) {
    static const char *const ops[] = {"cross_entropy", "nll_loss", "log_softmax", "softmax", "layer_norm",
                                      "group_norm", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                                      "kl_div", "binary_cross_entropy_with_logits", "cosine_similarity"};
    for (unsigned k = 0; k < n; k++) {
        const char *fn, *file, *mod;
        unsigned line;
        if (!ca_named_frame_get(ips[k], &fn, &file, &line, &mod)) continue;
        const char *dot = strrchr(fn, '.');
        for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
            if (!strcmp(dot ? dot + 1 : fn, ops[i])) return 1;
    }
    return 0;
}

static const char *base(const char *file) {
    const char *s = strrchr(file, '/');
    return s ? s + 1 : file;
}

long ca_units_find(const ca_unit_stack *st, size_t n, uint32_t *call, char *name, size_t name_len, char *why,
                   size_t why_len) {
    why[0] = name[0] = '\0';
    path *p = calloc(n ? n : 1, sizeof *p);
    if (!p) return -1;
    size_t named = 0;
    long result = -1;
    for (size_t i = 0; i < n; i++) {
        if (!(p[i].f = malloc((st[i].n ? st[i].n : 1) * sizeof *p[i].f))) goto done;
        for (unsigned k = st[i].n; k-- > 0;) { /* outermost first, named frames only */
            frame *f = &p[i].f[p[i].n];
            const char *mod;
            if (ca_named_frame_get(st[i].ips[k], &f->fn, &f->file, &f->line, &mod)) f->ip = st[i].ips[k], p[i].n++;
        }
        named += p[i].n > 0;
    }
    if (!named) goto done;
    /* Each forward function at each depth, once (a candidate): the outermost
     * called twice or more wins, then the most bytes. */
    typedef struct cand {
        const frame *f;
        unsigned d;
        size_t calls;
        uint64_t bytes;
    } cand;
    size_t nc = 0, cap = 64;
    cand *c = malloc(cap * sizeof *c);
    if (!c) goto done;
    for (size_t i = 0; i < n; i++)
        for (unsigned d = 0; d < p[i].n; d++) {
            const frame *f = &p[i].f[d];
            if (!is_forward(f->fn)) continue;
            size_t k = 0;
            while (k < nc && !(c[k].d == d && same_function(c[k].f, f))) k++;
            if (k < nc) continue;
            if (nc == cap) {
                cand *m = realloc(c, 2 * cap * sizeof *c);
                if (!m) {
                    free(c);
                    goto done;
                }
                c = m, cap *= 2;
            }
            c[nc++] = (cand){f, d, 0, 0};
        }
    unsigned best_d = 0, one_d = 0;
    const frame *best = NULL, *one = NULL;
    uint64_t best_b = 0, one_max = 0;
    size_t best_calls = 0;
    for (size_t k = 0; k < nc; k++) {
        c[k].calls = count_calls(p, n, c[k].d, c[k].f, NULL, &c[k].bytes, st);
        if (c[k].calls == 1 && c[k].bytes > one_max) one_max = c[k].bytes;
    }
    /* the deepest single call holding half the most one call holds: where the repeats are */
    for (size_t k = 0; k < nc; k++) {
        unsigned d = c[k].d;
        if (c[k].calls >= 2 && (!best || d < best_d || (d == best_d && c[k].bytes > best_b)))
            best = c[k].f, best_d = d, best_b = c[k].bytes, best_calls = c[k].calls;
        if (c[k].calls == 1 && 2 * c[k].bytes >= one_max && (!one || d > one_d)) one = c[k].f, one_d = d;
    }
    free(c);
    if (best) {
        uint64_t b;
        count_calls(p, n, best_d, best, call, &b, st);
        snprintf(name, name_len, "%s (%s:%u)", best->fn, base(best->file), best->line);
        result = (long)best_calls;
    } else {
        for (size_t i = 0; i < n; i++) call[i] = 0;
        if (one)
            snprintf(why, why_len, "no module's forward runs twice in the forward pass: its memory is made in one "
                     "call of %s (%s:%u), whose timesteps or loops cannot be checkpointed apart", one->fn,
                     base(one->file), one->line);
        else
            snprintf(why, why_len, "no module's forward (a frame named forward) in the forward pass's frames");
        result = 0;
    }
done:
    for (size_t i = 0; i < n; i++) free(p[i].f);
    free(p);
    return result;
}

/* Iterations: boundaries marked (cudalloc_step(), NVTX) or detected in the
 * allocation pattern, and each call site's history at every boundary (what
 * the leak rule, reports/diagnose/leaks.h, judges). Lock held, except in the
 * public entry points, which take it. */
#include "reports/track/tracker_internal.h"
#include "reports/track/loops.h"

#include <stdlib.h>
#include <string.h>

const char *ca_iter_source_name(ca_iter_source s) {
    static const char *const names[] = {"none", "detected", "nvtx", "explicit"};
    return (unsigned)s < 4 ? names[s] : "none";
}

void ca_site_boundary(ca_site_stat *st, uint64_t c, uint64_t b, uint32_t iter, unsigned warmup) {
    if (!st->seen_boundary) {
        st->prev_count = st->prev_bytes = 0;
        st->max_count = st->max_bytes = 0;
    }
    if (iter >= warmup) {
        if (c < st->prev_count) {
            st->growths = 0; /* something was freed: not a pile-up (so far) */
        } else if (c > st->max_count) {
            if (!st->growths) {
                st->first_growth = iter;
                st->base_count = st->prev_count;
                st->base_bytes = st->prev_bytes;
                st->max_gap = 1;
            } else if (iter - st->last_growth > st->max_gap) {
                st->max_gap = iter - st->last_growth;
            }
            st->growths++;
            st->last_growth = iter;
        }
        if (c && c == st->prev_count && b > st->max_bytes) {
            if (st->byte_streak && st->byte_last + 1 == iter) {
                st->byte_streak++;
            } else {
                st->byte_streak = 1;
                st->byte_first = iter;
                st->byte_base = st->prev_bytes;
            }
            st->byte_last = iter;
        }
    }
    st->prev_count = c;
    st->prev_bytes = b;
    if (c > st->max_count) st->max_count = c;
    if (b > st->max_bytes) st->max_bytes = b;
    st->seen_boundary = 1;
}

static void push_boundary(ca_tracker *t, const ca_boundary *b) {
    if (!GROW(t->bounds, t->cap_bounds, t->n_bounds + 1)) t->bounds[t->n_bounds++] = *b;
}

/* The iteration in progress ends now (before event number t->seq). */
void ca_track_boundary(ca_tracker *t, uint64_t ticks) {
    ca_boundary b = {t->iteration, t->seq, ticks, t->allocated, t->reserved,
                     t->iter_peak_allocated, t->iter_peak_reserved, t->live.n};
    push_boundary(t, &b);
    for (size_t i = 0; i < t->n_dirty; i++) {
        ca_site_stat *st = &t->sites[t->dirty_list[i]];
        ca_site_boundary(st, st->live_count, st->live_bytes, t->iteration, t->opt.warmup);
        t->dirty[t->dirty_list[i]] = 0;
    }
    t->n_dirty = 0;
    t->iteration++;
    t->iter_peak_allocated = t->allocated;
    t->iter_peak_reserved = t->reserved;
}

static void mark_all_dirty(ca_tracker *t) {
    for (uint32_t s = 0; s <= t->max_site && s < t->cap_sites; s++)
        if (!t->dirty[s] && !GROW(t->dirty_list, t->cap_dirty, t->n_dirty + 1)) {
            t->dirty[s] = 1;
            t->dirty_list[t->n_dirty++] = s;
        }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* With a period found: replay the ring from the start, marking the past
 * boundaries as if they had been seen live, then fix the birth iterations of
 * what is live. The ring has not wrapped (detection runs only before). */
static void apply_detection(ca_tracker *t, const uint32_t *syms, size_t n_allocs) {
    size_t nb = ca_period_boundaries(&t->period, syms, n_allocs, NULL, 0);
    size_t *at = nb ? malloc(nb * sizeof *at) : NULL;
    size_t ns = (size_t)t->max_site + 1;
    uint64_t *cnt = calloc(ns, sizeof *cnt), *byt = calloc(ns, sizeof *byt);
    if ((nb && !at) || !cnt || !byt) goto out;
    ca_period_boundaries(&t->period, syms, n_allocs, at, nb);
    uint64_t alloc_now = 0, res = 0, live_n = 0, pk_a = 0, pk_r = 0;
    size_t next_b = 0, ai = 0;
    for (uint64_t q = 0; q < t->seq; q++) {
        const ca_ev *e = &t->ring[q];
        ca_evk k = ca_ev_kind(e);
        if (k == CA_EVK_ALLOC) {
            if (q >= t->detect_from && next_b < nb && at[next_b] == ai) {
                ca_boundary b = {t->iteration, q, e->ticks, alloc_now, res, pk_a, pk_r, live_n};
                push_boundary(t, &b);
                for (uint32_t s = 0; s < ns; s++)
                    if (t->sites[s].allocs || cnt[s]) ca_site_boundary(&t->sites[s], cnt[s], byt[s], t->iteration, t->opt.warmup);
                t->iteration++;
                next_b++;
                pk_a = alloc_now;
                pk_r = res;
            }
            ai += q >= t->detect_from;
            if (e->site < ns) cnt[e->site]++, byt[e->site] += ca_ev_block(e);
            alloc_now += ca_ev_block(e);
            live_n++;
        } else if (k == CA_EVK_FREE) {
            if (e->site < ns) cnt[e->site]--, byt[e->site] -= ca_ev_block(e);
            alloc_now -= ca_ev_block(e);
            live_n--;
        } else if (k == CA_EVK_MAP) {
            res += ca_ev_bytes(e);
        } else if (k == CA_EVK_UNMAP) {
            res -= ca_ev_bytes(e);
        }
        if (alloc_now > pk_a) pk_a = alloc_now;
        if (res > pk_r) pk_r = res;
    }
    t->iter_peak_allocated = pk_a;
    t->iter_peak_reserved = pk_r;
    mark_all_dirty(t);
    /* Birth iterations: boundaries passed before each live allocation. */
    uint64_t *bt = malloc(t->n_bounds * sizeof *bt);
    if (bt) {
        for (size_t i = 0; i < t->n_bounds; i++) bt[i] = t->bounds[i].ticks;
        qsort(bt, t->n_bounds, sizeof *bt, cmp_u64);
        size_t at = 0;
        for (live *l; (l = ca_livetab_next(&t->live, &at));) {
            size_t lo = 0, hi = t->n_bounds;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (bt[mid] <= l->birth_ticks) lo = mid + 1;
                else hi = mid;
            }
            l->birth_iter = (uint32_t)lo;
        }
        for (size_t i = 0; i < t->n_ooms; i++) {
            size_t lo = 0;
            while (lo < t->n_bounds && bt[lo] <= t->ooms[i].ticks) lo++;
            t->ooms[i].iteration = (uint32_t)lo;
        }
        free(bt);
    }
    /* Carry on live: the matcher needs the latest symbols; lifetimes (sites
     * by size) are not known when an allocation is made: count instead. */
    if (ca_tracker_site_mode(t) == CA_SITES_SIZE) {
        ca_period_matcher_init_counting(&t->matcher, &t->period, (uint32_t)(nb ? n_allocs - at[nb - 1] : n_allocs));
        t->pending = 0;
    } else {
        ca_period_matcher_init(&t->matcher, &t->period);
        size_t from = n_allocs > t->period.k ? n_allocs - t->period.k : 0;
        int ends = 0;
        for (size_t i = from; i < n_allocs; i++) ends = ca_period_matcher_push(&t->matcher, syms[i]);
        t->pending = ends == CA_PERIOD_ENDS_AFTER;
    }
    t->detect_state = DETECT_FOUND;
    t->source = CA_ITER_DETECTED;
out:
    free(at);
    free(cnt);
    free(byt);
}

/* Symbols for sites by size: how many allocations later each allocation
 * was freed (a shape-independent trait: sizes follow the batch, lifetimes
 * follow the code); UINT32_MAX when still live. */
static void lifetimes(const ca_tracker *t, uint32_t *syms, size_t n) {
    size_t cap = 64;
    while (cap < 2 * n) cap *= 2;
    uint64_t *key = calloc(cap, sizeof *key);
    uint32_t *idx = calloc(cap, sizeof *idx);
    size_t i = 0;
    for (uint64_t q = t->detect_from; key && idx && q < t->seq; q++) {
        const ca_ev *e = &t->ring[q];
        uint64_t a = e->addr | 1; /* never 0: 0 marks an empty slot */
        size_t h = (size_t)((a >> 9) * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
        if (ca_ev_kind(e) == CA_EVK_ALLOC) {
            while (key[h] && key[h] != a) h = (h + 1) & (cap - 1);
            key[h] = a;
            idx[h] = (uint32_t)i;
            syms[i++] = UINT32_MAX;
        } else if (ca_ev_kind(e) == CA_EVK_FREE) {
            while (key[h] && key[h] != a) h = (h + 1) & (cap - 1);
            if (key[h] == a && idx[h] != UINT32_MAX) {
                syms[idx[h]] = (uint32_t)(i - idx[h]);
                idx[h] = UINT32_MAX; /* freed; the slot stays for reuse of the address */
            }
        }
    }
    free(key);
    free(idx);
}

/* The window detection looks at: per allocation from detect_from on, its
 * symbol (site, or lifetime for sites by size), its site, and the bytes
 * allocated just before and just after it. */
typedef struct window {
    size_t n;
    uint32_t *syms, *sites;
    uint64_t *level, *after;
} window;

static void window_free(window *w) {
    free(w->syms);
    free(w->sites);
    free(w->level);
    free(w->after);
    memset(w, 0, sizeof *w);
}

/* One pass over the ring; the arrays are sized for every event from
 * detect_from on (at most twice what the allocations need, for a moment). */
static int window_build(const ca_tracker *t, window *w) {
    memset(w, 0, sizeof *w);
    size_t cap = t->seq > t->detect_from ? (size_t)(t->seq - t->detect_from) : 1;
    w->syms = malloc(cap * sizeof *w->syms);
    w->sites = malloc(cap * sizeof *w->sites);
    w->level = malloc(cap * sizeof *w->level);
    w->after = malloc(cap * sizeof *w->after);
    if (!w->syms || !w->sites || !w->level || !w->after) {
        window_free(w);
        return -1;
    }
    uint64_t now = 0;
    size_t i = 0;
    for (uint64_t q = 0; q < t->seq; q++) {
        const ca_ev *e = &t->ring[q];
        ca_evk k = ca_ev_kind(e);
        if (k == CA_EVK_ALLOC) {
            uint64_t level = now;
            now += ca_ev_block(e);
            if (q >= t->detect_from) w->syms[i] = w->sites[i] = e->site, w->level[i] = level, w->after[i++] = now;
        } else if (k == CA_EVK_FREE) {
            now -= ca_ev_block(e);
        }
    }
    w->n = i;
    if (ca_tracker_site_mode(t) == CA_SITES_SIZE) lifetimes(t, w->syms, i);
    return 0;
}

/* The judge (track/loops.h) between period detection and the tracker: for
 * iterations it takes loops only; for blocks, only what is not a loop. */
typedef struct judge_ctx {
    ca_loop_input in;
    int blocks;
    ca_loop_shape shape;
    ca_loop_figures fig;
    size_t nb;
} judge_ctx;

static int judge(void *ctx, const ca_period *p, const size_t *at, size_t nb) {
    judge_ctx *j = ctx;
    ca_loop_figures fig;
    ca_loop_shape shape = ca_loop_judge(&j->in, p->period, at, nb, &fig);
    int take = j->blocks ? shape != CA_LOOP_ITERATIONS : shape == CA_LOOP_ITERATIONS;
    if (take) j->shape = shape, j->fig = fig, j->nb = nb;
    return take;
}

static void judge_init(judge_ctx *j, const ca_tracker *t, const window *w, int blocks) {
    memset(j, 0, sizeof *j);
    j->in = (ca_loop_input){.level = w->level, .after = w->after, .n = w->n};
    if (ca_tracker_site_mode(t) == CA_SITES_STACK) j->in.sites = w->sites, j->in.stacks = t->stacks;
    j->blocks = blocks;
}

void ca_track_try_detect(ca_tracker *t) {
    if (t->seq > t->ring_cap || t->seq > t->opt.detect_events) {
        t->detect_state = DETECT_GAVE_UP;
        return;
    }
    if (t->seq * 2 > t->next_try) t->next_try = t->seq * 2;
    window w;
    if (window_build(t, &w) != 0) return;
    judge_ctx j;
    judge_init(&j, t, &w, 0);
    if (ca_period_find_if(w.syms, w.level, w.n, judge, &j, &t->period)) apply_detection(t, w.syms, w.n);
    window_free(&w);
}

int ca_tracker_blocks(ca_tracker *t, ca_blocks *out) {
    memset(out, 0, sizeof *out);
    ca_lock_acquire(&t->lock);
    int found = 0;
    window w;
    if (t->seq <= t->ring_cap && window_build(t, &w) == 0) {
        judge_ctx j;
        ca_period p;
        judge_init(&j, t, &w, 1);
        if (ca_period_find_if(w.syms, w.level, w.n, judge, &j, &p)) {
            found = 1;
            *out = (ca_blocks){.count = (uint32_t)j.nb, .allocations = p.period, .shape = j.shape,
                               .swing = j.fig.swing, .rise = j.fig.rise, .pass = j.fig.pass,
                               .pass_ip = j.fig.pass_ip};
        }
        window_free(&w);
    }
    ca_lock_release(&t->lock);
    return found;
}

void ca_tracker_set_baseline(ca_tracker *t) {
    ca_lock_acquire(&t->lock);
    t->detect_from = t->seq;
    ca_lock_release(&t->lock);
}

void ca_tracker_step(ca_tracker *t, ca_iter_source src) {
    if (src != CA_ITER_EXPLICIT && src != CA_ITER_NVTX) return;
    uint64_t ticks = t->opt.time_is_index ? 0 : ca_ticks();
    ca_lock_acquire(&t->lock);
    if (!ticks) ticks = t->seq + 1;
    t->marks[src]++;
    /* A more trusted source marking the boundary a less trusted one just
     * marked (nothing allocated or freed in between) takes it over: a step
     * marked both ways counts once, from the first step on. */
    int same_point = src > t->source && t->n_bounds && t->bounds[t->n_bounds - 1].seq == t->seq;
    if (src >= t->source) {
        if (t->detect_state == DETECT_TRYING) t->detect_state = DETECT_OFF;
        t->pending = 0;
        t->source = src;
        if (!same_point) ca_track_boundary(t, ticks);
    }
    ca_lock_release(&t->lock);
}

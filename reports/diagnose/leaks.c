/* Leak diagnosis per call site; see leaks.h for the rule and why. */
#include "reports/diagnose/leaks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/capture/frame_kind.h"
#include "reports/capture/named_frames.h"
#include "reports/capture/stacks.h"

int ca_site_leak(const ca_site_stat *st, uint32_t last, ca_leak *out) {
    uint32_t recent = st->max_gap * 2 > 2 ? st->max_gap * 2 : 2;
    int by_count = st->growths >= CA_LEAK_MIN_GROWTHS && last >= st->last_growth &&
                   last - st->last_growth <= recent && st->prev_count > st->base_count;
    int by_bytes = !by_count && st->byte_streak >= CA_LEAK_MIN_BYTE_STREAK && last >= st->byte_last &&
                   last - st->byte_last <= 1 && st->prev_bytes > st->byte_base;
    if (!by_count && !by_bytes) return 0;
    memset(out, 0, sizeof *out);
    uint32_t since = by_count ? st->first_growth : st->byte_first;
    uint64_t base_bytes = by_count ? st->base_bytes : st->byte_base;
    uint64_t base_count = by_count ? st->base_count : st->prev_count;
    double span = (double)(last - since + 1);
    out->site = st->site;
    out->growing_buffer = by_bytes;
    out->growth_since = since;
    out->leaked_bytes = st->prev_bytes > base_bytes ? st->prev_bytes - base_bytes : 0;
    out->bytes_per_iteration = (double)out->leaked_bytes / span;
    out->count_per_iteration = (double)(st->prev_count - base_count) / span;
    out->live_bytes = st->live_bytes;
    out->live_count = st->live_count;
    out->typical_size = by_count ? out->leaked_bytes / (st->prev_count - base_count) : st->prev_bytes;
    out->projected_oom_iteration = -1;
    return 1;
}

int64_t ca_leak_projection(uint32_t last, uint64_t headroom, double rate) {
    if (!(rate > 0)) return -1;
    double its = floor((double)headroom / rate);
    if (its > 1e15) return -1;
    return (int64_t)last + 2 + (int64_t)its;
}

uint64_t ca_leak_headroom(const ca_track_snap *s, uint64_t free_and_cached) {
    uint64_t work = 0;
    size_t from = s->n_bounds > 9 ? s->n_bounds - 9 : 0;
    for (size_t i = from + 1; i < s->n_bounds; i++) {
        uint64_t start = s->bounds[i - 1].allocated, peak = s->bounds[i].peak_allocated;
        if (peak > start && peak - start > work) work = peak - start;
    }
    return free_and_cached > work ? free_and_cached - work : 0;
}

static int by_rate(const void *a, const void *b) {
    const ca_leak *x = a, *y = b;
    if (x->bytes_per_iteration != y->bytes_per_iteration)
        return x->bytes_per_iteration < y->bytes_per_iteration ? 1 : -1;
    return x->site < y->site ? -1 : x->site > y->site;
}

size_t ca_leaks_find(const ca_track_snap *s, int have_headroom, uint64_t headroom, ca_leak **out) {
    *out = NULL;
    if (!s->iteration || !s->n_sites) return 0;
    uint32_t last = s->iteration - 1;
    ca_leak *l = malloc(s->n_sites * sizeof *l);
    if (!l) return 0;
    size_t n = 0;
    for (size_t i = 0; i < s->n_sites; i++)
        if (ca_site_leak(&s->sites[i], last, &l[n])) n++;
    if (!n) {
        free(l);
        return 0;
    }
    /* The oldest live allocation of each leaking site. */
    uint32_t max_site = 0;
    for (size_t i = 0; i < n; i++)
        if (l[i].site > max_site) max_site = l[i].site;
    uint32_t *oldest = malloc(((size_t)max_site + 1) * sizeof *oldest);
    if (oldest) {
        memset(oldest, 0xff, ((size_t)max_site + 1) * sizeof *oldest);
        for (size_t i = 0; i < s->n_live; i++) {
            const ca_live_view *v = &s->live[i];
            if (v->site <= max_site && v->birth_iteration < oldest[v->site]) oldest[v->site] = v->birth_iteration;
        }
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t o = oldest ? oldest[l[i].site] : UINT32_MAX;
        l[i].first_iteration = o != UINT32_MAX ? o : l[i].growth_since;
        l[i].projected_oom_iteration = have_headroom ? ca_leak_projection(last, headroom, l[i].bytes_per_iteration) : -1;
    }
    free(oldest);
    qsort(l, n, sizeof *l, by_rate);
    *out = l;
    return n;
}

#define SMALL_TENSOR 4096 /* a scalar loss or metric rounds to 512 B */
#define MIB (1024.0 * 1024.0)

static const char ADVICE_BUFFER[] =
    "One allocation from this site is made again, larger, every iteration while the old one is "
    "freed: a tensor kept across iterations that grows (e.g. torch.cat onto an accumulator, a "
    "history kept as one tensor). Preallocate it, bound it, or keep the values on the host "
    "(.item(), .cpu()).";
static const char ADVICE_GRAPH[] =
    "Several call sites keep allocations every iteration, together, by the amounts a forward pass "
    "allocates: the activations of a forward pass are being kept alive. That is what keeping the "
    "result of a pass run with autograd on does: e.g. a validation loss computed without "
    "torch.no_grad() and stored (in a list, or summed into a tensor) holds its whole graph and "
    "every activation saved for backward. Run evaluation under torch.no_grad() (or "
    "torch.inference_mode()) and keep loss.item().";
static const char ADVICE_SCALARS[] =
    "Small tensors (a few hundred bytes each: scalars) are kept, one or a few per iteration: a loss "
    "or metric stored as a tensor (a list of losses, a dict of metrics). Keep loss.item() or "
    "loss.detach() instead. Note that 'running_loss += loss' after loss.backward() does not grow "
    "device memory (backward has freed the saved tensors; only graph nodes on the host remain), so "
    "this growth comes from tensors that are kept, not from that line.";
static const char ADVICE_KEPT[] =
    "Allocations from this site outlive their iteration and nothing frees them: a tensor made every "
    "iteration stays referenced (a list, dict or cache that only grows, an attribute that keeps a "
    "history). Drop the reference, bound the cache, or keep only .item() / .detach().cpu() of what "
    "you need.";

static const char ADVICE_HANDOFF[] =
    "These call sites hold more at each iteration boundary, but others hold less by about as much: the "
    "memory kept across boundaries is not growing. That is memory handed from one place to another (a "
    "buffer made by one line and kept by the next, state moving between steps), not a leak. Nothing to "
    "do unless the total kept grows.";

/* Sites that started growing within an iteration of `l`: parts of one
 * pile-up (the per-site advice's test). */
static size_t lockstep(const ca_leak *leaks, size_t n, const ca_leak *l) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const ca_leak *o = &leaks[i];
        if (o->growing_buffer) continue;
        uint32_t d = o->growth_since > l->growth_since ? o->growth_since - l->growth_since
                                                        : l->growth_since - o->growth_since;
        if (d <= 1) k++;
    }
    return k;
}

const char *ca_leak_advice(const ca_leak *leaks, size_t n, size_t which) {
    if (which >= n) return "";
    const ca_leak *l = &leaks[which];
    if (l->growing_buffer) return ADVICE_BUFFER;
    double together = 0;
    for (size_t i = 0; i < n; i++)
        if (!leaks[i].growing_buffer) together += leaks[i].bytes_per_iteration;
    if (lockstep(leaks, n, l) >= 3 && together >= MIB) return ADVICE_GRAPH;
    if (l->typical_size <= SMALL_TENSOR) return ADVICE_SCALARS;
    return ADVICE_KEPT;
}

/* ---- findings ---- */

uint64_t ca_leak_working_set(const ca_track_snap *s) {
    uint64_t min_start = UINT64_MAX, best = 0;
    for (size_t i = 0; i < s->n_bounds; i++) {
        uint64_t start = i ? s->bounds[i - 1].allocated : 0;
        if (s->bounds[i].iteration >= s->warmup && start < min_start) min_start = start;
    }
    if (min_start == UINT64_MAX) return s->peak_allocated;
    for (size_t i = 0; i < s->n_bounds; i++) {
        if (s->bounds[i].iteration < s->warmup) continue;
        uint64_t start = i ? s->bounds[i - 1].allocated : 0, pile = start - min_start;
        uint64_t peak = s->bounds[i].peak_allocated, w = peak > pile ? peak - pile : 0;
        if (w > best) best = w;
    }
    return best;
}

static size_t uf_find(size_t *parent, size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

static void uf_join(size_t *parent, size_t a, size_t b) {
    a = uf_find(parent, a);
    b = uf_find(parent, b);
    if (a != b) parent[a > b ? a : b] = a < b ? a : b;
}

static int cogrow(const ca_leak *a, const ca_leak *b) {
    uint32_t d = a->growth_since > b->growth_since ? a->growth_since - b->growth_since : b->growth_since - a->growth_since;
    return d <= 1;
}

static int cmp_uptr(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* (frame, leaking site) pairs, sorted by frame then growth start. */
typedef struct {
    size_t ip;     /* index in the sorted frame set */
    uint32_t since;
    size_t leak;
} pair;

static int cmp_pair(const void *a, const void *b) {
    const pair *x = a, *y = b;
    if (x->ip != y->ip) return x->ip < y->ip ? -1 : 1;
    if (x->since != y->since) return x->since < y->since ? -1 : 1;
    return x->leak < y->leak ? -1 : x->leak > y->leak;
}

static size_t ip_index(const uintptr_t *set, size_t n, uintptr_t ip) {
    const uintptr_t *p = bsearch(&ip, set, n, sizeof *set, cmp_uptr);
    return p ? (size_t)(p - set) : SIZE_MAX;
}

/* Joins co-growing count-kind sites that share a frame under which at
 * least CA_FINDING_RETENTION of the allocations are kept. -1 out of memory. */
static int join_by_frames(const ca_track_snap *s, const ca_leak *leaks, size_t n, size_t *parent) {
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        const uintptr_t *ips;
        if (!leaks[i].growing_buffer) cap += ca_stacks_get(s->stacks, leaks[i].site, &ips);
    }
    if (!cap) return 0;
    uintptr_t *set = malloc(cap * sizeof *set);
    pair *pairs = malloc(cap * sizeof *pairs);
    double *kept = calloc(cap, sizeof *kept), *made = calloc(cap, sizeof *made);
    size_t *stamp = calloc(cap, sizeof *stamp);
    int rc = -1;
    if (!set || !pairs || !kept || !made || !stamp) goto out;
    size_t n_set = 0;
    for (size_t i = 0; i < n; i++) {
        const uintptr_t *ips;
        unsigned k = leaks[i].growing_buffer ? 0 : ca_stacks_get(s->stacks, leaks[i].site, &ips);
        for (unsigned f = 0; f < k; f++) set[n_set++] = ips[f];
    }
    qsort(set, n_set, sizeof *set, cmp_uptr);
    size_t u = 0;
    for (size_t i = 0; i < n_set; i++)
        if (!u || set[u - 1] != set[i]) set[u++] = set[i];
    n_set = u;
    /* What goes through each frame per iteration: made by every site, kept
     * by the leaking ones. A frame counts once per stack (recursion). */
    double iters = s->iteration ? (double)s->iteration : 1;
    for (size_t i = 0; i < s->n_sites; i++) {
        const uintptr_t *ips;
        unsigned k = ca_stacks_get(s->stacks, s->sites[i].site, &ips);
        for (unsigned f = 0; f < k; f++) {
            size_t x = ip_index(set, n_set, ips[f]);
            if (x == SIZE_MAX || stamp[x] == i + 1) continue;
            stamp[x] = i + 1;
            made[x] += (double)s->sites[i].allocs / iters;
        }
    }
    size_t n_pairs = 0;
    memset(stamp, 0, cap * sizeof *stamp);
    for (size_t i = 0; i < n; i++) {
        const uintptr_t *ips;
        unsigned k = leaks[i].growing_buffer ? 0 : ca_stacks_get(s->stacks, leaks[i].site, &ips);
        for (unsigned f = 0; f < k; f++) {
            size_t x = ip_index(set, n_set, ips[f]);
            if (stamp[x] == i + 1) continue;
            stamp[x] = i + 1;
            kept[x] += leaks[i].count_per_iteration;
            pairs[n_pairs++] = (pair){x, leaks[i].growth_since, i};
        }
    }
    qsort(pairs, n_pairs, sizeof *pairs, cmp_pair);
    for (size_t i = 1; i < n_pairs; i++) {
        size_t x = pairs[i].ip;
        if (pairs[i - 1].ip != x || !(made[x] > 0) || kept[x] < CA_FINDING_RETENTION * made[x]) continue;
        if (cogrow(&leaks[pairs[i - 1].leak], &leaks[pairs[i].leak])) uf_join(parent, pairs[i - 1].leak, pairs[i].leak);
    }
    rc = 0;
out:
    free(set);
    free(pairs);
    free(kept);
    free(made);
    free(stamp);
    return rc;
}

static int has_ip(const uintptr_t *ips, unsigned n, uintptr_t ip) {
    for (unsigned i = 0; i < n; i++)
        if (ips[i] == ip) return 1;
    return 0;
}

/* The deepest frame that sites holding CA_FINDING_ROOT_SHARE of the bytes
 * share (see leaks.h); 0 when none. When the stacks have named frames
 * (Python, a snapshot's), the deepest one of the program's own code in that
 * run of shared frames: not PyTorch's module call (_call_impl) under it. */
static uintptr_t find_root(const ca_track_snap *s, const ca_leak *m, size_t n, double total) {
    const uintptr_t *ips;
    unsigned k = ca_stacks_get(s->stacks, m[0].site, &ips);
    uintptr_t root = 0, own = 0;
    int named = 0;
    for (unsigned f = 0; f < k; f++) named |= ca_ip_is_named(ips[f]);
    for (unsigned f = k; f-- > 0;) {
        double share = 0;
        for (size_t i = 0; i < n; i++) {
            const uintptr_t *o;
            unsigned ko = ca_stacks_get(s->stacks, m[i].site, &o);
            if (has_ip(o, ko, ips[f])) share += m[i].bytes_per_iteration;
        }
        if (share >= CA_FINDING_ROOT_SHARE * total) {
            root = ips[f];
            if (named && ca_ip_is_named(ips[f]) && ca_ip_kind(ips[f]) == CA_FRAME_PROGRAM) own = ips[f];
        } else if (root) {
            break;
        }
    }
    return own ? own : root;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bytes let go by the sites whose live count at the last boundary is below
 * their highest at a boundary. */
static double shrunk(const ca_track_snap *s) {
    double b = 0;
    for (size_t i = 0; i < s->n_sites; i++) {
        const ca_site_stat *st = &s->sites[i];
        if (st->seen_boundary && st->prev_count < st->max_count && st->max_bytes > st->prev_bytes)
            b += (double)(st->max_bytes - st->prev_bytes);
    }
    return b;
}

/* A hand-off: other sites let go of (by count) at least half of what the
 * finding's sites piled up, and the memory kept across boundaries (every
 * site's) grew, at the median boundary since the finding's growth began, by
 * less than half of the finding's rate. The median lets a one-time jump
 * (optimizer state made at the first step) pass. */
static int handoff(const ca_track_snap *s, const ca_finding *f, double let_go) {
    if (2 * let_go < (double)f->leaked_bytes) return 0;
    double *d = s->n_bounds ? malloc(s->n_bounds * sizeof *d) : NULL;
    size_t n = 0;
    if (!d) return 0;
    for (size_t i = 1; i < s->n_bounds; i++)
        if (s->bounds[i].iteration >= f->growth_since)
            d[n++] = (double)s->bounds[i].allocated - (double)s->bounds[i - 1].allocated;
    int yes = 0;
    if (n) {
        qsort(d, n, sizeof *d, cmp_double);
        yes = 2 * d[n / 2] < f->bytes_per_iteration;
    }
    free(d);
    return yes;
}

static int by_finding(const void *a, const void *b) {
    const ca_finding *x = a, *y = b;
    if (x->note != y->note) return x->note - y->note;
    if (x->bytes_per_iteration != y->bytes_per_iteration) return x->bytes_per_iteration < y->bytes_per_iteration ? 1 : -1;
    return x->first < y->first ? -1 : x->first > y->first;
}

size_t ca_findings_find(const ca_track_snap *s, ca_leak *leaks, size_t n, int have_headroom, uint64_t headroom,
                        ca_finding **out, size_t *n_leak_sites) {
    *out = NULL;
    *n_leak_sites = 0;
    if (!n) return 0;
    size_t *parent = malloc(n * sizeof *parent);
    ca_finding *fs = calloc(n, sizeof *fs);
    ca_leak *sorted = malloc(n * sizeof *sorted);
    size_t nf = 0;
    if (!parent || !fs || !sorted) goto fail;
    for (size_t i = 0; i < n; i++) parent[i] = i;
    qsort(leaks, n, sizeof *leaks, by_rate);
    if (s->site_mode == CA_SITES_STACK && s->stacks) {
        if (join_by_frames(s, leaks, n, parent) != 0) goto fail;
    } else {
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (!leaks[i].growing_buffer && !leaks[j].growing_buffer && cogrow(&leaks[i], &leaks[j]))
                    uf_join(parent, i, j);
    }
    /* Each group's sites, contiguous, most bytes first (leaks is sorted). */
    size_t m = 0;
    for (size_t g = 0; g < n; g++) {
        if (uf_find(parent, g) != g) continue;
        ca_finding *f = &fs[nf++];
        f->first = m;
        for (size_t i = g; i < n; i++)
            if (uf_find(parent, i) == g) sorted[m++] = leaks[i];
        f->n_sites = m - f->first;
    }
    uint64_t work = ca_leak_working_set(s);
    uint32_t last = s->iteration ? s->iteration - 1 : 0;
    double let_go = shrunk(s);
    for (size_t k = 0; k < nf; k++) {
        ca_finding *f = &fs[k];
        const ca_leak *ms = &sorted[f->first];
        int scalars = 1;
        f->growth_since = f->first_iteration = UINT32_MAX;
        for (size_t i = 0; i < f->n_sites; i++) {
            f->bytes_per_iteration += ms[i].bytes_per_iteration;
            f->count_per_iteration += ms[i].count_per_iteration;
            f->live_bytes += ms[i].live_bytes;
            f->live_count += ms[i].live_count;
            f->leaked_bytes += ms[i].leaked_bytes;
            if (ms[i].growth_since < f->growth_since) f->growth_since = ms[i].growth_since;
            if (ms[i].first_iteration < f->first_iteration) f->first_iteration = ms[i].first_iteration;
            if (ms[i].typical_size > SMALL_TENSOR) scalars = 0;
        }
        f->kind = ms[0].growing_buffer ? CA_FINDING_BUFFER : f->n_sites > 1 ? CA_FINDING_TOGETHER : CA_FINDING_SITE;
        f->retained_graph = f->kind == CA_FINDING_TOGETHER && f->n_sites >= 3 && !scalars;
        f->advice = f->kind == CA_FINDING_BUFFER ? ADVICE_BUFFER
                    : scalars                    ? ADVICE_SCALARS
                    : f->retained_graph          ? ADVICE_GRAPH
                                                 : ADVICE_KEPT;
        if (f->n_sites > 1 && s->site_mode == CA_SITES_STACK && s->stacks) {
            f->root_ip = find_root(s, ms, f->n_sites, f->bytes_per_iteration);
            f->has_root = f->root_ip != 0;
        }
        double rate = f->bytes_per_iteration;
        f->working_set_share = work ? rate / (double)work : 1;
        f->projected_oom_iteration = have_headroom ? ca_leak_projection(last, headroom, rate) : -1;
        f->iterations_to_fill = have_headroom && rate > 0 ? (double)headroom / rate : -1;
        f->note = rate * CA_NOTE_WORKING_SETS <= (double)work &&
                  (!have_headroom || f->iterations_to_fill >= CA_NOTE_DEVICE_ITERATIONS);
        if (f->kind != CA_FINDING_BUFFER && handoff(s, f, let_go)) {
            f->handoff = 1;
            f->note = 1;
            f->advice = ADVICE_HANDOFF;
        }
    }
    qsort(fs, nf, sizeof *fs, by_finding);
    /* leaks in finding order. */
    m = 0;
    for (size_t k = 0; k < nf; k++) {
        memcpy(&leaks[m], &sorted[fs[k].first], fs[k].n_sites * sizeof *leaks);
        fs[k].first = m;
        m += fs[k].n_sites;
        if (!fs[k].note) *n_leak_sites = m;
    }
    free(parent);
    free(sorted);
    *out = fs;
    return nf;
fail:
    free(parent);
    free(fs);
    free(sorted);
    return 0;
}

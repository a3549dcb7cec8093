/* Leak diagnosis per call site; see leaks.h for the rule and why. */
#include "reports/leaks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Sites that started growing within an iteration of `l` and grow by the same
 * number of allocations per iteration: parts of one pile-up. */
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

#define SMALL_TENSOR 4096 /* a scalar loss or metric rounds to 512 B */
#define KIB 1024.0
#define MIB (1024.0 * 1024.0)

const char *ca_leak_advice(const ca_leak *leaks, size_t n, size_t which) {
    if (which >= n) return "";
    const ca_leak *l = &leaks[which];
    if (l->growing_buffer)
        return "One allocation from this site is made again, larger, every iteration while the old one is "
               "freed: a tensor kept across iterations that grows (e.g. torch.cat onto an accumulator, a "
               "history kept as one tensor). Preallocate it, bound it, or keep the values on the host "
               "(.item(), .cpu()).";
    double together = 0;
    for (size_t i = 0; i < n; i++)
        if (!leaks[i].growing_buffer) together += leaks[i].bytes_per_iteration;
    if (lockstep(leaks, n, l) >= 3 && together >= MIB)
        return "Several call sites keep allocations every iteration, together, by the amounts a forward pass "
               "allocates: the activations of a forward pass are being kept alive. That is what keeping the "
               "result of a pass run with autograd on does: e.g. a validation loss computed without "
               "torch.no_grad() and stored (in a list, or summed into a tensor) holds its whole graph and "
               "every activation saved for backward. Run evaluation under torch.no_grad() (or "
               "torch.inference_mode()) and keep loss.item().";
    if (l->typical_size <= SMALL_TENSOR)
        return "Small tensors (a few hundred bytes each: scalars) from this site are kept, one or a few per "
               "iteration: a loss or metric stored as a tensor (a list of losses, a dict of metrics). Keep "
               "loss.item() or loss.detach() instead. Note that 'running_loss += loss' after loss.backward() "
               "does not grow device memory (backward has freed the saved tensors; only graph nodes on the "
               "host remain), so this growth comes from tensors that are kept, not from that line.";
    return "Allocations from this site outlive their iteration and nothing frees them: a tensor made every "
           "iteration stays referenced (a list, dict or cache that only grows, an attribute that keeps a "
           "history). Drop the reference, bound the cache, or keep only .item() / .detach().cpu() of what "
           "you need.";
}

/* Judging a repeating pattern: a training loop, or blocks repeated inside
 * one pass; see loops.h. */
#include "reports/track/loops.h"

#include <stdlib.h>
#include <string.h>

#include "reports/capture/named_frames.h"

const char *ca_loop_shape_name(ca_loop_shape s) {
    static const char *const names[] = {"iterations", "climbs", "falls", "small", "inside_pass"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "iterations";
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The largest peak outside [lo, hi) above the level of the boundary before
 * it (before the first boundary: above the first boundary's level). */
static uint64_t outside_swing(const ca_loop_input *in, const size_t *at, size_t nb, size_t lo, size_t hi) {
    uint64_t big = 0, ref = in->level[at[0]];
    size_t b = 0;
    for (size_t k = 0; k < in->n; k++) {
        while (b < nb && at[b] <= k) ref = in->level[at[b++]];
        if (k >= lo && k < hi) continue;
        if (in->after[k] > ref && in->after[k] - ref > big) big = in->after[k] - ref;
    }
    return big;
}

/* The frame at depth j from the outermost of allocation i's stack; 0 when
 * the stack is not that deep. */
static uintptr_t frame_at(const ca_loop_input *in, size_t i, unsigned j) {
    const uintptr_t *ips;
    unsigned nf = ca_stacks_get(in->stacks, in->sites[i], &ips);
    return j < nf ? ips[nf - 1 - j] : 0;
}

/* Do at least 90% of the allocations in [lo, hi) have frames? A site made
 * of one named frame is a snapshot's allocation recorded without any (its
 * size names it). */
static int framed(const ca_loop_input *in, size_t lo, size_t hi) {
    size_t with = 0;
    for (size_t i = lo; i < hi; i++) {
        const uintptr_t *ips;
        unsigned nf = ca_stacks_get(in->stacks, in->sites[i], &ips);
        with += nf >= 2 || (nf == 1 && !ca_ip_is_named(ips[0]));
    }
    return with * 10 >= (hi - lo) * 9;
}

/* The pass that at least 90% of the allocations in [lo, hi) run inside: the
 * frames they share, from the outermost in, include its call. */
static ca_pass_kind inside_pass(const ca_loop_input *in, size_t lo, size_t hi, uintptr_t *ip) {
    size_t total = hi - lo;
    uint8_t *alive = malloc(total ? total : 1);
    ca_pass_kind found = CA_PASS_NONE;
    if (!alive) return CA_PASS_NONE;
    memset(alive, 1, total);
    for (unsigned j = 0; j < CA_STACK_MAX_FRAMES && found == CA_PASS_NONE; j++) {
        uintptr_t cand = 0;
        size_t votes = 0, count = 0;
        for (size_t i = lo; i < hi; i++) { /* the majority frame (Boyer and Moore's vote) */
            uintptr_t f = alive[i - lo] ? frame_at(in, i, j) : 0;
            if (!f) continue;
            if (!votes) cand = f, votes = 1;
            else if (f == cand) votes++;
            else votes--;
        }
        for (size_t i = lo; i < hi; i++) {
            int same = alive[i - lo] && cand && frame_at(in, i, j) == cand;
            alive[i - lo] = (uint8_t)same;
            count += same;
        }
        if (!cand || count * 10 < total * 9) break; /* the periods' stacks part here */
        if ((found = ca_ip_pass(cand)) != CA_PASS_NONE) *ip = cand;
    }
    free(alive);
    return found;
}

ca_loop_shape ca_loop_judge(const ca_loop_input *in, uint32_t period, const size_t *at, size_t nb,
                            ca_loop_figures *fig) {
    ca_loop_figures f;
    memset(&f, 0, sizeof f);
    if (nb < 2 || !in->n || at[nb - 1] >= in->n) {
        if (fig) *fig = f;
        return CA_LOOP_ITERATIONS; /* nothing to judge by */
    }
    size_t m = nb - 1;
    uint64_t *swings = malloc(m * sizeof *swings);
    int64_t *rises = malloc(m * sizeof *rises);
    if (!swings || !rises) {
        free(swings);
        free(rises);
        if (fig) *fig = f;
        return CA_LOOP_ITERATIONS;
    }
    for (size_t j = 0; j < m; j++) {
        uint64_t start = in->level[at[j]], end = in->level[at[j + 1]], peak = start;
        for (size_t k = at[j]; k < at[j + 1]; k++)
            if (in->after[k] > peak) peak = in->after[k];
        uint64_t up = peak - start;
        swings[j] = up;
        rises[j] = (int64_t)(end - start);
        if (end > start && 2 * (end - start) > up) f.climbing++;
        if (start > end && 2 * (start - end) > up) f.falling++;
    }
    f.periods = (uint32_t)m;
    qsort(swings, m, sizeof *swings, cmp_u64);
    qsort(rises, m, sizeof *rises, cmp_i64);
    f.swing = swings[m / 2];
    f.rise = rises[m / 2];
    free(swings);
    free(rises);
    /* The periods and the partial ones on either side. */
    size_t lo = at[0] > period ? at[0] - period : 0;
    size_t hi = at[nb - 1] + period < in->n ? at[nb - 1] + period : in->n;
    f.outside_swing = outside_swing(in, at, nb, lo, hi);
    if (in->sites && in->stacks && framed(in, lo, hi)) {
        f.framed = 1;
        f.pass = inside_pass(in, lo, hi, &f.pass_ip);
    }
    if (fig) *fig = f;
    if (!f.framed && 2 * (size_t)f.climbing > m) return CA_LOOP_CLIMBS;
    if (2 * (size_t)f.falling > m) return CA_LOOP_FALLS;
    if (f.pass != CA_PASS_NONE) return CA_LOOP_INSIDE_PASS;
    if ((double)f.swing < CA_LOOP_MIN_SWING_SHARE * (double)f.outside_swing) return CA_LOOP_SMALL;
    return CA_LOOP_ITERATIONS;
}

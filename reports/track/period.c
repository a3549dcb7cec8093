/* Period detection; see period.h. Runs rarely (a few times per process, on
 * growing windows), so it favours plain code over clever code. */
#include "reports/track/period.h"

#include <stdlib.h>
#include <string.h>

#define MAX_CANDIDATES 32

/* Open-addressing map from a 32-bit key to a 32-bit value; key 0 is stored
 * as UINT32_MAX's neighbour trick is avoided by keeping keys + 1. */
typedef struct u32map {
    uint32_t *key, *val;
    size_t mask;
} u32map;

static int map_init(u32map *m, size_t n) {
    size_t cap = 64;
    while (cap < 2 * n) cap *= 2;
    m->key = calloc(cap, sizeof *m->key);
    m->val = calloc(cap, sizeof *m->val);
    m->mask = cap - 1;
    return m->key && m->val ? 0 : -1;
}
static void map_free(u32map *m) {
    free(m->key);
    free(m->val);
}
/* The value slot of key (inserted as 0 if absent). */
static uint32_t *map_at(u32map *m, uint32_t key) {
    uint32_t k = key + 1; /* 0 marks an empty slot */
    size_t i = (k * 2654435761u) & m->mask;
    while (m->key[i] && m->key[i] != k) i = (i + 1) & m->mask;
    if (!m->key[i]) m->key[i] = k;
    return &m->val[i];
}

/* How much of the recent window repeats with period p: the last half of the
 * window, and at least the last two periods. */
static double score(const uint32_t *s, size_t n, uint32_t p) {
    size_t span = n / 2 > 2 * (size_t)p ? n / 2 : 2 * (size_t)p, match = 0;
    for (size_t k = n - span; k < n; k++) match += s[k] == s[k - p];
    return (double)match / (double)span;
}

/* Candidate periods: the most frequent distances between two occurrences
 * of the same symbol. Distances run from 2 to n/3, so their counts are an
 * array; so are the symbols' last places when the symbols are small numbers
 * (call-site ids), else a map. */
static size_t candidates(const uint32_t *s, size_t n, uint32_t *cand) {
    uint32_t top = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] > top) top = s[i];
    int dense = top <= 4 * (uint64_t)n;
    u32map last = {0};
    uint32_t *at = dense ? calloc((size_t)top + 1, sizeof *at) : NULL;
    uint32_t *gaps = calloc(n / 3 + 1, sizeof *gaps);
    size_t nc = 0;
    if (!gaps || (dense ? !at : map_init(&last, n) != 0)) goto out;
    for (size_t i = 0; i < n; i++) {
        uint32_t *l = dense ? &at[s[i]] : map_at(&last, s[i]);
        if (*l) {
            uint32_t gap = (uint32_t)(i + 1 - *l);
            if (gap >= 2 && 3 * (size_t)gap <= n) gaps[gap]++;
        }
        *l = (uint32_t)(i + 1);
    }
    /* The MAX_CANDIDATES gaps seen most often (ties: the smaller gap). */
    uint32_t cnt[MAX_CANDIDATES];
    for (uint32_t g = 2; g <= n / 3; g++) {
        uint32_t c = gaps[g];
        if (!c) continue;
        size_t pos = nc;
        while (pos > 0 && (cnt[pos - 1] < c || (cnt[pos - 1] == c && cand[pos - 1] > g))) pos--;
        if (pos >= MAX_CANDIDATES) continue;
        size_t end = nc < MAX_CANDIDATES ? nc : MAX_CANDIDATES - 1;
        memmove(cand + pos + 1, cand + pos, (end - pos) * sizeof *cand);
        memmove(cnt + pos + 1, cnt + pos, (end - pos) * sizeof *cnt);
        cand[pos] = g;
        cnt[pos] = c;
        if (nc < MAX_CANDIDATES) nc++;
    }
out:
    map_free(&last);
    free(at);
    free(gaps);
    return nc;
}

/* Do the k symbols ending just before position x occur, over the last three
 * periods, exactly once per period: at every position congruent to x modulo
 * p and nowhere else? */
static int unique_anchor(const uint32_t *s, size_t n, uint32_t p, size_t x, unsigned k) {
    size_t lo = n - 3 * (size_t)p;
    if (lo < k) lo = k;
    size_t hits = 0, expected = 0;
    for (size_t e = lo; e <= n; e++) {
        int on_phase = (e > x ? e - x : x - e) % p == 0;
        expected += on_phase;
        if (memcmp(s + e - k, s + x - k, k * sizeof *s)) continue;
        if (!on_phase) return 0;
        hits++;
    }
    return hits == expected;
}

/* A stretch of identical layers repeats too, within one iteration: the
 * level at its "boundaries" climbs through the forward pass and falls through
 * the backward. A loop's boundary level stays flat (or climbs, with a leak):
 * refuse a period whose boundary level both rises and falls by more than half
 * of what an iteration allocates above its start. */
static size_t boundaries(const ca_period *p, const uint32_t *s, size_t n, size_t *out, size_t max);
static int mountain(const ca_period *p, const uint32_t *s, const uint64_t *level, size_t n) {
    size_t nb = boundaries(p, s, n, NULL, 0);
    if (nb < 3) return 0;
    size_t *at = malloc(nb * sizeof *at);
    if (!at) return 0;
    boundaries(p, s, n, at, nb);
    uint64_t first = level[at[0]], last = level[at[nb - 1]], top = 0;
    double transient = 0;
    for (size_t i = 0; i < nb; i++) {
        if (level[at[i]] > top) top = level[at[i]];
        if (i + 1 < nb) {
            uint64_t peak = level[at[i]];
            for (size_t k = at[i]; k < at[i + 1]; k++)
                if (level[k] > peak) peak = level[k];
            transient += (double)(peak - level[at[i]]);
        }
    }
    free(at);
    transient /= (double)(nb - 1);
    return (double)(top - first) > transient / 2 && (double)(top - last) > transient / 2;
}

/* The phase and anchor of period p: in each of the last periods (aligned
 * to the window's end), the position of the lowest level; the most frequent
 * such position wins, then the others by how often they were lowest. 1 and
 * *out when an anchor is found. */
static int place(const uint32_t *s, const uint64_t *level, size_t n, uint32_t p, double ps, ca_period *out) {
    size_t periods = n / p;
    if (periods > 16) periods = 16;
    uint32_t *votes = calloc(p, sizeof *votes);
    if (!votes) return 0;
    for (size_t r = 0; r < periods; r++) {
        size_t start = n - (r + 1) * (size_t)p, best_j = 0;
        for (size_t j = 1; j < p; j++)
            if (level[start + j] < level[start + best_j]) best_j = j;
        votes[best_j]++;
    }
    int found = 0;
    for (int tries = 0; tries < 8 && !found; tries++) {
        size_t j = 0;
        for (size_t i = 1; i < p; i++)
            if (votes[i] > votes[j]) j = i;
        if (tries && !votes[j]) break;
        votes[j] = 0;
        /* The position in the last full period: x = n - p + j. Anchors ending
         * just before x first (exact online), then anchors starting at x. */
        size_t x = n - p + j;
        for (int starts = 0; starts < 2 && !found; starts++)
            for (unsigned k = 1; k <= CA_PERIOD_MAX_ANCHOR && k <= p && !found; k++) {
                size_t end = starts ? x + k : x; /* the run is s[end-k, end) */
                if (end > n || end < k || !unique_anchor(s, n, p, end, k)) continue;
                out->period = p;
                out->score = ps;
                out->k = k;
                out->starts = starts;
                memcpy(out->anchor, s + end - k, k * sizeof *s);
                found = 1;
            }
    }
    free(votes);
    return found;
}

/* The caller's judgement of a placed candidate (NULL: none). */
static int accepted(const ca_period *p, const uint32_t *s, size_t n, ca_period_accept_fn *accept, void *ctx) {
    if (!accept) return 1;
    size_t nb = boundaries(p, s, n, NULL, 0);
    size_t *at = malloc((nb ? nb : 1) * sizeof *at);
    if (!at) return 0;
    boundaries(p, s, n, at, nb);
    int ok = accept(ctx, p, at, nb);
    free(at);
    return ok;
}

int ca_period_find_if(const uint32_t *s, const uint64_t *level, size_t n, ca_period_accept_fn *accept, void *ctx,
                      ca_period *out) {
    if (!s || !level || n < 6) return 0;
    uint32_t cand[MAX_CANDIDATES];
    size_t nc = candidates(s, n, cand);
    double sc[MAX_CANDIDATES], best = 0;
    for (size_t i = 0; i < nc; i++) {
        sc[i] = score(s, n, cand[i]);
        if (sc[i] > best) best = sc[i];
    }
    if (best < CA_PERIOD_MIN_SCORE) return 0;
    /* Order of trial: those that match as well as the best, smallest period
     * first (a multiple of P matches as well as P); then the others that
     * match well enough, best first (the loop, when the best one was a
     * stretch of identical layers its judge refused). */
    size_t order[MAX_CANDIDATES], no = 0;
    for (size_t i = 0; i < nc; i++)
        if (sc[i] >= CA_PERIOD_MIN_SCORE) order[no++] = i;
    for (size_t i = 1; i < no; i++)
        for (size_t j = i; j > 0; j--) {
            size_t a = order[j - 1], b = order[j];
            int top_a = sc[a] >= best - 0.005, top_b = sc[b] >= best - 0.005;
            int before = top_b != top_a ? top_b
                         : top_b        ? cand[b] < cand[a]
                                        : sc[b] > sc[a] || (sc[b] == sc[a] && cand[b] < cand[a]);
            if (!before) break;
            order[j - 1] = b;
            order[j] = a;
        }
    for (size_t i = 0; i < no; i++) {
        ca_period p;
        if (!place(s, level, n, cand[order[i]], sc[order[i]], &p) || mountain(&p, s, level, n)) continue;
        if (!accepted(&p, s, n, accept, ctx)) continue;
        *out = p;
        return 1;
    }
    return 0;
}

int ca_period_find(const uint32_t *s, const uint64_t *level, size_t n, ca_period *out) {
    return ca_period_find_if(s, level, n, NULL, NULL, out);
}

/* The anchor's places; one recurring sooner than half a period after the
 * last (the anchor is unique over the last periods, not always before them:
 * sites by lifetime repeat by chance) does not start an iteration. */
static size_t boundaries(const ca_period *p, const uint32_t *s, size_t n, size_t *out, size_t max) {
    size_t count = 0, last = 0;
    for (size_t e = p->k; e <= n; e++) { /* the run s[e-k, e) */
        if (s[e - 1] != p->anchor[p->k - 1] || memcmp(s + e - p->k, p->anchor, p->k * sizeof *s)) continue;
        size_t x = p->starts ? e - p->k : e;
        if (x == 0 || x == n) continue; /* nothing before it, or nothing after it yet */
        if (count && 2 * (x - last) < p->period) continue;
        if (count < max) out[count] = x;
        last = x;
        count++;
    }
    return count;
}

void ca_period_matcher_init(ca_period_matcher *m, const ca_period *p) {
    memset(m, 0, sizeof *m);
    m->p = *p;
}

void ca_period_matcher_init_counting(ca_period_matcher *m, const ca_period *p, uint32_t since) {
    ca_period_matcher_init(m, p);
    m->counting = 1;
    m->since = since;
}

int ca_period_matcher_push(ca_period_matcher *m, uint32_t sym) {
    if (m->counting) {
        if (m->since++ < m->p.period) return 0;
        m->since = 1; /* this allocation is the first of a new iteration */
        return CA_PERIOD_STARTED;
    }
    unsigned k = m->p.k;
    m->last[m->pos] = sym;
    m->pos = (m->pos + 1) % k;
    if (m->filled < k) m->filled++;
    if (m->filled < k || sym != m->p.anchor[k - 1]) return 0;
    for (unsigned i = 0; i < k; i++) /* the oldest is at pos */
        if (m->last[(m->pos + i) % k] != m->p.anchor[i]) return 0;
    return m->p.starts ? CA_PERIOD_STARTED : CA_PERIOD_ENDS_AFTER;
}

size_t ca_period_boundaries(const ca_period *p, const uint32_t *s, size_t n, size_t *out, size_t max) {
    return boundaries(p, s, n, out, max);
}

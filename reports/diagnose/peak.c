/* The peak and what held it; see peak.h. */
#include "reports/diagnose/peak.h"

#include <stdlib.h>
#include <string.h>

/* Addresses allocated after the peak and not freed since: a small open
 * addressing set (key 0 is empty; addresses are never 0 here). */
typedef struct addr_set {
    uint64_t *key;
    uint32_t *n;  /* allocations at that address (a reused address may hold several in turn) */
    size_t mask;
} addr_set;

static int set_init(addr_set *a, size_t n) {
    size_t cap = 64;
    while (cap < 2 * n) cap *= 2;
    a->key = calloc(cap, sizeof *a->key);
    a->n = calloc(cap, sizeof *a->n);
    a->mask = cap - 1;
    return a->key && a->n ? 0 : -1;
}

/* The count of addr, inserted (as 0) when `insert`; NULL when absent. */
static uint32_t *set_at(addr_set *a, uint64_t addr, int insert) {
    uint64_t k = addr | 1; /* never 0 */
    size_t h = (size_t)((k >> 9) * 0x9E3779B97F4A7C15ull >> 20) & a->mask;
    while (a->key[h] && a->key[h] != k) h = (h + 1) & a->mask;
    if (!a->key[h] && !insert) return NULL;
    a->key[h] = k;
    return &a->n[h];
}

static int by_bytes(const void *x, const void *y) {
    const ca_peak_site *a = x, *b = y;
    if (a->bytes != b->bytes) return a->bytes < b->bytes ? 1 : -1;
    return (a->site > b->site) - (a->site < b->site);
}

int ca_peak_find(const ca_track_snap *s, ca_peak *out) {
    memset(out, 0, sizeof *out);
    /* The level before the first event kept: now, less what the events did. */
    int64_t delta = 0;
    for (size_t i = 0; i < s->n_events; i++) {
        ca_evk k = ca_ev_kind(&s->events[i]);
        if (k == CA_EVK_ALLOC) delta += (int64_t)ca_ev_block(&s->events[i]);
        else if (k == CA_EVK_FREE) delta -= (int64_t)ca_ev_block(&s->events[i]);
    }
    int64_t level = (int64_t)s->allocated - delta, best = level;
    size_t at = 0; /* events before the peak */
    for (size_t i = 0; i < s->n_events; i++) {
        ca_evk k = ca_ev_kind(&s->events[i]);
        if (k == CA_EVK_ALLOC) level += (int64_t)ca_ev_block(&s->events[i]);
        else if (k == CA_EVK_FREE) level -= (int64_t)ca_ev_block(&s->events[i]);
        if (level > best) best = level, at = i + 1;
    }
    out->allocated = best > 0 ? (uint64_t)best : 0;
    out->seq = s->first_seq + (at ? at - 1 : 0);
    for (size_t i = 0; i < s->n_bounds; i++)
        if (s->bounds[i].seq < s->first_seq + at) out->iteration = s->bounds[i].iteration + 1;

    uint32_t max_site = 0;
    for (size_t i = 0; i < s->n_live; i++)
        if (s->live[i].site > max_site) max_site = s->live[i].site;
    for (size_t i = at; i < s->n_events; i++)
        if (s->events[i].site > max_site) max_site = s->events[i].site;
    ca_peak_site *per = calloc((size_t)max_site + 1, sizeof *per);
    addr_set after;
    if (!per || set_init(&after, s->n_events - at + 1) != 0) {
        free(per);
        free(after.key);
        free(after.n);
        return -1;
    }
    /* Made after the peak: not holders. Freed after it, made before: holders. */
    for (size_t i = at; i < s->n_events; i++) {
        const ca_ev *e = &s->events[i];
        ca_evk k = ca_ev_kind(e);
        if (k == CA_EVK_ALLOC) {
            (*set_at(&after, e->addr, 1))++;
        } else if (k == CA_EVK_FREE) {
            uint32_t *n = set_at(&after, e->addr, 0);
            if (n && *n) {
                (*n)--;
            } else {
                per[e->site].bytes += ca_ev_block(e);
                per[e->site].count++;
            }
        }
    }
    for (size_t i = 0; i < s->n_live; i++) {
        const ca_live_view *v = &s->live[i];
        uint32_t *n = set_at(&after, v->addr, 0);
        if (n && *n) {
            (*n)--;
            continue;
        }
        per[v->site].bytes += v->size;
        per[v->site].count++;
    }
    free(after.key);
    free(after.n);
    size_t m = 0;
    for (uint32_t i = 0; i <= max_site; i++)
        if (per[i].count) {
            per[m] = per[i];
            per[m++].site = i;
            out->count += per[i].count;
        }
    qsort(per, m, sizeof *per, by_bytes);
    out->sites = per;
    out->n_sites = m;
    return 0;
}

void ca_peak_free(ca_peak *p) {
    free(p->sites);
    memset(p, 0, sizeof *p);
}

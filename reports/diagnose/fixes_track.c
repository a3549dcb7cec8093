/* The fixes' input from a tracker's state (see fixes_track.h). */
#include "reports/diagnose/fixes_track.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/diagnose/phases.h"

typedef struct ev_ref {
    uint64_t addr, pos;
    size_t i; /* index in the ring */
} ev_ref;

static int by_addr_pos(const void *a, const void *b) {
    const ev_ref *x = a, *y = b;
    if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Lifetimes from the ring, positions shifted by one (0: before the ring). */
static ca_lifetime *lifetimes(const ca_track_snap *s, size_t *n_out) {
    size_t n = 0;
    for (size_t i = 0; i < s->n_events; i++) {
        ca_evk k = ca_ev_kind(&s->events[i]);
        n += k == CA_EVK_ALLOC || k == CA_EVK_FREE;
    }
    ev_ref *r = malloc((n ? n : 1) * sizeof *r);
    ca_lifetime *l = malloc((n + s->n_live + 1) * sizeof *l);
    if (!r || !l) {
        free(r);
        free(l);
        return NULL;
    }
    n = 0;
    for (size_t i = 0; i < s->n_events; i++) {
        ca_evk k = ca_ev_kind(&s->events[i]);
        if (k == CA_EVK_ALLOC || k == CA_EVK_FREE) r[n++] = (ev_ref){s->events[i].addr, s->first_seq + i + 1, i};
    }
    qsort(r, n, sizeof *r, by_addr_pos);
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) {
        const ca_ev *e = &s->events[r[i].i];
        if (ca_ev_kind(e) == CA_EVK_ALLOC) {
            uint64_t birth = r[i].pos, death = CA_LIFE_LIVE;
            if (i + 1 < n && r[i + 1].addr == r[i].addr && ca_ev_kind(&s->events[r[i + 1].i]) == CA_EVK_FREE)
                death = r[++i].pos;
            l[nl++] = (ca_lifetime){ca_ev_block(e), birth, death, e->site, 0};
        } else { /* made before the ring */
            l[nl++] = (ca_lifetime){ca_ev_block(e), 0, r[i].pos, e->site, 0};
        }
    }
    /* live now, never seen in the ring: made before it */
    for (size_t j = 0; j < s->n_live; j++) {
        ev_ref key = {s->live[j].addr, 0, 0};
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t m = (lo + hi) / 2;
            if (by_addr_pos(&r[m], &key) < 0) lo = m + 1;
            else hi = m;
        }
        if (lo < n && r[lo].addr == key.addr) continue;
        l[nl++] = (ca_lifetime){s->live[j].size, 0, CA_LIFE_LIVE, s->live[j].site, 0};
    }
    free(r);
    *n_out = nl;
    return l;
}

/* Each lifetime's phase from its site's stack; the phases into out. */
static int phases(const ca_track_snap *s, ca_lifetime *l, size_t n, uint64_t lo, uint64_t hi, ca_fix_report *out) {
    uint32_t n_sites = ca_stacks_count(s->stacks) + 1;
    ca_phase_stack *st = calloc(n_sites, sizeof *st);
    uint32_t *group = calloc(n_sites, sizeof *group);
    ca_phase *ph = calloc(n_sites, sizeof *ph);
    if (!st || !group || !ph) goto fail;
    for (uint32_t id = 1; id < n_sites; id++) st[id].n = ca_stacks_get(s->stacks, id, &st[id].ips);
    for (size_t i = 0; i < n; i++) {
        if (l[i].key >= n_sites || l[i].birth >= hi || l[i].death < lo) continue;
        st[l[i].key].used = 1; /* in the breakdown */
        if (l[i].birth >= lo) st[l[i].key].weight++;
    }
    long np = ca_phases_find(st, n_sites, group, ph);
    if (np < 0) goto fail;
    out->group_site = calloc((size_t)np + 1, sizeof *out->group_site);
    out->group_frame = calloc((size_t)np + 1, sizeof *out->group_frame);
    if (!out->group_site || !out->group_frame) goto fail;
    for (long g = 0; g < np; g++) {
        out->group_site[g + 1] = (uint32_t)ph[g].stack;
        out->group_frame[g + 1] = ph[g].frame;
    }
    for (size_t i = 0; i < n; i++) l[i].group = l[i].key < n_sites ? group[l[i].key] : 0;
    free(st);
    free(group);
    free(ph);
    return (int)np + 1;
fail:
    free(st);
    free(group);
    free(ph);
    return -1;
}

int ca_fixes_from_track(const ca_track_snap *s, uint64_t capacity, uint64_t needed, ca_fix_report *out) {
    memset(out, 0, sizeof *out);
    size_t held = 0; /* boundaries the ring holds: none, nothing to analyse (and nothing to sort) */
    for (size_t i = 0; i < s->n_bounds; i++) held += s->bounds[i].seq >= s->first_seq;
    if (!held) {
        snprintf(out->why, sizeof out->why, "no complete iteration: %s",
                 s->n_bounds ? "the event ring no longer holds an iteration's start"
                             : "no iteration boundary was marked or detected");
        return 0;
    }
    size_t n = 0;
    ca_lifetime *l = lifetimes(s, &n);
    /* boundaries the ring holds: an iteration starts at each */
    uint64_t *b = malloc((s->n_bounds ? s->n_bounds : 1) * sizeof *b);
    uint32_t *iter = malloc((s->n_bounds ? s->n_bounds : 1) * sizeof *iter);
    if (!l || !b || !iter) goto oom;
    size_t nb = 0;
    for (size_t i = 0; i < s->n_bounds; i++)
        if (s->bounds[i].seq >= s->first_seq) b[nb] = s->bounds[i].seq + 1, iter[nb++] = s->bounds[i].iteration;
    ca_fix_input in = {l, n, b, nb, 0, s->site_mode == CA_SITES_STACK, capacity, needed};
    ca_fix_report first;
    /* a first pass finds the iteration; its stacks give the phases */
    if (ca_fixes_predict(&in, &first) != 0) goto oom;
    if (first.have && in.keys_are_stacks && s->stacks) {
        size_t w = first.iteration;
        uint64_t lo = w ? b[w - 1] : 0, hi = b[w];
        int ng = phases(s, l, n, lo, hi, &first);
        if (ng < 0) {
            ca_fix_report_free(&first);
            goto oom;
        }
        in.n_groups = (uint32_t)ng;
        uint32_t *gs = first.group_site;
        unsigned *gf = first.group_frame;
        first.group_site = NULL, first.group_frame = NULL;
        ca_fix_report_free(&first);
        if (ca_fixes_predict(&in, &first) != 0) {
            free(gs);
            free(gf);
            goto oom;
        }
        first.group_site = gs;
        first.group_frame = gf;
    }
    /* window w ends at boundary w: the iteration that ends there */
    if (first.have) first.iteration = iter[first.iteration];
    *out = first;
    free(l);
    free(b);
    free(iter);
    return 0;
oom:
    free(l);
    free(b);
    free(iter);
    memset(out, 0, sizeof *out);
    strcpy(out->why, "out of memory while predicting the fixes");
    return -1;
}

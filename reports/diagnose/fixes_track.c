/* The fixes' input from a tracker's state (see fixes_track.h). */
#include "reports/diagnose/fixes_track.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/diagnose/leaks.h"
#include "reports/diagnose/phases.h"
#include "reports/diagnose/units.h"

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

static int by_birth_ref(const void *a, const void *b) {
    const ca_lifetime *x = *(ca_lifetime *const *)a, *y = *(ca_lifetime *const *)b;
    return x->birth < y->birth ? -1 : x->birth > y->birth;
}

/* Checkpointing's units (units.h) from the stacks of the forward pass's
 * allocations, [lo, fwd]: each lifetime's unit, and in->n_units, names.
 * Native stacks (no named frame) leave in->units_known 0. */
static int units(const ca_track_snap *s, ca_lifetime *l, size_t n, uint64_t lo, uint64_t fwd, ca_fix_input *in,
                 char *name, char *why) {
    size_t nf = 0;
    for (size_t i = 0; i < n; i++) nf += l[i].birth >= lo && l[i].birth <= fwd;
    ca_lifetime **fw = malloc((nf ? nf : 1) * sizeof *fw);
    ca_unit_stack *st = malloc((nf ? nf : 1) * sizeof *st);
    uint32_t *call = malloc((nf ? nf : 1) * sizeof *call);
    if (!fw || !st || !call) goto fail;
    nf = 0;
    for (size_t i = 0; i < n; i++)
        if (l[i].birth >= lo && l[i].birth <= fwd) fw[nf++] = &l[i];
    qsort(fw, nf, sizeof *fw, by_birth_ref);
    for (size_t i = 0; i < nf; i++) {
        st[i].n = ca_stacks_get(s->stacks, fw[i]->key, &st[i].ips);
        st[i].bytes = fw[i]->bytes;
        fw[i]->fp32 = (uint8_t)ca_frames_autocast_fp32(st[i].ips, st[i].n);
    }
    long u = ca_units_find(st, nf, call, name, CA_UNIT_NAME, why, CA_FIX_WHY);
    if (u >= 0) {
        for (size_t i = 0; i < nf; i++) fw[i]->unit = call[i];
        in->units_known = 1, in->n_units = u, in->unit_name = name, in->units_why = why;
    }
    free(fw);
    free(st);
    free(call);
    return 0;
fail:
    free(fw);
    free(st);
    free(call);
    return -1;
}

static int by_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The run without its leaks (leaks.h: the findings that are not notes):
 * drops the leaking sites' allocations never freed (what piled up; with
 * sizes for sites, only those made after the first step: weights may have
 * the size). Their bytes into *bytes; -1 when memory ran out. */
static int without_leaks(const ca_track_snap *s, ca_lifetime *l, size_t *n, uint64_t first_bound, uint64_t *bytes) {
    *bytes = 0;
    int by_stack = s->site_mode == CA_SITES_STACK; /* a site is one call: all it kept is the leak's */
    ca_leak *leaks = NULL;
    ca_finding *findings = NULL;
    size_t n_sites = 0, nl = ca_leaks_find(s, 0, 0, &leaks);
    if (nl) ca_findings_find(s, leaks, nl, 0, 0, &findings, &n_sites);
    uint32_t *sites = malloc((n_sites ? n_sites : 1) * sizeof *sites);
    if (!sites) {
        free(leaks);
        free(findings);
        return -1;
    }
    for (size_t i = 0; i < n_sites; i++) sites[i] = leaks[i].site;
    qsort(sites, n_sites, sizeof *sites, by_u32);
    size_t keep = 0;
    for (size_t i = 0; i < *n; i++) {
        int leaked = n_sites && l[i].death == CA_LIFE_LIVE && (l[i].birth >= first_bound || by_stack) &&
                     bsearch(&l[i].key, sites, n_sites, sizeof *sites, by_u32);
        if (leaked) *bytes += l[i].bytes;
        else l[keep++] = l[i];
    }
    *n = keep;
    free(sites);
    free(leaks);
    free(findings);
    return 0;
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
    uint64_t leaked = 0;
    if (without_leaks(s, l, &n, b[0], &leaked) < 0) goto oom;
    ca_fix_input in = {l, n, b, nb, 0, s->site_mode == CA_SITES_STACK, capacity, needed};
    for (size_t i = 0; i < n && !in.start_unseen; i++) in.start_unseen = l[i].birth == 0; /* made before the ring */
    ca_fix_report first;
    char unit_name[CA_UNIT_NAME], unit_why[CA_FIX_WHY];
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
        if (units(s, l, n, lo, first.forward_end, &in, unit_name, unit_why) < 0) {
            ca_fix_report_free(&first);
            goto oom;
        }
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
    first.leaked = leaked;
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

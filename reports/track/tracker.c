/* The tracker: live allocations, call-site histories, the event ring and
 * OOM records; iterations are in iterations.c, the mapped-range table in
 * ranges.c. See tracker.h. */
#define _GNU_SOURCE
#include "reports/track/tracker_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TLS __thread __attribute__((tls_model("initial-exec")))

void ca_tracker_options_default(ca_tracker_options *o) {
    memset(o, 0, sizeof *o);
    o->max_frames = 32;
    o->capture_stacks = 1;
    o->trace_events = (size_t)1 << 20;
    o->warmup = 1;
    o->detect = 1;
    o->detect_events = (size_t)1 << 18;
}

/* Grows *arr (elements of `size` bytes) to hold `need`; 0 on success. */
int ca_track_grow(void **arr, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *p = realloc(*arr, c * size);
    if (!p) return -1;
    *arr = p;
    *cap = c;
    return 0;
}

static uint64_t next_serial(void) {
    static _Atomic uint64_t serials;
    return atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed) + 1;
}

ca_tracker *ca_tracker_new(const ca_tracker_options *o) {
    ca_tracker *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    if (o) t->opt = *o;
    else ca_tracker_options_default(&t->opt);
    if (t->opt.stacks) {
        t->stacks = t->opt.stacks;
    } else {
        t->stacks = ca_stacks_new(t->opt.max_frames ? t->opt.max_frames : 32);
        t->own_stacks = 1;
        if (!t->stacks) {
            free(t);
            return NULL;
        }
    }
    t->serial = next_serial();
    ca_lock_init(&t->lock);
    ca_clock_ref_now(&t->start);
    t->ring_cap = t->opt.trace_events;
    if (t->opt.detect && t->ring_cap) {
        t->detect_state = DETECT_TRYING;
        t->next_try = DETECT_FIRST_TRY;
    }
    if (!(t->ooms = calloc(CA_MAX_OOM_RECORDS, sizeof *t->ooms))) {
        ca_tracker_destroy(t);
        return NULL;
    }
    return t;
}

void ca_tracker_destroy(ca_tracker *t) {
    if (!t) return;
    ca_livetab_free(&t->live);
    if (t->own_stacks) ca_stacks_free(t->stacks);
    free(t->sites);
    free(t->dirty);
    free(t->dirty_list);
    free(t->ring);
    ca_idtab_free(&t->threads);
    ca_idtab_free(&t->streams);
    ca_idtab_free(&t->whos);
    free(t->bounds);
    ca_ranges_free(&t->ranges);
    free(t->ooms);
    free(t);
}

void ca_tracker_attach(ca_tracker *t, ca_allocator *a) { ca_set_observer(a, ca_tracker_observe, t); }
void ca_tracker_detach(ca_tracker *t, ca_allocator *a) {
    (void)t;
    ca_set_observer(a, NULL, NULL);
}

ca_stacks *ca_tracker_stacks(ca_tracker *t) { return t->stacks; }
void ca_tracker_fork_child(ca_tracker *t) {
    ca_lock_init(&t->lock);
    if (t->own_stacks) ca_stacks_fork_child(t->stacks);
}

int ca_tracker_warn_once(ca_tracker *t) { return !atomic_exchange_explicit(&t->warned, 1, memory_order_relaxed); }
ca_site_mode ca_tracker_site_mode(const ca_tracker *t) {
    return t->opt.capture_stacks ? CA_SITES_STACK : CA_SITES_SIZE;
}

uint32_t ca_tracker_site(ca_tracker *t, const uintptr_t *ips, unsigned n) {
    return ca_stacks_intern(t->stacks, ips, n);
}

uint32_t ca_tracker_size_site(ca_tracker *t, uint64_t requested) {
    uintptr_t ip = (uintptr_t)requested;
    return ca_stacks_intern(t->stacks, &ip, 1);
}

/* ---- small tables (lock held) ---- */

static TLS uint64_t tl_serial;
static TLS uint32_t tl_thread;

static uint32_t thread_index(ca_tracker *t, uint64_t os_tid) {
    if (os_tid) return ca_idtab_index(&t->threads, os_tid);
    if (tl_serial == t->serial) return tl_thread;
    uint32_t i = ca_idtab_index(&t->threads, (uint64_t)syscall(SYS_gettid));
    tl_serial = t->serial;
    tl_thread = i;
    return i;
}

static uint32_t stream_index(ca_tracker *t, uint64_t s) {
    if (t->streams.n && s == t->last_stream) return t->last_stream_idx;
    uint32_t i = ca_idtab_index(&t->streams, s);
    t->last_stream = s;
    t->last_stream_idx = i;
    return i;
}

/* Events keep one 32-bit index for their thread and stream together: a run
 * has few pairs, and the ring stays at 32 bytes an event. */
static uint32_t who_index(ca_tracker *t, uint32_t thread, uint32_t stream) {
    uint64_t key = (uint64_t)thread << 32 | stream;
    if (t->whos.n && key == t->last_who_key) return t->last_who;
    t->last_who_key = key;
    return t->last_who = ca_idtab_index(&t->whos, key);
}

static ca_site_stat *site_stat_slow(ca_tracker *t, uint32_t site) {
    if (site >= t->cap_sites) {
        uint32_t cap = t->cap_sites ? t->cap_sites : 256;
        while (cap <= site) cap *= 2;
        ca_site_stat *s = realloc(t->sites, cap * sizeof *s);
        if (!s) return NULL;
        t->sites = s;
        uint8_t *d = realloc(t->dirty, cap);
        if (!d) return NULL;
        t->dirty = d;
        memset(t->sites + t->cap_sites, 0, (cap - t->cap_sites) * sizeof *s);
        memset(t->dirty + t->cap_sites, 0, cap - t->cap_sites);
        for (uint32_t i = t->cap_sites; i < cap; i++) t->sites[i].site = i;
        t->cap_sites = cap;
    }
    if (site > t->max_site) t->max_site = site;
    if (!t->dirty[site] && !GROW(t->dirty_list, t->cap_dirty, t->n_dirty + 1)) {
        t->dirty[site] = 1;
        t->dirty_list[t->n_dirty++] = site;
    }
    return &t->sites[site];
}

/* A site already counted since the last boundary (marked dirty) has its
 * room and is in the list: the common case, inline. */
static inline ca_site_stat *site_stat(ca_tracker *t, uint32_t site) {
    if (__builtin_expect(site < t->cap_sites && t->dirty[site], 1)) return &t->sites[site];
    return site_stat_slow(t, site);
}

/* ---- the ring ---- */

/* The ring, made on the first event. Its pages are first touched one after
 * another as events come, a page fault each 128 events with small pages
 * (about a third of the tracker's time a pair until the ring is full once):
 * where the kernel has transparent huge pages on request, the ring asks for
 * them past its first 2 MiB, 512 times fewer faults. The first 2 MiB (65536
 * events) stay on small pages: a short run keeps only its events' pages. */
#define HUGE_PAGE ((size_t)2 << 20)
static ca_ev *ring_new(size_t events) {
    size_t bytes = events * sizeof(ca_ev);
    if (bytes < 2 * HUGE_PAGE) return malloc(bytes);
    void *p;
    if (posix_memalign(&p, HUGE_PAGE, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
    /* a hint: small pages if refused */
    madvise((char *)p + HUGE_PAGE, (bytes & ~(HUGE_PAGE - 1)) - HUGE_PAGE, MADV_HUGEPAGE);
#endif
    return p;
}

/* The event logged, or NULL when no ring is kept. Inline: nine arguments
 * through a call cost more than its body. */
static inline __attribute__((always_inline)) ca_ev *log_event(ca_tracker *t, ca_evk kind, uint64_t addr,
                                                              uint64_t bytes, uint64_t block, uint64_t ticks,
                                                              uint32_t site, uint32_t thread, uint32_t stream) {
    t->seq++;
    if (__builtin_expect(!t->ring, 0)) { /* none kept, or the first event */
        if (!t->ring_cap) return NULL;
        if (!(t->ring = ring_new(t->ring_cap))) {
            t->ring_cap = 0;
            return NULL;
        }
    }
    const uint64_t max48 = (UINT64_C(1) << 48) - 1;
    uint64_t b = bytes > max48 ? max48 : bytes;
    uint64_t rounded = (b + CA_ROUND - 1) & ~(uint64_t)(CA_ROUND - 1);
    uint64_t round = block > rounded ? (block - rounded) / CA_ROUND : 0;
    if (round > 0xfff) round = 0xfff;
    ca_ev *e = &t->ring[t->ring_at];
    if (++t->ring_at == t->ring_cap) t->ring_at = 0;
    e->addr = addr;
    e->packed = b | round << 48 | (uint64_t)kind << 60;
    e->ticks = ticks;
    e->site = site;
    e->who = who_index(t, thread, stream);
    return e;
}

/* ---- recording ---- */

static void record(ca_tracker *t, const ca_trace_event *ev, uint32_t site, uint64_t thread, uint64_t ticks,
                   const ca_range_kind *kind) {
    int stamp = !ticks && !t->opt.time_is_index;
    if (stamp) ticks = ca_ticks();
    ca_lock_acquire(&t->lock);
    if (!ticks) ticks = t->seq + 1;
    uint32_t th = thread_index(t, thread), sm = stream_index(t, ev->stream);
    switch (ev->kind) {
    case CA_EV_ALLOC: {
        /* Detected iterations: a boundary due before this allocation. */
        int match = t->detect_state == DETECT_FOUND && t->source == CA_ITER_DETECTED
                        ? ca_period_matcher_push(&t->matcher, site)
                        : 0;
        if ((t->pending || match == CA_PERIOD_STARTED) && t->source == CA_ITER_DETECTED) {
            t->marks[CA_ITER_DETECTED]++;
            ca_track_boundary(t, ticks);
        }
        t->pending = 0;
        ca_site_stat *st = site_stat(t, site);
        if (!st) st = site_stat(t, site = CA_SITE_NONE);
        /* By the block's tag where the allocator keeps one, else by address
         * (events of no block, or more live than tags); NULL: no memory, not
         * tracked. */
        live old;
        bool had = false;
        live *l = ev->tag ? ca_livetab_put_tagged(&t->live, ev->addr, CA_TAG_MAX, ev->tag) : NULL;
        if (!l) l = ca_livetab_put(&t->live, ev->addr, &old, &had);
        if (l)
            *l = (live){.addr = ev->addr, .size = ev->size, .requested = ev->requested, .birth_ticks = ticks,
                        .site = site, .birth_iter = t->iteration, .thread = th, .stream = sm};
        if (had) { /* missed a free: forget the old one (its site has its room: st stays put) */
            ca_site_stat *ost = site_stat(t, old.site);
            if (ost && ost->live_count) ost->live_count--, ost->live_bytes -= old.size;
            t->allocated -= old.size;
            t->requested -= old.requested;
        }
        if (st) st->live_count++, st->live_bytes += ev->size, st->allocs++;
        t->n_allocs++;
        t->allocated += ev->size;
        t->requested += ev->requested;
        if (t->allocated > t->peak_allocated) t->peak_allocated = t->allocated;
        if (t->allocated > t->iter_peak_allocated) t->iter_peak_allocated = t->allocated;
        log_event(t, CA_EVK_ALLOC, ev->addr, ev->requested, ev->size, ticks, site, th, sm);
        if (match == CA_PERIOD_ENDS_AFTER)
            t->pending = 1; /* the next allocation starts an iteration */
        else if (t->detect_state == DETECT_TRYING && t->seq >= t->next_try)
            ca_track_try_detect(t);
        break;
    }
    case CA_EV_FREE: {
        live l;
        if (!(ev->tag && ca_livetab_take_tagged(&t->live, *ev->tag, ev->addr, &l)) &&
            !ca_livetab_take(&t->live, ev->addr, &l)) {
            t->n_unknown_frees++; /* made before the tracker was attached, or under another */
            break;
        }
        ca_site_stat *st = site_stat(t, l.site);
        if (st && st->live_count) st->live_count--, st->live_bytes -= l.size;
        t->n_frees++;
        t->allocated -= l.size;
        t->requested -= l.requested;
        log_event(t, CA_EVK_FREE, l.addr, l.requested, l.size, ticks, l.site, th, l.stream);
        break;
    }
    case CA_EV_SEGMENT_MAP: {
        ca_range r = {ev->addr, ev->size, sm, *kind};
        ca_ranges_map(&t->ranges, &r); /* out of memory: the range goes unseen, the figures stay right */
        t->reserved += ev->size;
        if (t->reserved > t->peak_reserved) t->peak_reserved = t->reserved;
        if (t->reserved > t->iter_peak_reserved) t->iter_peak_reserved = t->reserved;
        ca_ev *e = log_event(t, CA_EVK_MAP, ev->addr, ev->size, ev->size, ticks, site, th, sm);
        if (e && kind->whole) e->packed |= CA_EV_WHOLE_BIT;
        break;
    }
    case CA_EV_SEGMENT_UNMAP: {
        ca_ranges_unmap(&t->ranges, ev->addr, ev->size, kind->whole);
        t->reserved -= ev->size < t->reserved ? ev->size : t->reserved;
        ca_ev *e = log_event(t, CA_EVK_UNMAP, ev->addr, ev->size, ev->size, ticks, site, th, sm);
        if (e && kind->whole) e->packed |= CA_EV_WHOLE_BIT;
        break;
    }
    case CA_EV_OOM: {
        uint64_t idx = t->n_ooms;
        if (t->n_ooms < CA_MAX_OOM_RECORDS) {
            ca_oom_record *r = &t->ooms[t->n_ooms++];
            memset(r, 0, sizeof *r);
            r->seq = t->seq;
            r->ticks = ticks;
            r->site = site;
            r->iteration = t->iteration;
            r->thread = th;
            r->stream = sm;
            r->requested = ev->requested ? ev->requested : ev->size;
        }
        t->n_ooms_total++;
        /* the size asked goes whole in addr, the record's index in the bytes */
        log_event(t, CA_EVK_OOM, ev->requested ? ev->requested : ev->size, idx, 0, ticks, site, th, sm);
        break;
    }
    }
    ca_lock_release(&t->lock);
}

/* A segment's range kind from its event; NULL for other events (the kind is
 * a range's alone). */
static const ca_range_kind *range_kind(const ca_trace_event *ev, ca_range_kind *kind) {
    if (ev->kind != CA_EV_SEGMENT_MAP && ev->kind != CA_EV_SEGMENT_UNMAP) return NULL;
    *kind = ca_range_kind_default();
    if (ev->classic_pool) kind->whole = 1, kind->pool = ev->classic_pool, kind->expandable = 0;
    return kind;
}

void ca_tracker_record(ca_tracker *t, const ca_trace_event *ev, uint32_t site, uint64_t thread,
                       uint64_t ticks) {
    ca_range_kind kind;
    record(t, ev, site, thread, ticks, range_kind(ev, &kind));
}

void ca_tracker_record_range(ca_tracker *t, const ca_trace_event *ev, const ca_range_kind *kind, uint32_t site,
                             uint64_t ticks) {
    record(t, ev, site, 0, ticks, kind);
}

void ca_tracker_observe(void *tracker, const ca_trace_event *ev) {
    ca_tracker *t = tracker;
    uint32_t site = CA_SITE_NONE;
    if (ev->kind == CA_EV_ALLOC || ev->kind == CA_EV_OOM)
        site = t->opt.capture_stacks ? ca_stacks_capture(t->stacks)
                                     : ca_tracker_size_site(t, ev->requested ? ev->requested : ev->size);
    else if ((ev->kind == CA_EV_SEGMENT_MAP || ev->kind == CA_EV_SEGMENT_UNMAP) && t->opt.capture_stacks)
        site = ca_stacks_capture(t->stacks); /* the call that made the allocator map (an allocation) or unmap */
    ca_range_kind kind;
    record(t, ev, site, 0, 0, range_kind(ev, &kind));
}

/* ---- OOM records ---- */

void ca_tracker_oom(ca_tracker *t, const ca_oom_info *info, ca_oom_judge_fn *judge) {
    ca_lock_acquire(&t->lock);
    /* Judging needs iterations: look for the loop now if it is still unknown. */
    if (t->detect_state == DETECT_TRYING && t->seq) ca_track_try_detect(t);
    uint32_t th = thread_index(t, 0);
    ca_oom_record *r = NULL;
    for (size_t i = t->n_ooms; i-- > 0;)
        if (!t->ooms[i].have_info && t->ooms[i].thread == th) {
            r = &t->ooms[i];
            break;
        }
    if (!r && t->n_ooms < CA_MAX_OOM_RECORDS) { /* the observer did not see it */
        r = &t->ooms[t->n_ooms++];
        memset(r, 0, sizeof *r);
        r->seq = t->seq;
        r->ticks = t->opt.time_is_index ? t->seq + 1 : ca_ticks();
        r->iteration = t->iteration;
        r->thread = th;
        r->stream = stream_index(t, info->stream);
        r->requested = info->requested;
        t->n_ooms_total++;
    }
    if (r) {
        r->have_info = 1;
        r->info = *info;
        size_t n_sites = t->cap_sites < (size_t)t->max_site + 1 ? t->cap_sites : (size_t)t->max_site + 1;
        if (judge) judge(r, t->sites, n_sites, t->iteration);
    }
    ca_lock_release(&t->lock);
}

/* ---- reading ---- */

size_t ca_tracker_memory(ca_tracker *t, size_t *live_allocations) {
    ca_lock_acquire(&t->lock);
    size_t bytes = sizeof *t + t->cap_sites * (sizeof *t->sites + 1) +
                   t->cap_dirty * sizeof *t->dirty_list + t->cap_bounds * sizeof *t->bounds +
                   t->ranges.cap * sizeof *t->ranges.v + CA_MAX_OOM_RECORDS * sizeof *t->ooms +
                   ca_idtab_memory(&t->threads) + ca_idtab_memory(&t->streams) + ca_idtab_memory(&t->whos);
    bytes += ca_livetab_memory(&t->live);
    if (t->ring) bytes += (t->seq < t->ring_cap ? t->seq : t->ring_cap) * sizeof *t->ring;
    if (live_allocations) *live_allocations = t->live.n;
    ca_lock_release(&t->lock);
    return bytes + (t->own_stacks ? ca_stacks_memory(t->stacks) : 0);
}

static int by_addr(const void *a, const void *b) {
    const ca_live_view *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

#define DUP(dst, src, n)                                                                           \
    do {                                                                                           \
        if ((n) && !((dst) = malloc((n) * sizeof *(dst)))) goto fail;                              \
        if (n) memcpy((dst), (src), (n) * sizeof *(dst));                                          \
    } while (0)

static int snapshot(ca_tracker *t, ca_track_snap *s, int with_events) {
    memset(s, 0, sizeof *s);
    ca_clock_ref now;
    ca_clock_ref_now(&now);
    ca_lock_acquire(&t->lock);
    /* a period search over the ring: for reports, not at every live look */
    if (with_events && t->detect_state == DETECT_TRYING && t->seq) ca_track_try_detect(t);
    s->site_mode = ca_tracker_site_mode(t);
    s->device = t->opt.device;
    s->time_is_index = t->opt.time_is_index;
    ca_clock_conv_init(&s->clock, &t->start, &now);
    s->stacks = t->stacks;
    s->iteration = t->iteration;
    s->source = t->source;
    memcpy(s->marks, t->marks, sizeof s->marks);
    s->detect_state = t->detect_state;
    s->detect_period = t->detect_state == DETECT_FOUND ? t->period.period : 0;
    s->allocated = t->allocated;
    s->requested = t->requested;
    s->reserved = t->reserved;
    s->peak_allocated = t->peak_allocated;
    s->peak_reserved = t->peak_reserved;
    s->n_allocs = t->n_allocs;
    s->n_frees = t->n_frees;
    s->n_unknown_frees = t->n_unknown_frees;
    s->warmup = t->opt.warmup;
    s->seq = t->seq;
    s->n_ooms_total = t->n_ooms_total;

    if (t->live.n && !(s->live = malloc(t->live.n * sizeof *s->live))) goto fail;
    size_t at = 0;
    for (live *l; (l = ca_livetab_next(&t->live, &at));)
        s->live[s->n_live++] = (ca_live_view){l->addr, l->size, l->requested, l->birth_ticks,
                                              l->site, l->birth_iter, l->thread, l->stream};
    size_t ns = 0;
    for (uint32_t i = 0; i <= t->max_site && i < t->cap_sites; i++) ns += t->sites[i].allocs > 0;
    if (ns && !(s->sites = malloc(ns * sizeof *s->sites))) goto fail;
    for (uint32_t i = 0; i <= t->max_site && i < t->cap_sites; i++) {
        if (!t->sites[i].allocs) continue;
        s->sites[s->n_sites++] = t->sites[i];
    }
    size_t kept = t->ring && with_events ? (t->seq < t->ring_cap ? t->seq : t->ring_cap) : 0;
    if (kept && !(s->events = malloc(kept * sizeof *s->events))) goto fail;
    s->first_seq = t->seq - kept;
    for (size_t i = 0; i < kept; i++) s->events[i] = t->ring[(s->first_seq + i) % t->ring_cap];
    s->n_events = kept;
    DUP(s->bounds, t->bounds, t->n_bounds);
    s->n_bounds = t->n_bounds;
    DUP(s->ranges, t->ranges.v, t->ranges.n);
    s->n_ranges = t->ranges.n;
    DUP(s->ooms, t->ooms, t->n_ooms);
    s->n_ooms = t->n_ooms;
    DUP(s->threads, t->threads.ids, t->threads.n);
    s->n_threads = t->threads.n;
    DUP(s->streams, t->streams.ids, t->streams.n);
    s->n_streams = t->streams.n;
    DUP(s->whos, t->whos.ids, t->whos.n);
    s->n_whos = t->whos.n;
    ca_lock_release(&t->lock);
    if (s->n_live) qsort(s->live, s->n_live, sizeof *s->live, by_addr);
    return 0;
fail:
    ca_lock_release(&t->lock);
    ca_track_snap_free(s);
    return -1;
}

int ca_tracker_snapshot(ca_tracker *t, ca_track_snap *s) { return snapshot(t, s, 1); }
int ca_tracker_snapshot_light(ca_tracker *t, ca_track_snap *s) { return snapshot(t, s, 0); }

void ca_track_snap_free(ca_track_snap *s) {
    free(s->live);
    free(s->sites);
    free(s->events);
    free(s->bounds);
    free(s->ranges);
    free(s->ooms);
    free(s->threads);
    free(s->streams);
    free(s->whos);
    memset(s, 0, sizeof *s);
}

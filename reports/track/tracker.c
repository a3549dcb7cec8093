/* The tracker: live allocations, call-site histories, the event ring,
 * iteration boundaries (marked or detected), mapped ranges and OOM records.
 * See tracker.h. Everything below the lock is touched only with it held. */
#define _GNU_SOURCE
#include "reports/track/tracker.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocator/lock.h"
#include "reports/diagnose/leaks.h"
#include "reports/diagnose/oom.h"
#include "reports/track/period.h"

/* Out of memory inside uthash: drop the entry, never exit the program. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(e) (hash_oom = 1)
/* Addresses are 512-byte aligned: a multiplicative hash of addr >> 9. */
#define HASH_FUNCTION(keyptr, keylen, hashv)                                                       \
    do {                                                                                           \
        uint64_t k_ = (uint64_t)(*(const uintptr_t *)(keyptr)) >> 9;                               \
        (hashv) = (unsigned)((k_ * 0x9E3779B97F4A7C15ull) >> 32);                                  \
    } while (0)
#define HASH_KEYCMP(a, b, n) (*(const uintptr_t *)(a) != *(const uintptr_t *)(b))
#include <uthash.h>

#define TLS __thread __attribute__((tls_model("initial-exec")))

/* One live allocation: 48 bytes of data and uthash's handle. */
typedef struct live {
    uintptr_t addr;
    uint64_t size, requested, birth_ticks;
    uint32_t site, birth_iter;
    uint16_t thread, stream;
    UT_hash_handle hh;
} live;

#define SLAB 1024
typedef struct slab {
    struct slab *next;
    live e[SLAB];
} slab;

enum { DETECT_OFF, DETECT_TRYING, DETECT_FOUND, DETECT_GAVE_UP };
/* Detection waits for a window of this many events (then doubles it): a
 * smaller one may hold only part of the first iteration. Reports try once
 * more on whatever there is. */
#define DETECT_FIRST_TRY 8192

struct ca_tracker {
    ca_tracker_options opt;
    ca_stacks *stacks;
    int own_stacks;
    uint64_t serial;
    ca_clock_ref start;
    ca_lock lock;

    live *live, *spare;
    slab *slabs;
    size_t n_slabs, n_live;
    uint64_t allocated, requested, reserved, peak_allocated, peak_reserved;
    uint64_t iter_peak_allocated, iter_peak_reserved;
    uint64_t n_allocs, n_frees, n_unknown_frees;

    ca_site_stat *sites; /* by site id */
    uint8_t *dirty;
    uint32_t cap_sites, max_site;
    uint32_t *dirty_list;
    size_t n_dirty, cap_dirty;

    ca_ev *ring;
    size_t ring_cap;
    uint64_t seq;

    uint64_t *threads, *streams;
    size_t n_threads, n_streams, cap_threads, cap_streams;
    uint64_t last_stream;
    uint16_t last_stream_idx;

    uint32_t iteration;
    ca_iter_source source;
    uint64_t marks[4];
    ca_boundary *bounds;
    size_t n_bounds, cap_bounds;

    int detect_state, pending;
    uint64_t next_try;
    uint64_t detect_from; /* the first event detection looks at (ca_tracker_set_baseline) */
    ca_period period;
    ca_period_matcher matcher;

    ca_range *ranges;
    size_t n_ranges, cap_ranges;

    ca_oom_record *ooms;
    size_t n_ooms;
    uint64_t n_ooms_total;
    _Atomic int warned;
};

const char *ca_iter_source_name(ca_iter_source s) {
    static const char *const names[] = {"none", "detected", "nvtx", "explicit"};
    return (unsigned)s < 4 ? names[s] : "none";
}

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
static int grow(void **arr, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *p = realloc(*arr, c * size);
    if (!p) return -1;
    *arr = p;
    *cap = c;
    return 0;
}
#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof *(arr))

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
    HASH_CLEAR(hh, t->live);
    while (t->slabs) {
        slab *s = t->slabs;
        t->slabs = s->next;
        free(s);
    }
    if (t->own_stacks) ca_stacks_free(t->stacks);
    free(t->sites);
    free(t->dirty);
    free(t->dirty_list);
    free(t->ring);
    free(t->threads);
    free(t->streams);
    free(t->bounds);
    free(t->ranges);
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
static TLS uint16_t tl_thread;

static uint16_t index_of(uint64_t **tab, size_t *n, size_t *cap, uint64_t v) {
    for (size_t i = 0; i < *n; i++)
        if ((*tab)[i] == v) return (uint16_t)i;
    if (*n >= UINT16_MAX || grow((void **)tab, cap, *n + 1, sizeof **tab)) return UINT16_MAX;
    (*tab)[*n] = v;
    return (uint16_t)(*n)++;
}

static uint16_t thread_index(ca_tracker *t, uint64_t os_tid) {
    if (os_tid) return index_of(&t->threads, &t->n_threads, &t->cap_threads, os_tid);
    if (tl_serial == t->serial) return tl_thread;
    uint16_t i = index_of(&t->threads, &t->n_threads, &t->cap_threads, (uint64_t)syscall(SYS_gettid));
    tl_serial = t->serial;
    tl_thread = i;
    return i;
}

static uint16_t stream_index(ca_tracker *t, uint64_t s) {
    if (t->n_streams && s == t->last_stream) return t->last_stream_idx;
    uint16_t i = index_of(&t->streams, &t->n_streams, &t->cap_streams, s);
    t->last_stream = s;
    t->last_stream_idx = i;
    return i;
}

static ca_site_stat *site_stat(ca_tracker *t, uint32_t site) {
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

static live *live_new(ca_tracker *t) {
    live *e = t->spare;
    if (e) {
        t->spare = e->hh.next;
        return e;
    }
    slab *s = malloc(sizeof *s);
    if (!s) return NULL;
    s->next = t->slabs;
    t->slabs = s;
    t->n_slabs++;
    for (size_t i = 1; i < SLAB; i++) {
        s->e[i].hh.next = t->spare;
        t->spare = &s->e[i];
    }
    return &s->e[0];
}

static void live_put(ca_tracker *t, live *e) {
    e->hh.next = t->spare;
    t->spare = e;
}

/* ---- the ring ---- */

static void log_event(ca_tracker *t, ca_evk kind, uint64_t addr, uint64_t bytes, uint64_t block,
                      uint64_t ticks, uint32_t site, uint16_t thread, uint16_t stream) {
    uint64_t seq = t->seq++;
    if (!t->ring_cap) return;
    if (!t->ring && !(t->ring = malloc(t->ring_cap * sizeof *t->ring))) {
        t->ring_cap = 0;
        return;
    }
    const uint64_t max48 = (UINT64_C(1) << 48) - 1;
    uint64_t b = bytes > max48 ? max48 : bytes;
    uint64_t rounded = (b + CA_ROUND - 1) & ~(uint64_t)(CA_ROUND - 1);
    uint64_t round = block > rounded ? (block - rounded) / CA_ROUND : 0;
    if (round > 0xfff) round = 0xfff;
    ca_ev *e = &t->ring[seq % t->ring_cap];
    e->addr = addr;
    e->packed = b | round << 48 | (uint64_t)kind << 60;
    e->ticks = ticks;
    e->site = site;
    e->thread = thread;
    e->stream = stream;
}

/* ---- mapped ranges (few: a handful per pool) ---- */

static void ranges_map(ca_tracker *t, uintptr_t addr, uint64_t size, uint16_t stream) {
    size_t i = 0;
    while (i < t->n_ranges && t->ranges[i].addr < addr) i++;
    ca_range *prev = i ? &t->ranges[i - 1] : NULL, *next = i < t->n_ranges ? &t->ranges[i] : NULL;
    int join_prev = prev && prev->addr + prev->size == addr && prev->stream == stream;
    int join_next = next && addr + size == next->addr && next->stream == stream;
    if (join_prev && join_next) {
        prev->size += size + next->size;
        memmove(next, next + 1, (t->n_ranges - i - 1) * sizeof *next);
        t->n_ranges--;
    } else if (join_prev) {
        prev->size += size;
    } else if (join_next) {
        next->addr = addr;
        next->size += size;
    } else if (!GROW(t->ranges, t->cap_ranges, t->n_ranges + 1)) {
        memmove(&t->ranges[i + 1], &t->ranges[i], (t->n_ranges - i) * sizeof *t->ranges);
        t->ranges[i] = (ca_range){addr, size, stream};
        t->n_ranges++;
    }
}

static void ranges_unmap(ca_tracker *t, uintptr_t addr, uint64_t size) {
    for (size_t i = 0; i < t->n_ranges; i++) {
        ca_range *r = &t->ranges[i];
        if (addr < r->addr || addr + size > r->addr + r->size) continue;
        uintptr_t end = r->addr + r->size;
        if (addr == r->addr && size == r->size) {
            memmove(r, r + 1, (t->n_ranges - i - 1) * sizeof *r);
            t->n_ranges--;
        } else if (addr == r->addr) {
            r->addr += size;
            r->size -= size;
        } else if (addr + size == end) {
            r->size -= size;
        } else if (!GROW(t->ranges, t->cap_ranges, t->n_ranges + 1)) {
            r = &t->ranges[i];
            memmove(r + 2, r + 1, (t->n_ranges - i - 1) * sizeof *r);
            r[1] = (ca_range){addr + size, end - addr - size, r->stream};
            r->size = addr - r->addr;
            t->n_ranges++;
        }
        return;
    }
}

/* ---- iterations ---- */

static void push_boundary(ca_tracker *t, const ca_boundary *b) {
    if (!GROW(t->bounds, t->cap_bounds, t->n_bounds + 1)) t->bounds[t->n_bounds++] = *b;
}

/* The iteration in progress ends now (before event number t->seq). */
static void boundary(ca_tracker *t, uint64_t ticks) {
    ca_boundary b = {t->iteration, t->seq, ticks, t->allocated, t->reserved,
                     t->iter_peak_allocated, t->iter_peak_reserved, t->n_live};
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
        for (live *l = t->live; l; l = l->hh.next) {
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

static void try_detect(ca_tracker *t) {
    if (t->seq > t->ring_cap || t->seq > t->opt.detect_events) {
        t->detect_state = DETECT_GAVE_UP;
        return;
    }
    if (t->seq * 2 > t->next_try) t->next_try = t->seq * 2;
    size_t n = 0;
    for (uint64_t q = t->detect_from; q < t->seq; q++) n += ca_ev_kind(&t->ring[q]) == CA_EVK_ALLOC;
    uint32_t *syms = malloc((n ? n : 1) * sizeof *syms);
    uint64_t *level = malloc((n ? n : 1) * sizeof *level);
    if (syms && level) {
        uint64_t now = 0;
        size_t i = 0;
        for (uint64_t q = 0; q < t->seq; q++) {
            const ca_ev *e = &t->ring[q];
            if (ca_ev_kind(e) == CA_EVK_ALLOC) {
                if (q >= t->detect_from) syms[i] = e->site, level[i++] = now;
                now += ca_ev_block(e);
            } else if (ca_ev_kind(e) == CA_EVK_FREE) {
                now -= ca_ev_block(e);
            }
        }
        if (ca_tracker_site_mode(t) == CA_SITES_SIZE) lifetimes(t, syms, n);
        if (ca_period_find(syms, level, n, &t->period)) apply_detection(t, syms, n);
    }
    free(syms);
    free(level);
}

/* ---- recording ---- */

void ca_tracker_record(ca_tracker *t, const ca_trace_event *ev, uint32_t site, uint64_t thread,
                       uint64_t ticks) {
    int stamp = !ticks && !t->opt.time_is_index;
    if (stamp) ticks = ca_ticks();
    ca_lock_acquire(&t->lock);
    if (!ticks) ticks = t->seq + 1;
    uint16_t th = thread_index(t, thread), sm = stream_index(t, ev->stream);
    switch (ev->kind) {
    case CA_EV_ALLOC: {
        /* Detected iterations: a boundary due before this allocation. */
        int match = t->detect_state == DETECT_FOUND && t->source == CA_ITER_DETECTED
                        ? ca_period_matcher_push(&t->matcher, site)
                        : 0;
        if ((t->pending || match == CA_PERIOD_STARTED) && t->source == CA_ITER_DETECTED) {
            t->marks[CA_ITER_DETECTED]++;
            boundary(t, ticks);
        }
        t->pending = 0;
        live *l;
        HASH_FIND(hh, t->live, &ev->addr, sizeof(uintptr_t), l);
        if (l) { /* missed a free: forget the old one */
            HASH_DELETE(hh, t->live, l);
            t->n_live--;
            ca_site_stat *st = site_stat(t, l->site);
            if (st && st->live_count) st->live_count--, st->live_bytes -= l->size;
            t->allocated -= l->size;
            t->requested -= l->requested;
            live_put(t, l);
        }
        ca_site_stat *st = site_stat(t, site);
        if (!st) st = site_stat(t, site = CA_SITE_NONE);
        if (st) st->live_count++, st->live_bytes += ev->size, st->allocs++;
        if ((l = live_new(t))) {
            *l = (live){.addr = ev->addr, .size = ev->size, .requested = ev->requested, .birth_ticks = ticks,
                        .site = site, .birth_iter = t->iteration, .thread = th, .stream = sm};
            int hash_oom = 0;
            HASH_ADD(hh, t->live, addr, sizeof(uintptr_t), l);
            if (hash_oom) live_put(t, l);
            else t->n_live++;
        }
        t->n_allocs++;
        t->allocated += ev->size;
        t->requested += ev->requested;
        if (t->allocated > t->peak_allocated) t->peak_allocated = t->allocated;
        if (t->allocated > t->iter_peak_allocated) t->iter_peak_allocated = t->allocated;
        log_event(t, CA_EVK_ALLOC, ev->addr, ev->requested, ev->size, ticks, site, th, sm);
        if (match == CA_PERIOD_ENDS_AFTER)
            t->pending = 1; /* the next allocation starts an iteration */
        else if (t->detect_state == DETECT_TRYING && t->seq >= t->next_try)
            try_detect(t);
        break;
    }
    case CA_EV_FREE: {
        live *l;
        HASH_FIND(hh, t->live, &ev->addr, sizeof(uintptr_t), l);
        if (!l) {
            t->n_unknown_frees++; /* made before the tracker was attached */
            break;
        }
        HASH_DELETE(hh, t->live, l);
        t->n_live--;
        ca_site_stat *st = site_stat(t, l->site);
        if (st && st->live_count) st->live_count--, st->live_bytes -= l->size;
        t->n_frees++;
        t->allocated -= l->size;
        t->requested -= l->requested;
        log_event(t, CA_EVK_FREE, l->addr, l->requested, l->size, ticks, l->site, th, l->stream);
        live_put(t, l);
        break;
    }
    case CA_EV_SEGMENT_MAP:
        ranges_map(t, ev->addr, ev->size, sm);
        t->reserved += ev->size;
        if (t->reserved > t->peak_reserved) t->peak_reserved = t->reserved;
        if (t->reserved > t->iter_peak_reserved) t->iter_peak_reserved = t->reserved;
        log_event(t, CA_EVK_MAP, ev->addr, ev->size, ev->size, ticks, site, th, sm);
        break;
    case CA_EV_SEGMENT_UNMAP:
        ranges_unmap(t, ev->addr, ev->size);
        t->reserved -= ev->size < t->reserved ? ev->size : t->reserved;
        log_event(t, CA_EVK_UNMAP, ev->addr, ev->size, ev->size, ticks, site, th, sm);
        break;
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

void ca_tracker_observe(void *tracker, const ca_trace_event *ev) {
    ca_tracker *t = tracker;
    uint32_t site = CA_SITE_NONE;
    if (ev->kind == CA_EV_ALLOC || ev->kind == CA_EV_OOM)
        site = t->opt.capture_stacks ? ca_stacks_capture(t->stacks)
                                     : ca_tracker_size_site(t, ev->requested ? ev->requested : ev->size);
    else if ((ev->kind == CA_EV_SEGMENT_MAP || ev->kind == CA_EV_SEGMENT_UNMAP) && t->opt.capture_stacks)
        site = ca_stacks_capture(t->stacks); /* the call that made the allocator map (an allocation) or unmap */
    ca_tracker_record(t, ev, site, 0, 0);
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
        if (!same_point) boundary(t, ticks);
    }
    ca_lock_release(&t->lock);
}

/* ---- OOM judgement ---- */

void ca_tracker_oom(ca_tracker *t, const ca_oom_info *info) {
    ca_lock_acquire(&t->lock);
    /* Judging needs iterations: look for the loop now if it is still unknown. */
    if (t->detect_state == DETECT_TRYING && t->seq) try_detect(t);
    uint16_t th = thread_index(t, 0);
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
        /* What leaks hold now, and the sites holding the most. */
        uint32_t last = t->iteration ? t->iteration - 1 : 0;
        for (uint32_t s = 0; s <= t->max_site && s < t->cap_sites; s++) {
            ca_site_stat *st = &t->sites[s];
            if (!st->live_count) continue;
            ca_leak l;
            if (t->iteration && ca_site_leak(st, last, &l)) {
                r->leaked_bytes += l.leaked_bytes;
                r->n_leaks++;
            }
            size_t k = r->n_top;
            while (k > 0 && r->top_bytes[k - 1] < st->live_bytes) k--;
            if (k >= CA_OOM_TOP) continue;
            size_t end = r->n_top < CA_OOM_TOP ? r->n_top : CA_OOM_TOP - 1;
            memmove(&r->top_site[k + 1], &r->top_site[k], (end - k) * sizeof r->top_site[0]);
            memmove(&r->top_bytes[k + 1], &r->top_bytes[k], (end - k) * sizeof r->top_bytes[0]);
            memmove(&r->top_count[k + 1], &r->top_count[k], (end - k) * sizeof r->top_count[0]);
            r->top_site[k] = s;
            r->top_bytes[k] = st->live_bytes;
            r->top_count[k] = st->live_count;
            if (r->n_top < CA_OOM_TOP) r->n_top++;
        }
        r->verdict = ca_oom_judge(info, r->leaked_bytes);
    }
    ca_lock_release(&t->lock);
}

/* ---- reading ---- */

size_t ca_tracker_memory(ca_tracker *t, size_t *live_allocations) {
    ca_lock_acquire(&t->lock);
    size_t bytes = sizeof *t + t->n_slabs * sizeof(slab) + t->cap_sites * (sizeof *t->sites + 1) +
                   t->cap_dirty * sizeof *t->dirty_list + t->cap_bounds * sizeof *t->bounds +
                   t->cap_ranges * sizeof *t->ranges + CA_MAX_OOM_RECORDS * sizeof *t->ooms +
                   (t->cap_threads + t->cap_streams) * sizeof(uint64_t);
    if (t->live) bytes += t->live->hh.tbl->num_buckets * sizeof(UT_hash_bucket) + sizeof(UT_hash_table);
    if (t->ring) bytes += (t->seq < t->ring_cap ? t->seq : t->ring_cap) * sizeof *t->ring;
    if (live_allocations) *live_allocations = t->n_live;
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

int ca_tracker_snapshot(ca_tracker *t, ca_track_snap *s) {
    memset(s, 0, sizeof *s);
    ca_clock_ref now;
    ca_clock_ref_now(&now);
    ca_lock_acquire(&t->lock);
    if (t->detect_state == DETECT_TRYING && t->seq) try_detect(t);
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

    if (t->n_live && !(s->live = malloc(t->n_live * sizeof *s->live))) goto fail;
    for (live *l = t->live; l; l = l->hh.next)
        s->live[s->n_live++] = (ca_live_view){l->addr, l->size, l->requested, l->birth_ticks,
                                              l->site, l->birth_iter, l->thread, l->stream};
    size_t ns = 0;
    for (uint32_t i = 0; i <= t->max_site && i < t->cap_sites; i++) ns += t->sites[i].allocs > 0;
    if (ns && !(s->sites = malloc(ns * sizeof *s->sites))) goto fail;
    for (uint32_t i = 0; i <= t->max_site && i < t->cap_sites; i++) {
        if (!t->sites[i].allocs) continue;
        s->sites[s->n_sites++] = t->sites[i];
    }
    size_t kept = t->ring ? (t->seq < t->ring_cap ? t->seq : t->ring_cap) : 0;
    if (kept && !(s->events = malloc(kept * sizeof *s->events))) goto fail;
    s->first_seq = t->seq - kept;
    for (size_t i = 0; i < kept; i++) s->events[i] = t->ring[(s->first_seq + i) % t->ring_cap];
    s->n_events = kept;
    DUP(s->bounds, t->bounds, t->n_bounds);
    s->n_bounds = t->n_bounds;
    DUP(s->ranges, t->ranges, t->n_ranges);
    s->n_ranges = t->n_ranges;
    DUP(s->ooms, t->ooms, t->n_ooms);
    s->n_ooms = t->n_ooms;
    DUP(s->threads, t->threads, t->n_threads);
    s->n_threads = t->n_threads;
    DUP(s->streams, t->streams, t->n_streams);
    s->n_streams = t->n_streams;
    ca_lock_release(&t->lock);
    if (s->n_live) qsort(s->live, s->n_live, sizeof *s->live, by_addr);
    return 0;
fail:
    ca_lock_release(&t->lock);
    ca_track_snap_free(s);
    return -1;
}

void ca_track_snap_free(ca_track_snap *s) {
    free(s->live);
    free(s->sites);
    free(s->events);
    free(s->bounds);
    free(s->ranges);
    free(s->ooms);
    free(s->threads);
    free(s->streams);
    memset(s, 0, sizeof *s);
}

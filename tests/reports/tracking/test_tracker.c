/* Tracker bookkeeping: live allocations and their fields, sites, mapped
 * ranges, iteration sources in order of trust, the memory per allocation,
 * the allocator's observer (call sites captured, several threads at once). */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <pthread.h>
#include <sys/syscall.h>

#include <stdio.h>
#include <string.h>

#include "allocator/allocator.h"
#include "reports/track/tracker_internal.h"
#include "reports/diagnose/oom.h"
#include "tests/reports/tracking/sim.h"

static ca_live_view *find_live(ca_track_snap *s, uintptr_t addr) {
    for (size_t i = 0; i < s->n_live; i++)
        if (s->live[i].addr == addr) return &s->live[i];
    return NULL;
}

START_TEST(bookkeeping) {
    ca_tracker *t = sim_tracker(0);
    uint32_t sa = sim_site(t, 1), sb = sim_site(t, 2);
    ca_trace_event a = {CA_EV_ALLOC, 0x10000, 1024, 1000, 7};
    ca_trace_event b = {CA_EV_ALLOC, 0x20000, 4096, 4000, 9};
    ca_tracker_record(t, &a, sa, 0, 0);
    ca_tracker_step(t, CA_ITER_EXPLICIT);
    ca_tracker_record(t, &b, sb, 4242, 0);
    ca_trace_event fa = {CA_EV_FREE, 0x10000, 1024, 1000, 7};
    ca_trace_event unknown = {CA_EV_FREE, 0x30000, 512, 512, 7};
    ca_track_snap s;
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_eq(s.n_live, 2);
    ck_assert_uint_eq(s.allocated, 1024 + 4096);
    ck_assert_uint_eq(s.requested, 1000 + 4000);
    ca_live_view *la = find_live(&s, 0x10000), *lb = find_live(&s, 0x20000);
    ck_assert_ptr_nonnull(la);
    ck_assert_ptr_nonnull(lb);
    ck_assert_uint_eq(la->size, 1024);
    ck_assert_uint_eq(la->requested, 1000);
    ck_assert_uint_eq(la->site, sa);
    ck_assert_uint_eq(la->birth_iteration, 0);
    ck_assert_uint_eq(lb->birth_iteration, 1);
    ck_assert_uint_eq(s.streams[la->stream], 7);
    ck_assert_uint_eq(s.streams[lb->stream], 9);
    ck_assert_uint_eq(s.threads[la->thread], (uint64_t)syscall(SYS_gettid));
    ck_assert_uint_eq(s.threads[lb->thread], 4242);
    ck_assert_uint_lt(la->birth_ticks, lb->birth_ticks);
    ck_assert_uint_eq(s.live[0].addr, 0x10000); /* by address */
    ca_track_snap_free(&s);

    ca_tracker_record(t, &fa, 0, 0, 0);
    ca_tracker_record(t, &unknown, 0, 0, 0);
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_eq(s.n_live, 1);
    ck_assert_uint_eq(s.allocated, 4096);
    ck_assert_uint_eq(s.n_frees, 1);
    ck_assert_uint_eq(s.n_unknown_frees, 1);
    ck_assert_uint_eq(s.n_allocs, 2);
    ck_assert_uint_eq(s.peak_allocated, 1024 + 4096);
    /* The ring: alloc, alloc, free (the unknown free is not an event). */
    ck_assert_uint_eq(s.n_events, 3);
    ck_assert_int_eq(ca_ev_kind(&s.events[2]), CA_EVK_FREE);
    ck_assert_uint_eq(ca_ev_bytes(&s.events[2]), 1000);
    ck_assert_uint_eq(ca_ev_block(&s.events[2]), 1024);
    ck_assert_uint_eq(s.events[2].site, sa);
    /* Sites: a's count back to 0, b's 1. */
    for (size_t i = 0; i < s.n_sites; i++) {
        if (s.sites[i].site == sa) ck_assert_uint_eq(s.sites[i].live_count, 0);
        if (s.sites[i].site == sb) ck_assert_uint_eq(s.sites[i].live_bytes, 4096);
    }
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

/* An allocation at an address still live (its free was missed): the old
 * one is forgotten first, so it counts in no figure, peak included. */
START_TEST(allocation_at_a_live_address) {
    ca_tracker *t = sim_tracker(0);
    uint32_t sa = sim_site(t, 1), sb = sim_site(t, 2);
    ca_trace_event a = {CA_EV_ALLOC, 0x10000, 1024, 1000, 7};
    ca_trace_event b = {CA_EV_ALLOC, 0x10000, 4096, 4000, 7};
    ca_trace_event fb = {CA_EV_FREE, 0x10000, 4096, 4000, 7};
    ca_tracker_record(t, &a, sa, 0, 0);
    ca_tracker_record(t, &b, sb, 0, 0);
    ca_track_snap s;
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_eq(s.n_live, 1);
    ck_assert_uint_eq(s.live[0].site, sb);
    ck_assert_uint_eq(s.live[0].size, 4096);
    ck_assert_uint_eq(s.allocated, 4096);
    ck_assert_uint_eq(s.requested, 4000);
    ck_assert_uint_eq(s.peak_allocated, 4096);
    for (size_t i = 0; i < s.n_sites; i++) {
        if (s.sites[i].site == sa) ck_assert_uint_eq(s.sites[i].live_count, 0);
        if (s.sites[i].site == sb) ck_assert_uint_eq(s.sites[i].live_count, 1);
    }
    ca_track_snap_free(&s);
    ca_tracker_record(t, &fb, 0, 0, 0);
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_eq(s.n_live, 0);
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_eq(s.n_unknown_frees, 0);
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

/* The kernel's transparent huge pages: 1 on request ("[madvise]"), 2 for
 * all memory ("[always]"), 0 none (or not said). */
static int thp_mode(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (!f) return 0;
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    return strstr(line, "[madvise]") ? 1 : strstr(line, "[always]") ? 2 : 0;
}

/* The mapping's THPeligible flag in /proc/self/smaps; -1 when not shown. */
static int thp_eligible(uintptr_t addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[256];
    int in = 0, flag = -1;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = addr >= lo && addr < hi; /* a mapping's first line */
        else if (in && sscanf(line, "THPeligible: %d", &flag) == 1) break;
    }
    if (f) fclose(f);
    return flag;
}

/* The event ring (4 MiB here) starts on a huge page boundary and asks for
 * huge pages past its first 2 MiB: filled once, it takes a page fault each
 * 65536 events there rather than each 128; a short run keeps small pages. */
START_TEST(ring_asks_for_huge_pages) {
    ca_tracker_options o;
    ca_tracker_options_default(&o);
    o.trace_events = (size_t)1 << 17;
    o.detect = 0;
    ca_tracker *t = ca_tracker_new(&o);
    ca_trace_event a = {CA_EV_ALLOC, 0x10000, 1024, 1000, 7};
    ca_tracker_record(t, &a, CA_SITE_NONE, 0, 0);
    ck_assert_ptr_nonnull(t->ring);
    ck_assert_uint_eq((uintptr_t)t->ring % ((size_t)2 << 20), 0);
    int mode = thp_mode();
    int first = thp_eligible((uintptr_t)t->ring), rest = thp_eligible((uintptr_t)t->ring + ((size_t)2 << 20));
    if (mode && rest >= 0) ck_assert_int_eq(rest, 1); /* older kernels do not say */
    if (mode == 1 && first >= 0) ck_assert_int_eq(first, 0);
    ca_tracker_destroy(t);
}
END_TEST

START_TEST(ranges_merge_and_split) {
    ca_tracker *t = sim_tracker(0);
    const uintptr_t B = 0x7000000000;
    const size_t G = 2 * MIB;
    ca_trace_event m[] = {
        {CA_EV_SEGMENT_MAP, B, G, 0, 0},         {CA_EV_SEGMENT_MAP, B + 2 * G, G, 0, 0},
        {CA_EV_SEGMENT_MAP, B + G, G, 0, 0},     /* joins both */
        {CA_EV_SEGMENT_MAP, B + 3 * G, G, 0, 5}, /* another stream: apart */
        {CA_EV_SEGMENT_UNMAP, B + G, G, 0, 0},   /* splits */
    };
    for (size_t i = 0; i < 5; i++) ca_tracker_record(t, &m[i], 0, 0, 0);
    ca_track_snap s;
    ca_tracker_snapshot(t, &s);
    ck_assert_uint_eq(s.n_ranges, 3);
    ck_assert_uint_eq(s.ranges[0].addr, B);
    ck_assert_uint_eq(s.ranges[0].size, G);
    ck_assert_uint_eq(s.ranges[1].addr, B + 2 * G);
    ck_assert_uint_eq(s.ranges[1].size, G);
    ck_assert_uint_eq(s.streams[s.ranges[2].stream], 5);
    ck_assert_uint_eq(s.reserved, 3 * G);
    ck_assert_uint_eq(s.peak_reserved, 4 * G);
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

START_TEST(sources_in_order_of_trust) {
    ca_tracker *t = sim_tracker(1);
    ca_tracker_step(t, CA_ITER_NVTX);
    ca_tracker_step(t, CA_ITER_NVTX);
    ca_tracker_step(t, CA_ITER_DETECTED); /* not a source one may give */
    ca_track_snap s;
    ca_tracker_snapshot(t, &s);
    ck_assert_int_eq(s.source, CA_ITER_NVTX);
    ck_assert_uint_eq(s.iteration, 2);
    ck_assert_int_eq(s.detect_state, 0); /* marks arrived: no detection */
    ca_track_snap_free(&s);
    /* explicit marks the very point the last NVTX mark did: it takes it over */
    ca_tracker_step(t, CA_ITER_EXPLICIT);
    ca_tracker_step(t, CA_ITER_NVTX); /* less trusted now: counted, ignored */
    ca_tracker_step(t, CA_ITER_EXPLICIT);
    ca_tracker_snapshot(t, &s);
    ck_assert_int_eq(s.source, CA_ITER_EXPLICIT);
    ck_assert_uint_eq(s.iteration, 3);
    ck_assert_uint_eq(s.marks[CA_ITER_NVTX], 3);
    ck_assert_uint_eq(s.marks[CA_ITER_EXPLICIT], 2);
    ck_assert_uint_eq(s.n_bounds, 3);
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

/* A program that ends each step with both an NVTX range and cudalloc_step()
 * (as the demo trainer does) has as many iterations as steps. */
START_TEST(step_marked_both_ways_counts_once) {
    sim sm = {sim_tracker(1), 0, 1};
    for (int step = 0; step < 5; step++) {
        uintptr_t a = sim_alloc(&sm, 4096, 1);
        sim_free(&sm, a, 4096);
        ca_tracker_step(sm.t, CA_ITER_NVTX);
        ca_tracker_step(sm.t, CA_ITER_EXPLICIT);
    }
    ca_track_snap s;
    ca_tracker_snapshot(sm.t, &s);
    ck_assert_int_eq(s.source, CA_ITER_EXPLICIT);
    ck_assert_uint_eq(s.iteration, 5);
    ck_assert_uint_eq(s.n_bounds, 5);
    ca_track_snap_free(&s);
    ca_tracker_destroy(sm.t);
}
END_TEST

START_TEST(detected_live_after_detection) {
    /* Once found (here when a report asks), later iterations are marked as
     * they happen, by the anchor. */
    sim s = {sim_tracker(1), 0, 1};
    loop_state L;
    loop_setup(&s, &L);
    for (int i = 0; i < 10; i++) loop_iteration(&s, &L, 0);
    ca_track_snap snap;
    ca_tracker_snapshot(s.t, &snap);
    ck_assert_int_eq(snap.source, CA_ITER_DETECTED);
    uint32_t before = snap.iteration;
    ca_track_snap_free(&snap);
    for (int i = 0; i < 5; i++) loop_iteration(&s, &L, 0);
    ca_tracker_snapshot(s.t, &snap);
    ck_assert_uint_eq(snap.iteration, before + 5);
    ck_assert_uint_eq(snap.marks[CA_ITER_DETECTED], 5);
    /* Boundaries at the same point of each iteration: same live count. */
    for (size_t i = snap.n_bounds - 5; i < snap.n_bounds; i++)
        ck_assert_uint_eq(snap.bounds[i].live_count, snap.bounds[snap.n_bounds - 1].live_count);
    ca_track_snap_free(&snap);
    /* An explicit mark takes over. */
    ca_tracker_step(s.t, CA_ITER_EXPLICIT);
    loop_iteration(&s, &L, 0);
    ca_tracker_snapshot(s.t, &snap);
    ck_assert_int_eq(snap.source, CA_ITER_EXPLICIT);
    ck_assert_uint_eq(snap.iteration, before + 6);
    ca_track_snap_free(&snap);
    ca_tracker_destroy(s.t);
}
END_TEST

START_TEST(memory_per_allocation) {
    /* Without the ring (its cost is per event, not per live allocation). */
    ca_tracker_options o;
    ca_tracker_options_default(&o);
    o.trace_events = 0;
    ca_tracker *t = ca_tracker_new(&o);
    uint32_t sites[64];
    for (unsigned i = 0; i < 64; i++) sites[i] = sim_site(t, i);
    size_t base = ca_tracker_memory(t, NULL), live;
    const size_t N = 200000;
    for (size_t i = 0; i < N; i++) {
        ca_trace_event a = {CA_EV_ALLOC, 0x100000000 + i * 1024, 1024, 1000, 0};
        ca_tracker_record(t, &a, sites[i % 64], 0, 0);
    }
    size_t mem = ca_tracker_memory(t, &live);
    ck_assert_uint_eq(live, N);
    double per = (double)(mem - base) / (double)N;
    fprintf(stderr, "tracker memory: %.1f bytes per live allocation\n", per);
    ck_assert_double_le(per, 200.0);
    ca_tracker_destroy(t);
}
END_TEST

/* ---- through the allocator ---- */

static ca_allocator *count_allocator(size_t capacity, int expandable) {
    ca_options o;
    ca_options_default(&o);
    o.expandable = expandable;
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(ca_backend_count_new(capacity, 2 * MIB), &o, &a), CA_OK);
    return a;
}

static __attribute__((noinline)) void *from_site_one(ca_allocator *a, size_t n) {
    void *p = NULL;
    ca_malloc(a, n, 0, &p, NULL);
    __asm__ volatile("" ::: "memory");
    return p;
}
static __attribute__((noinline)) void *from_site_two(ca_allocator *a, size_t n) {
    void *p = NULL;
    ca_malloc(a, n, 0, &p, NULL);
    __asm__ volatile("nop" ::: "memory");
    return p;
}

START_TEST(observer_captures_sites) {
    ca_allocator *a = count_allocator(0, 1);
    ca_tracker *t = ca_tracker_new(NULL);
    ca_tracker_attach(t, a);
    void *p[6];
    for (volatile int i = 0; i < 3; i++) p[i] = from_site_one(a, 3 * MIB);
    for (volatile int i = 3; i < 6; i++) p[i] = from_site_two(a, 1000);
    ca_track_snap s;
    ca_tracker_snapshot(t, &s);
    ck_assert_uint_eq(s.n_live, 6);
    ck_assert_uint_eq(find_live(&s, (uintptr_t)p[0])->site, find_live(&s, (uintptr_t)p[2])->site);
    ck_assert_uint_ne(find_live(&s, (uintptr_t)p[0])->site, find_live(&s, (uintptr_t)p[3])->site);
    ck_assert_uint_ne(find_live(&s, (uintptr_t)p[0])->site, CA_SITE_NONE);
    /* The mapped ranges are what the allocator reserved. */
    ca_stats st;
    ca_get_stats(a, &st);
    ck_assert_uint_eq(s.reserved, (uint64_t)st.reserved_bytes[CA_POOL_ALL].current);
    ck_assert_uint_eq(s.allocated, (uint64_t)st.allocated_bytes[CA_POOL_ALL].current);
    uint64_t mapped = 0;
    for (size_t i = 0; i < s.n_ranges; i++) mapped += s.ranges[i].size;
    ck_assert_uint_eq(mapped, s.reserved);
    ca_track_snap_free(&s);
    for (int i = 0; i < 6; i++) ca_free(a, p[i], 0);
    ca_release(a);
    ca_tracker_snapshot(t, &s);
    ck_assert_uint_eq(s.n_live, 0);
    ca_get_stats(a, &st);
    ck_assert_uint_eq(s.reserved, (uint64_t)st.reserved_bytes[CA_POOL_ALL].current);
    ca_track_snap_free(&s);
    ca_tracker_detach(t, a);
    ca_tracker_destroy(t);
    ca_allocator_destroy(a);
}
END_TEST

typedef struct worker {
    ca_allocator *a;
    int stream;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    void *ring[16] = {0};
    for (int i = 0; i < 20000; i++) {
        int k = i % 16;
        if (ring[k]) ca_free(w->a, ring[k], (ca_stream)w->stream);
        ca_malloc(w->a, 512 + (size_t)(i % 7) * 4096, (ca_stream)w->stream, &ring[k], NULL);
    }
    for (int k = 0; k < 16; k++)
        if (ring[k]) ca_free(w->a, ring[k], (ca_stream)w->stream);
    return NULL;
}

/* The allocator keeps the tracker's tag in each block: frees find their
 * entries by it, in any order and at any count; blocks allocated before a
 * tracker was attached, or under another one, are unknown frees (their tags
 * are not its own), and never take one of its entries. */
START_TEST(frees_find_their_entries_by_the_blocks_tag) {
    ca_allocator *a = count_allocator(0, 1);
    enum { N = 5000 };
    struct {
        void *p;
        size_t size;
        bool tracked;
    } *x = calloc(N, sizeof *x);
    ca_tracker *t = ca_tracker_new(NULL);
    for (int i = 0; i < N; i++) { /* the first half before the tracker is attached */
        if (i == N / 2) ca_tracker_attach(t, a);
        x[i].size = 512 + (size_t)(i % 7) * 1024, x[i].tracked = i >= N / 2;
        ck_assert_int_eq(ca_malloc(a, x[i].size, 0, &x[i].p, NULL), CA_OK);
    }
    srand(29);
    for (int i = N - 1; i > 0; i--) { /* frees in a random order */
        int j = rand() % (i + 1);
        __typeof__(*x) y = x[i];
        x[i] = x[j], x[j] = y;
    }
    uint64_t frees = 0, live_bytes = 0;
    for (int i = 0; i < N; i++)
        if (i < N / 2) ca_free(a, x[i].p, 0), frees += x[i].tracked;
        else live_bytes += x[i].tracked ? x[i].size : 0;
    ca_track_snap s;
    ca_tracker_snapshot(t, &s);
    ck_assert_uint_eq(s.n_allocs, N / 2);
    ck_assert_uint_eq(s.n_frees, frees);
    ck_assert_uint_eq(s.n_unknown_frees, N / 2 - frees);
    ck_assert_uint_eq(s.n_live, N / 2 - frees);
    ck_assert_uint_eq(s.allocated, live_bytes);
    ck_assert_uint_eq(s.requested, live_bytes);
    for (size_t i = 0; i < s.n_live; i++) /* each listed once, by address */
        ck_assert(i == 0 || s.live[i].addr > s.live[i - 1].addr);
    ca_track_snap_free(&s);
    /* another tracker: every block live now was the first's or none's */
    ca_tracker_detach(t, a);
    ca_tracker *t2 = ca_tracker_new(NULL);
    ca_tracker_attach(t2, a);
    void *q[8];
    for (int i = 0; i < 8; i++) ca_malloc(a, 4096, 0, &q[i], NULL); /* its own, in blocks with tags of old */
    for (int i = N / 2; i < N; i++) ca_free(a, x[i].p, 0);
    ca_tracker_snapshot(t2, &s);
    ck_assert_uint_eq(s.n_live, 8);
    ck_assert_uint_eq(s.n_frees, 0);
    ck_assert_uint_eq(s.n_unknown_frees, N / 2);
    ca_track_snap_free(&s);
    for (int i = 0; i < 8; i++) ca_free(a, q[i], 0);
    ca_tracker_snapshot(t2, &s);
    ck_assert_uint_eq(s.n_live, 0);
    ck_assert_uint_eq(s.n_frees, 8);
    ck_assert_uint_eq(s.allocated, 0);
    ca_track_snap_free(&s);
    ca_tracker_detach(t2, a);
    ca_tracker_destroy(t2);
    ca_tracker_destroy(t);
    ca_allocator_destroy(a);
    free(x);
}
END_TEST

START_TEST(threads_on_streams) {
    ca_allocator *a = count_allocator(0, 1);
    ca_tracker *t = ca_tracker_new(NULL);
    ca_tracker_attach(t, a);
    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){a, i + 1};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    ca_track_snap s;
    ca_tracker_snapshot(t, &s);
    ck_assert_uint_eq(s.n_live, 0);
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_eq(s.n_allocs, 4 * 20000);
    ck_assert_uint_eq(s.n_frees, 4 * 20000);
    ck_assert_uint_eq(s.n_threads, 4);
    /* the four, and stream 0: the shared pool's segment (its blocks are
     * any stream's: allocator/share.c), where these streams' small blocks are */
    ck_assert_uint_eq(s.n_streams, 5);
    int zero = 0;
    for (size_t i = 0; i < s.n_streams; i++) zero += s.streams[i] == 0;
    ck_assert_int_eq(zero, 1);
    ca_track_snap_free(&s);
    ca_tracker_detach(t, a);
    ca_tracker_destroy(t);
    ca_allocator_destroy(a);
}
END_TEST

/* A long run makes streams and threads by the hundred thousand: each keeps
 * its own id in the reports (the tables once stopped at 65,535, and every
 * later one showed as stream 0 and thread 0), and a new one costs the same
 * at the end as at the start. */
START_TEST(streams_and_threads_past_65535) {
    ca_tracker *t = sim_tracker(0);
    uint32_t site = sim_site(t, 1);
    const uint64_t N = 100000;
    for (uint64_t i = 0; i < N; i++) {
        ca_trace_event a = {CA_EV_ALLOC, 0x100000000 + i * 1024, 512, 512, 0x7000000 + i * 16};
        ca_tracker_record(t, &a, site, 1000 + i, 0);
        ca_trace_event m = {CA_EV_SEGMENT_MAP, 0x800000000 + i * 4096, 4096, 0, 0x7000000 + i * 16};
        ca_tracker_record(t, &m, 0, 1000 + i, 0);
    }
    ca_track_snap s;
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_eq(s.n_streams, N);
    ck_assert_uint_eq(s.n_threads, N);
    for (uint64_t i = 0; i < N; i += 7919) {
        const ca_live_view *l = find_live(&s, 0x100000000 + i * 1024);
        ck_assert_ptr_nonnull(l);
        ck_assert_uint_eq(s.streams[l->stream], 0x7000000 + i * 16);
        ck_assert_uint_eq(s.threads[l->thread], 1000 + i);
    }
    /* The ring's events (a MAP last) name them too. */
    const ca_ev *last = &s.events[s.n_events - 1];
    ck_assert_int_eq(ca_ev_kind(last), CA_EVK_MAP);
    ck_assert_uint_eq(ca_ev_stream(&s, last), 0x7000000 + (N - 1) * 16);
    ck_assert_uint_eq(ca_ev_thread(&s, last), 1000 + N - 1);
    /* Touching ranges of different streams stay apart, past 65,535 too. */
    ck_assert_uint_eq(s.n_ranges, N);
    ck_assert_uint_eq(s.streams[s.ranges[N - 1].stream], 0x7000000 + (N - 1) * 16);
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

/* cudalloc's classic segments (expandable_segments:false) are each one
 * device allocation: the reports keep them apart however they touch (they
 * were joined into one, whose free blocks no allocation could use). */
START_TEST(classic_segments_stay_apart) {
    ca_allocator *a = count_allocator(0, 0);
    ca_tracker *t = ca_tracker_new(NULL);
    ca_tracker_attach(t, a);
    void *p[4];
    for (int i = 0; i < 3; i++) ck_assert_int_eq(ca_malloc(a, MIB, 0, &p[i], NULL), CA_OK);
    ck_assert_int_eq(ca_malloc(a, 3 * MIB, 0, &p[3], NULL), CA_OK);
    ca_track_snap s;
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_eq(s.n_ranges, 3);
    int small = 0, large = 0;
    for (size_t i = 0; i < s.n_ranges; i++) {
        ck_assert_int_eq(s.ranges[i].kind.whole, 1);
        ck_assert_int_eq(s.ranges[i].kind.expandable, 0);
        small += s.ranges[i].kind.pool == 1 && s.ranges[i].size == 2 * MIB;
        large += s.ranges[i].kind.pool == 2;
    }
    ck_assert_int_eq(small, 2);
    ck_assert_int_eq(large, 1);
    ca_track_snap_free(&s);
    /* Released whole: one segment of each pool back to the device. */
    for (int i = 0; i < 4; i++) ca_free(a, p[i], 0);
    ca_release(a);
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_eq(s.n_ranges, 0);
    ca_track_snap_free(&s);
    ca_tracker_detach(t, a);
    ca_tracker_destroy(t);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(oom_record) {
    ca_allocator *a = count_allocator(16 * MIB, 1);
    ca_tracker *t = ca_tracker_new(NULL);
    ca_tracker_attach(t, a);
    void *p, *q;
    ck_assert_int_eq(ca_malloc(a, 12 * MIB, 0, &p, NULL), CA_OK);
    ca_oom_info info;
    ck_assert_int_eq(ca_malloc(a, 8 * MIB, 0, &q, &info), CA_ERR_OOM);
    ca_oom_diagnose(t, &info);
    ca_track_snap s;
    ca_tracker_snapshot(t, &s);
    ck_assert_uint_eq(s.n_ooms, 1);
    ck_assert_uint_eq(s.n_ooms_total, 1);
    const ca_oom_record *r = &s.ooms[0];
    ck_assert_int_eq(r->have_info, 1);
    ck_assert_uint_eq(r->requested, 8 * MIB);
    ck_assert_uint_eq(r->info.device_total, 16 * MIB);
    ck_assert_uint_ne(r->site, CA_SITE_NONE);
    ck_assert_uint_eq(r->n_top, 1);
    ck_assert_uint_eq(r->top_bytes[0], 12 * MIB);
    ck_assert_int_eq(r->verdict, CA_OOM_NOT_THERE);
    ck_assert_int_eq(ca_ev_kind(&s.events[s.n_events - 1]), CA_EVK_OOM);
    ca_track_snap_free(&s);
    ca_free(a, p, 0);
    ca_tracker_detach(t, a);
    ca_tracker_destroy(t);
    ca_allocator_destroy(a);
}
END_TEST

START_TEST(ring_keeps_the_latest) {
    ca_tracker_options o;
    ca_tracker_options_default(&o);
    o.trace_events = 100;
    ca_tracker *t = ca_tracker_new(&o);
    uint32_t site = sim_site(t, 1);
    for (uintptr_t i = 0; i < 1000; i++) {
        ca_trace_event a = {CA_EV_ALLOC, 0x1000 * (i + 1), 512, 512, 0};
        ca_tracker_record(t, &a, site, 0, 0);
    }
    ca_track_snap s;
    ca_tracker_snapshot(t, &s);
    ck_assert_uint_eq(s.n_events, 100);
    ck_assert_uint_eq(s.first_seq, 900);
    ck_assert_uint_eq(s.events[0].addr, 0x1000 * 901);
    ck_assert_uint_eq(s.events[99].addr, 0x1000 * 1000);
    ck_assert_int_eq(s.detect_state, 3); /* the ring wrapped: detection gave up */
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("tracker");
    TCase *tc = tcase_create("tracker");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bookkeeping);
    tcase_add_test(tc, allocation_at_a_live_address);
    tcase_add_test(tc, ring_asks_for_huge_pages);
    tcase_add_test(tc, ranges_merge_and_split);
    tcase_add_test(tc, sources_in_order_of_trust);
    tcase_add_test(tc, step_marked_both_ways_counts_once);
    tcase_add_test(tc, detected_live_after_detection);
    tcase_add_test(tc, memory_per_allocation);
    tcase_add_test(tc, observer_captures_sites);
    tcase_add_test(tc, frees_find_their_entries_by_the_blocks_tag);
    tcase_add_test(tc, threads_on_streams);
    tcase_add_test(tc, streams_and_threads_past_65535);
    tcase_add_test(tc, classic_segments_stay_apart);
    tcase_add_test(tc, oom_record);
    tcase_add_test(tc, ring_keeps_the_latest);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

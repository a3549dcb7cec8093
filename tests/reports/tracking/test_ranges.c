/* track/ranges: segments kept as their allocator made them. Classic
 * segments that touch stay apart (and their free blocks with them, through
 * the tracker and the fragmentation figures); expandable pieces of one
 * stream and pool join, and split where their middle is unmapped. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>

#include "reports/diagnose/fragmentation.h"
#include "reports/track/ranges.h"

#define MIB ((uint64_t)1 << 20)
#define B ((uintptr_t)1 << 40)

static ca_range_kind classic(int pool) {
    ca_range_kind k = ca_range_kind_default();
    k.whole = 1;
    k.expandable = 0;
    k.pool = (uint8_t)pool;
    return k;
}

static ca_range_kind expandable(int pool) {
    ca_range_kind k = ca_range_kind_default();
    k.expandable = 1;
    k.pool = (uint8_t)pool;
    return k;
}

static void map(ca_range_set *s, uintptr_t addr, uint64_t size, uint64_t stream, ca_range_kind k) {
    ca_range r = {addr, size, stream, k};
    ck_assert_int_eq(ca_ranges_map(s, &r), 0);
}

static void is(const ca_range_set *s, size_t i, uintptr_t addr, uint64_t size) {
    ck_assert_uint_lt(i, s->n);
    ck_assert_uint_eq(s->v[i].addr, addr);
    ck_assert_uint_eq(s->v[i].size, size);
}

START_TEST(classic_segments_stay_apart) {
    ca_range_set s = {0};
    /* three segments side by side, mapped out of order: three ranges */
    map(&s, B + 20 * MIB, 2 * MIB, 0, classic(1));
    map(&s, B, 20 * MIB, 0, classic(2));
    map(&s, B + 22 * MIB, 24 * MIB, 0, classic(2));
    ck_assert_uint_eq(s.n, 3);
    is(&s, 0, B, 20 * MIB);
    is(&s, 1, B + 20 * MIB, 2 * MIB);
    ck_assert_int_eq(s.v[1].kind.pool, 1);
    is(&s, 2, B + 22 * MIB, 24 * MIB);
    /* segment_free: the whole segment at that address goes */
    ck_assert_int_eq(ca_ranges_unmap(&s, B + 20 * MIB, 2 * MIB, 1), 0);
    ck_assert_uint_eq(s.n, 2);
    is(&s, 1, B + 22 * MIB, 24 * MIB);
    /* and comes back (the trace undone): still apart */
    map(&s, B + 20 * MIB, 2 * MIB, 0, classic(1));
    ck_assert_uint_eq(s.n, 3);
    ca_ranges_free(&s);
}
END_TEST

START_TEST(expandable_pieces_join_and_split) {
    ca_range_set s = {0};
    map(&s, B, 2 * MIB, 0, expandable(2));
    map(&s, B + 4 * MIB, 2 * MIB, 0, expandable(0)); /* pool not said: takes its neighbours' */
    map(&s, B + 2 * MIB, 2 * MIB, 0, expandable(2)); /* fills the gap: one range */
    ck_assert_uint_eq(s.n, 1);
    is(&s, 0, B, 6 * MIB);
    ck_assert_int_eq(s.v[0].kind.pool, 2);
    /* not joined: another stream, another pool, a private pool, a classic segment */
    map(&s, B + 6 * MIB, 2 * MIB, 3, expandable(2));
    map(&s, B - 2 * MIB, 2 * MIB, 0, expandable(1));
    ca_range_kind graph = expandable(2);
    graph.pool_id[0] = 1, graph.pool_id[1] = 2;
    map(&s, B + 8 * MIB, 2 * MIB, 3, graph);
    map(&s, B + 10 * MIB, 2 * MIB, 3, classic(2));
    ck_assert_uint_eq(s.n, 5);
    is(&s, 1, B, 6 * MIB);
    /* the middle unmapped: two pieces; the start: what is left */
    ck_assert_int_eq(ca_ranges_unmap(&s, B + 2 * MIB, 2 * MIB, 0), 0);
    ck_assert_uint_eq(s.n, 6);
    is(&s, 1, B, 2 * MIB);
    is(&s, 2, B + 4 * MIB, 2 * MIB);
    ck_assert_int_eq(s.v[2].kind.pool, 2);
    ck_assert_int_eq(ca_ranges_unmap(&s, B - 2 * MIB, 4 * MIB, 0), 0); /* over two ranges */
    ck_assert_uint_eq(s.n, 4);
    is(&s, 0, B + 4 * MIB, 2 * MIB);
    ca_ranges_free(&s);
}
END_TEST

/* A bad trace maps over what is mapped: what it covers is replaced, never
 * two ranges over one byte; an address near the top does not wrap. */
START_TEST(overlaps_replace) {
    ca_range_set s = {0};
    map(&s, B, 20 * MIB, 0, classic(2));
    map(&s, B + 10 * MIB, 20 * MIB, 0, classic(2));
    ck_assert_uint_eq(s.n, 2);
    is(&s, 0, B, 10 * MIB);
    is(&s, 1, B + 10 * MIB, 20 * MIB);
    map(&s, UINTPTR_MAX - MIB, 4 * MIB, 0, expandable(2));
    is(&s, 2, UINTPTR_MAX - MIB, MIB);
    ck_assert_int_eq(ca_ranges_unmap(&s, B + 5 * MIB, UINT64_MAX, 0), 0);
    ck_assert_uint_eq(s.n, 1);
    is(&s, 0, B, 5 * MIB);
    ca_ranges_free(&s);
}
END_TEST

/* Through the tracker: two classic segments side by side, both free, are
 * two free blocks of 20 MiB, not one of 40; expandable maps side by side
 * are one segment. */
START_TEST(tracker_and_fragmentation) {
    ca_tracker *t = ca_tracker_new(NULL);
    ca_range_kind k = classic(2);
    ca_trace_event m = {CA_EV_SEGMENT_MAP, B, 20 * MIB, 20 * MIB, 0};
    ca_tracker_record_range(t, &m, &k, CA_SITE_NONE, 0);
    m.addr += 20 * MIB;
    ca_tracker_record_range(t, &m, &k, CA_SITE_NONE, 0);
    ca_trace_event e = {CA_EV_SEGMENT_MAP, B + 64 * MIB, 2 * MIB, 2 * MIB, 0};
    ca_tracker_record(t, &e, CA_SITE_NONE, 0, 0);
    e.addr += 2 * MIB;
    ca_tracker_record(t, &e, CA_SITE_NONE, 0, 0);
    ca_track_snap s;
    ca_frag f;
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_int_eq(ca_frag_compute(&s, NULL, &f), 0);
    ck_assert_uint_eq(f.n_segs, 3);
    ck_assert_uint_eq(f.largest_free, 20 * MIB);
    ck_assert_int_eq(f.segs[0].pool, 2);
    ck_assert_int_eq(f.segs[0].expandable, 0);
    ck_assert_uint_eq(f.segs[2].reserved, 4 * MIB);
    ck_assert_int_eq(f.segs[2].expandable, -1);
    /* the ring says which maps were whole segments (segment_alloc) */
    ck_assert_uint_eq(s.n_events, 4);
    ck_assert(ca_ev_whole(&s.events[0]) && ca_ev_whole(&s.events[1]));
    ck_assert(!ca_ev_whole(&s.events[2]));
    ck_assert_uint_eq(ca_ev_bytes(&s.events[0]), 20 * MIB);
    ca_frag_free(&f);
    ca_track_snap_free(&s);
    ca_trace_event u = {CA_EV_SEGMENT_UNMAP, B, 20 * MIB, 20 * MIB, 0};
    ca_tracker_record_range(t, &u, &k, CA_SITE_NONE, 0);
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_eq(s.n_ranges, 2);
    ck_assert_uint_eq(s.ranges[0].addr, B + 20 * MIB);
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("ranges");
    TCase *tc = tcase_create("ranges");
    tcase_add_test(tc, classic_segments_stay_apart);
    tcase_add_test(tc, expandable_pieces_join_and_split);
    tcase_add_test(tc, overlaps_replace);
    tcase_add_test(tc, tracker_and_fragmentation);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

/* Fragmentation figures on allocator states built by hand, checked against
 * numbers worked out on paper and against the allocator's own answers. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>

#include "allocator/allocator.h"
#include "reports/diagnose/fragmentation.h"
#include "tests/reports/tracking/sim.h"

static ca_allocator *make(size_t capacity, int expandable, ca_tracker **t) {
    ca_options o;
    ca_options_default(&o);
    o.expandable = expandable;
    ca_allocator *a;
    ck_assert_int_eq(ca_allocator_new(ca_backend_count_new(capacity, 2 * MIB), &o, &a), CA_OK);
    *t = ca_tracker_new(NULL);
    ca_tracker_attach(*t, a);
    return a;
}

START_TEST(expandable_by_hand) {
    ca_tracker *t;
    ca_allocator *a = make(64 * MIB, 1, &t);
    void *p[4], *q[3];
    size_t sz[4] = {4 * MIB, 2 * MIB, 6 * MIB, 2 * MIB};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(ca_malloc(a, sz[i], 0, &p[i], NULL), CA_OK);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(ca_malloc(a, 1000, 0, &q[i], NULL), CA_OK);
    /* One range (expandable segments keep small blocks with the large):
     * [4 used][2 free][6 used][2 free][1K][1K free][1K][rest free]. */
    ca_free(a, p[1], 0);
    ca_free(a, p[3], 0);
    ca_free(a, q[1], 0);
    ca_track_snap s;
    ca_frag f;
    ca_tracker_snapshot(t, &s);
    ck_assert_int_eq(ca_frag_compute(&s, a, &f), 0);
    ck_assert_uint_eq(f.n_segs, 1);
    ck_assert_uint_eq(f.reserved, 16 * MIB);
    ck_assert_uint_eq(f.allocated, 10 * MIB + 2048);
    ck_assert_uint_eq(f.cached_free, 6 * MIB - 2048);
    ck_assert_uint_eq(f.largest_free, 2 * MIB);
    ck_assert_double_eq_tol(f.fragmentation, 1.0 - 2.0 * MIB / (6.0 * MIB - 2048), 1e-12);
    ck_assert_uint_eq(f.largest_allocation_now, ca_largest_free(a));
    ck_assert_uint_eq(f.largest_allocation_now, 2 * MIB);
    ck_assert_int_eq(f.have_device, 1);
    ck_assert_uint_eq(f.device_total, 64 * MIB);
    ck_assert_uint_eq(f.device_free, 48 * MIB);
    const ca_frag_segment *g = &f.segs[0];
    ck_assert_int_eq(g->pool, 2); /* the range is the large heap's */
    ck_assert_uint_eq(g->reserved, 16 * MIB);
    ck_assert_uint_eq(g->allocated, 10 * MIB + 2048);
    ck_assert_uint_eq(g->largest_free, 2 * MIB);
    ck_assert_uint_eq(g->n_free, 4);
    ck_assert_double_eq_tol(g->fragmentation, 1.0 - 2.0 * MIB / (6.0 * MIB - 2048), 1e-12);
    ck_assert_int_eq(g->expandable, 1);
    /* Histogram: 1 KiB (<4K), 2 MiB - 3 KiB (<2M), two of 2 MiB (<16M). */
    ck_assert_uint_eq(f.hist_count[0], 1);
    ck_assert_uint_eq(f.hist_bytes[0], 1024);
    ck_assert_uint_eq(f.hist_count[3], 1);
    ck_assert_uint_eq(f.hist_count[4], 2);
    ck_assert_uint_eq(f.hist_bytes[4], 4 * MIB);
    ck_assert_uint_eq(ca_frag_bin(4095), 0);
    ck_assert_uint_eq(ca_frag_bin(4096), 1);
    ck_assert_uint_eq(ca_frag_bin(1ull << 40), CA_FRAG_BINS - 1);
    ca_frag_free(&f);
    /* Offline (no allocator): the same figures, no device, no pools. */
    ck_assert_int_eq(ca_frag_compute(&s, NULL, &f), 0);
    ck_assert_uint_eq(f.largest_free, 2 * MIB);
    ck_assert_int_eq(f.have_device, 0);
    ck_assert_int_eq(f.segs[0].pool, 0);
    ca_frag_free(&f);
    ca_track_snap_free(&s);
    ca_free(a, p[0], 0);
    ca_free(a, p[2], 0);
    ca_free(a, q[0], 0);
    ca_free(a, q[2], 0);
    tracked_done(a, t);
}
END_TEST

START_TEST(empty_and_unfragmented) {
    ca_tracker *t;
    ca_allocator *a = make(0, 1, &t);
    ca_track_snap s;
    ca_frag f;
    ca_tracker_snapshot(t, &s);
    ca_frag_compute(&s, a, &f);
    ck_assert_uint_eq(f.n_segs, 0);
    ck_assert_double_eq(f.fragmentation, 0.0);
    ca_frag_free(&f);
    ca_track_snap_free(&s);
    void *p;
    ca_malloc(a, 3 * MIB, 0, &p, NULL); /* one block, one free tail of 1 MiB */
    ca_tracker_snapshot(t, &s);
    ca_frag_compute(&s, a, &f);
    ck_assert_uint_eq(f.cached_free, 1 * MIB);
    ck_assert_double_eq(f.fragmentation, 0.0);
    ca_frag_free(&f);
    ca_track_snap_free(&s);
    ca_free(a, p, 0);
    tracked_done(a, t);
}
END_TEST

START_TEST(classic_segments) {
    /* Classic: 4 MiB requests share 20 MiB segments; free every other one. */
    ca_tracker *t;
    ca_allocator *a = make(0, 0, &t);
    void *p[10];
    for (int i = 0; i < 10; i++) ca_malloc(a, 4 * MIB, 0, &p[i], NULL);
    for (int i = 0; i < 10; i += 2) ca_free(a, p[i], 0);
    ca_track_snap s;
    ca_frag f;
    ca_tracker_snapshot(t, &s);
    ca_frag_compute(&s, a, &f);
    ck_assert_uint_eq(f.n_segs, 2);
    ck_assert_uint_eq(f.reserved, 40 * MIB);
    ck_assert_uint_eq(f.allocated, 20 * MIB);
    ck_assert_uint_eq(f.cached_free, 20 * MIB);
    ck_assert_uint_eq(f.largest_free, 4 * MIB);
    ck_assert_double_eq_tol(f.fragmentation, 0.8, 1e-12);
    ck_assert_uint_eq(f.hist_count[4], 5);
    ck_assert_int_eq(f.segs[0].expandable, 0);
    ck_assert_uint_eq(f.largest_allocation_now, 4 * MIB);
    ca_frag_free(&f);
    ca_track_snap_free(&s);
    for (int i = 1; i < 10; i += 2) ca_free(a, p[i], 0);
    tracked_done(a, t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("fragmentation");
    TCase *tc = tcase_create("fragmentation");
    tcase_add_test(tc, expandable_by_hand);
    tcase_add_test(tc, empty_and_unfragmented);
    tcase_add_test(tc, classic_segments);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

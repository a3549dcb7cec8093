/* Leak diagnosis on simulated loops: a steady leak is flagged at the third
 * iteration after warm-up and not before; clean loops (fixed and varying
 * shapes, lazily made optimizer state, a cache that stops growing) never are;
 * rates, first iteration, projection and advice match what was simulated. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <stdio.h>

#include "tests/reports/tracking/sim.h"

/* Runs `iterations` of a loop and returns the number of leaks found after
 * each iteration in flagged_at (first iteration count at which a leak was
 * flagged, or -1). */
static int first_flag(int flags, int iterations, int detect) {
    sim s = {sim_tracker(detect), 0, 7};
    ck_assert_ptr_nonnull(s.t);
    loop_state L;
    loop_setup(&s, &L);
    int flagged_at = -1;
    for (int i = 0; i < iterations; i++) {
        loop_iteration(&s, &L, flags);
        ca_leak *l;
        size_t n = sim_leaks(s.t, &l, NULL);
        if (n && flagged_at < 0) flagged_at = i + 1;
        free(l);
    }
    ca_tracker_destroy(s.t);
    return flagged_at;
}

START_TEST(leak_flagged_at_third_iteration_after_warmup) {
    /* warmup = 1: iteration 0 is warm-up; growth at the ends of iterations
     * 1, 2, 3: flagged once 4 iterations have ended. */
    ck_assert_int_eq(first_flag(LOOP_MARKS | LOOP_LEAK, 30, 0), 4);
    ck_assert_int_eq(first_flag(LOOP_MARKS | LOOP_LEAK | LOOP_VARYING, 30, 0), 4);
}
END_TEST

START_TEST(clean_loops_never_flagged) {
    ck_assert_int_eq(first_flag(LOOP_MARKS, 60, 0), -1);
    ck_assert_int_eq(first_flag(LOOP_MARKS | LOOP_VARYING, 60, 0), -1);
}
END_TEST

START_TEST(clean_varying_many_seeds) {
    /* Random shapes, many runs: the count rule never fires on a kept tensor
     * whose size follows the batch. */
    for (unsigned seed = 1; seed <= 40; seed++) {
        sim s = {sim_tracker(0), 0, seed};
        loop_state L;
        loop_setup(&s, &L);
        for (int i = 0; i < 40; i++) loop_iteration(&s, &L, LOOP_MARKS | LOOP_VARYING);
        ca_leak *l;
        size_t n = sim_leaks(s.t, &l, NULL);
        ck_assert_msg(n == 0, "seed %u: %zu leaks, site %d", seed, n, n ? sim_site_number(s.t, l[0].site) : -1);
        free(l);
        ca_tracker_destroy(s.t);
    }
}
END_TEST

START_TEST(leak_figures) {
    sim s = {sim_tracker(0), 0, 3};
    loop_state L;
    loop_setup(&s, &L);
    for (int i = 0; i < 10; i++) loop_iteration(&s, &L, LOOP_MARKS | LOOP_LEAK | LOOP_VARYING);
    ca_leak *l;
    ca_track_snap snap;
    size_t n = sim_leaks(s.t, &l, &snap);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(sim_site_number(s.t, l[0].site), 70);
    ck_assert_double_eq_tol(l[0].bytes_per_iteration, (double)MIB, 1);
    ck_assert_double_eq_tol(l[0].count_per_iteration, 1.0, 1e-9);
    ck_assert_uint_eq(l[0].first_iteration, 0);
    ck_assert_uint_eq(l[0].live_count, 10);
    ck_assert_uint_eq(l[0].live_bytes, 10 * MIB);
    ck_assert_int_eq(l[0].growing_buffer, 0);
    ck_assert_int_eq(l[0].projected_oom_iteration, -1);
    free(l);
    /* 100 MiB of room at 1 MiB per iteration, after iteration 9: iterations
     * 10..109 start at most 100 MiB higher and fit; 111 is the first that
     * would need more (110 starts exactly 100 MiB up: still fits). */
    n = ca_leaks_find(&snap, 1, 100 * MIB, &l);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(l[0].projected_oom_iteration, 111);
    ck_assert_int_eq(ca_leak_projection(9, 100 * MIB - 1, (double)MIB), 110);
    ck_assert_int_eq(ca_leak_projection(9, 0, (double)MIB), 11);
    ck_assert_int_eq(ca_leak_projection(9, 100 * MIB, 0), -1);

    free(l);
    ca_track_snap_free(&snap);
    ca_tracker_destroy(s.t);
}
END_TEST

START_TEST(headroom_less_working_set) {
    /* Batch 4: an iteration peaks at its 8 activations (4 x 256 KiB + k x 512
     * each) and one 512 KiB temporary above where it started. */
    sim s = {sim_tracker(0), 0, 3};
    loop_state L;
    loop_setup(&s, &L);
    for (int i = 0; i < 10; i++) loop_iteration(&s, &L, LOOP_MARKS | LOOP_LEAK);
    ca_track_snap snap;
    ca_tracker_snapshot(s.t, &snap);
    uint64_t work = 8 * MIB + 28 * 512 + 512 * KIB;
    ck_assert_uint_eq(ca_leak_headroom(&snap, 100 * MIB), 100 * MIB - work);
    ck_assert_uint_eq(ca_leak_headroom(&snap, work), 0);
    ca_track_snap_free(&snap);
    ca_tracker_destroy(s.t);
}
END_TEST

START_TEST(lazy_optimizer_state_and_cache_not_flagged) {
    /* Both grow: the optimizer state once (iteration 1), the cache at
     * iterations 0-2. Neither piles up after that. */
    sim s = {sim_tracker(0), 0, 1};
    loop_state L;
    loop_setup(&s, &L);
    for (int i = 0; i < 20; i++) {
        loop_iteration(&s, &L, LOOP_MARKS);
        ca_leak *l;
        size_t n = sim_leaks(s.t, &l, NULL);
        ck_assert_msg(n == 0, "iteration %d: site %d flagged", i, sim_site_number(s.t, l[0].site));
        free(l);
    }
    ca_tracker_destroy(s.t);
}
END_TEST

START_TEST(cache_that_stops_is_let_go) {
    /* A cache growing through iteration 4 looks like a leak while it grows
     * (nothing can tell them apart then) and is let go once it stops. */
    sim s = {sim_tracker(0), 0, 1};
    ca_tracker_step(s.t, CA_ITER_EXPLICIT);
    size_t n = 0;
    for (int i = 1; i < 12; i++) {
        if (i <= 4) sim_alloc(&s, 64 * KIB, 60);
        ca_tracker_step(s.t, CA_ITER_EXPLICIT);
        ca_leak *l;
        n = sim_leaks(s.t, &l, NULL);
        free(l);
        if (i == 4) ck_assert_uint_eq(n, 1);
    }
    ck_assert_uint_eq(n, 0);
    ca_tracker_destroy(s.t);
}
END_TEST

START_TEST(leak_found_with_detected_iterations) {
    /* No marks at all: the loop is detected (when the report is made), its
     * past boundaries replayed, and the leak found as with marks. */
    for (int varying = 0; varying < 2; varying++) {
        sim s = {sim_tracker(1), 0, 5};
        loop_state L;
        loop_setup(&s, &L);
        for (int i = 0; i < 12; i++) loop_iteration(&s, &L, LOOP_LEAK | (varying ? LOOP_VARYING : 0));
        ca_leak *l;
        ca_track_snap snap;
        size_t n = sim_leaks(s.t, &l, &snap);
        ck_assert_int_eq(snap.source, CA_ITER_DETECTED);
        ck_assert_uint_ge(snap.iteration, 10);
        ck_assert_uint_le(snap.iteration, 12);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(sim_site_number(s.t, l[0].site), 70);
        ck_assert_double_eq_tol(l[0].bytes_per_iteration, (double)MIB, 1);
        free(l);
        ca_track_snap_free(&snap);
        ca_tracker_destroy(s.t);
    }
}
END_TEST

START_TEST(clean_loop_detected_not_flagged) {
    for (int varying = 0; varying < 2; varying++) {
        sim s = {sim_tracker(1), 0, 9};
        loop_state L;
        loop_setup(&s, &L);
        for (int i = 0; i < 25; i++) loop_iteration(&s, &L, varying ? LOOP_VARYING : 0);
        ca_leak *l;
        ca_track_snap snap;
        size_t n = sim_leaks(s.t, &l, &snap);
        ck_assert_int_eq(snap.source, CA_ITER_DETECTED);
        ck_assert_uint_ge(snap.iteration, 20);
        ck_assert_uint_eq(n, 0);
        free(l);
        ca_track_snap_free(&snap);
        ca_tracker_destroy(s.t);
    }
}
END_TEST

START_TEST(advice_matches_measurement) {
    struct {
        int flags;
        const char *must;
        size_t min_sites;
    } cases[] = {
        {LOOP_EVAL_LEAK, "no_grad", 4},
        {LOOP_SCALAR_LEAK, ".item()", 1},
        {LOOP_GROWING, "torch.cat", 1},
        {LOOP_LEAK, "outlive their iteration", 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sim s = {sim_tracker(0), 0, 2};
        loop_state L;
        loop_setup(&s, &L);
        for (int i = 0; i < 12; i++) loop_iteration(&s, &L, LOOP_MARKS | cases[c].flags);
        ca_leak *l;
        size_t n = sim_leaks(s.t, &l, NULL);
        ck_assert_msg(n >= cases[c].min_sites, "case %zu: %zu leaks", c, n);
        const char *adv = ca_leak_advice(l, n, 0);
        ck_assert_msg(strstr(adv, cases[c].must), "case %zu: advice '%s'", c, adv);
        if (cases[c].flags == LOOP_SCALAR_LEAK) /* the measured fact, not the folklore */
            ck_assert_ptr_nonnull(strstr(adv, "does not grow device memory"));
        if (cases[c].flags != LOOP_EVAL_LEAK) ck_assert_ptr_null(strstr(adv, "no_grad"));
        free(l);
        ca_tracker_destroy(s.t);
    }
}
END_TEST

START_TEST(growing_buffer_needs_eight_records) {
    sim s = {sim_tracker(0), 0, 2};
    loop_state L;
    loop_setup(&s, &L);
    int flagged_at = -1;
    for (int i = 0; i < 14; i++) {
        loop_iteration(&s, &L, LOOP_MARKS | LOOP_GROWING);
        ca_leak *l;
        size_t n = sim_leaks(s.t, &l, NULL);
        if (n && flagged_at < 0) {
            flagged_at = i + 1;
            ck_assert_int_eq(l[0].growing_buffer, 1);
            ck_assert_double_eq_tol(l[0].bytes_per_iteration, 64.0 * KIB, 1);
        }
        free(l);
    }
    /* Records at the ends of iterations 1..8 (iteration 0 is warm-up). */
    ck_assert_int_eq(flagged_at, 9);
    ca_tracker_destroy(s.t);
}
END_TEST

START_TEST(boundary_rule_unit) {
    /* A site alone: counts 1,2,3,2,3,4,5 after warm-up. The decrease resets
     * the run; growth resumes as records only above the old high (3). */
    ca_site_stat st = {0};
    uint64_t counts[] = {1, 2, 3, 2, 3, 4, 5, 6};
    for (uint32_t i = 0; i < 8; i++) ca_site_boundary(&st, counts[i], counts[i] * 512, i, 1);
    /* Records after the reset: 4, 5, 6 at iterations 5, 6, 7. */
    ck_assert_uint_eq(st.growths, 3);
    ck_assert_uint_eq(st.first_growth, 5);
    ca_leak l;
    ck_assert_int_eq(ca_site_leak(&st, 7, &l), 1);
    ck_assert_double_eq_tol(l.count_per_iteration, 1.0, 1e-9);
    /* Stale: last growth at 7, gaps 1: let go after iteration 9. */
    ck_assert_int_eq(ca_site_leak(&st, 9, &l), 1);
    ck_assert_int_eq(ca_site_leak(&st, 10, &l), 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("leaks");
    TCase *tc = tcase_create("leaks");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, leak_flagged_at_third_iteration_after_warmup);
    tcase_add_test(tc, clean_loops_never_flagged);
    tcase_add_test(tc, clean_varying_many_seeds);
    tcase_add_test(tc, leak_figures);
    tcase_add_test(tc, headroom_less_working_set);
    tcase_add_test(tc, lazy_optimizer_state_and_cache_not_flagged);
    tcase_add_test(tc, cache_that_stops_is_let_go);
    tcase_add_test(tc, leak_found_with_detected_iterations);
    tcase_add_test(tc, clean_loop_detected_not_flagged);
    tcase_add_test(tc, advice_matches_measurement);
    tcase_add_test(tc, growing_buffer_needs_eight_records);
    tcase_add_test(tc, boundary_rule_unit);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

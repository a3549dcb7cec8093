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

/* Findings of a simulated run, as a report makes them. */
typedef struct found {
    ca_tracker *t; /* owns the stacks the snapshot names */
    ca_track_snap snap;
    ca_leak *leaks;
    size_t n_growing, n_leak_sites, n;
    ca_finding *f;
} found;

static void find(ca_tracker *t, int have_headroom, uint64_t headroom, found *r) {
    ck_assert_int_eq(ca_tracker_snapshot(t, &r->snap), 0);
    r->n_growing = ca_leaks_find(&r->snap, have_headroom, headroom, &r->leaks);
    r->n = ca_findings_find(&r->snap, r->leaks, r->n_growing, have_headroom, headroom, &r->f, &r->n_leak_sites);
}

static void found_free(found *r) {
    free(r->leaks);
    free(r->f);
    ca_track_snap_free(&r->snap);
    ca_tracker_destroy(r->t);
}

static found run_loop(int flags, int iterations, unsigned seed, int have_headroom, uint64_t headroom) {
    sim s = {sim_tracker(0), 0, seed};
    loop_state L;
    loop_setup(&s, &L);
    for (int i = 0; i < iterations; i++) loop_iteration(&s, &L, LOOP_MARKS | flags);
    found r = {.t = s.t};
    find(s.t, have_headroom, headroom, &r);
    return r;
}

START_TEST(retained_forward_is_one_finding) {
    /* Four sites under the evaluation's forward and its batch, growing
     * together: one finding, rooted at the forward's call (the batch holds
     * under 1% of the bytes and does not pull the root out to the call of
     * the evaluation), with the retained-graph advice. */
    found r = run_loop(LOOP_EVAL_LEAK | LOOP_EVAL_BATCH, 12, 2, 0, 0);
    ck_assert_uint_eq(r.n_growing, 5);
    ck_assert_uint_eq(r.n, 1);
    const ca_finding *f = &r.f[0];
    ck_assert_int_eq(f->kind, CA_FINDING_TOGETHER);
    ck_assert_uint_eq(f->n_sites, 5);
    ck_assert_uint_eq(r.n_leak_sites, 5);
    ck_assert_int_eq(f->note, 0);
    ck_assert_int_eq(f->retained_graph, 1);
    ck_assert_int_eq(f->has_root, 1);
    ck_assert_uint_eq(f->root_ip, SIM_EVAL_FORWARD);
    ck_assert_ptr_nonnull(strstr(f->advice, "no_grad"));
    double sum = 0;
    for (size_t i = 0; i < f->n_sites; i++) sum += r.leaks[f->first + i].bytes_per_iteration;
    ck_assert_double_eq_tol(f->bytes_per_iteration, sum, 1e-6);
    ck_assert_double_eq_tol(f->bytes_per_iteration, 4.0 * 4 * 256 * KIB + 2 * KIB, 1);
    /* Most bytes first among its sites. */
    for (size_t i = 1; i < f->n_sites; i++)
        ck_assert(r.leaks[f->first + i - 1].bytes_per_iteration >= r.leaks[f->first + i].bytes_per_iteration);
    found_free(&r);
    /* Without the batch the deepest shared frame is the forward's call too. */
    r = run_loop(LOOP_EVAL_LEAK, 12, 2, 0, 0);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_uint_eq(r.f[0].root_ip, SIM_EVAL_FORWARD);
    found_free(&r);
}
END_TEST

START_TEST(unrelated_leaks_stay_apart) {
    /* The retained evaluation and a 1 MiB tensor kept in the training step
     * start growing at the same iteration, but the frames they share (the
     * loop, main) carry the whole healthy step too: two findings. */
    found r = run_loop(LOOP_EVAL_LEAK | LOOP_LEAK, 12, 2, 0, 0);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_uint_eq(r.f[0].n_sites, 4);
    ck_assert_uint_eq(r.f[0].root_ip, SIM_EVAL_FORWARD);
    ck_assert_int_eq(r.f[1].kind, CA_FINDING_SITE);
    const uintptr_t *ips;
    ck_assert_uint_eq(ca_stacks_get(r.snap.stacks, r.leaks[r.f[1].first].site, &ips), 4);
    ck_assert_uint_eq(ips[0], 0x400000 + 16 * 70);
    ck_assert_int_eq(r.f[1].has_root, 0);
    ck_assert_int_eq(r.f[0].note | r.f[1].note, 0);
    found_free(&r);
    /* A growing buffer is a finding of its own. */
    r = run_loop(LOOP_EVAL_LEAK | LOOP_GROWING, 12, 2, 0, 0);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_int_eq(r.f[0].kind + r.f[1].kind, CA_FINDING_TOGETHER + CA_FINDING_BUFFER);
    found_free(&r);
}
END_TEST

START_TEST(per_shape_cache_is_a_note) {
    /* A cache that keeps 4 KiB per new shape grows for dozens of iterations:
     * the site rule sees a pile-up, but it is 0.002% of the working set. */
    for (unsigned seed = 1; seed <= 10; seed++) {
        found r = run_loop(LOOP_VARYING | LOOP_SHAPE_CACHE, 40, seed, 0, 0);
        for (size_t i = 0; i < r.n; i++) {
            ck_assert_int_eq(r.f[i].note, 1);
            ck_assert_double_lt(r.f[i].working_set_share, 1.0 / CA_NOTE_WORKING_SETS);
        }
        ck_assert_uint_eq(r.n_leak_sites, 0);
        found_free(&r);
    }
    /* Seen as a leak by the site rule for at least one seed (else the test
     * proves nothing), and a note: with 16 GiB of room it would take
     * millions of iterations to fill the device. */
    int seen = 0;
    for (unsigned seed = 1; seed <= 10; seed++) {
        found r = run_loop(LOOP_VARYING | LOOP_SHAPE_CACHE, 40, seed, 1, (uint64_t)16 << 30);
        if (r.n) {
            seen = 1;
            ck_assert_int_eq(r.f[0].note, 1);
            ck_assert_double_gt(r.f[0].iterations_to_fill, 1e6);
        }
        found_free(&r);
        /* The same growth on a nearly full device matters: 50 MiB of room at
         * a few KiB per iteration is filled within 100000 iterations. */
        r = run_loop(LOOP_VARYING | LOOP_SHAPE_CACHE, 40, seed, 1, 50 * MIB);
        for (size_t i = 0; i < r.n; i++) ck_assert_int_eq(r.f[i].note, 0);
        found_free(&r);
    }
    ck_assert(seen);
}
END_TEST

START_TEST(small_real_leak_still_flagged) {
    /* 1 MiB kept per iteration on a working set of about 170 MiB (0.6%),
     * even on a device with 80 GiB of room: a leak, not a note. */
    found r = run_loop(LOOP_LEAK, 12, 2, 1, (uint64_t)80 << 30);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_int_eq(r.f[0].note, 0);
    uint64_t w = ca_leak_working_set(&r.snap);
    ck_assert_uint_ge(w, 160 * MIB);
    ck_assert_uint_le(w, 180 * MIB);
    ck_assert_double_eq_tol(r.f[0].working_set_share, (double)MIB / (double)w, 1e-9);
    found_free(&r);
    /* A scalar kept per iteration (512 B) is slow growth: a note, with the
     * advice that matches it. */
    r = run_loop(LOOP_SCALAR_LEAK, 12, 2, 1, (uint64_t)16 << 30);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_int_eq(r.f[0].note, 1);
    ck_assert_ptr_nonnull(strstr(r.f[0].advice, ".item()"));
    found_free(&r);
}
END_TEST

START_TEST(working_set_leaves_the_pile_out) {
    /* The working set does not grow with the leak: the same after 12
     * iterations as after 40. */
    found a = run_loop(LOOP_LEAK, 12, 2, 0, 0), b = run_loop(LOOP_LEAK, 40, 2, 0, 0);
    ck_assert_uint_eq(ca_leak_working_set(&a.snap), ca_leak_working_set(&b.snap));
    ck_assert_uint_gt(b.snap.peak_allocated, a.snap.peak_allocated + 20 * MIB);
    found_free(&a);
    found_free(&b);
}
END_TEST

/* A pool made before the loop (site 66) handed one buffer an iteration to
 * a cache filled lazily (site 67): site 67 grows by a new high at every
 * boundary, but site 66 shrinks by as much and the memory kept across
 * boundaries is flat. A hand-off: a note, never the verdict; the same growth
 * with nothing shrinking is a leak. */
static found handoff_run(int hand) {
    sim s = {sim_tracker(0), 0, 5};
    loop_state L;
    loop_setup(&s, &L);
    uintptr_t pool[16];
    for (int i = 0; i < 16; i++) pool[i] = sim_alloc(&s, 2 * MIB, 66);
    for (int i = 0; i < 12; i++) {
        loop_iteration(&s, &L, LOOP_MARKS);
        if (hand) sim_free(&s, pool[15 - i], 2 * MIB);
        sim_alloc(&s, 2 * MIB, 67);
    }
    ca_tracker_step(s.t, CA_ITER_EXPLICIT);
    found r = {.t = s.t};
    find(s.t, 0, 0, &r);
    return r;
}

START_TEST(handoff_is_a_note) {
    found r = handoff_run(1);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_int_eq(r.f[0].note, 1);
    ck_assert_int_eq(r.f[0].handoff, 1);
    ck_assert_uint_eq(r.n_leak_sites, 0);
    ck_assert_int_eq(sim_site_number(r.t, r.leaks[0].site), 67);
    ck_assert_ptr_nonnull(strstr(r.f[0].advice, "handed from one place to another"));
    found_free(&r);
    r = handoff_run(0);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_int_eq(r.f[0].note, 0);
    ck_assert_int_eq(r.f[0].handoff, 0);
    ck_assert_uint_eq(r.n_leak_sites, 1);
    found_free(&r);
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
    tcase_add_test(tc, retained_forward_is_one_finding);
    tcase_add_test(tc, unrelated_leaks_stay_apart);
    tcase_add_test(tc, per_shape_cache_is_a_note);
    tcase_add_test(tc, small_real_leak_still_flagged);
    tcase_add_test(tc, working_set_leaves_the_pile_out);
    tcase_add_test(tc, handoff_is_a_note);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

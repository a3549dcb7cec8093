/* The phases of a step (reports/diagnose/phases.h) and the fixes' input from
 * a tracker's state (fixes_track.h): fake stacks of a training loop (main ->
 * train -> forward / backward / step), setup made before the loop, a ring
 * that forgot the start of the run. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <stdlib.h>
#include <time.h>

#include "reports/diagnose/fixes_track.h"
#include "reports/diagnose/phases.h"

/* Frames, outermost last in each stack (innermost first, as captured). */
enum { MAIN = 0x1000, TRAIN = 0x2000, FWD = 0x3000, BWD = 0x3100, STEP = 0x3200, BUILD = 0x2100, OP = 0x5000 };

START_TEST(loop_phases) {
    uintptr_t fwd1[] = {OP + 1, FWD, TRAIN, MAIN}, fwd2[] = {OP + 2, FWD, TRAIN, MAIN};
    uintptr_t bwd[] = {OP + 3, BWD, TRAIN, MAIN}, step[] = {OP + 4, STEP, TRAIN, MAIN};
    uintptr_t weights[] = {OP + 5, BUILD, MAIN};
    ca_phase_stack st[] = {
        {fwd1, 4, 40, 1}, {fwd2, 4, 40, 1}, {bwd, 4, 30, 1}, {step, 4, 2, 1}, {weights, 3, 0, 1}, {NULL, 0, 0, 1},
    };
    uint32_t group[6];
    ca_phase ph[6];
    long n = ca_phases_find(st, 6, group, ph);
    ck_assert_int_eq(n, 4);
    ck_assert_uint_eq(group[0], group[1]); /* the forward call */
    ck_assert_uint_ne(group[0], group[2]);
    ck_assert_uint_ne(group[2], group[3]);
    ck_assert_uint_ne(group[4], group[0]);
    ck_assert_uint_eq(group[5], 0);
    /* the forward's phase frame is FWD (frame 1 of its stack) */
    const ca_phase *f = &ph[group[0] - 1];
    ck_assert_uint_eq(st[f->stack].ips[f->frame], FWD);
    ck_assert_uint_eq(st[ph[group[3] - 1].stack].ips[ph[group[3] - 1].frame], STEP);
    /* the weights leave the loop's frames at main's call of BUILD */
    ck_assert_uint_eq(st[ph[group[4] - 1].stack].ips[ph[group[4] - 1].frame], BUILD);
}
END_TEST

/* One phase holding nearly everything is gone through: its calls are the
 * phases (a loop body that calls one function per step). */
START_TEST(descends_through_one_call) {
    uintptr_t a[] = {OP + 1, FWD, STEP, TRAIN, MAIN}, b[] = {OP + 2, BWD, STEP, TRAIN, MAIN};
    ca_phase_stack st[] = {{a, 5, 50, 1}, {b, 5, 50, 1}};
    uint32_t group[2];
    ca_phase ph[2];
    ck_assert_int_eq(ca_phases_find(st, 2, group, ph), 2);
    ck_assert_uint_eq(st[0].ips[ph[group[0] - 1].frame], FWD);
    ck_assert_uint_eq(st[1].ips[ph[group[1] - 1].frame], BWD);
}
END_TEST

/* A stack no allocation of the breakdown has gets no phase; many stacks
 * (a large Python program) cost well under a second. */
START_TEST(unused_and_many) {
    enum { N = 20000, DEPTH = 12 };
    uintptr_t *ips = malloc(sizeof *ips * N * DEPTH);
    ca_phase_stack *st = calloc(N, sizeof *st);
    uint32_t *group = malloc(N * sizeof *group);
    ca_phase *ph = malloc(N * sizeof *ph);
    for (size_t i = 0; i < N; i++) {
        uintptr_t *s = ips + i * DEPTH;
        for (unsigned d = 0; d < DEPTH; d++) s[DEPTH - 1 - d] = d < 4 ? MAIN + d : OP + i % (97 * (d + 1));
        s[DEPTH - 5] = i % 3 == 0 ? FWD : i % 3 == 1 ? BWD : STEP; /* the phase, past 4 loop frames */
        st[i] = (ca_phase_stack){s, DEPTH, i % 4 ? 1 : 0, i % 7 != 0};
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long n = ca_phases_find(st, N, group, ph);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_int_eq(n, 3);
    for (size_t i = 0; i < N; i++) {
        if (i % 7 == 0) {
            ck_assert_uint_eq(group[i], 0);
            continue;
        }
        ck_assert_uint_eq(st[i].ips[ph[group[i] - 1].frame], st[i].ips[DEPTH - 5]);
    }
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    ck_assert_msg(secs < 1.0, "%.3f s", secs);
    free(ips);
    free(st);
    free(group);
    free(ph);
}
END_TEST

/* ---- from a tracker ---- */

static uint32_t site(ca_tracker *t, uintptr_t op, uintptr_t phase) {
    uintptr_t ips[] = {op, phase, TRAIN, MAIN};
    return ca_tracker_site(t, ips, 4);
}

static uintptr_t next_addr = 0x100000000000ull;
static uintptr_t alloc(ca_tracker *t, size_t bytes, uint32_t s) {
    uintptr_t a = next_addr;
    next_addr += bytes + 4096;
    ca_trace_event ev = {CA_EV_ALLOC, a, bytes, bytes, 0};
    ca_tracker_record(t, &ev, s, 0, 0);
    return a;
}
static void release(ca_tracker *t, uintptr_t a, size_t bytes) {
    ca_trace_event ev = {CA_EV_FREE, a, bytes, bytes, 0};
    ca_tracker_record(t, &ev, 0, 0, 0);
}

/* Weights from setup (4 MiB), then steps of 4 blocks: the forward saves 2
 * tensors a block (2.5 MiB), backward frees them, with a temporary of 2 MiB
 * each; marks after each step. The peak: backward's first temporary. */
static ca_tracker *loop(size_t ring, unsigned steps) {
    ca_tracker_options o;
    ca_tracker_options_default(&o);
    o.detect = 0;
    o.time_is_index = 1;
    o.trace_events = ring;
    ca_tracker *t = ca_tracker_new(&o);
    uintptr_t wips[] = {OP + 9, BUILD, MAIN};
    uint32_t ws = ca_tracker_site(t, wips, 3);
    for (int i = 0; i < 4; i++) alloc(t, 1 << 20, ws);
    for (unsigned s = 0; s < steps; s++) {
        uintptr_t a[4], b[4];
        for (int j = 0; j < 4; j++) {
            a[j] = alloc(t, 2 << 20, site(t, OP + 1, FWD));
            b[j] = alloc(t, 512 << 10, site(t, OP + 2, FWD));
        }
        for (int j = 3; j >= 0; j--) {
            release(t, b[j], 512 << 10);
            uintptr_t g = alloc(t, 2 << 20, site(t, OP + 3, BWD));
            release(t, a[j], 2 << 20);
            release(t, g, 2 << 20);
        }
        ca_tracker_step(t, CA_ITER_EXPLICIT);
    }
    return t;
}

START_TEST(from_tracker) {
    ca_tracker *t = loop(1 << 16, 4);
    ca_track_snap s;
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ca_fix_report r;
    ck_assert_int_eq(ca_fixes_from_track(&s, 16 << 20, 0, &r), 0);
    ck_assert_int_eq(r.have, 1);
    ck_assert_uint_ge(r.iteration, 1);
    ck_assert_uint_eq(r.peak, (4 << 20) + (19 << 19) + (2 << 20)); /* weights, saved less one, a temporary */
    ck_assert_uint_eq(r.total.persistent, 4 << 20);
    ck_assert_uint_eq(r.total.activations, 19 << 19);
    ck_assert_uint_eq(r.total.temporaries, 2 << 20);
    ck_assert_uint_eq(r.blocks, 4);
    ck_assert_uint_eq(r.capacity, 16 << 20);
    ck_assert_uint_eq(r.missing, 0);
    /* groups: the weights' (BUILD), the forward's, backward's */
    ck_assert_uint_ge(r.n_groups, 4);
    uint64_t fwd = 0;
    for (uint32_t g = 1; g < r.n_groups; g++) {
        const uintptr_t *ips;
        unsigned n = ca_stacks_get(s.stacks, r.group_site[g], &ips);
        ck_assert_uint_lt(r.group_frame[g], n);
        if (ips[r.group_frame[g]] == FWD) fwd = r.by_group[g].activations;
    }
    ck_assert_uint_eq(fwd, 19 << 19);
    ca_fix_report_free(&r);
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

/* A ring that forgot the setup and the first steps: the weights count as
 * made before it, the iterations it holds whole are analysed. */
START_TEST(ring_forgot_the_start) {
    ca_tracker *t = loop(64, 6); /* 28 events a step */
    ca_track_snap s;
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ck_assert_uint_gt(s.first_seq, 4);
    ca_fix_report r;
    ck_assert_int_eq(ca_fixes_from_track(&s, 0, 0, &r), 0);
    ck_assert_int_eq(r.have, 1);
    ck_assert_uint_eq(r.total.persistent, 4 << 20);
    ck_assert_uint_eq(r.peak, (4 << 20) + (19 << 19) + (2 << 20));
    ca_fix_report_free(&r);
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

START_TEST(tracker_without_marks) {
    ca_tracker_options o;
    ca_tracker_options_default(&o);
    o.detect = 0;
    ca_tracker *t = ca_tracker_new(&o);
    alloc(t, 4096, 0);
    ca_track_snap s;
    ck_assert_int_eq(ca_tracker_snapshot(t, &s), 0);
    ca_fix_report r;
    ck_assert_int_eq(ca_fixes_from_track(&s, 0, 0, &r), 0);
    ck_assert_int_eq(r.have, 0);
    ck_assert_ptr_nonnull(strstr(r.why, "no complete iteration"));
    ca_track_snap_free(&s);
    ca_tracker_destroy(t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("phases");
    TCase *tc = tcase_create("phases");
    tcase_add_test(tc, loop_phases);
    tcase_add_test(tc, descends_through_one_call);
    tcase_add_test(tc, unused_and_many);
    tcase_add_test(tc, from_tracker);
    tcase_add_test(tc, ring_forgot_the_start);
    tcase_add_test(tc, tracker_without_marks);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

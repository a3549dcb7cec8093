/* Iteration detection on synthetic symbol sequences: fixed and varying
 * shapes, a prefix that is not part of the loop, identical layers inside an
 * iteration, one iteration alone (must not be taken for a loop), noise. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <stdlib.h>

#include "reports/track/period.h"

typedef struct seq {
    uint32_t *s;
    uint64_t *level;
    size_t n, cap;
    uint64_t now;
} seq;

/* An allocation of `bytes` from site `sym` that stays (free later by hand). */
static void push(seq *q, uint32_t sym, uint64_t bytes) {
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 1024;
        q->s = realloc(q->s, q->cap * sizeof *q->s);
        q->level = realloc(q->level, q->cap * sizeof *q->level);
    }
    q->s[q->n] = sym;
    q->level[q->n++] = q->now;
    q->now += bytes;
}

/* One training iteration: L layers forward (each saves 2 tensors, makes a
 * temporary), a loss, L layers backward freeing what forward saved. */
static void iteration(seq *q, unsigned layers, uint64_t act, unsigned extra) {
    push(q, 1, act); /* embedding */
    for (unsigned l = 0; l < layers; l++) {
        push(q, 10, act);
        push(q, 11, act);
        push(q, 12, act / 2);
        q->now -= act / 2;
    }
    push(q, 2, 4); /* loss */
    for (unsigned e = 0; e < extra; e++) push(q, 3 + e, 64), q->now -= 64;
    for (unsigned l = 0; l < layers; l++) {
        push(q, 20, act);
        q->now -= act;
        q->now -= 2 * act;
    }
    q->now -= act + 4;
}

START_TEST(fixed_loop) {
    seq q = {0};
    for (int w = 0; w < 30; w++) push(&q, 100 + w, 1 << 20); /* weights */
    for (int i = 0; i < 10; i++) iteration(&q, 3, 4096, 2);
    ca_period p;
    ck_assert_int_eq(ca_period_find(q.s, q.level, q.n, &p), 1);
    uint32_t per = 1 + 3 * 3 + 1 + 2 + 3;
    ck_assert_uint_eq(p.period, per);
    ck_assert_double_ge(p.score, 0.999);
    /* Boundaries: at every embedding allocation after the first (the level is
     * lowest there). */
    size_t at[32];
    size_t nb = ca_period_boundaries(&p, q.s, q.n, at, 32);
    ck_assert_uint_eq(nb, 9);
    for (size_t i = 0; i < nb; i++) {
        ck_assert_uint_eq(q.s[at[i]], 1);
        ck_assert_uint_eq(at[i], 30 + (i + 1) * per);
    }
    free(q.s);
    free(q.level);
}
END_TEST

/* Call-site ids are small numbers, kept in an array; other symbols (sizes,
 * lifetimes) in a map: the same sequence gives the same answer either way. */
START_TEST(large_symbols_same_period) {
    seq q = {0};
    for (int w = 0; w < 30; w++) push(&q, 100 + w, 1 << 20);
    for (int i = 0; i < 10; i++) iteration(&q, 3, 4096, 2);
    ca_period small, large;
    ck_assert_int_eq(ca_period_find(q.s, q.level, q.n, &small), 1);
    for (size_t i = 0; i < q.n; i++) q.s[i] += 0xF0000000u;
    ck_assert_int_eq(ca_period_find(q.s, q.level, q.n, &large), 1);
    ck_assert_uint_eq(large.period, small.period);
    ck_assert_uint_eq(large.k, small.k);
    ck_assert_int_eq(large.starts, small.starts);
    for (unsigned i = 0; i < small.k; i++) ck_assert_uint_eq(large.anchor[i], small.anchor[i] + 0xF0000000u);
    free(q.s);
    free(q.level);
}
END_TEST

START_TEST(varying_shapes) {
    /* Same code path, activation sizes follow the batch: the levels change,
     * the call sites do not. */
    seq q = {0};
    unsigned seed = 11;
    for (int w = 0; w < 5; w++) push(&q, 100 + w, 1 << 20);
    for (int i = 0; i < 8; i++) iteration(&q, 4, 1024 * (1 + rand_r(&seed) % 16), 1);
    ca_period p;
    ck_assert_int_eq(ca_period_find(q.s, q.level, q.n, &p), 1);
    ck_assert_uint_eq(p.period, 1 + 4 * 3 + 1 + 1 + 4);
    ck_assert_uint_eq(ca_period_boundaries(&p, q.s, q.n, NULL, 0), 7);
    free(q.s);
    free(q.level);
}
END_TEST

START_TEST(many_identical_layers) {
    /* 24 identical layers: a layer repeats 24 times per iteration, but only
     * the whole iteration repeats exactly. */
    seq q = {0};
    for (int i = 0; i < 6; i++) iteration(&q, 24, 8192, 3);
    ca_period p;
    ck_assert_int_eq(ca_period_find(q.s, q.level, q.n, &p), 1);
    ck_assert_uint_eq(p.period, 1 + 24 * 3 + 1 + 3 + 24);
    /* 24 backward allocations in a row end each iteration, more than an
     * anchor spans: the anchor starts the iteration instead (the embedding). */
    ck_assert_int_eq(p.starts, 1);
    ck_assert_uint_eq(p.k, 1);
    ck_assert_uint_eq(ca_period_boundaries(&p, q.s, q.n, NULL, 0), 5);
    free(q.s);
    free(q.level);
}
END_TEST

START_TEST(one_iteration_is_not_a_loop) {
    /* A single forward/backward: the layers repeat, the level climbs and
     * falls: refused. */
    seq q = {0};
    iteration(&q, 40, 8192, 0);
    ca_period p;
    ck_assert_int_eq(ca_period_find(q.s, q.level, q.n, &p), 0);
    free(q.s);
    free(q.level);
}
END_TEST

START_TEST(two_iterations_are_not_enough) {
    seq q = {0};
    iteration(&q, 3, 8192, 2);
    iteration(&q, 3, 8192, 2);
    ca_period p;
    ck_assert_int_eq(ca_period_find(q.s, q.level, q.n, &p), 0);
    free(q.s);
    free(q.level);
}
END_TEST

START_TEST(noise_is_not_a_loop) {
    seq q = {0};
    unsigned seed = 3;
    for (int i = 0; i < 4000; i++) push(&q, (uint32_t)(rand_r(&seed) % 50), 512);
    ca_period p;
    ck_assert_int_eq(ca_period_find(q.s, q.level, q.n, &p), 0);
    ck_assert_int_eq(ca_period_find(q.s, q.level, 3, &p), 0);
    ck_assert_int_eq(ca_period_find(NULL, NULL, 0, &p), 0);
    free(q.s);
    free(q.level);
}
END_TEST

START_TEST(matcher_online) {
    seq q = {0};
    for (int i = 0; i < 6; i++) iteration(&q, 2, 4096, 1);
    ca_period p;
    ck_assert_int_eq(ca_period_find(q.s, q.level, q.n, &p), 1);
    ca_period_matcher m;
    ca_period_matcher_init(&m, &p);
    size_t ends = 0, expect[16], ne = ca_period_boundaries(&p, q.s, q.n, expect, 16);
    for (size_t i = 0; i < q.n; i++) {
        int r = ca_period_matcher_push(&m, q.s[i]);
        /* Ends after this one: the next starts an iteration; started: this one
         * (k - 1 back) did. */
        size_t at = r == CA_PERIOD_ENDS_AFTER ? i + 1 : r == CA_PERIOD_STARTED ? i + 1 - p.k : 0;
        if (r && at > 0 && at < q.n) {
            ck_assert_uint_lt(ends, ne);
            ck_assert_uint_eq(at, expect[ends]);
            ends++;
        }
    }
    ck_assert_uint_eq(ends, ne);
    free(q.s);
    free(q.level);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("period");
    TCase *tc = tcase_create("period");
    tcase_add_test(tc, fixed_loop);
    tcase_add_test(tc, large_symbols_same_period);
    tcase_add_test(tc, varying_shapes);
    tcase_add_test(tc, many_identical_layers);
    tcase_add_test(tc, one_iteration_is_not_a_loop);
    tcase_add_test(tc, two_iterations_are_not_enough);
    tcase_add_test(tc, noise_is_not_a_loop);
    tcase_add_test(tc, matcher_online);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

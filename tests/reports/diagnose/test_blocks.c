/* Repeated blocks within one pass (reports/diagnose/blocks.h) on synthetic
 * key sequences: exact blocks, a run that starts before the first block,
 * nothing repeated, a short inner repeat, the shorter period at a tie, the
 * minimum count, and the size cap. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <stdlib.h>
#include <time.h>

#include "reports/diagnose/blocks.h"

#define N(a) (sizeof(a) / sizeof *(a))

START_TEST(exact_blocks) {
    uint32_t k[] = {1, 2, 10, 11, 12, 10, 11, 12, 10, 11, 12, 10, 11, 12, 3};
    ca_blocks b;
    ck_assert_int_eq(ca_blocks_find(k, N(k), 2, &b), 1);
    ck_assert_uint_eq(b.start, 2);
    ck_assert_uint_eq(b.period, 3);
    ck_assert_uint_eq(b.count, 4);
    ck_assert_uint_eq(b.slack, 0);
}
END_TEST

/* The key before the first block equals a block's last (with sizes: the
 * embedding's output and the residual stream), and the one after the last
 * block its first: the run is longer than the blocks; slack says by how much. */
START_TEST(run_starts_early) {
    uint32_t k[] = {1, 12, 10, 11, 12, 10, 11, 12, 10, 11, 12, 10, 11, 12, 10, 5};
    ca_blocks b;
    ck_assert_int_eq(ca_blocks_find(k, N(k), 2, &b), 1);
    ck_assert_uint_eq(b.start, 1);
    ck_assert_uint_eq(b.period, 3);
    ck_assert_uint_eq(b.count, 4);
    ck_assert_uint_eq(b.slack, 2);
}
END_TEST

START_TEST(nothing_repeats) {
    uint32_t k[64];
    for (unsigned i = 0; i < N(k); i++) k[i] = i;
    ca_blocks b;
    ck_assert_int_eq(ca_blocks_find(k, N(k), 2, &b), 0);
    ck_assert_int_eq(ca_blocks_find(k, 0, 2, &b), 0);
    ck_assert_int_eq(ca_blocks_find(k, 1, 2, &b), 0);
}
END_TEST

/* Three equal keys in a row inside each block cover less than the blocks. */
START_TEST(blocks_beat_an_inner_repeat) {
    uint32_t k[] = {1, 7, 7, 7, 8, 9, 7, 7, 7, 8, 9, 7, 7, 7, 8, 9, 2};
    ca_blocks b;
    ck_assert_int_eq(ca_blocks_find(k, N(k), 2, &b), 1);
    ck_assert_uint_eq(b.period, 5);
    ck_assert_uint_eq(b.count, 3);
    ck_assert_uint_eq(b.start, 1);
}
END_TEST

/* 10,11 four times is also 10,11,10,11 twice: the shorter period wins. */
START_TEST(shorter_period_at_a_tie) {
    uint32_t k[] = {1, 10, 11, 10, 11, 10, 11, 10, 11, 2};
    ca_blocks b;
    ck_assert_int_eq(ca_blocks_find(k, N(k), 2, &b), 1);
    ck_assert_uint_eq(b.period, 2);
    ck_assert_uint_eq(b.count, 4);
}
END_TEST

START_TEST(minimum_count) {
    uint32_t k[] = {1, 10, 11, 12, 10, 11, 12, 2};
    ca_blocks b;
    ck_assert_int_eq(ca_blocks_find(k, N(k), 3, &b), 0);
    ck_assert_int_eq(ca_blocks_find(k, N(k), 2, &b), 1);
    ck_assert_uint_eq(b.count, 2);
    ck_assert_uint_eq(b.period, 3);
}
END_TEST

/* More keys than it looks at: only the first CA_BLOCKS_MAX_KEYS count, and
 * the worst case (nothing repeats: every period scanned) stays well under a
 * second. */
START_TEST(size_cap) {
    size_t n = CA_BLOCKS_MAX_KEYS + 5000;
    uint32_t *k = malloc(n * sizeof *k);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        k[i] = (uint32_t)x;
    }
    /* blocks only past the cap: not seen */
    for (size_t i = CA_BLOCKS_MAX_KEYS; i < n; i++) k[i] = 100 + i % 10;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ca_blocks b;
    ck_assert_int_eq(ca_blocks_find(k, n, 2, &b), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    ck_assert_msg(s < 1.0, "%.3f s for %zu keys", s, n);
    free(k);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("blocks");
    TCase *tc = tcase_create("blocks");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, exact_blocks);
    tcase_add_test(tc, run_starts_early);
    tcase_add_test(tc, nothing_repeats);
    tcase_add_test(tc, blocks_beat_an_inner_repeat);
    tcase_add_test(tc, shorter_period_at_a_tie);
    tcase_add_test(tc, minimum_count);
    tcase_add_test(tc, size_cap);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

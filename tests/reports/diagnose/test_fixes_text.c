/* The fixes in words (reports/write/fixes_text.h): labels, figures, and
 * the OOM advice for a run where one fix is enough, where only a combination
 * is, where none is, without a device size, and without a prediction. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>

#include "reports/write/fixes_text.h"

#define MiB (UINT64_C(1) << 20)

static ca_fix fix(unsigned kinds, unsigned factor, uint64_t p, uint64_t lo, uint64_t hi, uint64_t cap) {
    ca_fix f = {kinds, factor, kinds & CA_FIX_CHECKPOINT ? 6 : 0, p, lo, hi, -1};
    if (cap) f.fits = hi <= cap ? 1 : lo > cap ? 0 : -1;
    return f;
}

/* A run of 100 MiB with the usual fixes, against a device of cap. */
static ca_fix_report run(uint64_t cap) {
    ca_fix_report r = {.have = 1, .iteration = 7, .peak = 100 * MiB, .capacity = cap};
    size_t n = 0;
    r.fix[n++] = fix(CA_FIX_ACCUM, 2, 60 * MiB, 60 * MiB, 60 * MiB, cap);
    r.fix[n++] = fix(CA_FIX_ACCUM, 4, 40 * MiB, 40 * MiB, 40 * MiB, cap);
    r.fix[n++] = fix(CA_FIX_ACCUM, 8, 30 * MiB, 30 * MiB, 30 * MiB, cap);
    r.fix[n++] = fix(CA_FIX_BF16, 0, 70 * MiB, 55 * MiB, 85 * MiB, cap);
    r.fix[n++] = fix(CA_FIX_CHECKPOINT, 0, 45 * MiB, 42 * MiB, 45 * MiB, cap);
    r.fix[n++] = fix(CA_FIX_ACCUM | CA_FIX_BF16 | CA_FIX_CHECKPOINT, 4, 22 * MiB, 20 * MiB, 24 * MiB, cap);
    r.n_fix = n;
    r.blocks = 6;
    if (cap) {
        r.missing = r.peak > cap ? r.peak - cap : 0;
        r.micro_fraction = cap >= 100 * MiB ? 1 : cap > 20 * MiB ? 0.25 : 0;
        r.unscaled_peak = 20 * MiB;
    }
    return r;
}

static int has(char (*lines)[CA_FIX_LINE], size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (strstr(lines[i], what)) return 1;
    return 0;
}

START_TEST(labels) {
    char buf[200];
    ca_fix f = fix(CA_FIX_ACCUM, 4, 40 * MiB, 30 * MiB, 40 * MiB, 0);
    ca_fix_label(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, "gradient accumulation over 4 micro-batches");
    ca_fix_figures(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, "40.0 MiB (30.0 MiB to 40.0 MiB)");
    f = fix(CA_FIX_ACCUM | CA_FIX_BF16 | CA_FIX_CHECKPOINT, 4, 1, 1, 1, 0);
    ca_fix_label(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, "accumulation over 4 micro-batches + bf16 autocast + checkpointing of 6 blocks");
    f = fix(CA_FIX_CHECKPOINT, 0, 1, 1, 1, 0);
    ca_fix_label(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, "activation checkpointing of 6 blocks");
    ca_fix_figures(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, "1 B");
}
END_TEST

/* 64 MiB: accumulation over 2 fits, checkpointing fits, bf16 may. */
START_TEST(single_fixes_fit) {
    ca_fix_report r = run(64 * MiB);
    char lines[CA_FIX_ADVICE_MAX][CA_FIX_LINE];
    size_t n = ca_fixes_advice(&r, 64 * MiB, lines, CA_FIX_ADVICE_MAX);
    ck_assert(has(lines, n, "gradient accumulation over 2 micro-batches"));
    ck_assert(!has(lines, n, "over 4 micro-batches")); /* the fewest that fit */
    ck_assert(has(lines, n, "activation checkpointing of 6 blocks"));
    ck_assert(!has(lines, n, "bf16")); /* predicted 70 MiB: above the device */
    ck_assert(has(lines, n, "fits in 64.0 MiB"));
    ck_assert(has(lines, n, "36.0 MiB more than the device's 64.0 MiB"));
    ck_assert(has(lines, n, "up to 0.25 of the batch (4 or more of them)"));
    ck_assert(!has(lines, n, "together"));
}
END_TEST

/* 25 MiB: only the combination fits. */
START_TEST(only_a_combination) {
    ca_fix_report r = run(25 * MiB);
    char lines[CA_FIX_ADVICE_MAX][CA_FIX_LINE];
    size_t n = ca_fixes_advice(&r, 25 * MiB, lines, CA_FIX_ADVICE_MAX);
    ck_assert(has(lines, n, "accumulation over 4 micro-batches + bf16 autocast + checkpointing of 6 blocks"));
    ck_assert(has(lines, n, "fits in 25.0 MiB"));
    ck_assert(!has(lines, n, "gradient accumulation over"));
}
END_TEST

/* 10 MiB: nothing fits; the lowest is named, and what does not scale. */
START_TEST(nothing_fits) {
    ca_fix_report r = run(10 * MiB);
    char lines[CA_FIX_ADVICE_MAX][CA_FIX_LINE];
    size_t n = ca_fixes_advice(&r, 10 * MiB, lines, CA_FIX_ADVICE_MAX);
    ck_assert(has(lines, n, "No fix alone or together is predicted to fit in 10.0 MiB"));
    ck_assert(has(lines, n, "peaks at 22.0 MiB"));
    ck_assert(has(lines, n, "no micro-batch fits"));
    ck_assert(has(lines, n, "alone peaks at 20.0 MiB"));
}
END_TEST

START_TEST(no_device_size) {
    ca_fix_report r = run(0);
    char lines[CA_FIX_ADVICE_MAX][CA_FIX_LINE];
    size_t n = ca_fixes_advice(&r, 0, lines, CA_FIX_ADVICE_MAX);
    ck_assert_uint_eq(n, 3);
    ck_assert(has(lines, n, "over 4 micro-batches"));
    ck_assert(has(lines, n, "bf16 autocast"));
    ck_assert(has(lines, n, "checkpointing of 6 blocks"));
    ck_assert(!has(lines, n, "fits"));
}
END_TEST

START_TEST(nothing_predicted) {
    ca_fix_report r = {0};
    strcpy(r.why, "no complete iteration: no iteration boundary was marked or detected");
    char lines[CA_FIX_ADVICE_MAX][CA_FIX_LINE];
    size_t n = ca_fixes_advice(&r, 64 * MiB, lines, CA_FIX_ADVICE_MAX);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(lines[0],
                     "No fix can be predicted for this run: no complete iteration: no iteration boundary was marked "
                     "or detected.");
    r = run(64 * MiB);
    r.n_fix = 4; /* no checkpointing: the reason is one line */
    strcpy(r.checkpoint_why, "no repeated blocks in the forward pass (12 allocations before backward starts)");
    n = ca_fixes_advice(&r, 64 * MiB, lines, CA_FIX_ADVICE_MAX);
    ck_assert(has(lines, n, "Checkpointing cannot be predicted: no repeated blocks"));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("fixes_text");
    TCase *tc = tcase_create("fixes_text");
    tcase_add_test(tc, labels);
    tcase_add_test(tc, single_fixes_fit);
    tcase_add_test(tc, only_a_combination);
    tcase_add_test(tc, nothing_fits);
    tcase_add_test(tc, no_device_size);
    tcase_add_test(tc, nothing_predicted);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

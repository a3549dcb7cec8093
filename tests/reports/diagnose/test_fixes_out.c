/* The fixes in the reports (reports/write/fixes_out.h): the JSON keys
 * REPORT.md documents (read back with the project's JSON reader), the text
 * section, the HTML section's bars and device line; with and without a
 * prediction. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>

#include "reports/write/fixes_out.h"
#include "reports/read/json_read.h"
#include "reports/read/value.h"

#define MiB (UINT64_C(1) << 20)

static ca_fix_report run(void) {
    static ca_breakdown groups[3];
    ca_fix_report r = {.have = 1, .iteration = 7, .peak = 100 * MiB, .capacity = 64 * MiB, .blocks = 6};
    r.total = (ca_breakdown){20 * MiB, 5 * MiB, 70 * MiB, 5 * MiB, 15 * MiB};
    groups[1] = (ca_breakdown){20 * MiB, 0, 0, 0, 0};
    groups[2] = (ca_breakdown){0, 5 * MiB, 70 * MiB, 5 * MiB, 15 * MiB};
    r.by_group = groups;
    r.n_groups = 3;
    r.fix[0] = (ca_fix){CA_FIX_ACCUM, 4, 0, 40 * MiB, 39 * MiB, 40 * MiB, 1};
    r.fix[1] = (ca_fix){CA_FIX_BF16, 0, 0, 70 * MiB, 55 * MiB, 85 * MiB, 0};
    r.fix[2] = (ca_fix){CA_FIX_CHECKPOINT, 0, 6, 62 * MiB, 60 * MiB, 66 * MiB, -1};
    r.fix[3] = (ca_fix){CA_FIX_ACCUM | CA_FIX_BF16, 4, 0, 30 * MiB, 25 * MiB, 35 * MiB, 1};
    r.n_fix = 4;
    r.missing = 36 * MiB;
    r.micro_fraction = 0.4;
    r.unscaled_peak = 25 * MiB;
    return r;
}

static const char *const names[] = {NULL, "build (model.c:10)", "train_step (train.py:40)"};

static const ca_val *parse_json(const ca_fix_report *r, ca_doc **doc) {
    ca_json *j = ca_json_new_buf(0);
    ca_json_obj_begin(j);
    ck_assert_int_eq(ca_fixes_json(j, r, names), 0);
    ca_json_obj_end(j);
    ck_assert_int_eq(ca_json_finish(j), 0);
    size_t len;
    const char *s = ca_json_data(j, &len);
    char err[256];
    *doc = ca_json_parse(s, len, err, sizeof err);
    ck_assert_msg(*doc != NULL, "%s", err);
    ca_json_free(j);
    return ca_doc_root(*doc);
}

static int64_t num(const ca_val *v, const char *k) {
    int64_t x;
    ck_assert_msg(ca_val_int(ca_val_get(v, k), &x) == 1, "%s", k);
    return x;
}

START_TEST(json_keys) {
    ca_fix_report r = run();
    ca_doc *doc;
    const ca_val *root = parse_json(&r, &doc);
    const ca_val *bd = ca_val_get(root, "peak_breakdown");
    ck_assert_int_eq(num(bd, "peak_bytes"), 100 * MiB);
    ck_assert_int_eq(num(bd, "persistent_bytes") + num(bd, "kept_bytes") + num(bd, "activations_bytes") +
                         num(bd, "temporaries_bytes"),
                     100 * MiB);
    ck_assert_int_eq(num(bd, "kept_after_peak_bytes"), 15 * MiB);
    const ca_val *frames = ca_val_get(bd, "by_frame");
    ck_assert_uint_eq(ca_val_len(frames), 2);
    ck_assert_str_eq(ca_val_str(ca_val_get(ca_val_item(frames, 1), "frame")), "train_step (train.py:40)");
    const ca_val *fixes = ca_val_get(root, "fixes");
    ck_assert_uint_eq(ca_val_len(fixes), 4);
    const ca_val *f0 = ca_val_item(fixes, 0), *f2 = ca_val_item(fixes, 2), *f3 = ca_val_item(fixes, 3);
    ck_assert_str_eq(ca_val_str(ca_val_get(f0, "fix")), "accumulation");
    ck_assert_int_eq(num(f0, "factor"), 4);
    ck_assert_ptr_null(ca_val_get(f0, "blocks"));
    ck_assert_int_eq(num(f0, "predicted_peak_bytes"), 40 * MiB);
    ck_assert_int_eq(num(f0, "low_bytes"), 39 * MiB);
    ck_assert_int_eq(num(f0, "high_bytes"), 40 * MiB);
    int b;
    ck_assert_int_eq(ca_val_bool(ca_val_get(f0, "fits"), &b), 1);
    ck_assert_int_eq(b, 1);
    ck_assert_str_eq(ca_val_str(ca_val_get(f2, "fix")), "checkpointing");
    ck_assert_int_eq(num(f2, "blocks"), 6);
    ck_assert_int_eq(ca_val_get(f2, "fits")->kind, CA_VAL_NONE);
    ck_assert_str_eq(ca_val_str(ca_val_get(f3, "fix")), "accumulation+bf16");
    const ca_val *dev = ca_val_get(root, "fits_on_device");
    ck_assert_int_eq(num(dev, "capacity_bytes"), 64 * MiB);
    ck_assert_int_eq(num(dev, "missing_bytes"), 36 * MiB);
    const ca_val *single = ca_val_get(dev, "single_fixes");
    ck_assert_uint_eq(ca_val_len(single), 1);
    ck_assert_str_eq(ca_val_str(ca_val_item(single, 0)), "accumulation");
    ck_assert_int_eq(ca_val_get(root, "fixes_unavailable")->kind, CA_VAL_NONE);
    ca_doc_free(doc);
}
END_TEST

START_TEST(json_without_prediction) {
    ca_fix_report r = {0};
    strcpy(r.why, "no complete iteration: no iteration boundary was marked or detected");
    ca_doc *doc;
    const ca_val *root = parse_json(&r, &doc);
    ck_assert_int_eq(ca_val_get(root, "peak_breakdown")->kind, CA_VAL_NONE);
    ck_assert_uint_eq(ca_val_len(ca_val_get(root, "fixes")), 0);
    ck_assert_str_eq(ca_val_str(ca_val_get(root, "fixes_unavailable")), r.why);
    ck_assert_int_eq(ca_val_get(root, "fits_on_device")->kind, CA_VAL_NONE);
    ca_doc_free(doc);
}
END_TEST

static char *render(int html, const ca_fix_report *r) {
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(html ? ca_fixes_html(f, r, names, NULL) : ca_fixes_txt(f, r, names), 0);
    fclose(f);
    return buf;
}

START_TEST(text_section) {
    ca_fix_report r = run();
    char *t = render(0, &r);
    ck_assert_ptr_nonnull(strstr(t, "What would fit"));
    ck_assert_ptr_nonnull(strstr(t, "The peak of iteration 7, 100 MiB, is made of:"));
    ck_assert_ptr_nonnull(strstr(t, "activations     70.0 MiB"));
    ck_assert_ptr_nonnull(strstr(t, "train_step (train.py:40): kept 5.00 MiB, activations 70.0 MiB"));
    ck_assert_ptr_nonnull(strstr(t, "gradient accumulation over 4 micro-batches"));
    ck_assert_ptr_nonnull(strstr(t, "On this device:"));
    ck_assert_ptr_nonnull(strstr(t, "fits in 64.0 MiB"));
    free(t);
    r = (ca_fix_report){0};
    strcpy(r.why, "no complete iteration: the run failed in its first");
    t = render(0, &r);
    ck_assert_ptr_nonnull(strstr(t, "No fix can be predicted for this run: no complete iteration"));
    free(t);
}
END_TEST

START_TEST(html_section) {
    ca_fix_report r = run();
    char *h = render(1, &r);
    ck_assert_ptr_nonnull(strstr(h, "<h2 id=\"fixes\">What would fit</h2>"));
    ck_assert_ptr_nonnull(strstr(h, "class=\"fix-bars\""));
    ck_assert_ptr_nonnull(strstr(h, "class=\"fix-breakdown\""));
    ck_assert_ptr_nonnull(strstr(h, "device 64.0 MiB"));
    /* one bar per fix and one for the run as it is: a title each */
    size_t bars = 0;
    for (const char *p = h; (p = strstr(p, "<g><title>")); p++) bars++;
    ck_assert_uint_eq(bars, 5);
    ck_assert_ptr_nonnull(strstr(h, "fill=\"#4c9a5b\""));  /* fits */
    ck_assert_ptr_nonnull(strstr(h, "fill=\"#c8553d\""));  /* does not */
    ck_assert_ptr_nonnull(strstr(h, "train_step (train.py:40)"));
    free(h);
    r.capacity = 0; /* no device: no line */
    h = render(1, &r);
    ck_assert_ptr_null(strstr(h, "device "));
    free(h);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("fixes_out");
    TCase *tc = tcase_create("fixes_out");
    tcase_add_test(tc, json_keys);
    tcase_add_test(tc, json_without_prediction);
    tcase_add_test(tc, text_section);
    tcase_add_test(tc, html_section);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

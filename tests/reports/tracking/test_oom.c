/* OOM verdicts, each of the three from a real allocator state (count
 * backend), and the leak's projected out-of-memory iteration against the
 * iteration that actually failed. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>

#include "allocator/allocator.h"
#include "reports/diagnose/oom.h"
#include "reports/write/report.h"
#include "reports/write/report_internal.h"
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

/* The last OOM record's verdict. */
static ca_oom_verdict last_verdict(ca_tracker *t, ca_oom_record *out) {
    ca_track_snap s;
    ca_tracker_snapshot(t, &s);
    ck_assert_uint_ge(s.n_ooms, 1);
    ck_assert_int_eq(s.ooms[s.n_ooms - 1].have_info, 1);
    *out = s.ooms[s.n_ooms - 1];
    ca_track_snap_free(&s);
    return out->verdict;
}

START_TEST(judge_unit) {
    ca_oom_info i = {.requested = 10 * MIB, .device_free = 2 * MIB, .free_cached = 9 * MIB};
    ck_assert_int_eq(ca_oom_judge(&i, 0), CA_OOM_FRAGMENTED);
    i.free_cached = 4 * MIB;
    ck_assert_int_eq(ca_oom_judge(&i, 0), CA_OOM_NOT_THERE);
    ck_assert_int_eq(ca_oom_judge(&i, 3 * MIB), CA_OOM_NOT_THERE);
    ck_assert_int_eq(ca_oom_judge(&i, 4 * MIB), CA_OOM_LEAK);
    for (int v = 0; v < 3; v++) {
        ck_assert_ptr_nonnull(ca_oom_advice((ca_oom_verdict)v)[0]);
        ck_assert_ptr_nonnull(ca_oom_verdict_text((ca_oom_verdict)v));
    }
}
END_TEST

/* A request larger than the whole device: "not there", whatever the other
 * figures say; sums of figures near 2^64 do not wrap into "too little". */
START_TEST(judge_beyond_the_device) {
    ca_oom_info i = {.requested = 64 * MIB + 1, .device_total = 64 * MIB, .device_free = 64 * MIB};
    ck_assert_int_eq(ca_oom_judge(&i, 0), CA_OOM_BEYOND);
    ck_assert_int_eq(ca_oom_judge(&i, UINT64_MAX), CA_OOM_BEYOND);
    i.requested = 64 * MIB; /* the whole device: it would fit an empty one */
    ck_assert_int_eq(ca_oom_judge(&i, 0), CA_OOM_FRAGMENTED);
    ck_assert_str_eq(ca_oom_verdict_name(CA_OOM_BEYOND), "not_there");
    ck_assert_ptr_nonnull(strstr(ca_oom_verdict_text(CA_OOM_BEYOND), "the memory is not there"));
    ck_assert_ptr_nonnull(strstr(ca_oom_verdict_text(CA_OOM_BEYOND), "larger than the device"));
    ck_assert_ptr_nonnull(ca_oom_advice(CA_OOM_BEYOND)[0]);
    ca_oom_info w = {.requested = 1000, .device_total = SIZE_MAX, .device_free = SIZE_MAX - 10, .free_cached = 100};
    ck_assert_int_eq(ca_oom_judge(&w, 0), CA_OOM_FRAGMENTED);
    w = (ca_oom_info){.requested = SIZE_MAX - 5, .device_total = SIZE_MAX, .device_free = 100, .free_cached = 100};
    ck_assert_int_eq(ca_oom_judge(&w, UINT64_MAX - 50), CA_OOM_LEAK);
    ck_assert_int_eq(ca_oom_judge(&w, 0), CA_OOM_NOT_THERE);
}
END_TEST

static const char BEYOND_JSON_CHECK[] =
    "import json, sys\n"
    "o = json.load(open(sys.argv[1]))['ooms'][-1]\n"
    "assert o['requested_bytes'] == 2**64 - 1001, o['requested_bytes']\n"
    "assert o['device_total_bytes'] == 64 * 2**20, o\n"
    "assert o['allocated_bytes'] == 5 * 2**20 and o['reserved_bytes'] == 6 * 2**20, o\n"
    "assert o['verdict'] == 'not_there' and 'larger than the device' in o['verdict_text'], o\n"
    "print('OK')\n";
static const char BEYOND_PICKLE_CHECK[] =
    "import pickle, sys\n"
    "s = pickle.load(open(sys.argv[1], 'rb'))\n"
    "ooms = [e for e in s['device_traces'][0] if e['action'] == 'oom']\n"
    "assert len(ooms) == 1 and ooms[0]['size'] == 2**63 - 1, ooms  # the format stops there\n"
    "print('OK')\n";

/* cudaMalloc(SIZE_MAX - 1000) on a 64 MiB device, through the allocator, the
 * tracker and every report file: the size asked, whole, and true figures. */
START_TEST(beyond_the_device) {
    ca_tracker *t;
    ca_allocator *a = make(64 * MIB, 1, &t);
    void *p, *q = NULL;
    ck_assert_int_eq(ca_malloc(a, 5 * MIB, 0, &p, NULL), CA_OK);
    ca_oom_info info;
    ck_assert_int_eq(ca_malloc(a, SIZE_MAX - 1000, 0, &q, &info), CA_ERR_OOM);
    ck_assert_ptr_null(q);
    ca_oom_diagnose(t, &info);
    ca_oom_record r;
    ck_assert_int_eq(last_verdict(t, &r), CA_OOM_BEYOND);
    ck_assert_uint_eq(r.requested, SIZE_MAX - 1000);
    ck_assert_uint_eq(r.info.device_total, 64 * MIB);
    ck_assert_uint_eq(r.info.device_free, 58 * MIB);
    ck_assert_uint_eq(r.info.allocated, 5 * MIB);
    ck_assert_uint_eq(r.info.reserved, 6 * MIB);
    ck_assert_uint_eq(r.info.free_cached, 1 * MIB);
    ca_track_snap s;
    ca_tracker_snapshot(t, &s);
    const ca_ev *e = &s.events[s.n_events - 1];
    ck_assert_int_eq(ca_ev_kind(e), CA_EVK_OOM);
    ck_assert_uint_eq(ca_ev_bytes(e), SIZE_MAX - 1000);
    ck_assert_uint_eq(ca_ev_oom_record(e), 0);
    ck_assert_uint_eq(s.peak_allocated, 5 * MIB);
    ca_track_snap_free(&s);

    const char *dir = scratch();
    char *prefix = path_in(dir, "run");
    ck_assert_int_eq(ca_report_write(t, a, prefix, NULL), 0);
    char *txt = path_in(dir, "run.txt"), *body = read_file(txt, NULL);
    ck_assert_msg(strstr(body, "verdict: not_there: the memory is not there: the request is larger than"), "%s", body);
    ck_assert_ptr_nonnull(strstr(body, "16.0 EiB requested"));
    free(body);
    char *csv = path_in(dir, "run.csv");
    body = read_file(csv, NULL);
    ck_assert_msg(strstr(body, ",allocate failure,0x0,18446744073709550615,"), "%s", body);
    free(body);
    char *json = path_in(dir, "run.json"), *pkl = path_in(dir, "run.pickle");
    ck_python_ok(dir, BEYOND_JSON_CHECK, json);
    ck_python_ok(dir, BEYOND_PICKLE_CHECK, pkl);
    free(txt);
    free(csv);
    free(json);
    free(pkl);
    free(prefix);
    scratch_cleanup();
    ca_free(a, p, 0);
    tracked_done(a, t);
}
END_TEST

START_TEST(not_there) {
    ca_tracker *t;
    ca_allocator *a = make(64 * MIB, 1, &t);
    void *p, *q;
    ck_assert_int_eq(ca_malloc(a, 60 * MIB, 0, &p, NULL), CA_OK);
    ca_oom_info info;
    ck_assert_int_eq(ca_malloc(a, 32 * MIB, 0, &q, &info), CA_ERR_OOM);
    ca_oom_diagnose(t, &info);
    ca_oom_record r;
    ck_assert_int_eq(last_verdict(t, &r), CA_OOM_NOT_THERE);
    ck_assert_uint_eq(r.info.allocated, 60 * MIB);
    ck_assert_uint_eq(r.info.device_free, 4 * MIB);
    ck_assert_str_eq(ca_oom_advice(r.verdict)[0], ca_oom_advice(CA_OOM_NOT_THERE)[0]);
    ck_assert_ptr_nonnull(strstr(ca_oom_advice(r.verdict)[0], "accumulation"));
    ca_free(a, p, 0);
    tracked_done(a, t);
}
END_TEST

/* 25 x 4 MiB fill 100 MiB; every other one freed: 48 MiB free in 4 MiB
 * pieces. A 12 MiB request: classic segments cannot use the pieces and the
 * device is full; expandable segments give the pieces' granules back and map
 * them where the request fits. */
static int fragment_and_ask(int expandable, ca_oom_record *r) {
    ca_tracker *t;
    ca_allocator *a = make(100 * MIB, expandable, &t);
    void *p[25], *q = NULL;
    for (int i = 0; i < 25; i++) ck_assert_int_eq(ca_malloc(a, 4 * MIB, 0, &p[i], NULL), CA_OK);
    for (int i = 1; i < 25; i += 2) ca_free(a, p[i], 0);
    ca_oom_info info;
    int rc = ca_malloc(a, 12 * MIB, 0, &q, &info);
    if (rc == CA_ERR_OOM) {
        ca_oom_diagnose(t, &info);
        last_verdict(t, r);
    } else {
        ca_free(a, q, 0);
    }
    for (int i = 0; i < 25; i += 2) ca_free(a, p[i], 0);
    tracked_done(a, t);
    return rc;
}

START_TEST(fragmented) {
    ca_oom_record r;
    ck_assert_int_eq(fragment_and_ask(0, &r), CA_ERR_OOM);
    ck_assert_int_eq(r.verdict, CA_OOM_FRAGMENTED);
    ck_assert_uint_eq(r.info.free_cached, 48 * MIB);
    ck_assert_uint_eq(r.info.largest_free, 4 * MIB);
    ck_assert_ptr_nonnull(strstr(ca_oom_advice(r.verdict)[0], "expandable"));
    ck_assert_int_eq(fragment_and_ask(1, &r), CA_OK);
}
END_TEST

/* Each iteration: a 16 MiB working set made and freed, and 4 MiB kept. */
static int leaky_iteration(ca_allocator *a, ca_tracker *t, ca_oom_info *info) {
    void *work, *kept;
    int rc = ca_malloc(a, 16 * MIB, 0, &work, info);
    if (rc != CA_OK) return rc;
    ca_free(a, work, 0);
    rc = ca_malloc(a, 4 * MIB, 0, &kept, info);
    ca_tracker_step(t, CA_ITER_EXPLICIT);
    return rc;
}

START_TEST(held_by_a_leak_and_projection) {
    ca_tracker *t;
    ca_allocator *a = make(64 * MIB, 1, &t);
    ca_oom_info info;
    int64_t projected = -2;
    int failed_at = -1;
    for (int it = 0; it < 40 && failed_at < 0; it++) {
        if (leaky_iteration(a, t, &info) != CA_OK) {
            failed_at = it;
            ca_oom_diagnose(t, &info);
        }
        if (it == 5) { /* a report after iteration 5: where will it fail? */
            ca_report_ctx c;
            ck_assert_int_eq(ca_report_ctx_init(&c, t, a, NULL, 0), 0);
            ck_assert_uint_eq(c.n_leaks, 1);
            projected = c.leaks[0].projected_oom_iteration;
            ck_assert_int_eq(c.leak_oom_iteration, projected);
            ck_assert_int_eq(c.verdict, CA_VERDICT_LEAK);
            ca_report_ctx_free(&c);
        }
    }
    /* Iteration m starts 4m MiB up and needs 16 more: 4m + 16 > 64 first at 13. */
    ck_assert_int_eq(failed_at, 13);
    ck_assert_int_eq(projected, failed_at);
    ca_oom_record r;
    ck_assert_int_eq(last_verdict(t, &r), CA_OOM_LEAK);
    ck_assert_uint_eq(r.n_leaks, 1);
    ck_assert_uint_ge(r.leaked_bytes, 12 * 4 * MIB - 4 * MIB);
    ck_assert_uint_eq(r.iteration, 13);
    ck_assert_ptr_nonnull(strstr(ca_oom_advice(r.verdict)[0], ".item()"));
    tracked_done(a, t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("oom");
    TCase *tc = tcase_create("oom");
    tcase_add_test(tc, judge_unit);
    tcase_add_test(tc, judge_beyond_the_device);
    tcase_add_test(tc, beyond_the_device);
    tcase_add_test(tc, not_there);
    tcase_add_test(tc, fragmented);
    tcase_add_test(tc, held_by_a_leak_and_projection);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

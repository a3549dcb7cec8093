/* The live figures (reports/write/live.h): judged as the exit summary judges,
 * at every boundary, the leak sure at the same iteration as the leak rule
 * says (the fourth, for a leak from the first), named as the summary names
 * it; a clean loop never; the status and Prometheus files as written. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "reports/write/live.h"
#include "reports/write/report.h"
#include "tests/reports/tracking/sim.h"

/* The iteration at which ca_live_judge first finds a leak; -1 never. */
static int first_found(int flags, int iterations, ca_live_figures *at) {
    sim s = {sim_tracker(0), 0, 7};
    loop_state L;
    loop_setup(&s, &L);
    int found = -1;
    for (int i = 0; i < iterations && found < 0; i++) {
        loop_iteration(&s, &L, flags);
        ca_live_figures g;
        ck_assert_int_eq(ca_live_judge(s.t, NULL, 1, &g), 0);
        ck_assert_uint_eq(g.iteration, (unsigned)i + 1);
        if (g.n_findings) {
            found = i + 1;
            *at = g;
            /* the summary names the same finding the same way */
            char *text = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&text, &len);
            ca_report_summary(s.t, NULL, NULL, f);
            fclose(f);
            ck_assert_msg(strstr(text, g.findings[0].title), "'%s' not in:\n%s", g.findings[0].title, text);
            free(text);
        }
    }
    ca_tracker_destroy(s.t);
    return found;
}

START_TEST(leak_sure_at_the_rule_s_iteration) {
    ca_live_figures g;
    ck_assert_int_eq(first_found(LOOP_MARKS | LOOP_LEAK, 30, &g), 4);
    ck_assert_uint_eq(g.n_findings, 1);
    ck_assert_double_eq_tol(g.findings[0].bytes_per_iteration, (double)MIB, 1);
    ck_assert_uint_eq(g.findings[0].growth_since, 1);
    ck_assert_int_eq(g.findings[0].oom_iteration, -1); /* no device: no projection */
    ck_assert(strlen(g.findings[0].title) > 0);
    ck_assert_int_eq(first_found(LOOP_MARKS | LOOP_EVAL_LEAK, 30, &g), 4);
    ck_assert_int_eq(first_found(LOOP_MARKS, 40, &g), -1);
    ck_assert_int_eq(first_found(LOOP_MARKS | LOOP_VARYING, 40, &g), -1);
}
END_TEST

START_TEST(growth_over_the_last_iterations) {
    sim s = {sim_tracker(0), 0, 7};
    loop_state L;
    loop_setup(&s, &L);
    ca_live_figures g;
    for (int i = 0; i < 20; i++) loop_iteration(&s, &L, LOOP_MARKS | LOOP_LEAK);
    ck_assert_int_eq(ca_live_judge(s.t, NULL, 0, &g), 0);
    ck_assert_double_eq_tol(g.growth_per_iteration, (double)MIB, 1);
    ck_assert_str_eq(g.findings[0].title, ""); /* not named unless asked */
    ca_tracker_destroy(s.t);
}
END_TEST

START_TEST(status_and_metrics_files) {
    ca_live_figures g[2] = {{.device = 0, .iteration = 12, .source = CA_ITER_EXPLICIT, .seconds_per_iteration = 0.5,
                             .reserved = 64 * MIB, .allocated = 60 * MIB, .n_findings = 1,
                             .findings = {{.bytes_per_iteration = (double)MIB, .growth_since = 1, .oom_iteration = 40,
                                           .n_sites = 2, .title = "allocations from f (a.c:1)\nare kept"}}},
                            {.device = 1, .iteration = 12}};
    ca_live_process p = {.pid = 42, .start_ticks = 7, .rank = 3, .unix_time = 1000, .program = "train --x"};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ca_live_write_status(f, &p, g, 2);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "cudalloc-status 1\npid 42\nstart 7\nrank 3\ntime 1000.000\nprogram train --x\n"
                                       "devices 2\ndevice 0\niteration 12\nsource explicit\n"));
    /* 28 iterations left at 0.5 s each; the title's line break does not end the line */
    ck_assert_ptr_nonnull(strstr(text, "\nfinding 1048576.0 1 40 1014 2 allocations from f (a.c:1) are kept\n"));
    ck_assert_ptr_nonnull(strstr(text, "\ndevice 1\niteration 12\n"));
    free(text);
    f = open_memstream(&text, &len);
    ca_live_write_metrics(f, &p, g, 2);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "# HELP cudalloc_reserved_bytes Device memory held by cudalloc.\n"
                                       "# TYPE cudalloc_reserved_bytes gauge\n"
                                       "cudalloc_reserved_bytes{device=\"0\",rank=\"3\"} 67108864\n"
                                       "cudalloc_reserved_bytes{device=\"1\",rank=\"3\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(text, "cudalloc_projected_oom_iteration{device=\"0\",rank=\"3\"} 40\n"));
    ck_assert_ptr_nonnull(strstr(text, "cudalloc_projected_oom_iteration{device=\"1\",rank=\"3\"} -1\n"));
    free(text);
    char *json = ca_live_finding_json("leak", &g[0], &g[0].findings[0], 1000);
    ck_assert_str_eq(json, "{\"event\":\"leak\",\"device\":0,\"iteration\":12,\"bytes_per_iteration\":1048576.0,"
                           "\"growth_since\":1,\"leaked_bytes\":0,\"n_sites\":2,\"oom_iteration\":40,\"oom_time\":1014.0,"
                           "\"title\":\"allocations from f (a.c:1)\\nare kept\"}\n");
    free(json);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("live");
    TCase *tc = tcase_create("live");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, leak_sure_at_the_rule_s_iteration);
    tcase_add_test(tc, growth_over_the_last_iterations);
    tcase_add_test(tc, status_and_metrics_files);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

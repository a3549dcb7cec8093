/* CUDALLOC_CONF parsing (preload/config.c): every key, the defaults, and
 * every rejection as one line that names what was wrong. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"
#include "tests/check_run.h"

static char err[512];

static ca_config parse_ok(const char *conf)
{
    ca_config c;
    ck_assert_msg(ca_config_parse(conf, &c, err, sizeof err) == 0, "'%s': %s", conf, err);
    return c;
}

static void parse_fails(const char *conf, const char *want)
{
    ca_config c;
    ck_assert_msg(ca_config_parse(conf, &c, err, sizeof err) == -1, "'%s' should fail", conf);
    ck_assert_str_eq(err, want);
}

START_TEST(defaults_and_every_key)
{
    unsetenv("CUDALLOC_REPORT");
    ca_config c = parse_ok(NULL);
    ck_assert(c.expandable && !c.sync_free && c.summary && c.tracking && c.trace_iterations && c.oom_message &&
              c.context_fences && c.membarrier);
    ck_assert_uint_eq(c.max_reserved, 0);
    ck_assert_uint_eq(c.release_after, CA_RELEASE_AFTER);
    ck_assert_str_eq(c.report, "");
    ck_assert_str_eq(c.nvtx_range, "step");
    c = parse_ok(" expandable_segments:false, sync_free:1 ,max_reserved:1.5GiB,report:/tmp/r-%p,nvtx_range:iter,"
                 "summary:no,trace_iterations:0,tracking:FALSE,oom_message:false,release_after:0,context_fences:0,membarrier:0,,");
    ck_assert_uint_eq(c.release_after, 0);
    ck_assert_uint_eq(parse_ok("release_after:250").release_after, 250);
    ck_assert_uint_eq(parse_ok(NULL).share_bytes, CA_SHARE_BYTES);
    ck_assert_uint_eq(parse_ok("share_bytes:0").share_bytes, 0);
    ck_assert_uint_eq(parse_ok("share_bytes:256KiB").share_bytes, 256u << 10);
    ck_assert(!c.expandable && c.sync_free && !c.summary && !c.tracking && !c.trace_iterations && !c.oom_message &&
              !c.context_fences && !c.membarrier);
    ck_assert_uint_eq(c.max_reserved, 3ull << 29);
    ck_assert_str_eq(c.report, "/tmp/r-%p");
    ck_assert_str_eq(c.nvtx_range, "iter");
    setenv("CUDALLOC_REPORT", "/tmp/from-env", 1);
    ck_assert_str_eq(parse_ok("").report, "/tmp/from-env");
    ck_assert_str_eq(parse_ok("report:/tmp/from-env").report, "/tmp/from-env"); /* the same twice: fine */
    parse_fails("report:/tmp/conf",
                "CUDALLOC_CONF: report:/tmp/conf and CUDALLOC_REPORT=/tmp/from-env disagree: accepted: one of them");
    unsetenv("CUDALLOC_REPORT");
}
END_TEST

START_TEST(rejections_name_the_problem)
{
    parse_fails("expandable_segment:true",
                "CUDALLOC_CONF: unknown key 'expandable_segment': accepted: expandable_segments, sync_free, "
                "max_reserved, release_after, share_bytes, report, nvtx_range, summary, trace_iterations, tracking, python_frames, "
                "oom_message, context_fences, membarrier, on_leak, on_oom, exit_code, error_exitcode, status, metrics, "
                "metrics_every, suppressions");
    parse_fails("summary", "CUDALLOC_CONF: 'summary' is not key:value");
    parse_fails("release_after:-1",
                "CUDALLOC_CONF: bad value '-1' for release_after: accepted: a count such as 10000, 0 for never");
    parse_fails("release_after:1e4",
                "CUDALLOC_CONF: bad value '1e4' for release_after: accepted: a count such as 10000, 0 for never");
    parse_fails("share_bytes:-1", "CUDALLOC_CONF: bad value '-1' for share_bytes: accepted: a size such as 1MiB, 0 "
                                  "for never");
    parse_fails("summary:maybe", "CUDALLOC_CONF: bad value 'maybe' for summary: accepted: true, false, 1, 0");
    parse_fails("max_reserved:lots",
                "CUDALLOC_CONF: bad value 'lots' for max_reserved: accepted: a size of at least 2MiB, such as 512MiB, "
                "20GiB");
    parse_fails("nvtx_range:", "CUDALLOC_CONF: bad value '' for nvtx_range: accepted: a name of 1 to 127 bytes");
    parse_fails("suppressions:", "CUDALLOC_CONF: bad value '' for suppressions: accepted: a file name of 1 to 1023 bytes");
    ck_assert_str_eq(parse_ok("suppressions:/etc/cudalloc.supp").suppressions, "/etc/cudalloc.supp");
    ck_assert_str_eq(parse_ok("").suppressions, "");
}
END_TEST

/* Refused at start, not at exit or silently (issue 20): a key given twice, a
 * cap that rounds to no granule, report prefixes that cannot be expanded or
 * that name a directory; CUDALLOC_REPORT's errors are its own. */
START_TEST(refused_at_start)
{
    unsetenv("CUDALLOC_REPORT");
    parse_fails("summary:true,max_reserved:1GiB,summary:false",
                "CUDALLOC_CONF: summary is given twice: accepted: each key once");
    parse_fails("max_reserved:1",
                "CUDALLOC_CONF: bad value '1' for max_reserved: accepted: a size of at least 2MiB, such as 512MiB, 20GiB");
    parse_fails("max_reserved:2047KiB", "CUDALLOC_CONF: bad value '2047KiB' for max_reserved: accepted: a size of at "
                                        "least 2MiB, such as 512MiB, 20GiB");
    ck_assert_uint_eq(parse_ok("max_reserved:2MiB").max_reserved, 2u << 20);
    parse_fails("report:/tmp/r-%q", "CUDALLOC_CONF: report prefix '/tmp/r-%q' has an unknown '%q': accepted: %p pid, "
                                    "%r rank, %% for a '%'");
    parse_fails("report:/tmp/r%", "CUDALLOC_CONF: report prefix '/tmp/r%' ends with a lone '%': accepted: %p pid, "
                                  "%r rank, %% for a '%'");
    parse_fails("report:/tmp/runs/", "CUDALLOC_CONF: report prefix '/tmp/runs/' ends with '/': accepted: a prefix "
                                     "that names the files, such as /tmp/runs/run (writes /tmp/runs/run.txt, .json, ...)");
    ck_assert_str_eq(parse_ok("report:/tmp/100%%-%r-%p").report, "/tmp/100%%-%r-%p");
    setenv("CUDALLOC_REPORT", "/tmp/x-%z", 1);
    parse_fails("", "CUDALLOC_REPORT: report prefix '/tmp/x-%z' has an unknown '%z': accepted: %p pid, %r rank, %% "
                    "for a '%'");
    unsetenv("CUDALLOC_REPORT");
}
END_TEST

/* Found by fuzzing (tests/fuzz/corpus/conf/regress_cr_in_value): a line break
 * or carriage return in the environment value was echoed raw, so the "one
 * line" error became several, or overwrote itself on a terminal. */
START_TEST(control_bytes_in_values_are_escaped)
{
    parse_fails("expandable_segments:t\r\rrue",
                "CUDALLOC_CONF: bad value 't\\x0d\\x0drue' for expandable_segments: accepted: true, false, 1, 0");
    parse_fails("summary\n:true", "CUDALLOC_CONF: unknown key 'summary\\x0a': accepted: expandable_segments, "
                                  "sync_free, max_reserved, release_after, share_bytes, report, nvtx_range, summary, trace_iterations, "
                                  "tracking, python_frames, oom_message, context_fences, membarrier, on_leak, on_oom, "
                                  "exit_code, error_exitcode, status, metrics, metrics_every, suppressions");
    parse_fails("a\nb", "CUDALLOC_CONF: 'a\\x0ab' is not key:value");
    /* a huge value is cut, the message still ends with what is accepted */
    char conf[3000] = "max_reserved:";
    memset(conf + strlen(conf), '9', 2000);
    strcat(conf, "x");
    ca_config c;
    ck_assert_int_eq(ca_config_parse(conf, &c, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "999...' for max_reserved: accepted: a size"));
    ck_assert_ptr_null(strchr(err, '\n'));
}
END_TEST

/* While the job runs (issue 33): what a leak or an OOM does, the statuses,
 * the live status file and the metrics file. */
START_TEST(on_leak_on_oom_and_the_live_files)
{
    unsetenv("CUDALLOC_REPORT");
    ca_config c = parse_ok(NULL);
    ck_assert(c.on_leak == CA_ON_WARN && c.on_oom == CA_ON_WARN && c.status);
    ck_assert_uint_eq(c.exit_code, 75);
    ck_assert_uint_eq(c.error_exitcode, 0);
    ck_assert_str_eq(c.metrics, "");
    ck_assert_uint_eq(c.metrics_every, 5);
    c = parse_ok("on_leak:EXIT,on_oom:report,exit_code:0,error_exitcode:255,status:false,metrics:/tmp/m-%r.prom,"
                 "metrics_every:1");
    ck_assert(c.on_leak == CA_ON_EXIT && c.on_oom == CA_ON_REPORT && !c.status);
    ck_assert_uint_eq(c.exit_code, 0);
    ck_assert_uint_eq(c.error_exitcode, 255);
    ck_assert_str_eq(c.metrics, "/tmp/m-%r.prom");
    ck_assert_uint_eq(c.metrics_every, 1);
    /* report and exit write the reports: to cudalloc.PID.* when no prefix is given */
    ck_assert_str_eq(c.report, CA_DEFAULT_REPORT);
    ck_assert_str_eq(parse_ok("on_oom:exit,report:/tmp/mine").report, "/tmp/mine");
    ck_assert_str_eq(parse_ok("on_leak:warn").report, "");
    parse_fails("on_leak:stop", "CUDALLOC_CONF: bad value 'stop' for on_leak: accepted: warn, report, exit");
    parse_fails("exit_code:256", "CUDALLOC_CONF: bad value '256' for exit_code: accepted: an exit status from 0 to 255");
    parse_fails("error_exitcode:-1",
                "CUDALLOC_CONF: bad value '-1' for error_exitcode: accepted: an exit status from 0 to 255");
    parse_fails("metrics_every:0", "CUDALLOC_CONF: bad value '0' for metrics_every: accepted: seconds from 1 to 86400");
    parse_fails("metrics:/tmp/m-%x", "CUDALLOC_CONF: metrics path '/tmp/m-%x' has an unknown '%x': accepted: %p pid, "
                                     "%r rank, %% for a '%'");
    char buf[2048];
    ca_config_format(&c, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, ",on_leak:exit,on_oom:report,exit_code:0,error_exitcode:255,status:False,"
                                      "metrics_every:1"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, defaults_and_every_key);
    tcase_add_test(tc, rejections_name_the_problem);
    tcase_add_test(tc, control_bytes_in_values_are_escaped);
    tcase_add_test(tc, refused_at_start);
    tcase_add_test(tc, on_leak_on_oom_and_the_live_files);
    suite_add_tcase(s, tc);
    return ca_check_run(s);
}

/* reports/diagnose/suppress: a suppressions file as valgrind users write one
 * (comments, fun:/src:/obj: prefixes, globs), matched against a site's
 * frames; a file that cannot be read or holds a line too long is a one-line
 * error naming it. */
#include "helpers.h"

#include "reports/diagnose/suppress.h"

static char err[1200];

static const char *supp_file(const char *dir, const char *text) {
    static char path[4200];
    snprintf(path, sizeof path, "%s/supp", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static const ca_frame EVAL = {0x1000, "evaluate", "/src/train.c", 99, "/bin/demo_trainer"};
static const ca_frame MAIN = {0x2000, "main", "/src/main.c", 49, "/bin/demo_trainer"};
static const ca_frame NCCL = {0x3000, "ncclMemAlloc", "??", 0, "/usr/lib/libnccl.so.2"};

/* Does the one-pattern file `pattern` suppress a site of these frames? */
static int suppresses(const char *pattern, const ca_frame *a, const ca_frame *b) {
    const char *dir = scratch();
    ca_suppressions s;
    ck_assert_msg(ca_suppressions_load(supp_file(dir, pattern), &s, err, sizeof err) == 0, "%s", err);
    const ca_frame *fr[2] = {a, b};
    int hit = ca_suppressions_match(&s, fr, b ? 2 : 1);
    ca_suppressions_free(&s);
    scratch_cleanup();
    return hit;
}

START_TEST(patterns_match_frames) {
    ck_assert(suppresses("fun:evaluate\n", &EVAL, &MAIN));
    ck_assert(suppresses("fun:eval*\n", &MAIN, &EVAL)); /* any frame of the stack */
    ck_assert(!suppresses("fun:eval\n", &EVAL, &MAIN)); /* a glob matches the whole name */
    ck_assert(suppresses("src:*/train.c:99\n", &EVAL, NULL));
    ck_assert(suppresses("src:/src/train.c\n", &EVAL, NULL)); /* the file alone */
    ck_assert(!suppresses("src:*/train.c:98\n", &EVAL, NULL));
    ck_assert(suppresses("obj:*libnccl.so*\n", &NCCL, &MAIN));
    ck_assert(!suppresses("obj:*libnccl.so*\n", &EVAL, &MAIN));
    ck_assert(suppresses("ncclMem*\n", &NCCL, NULL)); /* bare: any field */
    ck_assert(!suppresses("fun:main*\n", &NCCL, NULL));
}
END_TEST

START_TEST(comments_blank_lines_and_spaces) {
    const char *dir = scratch();
    ca_suppressions s;
    const char *path = supp_file(dir, "# known caches\n\n   \n  fun:evaluate  \r\n# obj:*\n");
    ck_assert_msg(ca_suppressions_load(path, &s, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(s.n, 1);
    ck_assert_str_eq(s.pattern[0], "fun:evaluate");
    const ca_frame *fr[1] = {&MAIN};
    ck_assert(!ca_suppressions_match(&s, fr, 1));
    ca_suppressions_free(&s);
    ck_assert(!ca_suppressions_match(NULL, fr, 1));
    scratch_cleanup();
}
END_TEST

START_TEST(bad_files_are_one_line_errors) {
    const char *dir = scratch();
    ca_suppressions s;
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/none", dir);
    ck_assert_int_eq(ca_suppressions_load(missing, &s, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "none: cannot open the suppressions file: No such file or directory"));
    ck_assert_uint_eq(s.n, 0);
    char *long_line = malloc(10000);
    memset(long_line, 'a', 9998);
    long_line[9998] = '\n', long_line[9999] = 0;
    ck_assert_int_eq(ca_suppressions_load(supp_file(dir, long_line), &s, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "supp:1: line longer than 4094 bytes"));
    ck_assert(!strchr(err, '\n'));
    free(long_line);
    scratch_cleanup();
}
END_TEST

static Suite *suppress_suite(void) {
    Suite *s = suite_create("suppress");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, patterns_match_frames);
    tcase_add_test(tc, comments_blank_lines_and_spaces);
    tcase_add_test(tc, bad_files_are_one_line_errors);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suppress_suite)

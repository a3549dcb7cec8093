/* Shared by the reports/ unit tests: a scratch directory and a way to run
 * a Python checker on what a writer produced. */
#ifndef CA_TEST_REPORTS_HELPERS_H
#define CA_TEST_REPORTS_HELPERS_H
#define _GNU_SOURCE
#include <check.h>

#include "tests/check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char scratch_dir[4096];

/* A fresh private directory for one test (Check forks per test). */
static inline const char *scratch(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base || strlen(base) > 3000)
        base = "/tmp";
    snprintf(scratch_dir, sizeof scratch_dir, "%s/careports.XXXXXX", base);
    ck_assert_msg(mkdtemp(scratch_dir) != NULL, "mkdtemp failed");
    return scratch_dir;
}

static inline void scratch_cleanup(void)
{
    if (!scratch_dir[0])
        return;
    char cmd[8400];
    /* Read-only subdirectories made by tests must not block removal. */
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", scratch_dir, scratch_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", scratch_dir);
    scratch_dir[0] = '\0';
}

static inline char *path_in(const char *dir, const char *name)
{
    char *p;
    ck_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

static inline void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static inline char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert(buf != NULL);
        }
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* Runs `python3 <script> <arg>` (script text written to the scratch
 * directory) and returns its exit status; *out gets stdout+stderr. */
static inline int run_python(const char *dir, const char *script, const char *arg, char **out)
{
    char *spath = path_in(dir, "check.py");
    write_file(spath, script, strlen(script));
    char *cmd;
    ck_assert(asprintf(&cmd, "python3 '%s' '%s' 2>&1", spath, arg) > 0);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "popen python3 failed");
    size_t cap = 4096, n = 0, r;
    char *buf = malloc(cap);
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[n] = '\0';
    int st = pclose(p);
    free(cmd);
    free(spath);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Asserts the checker printed OK and exited 0, showing its output if not. */
#define ck_python_ok(dir, script, arg)                                               \
    do {                                                                             \
        char *out_;                                                                  \
        int rc_ = run_python((dir), (script), (arg), &out_);                         \
        ck_assert_msg(rc_ == 0 && strstr(out_, "OK") != NULL,                        \
                      "python check failed (exit %d):\n%s", rc_, out_);              \
        free(out_);                                                                  \
    } while (0)

#define RUN_SUITE(make_suite)                                                        \
    int main(void) { return ca_check_run(make_suite()); }

#endif

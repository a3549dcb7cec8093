/* reports/fileout: templates expand as documented, reports appear whole and
 * private (0600), symlinks at the final or temporary names never redirect
 * the write, and an unwritable place is a clear one-line error. */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "reports/write/fileout.h"

static char err[CA_OUT_ERRLEN];

static void expand_eq(const char *tmpl, const char *want)
{
    char *got = ca_path_expand(tmpl, err, sizeof err);
    ck_assert_msg(got != NULL, "expanding %s: %s", tmpl, err);
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(template_expansion)
{
    char want[256];
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
    snprintf(want, sizeof want, "/tmp/rep-%ld-0-%%.html", (long)getpid());
    expand_eq("/tmp/rep-%p-%r-%%.html", want);
    setenv("LOCAL_RANK", "5", 1);
    expand_eq("r%r", "r5");
    setenv("RANK", "12", 1);
    expand_eq("r%r", "r12");
    setenv("RANK", "../../etc", 1);   /* not a number: ignored */
    expand_eq("r%r", "r5");
    setenv("LOCAL_RANK", "", 1);
    expand_eq("r%r", "r0");
    expand_eq("plain", "plain");
    expand_eq("%%%%", "%%");

    ck_assert_ptr_null(ca_path_expand("a%xb", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "unknown '%x'"));
    ck_assert_ptr_null(ca_path_expand("trailing%", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "lone '%'"));
    ck_assert_ptr_null(ca_path_expand("", err, sizeof err));
    ck_assert_ptr_null(ca_path_expand(NULL, NULL, 0));   /* no crash without err */
}
END_TEST

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void write_report(const char *path, const char *text)
{
    ca_out *o = ca_out_open(path, err, sizeof err);
    ck_assert_msg(o != NULL, "open %s: %s", path, err);
    ck_assert_str_eq(ca_out_path(o), path);
    ck_assert(fputs(text, ca_out_file(o)) >= 0);
    ck_assert_msg(ca_out_commit(o, err, sizeof err) == 0, "commit: %s", err);
}

START_TEST(commit_writes_whole_private_file)
{
    const char *dir = scratch();
    char *path = path_in(dir, "report.json");
    static const mode_t masks[] = {0, 022, 077};
    for (int i = 0; i < 3; i++) {
        umask(masks[i]);
        write_report(path, "{\"ok\": true}\n");
        struct stat st;
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        char *back = read_file(path, NULL);
        ck_assert_str_eq(back, "{\"ok\": true}\n");
        free(back);
        ck_assert_int_eq(count_entries(dir), 1);   /* no temporary left */
    }
    umask(022);

    /* until commit the final name is untouched; abort leaves it so */
    ca_out *o = ca_out_open(path, err, sizeof err);
    ck_assert(o);
    fputs("half a report", ca_out_file(o));
    fflush(ca_out_file(o));
    ck_assert_int_eq(count_entries(dir), 2);
    char *back = read_file(path, NULL);
    ck_assert_str_eq(back, "{\"ok\": true}\n");
    free(back);
    ca_out_abort(o);
    ck_assert_int_eq(count_entries(dir), 1);
    ca_out_abort(NULL);

    /* template form */
    char *tmpl = path_in(dir, "r-%p.txt"), want[64];
    snprintf(want, sizeof want, "r-%ld.txt", (long)getpid());
    o = ca_out_open_template(tmpl, err, sizeof err);
    ck_assert_msg(o != NULL, "%s", err);
    ck_assert_ptr_nonnull(strstr(ca_out_path(o), want));
    ck_assert_int_eq(ca_out_commit(o, err, sizeof err), 0);
    free(tmpl);
    free(path);
    scratch_cleanup();
}
END_TEST

/* A report named after a device or a FIFO (/dev/null, a pipe to a reader) is
 * written into it: a rename over it put a regular file where /dev/null was. */
START_TEST(special_files_are_written_in_place)
{
    const char *dir = scratch();
    char *fifo = path_in(dir, "pipe");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(rd, 0);
    ca_out *o = ca_out_open(fifo, err, sizeof err);
    ck_assert_msg(o != NULL, "%s", err);
    fputs("through the pipe\n", ca_out_file(o));
    ck_assert_int_eq(ca_out_commit(o, err, sizeof err), 0);
    char buf[64] = {0};
    ck_assert_int_eq(read(rd, buf, sizeof buf - 1), 17);
    ck_assert_str_eq(buf, "through the pipe\n");
    close(rd);
    struct stat st;
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    ck_assert_int_eq(count_entries(dir), 1);   /* no temporary beside it */

    /* no reader: one error, no hang, the FIFO stays */
    ck_assert_ptr_null(ca_out_open(fifo, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "pipe"));
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    free(fifo);
    scratch_cleanup();
}
END_TEST

START_TEST(symlink_at_final_name_is_replaced_not_followed)
{
    const char *dir = scratch();
    char *victim = path_in(dir, "victim");
    char *path = path_in(dir, "report.html");
    write_file(victim, "precious", 8);
    ck_assert_int_eq(symlink(victim, path), 0);
    write_report(path, "<html>report</html>");
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert_msg(S_ISREG(st.st_mode), "the symlink is still there");
    char *v = read_file(victim, NULL);
    ck_assert_str_eq(v, "precious");
    free(v);
    v = read_file(path, NULL);
    ck_assert_str_eq(v, "<html>report</html>");
    free(v);
    free(victim);
    free(path);
    scratch_cleanup();
}
END_TEST

START_TEST(planted_temp_names_do_not_redirect)
{
    const char *dir = scratch();
    char *path = path_in(dir, "report.pickle");
    char *victim = path_in(dir, "victim");
    char *dangling = path_in(dir, "would-be-created");
    write_file(victim, "precious", 8);
    char t0[4096], t1[4096], t2[4096];
    ck_assert_int_eq(ca_out_tmp_name(path, 0, t0, sizeof t0), 0);
    ck_assert_int_eq(ca_out_tmp_name(path, 1, t1, sizeof t1), 0);
    ck_assert_int_eq(ca_out_tmp_name(path, 2, t2, sizeof t2), 0);
    ck_assert_str_ne(t0, t1);
    ck_assert_int_eq(strncmp(t0, dir, strlen(dir)), 0);   /* same directory */
    ck_assert_int_eq(symlink(dangling, t0), 0);   /* O_CREAT alone would create its target */
    ck_assert_int_eq(symlink(victim, t1), 0);     /* would overwrite the victim */
    write_file(t2, "someone else's", 14);         /* would be truncated */

    write_report(path, "snapshot bytes");

    char *v = read_file(victim, NULL);
    ck_assert_str_eq(v, "precious");
    free(v);
    ck_assert_int_eq(access(dangling, F_OK), -1);
    v = read_file(t2, NULL);
    ck_assert_str_eq(v, "someone else's");
    free(v);
    struct stat st;
    ck_assert_int_eq(lstat(t0, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(t1, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    v = read_file(path, NULL);
    ck_assert_str_eq(v, "snapshot bytes");
    free(v);
    ck_assert_int_eq(count_entries(dir), 5);   /* victim, 3 planted, report */

    /* a very long name still gets a temporary name within NAME_MAX */
    char longname[300];
    memset(longname, 'n', 250);
    longname[250] = '\0';
    char *lp = path_in(dir, longname);
    write_report(lp, "long");
    free(lp);

    free(path);
    free(victim);
    free(dangling);
    scratch_cleanup();
}
END_TEST

static void expect_open_error(const char *path, const char *fragment)
{
    err[0] = '\0';
    ca_out *o = ca_out_open(path, err, sizeof err);
    ck_assert_msg(o == NULL, "opening %s should fail", path);
    ck_assert_msg(strstr(err, fragment) != NULL, "error '%s' lacks '%s'", err, fragment);
    ck_assert_ptr_null(strchr(err, '\n'));
}

START_TEST(unwritable_places_are_errors)
{
    const char *dir = scratch();
    char *missing = path_in(dir, "no/such/dir/report.html");
    expect_open_error(missing, "does not exist");
    char *file = path_in(dir, "plainfile");
    write_file(file, "x", 1);
    char *under_file = path_in(dir, "plainfile/report.html");
    expect_open_error(under_file, "not a directory");
    expect_open_error("", "empty report path");
    expect_open_error("/tmp/", "names a directory");
    expect_open_error("/tmp/..", "names a directory");
    ck_assert_ptr_null(ca_out_open(missing, NULL, 0));   /* no err buffer: no crash */

    char *ro = path_in(dir, "readonly");
    ck_assert_int_eq(mkdir(ro, 0500), 0);
    char *in_ro = path_in(ro, "report.html");
    if (geteuid() != 0)   /* root writes anywhere: nothing to check then */
        expect_open_error(in_ro, "no permission");

    /* the final name is a directory: found at commit, temp cleaned up */
    char *sub = path_in(dir, "adir");
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    int before = count_entries(dir);
    ca_out *o = ca_out_open(sub, err, sizeof err);
    ck_assert_msg(o != NULL, "%s", err);
    fputs("x", ca_out_file(o));
    ck_assert_int_eq(ca_out_commit(o, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "is a directory") || strstr(err, "Is a directory"), "%s", err);
    ck_assert_int_eq(count_entries(dir), before);

    ck_assert_int_eq(ca_out_commit(NULL, err, sizeof err), -1);
    free(missing), free(file), free(under_file), free(ro), free(in_ro), free(sub);
    scratch_cleanup();
}
END_TEST

/* All temporary names taken (by someone else): a clear error, no write. */
START_TEST(all_temp_names_taken)
{
    const char *dir = scratch();
    char *path = path_in(dir, "r.json");
    char t[4096];
    for (unsigned i = 0; i < 100; i++) {
        ck_assert_int_eq(ca_out_tmp_name(path, i, t, sizeof t), 0);
        write_file(t, "", 0);
    }
    expect_open_error(path, "temporary names");
    free(path);
    scratch_cleanup();
}
END_TEST

/* Temporary names hold a secret of the process: not the old ".NAME.PID.I.tmp"
 * an attacker could plant in advance, and all different. */
START_TEST(temp_names_are_not_predictable)
{
    char t[4096], prefix[128], seen[100][4096];
    snprintf(prefix, sizeof prefix, "/d/.r.json.%ld.", (long)getpid());
    for (unsigned i = 0; i < 100; i++) {
        ck_assert_int_eq(ca_out_tmp_name("/d/r.json", i, t, sizeof t), 0);
        ck_assert_msg(!strncmp(t, prefix, strlen(prefix)), "%s", t);
        const char *tag = t + strlen(prefix);
        ck_assert_uint_eq(strspn(tag, "0123456789abcdef"), 16);
        ck_assert_str_eq(tag + 16, ".tmp");
        for (unsigned j = 0; j < i; j++)
            ck_assert_str_ne(seen[j], t);
        strcpy(seen[i], t);
    }
    char old[128];
    snprintf(old, sizeof old, "/d/.r.json.%ld.0.tmp", (long)getpid());
    ck_assert_str_ne(seen[0], old);
}
END_TEST

/* In a child with RLIMIT_FSIZE at 1000 bytes, where Check's own message file
 * (and a log that stderr may be) would fail too: a failed check exits with
 * its line number, and nothing is printed. */
#define CHILD_CHECK(cond)                                                      \
    do {                                                                       \
        if (!(cond)) _exit(__LINE__ % 200 + 50);                               \
    } while (0)

static int child_write(const char *path, size_t bytes)
{
    ca_out *o = ca_out_open(path, err, sizeof err);
    if (!o) return -2;
    char line[64];
    memset(line, 'r', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    for (size_t n = 0; n < bytes; n += sizeof line)
        fwrite(line, 1, sizeof line, ca_out_file(o)); /* failures show at commit */
    return ca_out_commit(o, err, sizeof err);
}

static void child_lost_report(const char *dir, const char *path, size_t bytes, int before)
{
    CHILD_CHECK(child_write(path, bytes) == -1);
    CHILD_CHECK(strstr(err, "file size limit") && !strchr(err, '\n'));
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    CHILD_CHECK(n == before); /* no temporary left */
    char back[64] = "";
    FILE *f = fopen(path, "r");
    CHILD_CHECK(f && fgets(back, sizeof back, f));
    fclose(f);
    CHILD_CHECK(!strcmp(back, "previous report\n"));
}

/* Over `ulimit -f` every write fails with EFBIG and the kernel sends SIGXFSZ,
 * whose default action kills: the report is lost, the process (SIGXFSZ at its
 * default) lives on, with its signal mask as it was and no SIGXFSZ left
 * pending. Both where the failure shows: inside the writes (a report bigger
 * than stdio's buffer) and only at the final flush; and an abort. */
START_TEST(file_size_limit_loses_the_report_not_the_program)
{
    const char *dir = scratch();
    char *path = path_in(dir, "r.txt");
    write_report(path, "previous report\n");
    int before = count_entries(dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_DFL);
        struct rlimit lim;
        CHILD_CHECK(getrlimit(RLIMIT_FSIZE, &lim) == 0);
        lim.rlim_cur = 1000;
        CHILD_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        child_lost_report(dir, path, 256 << 10, before); /* fails inside the writes */
        child_lost_report(dir, path, 2000, before);      /* fails at commit's flush */
        ca_out *o = ca_out_open(path, err, sizeof err);  /* an abort after failed writes */
        CHILD_CHECK(o);
        for (int i = 0; i < 100; i++) fputs("0123456789012345678901234567890123456789", ca_out_file(o));
        fflush(ca_out_file(o));
        ca_out_abort(o);
        sigset_t mask, pending;
        CHILD_CHECK(pthread_sigmask(SIG_SETMASK, NULL, &mask) == 0 && !sigismember(&mask, SIGXFSZ));
        CHILD_CHECK(sigpending(&pending) == 0 && !sigismember(&pending, SIGXFSZ));
        CHILD_CHECK(child_write(path, 100) == 0); /* a report that fits is still written */
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "the writer died of signal %d", WTERMSIG(status));
    ck_assert_msg(WEXITSTATUS(status) == 0, "check at line ~%d failed in the child", WEXITSTATUS(status) - 50);
    free(path);
    scratch_cleanup();
}
END_TEST

/* Writes `bytes` of report through ca_out into path: the commit's result. */
static int write_big(const char *path, size_t bytes)
{
    ca_out *o = ca_out_open(path, err, sizeof err);
    ck_assert_msg(o != NULL, "open %s: %s", path, err);
    char line[64];
    memset(line, 'r', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    for (size_t n = 0; n < bytes; n += sizeof line)
        fwrite(line, 1, sizeof line, ca_out_file(o)); /* failures show at commit */
    return ca_out_commit(o, err, sizeof err);
}

/* A failed report: an error naming the cause, the temporary file gone, the
 * previous report intact. */
static void expect_lost_report(const char *dir, const char *path, size_t bytes, const char *why)
{
    int before = count_entries(dir);
    ck_assert_int_eq(write_big(path, bytes), -1);
    ck_assert_msg(strstr(err, why) != NULL, "error '%s' lacks '%s'", err, why);
    ck_assert_ptr_null(strchr(err, '\n'));
    ck_assert_int_eq(count_entries(dir), before);
    char *back = read_file(path, NULL);
    ck_assert_str_eq(back, "previous report\n");
    free(back);
}

/* A full file system (a 64 KiB tmpfs; needs the right to mount, else this
 * test says so and checks nothing): ENOSPC loses the report, not the old one. */
START_TEST(full_disk_loses_the_report_not_the_previous_one)
{
    const char *dir = scratch();
    char *mnt = path_in(dir, "small");
    ck_assert_int_eq(mkdir(mnt, 0700), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") != 0) {
        fprintf(stderr, "fileout: full_disk test skipped: cannot mount a tmpfs (%s)\n", strerror(errno));
        free(mnt);
        scratch_cleanup();
        return;
    }
    char *path = path_in(mnt, "r.txt");
    write_report(path, "previous report\n");
    expect_lost_report(mnt, path, 1 << 20, "is full");
    char *filler = path_in(mnt, "filler");   /* the disk full before a small report: fails at the flush */
    FILE *f = fopen(filler, "w");
    ck_assert(f);
    while (fputs("fill fill fill fill", f) >= 0 && fflush(f) == 0) {
    }
    fclose(f);
    expect_lost_report(mnt, path, 100, "is full");
    ck_assert_int_eq(umount(mnt), 0);
    free(filler);
    free(path);
    free(mnt);
    scratch_cleanup();
}
END_TEST

static Suite *fileout_suite(void)
{
    Suite *s = suite_create("fileout");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, template_expansion);
    tcase_add_test(tc, commit_writes_whole_private_file);
    tcase_add_test(tc, special_files_are_written_in_place);
    tcase_add_test(tc, symlink_at_final_name_is_replaced_not_followed);
    tcase_add_test(tc, planted_temp_names_do_not_redirect);
    tcase_add_test(tc, unwritable_places_are_errors);
    tcase_add_test(tc, all_temp_names_taken);
    tcase_add_test(tc, temp_names_are_not_predictable);
    tcase_add_test(tc, file_size_limit_loses_the_report_not_the_program);
    tcase_add_test(tc, full_disk_loses_the_report_not_the_previous_one);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(fileout_suite)

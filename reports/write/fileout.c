#define _GNU_SOURCE
#include "reports/write/fileout.h"

#include "util/prefix.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_ATTEMPTS 100

struct ca_out {
    FILE *f;
    char *final_path;
    char *tmp_path;
    sigset_t old_mask;   /* the thread's mask before SIGXFSZ was blocked */
    int xfsz_was_pending;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    /* One line, whatever the path contained. */
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* ---- path templates ---- */

static const char *rank_value(void)
{
    static const char *const vars[] = {"RANK", "LOCAL_RANK"};
    for (size_t i = 0; i < 2; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v || strlen(v) > 9)
            continue;
        if (strspn(v, "0123456789") == strlen(v))
            return v;
    }
    return NULL;
}

int ca_rank_env(void)
{
    const char *v = rank_value();
    return v ? atoi(v) : -1;
}

char *ca_path_expand(const char *tmpl, char *err, size_t errlen)
{
    char why[400];
    if (ca_prefix_check(tmpl, why, sizeof why) != 0) { /* the rules people are told at start */
        set_err(err, errlen, "%s", why);
        return NULL;
    }
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    const char *rank = rank_value() ? rank_value() : "0";
    size_t cap = strlen(tmpl) + 1, len = 0;
    for (const char *s = tmpl; *s; s++)   /* each % sequence grows by < 24 */
        if (*s == '%')
            cap += 24;
    char *out = malloc(cap);
    if (!out) {
        set_err(err, errlen, "out of memory expanding report path");
        return NULL;
    }
    for (const char *s = tmpl; *s; s++) {
        if (*s != '%') {
            out[len++] = *s;
            continue;
        }
        s++; /* p, r or %, as checked */
        const char *ins = *s == 'p' ? pid : *s == 'r' ? rank : "%";
        size_t n = strlen(ins);
        memcpy(out + len, ins, n);
        len += n;
    }
    out[len] = '\0';
    return out;
}

/* ---- temporary names ---- */

/* dir part (with its trailing '/', or "" for the current directory) and the
 * base name of path. */
static void split(const char *path, size_t *dir_len, const char **base)
{
    const char *slash = strrchr(path, '/');
    *dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    *base = slash ? slash + 1 : path;
}

/* A secret of this process, so that nobody else can tell the temporary names
 * in advance and plant something at all of them. Drawn once; a forked child
 * shares it, but its pid is in the name too. */
static uint64_t name_secret(void)
{
    static uint64_t secret;
    uint64_t s = __atomic_load_n(&secret, __ATOMIC_RELAXED);
    if (s)
        return s;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        struct timespec t;   /* no entropy yet (early boot): still not a constant */
        clock_gettime(CLOCK_REALTIME, &t);
        s = (uint64_t)t.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)t.tv_sec ^ (uintptr_t)&t;
    }
    s |= 1;   /* never 0, which means "not drawn yet" */
    uint64_t expected = 0;
    __atomic_compare_exchange_n(&secret, &expected, s, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return __atomic_load_n(&secret, __ATOMIC_RELAXED);
}

int ca_out_tmp_name(const char *final_path, unsigned i, char *buf, size_t len)
{
    size_t dir_len;
    const char *base;
    split(final_path, &dir_len, &base);
    char suffix[64];
    /* i varies the secret's bits, so consecutive names share no visible pattern */
    uint64_t tag = name_secret() * (2 * (uint64_t)i + 1) + i;
    int sn = snprintf(suffix, sizeof suffix, ".%ld.%016llx.tmp", (long)getpid(), (unsigned long long)tag);
    /* Keep the temporary name within NAME_MAX however long the base is. */
    size_t base_len = strlen(base);
    size_t room = NAME_MAX - 1 - (size_t)sn;
    if (base_len > room)
        base_len = room;
    int n = snprintf(buf, len, "%.*s.%.*s%s", (int)dir_len, final_path, (int)base_len, base, suffix);
    return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

static const char *dir_for_msg(const char *path, char *buf, size_t len)
{
    size_t dir_len;
    const char *base;
    split(path, &dir_len, &base);
    if (dir_len == 0)
        return ".";
    if (dir_len > 1)
        dir_len--;   /* drop the trailing '/' except for "/" itself */
    snprintf(buf, len, "%.*s", (int)dir_len, path);
    return buf;
}

static void explain(char *err, size_t errlen, const char *what, const char *path, int e)
{
    char dbuf[PATH_MAX];
    const char *dir = dir_for_msg(path, dbuf, sizeof dbuf);
    switch (e) {
    case ENOENT:
        set_err(err, errlen, "cannot %s report '%s': directory '%s' does not exist", what, path, dir);
        break;
    case EACCES:
    case EPERM:
        set_err(err, errlen, "cannot %s report '%s': no permission to write in '%s'", what, path, dir);
        break;
    case EROFS:
        set_err(err, errlen, "cannot %s report '%s': '%s' is on a read-only file system", what, path, dir);
        break;
    case ENOTDIR:
        set_err(err, errlen, "cannot %s report '%s': a component of '%s' is not a directory", what, path, dir);
        break;
    case EISDIR:
        set_err(err, errlen, "cannot %s report '%s': that path is a directory", what, path);
        break;
    case ENOSPC:
    case EDQUOT:
        set_err(err, errlen, "cannot %s report '%s': the file system of '%s' is full (%s)", what, path, dir,
                strerror(e));
        break;
    case EFBIG:
        set_err(err, errlen, "cannot %s report '%s': over the file size limit (ulimit -f) (%s)", what, path,
                strerror(e));
        break;
    default:
        set_err(err, errlen, "cannot %s report '%s': %s", what, path, strerror(e));
    }
}

/* Over RLIMIT_FSIZE a write fails with EFBIG and the kernel also sends
 * SIGXFSZ, whose default action kills the program. A report must never do
 * that: while one is open the signal is blocked in this thread, and one it
 * caused is taken off the pending set before the mask is restored. */
static void xfsz_block(ca_out *o)
{
    sigset_t xfsz, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &o->old_mask);
    o->xfsz_was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
}

static void xfsz_restore(ca_out *o)
{
    sigset_t xfsz, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    if (!o->xfsz_was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ)) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&xfsz, NULL, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &o->old_mask, NULL);
}

/* A path that is no regular file: opened as it is, no temporary, no rename
 * (tmp_path stays NULL, which commit and abort take as in place). */
static ca_out *open_in_place(const char *final_path, char *err, size_t errlen)
{
    ca_out *o = calloc(1, sizeof *o);
    if (!o || !(o->final_path = strdup(final_path))) {
        set_err(err, errlen, "out of memory opening report '%s'", final_path);
        free(o);
        return NULL;
    }
    int fd = open(final_path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);  /* blocking writes from here */
    }
    if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
        explain(err, errlen, "write", final_path, errno == ENXIO ? EPIPE : errno);
        if (fd >= 0) close(fd);
        ca_out_abort(o);
        return NULL;
    }
    xfsz_block(o);
    return o;
}

ca_out *ca_out_open(const char *final_path, char *err, size_t errlen)
{
    if (!final_path || !*final_path) {
        set_err(err, errlen, "empty report path");
        return NULL;
    }
    size_t dir_len;
    const char *base;
    split(final_path, &dir_len, &base);
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        set_err(err, errlen, "report path '%s' names a directory, not a file", final_path);
        return NULL;
    }
    /* A device, a FIFO or a socket (/dev/null, /dev/stdout, a pipe) is written
     * where it is: a rename over it would put a regular file in its place. */
    struct stat st;
    if (stat(final_path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return open_in_place(final_path, err, errlen);
    ca_out *o = calloc(1, sizeof *o);
    size_t tmp_cap = strlen(final_path) + 80;
    if (o) {
        o->final_path = strdup(final_path);
        o->tmp_path = malloc(tmp_cap);
    }
    if (!o || !o->final_path || !o->tmp_path) {
        set_err(err, errlen, "out of memory opening report '%s'", final_path);
        ca_out_abort(o);
        return NULL;
    }
    int fd = -1, e = 0;
    for (unsigned i = 0; i < TMP_ATTEMPTS && fd < 0; i++) {
        if (ca_out_tmp_name(final_path, i, o->tmp_path, tmp_cap) != 0) {
            e = ENAMETOOLONG;
            break;
        }
        /* O_EXCL: never open something already there, symlinks included. */
        fd = open(o->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        e = fd < 0 ? errno : 0;
        if (fd < 0 && e != EEXIST)
            break;
    }
    if (fd < 0) {
        if (e == EEXIST)
            set_err(err, errlen, "cannot write report '%s': %d temporary names next to it are all taken",
                    final_path, TMP_ATTEMPTS);
        else
            explain(err, errlen, "write", final_path, e);
        free(o->tmp_path);
        o->tmp_path = NULL;   /* not ours: nothing to unlink */
        ca_out_abort(o);
        return NULL;
    }
    (void)fchmod(fd, 0600);   /* exactly 0600 whatever the umask */
    o->f = fdopen(fd, "w");
    if (!o->f) {
        e = errno;
        close(fd);
        explain(err, errlen, "write", final_path, e);
        ca_out_abort(o);
        return NULL;
    }
    xfsz_block(o);
    return o;
}

ca_out *ca_out_open_template(const char *tmpl, char *err, size_t errlen)
{
    char *path = ca_path_expand(tmpl, err, errlen);
    if (!path)
        return NULL;
    ca_out *o = ca_out_open(path, err, errlen);
    free(path);
    return o;
}

FILE *ca_out_file(ca_out *o) { return o ? o->f : NULL; }
const char *ca_out_path(const ca_out *o) { return o ? o->final_path : NULL; }

int ca_out_commit(ca_out *o, char *err, size_t errlen)
{
    if (!o) {
        set_err(err, errlen, "no report file to commit");
        return -1;
    }
    int e = 0;
    errno = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
        e = errno ? errno : EIO;
    errno = 0;
    if (fclose(o->f) != 0 && !e)
        e = errno ? errno : EIO;
    o->f = NULL;
    xfsz_restore(o);
    if (!e && o->tmp_path && rename(o->tmp_path, o->final_path) != 0)
        e = errno;
    if (e) {
        explain(err, errlen, "write", o->final_path, e);
        ca_out_abort(o);
        return -1;
    }
    free(o->tmp_path);
    free(o->final_path);
    free(o);
    return 0;
}

void ca_out_abort(ca_out *o)
{
    if (!o)
        return;
    if (o->f) {
        fclose(o->f);
        xfsz_restore(o);
    }
    if (o->tmp_path)
        unlink(o->tmp_path);
    free(o->tmp_path);
    free(o->final_path);
    free(o);
}

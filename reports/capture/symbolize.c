/* Symbolization at report time; see symbolize.h. */
#define _GNU_SOURCE
#include "reports/capture/symbolize.h"

#include "reports/capture/named_frames.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char UNKNOWN[] = "??";

typedef struct entry {
    ca_frame f;
    int module;       /* index in mods, -1 none */
    char *fn, *file;  /* owned strings, when not UNKNOWN */
} entry;

typedef struct module {
    char *path;       /* for addr2line and the report */
    uintptr_t bias;   /* load bias: file address = ip - bias */
    uintptr_t lo, hi; /* executable range */
} module;

struct ca_symtab {
    entry *e;
    size_t n, cap;
    int sorted;
    module *mods;
    size_t n_mods, cap_mods;
};

ca_symtab *ca_symtab_new(void) { return calloc(1, sizeof(ca_symtab)); }

void ca_symtab_free(ca_symtab *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->e[i].fn);
        free(s->e[i].file);
    }
    for (size_t i = 0; i < s->n_mods; i++) free(s->mods[i].path);
    free(s->mods);
    free(s->e);
    free(s);
}

int ca_symtab_add(ca_symtab *s, uintptr_t ip) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        entry *e = realloc(s->e, cap * sizeof *e);
        if (!e) return -1;
        s->e = e;
        s->cap = cap;
    }
    s->e[s->n++] = (entry){.f = {ip, UNKNOWN, UNKNOWN, 0, UNKNOWN}, .module = -1};
    s->sorted = 0;
    return 0;
}

static int by_ip(const void *a, const void *b) {
    uintptr_t x = ((const entry *)a)->f.ip, y = ((const entry *)b)->f.ip;
    return (x > y) - (x < y);
}

static void sort_unique(ca_symtab *s) {
    if (s->sorted) return;
    if (s->n) qsort(s->e, s->n, sizeof *s->e, by_ip);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!k || s->e[i].f.ip != s->e[k - 1].f.ip) s->e[k++] = s->e[i];
    s->n = k;
    s->sorted = 1;
}

const ca_frame *ca_symtab_get(const ca_symtab *s, uintptr_t ip) {
    size_t lo = 0, hi = s->sorted ? s->n : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->e[mid].f.ip < ip) lo = mid + 1;
        else hi = mid;
    }
    return lo < (s->sorted ? s->n : 0) && s->e[lo].f.ip == ip ? &s->e[lo].f : NULL;
}

int ca_frame_is_own(const ca_frame *f) {
    return !strncmp(f->function, "ca_", 3) || !strncmp(f->function, "cudalloc_", 9);
}

/* ---- modules ---- */

static int module_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    ca_symtab *s = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo) lo = a;
        if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    }
    if (hi <= lo) return 0;
    if (s->n_mods == s->cap_mods) {
        size_t cap = s->cap_mods ? 2 * s->cap_mods : 32;
        module *m = realloc(s->mods, cap * sizeof *m);
        if (!m) return 1;
        s->mods = m;
        s->cap_mods = cap;
    }
    char *path = NULL;
    if (s->n_mods == 0 || !info->dlpi_name || !info->dlpi_name[0]) {
        /* The program itself: its name as the kernel knows it. */
        char buf[4096];
        ssize_t k = readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (k > 0) {
            buf[k] = '\0';
            path = strdup(buf);
        }
    } else {
        path = strdup(info->dlpi_name);
    }
    if (!path) return 0;
    s->mods[s->n_mods++] = (module){path, info->dlpi_addr, lo, hi};
    return 0;
}

static int module_of(const ca_symtab *s, uintptr_t addr) {
    for (size_t i = 0; i < s->n_mods; i++)
        if (addr >= s->mods[i].lo && addr < s->mods[i].hi) return (int)i;
    return -1;
}

/* ---- addr2line ---- */

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static char **clean_env(void) {
    size_t n = 0;
    while (environ && environ[n]) n++;
    char **env = calloc(n + 1, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *v = environ[i];
        if (!strncmp(v, "LD_PRELOAD=", 11) || !strncmp(v, "NVTX_INJECTION64_PATH=", 22) ||
            !strncmp(v, "CUDA_INJECTION64_PATH=", 22))
            continue;
        env[k++] = (char *)v;
    }
    return env;
}

/* "file:line" or "file:line (discriminator N)" or "??:0" / "??:?" */
static void parse_location(entry *e, char *line) {
    char *sp = strstr(line, " (discriminator");
    if (sp) *sp = '\0';
    char *colon = strrchr(line, ':');
    if (!colon) return;
    *colon = '\0';
    unsigned ln = (unsigned)strtoul(colon + 1, NULL, 10);
    if (strcmp(line, "??") != 0) {
        char *f = strdup(line);
        if (f) {
            free(e->file);
            e->file = f;
            e->f.file = f;
        }
    }
    e->f.line = ln;
}

static void set_function(entry *e, const char *fn) {
    if (!strcmp(fn, "??") || !*fn) return;
    char *f = strdup(fn);
    if (!f) return;
    free(e->fn);
    e->fn = f;
    e->f.function = f;
}

/* Runs addr2line on module m for entries idx[0..n); 0 when it answered. */
static int run_addr2line(ca_symtab *s, int m, const size_t *idx, size_t n, long long deadline) {
    /* The request goes through a socket: send(MSG_NOSIGNAL) cannot raise
     * SIGPIPE in the host program if addr2line dies early. */
    int in[2], out[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) return -1;
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    /* -i -a: an inlined call answers with its own function and line (the
     * first pair after the address), not the function it was inlined into
     * with the inlined line. */
    char *argv[] = {"addr2line", "-a", "-i", "-f", "-C", "-e", s->mods[m].path, NULL};
    char **env = clean_env();
    pid_t pid;
    int rc = env ? posix_spawnp(&pid, "addr2line", &fa, NULL, argv, env) : -1;
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        close(in[1]);
        close(out[0]);
        return -1;
    }
    /* The request: one address a line, relative to the file, pointing into
     * the call instruction (ip - 1). */
    size_t cap = n * 20 + 1, len = 0;
    char *req = malloc(cap);
    for (size_t i = 0; req && i < n; i++)
        len += (size_t)snprintf(req + len, cap - len, "%lx\n",
                                (unsigned long)(s->e[idx[i]].f.ip - 1 - s->mods[m].bias));
    size_t sent = 0, got = 0, rcap = 1 << 16, answered = 0;
    char *resp = malloc(rcap);
    int ok = req && resp;
    int in_fd = ok ? in[1] : -1, done = !ok;
    if (!ok) close(in[1]);
    while (!done) {
        long long left = deadline - now_ms();
        if (left <= 0) break;
        struct pollfd p[2] = {{out[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
        int np = in_fd >= 0 ? 2 : 1;
        if (poll(p, (nfds_t)np, (int)left) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (np == 2 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = send(in_fd, req + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0) sent += (size_t)w;
            if (w < 0 && errno != EAGAIN && errno != EINTR) sent = len;
            if (sent == len) {
                close(in_fd);
                in_fd = -1;
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (got + 4096 > rcap) {
                char *r = realloc(resp, rcap * 2);
                if (!r) break;
                resp = r;
                rcap *= 2;
            }
            ssize_t r = read(out[0], resp + got, rcap - got - 1);
            if (r > 0) got += (size_t)r;
            else if (r == 0) done = 1;
            else if (errno != EINTR && errno != EAGAIN) done = 1;
        }
    }
    if (in_fd >= 0) close(in_fd);
    close(out[0]);
    if (!done) kill(pid, SIGKILL); /* past the deadline: our own child only */
    waitpid(pid, NULL, 0);
    if (resp && done) {
        /* Per address: "0x...", then a function line and a file:line line
         * per inline level, innermost first. */
        resp[got] = '\0';
        char *save = NULL, *l = strtok_r(resp, "\n", &save);
        size_t i = 0;
        while (l && i <= n) {
            if (l[0] == '0' && l[1] == 'x') { /* the next address */
                char *fn = strtok_r(NULL, "\n", &save), *loc = fn ? strtok_r(NULL, "\n", &save) : NULL;
                if (!loc || i == n) break;
                set_function(&s->e[idx[i]], fn);
                parse_location(&s->e[idx[i]], loc);
                answered++;
                i++;
            }
            l = strtok_r(NULL, "\n", &save);
        }
    }
    free(req);
    free(resp);
    return done && answered ? 0 : -1;
}

int ca_symtab_resolve(ca_symtab *s, int use_addr2line, int timeout_ms) {
    sort_unique(s);
    if (!s->n_mods) dl_iterate_phdr(module_cb, s);
    for (size_t i = 0; i < s->n; i++) {
        entry *e = &s->e[i];
        if (ca_ip_is_named(e->f.ip)) { /* its strings are in the table, for the life of the process */
            e->module = -1;
            ca_named_frame_get(e->f.ip, &e->f.function, &e->f.file, &e->f.line, &e->f.module);
            continue;
        }
        e->module = module_of(s, e->f.ip - 1);
        if (e->module >= 0) e->f.module = s->mods[e->module].path;
        Dl_info info;
        if (dladdr((void *)(e->f.ip - 1), &info) && info.dli_sname) set_function(e, info.dli_sname);
    }
    if (!use_addr2line) return 0;
    long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 1);
    size_t *idx = malloc((s->n ? s->n : 1) * sizeof *idx);
    int answered = 0;
    for (size_t m = 0; idx && m < s->n_mods && now_ms() < deadline; m++) {
        size_t n = 0;
        for (size_t i = 0; i < s->n; i++)
            if (s->e[i].module == (int)m) idx[n++] = i;
        if (!n || s->mods[m].path[0] != '/') continue; /* the vDSO has no file */
        if (run_addr2line(s, (int)m, idx, n, deadline) == 0) answered++;
    }
    free(idx);
    return answered;
}

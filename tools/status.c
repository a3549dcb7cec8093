/* cudalloc status and cudalloc top (status.h). */
#include "tools/status.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/live_file.h"
#include "util/size.h"

#define SZ(x) ca_format_size((x), (char[CA_SIZE_BUF]){0}, CA_SIZE_BUF)
#define MAX_DEVICES 16
#define MAX_FINDINGS 8 /* reports/write/live.h's CA_LIVE_FINDINGS */

typedef struct finding {
    double rate, oom_time;
    unsigned since, sites;
    long long oom_iteration;
    char title[700];
} finding;

typedef struct device {
    int ordinal;
    unsigned iteration, leaks, n_findings;
    char source[16];
    double seconds, seconds_per_iteration, fragmentation, growth;
    unsigned long long reserved, allocated, peak_allocated, peak_reserved, cached_free, largest_free;
    unsigned long long device_total, device_free, allocations, ooms;
    finding findings[MAX_FINDINGS];
} device;

typedef struct status {
    long pid;
    unsigned long long start;
    int rank;
    double time;
    char program[300];
    unsigned n_devices;
    device devices[MAX_DEVICES];
} status;

static void usage(FILE *f) {
    fprintf(f, "usage: cudalloc status PID [--json]\n"
               "       cudalloc top [-n COUNT] PID\n"
               "A program running under cudalloc (your own): per device reserved, allocated, peaks, cached free,\n"
               "largest free block, fragmentation, the iteration, growth per iteration and the leaks found so\n"
               "far, as its preload last published them (at iteration boundaries, at most 4 times a second).\n"
               "  --json     status: one JSON object, for scripts\n"
               "  -n COUNT   top: refresh COUNT times, then exit (default: until the program ends or ^C)\n");
}

/* The uid owning /proc/PID, or -1 with errno set. */
static long owner_of(long pid) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%ld", pid);
    if (stat(path, &st) != 0) return -1;
    return (long)st.st_uid;
}

/* A variable of the process's environment ("" when unset or unreadable). */
static void env_of(long pid, const char *name, char *out, size_t n) {
    char path[64], buf[65536];
    *out = 0;
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t len = fread(buf, 1, sizeof buf - 1, f), nl = strlen(name);
    fclose(f);
    buf[len] = 0;
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        if (!strncmp(buf + i, name, nl) && buf[i + nl] == '=') {
            snprintf(out, n, "%s", buf + i + nl + 1);
            return;
        }
}

/* Where the preload of process pid (user uid) writes, by its environment. */
static void status_path(long pid, unsigned uid, char *out, size_t n) {
    char xdg[1024], dir[1100];
    env_of(pid, "XDG_RUNTIME_DIR", xdg, sizeof xdg);
    ca_live_dir(xdg, uid, dir, sizeof dir);
    snprintf(out, n, "%s/%ld.status", dir, pid);
}

static void parse_finding(const char *v, finding *f) {
    int used = 0;
    if (sscanf(v, "%lf %u %lld %lf %u %n", &f->rate, &f->since, &f->oom_iteration, &f->oom_time, &f->sites, &used) >= 5)
        snprintf(f->title, sizeof f->title, "%s", v + used);
}

/* Reads the status file; 0, or -1 with a one-line reason in err. */
static int read_status(const char *path, status *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024];
    device *d = NULL;
    int ok = fgets(line, sizeof line, f) && !strcmp(line, "cudalloc-status 1\n");
    while (ok && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *v = strchr(line, ' ');
        if (!v) continue;
        *v++ = 0;
#define NUM(key, field, conv)                            \
    else if (!strcmp(line, key)) (field) = conv(v, NULL)
        if (!strcmp(line, "device")) {
            if (s->n_devices >= MAX_DEVICES) break;
            d = &s->devices[s->n_devices++];
            d->ordinal = atoi(v);
        } else if (!strcmp(line, "program")) snprintf(s->program, sizeof s->program, "%s", v);
        NUM("pid", s->pid, strtod);
        NUM("start", s->start, strtod);
        NUM("rank", s->rank, strtod);
        NUM("time", s->time, strtod);
        else if (!d) continue;
        else if (!strcmp(line, "source")) snprintf(d->source, sizeof d->source, "%s", v);
        else if (!strcmp(line, "finding")) {
            if (d->n_findings < MAX_FINDINGS) parse_finding(v, &d->findings[d->n_findings++]);
        }
        NUM("iteration", d->iteration, strtod);
        NUM("seconds", d->seconds, strtod);
        NUM("seconds_per_iteration", d->seconds_per_iteration, strtod);
        NUM("reserved", d->reserved, strtod);
        NUM("allocated", d->allocated, strtod);
        NUM("peak_allocated", d->peak_allocated, strtod);
        NUM("peak_reserved", d->peak_reserved, strtod);
        NUM("cached_free", d->cached_free, strtod);
        NUM("largest_free", d->largest_free, strtod);
        NUM("fragmentation", d->fragmentation, strtod);
        NUM("device_total", d->device_total, strtod);
        NUM("device_free", d->device_free, strtod);
        NUM("growth_per_iteration", d->growth, strtod);
        NUM("allocations", d->allocations, strtod);
        NUM("ooms", d->ooms, strtod);
        NUM("leaks", d->leaks, strtod);
#undef NUM
    }
    fclose(f);
    if (!ok) snprintf(err, errlen, "%s: not a cudalloc status file (format 1)", path);
    return ok ? 0 : -1;
}

/* The status of process pid, or a one-line reason why not. */
static int load(long pid, status *s, char *err, size_t errlen) {
    long uid = owner_of(pid);
    if (uid < 0) {
        snprintf(err, errlen, "no process %ld", pid);
        return -1;
    }
    if (uid != (long)getuid()) {
        snprintf(err, errlen, "process %ld belongs to another user (uid %ld): only its own user can read its figures",
                 pid, uid);
        return -1;
    }
    char path[1200];
    status_path(pid, (unsigned)uid, path, sizeof path);
    if (access(path, F_OK) != 0) {
        snprintf(err, errlen,
                 "process %ld publishes no cudalloc figures (%s missing): not run under cudalloc, no device "
                 "memory used yet, or status:false",
                 pid, path);
        return -1;
    }
    if (read_status(path, s, err, errlen) != 0) return -1;
    if (s->pid != pid || s->start != ca_proc_start_ticks(pid)) {
        snprintf(err, errlen, "%s was written by an earlier process %ld, not this one", path, pid);
        return -1;
    }
    return 0;
}

static void when(double at, double now, char *buf, size_t n) {
    time_t t = (time_t)at;
    struct tm tm;
    localtime_r(&t, &tm);
    char clock[40];
    strftime(clock, sizeof clock, at - now < 86400 ? "%H:%M:%S %Z" : "%Y-%m-%d %H:%M %Z", &tm);
    char in[32];
    ca_format_duration(at - now, in, sizeof in);
    snprintf(buf, n, "about %s (in %s)", clock, in);
}

static void print_text(FILE *f, const status *s, double now) {
    char rank[32] = "";
    if (s->rank >= 0) snprintf(rank, sizeof rank, ", rank %d", s->rank);
    fprintf(f, "pid %ld%s: %s\n", s->pid, rank, s->program);
    fprintf(f, "figures of %.1f s ago\n", now - s->time > 0 ? now - s->time : 0);
    for (unsigned i = 0; i < s->n_devices; i++) {
        const device *d = &s->devices[i];
        fprintf(f, "device %d: iteration %u (%s), %.3f s/iteration, running %.0f s\n", d->ordinal, d->iteration,
                d->source, d->seconds_per_iteration, d->seconds);
        fprintf(f, "  reserved %s, allocated %s; peak reserved %s, peak allocated %s\n", SZ(d->reserved),
                SZ(d->allocated), SZ(d->peak_reserved), SZ(d->peak_allocated));
        fprintf(f, "  cached free %s, largest free block %s, fragmentation %.0f%%\n", SZ(d->cached_free),
                SZ(d->largest_free), d->fragmentation * 100);
        char g[CA_SIZE_BUF];
        ca_format_size((size_t)(d->growth < 0 ? -d->growth : d->growth), g, sizeof g);
        fprintf(f, "  growth %s%s/iteration; device %s, free %s; %llu allocations, %llu OOMs\n",
                d->growth < 0 ? "-" : "+", g, d->device_total ? SZ(d->device_total) : "unknown",
                SZ(d->device_free), d->allocations, d->ooms);
        if (!d->leaks) fprintf(f, "  no leak found\n");
        for (unsigned k = 0; k < d->n_findings; k++) {
            const finding *x = &d->findings[k];
            char at[128] = "";
            if (x->oom_time >= 0) when(x->oom_time, now, at, sizeof at);
            fprintf(f, "  leak %u: +%s/iteration since iteration %u: %s", k + 1, SZ((size_t)x->rate), x->since,
                    x->title);
            if (x->oom_iteration >= 0) fprintf(f, "; runs out at iteration %lld%s%s", x->oom_iteration, *at ? ", " : "", at);
            fputc('\n', f);
        }
        if (d->leaks > d->n_findings) fprintf(f, "  ... and %u more leaks\n", d->leaks - d->n_findings);
    }
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void print_json(FILE *f, const status *s) {
    fprintf(f, "{\"pid\": %ld, \"rank\": %d, \"time\": %.3f, \"program\": ", s->pid, s->rank, s->time);
    json_str(f, s->program);
    fprintf(f, ", \"devices\": [");
    for (unsigned i = 0; i < s->n_devices; i++) {
        const device *d = &s->devices[i];
        fprintf(f,
                "%s{\"device\": %d, \"iteration\": %u, \"source\": \"%s\", \"seconds\": %.3f, "
                "\"seconds_per_iteration\": %.6f, \"reserved_bytes\": %llu, \"allocated_bytes\": %llu, "
                "\"peak_allocated_bytes\": %llu, \"peak_reserved_bytes\": %llu, \"cached_free_bytes\": %llu, "
                "\"largest_free_block_bytes\": %llu, \"fragmentation\": %.6f, \"device_total_bytes\": %llu, "
                "\"device_free_bytes\": %llu, \"growth_bytes_per_iteration\": %.1f, \"allocations\": %llu, "
                "\"ooms\": %llu, \"leaks\": %u, \"findings\": [",
                i ? ", " : "", d->ordinal, d->iteration, d->source, d->seconds, d->seconds_per_iteration, d->reserved,
                d->allocated, d->peak_allocated, d->peak_reserved, d->cached_free, d->largest_free, d->fragmentation,
                d->device_total, d->device_free, d->growth, d->allocations, d->ooms, d->leaks);
        for (unsigned k = 0; k < d->n_findings; k++) {
            const finding *x = &d->findings[k];
            fprintf(f, "%s{\"bytes_per_iteration\": %.1f, \"growth_since\": %u, \"n_sites\": %u, \"oom_iteration\": ",
                    k ? ", " : "", x->rate, x->since, x->sites);
            if (x->oom_iteration >= 0) fprintf(f, "%lld, \"oom_time\": %.0f", x->oom_iteration, x->oom_time);
            else fprintf(f, "null, \"oom_time\": null");
            fprintf(f, ", \"title\": ");
            json_str(f, x->title);
            fputc('}', f);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
}

static double unix_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_pid(const char *s, long *pid) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v <= 0) {
        fprintf(stderr, "cudalloc: bad PID '%s': accepted: a process id, a number above 0\n", s);
        return -1;
    }
    *pid = v;
    return 0;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) { stop = 1; }

static int top(long pid, long count) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int tty = isatty(STDOUT_FILENO);
    for (long i = 0; !stop && (count <= 0 || i < count); i++) {
        status s;
        char err[1400];
        if (load(pid, &s, err, sizeof err) != 0) {
            /* after a screen: the program removed its file at exit, then went */
            for (int wait = 0; i && wait < 10 && owner_of(pid) >= 0; wait++) usleep(100000);
            if (i) {
                printf(owner_of(pid) < 0 ? "cudalloc top: process %ld has ended\n"
                                         : "cudalloc top: process %ld stopped publishing its figures\n",
                       pid);
                return 0;
            }
            fprintf(stderr, "cudalloc: %s\n", err);
            return 1;
        }
        double now = unix_now();
        time_t t = (time_t)now;
        struct tm tm;
        char clock[16];
        localtime_r(&t, &tm);
        strftime(clock, sizeof clock, "%H:%M:%S", &tm);
        if (tty) printf("\033[H\033[2J");
        printf("cudalloc top - %s - refreshed each second, ^C to quit\n", clock);
        print_text(stdout, &s, now);
        fflush(stdout);
        if (count <= 0 || i + 1 < count) sleep(1);
    }
    return 0;
}

int ca_status_main(int argc, char **argv) {
    int is_top = !strcmp(argv[0], "top"), json = 0;
    long pid = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!is_top && !strcmp(argv[i], "--json")) {
            json = 1;
        } else if (is_top && !strcmp(argv[i], "-n") && i + 1 < argc) {
            char *end;
            count = strtol(argv[++i], &end, 10);
            if (*end || count <= 0) {
                fprintf(stderr, "cudalloc: bad -n '%s': accepted: a count above 0\n", argv[i]);
                return 2;
            }
        } else if (argv[i][0] != '-' && !pid) {
            if (parse_pid(argv[i], &pid) != 0) return 2;
        } else {
            fprintf(stderr, "cudalloc: %s: unknown argument '%s': accepted: %s\n", argv[0], argv[i],
                    is_top ? "-n COUNT, PID" : "--json, PID");
            return 2;
        }
    }
    if (!pid) {
        usage(stderr);
        return 2;
    }
    if (is_top) return top(pid, count);
    status s;
    char err[1400];
    if (load(pid, &s, err, sizeof err) != 0) {
        fprintf(stderr, "cudalloc: %s\n", err);
        return 1;
    }
    if (json) print_json(stdout, &s);
    else print_text(stdout, &s, unix_now());
    return 0;
}

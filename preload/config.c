/* CUDALLOC_CONF: "key:value,key:value", the syntax of PYTORCH_CUDA_ALLOC_CONF.
 * Every key is in this one table; an unknown key or a malformed value is an
 * error, never a silent default. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "preload/preload.h"
#include "util/prefix.h"
#include "util/quote.h"
#include "util/size.h"

ca_config ca_conf;

enum kind { BOOL, SIZE, BYTES, COUNT, PATH, NAME, ACTION, STATUS, SECONDS, FILE_PATH };
static const struct option {
    const char *key;
    enum kind kind;
    size_t offset;
    const char *help;
} options[] = {
    {"expandable_segments", BOOL, offsetof(ca_config, expandable), "virtual-memory segments that grow (default true)"},
    {"sync_free", BOOL, offsetof(ca_config, sync_free), "cudaFree waits for the device, as CUDA's does (default false)"},
    {"max_reserved", SIZE, offsetof(ca_config, max_reserved),
     "cap on memory held per device, at least 2MiB, e.g. 20GiB (default none)"},
    {"release_after", COUNT, offsetof(ca_config, release_after),
     "every this many allocations, memory not needed over them goes back to the device; 0: never (default 10000)"},
    {"share_bytes", BYTES, offsetof(ca_config, share_bytes),
     "a stream that holds no memory of its own takes blocks of up to this size from one pool that such "
     "streams share, while it holds at most this much there; 0: never (default 2MiB)"},
    {"report", PATH, offsetof(ca_config, report), "report path prefix; %p pid, %r rank (default none)"},
    {"nvtx_range", NAME, offsetof(ca_config, nvtx_range), "the NVTX range that is one iteration (default step)"},
    {"summary", BOOL, offsetof(ca_config, summary), "print the exit summary on stderr (default true)"},
    {"trace_iterations", BOOL, offsetof(ca_config, trace_iterations),
     "iteration rows in PREFIX.csv; false: plain RMM CSV for RMM's own replay (default true)"},
    {"tracking", BOOL, offsetof(ca_config, tracking), "watch lifetimes and call sites for leak reports (default true)"},
    {"python_frames", BOOL, offsetof(ca_config, python_frames),
     "Python functions and lines in call sites when Python allocates (default true)"},
    {"oom_message", BOOL, offsetof(ca_config, oom_message), "print the OOM explanation on stderr (default true)"},
    {"context_fences", BOOL, offsetof(ca_config, context_fences),
     "one cuCtxRecordEvent per plain-free fence where the driver has it; false: an event per stream (default true)"},
    {"membarrier", BOOL, offsetof(ca_config, membarrier),
     "a device reset fences every thread with membarrier(2) so that allocator calls need no fence of their own; "
     "false: each call fences itself (default true)"},
    {"on_leak", ACTION, offsetof(ca_config, on_leak),
     "when a leak is sure: warn (a line; the reports too at the first with a report prefix), report (the "
     "reports at each warning), exit (the reports, then exit with exit_code) (default warn)"},
    {"on_oom", ACTION, offsetof(ca_config, on_oom),
     "when an allocation fails for want of memory: warn, report, exit (after the reports) (default warn)"},
    {"exit_code", STATUS, offsetof(ca_config, exit_code), "the exit status of on_leak:exit and on_oom:exit (default 75)"},
    {"error_exitcode", STATUS, offsetof(ca_config, error_exitcode),
     "the program's exit status when a leak or an OOM was seen, as valgrind's --error-exitcode; 0: its own "
     "(default 0)"},
    {"status", BOOL, offsetof(ca_config, status),
     "live figures for cudalloc status and top in $XDG_RUNTIME_DIR/cudalloc/PID.status, else "
     "/tmp/cudalloc-UID/ (default true)"},
    {"metrics", PATH, offsetof(ca_config, metrics),
     "a Prometheus text file rewritten every metrics_every seconds; %p pid, %r rank (default none)"},
    {"metrics_every", SECONDS, offsetof(ca_config, metrics_every), "seconds between metrics rewrites (default 5)"},
    {"suppressions", FILE_PATH, offsetof(ca_config, suppressions),
     "a file of call-site frame patterns whose memory is not reported as leaked or live (default none)"},
};
#define NOPTIONS (sizeof options / sizeof options[0])

/* A value from the environment inside a one-line message: control bytes
 * escaped, long values cut. */
#define SHOWN 80
#define QUOTED(s) ca_quote((s), strlen(s), SHOWN, (char[CA_QUOTE_BUF(SHOWN)]){0}, CA_QUOTE_BUF(SHOWN))

static const char *const actions[] = {"warn", "report", "exit"};

static int parse_action(const char *v, ca_on *out) {
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
        if (!strcasecmp(v, actions[i])) return *out = (ca_on)i, 0;
    return -1;
}

static int parse_bool(const char *v, bool *out) {
    if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes")) *out = true;
    else if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no")) *out = false;
    else return -1;
    return 0;
}

static void accepted_keys(char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NOPTIONS && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", options[i].key);
}

/* The least max_reserved: one granule of every current GPU (a cap that rounds
 * to no granule at all could only fail every allocation). */
#define MIN_RESERVED (2u << 20)

/* Sets key from value; `given` has a bit per option already set, so a key
 * given twice is refused rather than the last one silently winning. */
static int set_option(ca_config *c, const char *src, const char *key, const char *value, unsigned *given, char *err,
                      size_t errlen) {
    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct option *o = &options[i];
        if (strcmp(o->key, key)) continue;
        if (*given & (1u << i)) {
            snprintf(err, errlen, "%s: %s is given twice: accepted: each key once", src, key);
            return -1;
        }
        *given |= 1u << i;
        void *field = (char *)c + o->offset;
        switch (o->kind) {
        case BOOL:
            if (parse_bool(value, field) == 0) return 0;
            snprintf(err, errlen, "%s: bad value '%s' for %s: accepted: true, false, 1, 0", src, QUOTED(value), key);
            return -1;
        case SIZE: {
            size_t v;
            if (ca_parse_size(value, &v) == 0 && v >= MIN_RESERVED) {
                *(size_t *)field = v;
                return 0;
            }
            snprintf(err, errlen, "%s: bad value '%s' for %s: accepted: a size of at least 2MiB, such as 512MiB, 20GiB",
                     src, QUOTED(value), key);
            return -1;
        }
        case BYTES:
            if (ca_parse_size(value, field) == 0) return 0;
            snprintf(err, errlen, "%s: bad value '%s' for %s: accepted: a size such as 1MiB, 0 for never", src,
                     QUOTED(value), key);
            return -1;
        case COUNT:
            if (ca_parse_count(value, field) == 0) return 0;
            snprintf(err, errlen, "%s: bad value '%s' for %s: accepted: a count such as 10000, 0 for never", src,
                     QUOTED(value), key);
            return -1;
        case ACTION:
            if (parse_action(value, field) == 0) return 0;
            snprintf(err, errlen, "%s: bad value '%s' for %s: accepted: warn, report, exit", src, QUOTED(value), key);
            return -1;
        case STATUS:
        case SECONDS: {
            size_t v, lo = o->kind == SECONDS, hi = o->kind == SECONDS ? 86400 : 255;
            if (ca_parse_count(value, &v) == 0 && v >= lo && v <= hi) return *(size_t *)field = v, 0;
            snprintf(err, errlen, "%s: bad value '%s' for %s: accepted: %s", src, QUOTED(value), key,
                     o->kind == SECONDS ? "seconds from 1 to 86400" : "an exit status from 0 to 255");
            return -1;
        }
        case PATH:
        case FILE_PATH:
        case NAME: {
            size_t cap = o->kind == PATH ? sizeof c->report : o->kind == FILE_PATH ? sizeof c->suppressions
                                                                                  : sizeof c->nvtx_range;
            if (!*value || strlen(value) >= cap) {
                snprintf(err, errlen, "%s: bad value '%s' for %s: accepted: %s of 1 to %zu bytes", src, QUOTED(value),
                         key, o->kind == PATH ? "a path prefix" : o->kind == FILE_PATH ? "a file name" : "a name", cap - 1);
                return -1;
            }
            if (o->kind == PATH) {
                char why[400];
                if (ca_prefix_check(value, why, sizeof why) != 0) {
                    const char *said = "report prefix"; /* the metrics file's path is checked as one */
                    bool metrics = o->offset == offsetof(ca_config, metrics) && !strncmp(why, said, strlen(said));
                    snprintf(err, errlen, "%s: %s%s", src, metrics ? "metrics path" : "", why + (metrics ? strlen(said) : 0));
                    return -1;
                }
            }
            strcpy(field, value);
            return 0;
        }
        }
    }
    char keys[512];
    accepted_keys(keys, sizeof keys);
    snprintf(err, errlen, "%s: unknown key '%s': accepted: %s", src, QUOTED(key), keys);
    return -1;
}

int ca_config_parse(const char *conf, ca_config *out, char *err, size_t errlen) {
    ca_config c = {.expandable = true, .release_after = CA_RELEASE_AFTER, .share_bytes = CA_SHARE_BYTES, .summary = true, .tracking = true, .python_frames = true, .trace_iterations = true, .oom_message = true, .context_fences = true, .membarrier = true, .nvtx_range = "step", .exit_code = 75, .status = true, .metrics_every = 5};
    unsigned given = 0, from_env = 0;
    const char *report = getenv("CUDALLOC_REPORT");
    if (report && *report && set_option(&c, "CUDALLOC_REPORT", "report", report, &from_env, err, errlen) != 0)
        return -1;
    char buf[4096];
    if (conf && strlen(conf) >= sizeof buf) {
        snprintf(err, errlen, "CUDALLOC_CONF: longer than %zu bytes", sizeof buf - 1);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", conf ? conf : "");
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ') item++;
        if (!*item) continue;
        char *colon = strchr(item, ':');
        if (!colon) {
            snprintf(err, errlen, "CUDALLOC_CONF: '%s' is not key:value", QUOTED(item));
            return -1;
        }
        *colon = 0;
        char *value = colon + 1, *end = value + strlen(value);
        while (end > value && end[-1] == ' ') *--end = 0;
        char env_report[sizeof c.report];
        strcpy(env_report, c.report);
        if (set_option(&c, "CUDALLOC_CONF", item, value, &given, err, errlen) != 0) return -1;
        if (!strcmp(item, "report") && *env_report && strcmp(env_report, c.report)) {
            snprintf(err, errlen, "CUDALLOC_CONF: report:%s and CUDALLOC_REPORT=%s disagree: accepted: one of them",
                     QUOTED(c.report), QUOTED(env_report));
            return -1;
        }
    }
    /* report and exit write the reports: somewhere, when no prefix was given */
    if ((c.on_leak != CA_ON_WARN || c.on_oom != CA_ON_WARN) && !*c.report) strcpy(c.report, CA_DEFAULT_REPORT);
    *out = c;
    return 0;
}

size_t ca_config_format(const ca_config *c, char *buf, size_t n) {
    size_t used = 0;
    if (n) buf[0] = 0;
    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct option *o = &options[i];
        const void *field = (const char *)c + o->offset;
        char value[256];
        switch (o->kind) {
        case BOOL: snprintf(value, sizeof value, "%s", *(const bool *)field ? "True" : "False"); break;
        case SIZE:
            if (!*(const size_t *)field) continue; /* 0: not set */
            snprintf(value, sizeof value, "%zu", *(const size_t *)field);
            break;
        case BYTES:
        case COUNT:
        case STATUS:
        case SECONDS: snprintf(value, sizeof value, "%zu", *(const size_t *)field); break;
        case ACTION: snprintf(value, sizeof value, "%s", actions[*(const ca_on *)field]); break;
        case NAME: snprintf(value, sizeof value, "%s", (const char *)field); break;
        case PATH:
        case FILE_PATH: continue; /* a path may hold the separator */
        }
        int k = snprintf(buf + used, used < n ? n - used : 0, "%s%s:%s", used ? "," : "", o->key, value);
        if (k > 0) used += (size_t)k;
    }
    return used;
}

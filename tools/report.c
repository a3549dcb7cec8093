/* cudalloc-report: the leak, fragmentation and OOM diagnosis offline.
 *
 * Its input says what it is (by content; the extension only names the
 * format in messages when the content is neither):
 *  - an RMM-style CSV trace, plain or gzipped (with cudalloc's `iteration`
 *    rows or without: then the loop is detected), replayed through the allocator on the count
 *    backend with the tracker watching, so the figures come from the same
 *    code as a live run's; call sites are the requested sizes, since traces
 *    carry no stacks;
 *  - a PyTorch memory snapshot, the pickle of torch.cuda.memory.
 *    _dump_snapshot() (first byte 0x80), or gzipped (0x1f 0x8b; a zip
 *    archive, "PK", is refused as torch.save()'s): its trace fed to the tracker as
 *    recorded, sites being the recorded frames, then replayed through
 *    cudalloc's allocator (report_snapshot.c);
 *  - one or more JSON reports, as the preload writes them per rank: one
 *    table, and the rank that runs out of memory first (report_ranks.c). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "reports/diagnose/fixes_track.h"
#include "reports/diagnose/oom.h"
#include "reports/diagnose/suppress.h"
#include "reports/write/fileout.h"
#include "tools/report_tool.h"
#include "tools/trace.h"
#include "util/size.h"
#include "util/version.h"

/* The help is the man page's SYNOPSIS and OPTIONS too (man/, built from it). */
static void usage(FILE *f) {
    fprintf(f,
            "usage: cudalloc-report TRACE.csv[.gz]|SNAPSHOT.pickle[.gz] [--txt OUT] [--json OUT] [--html OUT] [--pickle OUT]\n"
            "                       [--folded OUT] [--suppressions FILE] [--capacity SIZE] [--mode expandable|classic]\n"
            "                       [--warmup N] [--device N]\n"
            "       cudalloc-report RANK0.json [RANK1.json ...]\n"
            "       cudalloc-report --diff BEFORE AFTER [--fail-over PERCENT%%|SIZE]\n"
            "       cudalloc-report --version | --help\n"
            "A CSV trace (RMM's format) or a PyTorch snapshot (torch.cuda.memory._dump_snapshot)\n"
            "is diagnosed: leaks, fragmentation, OOMs. JSON reports written by cudalloc (one per\n"
            "rank, report:PREFIX_%%r) give one table: each rank's peaks, leak rate and verdict,\n"
            "and the rank that runs out first. --diff compares two runs (JSON reports, traces or\n"
            "snapshots): the peaks, fragmentation, and each call site's memory at the peak.\n"
            "  --txt OUT    write the text report to OUT; with no output named, the text report\n"
            "               goes to stdout; OUT '-' (for every output) is stdout\n"
            "  --json OUT   write the JSON report to OUT\n"
            "  --html OUT   write the HTML page to OUT\n"
            "  --pickle OUT  write a snapshot for PyTorch's memory_viz to OUT\n"
            "  --folded OUT  write the memory live at the peak by stack, folded for flame graphs\n"
            "               (flamegraph.pl, inferno, speedscope)\n"
            "  --suppressions FILE  call-site frame patterns (fun:GLOB, src:GLOB, obj:GLOB or GLOB,\n"
            "               one a line) whose memory is not reported as leaked or live; the\n"
            "               reports count the bytes left out\n"
            "  --capacity SIZE  the device's size (e.g. 80GiB): allocations beyond it fail as on\n"
            "               the device, leaks get a projected out-of-memory iteration, and a\n"
            "               snapshot's replay says whether the run fits in it\n"
            "  --mode expandable|classic  the allocator replayed: expandable segments (default)\n"
            "               or classic\n"
            "  --warmup N   iterations whose growth is never called a leak (default 1)\n"
            "  --device N   a snapshot's device to report (default: each one with data)\n"
            "  --diff       compare two runs, BEFORE and AFTER: what grew, largest first\n"
            "  --fail-over PERCENT%%|SIZE  with --diff: exit 3 when the peak (allocated or\n"
            "               reserved) grew by more than that (5%%, 64MiB)\n"
            "  --version    print the version and exit\n"
            "  --help       print this help and exit\n"
            "Iteration boundaries come from the trace's `iteration` rows or the snapshot's step\n"
            "annotations (ProfilerStep#N, else Optimizer.step ends); without them the repeating\n"
            "pattern of the loop is detected (not the layers of one pass). With fewer than two\n"
            "whole iterations the verdict is SINGLE PASS: the peak and what held it.\n"
            "Bad input: FILE:LINE: message (CSV) or FILE: message, exit 2.\n"
            "Exit status: 0 done, 1 a report not written, 2 bad input, 3 --fail-over exceeded.\n");
}

static int bad(const char *what, const char *value, const char *accepted) {
    fprintf(stderr, "cudalloc-report: bad %s '%s': accepted: %s\n", what, value, accepted);
    return 2;
}

void report_options(const report_args *args, ca_report_options *o) {
    ca_report_options_default(o);
    o->suppressions = args->suppressions;
    o->suppressions_name = args->suppressions_name;
}

int report_any_output(const report_args *args) {
    for (int k = 0; k < 5; k++)
        if (args->out[k]) return 1;
    return 0;
}

int report_write(ca_tracker *t, ca_allocator *a, const report_args *args, const ca_report_options *ropt) {
    static const unsigned fmt[5] = {CA_REPORT_TXT, CA_REPORT_JSON, CA_REPORT_HTML, CA_REPORT_PICKLE, CA_REPORT_FOLDED};
    char err[1024];
    int rc = 0;
    for (int k = 0; k < 5; k++) {
        if (!args->out[k]) continue;
        if (ca_report_write_file(t, a, fmt[k], args->out[k], ropt, err, sizeof err) != 0) {
            fprintf(stderr, "cudalloc-report: %s\n", err);
            rc = 1;
        }
    }
    if (!report_any_output(args) && ca_report_write_file(t, a, CA_REPORT_TXT, "-", ropt, err, sizeof err) != 0) {
        fprintf(stderr, "cudalloc-report: %s\n", err);
        rc = 1;
    }
    return rc;
}

int report_read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    *buf = NULL;
    *len = 0;
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0, r;
    char *b = malloc(cap);
    while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            char *g = cap < SIZE_MAX / 2 ? realloc(b, 2 * cap) : NULL;
            if (!g) {
                free(b);
                b = NULL;
                break;
            }
            b = g;
            cap *= 2;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (!b || failed) {
        snprintf(err, errlen, b ? "%s: cannot read: %s" : "%s: out of memory reading it%s", path, b ? strerror(errno) : "");
        free(b);
        return -1;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

/* What the file holds, from its first bytes (inflated first when gzipped): 'p'
 * a snapshot (a pickle, a gzipped one, or a zip archive, which its reader
 * refuses as torch.save()'s), 'j' JSON, 'c' CSV, plain or gzipped (or anything
 * else: the CSV reader says what is wrong). */
int report_sniff(const char *path) {
    gzFile f = gzopen(path, "rb"); /* reads a plain file as it is */
    int c = EOF, c2 = EOF, gz = 0;
    if (f) { /* else the extension picks the reader, which says why it cannot open it */
        /* blanks before the first byte, 64 KiB of them at most (a gzip of a
         * blank gigabyte is no input: the CSV reader says so) */
        for (int blanks = 0; blanks < 65536 && ((c = gzgetc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r'); blanks++) {
        }
        c2 = gzgetc(f);
        gz = !gzdirect(f);
        gzclose(f);
    }
    if (c == 0x80 || (c == 0x1f && c2 == 0x8b) || (c == 'P' && c2 == 'K')) return 'p';
    const char *dot = strrchr(path, '.');
    if (gz) { /* a broken stream or no byte of a trace's, and named a snapshot: the snapshot reader names the fault */
        size_t n = dot ? (size_t)(dot - path) : 0;
        int named = dot && !strcmp(dot, ".gz") && ((n >= 7 && !strncmp(dot - 7, ".pickle", 7)) ||
                                                   (n >= 4 && !strncmp(dot - 4, ".pkl", 4)));
        return c == EOF || (named && !(c >= ' ' && c < 0x7f)) ? 'p' : 'c';
    }
    if (c == '{') return 'j';
    if (dot && (!strcmp(dot, ".pickle") || !strcmp(dot, ".pkl") || !strcmp(dot, ".gz") || !strcmp(dot, ".pt") ||
                !strcmp(dot, ".pth")))
        return 'p'; /* its reader says why not */
    if (dot && !strcmp(dot, ".json")) return 'j';
    return 'c';
}

/* A file taken for a CSV trace that is no CSV at all: binary content, or
 * text whose first line has no comma (a Markdown file, a log). 1 with what
 * it is in why; 0 when it may be a trace (its reader judges the rest). */
static int not_csv(const char *path, char *why, size_t n) {
    gzFile f = gzopen(path, "rb");
    unsigned char b[512];
    int len = f ? gzread(f, b, sizeof b) : -1;
    if (f) gzclose(f);
    if (len <= 0) return 0; /* the CSV reader names an empty or unreadable file */
    size_t odd = 0, eol = 0;
    while (eol < (size_t)len && b[eol] != '\n') eol++;
    for (int i = 0; i < len; i++) odd += b[i] == 0 || (b[i] < 0x20 && b[i] != '\n' && b[i] != '\r' && b[i] != '\t');
    if (len >= 4 && !memcmp(b, "\x7f" "ELF", 4)) snprintf(why, n, "an ELF binary (a program or library)");
    else if (odd) snprintf(why, n, "binary content (%zu control bytes in its first %d)", odd, len);
    else if (!memchr(b, ',', eol)) snprintf(why, n, "text whose first line has no comma (a Markdown file, a log?)");
    else return 0;
    return 1;
}

/* What the allocator would have said about a failure it did not see itself.
 * Without --capacity the device is not known (the count backend has no
 * limit): its size and free memory stay 0, and the failure is judged on the
 * request against what was free and cached. */
static void oom_info(ca_allocator *a, size_t size, int device_known, ca_oom_info *o) {
    memset(o, 0, sizeof *o);
    const ca_backend *be = ca_allocator_backend(a);
    size_t fr = 0, tot = 0;
    if (device_known) be->mem_info(be->self, &fr, &tot);
    ca_stats st;
    ca_get_stats(a, &st);
    o->requested = size;
    o->device_total = tot;
    o->device_free = fr;
    o->allocated = (size_t)st.allocated_bytes[CA_POOL_ALL].current;
    o->reserved = (size_t)st.reserved_bytes[CA_POOL_ALL].current;
    o->free_cached = o->reserved - o->allocated;
    o->largest_free = ca_largest_free(a);
}

/* The trace through cudalloc's allocator on a device of `capacity` bytes (0:
 * without limit), watched by a tracker. NULL (with *a NULL) when memory ran out. */
static ca_tracker *replay_tracked(const ca_trace *tr, const report_args *args, size_t capacity, ca_allocator **a_out) {
    *a_out = NULL;
    ca_backend *be = ca_backend_count_new(capacity, ca_trace_granule(tr, capacity));
    ca_options aopt;
    ca_options_default(&aopt);
    aopt.expandable = args->expandable;
    ca_allocator *a = NULL;
    if (!be || ca_allocator_new(be, &aopt, &a) != CA_OK) return NULL;
    ca_tracker_options topt;
    ca_tracker_options_default(&topt);
    topt.capture_stacks = 0;
    topt.time_is_index = 1;
    topt.warmup = args->warmup;
    /* Keep the whole trace: the ring and detection see every event. */
    size_t events = 2 * tr->n_ops + 1024;
    if (events > topt.trace_events) topt.trace_events = events;
    topt.detect_events = topt.trace_events;
    ca_tracker *t = ca_tracker_new(&topt);
    void **ptrs = calloc(tr->n_ids ? tr->n_ids : 1, sizeof *ptrs);
    if (!t || !ptrs) {
        free(ptrs);
        ca_tracker_destroy(t);
        ca_allocator_destroy(a);
        return NULL;
    }
    ca_tracker_attach(t, a);
    for (size_t i = 0; i < tr->n_ops; i++) {
        const ca_trace_op *op = &tr->ops[i];
        ca_oom_info oom;
        switch (op->kind) {
        case CA_TRACE_ALLOC:
            if (ca_malloc(a, op->size, op->stream, &ptrs[op->id], &oom) != CA_OK) {
                ptrs[op->id] = NULL;
                ca_oom_diagnose(t, &oom);
            }
            break;
        case CA_TRACE_FREE:
            if (ptrs[op->id]) ca_free(a, ptrs[op->id], op->stream);
            ptrs[op->id] = NULL;
            break;
        case CA_TRACE_ALLOC_FAIL: {
            /* Failed when recorded: judge it against the replayed state. */
            ca_trace_event ev = {CA_EV_OOM, 0, op->size, op->size, op->stream};
            ca_tracker_record(t, &ev, ca_tracker_size_site(t, op->size), 0, 0);
            oom_info(a, op->size, capacity != 0, &oom);
            oom.stream = op->stream;
            ca_oom_diagnose(t, &oom);
            break;
        }
        case CA_TRACE_ITERATION: ca_tracker_step(t, CA_ITER_EXPLICIT); break;
        default: break;
        }
    }
    free(ptrs);
    *a_out = a;
    return t;
}

static void tracked_free(ca_tracker *t, ca_allocator *a) {
    if (t) ca_tracker_detach(t, a);
    ca_tracker_destroy(t);
    ca_allocator_destroy(a);
}

/* What would fit, from the run as recorded (a replay on a device too small
 * loses the allocations that failed), judged against `capacity`. */
static int recorded_fixes(const ca_trace *tr, const report_args *args, ca_fix_report *out) {
    ca_allocator *a;
    ca_tracker *t = replay_tracked(tr, args, 0, &a);
    ca_track_snap s;
    int rc = -1;
    if (t && ca_tracker_snapshot(t, &s) == 0) {
        rc = ca_fixes_from_track(&s, args->capacity, 0, out);
        ca_track_snap_free(&s);
    }
    tracked_free(t, a);
    return rc;
}

int report_trace(const char *path, const report_args *args) {
    char err[1024];
    if (not_csv(path, err, sizeof err)) {
        fprintf(stderr, "%s: neither a CSV trace nor a PyTorch snapshot: %s; accepted: an RMM CSV trace (header "
                        "Thread,Time,Action,Pointer,Size,Stream), a snapshot pickle, cudalloc JSON reports\n",
                path, err);
        return 2;
    }
    ca_trace tr;
    if (ca_trace_parse_file(path, &tr, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    ca_trace_warn_cut(&tr, "cudalloc-report", path, stderr);
    ca_trace_warn_granule(&tr, args->capacity, "cudalloc-report", path, stderr);
    ca_allocator *a;
    ca_tracker *t = replay_tracked(&tr, args, args->capacity, &a);
    ca_fix_report fixes = {0};
    if (!t || (args->capacity && recorded_fixes(&tr, args, &fixes) != 0)) {
        fprintf(stderr, "cudalloc-report: out of memory\n");
        tracked_free(t, a);
        ca_fix_report_free(&fixes);
        ca_trace_free(&tr);
        return 1;
    }
    ca_report_options ropt;
    report_options(args, &ropt);
    ropt.expandable = args->expandable;
    ropt.source_name = path;
    ropt.device_unknown = args->capacity == 0;
    ropt.title = "cudalloc report (offline)";
    if (args->capacity) ropt.fixes = &fixes;
    int rc = report_write(t, a, args, &ropt);
    tracked_free(t, a);
    ca_fix_report_free(&fixes);
    ca_trace_free(&tr);
    return rc;
}

/* --fail-over: "5%" or a size ("64MiB"). 0, or -1 when it is neither. */
static int parse_threshold(const char *v, report_threshold *t) {
    char *end;
    size_t len = strlen(v), b;
    if (len > 1 && v[len - 1] == '%') {
        t->percent = strtod(v, &end);
        return end == v + len - 1 && t->percent >= 0 && t->percent <= 1e6 ? 0 : -1;
    }
    t->percent = -1;
    if (ca_parse_size(v, &b) != 0) return -1;
    t->bytes = b;
    return 0;
}

int main(int argc, char **argv) {
    report_args args = {.expandable = 1, .warmup = 1, .device = -1};
    static const struct option longopts[] = {
        {"txt", required_argument, 0, 't'},      {"json", required_argument, 0, 'j'},
        {"html", required_argument, 0, 'w'},     {"pickle", required_argument, 0, 'p'},
        {"folded", required_argument, 0, 'f'},   {"suppressions", required_argument, 0, 's'},
        {"diff", no_argument, 0, 'D'},           {"fail-over", required_argument, 0, 'F'},
        {"capacity", required_argument, 0, 'c'}, {"mode", required_argument, 0, 'm'},
        {"warmup", required_argument, 0, 'u'},   {"device", required_argument, 0, 'd'},
        {"help", no_argument, 0, 'h'},           {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    int c, diff = 0, rc;
    long v;
    char *end, err[1200];
    report_threshold threshold, *fail_over = NULL;
    ca_suppressions supp = {0};
    opterr = 0; /* one line of our own, not getopt's and the whole usage */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': args.out[0] = optarg; break;
        case 'j': args.out[1] = optarg; break;
        case 'w': args.out[2] = optarg; break;
        case 'p': args.out[3] = optarg; break;
        case 'f': args.out[4] = optarg; break;
        case 's':
            ca_suppressions_free(&supp);
            if (ca_suppressions_load(optarg, &supp, err, sizeof err) != 0) {
                fprintf(stderr, "cudalloc-report: %s\n", err);
                return 2;
            }
            args.suppressions = &supp;
            args.suppressions_name = optarg;
            break;
        case 'D': diff = 1; break;
        case 'F':
            if (parse_threshold(optarg, &threshold) != 0)
                return bad("--fail-over", optarg, "a percentage such as 5% or a size such as 64MiB");
            fail_over = &threshold;
            break;
        case 'c':
            if (ca_parse_size(optarg, &args.capacity) != 0 || !args.capacity)
                return bad("--capacity", optarg, "a size such as 512MiB, 80GiB");
            break;
        case 'm':
            if (!strcmp(optarg, "expandable")) args.expandable = 1;
            else if (!strcmp(optarg, "classic")) args.expandable = 0;
            else return bad("--mode", optarg, "expandable, classic");
            break;
        case 'u':
            v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 0 || v > 1000000) return bad("--warmup", optarg, "0 to 1000000");
            args.warmup = (unsigned)v;
            break;
        case 'd':
            v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 0 || v > 63) return bad("--device", optarg, "0 to 63");
            args.device = (int)v;
            break;
        case 'h': usage(stdout); return 0;
        case 'V': ca_print_version("cudalloc-report"); return 0;
        case ':':
            fprintf(stderr, "cudalloc-report: %s needs a value (see --help)\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "cudalloc-report: unknown option '%s' (see --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    int n = argc - optind;
    char *const *paths = argv + optind;
    if (diff || fail_over) {
        if (n != 2 || !diff || report_any_output(&args)) {
            fprintf(stderr, "cudalloc-report: --diff takes two inputs, BEFORE and AFTER, and writes its table to "
                            "stdout%s (see --help)\n", !diff ? "; --fail-over goes with --diff" : "");
            rc = 2;
        } else {
            rc = report_diff(paths[0], paths[1], &args, fail_over);
        }
    } else if (n < 1) {
        fprintf(stderr, "cudalloc-report: no input: give a trace, a snapshot or JSON reports (see --help)\n");
        rc = 2;
    } else {
        int json = 0;
        for (int i = 0; i < n; i++) json += report_sniff(paths[i]) == 'j';
        if (json || n > 1) {
            rc = 0;
            for (int i = 0; i < n && !rc; i++)
                if (report_sniff(paths[i]) != 'j') {
                    fprintf(stderr, "%s: not a JSON report: several files are read as ranks' JSON reports "
                                    "(cudalloc's PREFIX.json); a trace or snapshot is read alone (two runs: "
                                    "--diff)\n", paths[i]);
                    rc = 2;
                }
            if (!rc && (report_any_output(&args) || args.capacity || args.device >= 0)) {
                fprintf(stderr, "cudalloc-report: the table of ranks goes to stdout and takes no options\n");
                rc = 2;
            }
            if (!rc) rc = report_ranks(paths, n);
        } else {
            rc = report_sniff(paths[0]) == 'p' ? report_snapshot(paths[0], &args) : report_trace(paths[0], &args);
        }
    }
    ca_suppressions_free(&supp);
    return rc;
}

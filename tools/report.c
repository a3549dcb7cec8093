/* cudalloc-report: the leak, fragmentation and OOM diagnosis offline, from
 * a recorded trace (RMM-style CSV, with cudalloc's `iteration` rows or
 * without: then the loop is detected). The trace is replayed through the
 * allocator on the count backend with the tracker watching, so the figures
 * come from the same code as a live run's; call sites are the requested
 * sizes, since traces carry no stacks. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "reports/fileout.h"
#include "reports/report.h"
#include "reports/tracker.h"
#include "tools/trace.h"
#include "util/size.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: cudalloc-report FILE.csv [--txt OUT] [--json OUT] [--html OUT] [--pickle OUT]\n"
            "                       [--capacity SIZE] [--mode expandable|classic] [--warmup N]\n"
            "  With no output named, the text report goes to stdout. OUT '-' is stdout.\n"
            "  --capacity  the device's size (e.g. 80GiB): allocations beyond it fail as on the\n"
            "              device, and leaks get a projected out-of-memory iteration\n"
            "  --mode      the allocator replayed: expandable segments (default) or classic\n"
            "  --warmup    iterations whose growth is never called a leak (default 1)\n"
            "Iteration boundaries come from the trace's `iteration` rows; without them the\n"
            "repeating pattern of the loop is detected. Bad input: FILE:LINE: message, exit 2.\n");
}

static int bad(const char *what, const char *value, const char *accepted) {
    fprintf(stderr, "cudalloc-report: bad %s '%s': accepted: %s\n", what, value, accepted);
    return 2;
}

/* What the allocator would have said about a failure it did not see itself. */
static void oom_info(ca_allocator *a, size_t size, ca_oom_info *o) {
    memset(o, 0, sizeof *o);
    const ca_backend *be = ca_allocator_backend(a);
    size_t fr = 0, tot = 0;
    be->mem_info(be->self, &fr, &tot);
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

int main(int argc, char **argv) {
    const char *out[4] = {0};
    static const unsigned fmt[4] = {CA_REPORT_TXT, CA_REPORT_JSON, CA_REPORT_HTML, CA_REPORT_PICKLE};
    size_t capacity = 0;
    int expandable = 1;
    long warmup = 1;
    static const struct option longopts[] = {
        {"txt", required_argument, 0, 't'},      {"json", required_argument, 0, 'j'},
        {"html", required_argument, 0, 'w'},     {"pickle", required_argument, 0, 'p'},
        {"capacity", required_argument, 0, 'c'}, {"mode", required_argument, 0, 'm'},
        {"warmup", required_argument, 0, 'u'},   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 't': out[0] = optarg; break;
        case 'j': out[1] = optarg; break;
        case 'w': out[2] = optarg; break;
        case 'p': out[3] = optarg; break;
        case 'c':
            if (ca_parse_size(optarg, &capacity) != 0 || !capacity)
                return bad("--capacity", optarg, "a size such as 512MiB, 80GiB");
            break;
        case 'm':
            if (!strcmp(optarg, "expandable")) expandable = 1;
            else if (!strcmp(optarg, "classic")) expandable = 0;
            else return bad("--mode", optarg, "expandable, classic");
            break;
        case 'u':
            warmup = strtol(optarg, &end, 10);
            if (*end || end == optarg || warmup < 0 || warmup > 1000000) return bad("--warmup", optarg, "0 to 1000000");
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    char err[1024];
    ca_trace tr;
    if (ca_trace_parse_file(path, &tr, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }

    ca_backend *be = ca_backend_count_new(capacity, (size_t)2 << 20);
    ca_options aopt;
    ca_options_default(&aopt);
    aopt.expandable = expandable;
    ca_allocator *a = NULL;
    if (!be || ca_allocator_new(be, &aopt, &a) != CA_OK) {
        fprintf(stderr, "cudalloc-report: cannot create the allocator\n");
        return 1;
    }
    ca_tracker_options topt;
    ca_tracker_options_default(&topt);
    topt.capture_stacks = 0;
    topt.time_is_index = 1;
    topt.warmup = (unsigned)warmup;
    /* Keep the whole trace: the ring and detection see every event. */
    size_t events = 2 * tr.n_ops + 1024;
    if (events > topt.trace_events) topt.trace_events = events;
    topt.detect_events = topt.trace_events;
    ca_tracker *t = ca_tracker_new(&topt);
    void **ptrs = calloc(tr.n_ids ? tr.n_ids : 1, sizeof *ptrs);
    if (!t || !ptrs) {
        fprintf(stderr, "cudalloc-report: out of memory\n");
        return 1;
    }
    ca_tracker_attach(t, a);
    for (size_t i = 0; i < tr.n_ops; i++) {
        const ca_trace_op *op = &tr.ops[i];
        ca_oom_info oom;
        switch (op->kind) {
        case CA_TRACE_ALLOC:
            if (ca_malloc(a, op->size, op->stream, &ptrs[op->id], &oom) != CA_OK) {
                ptrs[op->id] = NULL;
                ca_tracker_oom(t, &oom);
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
            oom_info(a, op->size, &oom);
            oom.stream = op->stream;
            ca_tracker_oom(t, &oom);
            break;
        }
        case CA_TRACE_ITERATION: ca_tracker_step(t, CA_ITER_EXPLICIT); break;
        default: break;
        }
    }
    ca_report_options ropt;
    ca_report_options_default(&ropt);
    ropt.expandable = expandable;
    ropt.source_name = path;
    ropt.device_unknown = capacity == 0;
    ropt.title = "cudalloc report (offline)";
    int any = 0, rc = 0;
    for (int k = 0; k < 4; k++) {
        if (!out[k]) continue;
        any = 1;
        if (ca_report_write_file(t, a, fmt[k], out[k], &ropt, err, sizeof err) != 0) {
            fprintf(stderr, "cudalloc-report: %s\n", err);
            rc = 1;
        }
    }
    if (!any && ca_report_write_file(t, a, CA_REPORT_TXT, "-", &ropt, err, sizeof err) != 0) {
        fprintf(stderr, "cudalloc-report: %s\n", err);
        rc = 1;
    }
    ca_tracker_detach(t, a);
    ca_tracker_destroy(t);
    ca_allocator_destroy(a);
    free(ptrs);
    ca_trace_free(&tr);
    return rc;
}

/* cudalloc-report on a PyTorch memory snapshot: for each device, its run
 * (reports/read/snapshot_read.h) fed to the tracker as it was recorded (the
 * recorded allocator's segments, the recorded frames as call sites), then
 * its allocations and frees replayed through cudalloc's allocator to say
 * what cudalloc would reserve and the smallest device the run fits on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/read/snapshot_read.h"
#include "tools/replay.h"
#include "tools/report_tool.h"

/* The run's allocations and frees as a trace for the replay tools. A
 * request that failed when recorded is made there and freed at once (an id
 * of its own): the run needed it, and a replay without it would call a run
 * that ran out of memory one that fits. *failed: how many. */
static int run_trace(const ca_snap_run *r, ca_trace *t, uint64_t *failed) {
    memset(t, 0, sizeof *t);
    *failed = 0;
    for (size_t i = 0; i < r->n_ops; i++) *failed += r->ops[i].kind == CA_RUN_OOM;
    if (!(t->ops = calloc(r->n_ops + *failed + 1, sizeof *t->ops))) return -1;
    uint64_t live = 0;
    uint32_t next_id = r->n_ids;
    for (size_t i = 0; i < r->n_ops; i++) {
        const ca_run_op *o = &r->ops[i];
        ca_trace_op *op = &t->ops[t->n_ops];
        if (o->kind == CA_RUN_OOM && o->size) {
            ca_trace_op a = {.ptr = 0, .size = o->size, .stream = o->stream, .id = next_id++, .line = (uint32_t)i,
                             .kind = CA_TRACE_ALLOC};
            op[0] = a;
            op[1] = a;
            op[1].kind = CA_TRACE_FREE;
            if (live + o->size > t->peak_live_bytes) t->peak_live_bytes = live + o->size;
            t->count[CA_TRACE_ALLOC]++;
            t->count[CA_TRACE_FREE]++;
            t->n_ops += 2;
            continue;
        }
        *op = (ca_trace_op){.ptr = o->addr, .size = o->requested, .stream = o->stream, .id = o->id,
                            .line = (uint32_t)i};
        if (o->kind == CA_RUN_ALLOC) {
            op->kind = CA_TRACE_ALLOC;
            live += o->requested;
            if (live > t->peak_live_bytes) t->peak_live_bytes = live;
        } else if (o->kind == CA_RUN_FREE) {
            op->kind = CA_TRACE_FREE;
            live -= o->requested;
        } else {
            continue;
        }
        t->count[op->kind]++;
        t->n_ops++;
    }
    t->n_ids = next_id;
    return 0;
}

static int replay(const ca_snap_run *r, const report_args *args, ca_report_replay *out) {
    ca_trace t;
    uint64_t failed;
    if (run_trace(r, &t, &failed)) return -1;
    memset(out, 0, sizeof *out);
    out->failed_requests = failed;
    out->expandable = args->expandable;
    out->allocations = t.count[CA_TRACE_ALLOC];
    replay_config cfg = {.expandable = args->expandable, .host = 0, .capacity = 0};
    replay_result res;
    int rc = -1;
    if (replay_run(&t, &cfg, 0, &res) == CA_OK) {
        out->peak_requested = (uint64_t)res.peak_requested;
        out->peak_reserved = (uint64_t)res.peak_reserved;
        size_t hi = res.peak_reserved > 0 ? (size_t)res.peak_reserved : (size_t)1 << 20;
        out->min_capacity = t.count[CA_TRACE_ALLOC] ? replay_min_capacity(&t, &cfg, hi) : 0;
        rc = 0;
        if (args->capacity) {
            cfg.capacity = args->capacity;
            out->capacity = args->capacity;
            rc = replay_run(&t, &cfg, 0, &res) == CA_OK ? 0 : -1;
            out->ooms_at_capacity = res.ooms;
        }
    }
    ca_trace_free(&t);
    return rc;
}

/* One device's run, fed to its tracker, with its replay and report options. */
typedef struct device_run {
    ca_snap_run run;
    ca_tracker *t;
    ca_report_replay rep;
    ca_report_options ropt;
    char title[96];
} device_run;

static void device_free(device_run *d) {
    ca_tracker_destroy(d->t);
    ca_snap_run_free(&d->run);
    memset(d, 0, sizeof *d);
}

static int device_prepare(const char *path, const ca_torch_snapshot *s, int device, int several,
                          const report_args *args, device_run *d) {
    char err[1024];
    memset(d, 0, sizeof *d);
    if (ca_snap_run_build(s, device, &d->run, err, sizeof err) != 0) {
        fprintf(stderr, "cudalloc-report: %s: %s\n", path, err);
        return 1;
    }
    ca_tracker_options topt;
    ca_tracker_options_default(&topt);
    topt.stacks = s->stacks;
    topt.time_is_index = 1;
    topt.warmup = args->warmup;
    topt.device = device;
    size_t events = d->run.n_ops + 1024; /* the whole run: the ring and detection see all of it */
    if (events > topt.trace_events) topt.trace_events = events;
    topt.detect_events = topt.trace_events;
    topt.detect = d->run.steps == 0; /* annotated steps are the boundaries, all of them */
    d->t = ca_tracker_new(&topt);
    if (!d->t || replay(&d->run, args, &d->rep) != 0) {
        fprintf(stderr, "cudalloc-report: out of memory\n");
        device_free(d);
        return 1;
    }
    ca_snap_run_feed(&d->run, d->t, args->capacity);
    ca_report_options *ropt = &d->ropt;
    report_options(args, ropt);
    ropt->expandable = s->expandable_segments; /* -1 when the snapshot does not say */
    ropt->user_conf = s->alloc_conf; /* its PYTORCH_CUDA_ALLOC_CONF, as recorded */
    ropt->source_name = path;
    if (several) snprintf(d->title, sizeof d->title, "device %d: cudalloc report (PyTorch snapshot)", device);
    ropt->title = several ? d->title : "cudalloc report (PyTorch snapshot)";
    ropt->device_unknown = args->capacity == 0;
    ropt->device_total = args->capacity;
    ropt->replay = &d->rep;
    ropt->marks_name = s->steps_from == CA_SNAP_STEPS_PROFILER    ? "ProfilerStep annotations"
                       : s->steps_from == CA_SNAP_STEPS_OPTIMIZER ? "Optimizer.step annotations"
                                                                  : NULL;
    ropt->no_trace = d->run.trace_entries == 0; /* segments only: _record_memory_history() was not called */
    return 0;
}

/* Several devices as one run: the text (to --txt or stdout) and the HTML
 * (--html) each in one piece, a table across the devices first. */
static int several_devices(const char *path, const ca_torch_snapshot *s, uint64_t devices, const report_args *args) {
    device_run *d = calloc(64, sizeof *d);
    ca_tracker *t[64];
    ca_report_options o[64];
    size_t n = 0;
    int rc = d ? 0 : 1;
    for (int dev = 0; dev < 64 && !rc; dev++) {
        if (!(devices >> dev & 1)) continue;
        if ((rc = device_prepare(path, s, dev, 1, args, &d[n])) != 0) break;
        t[n] = d[n].t, o[n] = d[n].ropt;
        n++;
    }
    char err[1024];
    const char *txt = args->out[0] ? args->out[0] : args->out[2] ? NULL : "-";
    if (!rc && txt && ca_report_write_devices(t, o, n, CA_REPORT_TXT, txt, err, sizeof err) != 0) {
        fprintf(stderr, "cudalloc-report: %s\n", err);
        rc = 1;
    }
    if (!rc && args->out[2] && ca_report_write_devices(t, o, n, CA_REPORT_HTML, args->out[2], err, sizeof err) != 0) {
        fprintf(stderr, "cudalloc-report: %s\n", err);
        rc = 1;
    }
    for (size_t i = 0; i < n; i++) device_free(&d[i]);
    free(d);
    return rc;
}

int report_snapshot(const char *path, const report_args *args) {
    char err[1024], *buf;
    size_t len;
    if (report_read_file(path, &buf, &len, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    ca_torch_snapshot s;
    int rc = ca_torch_snapshot_read(buf, len, &s, err, sizeof err);
    free(buf);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", path, err);
        return 2;
    }
    uint64_t devices = ca_torch_snapshot_devices(&s);
    char list[256] = "";
    for (int d = 0; d < 64; d++)
        if (devices >> d & 1) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", *list ? ", " : "", d);
    if (args->device >= 0 && !(devices >> args->device & 1)) {
        fprintf(stderr, "%s: no device %d in the snapshot (devices with data: %s)\n", path, args->device,
                *list ? list : "none");
        ca_torch_snapshot_free(&s);
        return 2;
    }
    if (args->device >= 0) devices = UINT64_C(1) << args->device;
    if (!devices) devices = 1; /* nothing recorded: device 0's empty report says so */
    if (devices & (devices - 1)) { /* several: the text and one HTML page; the other files are per device */
        if (args->out[1] || args->out[3] || args->out[4]) {
            fprintf(stderr, "%s: devices %s in the snapshot: --json, --pickle and --folded are per device, pick one "
                            "with --device (--txt and --html hold them all)\n", path, list);
            rc = 2;
        } else {
            rc = several_devices(path, &s, devices, args);
        }
    } else {
        device_run d;
        rc = device_prepare(path, &s, __builtin_ctzll(devices), 0, args, &d);
        if (!rc) rc = report_write(d.t, NULL, args, &d.ropt);
        device_free(&d);
    }
    ca_torch_snapshot_free(&s);
    return rc;
}

/* reports/snapshot_read: PyTorch snapshots built by hand
 * (tests/data/snapshots/make_snapshots.py, and small ones written here with
 * Python's pickle) read back, laid out and diagnosed: the leak named by its
 * Python frame across a trace cut by the ring, iterations from step
 * annotations, frees on free_requested when there is no free_completed,
 * the mapped ranges at the trace's start, OOMs judged, and bad snapshots
 * refused with the place of the fault. */
#include "tests/reports/helpers.h" /* first: it defines _GNU_SOURCE */
#include <check.h>

#include "reports/read/json_read.h"
#include "reports/capture/named_frames.h"
#include "reports/write/report.h"
#include "reports/read/snapshot_read.h"

#define MIB (1u << 20)
static const char *GEN = "tests/data/snapshots/make_snapshots.py";

/* DIR/NAME made by the generator with `args`. */
static char *gen(const char *dir, const char *name, const char *args) {
    char *path = path_in(dir, name), *cmd;
    ck_assert(asprintf(&cmd, "python3 %s '%s' %s", GEN, path, args) > 0);
    ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
    free(cmd);
    return path;
}

static void load(const char *path, ca_torch_snapshot *s) {
    size_t len;
    char *buf = read_file(path, &len), err[512];
    ck_assert_msg(ca_torch_snapshot_read(buf, len, s, err, sizeof err) == 0, "%s: %s", path, err);
    free(buf);
}

/* The run of `device` fed to a tracker, and the JSON report it gives. */
static ca_doc *diagnose(const char *dir, ca_torch_snapshot *s, int device, uint64_t capacity, ca_snap_run *run) {
    char err[512];
    ck_assert_msg(ca_snap_run_build(s, device, run, err, sizeof err) == 0, "%s", err);
    ca_tracker_options o;
    ca_tracker_options_default(&o);
    o.stacks = s->stacks;
    o.time_is_index = 1;
    o.device = device;
    o.trace_events = o.detect_events = run->n_ops + 1024;
    ca_tracker *t = ca_tracker_new(&o);
    ca_snap_run_feed(run, t, capacity);
    ca_report_options ro;
    ca_report_options_default(&ro);
    ro.device_unknown = !capacity;
    ro.device_total = capacity;
    char *json = path_in(dir, "report.json");
    ck_assert_msg(ca_report_write_file(t, NULL, CA_REPORT_JSON, json, &ro, err, sizeof err) == 0, "%s", err);
    size_t len;
    char *text = read_file(json, &len);
    ca_doc *d = ca_json_parse(text, len, err, sizeof err);
    ck_assert_msg(d != NULL, "report: %s", err);
    free(text);
    free(json);
    ca_tracker_destroy(t);
    return d;
}

/* A diagnosed snapshot's test is over: what it made is freed, the scratch
 * directory removed. */
static void done(ca_doc *d, ca_snap_run *run, ca_torch_snapshot *s, char *path) {
    ca_doc_free(d);
    ca_snap_run_free(run);
    ca_torch_snapshot_free(s);
    free(path);
    scratch_cleanup();
}

static const char *str_at(const ca_val *v, const char *k1, const char *k2) {
    v = ca_val_get(v, k1);
    return ca_val_str(k2 ? ca_val_get(v, k2) : v);
}

static double num_at(const ca_val *v, const char *k1, const char *k2) {
    double d = -1;
    v = ca_val_get(v, k1);
    ca_val_num(k2 ? ca_val_get(v, k2) : v, &d);
    return d;
}

/* A leak of 1 MiB a step from train.py:42 over 40 steps, the trace cut to
 * its last 100 entries: the older leaked blocks come from the segments with
 * their frames, the loop is detected in what the trace kept, and the leak
 * is named by its Python frame with all 40 allocations. */
START_TEST(leak_across_ring) {
    const char *dir = scratch();
    char *p = gen(dir, "ring.pickle", "--leak --iterations 40 --max-entries 100");
    ca_torch_snapshot s;
    load(p, &s);
    ck_assert_uint_eq(s.n_traces, 1);
    ck_assert_uint_eq(s.traces[0].n, 100);
    ck_assert_uint_eq(s.n_segs, 1);
    ck_assert_uint_eq(ca_torch_snapshot_devices(&s), 1);
    /* an alloc's site: the Python frames only, innermost first */
    const ca_snap_entry *leak = NULL;
    for (size_t i = 0; i < s.traces[0].n && !leak; i++)
        if (s.traces[0].e[i].action == CA_SNAP_ALLOC && s.traces[0].e[i].size == MIB) leak = &s.traces[0].e[i];
    ck_assert_ptr_nonnull(leak);
    const uintptr_t *ips;
    ck_assert_uint_eq(ca_stacks_get(s.stacks, leak->site, &ips), 2);
    const char *fn, *file, *mod;
    unsigned line;
    ck_assert(ca_named_frame_get(ips[0], &fn, &file, &line, &mod));
    ck_assert_str_eq(fn, "train_step");
    ck_assert_str_eq(file, "/work/train.py");
    ck_assert_uint_eq(line, 42);
    ck_assert_str_eq(mod, "snapshot");
    ca_snap_run run;
    ca_doc *d = diagnose(dir, &s, 0, 0, &run);
    ck_assert_int_eq(run.frees_on, CA_SNAP_FREE_COMPLETED);
    ck_assert_uint_eq(run.reserved_at_snapshot, s.segs[0].total_size);
    ck_assert_uint_ge(run.seeded_allocs, 4 + 30); /* weights, and the leaks before the cut */
    const ca_val *r = ca_doc_root(d);
    ck_assert_str_eq(str_at(r, "verdict", "code"), "leak");
    ck_assert_str_eq(str_at(r, "iterations", "source"), "detected");
    const ca_val *l = ca_val_item(ca_val_get(r, "leaks"), 0);
    ck_assert_uint_eq(ca_val_len(ca_val_get(r, "leaks")), 1);
    ck_assert_str_eq(str_at(l, "site", NULL), "train_step (/work/train.py:42)");
    ck_assert(num_at(l, "bytes_per_iteration", NULL) == MIB);
    ck_assert(num_at(l, "live_count", NULL) == 40);
    ck_assert(num_at(r, "summary", "peak_reserved_bytes") == (double)s.segs[0].total_size);
    done(d, &run, &s, p);
}
END_TEST

/* One snapshot at protocols 2, 4 and 5: the same run, op for op. */
START_TEST(protocols_agree) {
    const char *dir = scratch();
    ca_snap_run runs[3];
    ca_torch_snapshot snaps[3];
    const char *proto[3] = {"2", "4", "5"};
    char err[256];
    for (int i = 0; i < 3; i++) {
        char name[32], args[96];
        snprintf(name, sizeof name, "p%s.pickle", proto[i]);
        snprintf(args, sizeof args, "--leak --max-entries 90 --protocol %s", proto[i]);
        char *p = gen(dir, name, args);
        load(p, &snaps[i]);
        ck_assert_msg(ca_snap_run_build(&snaps[i], 0, &runs[i], err, sizeof err) == 0, "%s", err);
        free(p);
    }
    for (int i = 1; i < 3; i++) {
        ck_assert_uint_eq(runs[i].n_ops, runs[0].n_ops);
        ck_assert_uint_eq(runs[i].n_ids, runs[0].n_ids);
        for (size_t k = 0; k < runs[0].n_ops; k++) {
            const ca_run_op *a = &runs[0].ops[k], *b = &runs[i].ops[k];
            ck_assert_msg(a->kind == b->kind && a->addr == b->addr && a->size == b->size && a->requested == b->requested &&
                              a->id == b->id && a->site == b->site,
                          "protocol %s differs at op %zu", proto[i], k);
        }
    }
    for (int i = 0; i < 3; i++) {
        ca_snap_run_free(&runs[i]);
        ca_torch_snapshot_free(&snaps[i]);
    }
    scratch_cleanup();
}
END_TEST

/* ProfilerStep annotations mark the iterations; without free_completed
 * (skip_actions) the frees are the free_requested ones. */
START_TEST(annotations_and_requested_frees) {
    const char *dir = scratch();
    char *p = gen(dir, "ann.pickle", "--leak --annotations --requested-only --protocol 5");
    ca_torch_snapshot s;
    load(p, &s);
    ck_assert_uint_eq(s.n_steps, 12);
    ca_snap_run run;
    ca_doc *d = diagnose(dir, &s, 0, 256 * MIB, &run);
    ck_assert_int_eq(run.frees_on, CA_SNAP_FREE_REQUESTED);
    ck_assert_uint_eq(run.steps, 12);
    const ca_val *r = ca_doc_root(d);
    ck_assert_str_eq(str_at(r, "iterations", "source"), "explicit");
    ck_assert(num_at(r, "iterations", "count") == 12);
    ck_assert_str_eq(str_at(r, "verdict", "code"), "leak");
    /* 256 MiB, 56 reserved: a projection exists and lies past the run */
    ck_assert(num_at(r, "leak_projected_oom_iteration", NULL) > 100);
    done(d, &run, &s, p);
}
END_TEST

/* Recorded without frames (context=None): sites by requested size. */
START_TEST(no_frames) {
    const char *dir = scratch();
    char *p = gen(dir, "nf.pickle", "--leak --no-frames");
    ca_torch_snapshot s;
    load(p, &s);
    ca_snap_run run;
    ca_doc *d = diagnose(dir, &s, 0, 0, &run);
    const ca_val *l = ca_val_item(ca_val_get(ca_doc_root(d), "leaks"), 0);
    ck_assert_str_eq(str_at(l, "site", NULL), "allocations of 1.00 MiB (1048576 B) (snapshot: no frames recorded)");
    done(d, &run, &s, p);
}
END_TEST

/* Two devices, an OOM on each: judged with the snapshot's device_free. */
START_TEST(oom_two_devices) {
    const char *dir = scratch();
    char *p = gen(dir, "two.pickle", "--leak --devices 2 --oom --classic");
    ca_torch_snapshot s;
    load(p, &s);
    ck_assert_uint_eq(ca_torch_snapshot_devices(&s), 3);
    ck_assert_int_eq(s.expandable_segments, 0);
    ca_snap_run run;
    ca_doc *d = diagnose(dir, &s, 1, 0, &run);
    const ca_val *r = ca_doc_root(d), *o = ca_val_item(ca_val_get(r, "ooms"), 0);
    ck_assert_str_eq(str_at(r, "verdict", "code"), "oom");
    ck_assert_int_eq((int)num_at(r, "device", NULL), 1);
    ck_assert(num_at(o, "requested_bytes", NULL) == 64.0 * 1024 * MIB);
    ck_assert(num_at(o, "device_free_bytes", NULL) == 1024.0 * MIB);
    ck_assert_str_eq(str_at(o, "verdict", NULL), "not_there");
    ck_assert_str_eq(str_at(o, "site", NULL), "evaluate (/work/train.py:70)");
    done(d, &run, &s, p);
}
END_TEST

/* Small snapshots written here: each a Python expression. */
static char *py_snapshot(const char *dir, const char *name, const char *expr) {
    char *path = path_in(dir, name), *script;
    ck_assert(asprintf(&script,
                       "import pickle, sys\n"
                       "F = [{'filename': '/w/a.py', 'line': 3, 'name': 'f'}]\n"
                       "def E(**k):\n"
                       "    e = {'action': 'alloc', 'addr': 1 << 20, 'size': 512, 'stream': 0, 'frames': F}\n"
                       "    e.update(k)\n"
                       "    return e\n"
                       "open(sys.argv[1], 'wb').write(pickle.dumps(%s, protocol=4))\n"
                       "print('OK')\n",
                       expr) > 0);
    ck_python_ok(dir, script, path);
    free(script);
    return path;
}

/* The ranges mapped when the trace began: the final segment with the
 * trace's map undone and its unmap redone. */
START_TEST(ranges_at_trace_start) {
    const char *dir = scratch();
    char *p = py_snapshot(dir, "r.pickle",
                          "{'segments': [{'device': 0, 'address': 0, 'total_size': 8 << 20, 'stream': 0, 'blocks': "
                          "[{'size': 1 << 20, 'requested_size': 1000, 'state': 'active_allocated', 'frames': F},"
                          " {'size': 7 << 20, 'state': 'inactive'}]}],"
                          " 'device_traces': [[E(action='segment_map', addr=2 << 20, size=2 << 20),"
                          "                    E(action='segment_unmap', addr=8 << 20, size=4 << 20),"
                          "                    E(action='snapshot'), E(action='annotate')]]}");
    ca_torch_snapshot s;
    load(p, &s);
    ck_assert_uint_eq(s.n_other, 2);
    ck_assert_uint_eq(s.blocks[0].addr, 0); /* no 'address': tiled from the segment's */
    ck_assert_uint_eq(s.blocks[1].addr, MIB);
    ck_assert_uint_eq(s.blocks[0].requested, 1000);
    ck_assert_uint_eq(s.blocks[1].requested, 7 * MIB); /* no requested_size: the size */
    char err[256];
    ca_snap_run run;
    ck_assert_msg(ca_snap_run_build(&s, 0, &run, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(run.seeded_ranges, 2);
    ck_assert_int_eq(run.ops[0].kind, CA_RUN_MAP);
    ck_assert_uint_eq(run.ops[0].addr, 0);
    ck_assert_uint_eq(run.ops[0].size, 2 * MIB);
    ck_assert_uint_eq(run.ops[1].addr, 4 * MIB);
    ck_assert_uint_eq(run.ops[1].size, 8 * MIB);
    ck_assert_uint_eq(run.seeded_allocs, 1); /* the active block, made before the trace */
    ck_assert_int_eq(run.ops[2].kind, CA_RUN_ALLOC);
    ck_assert_uint_eq(run.ops[2].size, MIB);
    ck_assert_uint_eq(run.ops[2].requested, 1000);
    ca_snap_run_free(&run);
    ca_torch_snapshot_free(&s);
    free(p);
    scratch_cleanup();
}
END_TEST

/* The legacy block format: frames in 'history'. */
START_TEST(legacy_history_frames) {
    const char *dir = scratch();
    char *p = py_snapshot(dir, "h.pickle",
                          "{'segments': [{'device': 0, 'address': 4096, 'total_size': 2 << 20, 'blocks': "
                          "[{'size': 2 << 20, 'state': 'active_allocated', 'history': [{'addr': 4096, "
                          "'real_size': 100, 'frames': [{'filename': '/w/old.py', 'line': 7, 'name': 'g'}]}]}]}],"
                          " 'device_traces': [[]]}");
    ca_torch_snapshot s;
    load(p, &s);
    const uintptr_t *ips;
    const char *fn;
    ck_assert_uint_eq(ca_stacks_get(s.stacks, s.blocks[0].site, &ips), 1);
    ck_assert(ca_named_frame_get(ips[0], &fn, NULL, NULL, NULL));
    ck_assert_str_eq(fn, "g");
    ca_torch_snapshot_free(&s);
    free(p);
    scratch_cleanup();
}
END_TEST

static const struct {
    const char *expr, *msg;
} BAD[] = {
    {"[1, 2]", "not a PyTorch memory snapshot: the pickle holds a list, not a dict"},
    {"{'a': 1}", "not a PyTorch memory snapshot: a dict without 'segments' and 'device_traces'"},
    {"{'segments': []}", "snapshot: no 'device_traces'"},
    {"{'segments': 5, 'device_traces': []}", "snapshot: 'segments' is an int, expected a list"},
    {"{'segments': [], 'device_traces': ['x']}", "device_traces[0]: a str, expected a list of trace entries"},
    {"{'segments': [], 'device_traces': [[E(), 'x']]}", "device_traces[0][1]: a str, expected a dict"},
    {"{'segments': [], 'device_traces': [[E(addr='0x10')]]}", "device_traces[0][0]: 'addr' is a str, expected an int"},
    {"{'segments': [], 'device_traces': [[E(size=-5)]]}", "device_traces[0][0]: 'size' is -5, expected 0 or more"},
    {"{'segments': [], 'device_traces': [[E(addr=2**64)]]}", "'addr' is an integer beyond 64 bits"},
    {"{'segments': [], 'device_traces': [[E(addr=-4096)]]}", "'addr' is -4096, expected 0 or more"},
    {"{'segments': [], 'device_traces': [[{'addr': 1}]]}", "device_traces[0][0]: no 'action'"},
    {"{'segments': [], 'device_traces': [[E(action=3)]]}", "'action' is an int, expected a str"},
    {"{'segments': [], 'device_traces': [[E(frames='f')]]}", "'frames' is a str, expected a list"},
    {"{'segments': [], 'device_traces': [[E(frames=[1])]]}", "device_traces[0][0].frames[0]: an int, expected a dict"},
    {"{'segments': [], 'device_traces': [[E(frames=[{'line': 'x'}])]]}", "frames[0]: 'line' is a str, expected an int"},
    {"{'segments': [], 'device_traces': [[E(time_us=1.5)]]}", "'time_us' is a float, expected an int"},
    {"{'segments': [{'device': 99, 'address': 0, 'total_size': 0, 'blocks': []}], 'device_traces': []}",
     "segments[0]: device 99: only devices 0 to 63 are read"},
    {"{'segments': [{'device': 0, 'address': 0, 'total_size': 512}], 'device_traces': []}", "segments[0]: no 'blocks'"},
    {"{'segments': [{'device': 0, 'address': 0, 'total_size': 512, 'blocks': [{'size': 512, 'state': 'weird'}]}],"
     " 'device_traces': []}",
     "segments[0].blocks[0]: state 'weird': accepted: active_allocated, active_pending_free, inactive"},
    /* found by the fuzzer: the file's own bytes are escaped, the message stays one line */
    {"{'segments': [{'device': 0, 'address': 0, 'total_size': 512, 'blocks': [{'size': 512, 'state': 'activ\\n_x'}]}],"
     " 'device_traces': []}",
     "segments[0].blocks[0]: state 'activ\\x0a_x': accepted: active_allocated, active_pending_free, inactive"},
    {"{'segments': [{'device': 0, 'address': 0, 'total_size': 512, 'blocks': [{'state': 'inactive'}]}],"
     " 'device_traces': []}",
     "segments[0].blocks[0]: no 'size'"},
    {"{'segments': [], 'device_traces': [[]] * 65}", "device_traces: 65 devices: only 64 are read"},
    {"{'segments': [{'device': 0, 'address': 0, 'total_size': 512, 'segment_pool_id': 'x', 'blocks': []}],"
     " 'device_traces': []}",
     "segments[0]: 'segment_pool_id' is a str, expected a pair of ints"},
    {"{'segments': [{'device': 0, 'address': 0, 'total_size': 512, 'segment_pool_id': (1, 'a'), 'blocks': []}],"
     " 'device_traces': []}",
     "segments[0]: 'segment_pool_id' is not a pair of ints, expected a pair of ints"},
};

START_TEST(bad_snapshots) {
    const char *dir = scratch();
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char name[32], err[512];
        snprintf(name, sizeof name, "bad%zu.pickle", i);
        char *p = py_snapshot(dir, name, BAD[i].expr);
        size_t len;
        char *buf = read_file(p, &len);
        ca_torch_snapshot s;
        ck_assert_msg(ca_torch_snapshot_read(buf, len, &s, err, sizeof err) != 0, "accepted: %s", BAD[i].expr);
        ck_assert_msg(strstr(err, BAD[i].msg) != NULL, "%s: message '%s' lacks '%s'", BAD[i].expr, err, BAD[i].msg);
        ck_assert_ptr_null(s.stacks); /* nothing left to free */
        free(buf);
        free(p);
    }
    scratch_cleanup();
}
END_TEST

/* A gzipped snapshot is the snapshot it holds, op for op; inflating stops
 * at the bound given; a torch.save() archive is refused as one. */
START_TEST(gzip_and_torch_save) {
    const char *dir = scratch();
    char *plain = gen(dir, "s.pickle", "--segments --params 20 --iterations 3"),
         *gz = gen(dir, "s.pickle.gz", "--segments --params 20 --iterations 3 --gzip"),
         *zip = gen(dir, "m.pt", "--zip");
    ca_torch_snapshot a, b;
    ca_snap_run ra, rb;
    char err[512];
    load(plain, &a);
    load(gz, &b);
    ck_assert_int_eq(ca_snap_run_build(&a, 0, &ra, err, sizeof err), 0);
    ck_assert_int_eq(ca_snap_run_build(&b, 0, &rb, err, sizeof err), 0);
    ck_assert_uint_eq(ra.n_ops, rb.n_ops);
    ck_assert_uint_gt(ra.n_ops, 100);
    for (size_t k = 0; k < ra.n_ops; k++)
        ck_assert(ra.ops[k].kind == rb.ops[k].kind && ra.ops[k].addr == rb.ops[k].addr && ra.ops[k].size == rb.ops[k].size);
    size_t len, plain_len;
    char *buf = read_file(gz, &len), *pb = read_file(plain, &plain_len);
    ck_assert_ptr_null(ca_snapshot_unpickle(buf, len, plain_len - 1, err, sizeof err));
    ck_assert_msg(strstr(err, "gzip: it inflates past"), "%s", err);
    ca_doc *d = ca_snapshot_unpickle(buf, len, plain_len, err, sizeof err);
    ck_assert_msg(d != NULL, "%s", err);
    ca_doc_free(d);
    ck_assert_ptr_null(ca_snapshot_unpickle(buf, len / 2, plain_len, err, sizeof err));
    ck_assert_str_eq(err, "gzip: the compressed data is cut short (truncated)");
    free(buf);
    free(pb);
    buf = read_file(zip, &len);
    ca_torch_snapshot z;
    ck_assert_int_ne(ca_torch_snapshot_read(buf, len, &z, err, sizeof err), 0);
    ck_assert_msg(!strncmp(err, "a zip archive, as torch.save() writes", 37), "%s", err);
    free(buf);
    ca_snap_run_free(&ra);
    ca_snap_run_free(&rb);
    ca_torch_snapshot_free(&a);
    ca_torch_snapshot_free(&b);
    free(plain);
    free(gz);
    free(zip);
    scratch_cleanup();
}
END_TEST

/* Classic segments: each range of the run is one segment, whole, with its
 * pool and pool id; the trace's segment_alloc and segment_free are whole. */
START_TEST(segment_kinds) {
    ca_torch_snapshot s;
    ca_snap_run run;
    char err[256];
    load("tests/data/snapshots/segments.pickle", &s);
    ck_assert_int_eq(ca_snap_run_build(&s, 0, &run, err, sizeof err), 0);
    size_t small = 0, graph = 0, maps = 0, unmaps = 0;
    for (size_t i = 0; i < run.n_ops; i++) {
        const ca_run_op *o = &run.ops[i];
        if (o->kind != CA_RUN_MAP && o->kind != CA_RUN_UNMAP) continue;
        const ca_range_kind *k = &run.kinds[o->range_kind];
        ck_assert_int_eq(k->whole, 1);
        ck_assert_int_eq(k->expandable, 0);
        graph += k->pool_id[0] == 1 && k->pool_id[1] == 2;
        if (i < run.seeded_ranges) {
            ck_assert_int_ne(k->pool, 0);
            small += k->pool == 1;
        } else {
            maps += o->kind == CA_RUN_MAP;
            unmaps += o->kind == CA_RUN_UNMAP;
        }
    }
    ck_assert_uint_gt(run.seeded_ranges, 150);
    ck_assert_uint_eq(small, 3); /* 17 small segments at the end, 14 of them made in the trace */
    ck_assert_uint_eq(graph, 2); /* the CUDA graph's two segments (one small, one large), made once */
    ck_assert_uint_eq(maps, 46); /* the trace's segment_alloc and segment_free entries */
    ck_assert_uint_eq(unmaps, 12);
    ca_snap_run_free(&run);
    ca_torch_snapshot_free(&s);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("snapshot_read");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, leak_across_ring);
    tcase_add_test(tc, protocols_agree);
    tcase_add_test(tc, annotations_and_requested_frees);
    tcase_add_test(tc, no_frames);
    tcase_add_test(tc, oom_two_devices);
    tcase_add_test(tc, ranges_at_trace_start);
    tcase_add_test(tc, legacy_history_frames);
    tcase_add_test(tc, bad_snapshots);
    tcase_add_test(tc, gzip_and_torch_save);
    tcase_add_test(tc, segment_kinds);
    suite_add_tcase(s, tc);
    return s;
}

RUN_SUITE(suite)

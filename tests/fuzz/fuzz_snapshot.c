/* libFuzzer harness: the PyTorch snapshot reader, end to end. The input is
 * a file's bytes as they are (no terminator): a pickle or a gzipped one
 * (inflated up to 16 MiB here), or what is refused as a torch.save() file;
 * reports/pickle_read turns them into values, reports/snapshot_read into a snapshot and each device's run,
 * which is fed to a tracker and reported as text and JSON (to /dev/null).
 * Beyond "no crash, no UB, no leak": a refused input gets a one-line
 * message; a run is consistent (dense ids below n_ids, an allocation's id
 * never given twice while live, every free of a live id with the size it
 * was allocated with); the reports are written. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "reports/read/pickle_read.h"
#include "reports/write/report_internal.h"
#include "reports/read/snapshot_read.h"

/* Every value reachable within a bounded walk (shared and cyclic values
 * included) is readable. */
static size_t walk(const ca_val *v, int depth, size_t budget) {
    if (!budget || depth > 64) return 0;
    size_t seen = 1;
    if (v->kind == CA_VAL_STR || v->kind == CA_VAL_BYTES) FUZZ_CHECK(v->s.p[v->s.len] == '\0', "string not terminated");
    for (size_t i = 0; i < ca_val_len(v) && seen < budget; i++) {
        if (v->kind == CA_VAL_DICT) {
            seen += walk(ca_val_key_at(v, i), depth + 1, budget - seen);
            if (seen < budget) seen += walk(ca_val_value_at(v, i), depth + 1, budget - seen);
        } else {
            seen += walk(ca_val_item(v, i), depth + 1, budget - seen);
        }
    }
    return seen;
}

static void check_run(const ca_snap_run *r) {
    uint64_t *live = calloc(r->n_ids ? r->n_ids : 1, sizeof *live); /* size + 1 while live */
    uint64_t *addr = calloc(r->n_ids ? r->n_ids : 1, sizeof *addr);
    FUZZ_CHECK(live && addr, "out of memory");
    for (size_t i = 0; i < r->n_ops; i++) {
        const ca_run_op *o = &r->ops[i];
        FUZZ_CHECK(o->kind <= CA_RUN_STEP, "op %zu: kind %d", i, o->kind);
        if (o->kind == CA_RUN_ALLOC) {
            FUZZ_CHECK(o->id < r->n_ids, "op %zu: id %u of %u", i, o->id, r->n_ids);
            /* an id is handed out again only after its free, or for its own
             * address allocated twice (the old allocation is then gone) */
            FUZZ_CHECK(!live[o->id] || addr[o->id] == o->addr, "op %zu: id %u given while live", i, o->id);
            live[o->id] = o->size + 1;
            addr[o->id] = o->addr;
        } else if (o->kind == CA_RUN_FREE) {
            FUZZ_CHECK(o->id < r->n_ids && live[o->id] == o->size + 1, "op %zu: free of id %u not live with its size", i,
                  o->id);
            live[o->id] = 0;
        }
    }
    free(live);
    free(addr);
}

static void report(ca_tracker *t) {
    FILE *devnull = fopen("/dev/null", "w");
    FUZZ_CHECK(devnull, "no /dev/null");
    ca_report_options o;
    ca_report_options_default(&o);
    o.symbolize = 0;
    ca_report_ctx c;
    if (ca_report_ctx_init(&c, t, NULL, &o, 1) == 0) {
        FUZZ_CHECK(ca_report_txt(&c, devnull) == 0, "text report failed");
        FUZZ_CHECK(ca_report_json(&c, devnull) == 0, "JSON report failed");
        ca_report_ctx_free(&c);
    }
    fclose(devnull);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    ca_doc *d = ca_snapshot_unpickle(data, size, (size_t)16 << 20, err, sizeof err);
    if (!d) {
        FUZZ_CHECK(fuzz_one_line(err, sizeof err), "refused without a one-line message");
        return 0;
    }
    walk(ca_doc_root(d), 0, 100000);
    ca_torch_snapshot s;
    if (ca_torch_snapshot_from_doc(ca_doc_root(d), &s, err, sizeof err) != 0) {
        FUZZ_CHECK(fuzz_one_line(err, sizeof err), "snapshot refused without a one-line message");
        ca_doc_free(d);
        return 0;
    }
    ca_doc_free(d); /* the snapshot keeps nothing of the document */
    uint64_t devices = ca_torch_snapshot_devices(&s);
    for (int dev = 0, done = 0; dev < 64 && done < 2; dev++) {
        if (!(devices >> dev & 1)) continue;
        done++;
        ca_snap_run run;
        if (ca_snap_run_build(&s, dev, &run, err, sizeof err) != 0) continue; /* out of memory only */
        check_run(&run);
        ca_tracker_options o;
        ca_tracker_options_default(&o);
        o.stacks = s.stacks;
        o.time_is_index = 1;
        o.trace_events = o.detect_events = run.n_ops + 64;
        o.device = dev;
        ca_tracker *t = ca_tracker_new(&o);
        FUZZ_CHECK(t, "no tracker");
        ca_snap_run_feed(&run, t, (uint64_t)1 << 30);
        report(t);
        ca_tracker_destroy(t);
        ca_snap_run_free(&run);
    }
    ca_torch_snapshot_free(&s);
    return 0;
}

/* One device's run fed to a tracker (ca_snap_run_feed), each OOM judged
 * with the state at that point. See snapshot_read.h. */
#include "reports/diagnose/fragmentation.h"
#include "reports/diagnose/oom.h"
#include "reports/read/snapshot_read.h"

/* The largest free block now, from the tracker's own view (as the report
 * computes fragmentation): only at an OOM, which a run has few of. */
static uint64_t largest_free(ca_tracker *t) {
    ca_track_snap snap;
    ca_frag fr;
    uint64_t largest = 0;
    if (ca_tracker_snapshot(t, &snap) != 0) return 0;
    if (ca_frag_compute(&snap, NULL, &fr) == 0) {
        largest = fr.largest_free;
        ca_frag_free(&fr);
    }
    ca_track_snap_free(&snap);
    return largest;
}

void ca_snap_run_feed(const ca_snap_run *r, ca_tracker *t, uint64_t device_total) {
    uint64_t allocated = 0, reserved = 0;
    size_t ooms = 0;
    for (size_t i = 0; i < r->n_ops; i++) {
        const ca_run_op *o = &r->ops[i];
        if (i == r->seeded_ranges + r->seeded_allocs) ca_tracker_set_baseline(t); /* the trace begins */
        ca_trace_event ev = {.addr = (uintptr_t)o->addr, .size = o->size, .requested = o->requested,
                             .stream = (ca_stream)o->stream};
        switch (o->kind) {
        case CA_RUN_MAP:
            ev.kind = CA_EV_SEGMENT_MAP;
            ev.requested = o->size;
            reserved += o->size;
            ca_tracker_record_range(t, &ev, &r->kinds[o->range_kind], o->site, 0);
            break;
        case CA_RUN_UNMAP:
            ev.kind = CA_EV_SEGMENT_UNMAP;
            ev.requested = o->size;
            reserved -= o->size < reserved ? o->size : reserved;
            ca_tracker_record_range(t, &ev, &r->kinds[o->range_kind], o->site, 0);
            break;
        case CA_RUN_ALLOC:
            ev.kind = CA_EV_ALLOC;
            allocated += o->size;
            ca_tracker_record(t, &ev, o->site, 0, 0);
            break;
        case CA_RUN_FREE:
            ev.kind = CA_EV_FREE;
            allocated -= o->size < allocated ? o->size : allocated;
            ca_tracker_record(t, &ev, CA_SITE_NONE, 0, 0);
            break;
        case CA_RUN_OOM: {
            ev.kind = CA_EV_OOM;
            ev.addr = 0;
            ev.requested = o->size;
            ca_tracker_record(t, &ev, o->site, 0, 0);
            if (ooms++ >= CA_MAX_OOM_RECORDS) break; /* not kept: nothing to judge */
            ca_oom_info info = {.requested = (size_t)o->size, .device_free = (size_t)o->addr,
                                .allocated = (size_t)allocated, .reserved = (size_t)reserved,
                                .free_cached = (size_t)(reserved > allocated ? reserved - allocated : 0),
                                .stream = (ca_stream)o->stream};
            info.device_total = (size_t)(device_total ? device_total : o->addr + reserved);
            info.device_total_inferred = !device_total; /* the snapshot records no device size */
            info.largest_free = (size_t)largest_free(t);
            ca_oom_diagnose(t, &info);
            break;
        }
        case CA_RUN_STEP: ca_tracker_step(t, CA_ITER_EXPLICIT); break;
        }
    }
}

/* What the preload says on stderr: the OOM explanation when an allocation
 * fails after every retry, and a short summary at exit. */
#include <stdio.h>

#include "preload/preload.h"
#include "util/size.h"

#define SZ(x) ca_format_size((x), (char[CA_SIZE_BUF]){0}, CA_SIZE_BUF)

/* The device memory CUPTI saw allocated past us, when it is watching. */
static void report_external(int ordinal) {
    uint64_t allocations, pools;
    if (ca_cupti_external(ordinal, &allocations, &pools) && (allocations || pools))
        fprintf(stderr, "cudalloc:   outside cudalloc on device %d: %s in allocations, %s held by memory pools (CUPTI)\n",
                ordinal, SZ(allocations), SZ(pools));
}

void ca_report_oom(ca_device *d, const ca_oom_info *o) {
    if (!ca_conf.oom_message) return;
    /* In pieces: enough is free (cached by us or on the device) but no piece
     * is large enough; else the memory is simply not there. */
    bool pieces = o->free_cached + o->device_free >= o->requested && o->largest_free < o->requested;
    fprintf(stderr,
            "cudalloc: out of memory on device %d: requested %s\n"
            "cudalloc:   device total %s, device free %s; allocated %s, reserved %s, cached %s, "
            "largest free block %s\n"
            "cudalloc:   verdict: %s\n",
            d->ordinal, SZ(o->requested), SZ(o->device_total), SZ(o->device_free), SZ(o->allocated),
            SZ(o->reserved), SZ(o->free_cached), SZ(o->largest_free),
            pieces ? "fragmentation: the memory is free but in pieces; try expandable_segments:true"
                   : "a real shortage: the memory is not there (smaller batch, gradient accumulation, bf16, "
                     "activation checkpointing)");
    report_external(d->ordinal);
}

static void summarize(ca_device *d, void *ctx) {
    ca_stats s;
    ca_get_stats(d->alloc, &s);
    if (!s.allocation[CA_POOL_ALL].allocated) return;
    int64_t peak_alloc = s.allocated_bytes[CA_POOL_ALL].peak, peak_res = s.reserved_bytes[CA_POOL_ALL].peak;
    int64_t peak_req = s.requested_bytes[CA_POOL_ALL].peak;
    fprintf(stderr,
            "cudalloc: device %d: peak allocated %s, peak reserved %s (utilization %.3f), %lld allocations, "
            "%lld OOMs\n",
            d->ordinal, SZ((size_t)peak_alloc), SZ((size_t)peak_res),
            peak_res ? (double)peak_req / (double)peak_res : 0.0, (long long)s.allocation[CA_POOL_ALL].allocated,
            (long long)s.num_ooms);
    report_external(d->ordinal);
}

void ca_report_exit(void) {
    if (ca_conf.summary) ca_devices_foreach(summarize, NULL);
}

/* include/cudalloc.h (PyTorch's pluggable-allocator entry points: torch.c). */
#include <stdio.h>
#include <string.h>

#define CUDALLOC_IMPLEMENTATION
#include "include/cudalloc.h"
#include "preload/preload.h"
#include "util/version.h"

CA_EXPORT const char *cudalloc_version(void) { return ca_version(); }

CA_EXPORT int cudalloc_get_stats(int device, cudalloc_stats *out) {
    ca_device *d = ca_device_by_ordinal(device);
    if (!d || !out) return -1;
    ca_stats s;
    ca_device_use(d);
    ca_get_stats(d->alloc, &s);
    ca_device_done(d);
    const int all = CA_POOL_ALL;
    *out = (cudalloc_stats){
        s.allocated_bytes[all].current, s.allocated_bytes[all].peak, s.reserved_bytes[all].current,
        s.reserved_bytes[all].peak,     s.active_bytes[all].current,  s.active_bytes[all].peak,
        s.requested_bytes[all].current, s.requested_bytes[all].peak,  s.allocation[all].current,
        s.allocation[all].peak,         s.segment[all].current,       s.segment[all].peak,
        s.num_alloc_retries,            s.num_ooms,                   s.num_device_alloc,
        s.num_device_free,
    };
    return 0;
}

static void release(ca_device *d, void *ctx) { ca_release(d->alloc); }

static void reset_peaks(ca_device *d, void *ctx) { ca_reset_peaks(d->alloc); }

CA_EXPORT int cudalloc_empty_cache(void) {
    ca_devices_foreach(release, NULL);
    return 0;
}

CA_EXPORT int cudalloc_reset_peak_stats(void) {
    ca_devices_foreach(reset_peaks, NULL);
    return 0;
}

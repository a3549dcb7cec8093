/* include/cudalloc.h, and PyTorch's pluggable-allocator entry points. */
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
    ca_device_lock(d);
    ca_get_stats(d->alloc, &s);
    ca_device_unlock(d);
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

static void release(ca_device *d, void *ctx) {
    ca_device_lock(d);
    ca_release(d->alloc);
    ca_device_unlock(d);
}

static void reset_peaks(ca_device *d, void *ctx) {
    ca_device_lock(d);
    ca_reset_peaks(d->alloc);
    ca_device_unlock(d);
}

CA_EXPORT int cudalloc_empty_cache(void) {
    ca_devices_foreach(release, NULL);
    return 0;
}

CA_EXPORT int cudalloc_reset_peak_stats(void) {
    ca_devices_foreach(reset_peaks, NULL);
    return 0;
}

CA_EXPORT void *cudalloc_torch_malloc(size_t size, int device, void *stream) {
    ca_device *d = ca_device_by_ordinal(device);
    if (!d) {
        CUresult err;
        d = ca_current_device(&err); /* PyTorch makes the device current first */
        if (!d || d->ordinal != device) return NULL;
    }
    CUdeviceptr p = 0;
    if (size && ca_do_malloc_on(d, &p, size, (CUstream)stream, true) != CUDA_SUCCESS) p = 0;
    return (void *)p;
}

/* A pointer that is not cudalloc's is a graph allocation (made by the driver
 * on a capturing stream): the driver frees it. */
CA_EXPORT void cudalloc_torch_free(void *ptr, size_t size, int device, void *stream) {
    if (ptr && ca_do_free((CUdeviceptr)ptr, (CUstream)stream, false) == CUDA_ERROR_NOT_FOUND && ca_drv()->cuMemFreeAsync &&
        ca_drv()->cuMemFreeAsync((CUdeviceptr)ptr, (CUstream)stream) == CUDA_SUCCESS)
        ca_capture_freed((CUdeviceptr)ptr, (CUstream)stream);
}

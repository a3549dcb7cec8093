/* What every entry point shares: allocate on the current device, free on the
 * owning device, and the memory figures with our cache counted as free. */
#include <stdarg.h>
#include <stdio.h>

#include "preload/preload.h"

void ca_warn(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudalloc: %s\n", buf);
}

CUresult ca_do_malloc(CUdeviceptr *dptr, size_t size, CUstream stream) {
    if (!dptr || !size) return CUDA_ERROR_INVALID_VALUE;
    CUresult err;
    ca_device *d = ca_current_device(&err);
    if (!d) return err;
    void *p;
    ca_oom_info oom;
    int rc = ca_malloc(d->alloc, size, ca_stream_key(stream), &p, &oom);
    if (rc == CA_OK) {
        *dptr = (CUdeviceptr)p;
        return CUDA_SUCCESS;
    }
    if (rc == CA_ERR_OOM) {
        ca_report_oom(d, &oom);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_ERROR_UNKNOWN;
}

struct free_args {
    void *ptr;
    ca_stream stream;
    ca_device *freed_on, *contains;
};

static void try_free(ca_device *d, void *ctx) {
    struct free_args *f = ctx;
    if (f->freed_on) return;
    if (ca_free(d->alloc, f->ptr, f->stream) == CA_OK) f->freed_on = d;
    else if (!f->contains && ca_contains(d->alloc, f->ptr)) f->contains = d;
}

CUresult ca_do_free(CUdeviceptr ptr, CUstream stream, bool plain) {
    struct free_args f = {(void *)ptr, ca_stream_key(stream), NULL, NULL};
    const ca_driver *drv = ca_drv();
    if (plain && ca_conf.sync_free && drv) drv->cuCtxSynchronize(); /* cudaFree's own semantics */
    ca_devices_foreach(try_free, &f);
    if (f.freed_on) {
        /* A plain free orders later work on the device after work queued so
         * far, as the legacy default stream orders every blocking stream. */
        if (plain && f.freed_on->barrier) drv->cuEventRecord(f.freed_on->barrier, CU_STREAM_LEGACY);
        return CUDA_SUCCESS;
    }
    if (f.contains) {
        ca_warn("bad free of device pointer %p: not the start of a live allocation (freed already, or inside "
                "a block); ignored", (void *)ptr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult ca_do_mem_info(size_t *free_bytes, size_t *total_bytes) {
    const ca_driver *drv = ca_drv();
    size_t f = 0, t = 0;
    CUresult r = drv->cuMemGetInfo_v2(&f, &t);
    if (r != CUDA_SUCCESS) return r;
    CUresult err;
    ca_device *d = ca_current_device(&err);
    if (d) {
        ca_stats s;
        ca_get_stats(d->alloc, &s);
        f += (size_t)(s.reserved_bytes[CA_POOL_ALL].current - s.allocated_bytes[CA_POOL_ALL].current);
    }
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return CUDA_SUCCESS;
}

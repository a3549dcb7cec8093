/* cudalloc as PyTorch's pluggable allocator
 * (torch.cuda.memory.CUDAPluggableAllocator), following the contract of
 * torch/csrc/cuda/CUDAPluggableAllocator.cpp:
 *   malloc(size, device, stream)   -> cudalloc_torch_malloc: a block in the
 *       stream's order; on out of memory, torch.OutOfMemoryError is raised
 *       (torch_oom.c) rather than NULL stored as a tensor's data;
 *   free(ptr, size, device, stream) -> cudalloc_torch_free: in the order of
 *       the allocation's stream, and of every stream recorded on it;
 *   set_record_stream_fn(void(void*, cudaStream_t)) -> cudalloc_torch_record_stream
 *       (Tensor.record_stream: the block is used on another stream too);
 *   set_reset_fn(void())           -> cudalloc_torch_empty_cache
 *       (torch.cuda.empty_cache());
 *   set_base_alloc_fn(void*(void*, size_t*)) -> cudalloc_torch_base_alloc:
 *       each block is its own base, its size the block's.
 * The other hooks (memory fraction, graph pools) have no counterpart here:
 * README says what to use instead. */
#include <pthread.h>
#include <stdio.h>

#include <uthash.h>

#include "preload/preload.h"
#include "reports/write/fmt.h"

/* Streams a block was recorded on, besides its own. */
typedef struct recorded {
    uintptr_t ptr;
    CUstream stream; /* the first other stream */
    bool several;    /* more than one: the free waits for the whole device */
    UT_hash_handle hh;
} recorded;

static recorded *records;
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;

static ca_device *device_for(int device) {
    ca_device *d = ca_device_by_ordinal(device);
    if (d) return d;
    CUresult err;
    d = ca_current_device(&err); /* PyTorch makes the device current first */
    return d && d->ordinal == device ? d : NULL;
}

/* PyTorch's own message, with cudalloc's figures. */
static void raise_oom(ca_device *d, size_t size, const ca_oom_info *o) {
    char req[32], total[32], dfree[32], alloc[32], resv[32], msg[384];
    ca_fmt_bytes(req, sizeof req, (double)size);
    ca_fmt_bytes(total, sizeof total, (double)o->device_total);
    ca_fmt_bytes(dfree, sizeof dfree, (double)o->device_free);
    ca_fmt_bytes(alloc, sizeof alloc, (double)o->allocated);
    ca_fmt_bytes(resv, sizeof resv, (double)o->reserved);
    snprintf(msg, sizeof msg,
             "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. "
             "Of the allocated memory %s is allocated by cudalloc, and %s is reserved by cudalloc "
             "(its report on stderr says why it failed).",
             req, d->ordinal, total, dfree, alloc, resv);
    ca_torch_raise_oom(msg); /* returns only outside PyTorch */
}

CA_EXPORT void *cudalloc_torch_malloc(size_t size, int device, void *stream) {
    ca_device *d = device_for(device);
    if (!d || !size) return NULL;
    if (ca_capture_any() && ca_stream_capturing((CUstream)stream)) { /* the graph's: the driver's allocation */
        CUdeviceptr g = 0;
        return ca_capture_malloc(d, &g, size, (CUstream)stream) == CUDA_SUCCESS ? (void *)g : NULL;
    }
    void *p = NULL;
    ca_oom_info oom;
    ca_stream key = ca_stream_key((CUstream)stream);
    if (ca_is_ptds_key(key)) ca_ptds_pool_used(d);
    ca_device_use(d);
    bool oom_now = ca_malloc(d->alloc, size, key, &p, &oom) == CA_ERR_OOM;
    if (oom_now) ca_report_oom(d, &oom);
    ca_device_done(d);
    if (oom_now) raise_oom(d, size, &oom); /* nothing held: the exception unwinds through here */
    return p;
}

CA_EXPORT void cudalloc_torch_free(void *ptr, size_t size, int device, void *stream) {
    if (!ptr) return;
    uintptr_t key = (uintptr_t)ptr;
    recorded *r;
    pthread_mutex_lock(&records_lock);
    HASH_FIND(hh, records, &key, sizeof key, r);
    if (r) HASH_DEL(records, r);
    pthread_mutex_unlock(&records_lock);
    if (!r || (!r->several && r->stream == (CUstream)stream)) {
        /* not cudalloc's: a graph allocation (made on a capturing stream), the driver's to free */
        if (ca_do_free((CUdeviceptr)ptr, (CUstream)stream, false) == CUDA_ERROR_NOT_FOUND && ca_drv()->cuMemFreeAsync &&
            ca_drv()->cuMemFreeAsync((CUdeviceptr)ptr, (CUstream)stream) == CUDA_SUCCESS)
            ca_capture_freed((CUdeviceptr)ptr, (CUstream)stream);
        free(r);
        return;
    }
    /* one other stream: the block's stream waits on it before reuse; more:
     * the block waits for a fence of the whole device, as a plain free does */
    if (r->several) ca_do_free((CUdeviceptr)ptr, NULL, true);
    else ca_do_free((CUdeviceptr)ptr, r->stream, false);
    free(r);
}

CA_EXPORT void cudalloc_torch_record_stream(void *ptr, void *stream) {
    uintptr_t key = (uintptr_t)ptr;
    recorded *r;
    pthread_mutex_lock(&records_lock);
    HASH_FIND(hh, records, &key, sizeof key, r);
    if (r && r->stream != (CUstream)stream) r->several = true;
    if (!r && (r = calloc(1, sizeof *r))) {
        r->ptr = key;
        r->stream = (CUstream)stream;
        HASH_ADD(hh, records, ptr, sizeof r->ptr, r);
    }
    pthread_mutex_unlock(&records_lock);
}

static void release(ca_device *d, void *ctx) { ca_release(d->alloc); }

CA_EXPORT void cudalloc_torch_empty_cache(void) { ca_devices_foreach(release, NULL); }

CA_EXPORT void *cudalloc_torch_base_alloc(void *ptr, size_t *size) {
    ca_device *d = ca_owner_used(ptr);
    size_t requested = 0;
    if (!d) return ptr;
    if (ca_owns(d->alloc, ptr, &requested) && size) *size = requested;
    ca_device_done(d);
    return ptr;
}

void ca_torch_after_fork(void) {
    pthread_mutex_init(&records_lock, NULL);
    records = NULL;
}
